"""The scope of one sample stage: what its model calls carry, per sample and per call.

The engine opens a `CallScope` around each sample's solve and score stage (and around
a whole-dataset stage); `call_model` (`chats/call_model.py`) finds it through a context
variable. A scope holds only what belongs to that stage of that sample: its role
(solver or scorer), which sample it is, the ledgers its calls are charged to (the
run's and the sample's), the list its calls are recorded in for the log, the seat it
lends while a call waits, where streamed text goes (`text_sink()`, for the live
viewer), and what its calls have seen (identical calls, counted for the cache and the
reply journal). The run's settings (limits, retries, cache, budget, batch mode, trace)
are not here: they are built once into the run's call stacks (`chats/layers/stacks.py`),
which the scope points to.

This is the one per-sample object that reaches every call and tool: it also carries
what the sample's two stages share, made when the sample starts and gone when it ends:
its limits and what it has used of them (`limits`, a `LimitWatch`: the solve stage's
only, since a limit stops solving and the sample is scored on what it has), its
sandbox (`sandbox`: tools and scorers find it through `current_sandbox()`), its
transcript (`transcript`: the sample's `events`, where tools, sandbox actions and spans
are recorded: `pacing/transcript.py`).

A scope is built by keyword. One without stacks (a test's, or an application's own
scope around a chat) has its calls pass the default layers: the model's own cache,
accounting, retries by the default policy and the send, with nothing shared.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..vocab.model_calls import ModelCall
from .seats import Seat

if TYPE_CHECKING:
    from ..vocab.transcript import TranscriptRecord
    from ..vocab.usage import UsageLedger
    from .sample_limits import LimitWatch

__all__ = ["CallScope", "Stacks", "TextSink", "current_sandbox", "current_scope", "text_sink"]

#: Takes the text of a streamed reply as it arrives: (the attempt it belongs to, new text).
#: Each attempt of a call has its own key (any object), so a retried stream starts afresh.
TextSink = Callable[[object, str], None]


class Stacks(Protocol):
    """A run's call stacks as its scopes carry them (`chats/layers/stacks.py` builds them)."""

    def stack(self, provider: Any) -> Any:
        """The stack of layers the calls of `provider` pass."""
        ...


@dataclass(slots=True, kw_only=True)
class CallScope:
    """What the calls of one sample stage carry (see the module docstring).

    Example:
        >>> with CallScope(role="solver", stacks=run_stacks, ledgers=(ledger,), calls=[]):
        ...     await chat.chat_async("What's 2+2?")   # charged to ledger, recorded in calls
    """

    #: "solver" or "scorer": whose usage the calls are.
    role: str
    #: The run's call stacks (None: the default layers, nothing shared).
    stacks: Stacks | None = None
    #: The ledgers each call is charged to (the run's, then the sample's).
    ledgers: tuple[UsageLedger, ...] = ()
    #: Where each call is recorded for the sample's log (None: not recorded).
    calls: list[ModelCall] | None = None
    #: The (id, epoch) of the sample whose stage this is (None: a whole-dataset stage).
    sample: tuple[int | str, int] | None = None
    #: The stage's seat in its stage, lent while a call waits (None: none).
    seat: Seat | None = None
    #: Where the text of a streamed reply goes as it arrives (None: nowhere).
    on_text: TextSink | None = None
    #: Per cache key, how many identical calls this stage made (made on first use).
    cache_seen: dict[str, int] | None = None
    #: Per call digest, how many identical calls this stage made, as the reply journal
    #: counts them (made on first use; `chats/layers/replies.py`).
    replies_seen: dict[str, int] | None = None
    #: The sample's limits, watched while it solves (None: no limit, or not solving).
    limits: LimitWatch | None = None
    #: The sample's sandbox (None: the task has none).
    sandbox: Any = None
    #: Where the sample's transcript is recorded (its `SampleRecord.events`; None: not).
    transcript: list[TranscriptRecord] | None = None
    #: Told after each record of the transcript (the live viewer's; None: nobody).
    on_record: Callable[[], None] | None = None
    #: Grades an answer with the task's scorer, True when correct (the solve stage's, for
    #: an agent's attempts; None: no scorer to ask).
    grade: Callable[[str], Awaitable[bool]] | None = None

    _token: Token[CallScope | None] | None = None

    def __enter__(self) -> CallScope:
        self._token = _scope.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _scope.reset(self._token)
            self._token = None


_scope: ContextVar[CallScope | None] = ContextVar("vitals_call_scope", default=None)


def current_scope() -> CallScope | None:
    """The call scope of the running sample stage, if any."""
    return _scope.get()


def current_sandbox() -> Any:
    """The sandbox of the sample whose stage is running (None: none)."""
    scope = _scope.get()
    return scope.sandbox if scope is not None else None


def text_sink() -> TextSink | None:
    """Where the running sample stage wants streamed text, if anywhere.

    Example:
        >>> sink = text_sink()
        >>> attempt = object()
        >>> if sink is not None:
        ...     sink(attempt, "Hel")
        ...     sink(attempt, "lo")
    """
    scope = _scope.get()
    return scope.on_text if scope is not None else None

"""The scope of one sample stage: where its model calls are accounted and limited.

The engine opens a `call_scope()` around each sample's solve and score stage;
`call_model` (in `chats/calls.py`) finds it through a context variable. The
scope names the role (solver or scorer), the ledgers to charge (the run's
and the sample's), the run's endpoint limits and retry policy, the list
where the sample's model calls are recorded for its log, and where the text
of a streamed reply goes as it arrives (`text_sink()`, for the live viewer).
It carries the run's call stacks (`stacks`: the layers a call passes, built
once per run in `chats/layers/stacks.py`); a scope made without them gets
stacks built from its own options at its first call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..caching.lookup import CacheUse
from ..vocab.model_calls import ModelCall, RetryNote
from .batch_mode import BatchCalls
from .budget import Budget
from .clock import Clock
from .limits import EndpointLimiter, Limits, LimitsRegistry
from .retry import Retry
from .seats import Seat

if TYPE_CHECKING:
    from ..vocab.usage import UsageLedger

__all__ = ["CallScope", "Stacks", "TextSink", "call_scope", "current_scope", "text_sink"]

#: Takes the text of a streamed reply as it arrives: (the attempt it belongs to, new text).
#: Each attempt of a call has its own key (any object), so a retried stream starts afresh.
TextSink = Callable[[object, str], None]


class Stacks(Protocol):
    """A run's call stacks as its scopes carry them (`chats/layers/stacks.py` builds them)."""

    def stack(self, provider: Any) -> Any:
        """The stack of layers the calls of `provider` pass."""
        ...


@dataclass(slots=True)
class CallScope:
    """Where the calls of one sample stage are accounted and limited."""

    role: str
    ledgers: tuple[UsageLedger, ...] = ()
    calls: list[ModelCall] | None = None
    limits: LimitsRegistry | None = None
    retry: Retry | None = None
    clock: Clock | None = None
    on_retry: Callable[[RetryNote], None] | None = None
    seat: Seat | None = None
    on_text: TextSink | None = None
    #: The run's batch queues (None: every call is live).
    batches: BatchCalls | None = None
    #: The (id, epoch) of the sample whose stage this is (None: a batch stage).
    sample: tuple[int | str, int] | None = None
    #: The run's use of the cache of replies (None: no cache unless a model has its own).
    cache: CacheUse | None = None
    #: Per cache key, how many identical calls this stage made (made on first use).
    cache_seen: dict[str, int] | None = None
    #: The run's budget, told of each model before its first call (None: no budget).
    budget: Budget | None = None
    #: The run's call stacks (None: built from this scope's options at its first call).
    stacks: Stacks | None = None
    #: Per call digest, how many identical calls this stage made, as the reply journal
    #: counts them (made on first use; `chats/layers/replies.py`).
    replies_seen: dict[str, int] | None = None

    _token: Token[CallScope | None] | None = None

    def limiter(self, endpoint: tuple[str, str, str], own: Limits | None) -> EndpointLimiter | None:
        """The run's limiter of `endpoint` (provider, base URL, model), given the model's
        own limits."""
        return self.limits.get(endpoint, own) if self.limits else None

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


@contextmanager
def call_scope(role: str, *ledgers: UsageLedger, **options: object) -> Iterator[CallScope]:
    """Attribute, limit and record every model call made inside (see `CallScope`)."""
    with CallScope(role, ledgers, **options) as scope:  # type: ignore[arg-type]
        yield scope

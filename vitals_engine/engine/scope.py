"""The scope of one sample stage: where its model calls are accounted and limited.

The engine opens a `call_scope()` around each sample's solve and score stage;
`call_model` (in the chat layer) finds it through a context variable. The
scope names the role (solver or scorer), the ledgers to charge (the run's
and the sample's), the run's endpoint limits and retry policy, and the list
where the sample's model calls are recorded for its log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .clock import Clock
from .limits import EndpointLimiter, LimitsRegistry
from .retry import Retry, RetryNote
from .seats import Seat

if TYPE_CHECKING:
    from ..chat.turns import Turn
    from ..chat.usage import UsageLedger
    from ..providers.base import ChatRequest, Provider

__all__ = ["CallScope", "ModelCall", "call_scope", "current_scope"]


@dataclass(slots=True)
class ModelCall:
    """One model call made for a sample: what was asked, what came back, when, retries."""

    role: str
    model_id: str
    request: ChatRequest
    reply: Turn | None
    started: float
    completed: float
    retries: list[RetryNote] = field(default_factory=list)
    error: str | None = None


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

    _token: Token[CallScope | None] | None = None

    def limiter(self, provider: Provider) -> EndpointLimiter | None:
        return self.limits.get(provider.endpoint, provider.limits) if self.limits else None

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


@contextmanager
def call_scope(role: str, *ledgers: UsageLedger, **options: object) -> Iterator[CallScope]:
    """Attribute, limit and record every model call made inside (see `CallScope`)."""
    with CallScope(role, ledgers, **options) as scope:  # type: ignore[arg-type]
        yield scope

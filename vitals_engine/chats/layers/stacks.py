"""Where a run's call stacks are built: from its options, once, in the order a call meets
its layers.

A run makes one `CallStacks` (`engine/run.py`, when its batch queues exist) and hands it
to every call scope; `call_model` asks it for the stack of the call's model. Most models
share the run's one stack; a model with its own `cache=`, `batch=` or cost cap
(`chat_*(cost_budget=)`) gets a stack of its own, built at its first call and kept for the
run.
A feature the run (or model) does not use has no layer: no cache, no cache layer; no
cap, no budget layer; no batch mode, no batch queue; no journal (a run without a log,
a scope of its own), no reply journal; a call pays nothing for it.

A call outside any scope gets the stacks of `outside` (the cache, if the model has one
of its own, accounting without a scope, retries, the send); a call in a scope made
without stacks, those of `default` (the same, and the scope's seat counted).

A traced run (`tracing/`: the application configured OpenTelemetry) has the tracing
layer on top of every stack, so that a cache hit is a span too; a run that is not has
none.

A new call-level capability is one new module in this package and one line in
`CallStacks.layers`, where it meets calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ...caching.lookup import CacheUse
from ...pacing.batch_mode import BatchCalls
from ...pacing.budget import Budget
from ...pacing.clock import Clock, SystemClock
from ...pacing.limits import LimitsRegistry
from ...pacing.retry import Retry
from ...providers.base import Provider
from ...vocab.model_calls import RetryNote
from .accounting import Accounting
from .batches import BatchQueue, ResumedBatches
from .budget import BudgetCheck, watches
from .cache import ReplyCache, caches
from .call import Layer, Send, Stack
from .limits import EndpointLimits
from .replies import Replies, ReplyJournal
from .retries import Retries
from .sample_limits import SampleLimitCheck
from .seats import SeatCount
from .send import ProviderSend
from .traced import Traced

if TYPE_CHECKING:
    from ...tracing.spans import RunTrace

__all__ = ["CallStacks"]

_SYSTEM_CLOCK = SystemClock()


class CallStacks:
    """The call stacks of one run (or scope), built from its options.

    Args:
        retry: the run's retry policy (a model's own wins, call by call).
        clock: what the retries wait on.
        scoped: whether calls are made in a call scope (False: outside any run; no seat
            is counted and nothing is recorded).
        cache: the run's use of the reply cache (None: only models with their own).
        budget: the run's budget (None: none).
        batches: the run's batch queues (None: every call is live).
        limits: the run's endpoint limits (None: none).
        replies: the run's journaled replies (None: no journal, nothing to answer from).
        trace: the run's trace (None: the run is not traced).
        on_retry: told of each retry (the run's count of them; None: nobody).
        sample_limits: whether the run's samples solve under limits (messages, tokens,
            dollars: a layer counts each solver call against them).

    Example:
        >>> stacks = CallStacks(retry=Retry(), clock=SystemClock(), limits=registry)
        >>> stacks.stack(provider).names()
        ['Accounting', 'SeatCount', 'Retries', 'EndpointLimits', 'ProviderSend']
    """

    __slots__ = (
        "_own",
        "_plain",
        "batches",
        "budget",
        "cache",
        "clock",
        "limits",
        "on_retry",
        "replies",
        "retry",
        "sample_limits",
        "scoped",
        "trace",
    )

    def __init__(
        self,
        *,
        retry: Retry,
        clock: Clock,
        scoped: bool = True,
        cache: CacheUse | None = None,
        budget: Budget | None = None,
        batches: BatchCalls | None = None,
        limits: LimitsRegistry | None = None,
        replies: Replies | None = None,
        trace: RunTrace | None = None,
        on_retry: Callable[[RetryNote], None] | None = None,
        sample_limits: bool = False,
    ) -> None:
        self.retry = retry
        self.clock = clock
        self.scoped = scoped
        self.cache = cache
        self.budget = budget
        self.batches = batches
        self.limits = limits
        self.replies = replies
        self.trace = trace
        self.on_retry = on_retry
        self.sample_limits = sample_limits
        #: The stack of models that leave cache and batches to the run (made at first use).
        self._plain: Stack | None = None
        #: The stacks of models with their own `cache=`, `batch=` or cost cap, by those.
        self._own: dict[tuple[object, object, bool], Stack] = {}

    @classmethod
    def outside(cls, retry: Retry) -> CallStacks:
        """The stacks of calls made outside any scope."""
        return cls(retry=retry, clock=_SYSTEM_CLOCK, scoped=False)

    @classmethod
    def default(cls, retry: Retry) -> CallStacks:
        """The stacks of calls in a scope made without stacks of a run's."""
        return cls(retry=retry, clock=_SYSTEM_CLOCK)

    def stack(self, provider: Provider) -> Stack:
        """The stack `provider`'s calls pass (built at its first call)."""
        own_cache, own_batch = provider.cache, provider.batch
        capped = provider.cost_budget is not None
        if own_cache is None and own_batch is None and not capped:
            stack = self._plain
            if stack is None:
                stack = self._plain = Stack(*self.layers(provider))
            return stack
        key = (own_cache, own_batch, capped)
        stack = self._own.get(key)
        if stack is None:
            stack = self._own[key] = Stack(*self.layers(provider))
        return stack

    def layers(self, provider: Provider) -> tuple[list[Layer], Send]:
        """The layers `provider`'s calls pass, in the order they meet them, and the bottom
        of the stack. What it reads of `provider`: its own `cache=`, `batch=` and cost cap
        (`cost_budget`), what `stack()` keys stacks by."""
        accounting = Accounting()
        batches = self.batches
        batched = batches is not None and batches.takes(provider)
        layers: list[Layer] = []
        if self.trace is not None:
            layers.append(Traced(self.trace))
        if self.sample_limits:
            layers.append(SampleLimitCheck())
        if caches(self.cache, provider.cache):
            layers.append(ReplyCache(self.cache, accounting.from_cache))
        layers.append(accounting)
        if self.replies is not None:
            layers.append(ReplyJournal(self.replies))
        if self.budget is not None and watches(self.budget, provider.cost_budget):
            layers.append(BudgetCheck(self.budget, batched=batched))
        if batches is not None and not batched and batches.resumed:
            layers.append(ResumedBatches(batches))
        if self.scoped:
            layers.append(SeatCount())
        layers.append(
            Retries(self.retry, self.clock, accounting.failed, accounting.lost, self.on_retry)
        )
        if batches is not None and batched:
            return layers, BatchQueue(batches)
        if self.limits is not None:
            layers.append(EndpointLimits(self.limits))
        return layers, ProviderSend()

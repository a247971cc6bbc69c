"""A run's budget: what it may spend, and whether the next sample could pass it.

`eval(max_cost=, max_tokens=)` caps the run; `Limits(max_cost=)` caps one model (a
model's own, or every model's through `eval(limits=)`). Before a sample starts, each
cap projects the spending: what is spent, plus what the samples at work will still
spend, plus one more sample, at the average cost of the finished samples that sent a
call. When that passes the cap, no more samples start; those at work finish. Before
any such sample has finished, a sample is guessed from its prompt's tokens at the
model's price, and only a few start until one finishes.

Calls answered by the cache cost nothing and count for nothing: a sample the cache
answered wholly says nothing of what the next one, sent, will cost. A cost cap needs the
price of every model it watches: a model without one is a `ConfigError` at its
first call, before any request.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol

from .._errors import ConfigError
from ..vocab.pricing import find_price
from ..vocab.usage import UsageLedger
from .limits import Limits

__all__ = ["WARMUP", "AtWork", "Budget"]

#: Samples at work at once before any has finished, when the run has a budget.
WARMUP = 4


class AtWork(Protocol):
    """A sample at work, as the budget sees it: what it has spent so far."""

    @property
    def usage(self) -> UsageLedger: ...


@dataclass(slots=True)
class _Cap:
    """One limit: the run's dollars or tokens, or one model's dollars."""

    limit: float
    tokens: bool = False
    provider: str | None = None
    model: str | None = None

    def measure(self, ledger: UsageLedger) -> float:
        if self.provider is None:
            cost, tokens = ledger.spent()
            return float(tokens) if self.tokens else cost or 0.0
        spent = 0.0
        for (_, provider, model, _, cached), row in ledger.rows.items():
            if not cached and provider == self.provider and model == self.model:
                spent += row.cost or 0.0
        return spent

    def describe(self, spent: float) -> str:
        if self.tokens:
            return f"token budget reached: {spent:,.0f} of {self.limit:,.0f} tokens"
        whose = "" if self.provider is None else f" of {self.provider.lower()}/{self.model}"
        return f"budget{whose} reached: {_dollars(spent, self.limit)} of {_dollars(self.limit)}"


def _dollars(amount: float, scale: float | None = None) -> str:
    """$5.00, or more digits for budgets under a dollar ($0.0123)."""
    if (scale if scale is not None else amount) >= 1:
        return f"${amount:,.2f}"
    return f"${amount:.4f}"


class Budget:
    """The caps of one run and the check made before each sample starts.

    Example:
        >>> budget = Budget(max_cost=5.0, first_guess=(0.01, 900))
        >>> budget.admits(run_ledger, 10, records_in_flight, paid=10)
        True
    """

    def __init__(
        self,
        max_cost: float | None = None,
        max_tokens: float | None = None,
        *,
        model_default: float | None = None,
        first_guess: tuple[float, float] = (0.0, 0.0),
        warmup: int = WARMUP,
    ) -> None:
        self.caps: list[_Cap] = []
        if max_cost is not None:
            self.caps.append(_Cap(max_cost))
        if max_tokens is not None:
            self.caps.append(_Cap(max_tokens, tokens=True))
        #: Every model's own cap when it has none (`eval(limits=Limits(max_cost=))`).
        self.model_default = model_default
        #: One sample's dollars and tokens before any has finished (from its prompt).
        self.first_guess = first_guess
        self.warmup = warmup
        #: The cap that stopped the run (None: none did).
        self.reached: _Cap | None = None
        self._seen: set[tuple[str, str]] = set()

    @property
    def active(self) -> bool:
        """Whether there is any cap to watch (or one may come with a model)."""
        return bool(self.caps) or self.model_default is not None

    def on_call(self, provider: str, model: str, own: Limits | None) -> None:
        """Before a model's first call in the run: take up its cap, and refuse a model
        of unknown price when a dollar cap watches it."""
        if (provider, model) in self._seen:
            return
        limit = (own.max_cost if own is not None else None) or self.model_default
        priced = limit is not None or any(c.provider is None and not c.tokens for c in self.caps)
        if priced and find_price(provider, model) is None:
            raise ConfigError(
                f"{provider.lower()}/{model} has no known price, so a budget in dollars cannot "
                f"count its calls. Give it one: ve.set_price('{provider}', '{model}', "
                "input=..., output=...) (dollars per million tokens), or budget in tokens "
                "(max_tokens=)."
            )
        self._seen.add((provider, model))
        if limit is not None:
            self.caps.append(_Cap(limit, provider=provider, model=model))

    def warming(self, paid: int, at_work: int) -> bool:
        """Whether the next sample must wait for one to finish: nothing is known yet of
        what a sample costs (no finished sample sent a call), and a few are at work."""
        return paid == 0 and at_work >= self.warmup and bool(self.caps)

    def admits(
        self,
        ledger: UsageLedger,
        finished: int,
        at_work: Collection[AtWork],
        paid: int | None = None,
    ) -> bool:
        """Whether one more sample may start without any cap being passed, by projection.
        `paid`: how many of the `finished` samples sent a call (default: all); a sample
        the cache answered wholly says nothing of what a sent one costs."""
        paid = finished if paid is None else paid
        for cap in self.caps:
            spent = cap.measure(ledger)
            if finished and not paid:
                # All answered by the cache so far: they say nothing of a sent sample. One
                # at work that sent a call says the next may cost as much (the warm-up holds
                # the run to a few at work until a sent one finishes).
                ahead = max((cap.measure(sample.usage) for sample in at_work), default=0.0)
            elif paid:
                if spent + spent / paid * (len(at_work) + 1) <= cap.limit:
                    continue  # a bound above the projection is within the cap: no need to sum
                partial = [cap.measure(sample.usage) for sample in at_work]
                per_sample = max(0.0, spent - sum(partial)) / paid
                ahead = sum(max(0.0, per_sample - part) for part in partial) + per_sample
            else:
                per_sample = self._guess(cap)
                ahead = per_sample * (len(at_work) + 1)
            if spent + ahead > cap.limit:
                self.reached = cap
                return False
        return True

    def _guess(self, cap: _Cap) -> float:
        if cap.provider is not None:
            return 0.0  # a model's share is not guessed: the few samples of the warm-up
        return self.first_guess[1] if cap.tokens else self.first_guess[0]

    def reason(self, ledger: UsageLedger) -> str | None:
        """What stopped the run, with what was spent against it (None: it was not)."""
        if self.reached is None:
            return None
        return self.reached.describe(self.reached.measure(ledger))

    def spent(self, ledger: UsageLedger) -> float | None:
        """What was spent against the cap that stopped the run."""
        return None if self.reached is None else self.reached.measure(ledger)

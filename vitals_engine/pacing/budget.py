"""A run's budget: what it may spend, and the checks that hold it there.

`eval(cost_budget=, token_budget=)` caps the run; `chat_*(cost_budget=)` caps one model
(every model of the run: `eval(model_cost_budget=)`).

Each model call holds room in every cap that watches it, from before it is sent until
its reply settles it (`hold()`, from the budget layer of the call, `chats/layers/
budget.py`): its claim is its prompt's tokens as guessed from the request (about 4
characters a token) and an output allowance (the request's `max_tokens`, else the most
output tokens a reply of that model has had so far in the run), at the model's prices
(its batch price for a call that goes in a batch). A call goes only when what is spent,
what the calls under way hold and its own claim fit under every cap that watches it;
else it waits for a call under way to settle (its real cost then replaces its hold).
When none that holds room in that cap is under way, none can free any: the call is
refused with `BudgetExceeded`, the cap is reached, and the run starts no more samples.
A model's first call without `max_tokens` goes alone: until one of its replies is seen,
nothing is known of its output; a reply dearer than any before raises what the model's
calls under way without `max_tokens` hold. An attempt that timed out is charged at once (its
estimated input, by the accounting) and the call takes its room anew before the next.

Invariant: whenever a call is let go, spent + held + its claim <= the cap. Spent is the
run's ledger, which the accounting (above the budget layer) charges in the same step
as the call's hold is given back, with no checkpoint between: no waiting call ever sees
room that is neither spent nor held. So a run passes a cap only by what its calls under
way spend beyond their claims: a prompt longer than its guess, or, without `max_tokens`,
a reply longer than any that model gave before in the run.

Before a sample starts, each cap also projects the spending: what is spent, plus what
the samples at work will still spend, plus one more sample, at the average cost of the
finished samples that sent a call. When that passes the cap, no more samples start;
those at work finish as far as their calls fit. Before any such sample has finished, a
sample is guessed from its prompt's tokens at the model's price, and only a few start
until one finishes. The projection decides when to stop starting samples (so that few
are left half done); the holds are what keep the run within its budget.

Calls answered by the cache cost nothing and count for nothing: a sample the cache
answered wholly says nothing of what the next one, sent, will cost. A cost cap needs the
price of every model it watches: a model without one is a `ConfigError` at its
first call, before any request.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

import anyio

from .._errors import BudgetExceeded, ConfigError
from ..pricing.cost import cost_of
from ..pricing.table import find_price
from ..vocab.turns import TokenUsage
from ..vocab.usage import UsageLedger

__all__ = ["WARMUP", "AtWork", "Budget", "Hold", "check_budget"]

#: A model: (provider, model).
_Model = tuple[str, str]

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
    #: What the calls under way hold of it, and how many of them hold some.
    held: float = 0.0
    holders: int = 0

    def watches(self, provider: str, model: str) -> bool:
        """Whether the calls of `model` on `provider` spend against this cap."""
        return self.provider is None or (self.provider == provider and self.model == model)

    def take(self, amount: float) -> None:
        self.held += amount
        self.holders += 1

    def give_back(self, amount: float) -> None:
        self.holders -= 1
        self.held = self.held - amount if self.holders else 0.0  # no float dust left over

    def measure(self, ledger: UsageLedger) -> float:
        if self.provider is None:
            cost, tokens = ledger.spent()
            return float(tokens) if self.tokens else cost or 0.0
        spent = 0.0
        for (_, provider, model, _, cached), row in ledger.rows.items():
            if not cached and provider == self.provider and model == self.model:
                spent += row.cost or 0.0
        return spent

    def cost(self, amount: float) -> str:
        """`amount` of this cap said as what a call could cost ("cost up to $0.0021")."""
        if self.tokens:
            return f"use up to {amount:,.0f} tokens"
        return f"cost up to {_dollars(amount)}"

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


def check_budget(value: Any, name: str, who: str = "eval") -> Any:
    """A budget as given to `who`, checked: a number of dollars above 0 (`cost_budget`,
    `model_cost_budget`) or a whole number of tokens above 0 (`token_budget`); None for
    none.

    Example:
        >>> check_budget(5, "cost_budget")
        5.0
    """
    if value is None:
        return None
    whole = name == "token_budget"
    kind = int if whole else int | float
    if isinstance(value, bool) or not isinstance(value, kind) or not 0 < value < math.inf:
        what = "a whole number of tokens" if whole else "a number of dollars"
        raise ConfigError(f"{who}({name}=...) must be {what} above 0, not {value!r}.")
    return value if whole else float(value)


class Budget:
    """The caps of one run and the check made before each sample starts.

    Example:
        >>> budget = Budget(cost=5.0, first_guess=(0.01, 900))
        >>> budget.admits(run_ledger, 10, records_in_flight, paid=10)
        True
    """

    def __init__(
        self,
        cost: float | None = None,
        tokens: float | None = None,
        *,
        model_default: float | None = None,
        first_guess: tuple[float, float] = (0.0, 0.0),
        warmup: int = WARMUP,
    ) -> None:
        self.caps: list[_Cap] = []
        if cost is not None:
            self.caps.append(_Cap(cost))
        if tokens is not None:
            self.caps.append(_Cap(tokens, tokens=True))
        #: Every model's own cap when it has none (`eval(model_cost_budget=)`).
        self.model_default = model_default
        #: One sample's dollars and tokens before any has finished (from its prompt).
        self.first_guess = first_guess
        self.warmup = warmup
        #: The cap that stopped the run (None: none did).
        self.reached: _Cap | None = None
        self._seen: set[tuple[str, str]] = set()
        #: What the caps measure: the run's usage ledger (the run gives its own).
        self.ledger = UsageLedger()
        #: The most output tokens a reply of each model has had in the run.
        self.outputs: dict[_Model, int] = {}
        #: Models whose first call is under way with nothing known of their output.
        self._probing: set[_Model] = set()
        #: The calls under way without `max_tokens`, by model: what they hold for their
        #: output grows when a reply of their model is dearer than any before.
        self._guessed: dict[_Model, set[Hold]] = {}
        self._room: anyio.Event | None = None
        #: Calls waiting for room now.
        self.waiting = 0
        #: Called when a call starts to wait for room (the run nudges its batch queues:
        #: a call that waits here will not join a batch soon).
        self.on_wait: Callable[[], object] | None = None
        #: What the refused call would have held of the reached cap (None: none was).
        self.refused: float | None = None

    @property
    def active(self) -> bool:
        """Whether there is any cap to watch (or one may come with a model)."""
        return bool(self.caps) or self.model_default is not None

    def on_call(self, provider: str, model: str, own: float | None) -> None:
        """Before a model's first call in the run: take up its cap (`own`: the model's
        `cost_budget`), and refuse a model of unknown price when a dollar cap watches it."""
        if (provider, model) in self._seen:
            return
        limit = own or self.model_default
        priced = limit is not None or any(c.provider is None and not c.tokens for c in self.caps)
        if priced and find_price(provider, model) is None:
            raise ConfigError(
                f"{provider.lower()}/{model} has no known price, so a budget in dollars cannot "
                f"count its calls. Give it one: ve.set_price('{provider}', '{model}', "
                "input=..., output=...) (dollars per million tokens), or budget in tokens "
                "(token_budget=)."
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
        if self.refused is not None:
            return False  # a call was refused: the run starts no more samples
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
        said = self.reached.describe(self.reached.measure(ledger))
        if self.refused is not None:
            said += f"; the next call could {self.reached.cost(self.refused)}, more than is left"
        return said

    def spent(self, ledger: UsageLedger) -> float | None:
        """What was spent against the cap that stopped the run."""
        return None if self.reached is None else self.reached.measure(ledger)

    # -- the calls ---------------------------------------------------------------------

    async def hold(
        self, provider: str, model: str, prompt: int, output: int | None, *, batch: bool = False
    ) -> Hold | None:
        """Room for one call of `model` on `provider`, whose request sends about `prompt`
        tokens and lets the reply have `output` (None: no limit set), sent in a batch if
        `batch`: taken once it fits, waiting for calls under way meanwhile. None: no cap
        watches the call. Raises `BudgetExceeded` when it cannot fit and nothing under
        way can free room."""
        caps = [cap for cap in self.caps if cap.watches(provider, model)]
        if not caps:
            return None
        hold = Hold(self, (provider, model), caps, prompt, output, batch)
        await hold.take()
        return hold

    async def _wait(self) -> None:
        """Until a call under way gives back its room."""
        room = self._room
        if room is None:
            room = self._room = anyio.Event()
        self.waiting += 1
        if self.on_wait is not None:
            self.on_wait()
        try:
            await room.wait()
        finally:
            self.waiting -= 1

    def _wake(self) -> None:
        room = self._room
        if room is not None:
            self._room = None
            room.set()

    def _refuse(self, cap: _Cap, amount: float) -> NoReturn:
        """A call that does not fit in `cap`, with nothing under way there: the cap is
        reached, and the call is not sent."""
        if self.reached is None:
            self.reached, self.refused = cap, amount
        spent = cap.measure(self.ledger)
        reason = cap.describe(spent)
        raise BudgetExceeded(
            f"{reason}; this call could {cap.cost(amount)}, more than is left: it was not sent",
            reason=reason,
            spent=spent,
        )


class Hold:
    """The room one model call holds in the caps that watch it, from before it is sent
    until it settles (`Budget.hold()` makes it).

    Example:
        >>> hold = await budget.hold("OpenAI", "gpt-4.1", prompt=900, output=None)
        >>> turn = ...  # the call
        >>> hold.settle(turn.tokens)
    """

    __slots__ = ("_amounts", "_probe", "batch", "budget", "caps", "model", "output", "prompt")

    def __init__(
        self,
        budget: Budget,
        model: _Model,
        caps: list[_Cap],
        prompt: int,
        output: int | None,
        batch: bool,
    ) -> None:
        self.budget = budget
        self.model = model
        self.caps = caps
        self.prompt = prompt
        self.output = output
        self.batch = batch
        #: What it holds of each of `caps` (None: nothing now).
        self._amounts: list[float] | None = None
        self._probe = False

    def _claim(self) -> list[float] | None:
        """What the call would hold of each cap; None while its model's first call is
        under way and nothing is known of its output."""
        budget = self.budget
        output = self.output
        if output is None:
            output = budget.outputs.get(self.model)
            if output is None:
                if self.model in budget._probing:
                    return None
                output = 0  # this call goes alone, and tells what the model's replies cost
        dollars: float | None = None
        amounts: list[float] = []
        for cap in self.caps:
            if cap.tokens:
                amounts.append(float(self.prompt + output))
            else:
                if dollars is None:
                    dollars = _priced(self.model, self.prompt, output, self.batch)
                amounts.append(dollars)
        return amounts

    async def take(self) -> None:
        """Take the call's room once it fits (see `Budget.hold`)."""
        budget = self.budget
        while True:
            amounts = self._claim()
            if amounts is not None:
                short = _short(self.caps, amounts, budget.ledger)
                if short is None:
                    for cap, amount in zip(self.caps, amounts, strict=True):
                        cap.take(amount)
                    self._amounts = amounts
                    if self.output is None:
                        budget._guessed.setdefault(self.model, set()).add(self)
                        if self.model not in budget.outputs:
                            self._probe = True
                            budget._probing.add(self.model)
                    return
                cap, amount = short
                if not cap.holders:
                    budget._refuse(cap, amount)
            await budget._wait()

    async def again(self) -> None:
        """Before an attempt that follows one that timed out (charged by now): the call's
        room given back and taken anew, as for a new call."""
        self._release()
        await self.take()

    def settle(self, tokens: TokenUsage | None = None) -> None:
        """The call is over: its room given back (its reply's `tokens`, when it had one,
        are charged by now). A reply dearer than any of its model before raises what the
        model's other calls under way without `max_tokens` hold."""
        self._release()
        if tokens is None:
            return
        budget, model = self.budget, self.model
        known = budget.outputs.get(model)
        if known is None or tokens.output > known:
            budget.outputs[model] = tokens.output
            for other in budget._guessed.get(model, ()):
                other._reprice()

    def _reprice(self) -> None:
        """Hold what the call's claim is now (its model's replies are dearer than it held)."""
        amounts, claim = self._amounts, self._claim()
        if amounts is None or claim is None:
            return
        for cap, old, new in zip(self.caps, amounts, claim, strict=True):
            cap.held += new - old
        self._amounts = claim

    def _release(self) -> None:
        amounts = self._amounts
        if amounts is None:
            return
        self._amounts = None
        for cap, amount in zip(self.caps, amounts, strict=True):
            cap.give_back(amount)
        budget = self.budget
        if self.output is None:
            budget._guessed[self.model].discard(self)
        if self._probe:
            self._probe = False
            budget._probing.discard(self.model)
        budget._wake()


def _short(
    caps: list[_Cap], amounts: list[float], ledger: UsageLedger
) -> tuple[_Cap, float] | None:
    """The first cap in which `amounts` do not fit beside what is spent and held, with the
    amount (None: they fit in every one)."""
    for cap, amount in zip(caps, amounts, strict=True):
        if cap.measure(ledger) + cap.held + amount > cap.limit:
            return cap, amount
    return None


def _priced(model: _Model, prompt: int, output: int, batch: bool) -> float:
    """Dollars of `prompt` input and `output` output tokens of `model` (at its batch price
    when `batch` and it has one; 0 when it has no price, which no dollar cap lets by)."""
    tokens = TokenUsage(input=prompt, output=output)
    cost = cost_of(*model, tokens, batch=batch)
    if cost is None and batch:
        cost = cost_of(*model, tokens)
    return cost or 0.0

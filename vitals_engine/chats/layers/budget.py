"""The run's budget (`eval(cost_budget=, token_budget=)`, `chat_*(cost_budget=)`), checked before
each call goes out.

The budget is told of the call's model first: it takes up the model's own cap and
refuses, with a `ConfigError` before any request, a model of unknown price that a
dollar cap watches. Then the call holds room in every cap that watches it (its prompt's
tokens as guessed from the request, `Call.guess`, and its reply's cap or else the most output the
model's replies have had in the run, at the model's price: `pacing/budget.py`), waiting
while it does not fit and calls under way may free room, refused with `BudgetExceeded`
(not sent) when none can. The room is given back when the call is over; the accounting
above charges what it really cost in the same step. After an attempt that timed out
(charged at once by the accounting), the call takes its room anew before the next
(`call.again`, which the retries await).

Whether a new sample may start is the run's question (`pacing/budget.py`), not a
call's. A run without a cap has no such layer, but for the models with a cost cap of
their own (`chat_*(cost_budget=)`).
"""

from __future__ import annotations

from ...pacing.budget import Budget
from ...vocab.turns import Turn
from .call import Call, Send

__all__ = ["BudgetCheck", "watches"]


def watches(budget: Budget, own: float | None) -> bool:
    """Whether `budget` has anything to do at the calls of a model with its own
    `cost_budget` `own`: a cap of the run's (or every model's), or one of the model's own.
    (A budget without either only notes that it saw the model.)"""
    return budget.active or own is not None


class BudgetCheck:
    """Tell the run's budget of the call's model, hold the call's room in it while the call
    is under way (`batched`: the stack's calls go in provider batches, at their price)."""

    __slots__ = ("batched", "budget")

    def __init__(self, budget: Budget, *, batched: bool = False) -> None:
        self.budget = budget
        self.batched = batched

    async def __call__(self, call: Call, send: Send) -> Turn:
        provider, budget = call.provider, self.budget
        name, model = provider.name, provider.price_model()
        budget.on_call(name, model, provider.cost_budget)
        guess = call.guess
        hold = await budget.hold(name, model, guess.prompt, guess.output_cap, batch=self.batched)
        if hold is None:  # no cap watches this model
            return await send(call)
        call.again = hold.again
        try:
            turn = await send(call)
        except BaseException:
            hold.settle()
            raise
        hold.settle(turn.tokens)
        return turn

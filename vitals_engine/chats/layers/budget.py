"""The run's budget (`eval(max_cost=, max_tokens=)`, `Limits(max_cost=)`), told of each
model before its first call goes out.

The budget takes up the model's own cap and refuses, with a `ConfigError` before any
request, a model of unknown price that a dollar cap watches. Whether a new sample may
start is the run's question (`pacing/budget.py`), not a call's. A run without a cap
has no such layer, but for the models with a cost cap of their own (`Limits(max_cost=)`).
"""

from __future__ import annotations

from ...pacing.budget import Budget
from ...pacing.limits import Limits
from ...vocab.turns import Turn
from .call import Call, Send

__all__ = ["BudgetCheck", "watches"]


def watches(budget: Budget, own: Limits | None) -> bool:
    """Whether `budget` has anything to do at the calls of a model with its own `limits=`
    `own`: a cap of the run's (or every model's), or one of the model's own. (A budget
    without either only notes that it saw the model.)"""
    return budget.active or (own is not None and own.max_cost is not None)


class BudgetCheck:
    """Tell the run's budget of the call's model, then send the call on."""

    __slots__ = ("budget",)

    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    async def __call__(self, call: Call, send: Send) -> Turn:
        provider = call.provider
        self.budget.on_call(provider.name, provider.model, provider.limits)
        return await send(call)

"""What a run may spend: its budget, made from eval()'s options and the chats it will
use, and the error that ends a run that reached it.

The chats a run is known to use before it starts are the ones passed to it
(`eval(solver_chat=...)`) and, unless replaced, those a built-in solver or judge
holds. Each is told to the budget up front, so a model of unknown price under a
budget in dollars is refused before any request; a chat hidden in a function of the
user's is told at its first call.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .._errors import BudgetExceeded
from ..chats.chat import Chat
from ..engine.options import RunOptions
from ..pacing.budget import Budget
from ..pricing.table import find_price
from ..samples import Sample
from .state import RunState

__all__ = ["budget_error", "known_chats", "make_budget"]

#: Rows read for the prompt of a typical sample, before any sample has run.
_GUESS_ROWS = 200


def known_chats(fn: Any, routed: dict[str, Any], slot: str) -> list[Chat]:
    """The chats a solver or scorer will use, as far as can be known before it runs:
    those routed to it, and the one it holds in `slot` unless routed."""
    chats = [v for v in routed.values() if isinstance(v, Chat)]
    if slot not in routed:
        own = getattr(fn, slot, None)
        if isinstance(own, Chat):
            chats.append(own)
        if slot == "scorer_chat":  # a judge panel's chats
            chats.extend(c for c in getattr(fn, "judges", None) or [] if isinstance(c, Chat))
    return chats


def make_budget(options: RunOptions, rows: Sequence[Sample], chats: Iterable[Chat]) -> Budget:
    """The run's budget, each known chat told to it (a `ConfigError` for a model of
    unknown price under a budget in dollars)."""
    chats = list(chats)
    budget = Budget(
        options.cost_budget,
        options.token_budget,
        model_default=options.model_cost_budget,
        first_guess=_first_guess(rows, chats),
    )
    for chat in chats:
        provider = chat.provider
        budget.on_call(provider.name, provider.price_model(), provider.cost_budget)
    return budget


def _first_guess(rows: Sequence[Sample], chats: Sequence[Chat]) -> tuple[float, float]:
    """One sample's dollars and tokens before any has run: its prompt's tokens (about
    4 characters each) sent once to each known chat, at the chat's input price."""
    head = rows[:_GUESS_ROWS]
    if not head or not chats:
        return 0.0, 0.0
    tokens = sum(len(str(row.input)) for row in head) / len(head) / 4
    dollars = 0.0
    for chat in chats:
        price = find_price(chat.provider.name, chat.provider.price_model())
        if price is not None:
            dollars += tokens * price.input / 1e6
    return dollars, tokens * len(chats)


def budget_error(state: RunState) -> BudgetExceeded | None:
    """The error of a run its budget stopped (None: it was not stopped so)."""
    if state.budget_reason is None:
        return None
    return BudgetExceeded(
        f"{state.budget_reason}. No more samples were started and no call was sent that "
        "could pass it; the samples at work finished as far as their calls fit (the others "
        f"are not logged), and the log was written with status 'cancelled': {state.log_path}. "
        "Continue it with eval(resume=True), which has a budget of its own.",
        reason=state.budget_reason,
        spent=state.budget_spent,
        log_path=str(state.log_path) if state.log_path else None,
    )

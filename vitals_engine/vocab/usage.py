"""Token and cost accounting that belongs to a run, not to the process.

A `UsageLedger` sums every model call per (role, provider, model, batch, cached):
calls sent in a provider's batch (batch mode) are kept apart from live ones, and
calls answered from the cache (at cost 0) from both. An attempt that timed out after
its request went out is charged too (a provider bills what it processed, whether or not
the client waited for the answer): its input tokens, estimated from the request, and
their price, counted in the row's `timed_out` and not in its `requests` (the replies).
The engine
opens a call scope (`pacing/scope.py`) around each sample's solve and score
stage; every completed call is recorded into the ledgers of the scope it
runs in (the run's and the sample's). Outside any scope (a chat used on its
own) nothing is recorded globally: the chat's own turns carry their tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .turns import TokenUsage

if TYPE_CHECKING:
    import polars as pl

__all__ = ["UsageLedger", "UsageRow", "cost_schema"]


def cost_schema() -> dict[str, type[pl.DataType]]:
    """The columns of a cost table (`Task.get_cost()`, `LoggedEval.get_cost()`)."""
    import polars as pl

    return {
        "role": pl.String,
        "provider": pl.String,
        "model": pl.String,
        "batch": pl.Boolean,
        "cached": pl.Boolean,
        "requests": pl.Int64,
        "timed_out": pl.Int64,
        "input_tokens": pl.Int64,
        "cached_input_tokens": pl.Int64,
        "cache_write_tokens": pl.Int64,
        "output_tokens": pl.Int64,
        "reasoning_tokens": pl.Int64,
        "cost": pl.Float64,
    }


@dataclass(slots=True)
class UsageRow:
    """Running totals for one (role, provider, model, batch, cached): `requests` counts
    the replies, `timed_out` the attempts that timed out after their request went out
    (their estimated input is in `tokens` and `cost`)."""

    requests: int = 0
    tokens: TokenUsage = field(default_factory=TokenUsage)
    cost: float | None = 0.0
    timed_out: int = 0

    def add(self, tokens: TokenUsage, cost: float | None, timed_out: bool = False) -> None:
        if timed_out:
            self.timed_out += 1
        else:
            self.requests += 1
        self.tokens = self.tokens + tokens
        # One call of unknown price makes the total unknown: never report a partial sum.
        self.cost = None if cost is None or self.cost is None else self.cost + cost

    def less(self, other: UsageRow) -> UsageRow:
        """What this row has beyond `other` (a part of it)."""
        tokens = self.tokens - other.tokens
        cost = None if self.cost is None or other.cost is None else self.cost - other.cost
        return UsageRow(
            self.requests - other.requests, tokens, cost, self.timed_out - other.timed_out
        )

    def absorb(self, other: UsageRow) -> None:
        self.requests += other.requests
        self.timed_out += other.timed_out
        self.tokens = self.tokens + other.tokens
        self.cost = None if other.cost is None or self.cost is None else self.cost + other.cost


#: (role, provider, model, batch, cached): batch says the calls went in a provider's
#: batch, cached that the cache answered them.
UsageKey = tuple[str, str, str, bool, bool]


class UsageLedger:
    """Requests, tokens and cost per (role, provider, model, batch, cached).

    Example:
        >>> ledger = UsageLedger()
        >>> ledger.record("solver", "Mock", "mock-model", TokenUsage(10, 2), 0.0)
        >>> ledger.to_frame()["input_tokens"].to_list()
        [10]
    """

    def __init__(self) -> None:
        self.rows: dict[UsageKey, UsageRow] = {}

    def record(
        self,
        role: str,
        provider: str,
        model: str,
        tokens: TokenUsage,
        cost: float | None,
        *,
        batch: bool = False,
        cached: bool = False,
        timed_out: bool = False,
    ) -> None:
        """Add one call; `batch`: it was sent in a provider's batch; `cached`: the cache
        answered it; `timed_out`: not a reply but an attempt that timed out after its
        request went out (`tokens`: its estimated input)."""
        key = (role, provider, model, batch, cached)
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = UsageRow()
        row.add(tokens, cost, timed_out)

    def merge(self, other: UsageLedger, role: str | None = None) -> None:
        """Add another ledger's totals (only `role`'s, if given) into this one."""
        for key, row in other.rows.items():
            if role is None or key[0] == role:
                self.rows.setdefault(key, UsageRow()).absorb(row)

    def less(self, part: UsageLedger) -> UsageLedger:
        """What this ledger has beyond `part` (whose rows are parts of its rows): the rows
        left with requests or tokens in them."""
        out = UsageLedger()
        none = UsageRow()
        for key, row in self.rows.items():
            left = row.less(part.rows.get(key, none))
            if left.requests or left.timed_out or left.tokens.total:
                out.rows[key] = left
        return out

    def drop_role(self, role: str) -> None:
        """Forget every row of `role` (when that stage is run again)."""
        for key in [k for k in self.rows if k[0] == role]:
            del self.rows[key]

    def by_model(self) -> dict[tuple[str, str], UsageRow]:
        """Totals per (provider, model), all roles together."""
        out: dict[tuple[str, str], UsageRow] = {}
        for (_, provider, model, *_), row in self.rows.items():
            out.setdefault((provider, model), UsageRow()).absorb(row)
        return out

    def by_role(self) -> dict[str, UsageRow]:
        """Totals per role, all models together."""
        out: dict[str, UsageRow] = {}
        for (role, *_), row in self.rows.items():
            out.setdefault(role, UsageRow()).absorb(row)
        return out

    def spent(self) -> tuple[float | None, int]:
        """What the calls sent so far cost and how many tokens they used (cached calls
        are not counted: nothing was sent); cost None when one price is unknown."""
        cost: float | None = 0.0
        tokens = 0
        for key, row in self.rows.items():
            if key[4]:
                continue
            tokens += row.tokens.total
            cost = None if cost is None or row.cost is None else cost + row.cost
        return cost, tokens

    def to_frame(self) -> pl.DataFrame:
        """One row per role, model, batch and cached (live rows before batched ones,
        cached last), solver rows first."""
        import polars as pl

        order = {"solver": 0, "scorer": 1}
        keys = sorted(self.rows, key=lambda k: (order.get(k[0], 2), k))
        return pl.DataFrame(
            {
                "role": [k[0] for k in keys],
                "provider": [k[1] for k in keys],
                "model": [k[2] for k in keys],
                "batch": [k[3] for k in keys],
                "cached": [k[4] for k in keys],
                "requests": [self.rows[k].requests for k in keys],
                "timed_out": [self.rows[k].timed_out for k in keys],
                "input_tokens": [self.rows[k].tokens.input for k in keys],
                "cached_input_tokens": [self.rows[k].tokens.cached_input for k in keys],
                "cache_write_tokens": [self.rows[k].tokens.cache_write for k in keys],
                "output_tokens": [self.rows[k].tokens.output for k in keys],
                "reasoning_tokens": [self.rows[k].tokens.reasoning for k in keys],
                "cost": [self.rows[k].cost for k in keys],
            },
            schema=cost_schema(),
        )

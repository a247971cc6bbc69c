"""The cost of a run before the run: `Task.estimate_cost()`.

Two ways to estimate:

- run a seeded random sample of the dataset's rows (once each) on a clone of the task,
  logged into a temporary directory, and extrapolate each sample's own usage to every
  row and epoch, with a range from the spread between samples;
- with `local=True`, call nothing: count each row's input tokens for the solver's model
  (about 4 characters a token) and price them. Output tokens and the scorer's calls
  cannot be known that way, and are left unknown.

**The range.** The total of a (role, model) is estimated as N x epochs x the mean of
the n sampled rows. Its range is that +/- t standard errors: the standard error from
the rows' spread (N x epochs x sd / sqrt(n)), corrected for sampling without
replacement (x sqrt((N - n) / (N - 1))); t is Student's 95% quantile for n - 1 degrees
of freedom (2.09 for 20 samples, 1.96 for many). It is roughly a 95% interval for the
cost of all rows as the sampled rows see it, assuming repeats (epochs) of a row cost
what its first run did: a rare row far costlier than the rest that the sample missed
is not in it. Its low end is never below what the sample itself spent (those rows
are part of the full run). Every row sampled: the range is the estimate. One sample
(of more rows) gives no range.
"""

from __future__ import annotations

import math
import random
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from .._deprecated import renamed_keyword
from .._errors import ConfigError, EvalFailedError
from .._words import plural
from ..chats.chat import Chat
from ..chats.layers.call import guess_tokens
from ..dataset import DatasetRow, select_rows
from ..engine.option_table import DEPRECATED, OPTIONS
from ..engine.options import check_epochs
from ..engine.user_functions import route_kwargs
from ..pricing.cost import cost_of
from ..samples import SampleRecord
from ..vocab.model_calls import ChatRequest
from ..vocab.turns import TokenUsage, Turn
from ..vocab.usage import UsageLedger
from .logfile import configured_solver_chat
from .state import TaskSetup
from .streaming import SampleStream

if TYPE_CHECKING:
    import polars as pl

__all__ = ["Estimate", "estimate_cost"]

#: The normal quantile of a two-sided 95% interval.
_Z = 1.96


#: eval() options that mean nothing for a sample run into a temporary log (the table of
#: run options says which; `view` and `resume` are eval()'s own).
_REFUSED = ("view", "resume", *(option.name for option in OPTIONS if option.estimate == "refused"))
#: Run options of the sampled run (`Task.stream_async`'s, but `epochs`, estimate_cost's
#: own); other keywords are routed.
_RUN_OPTIONS = tuple(option.name for option in OPTIONS if option.estimate == "runs")

#: (role, provider, model)
_Key = tuple[str, str, str]


class _Sampled(Protocol):
    """A clone of the task over the sampled rows: what the estimate runs."""

    def stream_async(self, *, epochs: int | None = None, **kwargs: Any) -> SampleStream: ...


@dataclass(frozen=True, eq=False)
class Estimate:
    """What a run of the task would cost, by role and model, with a range.

    `rows` has one row per (role, provider, model): the expected `requests`,
    `input_tokens`, `cached_input_tokens`, `cache_write_tokens` and `output_tokens` of the
    whole run, its `cost` in USD and the range `cost_low`..`cost_high` (see `task/estimate.py`'s
    docstring for what the range means). A cost is None when the model's price is
    unknown, never 0; a token count None when it cannot be known (the output, locally).
    `total_*` add up the roles and models; `notes` say what was assumed or left out.

    Example:
        >>> estimate = task.estimate_cost(sample=20)
        >>> estimate.total_cost, estimate.total_low, estimate.total_high
        (12.4, 10.9, 13.9)  # e.g.
        >>> print(estimate)  # the table and one line of totals
    """

    rows: pl.DataFrame
    total_cost: float | None
    total_low: float | None
    total_high: float | None
    samples_run: int
    dataset_size: int
    epochs: int
    local: bool
    notes: tuple[str, ...] = ()

    @property
    def exact(self) -> bool:
        """Every row was run: the range is the estimate itself."""
        return not self.local and self.samples_run >= self.dataset_size

    def __str__(self) -> str:
        table = _table(self.rows, self.local)
        lines = [table, "", self._totals(), *(f"Note: {note}" for note in self.notes)]
        return "\n".join(lines)

    def _totals(self) -> str:
        scope = f"{plural(self.dataset_size, 'sample')} \u00d7 {plural(self.epochs, 'epoch')}"
        if self.total_cost is None:
            how = "counted locally" if self.local else f"from {self.samples_run:,} run"
            return f"cost unknown (a model has no known price) for {scope}, {how}"
        total = _money(self.total_cost)
        if self.local:
            return (
                f"about {total} for the input alone of {scope}, counted locally "
                "(output and the scorer's calls not counted)"
            )
        if self.exact:
            return f"{total} for {scope}, from all {self.samples_run:,} run"
        if self.total_low is None or self.total_high is None:
            return f"about {total} (no range) for {scope}, from {self.samples_run:,} run"
        span = f"{_money(self.total_low)}\u2013{_money(self.total_high)}"
        return f"about {total} ({span}) for {scope}, from {self.samples_run:,} run"


def _check_sample(sample: Any) -> int:
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 1:
        raise ConfigError(
            f"`sample` must be a whole number of at least 1 (the rows to run), not {sample!r}."
        )
    return sample


def _pick_rows(rows: Sequence[DatasetRow], sample: int, seed: Any) -> list[DatasetRow]:
    """`sample` rows drawn at random with `seed` (the same ones on every call), in the
    dataset's order; every row when there are no more."""
    if sample >= len(rows):
        return list(rows)
    chosen = sorted(random.Random(seed).sample(range(len(rows)), sample))
    return [rows[i] for i in chosen]


#: eval()'s options that select the samples of a run: an estimate is of the run they select.
_SELECTION = ("limit", "sample_ids", "shuffle")


def _selected(setup: TaskSetup, kwargs: dict[str, Any], seed: Any) -> TaskSetup:
    """`setup` with the rows a run with `kwargs`' selection options would take (taken out
    of `kwargs`; with `shuffle`, `seed` is the shuffle's seed)."""
    selection = {name: kwargs.pop(name) for name in _SELECTION if name in kwargs}
    if not selection:
        return setup
    shuffled_with = seed if selection.get("shuffle") else None
    return replace(setup, rows=list(select_rows(setup.rows, seed=shuffled_with, **selection)))


async def estimate_cost(
    setup: TaskSetup,
    clone_with: Callable[[TaskSetup], _Sampled],
    sample: int = 20,
    *,
    epochs: int | None = None,
    local: bool = False,
    seed: Any = 0,
    kwargs: dict[str, Any] | None = None,
) -> Estimate:
    """`Task.estimate_cost_async()`: see there. `clone_with(setup)` is a clone of the
    task with that setup, which the sampled run runs.

    Example:
        >>> await estimate_cost(task._setup, task._clone_with, 20)
    """
    sample = _check_sample(sample)
    if not setup.rows:
        raise ConfigError("The dataset is empty: there is nothing to estimate.")
    runs = check_epochs(epochs) or setup.epochs or 1
    kwargs = dict(kwargs or {})
    for old, new in DEPRECATED.items():
        renamed_keyword(kwargs, old, new, where="estimate_cost", stacklevel=5)
    refused = [name for name in _REFUSED if name in kwargs]
    if refused:
        raise ConfigError(
            f"estimate_cost() does not take `{refused[0]}`: it runs a sample of the task "
            "into a temporary log and leaves the task as it was."
        )
    setup = _selected(setup, kwargs, seed)
    if local:
        return _count_locally(setup, runs, kwargs)
    picked = _pick_rows(setup.rows, sample, seed)
    records = await _run_sample(setup, clone_with, picked, kwargs)
    return extrapolate(records, len(setup.rows), runs)


async def _run_sample(
    setup: TaskSetup,
    clone_with: Callable[[TaskSetup], _Sampled],
    rows: list[DatasetRow],
    kwargs: dict[str, Any],
) -> list[SampleRecord]:
    """Run `rows` once each on a clone logging into a temporary directory, removed
    afterwards (kept when samples failed: the error names the log in it)."""
    directory = Path(tempfile.mkdtemp(prefix="vitals-estimate-"))
    twin = clone_with(replace(setup, rows=rows, dir=directory, epochs=None))
    records: list[SampleRecord] = []
    keep = False
    try:
        async with twin.stream_async(epochs=1, **kwargs) as samples:
            async for record in samples:
                records.append(record)
    except EvalFailedError:
        keep = True
        raise
    finally:
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
    return records


# -- from a sample -----------------------------------------------------------------------


@dataclass(slots=True)
class _Usage:
    """One sample's usage of one (role, provider, model), cost None when unknown."""

    requests: int = 0
    input: int = 0
    cached_input: int = 0
    cache_write: int = 0
    output: int = 0
    cost: float | None = 0.0


def _as_sent(
    provider: str, model: str, tokens: TokenUsage, calls: int, batch: bool
) -> float | None:
    """What `calls` calls the cache answered (`tokens` in all) would have cost sent, each
    priced as the average one (a long-context tier is a call's, not the sum's)."""
    if calls <= 1:
        return cost_of(provider, model, tokens, batch=batch)
    each = TokenUsage(*(getattr(tokens, f) // calls for f in TokenUsage.__struct_fields__))
    cost = cost_of(provider, model, each, batch=batch)
    return None if cost is None else cost * calls


def _sample_usage(ledger: UsageLedger) -> tuple[dict[_Key, _Usage], int]:
    """A sample's usage by (role, provider, model), batch and cached calls together, a
    cached call priced as sent; and how many calls the cache answered."""
    out: dict[_Key, _Usage] = {}
    cached_calls = 0
    for (role, provider, model, batch, cached), row in ledger.rows.items():
        usage = out.setdefault((role, provider, model), _Usage())
        cost = row.cost
        if cached:
            cached_calls += row.requests
            cost = _as_sent(provider, model, row.tokens, row.requests, batch)
        usage.requests += row.requests
        usage.input += row.tokens.input
        usage.cached_input += row.tokens.cached_input
        usage.cache_write += row.tokens.cache_write
        usage.output += row.tokens.output
        usage.cost = None if cost is None or usage.cost is None else usage.cost + cost
    return out, cached_calls


def t_quantile(df: int) -> float:
    """Student's t quantile of a two-sided 95% interval with `df` degrees of freedom:
    the standard errors either side of an estimate from `df + 1` samples (wider than
    1.96 for few samples). Exact for 1 and 2; from 3 on a series in 1/df (Abramowitz &
    Stegun 26.7.5), within 0.1%.

    Example:
        >>> round(t_quantile(9), 3), round(t_quantile(1_000), 3)
        (2.262, 1.962)
    """
    if df < 3:
        return {1: 12.706, 2: 4.303}[df]
    z, v = _Z, float(df)
    terms = (
        (z**3 + z) / 4,
        (5 * z**5 + 16 * z**3 + 3 * z) / 96,
        (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
        (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92_160,
    )
    return z + sum(term / v ** (i + 1) for i, term in enumerate(terms))


def _scaled(values: Sequence[float], size: int, epochs: int) -> tuple[float, float | None]:
    """The total over `size` rows x `epochs` that the sampled `values` suggest, and its
    standard error (0 when every row was sampled; None from a single sample)."""
    n = len(values)
    mean = sum(values) / n
    total = mean * size * epochs
    if n >= size:
        return total, 0.0
    if n < 2:
        return total, None
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    correction = (size - n) / (size - 1)
    return total, size * epochs * math.sqrt(variance / n * correction)


def _cost_range(
    costs: Sequence[float | None], size: int, epochs: int
) -> tuple[float | None, float | None, float | None]:
    """Expected cost, low and high; all None when a price is unknown."""
    if any(c is None for c in costs):
        return None, None, None
    known = [c for c in costs if c is not None]
    total, error = _scaled(known, size, epochs)
    if error is None:
        return total, None, None
    spread = t_quantile(len(known) - 1) * error
    return total, max(total - spread, sum(known)), total + spread


def extrapolate(records: Sequence[SampleRecord], size: int, epochs: int) -> Estimate:
    """The estimate for `size` rows x `epochs` from `records`: one run of each sampled
    row, each with its own usage ledger.

    Example:
        >>> extrapolate(records, 5_000, 2).total_cost
        12.4  # e.g.
    """
    import polars as pl

    per_sample: list[dict[_Key, _Usage]] = []
    cached_calls = 0
    for record in records:
        usage, cached = _sample_usage(record.usage)
        per_sample.append(usage)
        cached_calls += cached
    order = {"solver": 0, "scorer": 1}
    keys = sorted({k for usage in per_sample for k in usage}, key=lambda k: (order.get(k[0], 2), k))
    columns: dict[str, list[Any]] = {name: [] for name in _schema()}
    notes: list[str] = []
    for key in keys:
        cost = _add_row(
            columns, key, [usage.get(key, _Usage()) for usage in per_sample], size, epochs
        )
        if cost is None:
            notes.append(
                f"No price is known for {key[1]}/{key[2]}: its cost is unknown "
                "(ve.set_price() sets one)."
            )
    totals = [_sum_costs(usage.values()) for usage in per_sample]
    total, low, high = _cost_range(totals, size, epochs) if records else (0.0, 0.0, 0.0)
    if cached_calls:
        notes.append(
            f"The cache answered {plural(cached_calls, 'call')} of the sample; they are "
            "priced as if sent, as a fresh run would send them."
        )
    n = len(records)
    if n == 1 and size > 1:
        notes.append("One sample gives no range: run at least 2 for one.")
    return Estimate(
        rows=pl.DataFrame(columns, schema=_schema()),
        total_cost=total,
        total_low=low,
        total_high=high,
        samples_run=n,
        dataset_size=size,
        epochs=epochs,
        local=False,
        notes=tuple(notes),
    )


def _add_row(
    columns: dict[str, list[Any]], key: _Key, used: list[_Usage], size: int, epochs: int
) -> float | None:
    """One (role, provider, model)'s row of the estimate, from what each sample used of
    it, scaled to `size` rows x `epochs`; returns its cost (None: unknown)."""
    n = len(used)
    cost, low, high = _cost_range([u.cost for u in used], size, epochs)
    for name, values in (
        ("requests", [u.requests for u in used]),
        ("input_tokens", [u.input for u in used]),
        ("cached_input_tokens", [u.cached_input for u in used]),
        ("cache_write_tokens", [u.cache_write for u in used]),
        ("output_tokens", [u.output for u in used]),
    ):
        columns[name].append(round(sum(values) / n * size * epochs))
    for name, value in zip(("role", "provider", "model"), key, strict=True):
        columns[name].append(value)
    columns["cost"].append(cost)
    columns["cost_low"].append(low)
    columns["cost_high"].append(high)
    return cost


def _sum_costs(usages: Iterable[_Usage]) -> float | None:
    total: float | None = 0.0
    for usage in usages:
        total = None if total is None or usage.cost is None else total + usage.cost
    return total


# -- counted locally -----------------------------------------------------------------------


def input_tokens(chat: Chat, input: Any) -> int:
    """The input tokens of sending `input` to `chat`, by the guess the rate limits and the
    budget use (`guess_tokens`: about 4 characters a token; tool definitions not counted).

    Example:
        >>> input_tokens(chat_mock(system_prompt="Be terse."), "What's 2+2?")
        5
    """
    if isinstance(input, str):
        turn = Turn.user(input)
    elif isinstance(input, list):
        turn = Turn.user(*input)
    else:  # structured input for a custom solver: counted as its JSON text
        turn = Turn.user(msgspec.json.encode(input).decode())
    request = ChatRequest(turns=[*chat.turns, turn], system_prompt=chat.system_prompt)
    return guess_tokens(request).prompt


def _count_locally(setup: TaskSetup, epochs: int, kwargs: dict[str, Any]) -> Estimate:
    import polars as pl

    routed = {k: v for k, v in kwargs.items() if k not in _RUN_OPTIONS}
    solver_kwargs, _ = route_kwargs(routed, setup.solver_spec, setup.scorer_spec, _RUN_OPTIONS)
    chat = configured_solver_chat(setup, solver_kwargs)
    if chat is None:
        raise ConfigError(
            f"estimate_cost(local=True) counts the input tokens for the solver's model, but "
            f"the solver {setup.solver_spec.label} holds no chat to find it in. Use "
            "ve.generate(chat), pass solver_chat=<a Chat> if the solver takes it, or run a "
            "sample (local=False)."
        )
    provider = chat.provider
    counts = [input_tokens(chat, row.input) for row in setup.rows]
    tokens = sum(counts) * epochs
    costs = [cost_of(provider.name, provider.price_model(), TokenUsage(input=n)) for n in counts]
    # each call priced on its own: a long-context tier is a call's, not the run's
    cost = None if None in costs else sum(c for c in costs if c is not None) * epochs
    notes = [
        "Counted locally, about 4 characters a token: the input of one solver call per "
        "sample, priced as uncached input. Output tokens, tool definitions, further calls "
        "and the scorer's calls (a judge) cannot be known without calling: run a sample "
        "(local=False) for those."
    ]
    if cost is None:
        notes.append(
            f"No price is known for {provider.name}/{provider.model}: its cost is unknown "
            "(ve.set_price() sets one)."
        )
    row: dict[str, list[Any]] = {
        "role": ["solver"],
        "provider": [provider.name],
        "model": [provider.model],
        "requests": [len(setup.rows) * epochs],
        "input_tokens": [tokens],
        "cached_input_tokens": [None],
        "cache_write_tokens": [None],
        "output_tokens": [None],
        "cost": [cost],
        "cost_low": [None],
        "cost_high": [None],
    }
    return Estimate(
        rows=pl.DataFrame(row, schema=_schema()),
        total_cost=cost,
        total_low=None,
        total_high=None,
        samples_run=0,
        dataset_size=len(setup.rows),
        epochs=epochs,
        local=True,
        notes=tuple(notes),
    )


# -- printing --------------------------------------------------------------------------------


def _schema() -> dict[str, Any]:
    import polars as pl

    return {
        "role": pl.String,
        "provider": pl.String,
        "model": pl.String,
        "requests": pl.Int64,
        "input_tokens": pl.Int64,
        "cached_input_tokens": pl.Int64,
        "cache_write_tokens": pl.Int64,
        "output_tokens": pl.Int64,
        "cost": pl.Float64,
        "cost_low": pl.Float64,
        "cost_high": pl.Float64,
    }


def _money(value: float) -> str:
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def _table(frame: pl.DataFrame, local: bool) -> str:
    header = ["role", "model", "requests", "input", "output", "cost"]
    if not local:
        header.append("range")
    rows = []
    for r in frame.iter_rows(named=True):
        cost = "unknown" if r["cost"] is None else _money(r["cost"])
        cells = [
            r["role"],
            f"{r['provider']}/{r['model']}",
            f"{r['requests']:,}",
            f"{r['input_tokens']:,}",
            "unknown" if r["output_tokens"] is None else f"{r['output_tokens']:,}",
            cost,
        ]
        if not local:
            low, high = r["cost_low"], r["cost_high"]
            span = "" if low is None or high is None else f"{_money(low)}\u2013{_money(high)}"
            cells.append(span)
        rows.append(cells)
    if not rows:
        return "No model calls."
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    right = {"requests", "input", "output", "cost", "range"}

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if h in right else c.ljust(w)
            for c, w, h in zip(cells, widths, header, strict=True)
        ).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])

"""`LoggedEval`: a Task-like view of an eval read from a log, whatever its format.

Its status, task, model and metrics come from the header; `records()`,
`get_samples()` and `get_cost()` are shaped like a `Task`'s. After a
header-only read, what needs the samples reads the whole log first.

Metrics: our logs write Inspect's `stderr` metric beside each metric, marked as ours;
`metrics` leaves those out and `metric_stats` reads the statistics back. A log written
elsewhere keeps its metrics as they are (Inspect's `stderr` included), and
`metric_stats` takes each metric's standard error from its `stderr` (the first
metric's) or `<name>_stderr`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from .._words import plural
from ..frames import records_frame
from ..providers.replay import provider_display_name, split_model_id
from ..samples import SampleRecord
from ..statistics.intervals import MetricStat
from ..vocab.batch_records import BatchRecord
from ..vocab.usage import UsageLedger, UsageRow, cost_schema
from . import schema as s
from .formats import read_parts
from .journal_format import JOURNAL_SUFFIX, JournalDamage, bulk_objects, read_journal_batches
from .logged_batches import logged_batches
from .logged_sample import (
    add_chat_usage,
    first_score,
    is_batched,
    logged_cache,
    normalize_model,
    sample_record,
)
from .logged_turns import usage_tokens

if TYPE_CHECKING:
    import polars as pl

__all__ = ["LoggedEval", "metric_stats_of", "metric_values_of"]


#: How a sample's calls of one role went: (all in provider batches, all from the cache).
_Kind = tuple[bool, bool]
_LIVE: _Kind = (False, False)
#: The roles of a log's usage by role that have cost rows, in their order.
_ROLE_ORDER = {"solver": 0, "scorer": 1}


class _CostRow(NamedTuple):
    """One row of `get_cost()`: who, which model, batched or cached or not, spent what."""

    role: str
    model_id: str | None
    batch: bool | None
    cached: bool | None
    usage: UsageRow
    requests: int | None


class LoggedEval:
    """An eval read from a log: a Task-like view of its header, samples and usage.

    Attributes:
        path: the file read.
        header: the `EvalLog` without samples.
        samples: the logged `EvalSample`s ([] after a header-only read).
        damage: where a journal stopped being readable (None when clean).

    Example:
        >>> logged = read_log("logs/2026-01-14T16-19-11-06-00_simple-addition_abc.json")
        >>> logged.status, logged.metrics
        ('success', {'accuracy': 1.0})
        >>> logged.get_samples()
    """

    def __init__(
        self,
        path: Path,
        header: s.EvalLog,
        samples: list[s.EvalSample],
        damage: JournalDamage | None = None,
        header_only: bool = False,
    ) -> None:
        self.path = path
        self.header = header
        self.samples = samples
        self.damage = damage
        self.header_only = header_only
        self._records: list[SampleRecord] | None = None
        self._cached: list[dict[str, bool] | None] | None = None

    @property
    def status(self) -> str:
        return self.header.status

    @property
    def task(self) -> str:
        return self.header.eval.task

    @property
    def run_id(self) -> str | None:
        return self.header.eval.run_id

    @property
    def batches(self) -> list[BatchRecord]:
        """The provider batches the run sent (batch mode): id, provider, model, requests,
        times, status and counts of each; [] for a run without them. A journal (a run
        going on, or killed) says what it knows so far."""
        if self.path.suffix == JOURNAL_SUFFIX:
            return [
                msgspec.structs.replace(b, entries=None) for b in read_journal_batches(self.path)
            ]
        return logged_batches(self.header)

    @property
    def model(self) -> str:
        """The solver's model as `provider/model`."""
        return normalize_model(self.header.eval.model)

    @property
    def ours(self) -> bool:
        """Whether vitals-engine wrote this log."""
        return "vitals_engine" in self.header.eval.packages

    @property
    def scorer(self) -> str | None:
        """The (first) scorer's name."""
        results = self.header.results
        if isinstance(results, s.EvalResults) and results.scores:
            return results.scores[0].scorer
        for sample in self.samples:
            name, _ = first_score(sample.scores)
            if name is not None:
                return name
        return None

    @property
    def scorer_names(self) -> list[str]:
        """Every scorer's name, in the log's order (the results', else the samples')."""
        results = self.header.results
        if isinstance(results, s.EvalResults) and results.scores:
            return list(dict.fromkeys(score.name for score in results.scores))
        names: dict[str, None] = {}
        for sample in self.samples:
            names.update(dict.fromkeys(sample.scores or ()))
        return list(names)

    @property
    def metrics_by_scorer(self) -> dict[str, dict[str, float | int | None]] | None:
        """Each scorer's metrics by scorer name, as `Task.metrics_by_scorer` (None when
        the log has no results).

        Example:
            >>> read_log(path).metrics_by_scorer
            {'includes': {'accuracy': 0.8}, 'judge': {'accuracy': 0.7}}
        """
        results = self.header.results
        if not isinstance(results, s.EvalResults) or not results.scores:
            return None
        return {score.name: metric_values_of(score) for score in results.scores}

    @property
    def metric_stats_by_scorer(self) -> dict[str, dict[str, MetricStat]] | None:
        """Each scorer's `metric_stats` by scorer name (None when the log has no results)."""
        results = self.header.results
        if not isinstance(results, s.EvalResults) or not results.scores:
            return None
        return {score.name: metric_stats_of(score) for score in results.scores}

    @property
    def corrected(self) -> dict[str, MetricStat]:
        """Each scorer's mean corrected by human grades (`Task(human=)`), by scorer name
        ({} when the run had none): the value, its standard error and 95% interval, `n`
        the samples and `clusters` the clusters with a human grade.

        Example:
            >>> read_log(path).corrected["model_graded_qa"].value
            0.71
        """
        results = self.header.results
        if not isinstance(results, s.EvalResults):
            return {}
        found = {score.name: corrected_of(score) for score in results.scores}
        return {name: stat for name, stat in found.items() if stat is not None}

    @property
    def metrics(self) -> dict[str, float | int | None] | None:
        """The first scorer's metrics, name -> value (None when the log has no results)."""
        results = self.header.results
        if not isinstance(results, s.EvalResults) or not results.scores:
            return None
        return metric_values_of(results.scores[0])

    @property
    def metric_stats(self) -> dict[str, MetricStat] | None:
        """The first scorer's metrics with their standard errors and 95% intervals, as
        `Task.metric_stats` (None when the log has no results). A log written elsewhere
        says no interval and no clusters; its standard errors are Inspect's `stderr`.

        Example:
            >>> read_log(task.log_path).metric_stats == task.metric_stats
            True
        """
        results = self.header.results
        if not isinstance(results, s.EvalResults) or not results.scores:
            return None
        return metric_stats_of(results.scores[0])

    @property
    def cluster(self) -> str | None:
        """The metadata column the run clustered its metrics' scores by (`Task(cluster=)`;
        None: by sample, or a log that does not say)."""
        results = self.header.results
        if not isinstance(results, s.EvalResults) or not results.scores:
            return None
        for metric in results.scores[0].metrics.values():
            column = (metric.metadata or {}).get("cluster")
            if isinstance(column, str) and column:
                return column
        return None

    def _load(self) -> None:
        if self.header_only:
            self.header, self.samples, self.damage = read_parts(self.path, header_only=False)
            self.header_only = False

    def records(self) -> list[SampleRecord]:
        """The samples as the engine's records, chats rebuilt (a header-only read loads them)."""
        self._load()
        if self._records is None:
            model, ours = self.header.eval.model, self.ours
            with bulk_objects():
                self._records = [sample_record(x, model, ours) for x in self.samples]
        return self._records

    def get_samples(self) -> pl.DataFrame:
        """One row per (sample, epoch), with the columns `Task.get_samples()` has after an eval."""
        records = self.records()
        results = self.header.results
        scored = (isinstance(results, s.EvalResults) and bool(results.scores)) or any(
            r.score is not None for r in records
        )
        return records_frame(records, self.scorer, scored=scored)

    def _cache_flags(self) -> list[dict[str, bool] | None]:
        """Per sample, by role, whether the cache answered all its calls (`logged_cache`)."""
        if self._cached is None:
            self._load()
            self._cached = [logged_cache(sample.events) for sample in self.samples]
        return self._cached

    def _kinds(self, role: str) -> list[_Kind]:
        """How each sample's calls of `role` went: batched, cached, or neither (live)."""
        return [
            (is_batched(record, role), bool(flags and flags.get(role)))
            for record, flags in zip(self.records(), self._cache_flags(), strict=True)
        ]

    def _requests(self, role: str, kind: _Kind | None = None) -> int | None:
        """The replies of `role`'s rebuilt chats (only of the samples whose calls of
        `role` went as `kind` says, when given)."""
        if self.header_only:
            return None
        kinds = self._kinds(role) if kind is not None else None
        count = 0
        for i, record in enumerate(self.records()):
            if kinds is not None and kinds[i] != kind:
                continue
            chats = [record.solver_chat] if role == "solver" else record.judge_chats
            for chat in chats:
                if chat is not None:
                    count += sum(1 for t in chat.turns if t.role == "assistant")
        return count

    def _timed_out(self, role: str | None = None, model: str | None = None) -> int:
        """The attempts of `role` (or of `model`, a key of `model_usage`) that timed out
        after their request went out, as the eval's metadata records them (`timed_out`,
        by role and model; a log written elsewhere says none)."""
        found = (self.header.eval.metadata or {}).get("timed_out")
        if not isinstance(found, dict):
            return 0
        count = 0
        for logged_role, by_model in found.items():
            if not isinstance(by_model, dict) or role not in (None, logged_role):
                continue
            for key, n in by_model.items():
                if isinstance(n, int) and model in (None, key):
                    count += n
        return count

    def _role_rows(self, role: str, usage: s.ModelUsage) -> list[_CostRow]:
        """`role`'s cost rows: its live calls, those the cache answered and those sent in
        provider batches (as the samples' model events say: `"cache": "read"`,
        `config.batch`), in the order of `Task.get_cost()`. A sample's usage is logged by
        role, not by call: a sample whose calls of `role` were all cached (or all
        batched) counts as such, any other as live, which is the rest of the header's
        total. Batch and cached are None after a header-only read (the samples say it)."""
        model = self._role_model(role)
        total = UsageRow(0, usage_tokens(usage), usage.total_cost, self._timed_out(role=role))
        if self.header_only:
            return [_CostRow(role, model, None, None, total, None)]
        if model is None and role != "solver":
            split = self._rows_by_model(role) or self._rows_by_other_models(role, total)
            return split or [_CostRow(role, None, False, False, total, None)]
        parts: dict[_Kind, UsageRow] = {}
        for sample, kind in zip(self.samples, self._kinds(role), strict=True):
            logged = sample.role_usage.get(role)
            if logged is not None and kind != _LIVE:
                part = parts.setdefault(kind, UsageRow())
                part.absorb(UsageRow(0, usage_tokens(logged), logged.total_cost))
        live = total
        for part in parts.values():
            live = live.less(part)
        live_requests = self._requests(role, _LIVE) if parts else None
        if live.tokens.total or live_requests:
            parts[_LIVE] = live
        if len(parts) <= 1:  # one kind: the header's total, to the last digit of its cost
            batch, cached = next(iter(parts), _LIVE)
            return [_CostRow(role, model, batch, cached, total, self._requests(role))]
        return [
            _CostRow(role, model, *kind, parts[kind], self._requests(role, kind))
            for kind in sorted(parts)
        ]

    def _rows_by_model(self, role: str) -> list[_CostRow]:
        """`role`'s rows by model, batch and cached, from the replies of the rebuilt chats:
        for a role whose calls went to several models (judges of a panel, or of several
        scorers), which the log's usage, by role or by model but not both, cannot split."""
        ledger = UsageLedger()
        for record in self.records():
            add_chat_usage(record, ledger)
        return [
            _CostRow(role, f"{provider}/{model}", batch, cached, row, row.requests)
            for (of, provider, model, batch, cached), row in sorted(ledger.rows.items())
            if of == role
        ]

    def _rows_by_other_models(self, role: str, total: UsageRow) -> list[_CostRow]:
        """`role`'s rows from the header's usage by model (a judge panel, whose judges'
        chats are not logged): every model but the solver's, when together they are
        exactly `role`'s total (no model served both roles). Requests unknown."""
        solver = normalize_model(self.header.eval.model)
        others = {
            normalize_model(key): usage
            for key, usage in self.header.stats.model_usage.items()
            if normalize_model(key) != solver
        }
        rows = [
            _CostRow(role, key, False, False, UsageRow(0, usage_tokens(u), u.total_cost), None)
            for key, u in sorted(others.items())
        ]
        summed = sum(row.usage.tokens.total for row in rows)
        return rows if rows and summed == total.tokens.total else []

    def _all_of(self, flags: Iterable[dict[str, bool] | None]) -> bool:
        """Whether every model call of the samples is one the per-sample `flags` (by
        role) say yes to."""
        anyone = False
        for sample, found in zip(self.samples, flags, strict=True):
            if found is None:
                if sample.model_usage:
                    return False  # calls, none of them flagged
                continue
            if not all(found.values()):
                return False
            anyone = anyone or bool(found)
        return anyone

    def _role_model(self, role: str) -> str | None:
        solver = normalize_model(self.header.eval.model)
        if role == "solver":
            return solver
        judges = {
            normalize_model(str(judge))
            for sample in self.samples
            for score in (sample.scores or {}).values()
            if (judge := (score.metadata or {}).get("judge_model"))
        }
        if judges:  # several judges (of several scorers): the log does not split their usage
            return judges.pop() if len(judges) == 1 else None
        keys = [normalize_model(k) for k in self.header.stats.model_usage]
        if len(keys) == 1:
            return keys[0]
        others = [k for k in keys if k != solver]
        return others[0] if len(others) == 1 else None

    def get_cost(self) -> pl.DataFrame:
        """Requests, tokens and cost by role, model, batch and cached, with
        `Task.get_cost()`'s columns (`timed_out` from the eval's metadata: 0 in a log
        written elsewhere).

        From the log's per-role usage when it has solver/scorer rows, else its
        per-model usage (as role "solver"). `requests` counts the rebuilt
        chats' replies; `batch` says which calls went in provider batches and
        `cached` which the cache answered, as the samples' model events record it
        (`config.batch`, `"cache": "read"`). All three are None after a header-only
        read.

        Example:
            >>> read_log(path).get_cost().select("role", "cached", "requests").rows()
            [('solver', False, 3), ('solver', True, 3)]
        """
        stats = self.header.stats
        roles = {r: u for r, u in stats.role_usage.items() if r in _ROLE_ORDER}
        if not roles:
            return _cost_frame(self._solver_rows_by_model())
        rows: list[_CostRow] = []
        for role in sorted(roles, key=_ROLE_ORDER.__getitem__):
            rows.extend(self._role_rows(role, roles[role]))
        return _cost_frame(rows)

    def _solver_rows_by_model(self) -> list[_CostRow]:
        """The cost rows of a log without usage by role: its usage by model, as role
        "solver" (requests known only when there is one model)."""
        model_usage = self.header.stats.model_usage
        single = len(model_usage) == 1
        batch = cached = None
        if not self.header_only:
            batch = self._all_of(r.logged_batch for r in self.records())
            cached = self._all_of(self._cache_flags())
        rows: list[_CostRow] = []
        for key, usage in model_usage.items():
            requests = self._requests("solver") if single else None
            timed_out = self._timed_out(model=key)
            total = UsageRow(0, usage_tokens(usage), usage.total_cost, timed_out)
            rows.append(_CostRow("solver", normalize_model(key), batch, cached, total, requests))
        return rows

    def __repr__(self) -> str:
        metrics = ", ".join(
            f"{k}={v:.3g}" for k, v in (self.metrics or {}).items() if isinstance(v, int | float)
        )
        count = "header only" if self.header_only else plural(len(self.samples), "sample")
        return (
            f"<LoggedEval {self.task} ({self.model}): {self.status}, {count}"
            + (f", {metrics}" if metrics else "")
            + f" from {self.path.name}>"
        )


def _cost_frame(rows: list[_CostRow]) -> pl.DataFrame:
    """`get_cost()`'s frame of `rows`: a model id split into the provider's display name
    and the model."""
    import polars as pl

    providers, models = [], []
    for row in rows:
        prefix, model = split_model_id(row.model_id) if row.model_id else (None, None)
        providers.append(provider_display_name(prefix) if prefix else None)
        models.append(model)
    return pl.DataFrame(
        {
            "role": [r.role for r in rows],
            "provider": providers,
            "model": models,
            "batch": [r.batch for r in rows],
            "cached": [r.cached for r in rows],
            "requests": [r.requests for r in rows],
            "timed_out": [r.usage.timed_out for r in rows],
            "input_tokens": [r.usage.tokens.input for r in rows],
            "cached_input_tokens": [r.usage.tokens.cached_input for r in rows],
            "cache_write_tokens": [r.usage.tokens.cache_write for r in rows],
            "output_tokens": [r.usage.tokens.output for r in rows],
            "reasoning_tokens": [r.usage.tokens.reasoning for r in rows],
            "cost": [r.usage.cost for r in rows],
        },
        schema=cost_schema(),
    )


def metric_values_of(score: s.EvalScore) -> dict[str, float | int | None]:
    """A scorer's metrics, name -> value, without the `stderr` entries we add.

    Example:
        >>> metric_values_of(header.results.scores[0])
        {'accuracy': 0.7}
    """
    return {name: metric.value for name, metric in score.metrics.items() if not _ours(metric)}


def metric_stats_of(score: s.EvalScore) -> dict[str, MetricStat]:
    """A scorer's metrics with their statistics: ours from each metric's metadata; in a
    log written elsewhere, the standard error is Inspect's `stderr` metric (of the first
    metric) or `<name>_stderr`, and those entries are folded into their metric.

    Example:
        >>> metric_stats_of(header.results.scores[0])["accuracy"].stderr
        0.1527...
    """
    entries = {k: m for k, m in score.metrics.items() if not _ours(m)}
    partners: dict[str, str] = {}
    for key in entries:
        if key == "stderr":
            first = next((k for k in entries if k != "stderr" and not k.endswith("_stderr")), None)
            if first is not None:
                partners[first] = key
        elif key.endswith("_stderr") and key.removesuffix("_stderr") in entries:
            partners[key.removesuffix("_stderr")] = key
    stats: dict[str, MetricStat] = {}
    for name, metric in entries.items():
        if name in partners.values():
            continue
        ours = metric.metadata or {}
        if "n" in ours or "stderr" in ours:
            stats[name] = _our_stat(metric)
            continue
        partner = entries.get(partners.get(name, ""))
        stats[name] = MetricStat(
            _value(metric.value),
            _number(partner.value) if partner is not None else None,
            n=score.scored_samples,
        )
    return stats


def _ours(metric: s.EvalMetric) -> bool:
    """Whether we added `metric` beside the scorer's own: a `stderr`, or a mean
    corrected by human grades."""
    metadata = metric.metadata or {}
    return s.STDERR_OF in metadata or s.CORRECTED_OF in metadata


def corrected_of(score: s.EvalScore) -> MetricStat | None:
    """The scorer's mean corrected by human grades, as we log it (None: none)."""
    for metric in score.metrics.values():
        if s.CORRECTED_OF in (metric.metadata or {}):
            return _our_stat(metric)
    return None


def _our_stat(metric: s.EvalMetric) -> MetricStat:
    """A metric with the statistics we write in its metadata."""
    ours = metric.metadata or {}
    return MetricStat(
        _value(metric.value),
        _number(ours.get("stderr")),
        _number(ours.get("ci_low")),
        _number(ours.get("ci_high")),
        _count(ours.get("n")),
        _count(ours.get("clusters")),
    )


def _value(value: Any) -> float:
    number = _number(value)
    return math.nan if number is None else number


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None

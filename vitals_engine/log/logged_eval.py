"""`LoggedEval`: a Task-like view of an eval read from a log, whatever its format.

Its status, task, model and metrics come from the header; `records()`,
`get_samples()` and `get_cost()` are shaped like a `Task`'s. After a
header-only read, what needs the samples reads the whole log first.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import msgspec

from .._words import plural
from ..frames import records_frame
from ..providers.replay import provider_display_name, split_model_id
from ..samples import SampleRecord
from ..vocab.batches import BatchRecord
from ..vocab.usage import UsageRow, cost_schema
from . import schema as s
from .batches import logged_batches
from .formats import read_parts
from .journal_format import JOURNAL_SUFFIX, JournalDamage, bulk_objects, read_journal_batches
from .logged_sample import first_score, is_batched, normalize_model, sample_record
from .logged_turns import usage_tokens

if TYPE_CHECKING:
    import polars as pl

__all__ = ["LoggedEval"]


class _CostRow(NamedTuple):
    """One row of `get_cost()`: who, which model, batched or not, spent what."""

    role: str
    model_id: str | None
    batch: bool | None
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
    def metrics(self) -> dict[str, float | int | None] | None:
        """The first scorer's metrics, name -> value (None when the log has no results)."""
        results = self.header.results
        if not isinstance(results, s.EvalResults) or not results.scores:
            return None
        return {name: metric.value for name, metric in results.scores[0].metrics.items()}

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

    def _requests(self, role: str, batch: bool | None = None) -> int | None:
        """The replies of `role`'s rebuilt chats (only of the samples whose calls of
        `role` were batched, or were not, when `batch` is given)."""
        if self.header_only:
            return None
        count = 0
        for record in self.records():
            if batch is not None and is_batched(record, role) != batch:
                continue
            chat = record.solver_chat if role == "solver" else None
            if role == "scorer" and record.score is not None:
                chat = record.score.chat
            if chat is not None:
                count += sum(1 for t in chat.turns if t.role == "assistant")
        return count

    def _role_rows(self, role: str, usage: s.ModelUsage) -> list[_CostRow]:
        """`role`'s cost rows: its live calls and its batched ones (as the samples' model
        events say, `config.batch`), live first. A sample's usage is logged by role, not
        by call: a sample whose calls of `role` were all batched counts as batched, any
        other as live. Batch is None after a header-only read (the samples say it)."""
        model = self._role_model(role)
        total = UsageRow(0, usage_tokens(usage), usage.total_cost)
        if self.header_only:
            return [_CostRow(role, model, None, total, None)]
        batched = UsageRow()
        records = self.records()
        for sample, record in zip(self.samples, records, strict=True):
            logged = sample.role_usage.get(role)
            if logged is not None and is_batched(record, role):
                batched.absorb(UsageRow(0, usage_tokens(logged), logged.total_cost))
        if not batched.tokens.total:
            return [_CostRow(role, model, False, total, self._requests(role))]
        live = total.less(batched)
        if not live.tokens.total:
            return [_CostRow(role, model, True, total, self._requests(role))]
        return [
            _CostRow(role, model, False, live, self._requests(role, batch=False)),
            _CostRow(role, model, True, batched, self._requests(role, batch=True)),
        ]

    def _all_batched(self) -> bool | None:
        """Whether every model call of the samples went in a provider batch (None after a
        header-only read)."""
        if self.header_only:
            return None
        any_batched = False
        records = self.records()
        for sample, record in zip(self.samples, records, strict=True):
            flags = record.logged_batch
            if flags is None:
                if sample.model_usage:
                    return False  # calls, none of them batched
                continue
            if not all(flags.values()):
                return False
            any_batched = any_batched or bool(flags)
        return any_batched

    def _role_model(self, role: str) -> str | None:
        solver = normalize_model(self.header.eval.model)
        if role == "solver":
            return solver
        for sample in self.samples:
            _, score = first_score(sample.scores)
            judge = (score.metadata or {}).get("judge_model") if score is not None else None
            if judge:
                return normalize_model(str(judge))
        keys = [normalize_model(k) for k in self.header.stats.model_usage]
        if len(keys) == 1:
            return keys[0]
        others = [k for k in keys if k != solver]
        return others[0] if len(others) == 1 else None

    def get_cost(self) -> pl.DataFrame:
        """Requests, tokens and cost by role, model and batch, with `Task.get_cost()`'s
        columns.

        From the log's per-role usage when it has solver/scorer rows, else its
        per-model usage (as role "solver"). `requests` counts the rebuilt
        chats' replies; `batch` says which calls went in provider batches, as the
        samples' model events record it (`config.batch`). Both are None after a
        header-only read.
        """
        import polars as pl

        stats = self.header.stats
        order = {"solver": 0, "scorer": 1}
        rows: list[_CostRow] = []
        roles = {r: u for r, u in stats.role_usage.items() if r in order}
        if roles:
            for role in sorted(roles, key=order.__getitem__):
                rows.extend(self._role_rows(role, roles[role]))
        else:
            single = len(stats.model_usage) == 1
            batch = self._all_batched()
            for key, usage in stats.model_usage.items():
                requests = self._requests("solver") if single else None
                total = UsageRow(0, usage_tokens(usage), usage.total_cost)
                rows.append(_CostRow("solver", normalize_model(key), batch, total, requests))
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
                "cached": [None if r.batch is None else False for r in rows],
                "requests": [r.requests for r in rows],
                "input_tokens": [r.usage.tokens.input for r in rows],
                "cached_input_tokens": [r.usage.tokens.cached_input for r in rows],
                "output_tokens": [r.usage.tokens.output for r in rows],
                "reasoning_tokens": [r.usage.tokens.reasoning for r in rows],
                "cost": [r.usage.cost for r in rows],
            },
            schema=cost_schema(),
        )

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

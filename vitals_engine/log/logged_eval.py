"""`LoggedEval`: a Task-like view of an eval read from a log, whatever its format.

Its status, task, model and metrics come from the header; `records()`,
`get_samples()` and `get_cost()` are shaped like a `Task`'s. After a
header-only read, what needs the samples reads the whole log first.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .._words import plural
from ..frames import records_frame
from ..providers.replay import provider_display_name, split_model_id
from ..samples import SampleRecord
from ..vocab.usage import cost_schema
from . import schema as s
from .formats import read_parts
from .journal_format import JournalDamage, bulk_objects
from .logged_sample import first_score, normalize_model, sample_record
from .logged_turns import usage_tokens

if TYPE_CHECKING:
    import polars as pl

__all__ = ["LoggedEval"]


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

    def _requests(self, role: str) -> int | None:
        if self.header_only:
            return None
        count = 0
        for record in self.records():
            chat = record.solver_chat if role == "solver" else None
            if role == "scorer" and record.score is not None:
                chat = record.score.chat
            if chat is not None:
                count += sum(1 for t in chat.turns if t.role == "assistant")
        return count

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
        """Requests, tokens and cost by role and model, with `Task.get_cost()`'s columns.

        From the log's per-role usage when it has solver/scorer rows, else its
        per-model usage (as role "solver"). `requests` counts the rebuilt
        chats' replies (None after a header-only read).
        """
        import polars as pl

        stats = self.header.stats
        order = {"solver": 0, "scorer": 1}
        rows: list[tuple[str, str | None, s.ModelUsage, int | None]] = []
        roles = {r: u for r, u in stats.role_usage.items() if r in order}
        if roles:
            for role in sorted(roles, key=order.__getitem__):
                rows.append((role, self._role_model(role), roles[role], self._requests(role)))
        else:
            single = len(stats.model_usage) == 1
            for key, usage in stats.model_usage.items():
                requests = self._requests("solver") if single else None
                rows.append(("solver", normalize_model(key), usage, requests))
        providers, models = [], []
        for _, model_id, _, _ in rows:
            prefix, model = split_model_id(model_id) if model_id else (None, None)
            providers.append(provider_display_name(prefix) if prefix else None)
            models.append(model)
        return pl.DataFrame(
            {
                "role": [r[0] for r in rows],
                "provider": providers,
                "model": models,
                "requests": [r[3] for r in rows],
                "input_tokens": [usage_tokens(r[2]).input for r in rows],
                "cached_input_tokens": [usage_tokens(r[2]).cached_input for r in rows],
                "output_tokens": [r[2].output_tokens for r in rows],
                "reasoning_tokens": [r[2].reasoning_tokens or 0 for r in rows],
                "cost": [r[2].total_cost for r in rows],
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

"""What a `Task` holds: its setup, which its runs read, and the state its last run left.

`TaskSetup` is what the user configured: the dataset, the solver and scorer, the
metrics (with the epoch reducer and the clustering of their statistics), the name and
the log directory. Runs never change it; the setters do.

`RunState` is what the last run left and what its log is made from. Invariants:
`records` is None until a run solves, and a solving run replaces them (in run
order); a scoring run keeps them and clears their scores first. `scored` turns
True only when a scoring run ends without failing. Each run starts with `status`
"started" and ends "success", "error" or "cancelled"; `metric_stats` are `metrics`
with their standard errors and intervals, `partial_metrics` those of a run that did
not succeed, for its log. The ledgers hold the usage of every run since the last
reset, by role; the cache's counts, those of every run since the last solving one.
With several scorers, `scorer_stats` holds each one's statistics by name.
`writer` is the journal of the current run: one per solving run, reopened under the
same name by a scoring run.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..caching.lookup import CacheUse
from ..chats.chat import Chat
from ..dataset import DatasetRow
from ..engine.options import DEFAULT_CONCURRENCY, RunOptions
from ..engine.scorer_set import scorer_names
from ..engine.user_functions import FunctionSpec
from ..log import schema as log_schema
from ..log.journal_format import written_key
from ..log.writer import LogWriter
from ..metrics import Metric
from ..samples import Sample, SampleRecord
from ..sandboxes.base import SandboxSpec
from ..statistics.corrected import CorrectedMean
from ..statistics.intervals import MetricStat
from ..storage.location import Store
from ..storage.shipper import Shipper
from ..vocab.batch_records import BatchRecord
from ..vocab.usage import UsageLedger

__all__ = ["RunState", "TaskSetup"]


@dataclass(slots=True)
class TaskSetup:
    """What the task evaluates and where it logs, as configured."""

    name: str
    dir: Path
    rows: list[DatasetRow]
    solver: Callable[..., Any]
    solver_spec: FunctionSpec
    scorer: Callable[..., Any] | None
    scorer_spec: FunctionSpec | None
    metric_fns: dict[str, Metric] | None
    epochs: int | None
    #: How each sample's epochs become one score before metrics (None: every epoch counts).
    reducer: str | None = None
    #: The metadata column whose values cluster the scores (None: by sample).
    cluster: str | None = None
    #: The object store the logs go to (`dir` is then its local staging directory).
    store: Store | None = None
    #: The metadata column of human grades (None: none; see task/human_grades.py).
    human: str | None = None
    #: Each sample's sandbox (None: the samples have none).
    sandbox: SandboxSpec | None = None
    positions: dict[Any, int] = field(init=False)

    def __post_init__(self) -> None:
        self.positions = {row.id: i for i, row in enumerate(self.rows)}
        for i, row in enumerate(self.rows):  # ids as a journal reads them back, too
            self.positions.setdefault(written_key((row.id, 1))[0], i)

    @property
    def scorer_label(self) -> str | None:
        """The primary scorer's name (the first of several)."""
        names = self.scorer_names
        return names[0] if names else None

    @property
    def scorer_names(self) -> list[str]:
        """The names the scores are kept and logged under, one per scorer, in order."""
        return scorer_names(self.scorer, self.scorer_spec.label if self.scorer_spec else None)

    def live_chats(self) -> list[Chat]:
        candidates = (
            getattr(self.solver, "solver_chat", None),
            getattr(self.scorer, "scorer_chat", None),
        )
        panel = getattr(self.scorer, "judges", None) or []
        return [c for c in (*candidates, *panel) if isinstance(c, Chat)]

    def order(self, key: tuple[Any, int]) -> tuple[int, int]:
        return (self.positions.get(key[0], len(self.positions)), key[1])

    def cluster_of(self, sample: Sample) -> Hashable:
        """The cluster of a sample's scores: its `cluster` column's value, else its id."""
        if self.cluster is None:
            return sample.id
        position = self.positions.get(sample.id)
        metadata = self.rows[position].metadata if position is not None else sample.metadata
        value = metadata.get(self.cluster)
        return value if isinstance(value, Hashable) else repr(value)


@dataclass(slots=True)
class RunState:
    """The results of the task's last run and what its log needs. See the module docstring."""

    records: list[SampleRecord] | None = None
    scored: bool = False
    metrics: dict[str, float] | None = None
    metric_stats: dict[str, MetricStat] | None = None
    #: Metrics over the samples scored before a run was cancelled or failed (the log's).
    partial_metrics: dict[str, MetricStat] | None = None
    #: With several scorers, every scorer's metric statistics by its name, the primary's
    #: (`metric_stats`) first; of a run that did not succeed, over what it scored.
    scorer_stats: dict[str, dict[str, MetricStat]] | None = None
    #: Each scorer's mean corrected by the human grades (`Task(human=)`), by name, and
    #: how many scored samples have a human grade (None: no human grades).
    corrected: dict[str, CorrectedMean] | None = None
    human_graded: int | None = None
    solve_ledger: UsageLedger = field(default_factory=UsageLedger)
    score_ledger: UsageLedger = field(default_factory=UsageLedger)
    run_id: str | None = None
    eval_id: str | None = None
    created: float | None = None
    started_at: float | None = None
    completed_at: float | None = None
    status: log_schema.Status = "started"
    error: log_schema.EvalError | None = None
    epochs: int = 1
    #: The ids of the rows the last solving run took, in its order (None: no run yet),
    #: and the options it chose them by (`limit`, `sample_ids`, `shuffle`, `seed`).
    sample_ids: list[int | str] | None = None
    selection: RunOptions | None = None
    limit_history: list[log_schema.ConnectionLimitChange] = field(default_factory=list)
    writer: LogWriter | None = None
    #: The shipper of the journal to the task's store (None: logs stay on this disk).
    shipper: Shipper | None = None
    log_name: str | None = None
    log_path: Path | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    #: The solver's model as known before its first call (`solver_chat=` of the run).
    solver_model: str | None = None
    #: The provider batches of the run, by key (what is known of each, without requests).
    batches: dict[str, BatchRecord] = field(default_factory=dict)
    #: What stopped the last run at its budget, and what it spent against it (None: no).
    budget_reason: str | None = None
    budget_spent: float | None = None
    #: Calls the cache answered, and calls sent for want of a cached reply (and kept),
    #: over the runs since the last solving one; None when none of them used a cache.
    cache_hits: int | None = None
    cache_misses: int | None = None
    #: What the log's eval metadata adds (`rescored_from`: the log a re-scoring run scored).
    header_metadata: dict[str, Any] | None = None

    def count_cache(self, use: CacheUse | None) -> None:
        """Add a finished run's cache counts (a run without a cache adds nothing).

        Example:
            >>> state.count_cache(run.cache)
            >>> state.cache_hits, state.cache_misses
            (3, 5)
        """
        if use is None or (use.default is None and not (use.hits or use.misses)):
            return
        self.cache_hits = (self.cache_hits or 0) + use.hits
        self.cache_misses = (self.cache_misses or 0) + use.misses

    def reset_solutions(self) -> None:
        self.records = None
        self.batches = {}
        self.cache_hits = self.cache_misses = None
        self.solve_ledger = UsageLedger()
        self.reset_scores()

    def reset_scores(self) -> None:
        self.scored = False
        self.metrics = None
        self.metric_stats = None
        self.partial_metrics = None
        self.scorer_stats = None
        self.corrected = self.human_graded = None
        self.score_ledger = UsageLedger()
        for record in self.records or []:
            record.clear_score()
            record.score_started = record.score_completed = None
            record.usage.drop_role("scorer")
            if record.error is not None and record.error.stage == "score":
                record.error = None

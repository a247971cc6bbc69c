"""`Task`: a dataset, a solver and a scorer, and the steps that evaluate them.

`eval()` = `solve()` -> `score()` -> `measure()` -> `log()`, with solving and
scoring pipelined in one run. Each running step has an `*_async` twin; the
sync ones work in scripts, in notebooks and in worker threads.
"""

from __future__ import annotations

import copy
import functools
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from .._errors import ConfigError, TaskStateError
from .._sync import run_sync
from .._words import plural
from ..chats.chat import Chat
from ..dataset import DatasetRow, dataset_name, known_columns, load_dataset
from ..dataset_files import file_rows
from ..engine.options import (
    EvalKeywords,
    RunOptions,
    ScoreKeywords,
    SolveKeywords,
    check_epochs,
    options_of,
)
from ..engine.scorer_set import as_scorer
from ..engine.user_functions import route_kwargs, spec_of
from ..frames import dataset_frame, records_frame
from ..log.writer import clean_task_name
from ..metrics import Metric, check_metrics
from ..sandboxes.base import SandboxSpec, sandbox_spec, solver_sandbox
from ..statistics.corrected import CorrectedMean
from ..statistics.intervals import MetricStat
from ..statistics.reducers import check_reducer
from ..vocab.usage import UsageLedger
from .estimate import Estimate, estimate_cost
from .human_grades import check_human, correct_by_humans
from .logfile import rehydrate_records, write_log
from .measuring import measure_scorers
from .running import raise_if_failed, resumable, run_task
from .spending import budget_error, known_chats, make_budget
from .state import RunState, TaskSetup
from .stores import place, shown_dir
from .streaming import SampleStream, Sink

if TYPE_CHECKING:
    import polars as pl

__all__ = ["Task"]

#: The run options of score(), solve() and eval(): a misspelt one gets a "did you mean".
_SCORE_OPTIONS = options_of("score")
_SOLVE_OPTIONS = options_of("solve")
_EVAL_OPTIONS = (*options_of("eval"), "view", "resume")


class Task:
    """An evaluation: a dataset, a solver and a scorer.

    Args:
        dataset: a list of dicts, a polars or pandas DataFrame, or a path to a
            .jsonl/.json/.csv/.parquet file, with `input` and `target` columns
            (and optionally `id`; other columns are per-sample metadata).
        solver: a function of a sample's input, sync or async, returning the
            result string (a number is taken as its text), or a `Solution` with the
            chat it used. See `generate()`.
        scorer: a function of a `SolvedSample` returning a grade, a number, a
            bool or a `Score`. See `detect_includes()` and friends. A list of
            several: each scores every sample and has its own metrics (the first's
            are `task.metrics`; each one's in `task.metrics_by_scorer`).
        metrics: a dict of name -> function(scores) -> number; default accuracy.
        epochs: how many times to run each sample (default 1).
        name: the task's name in logs (default: the dataset file's name, or "task").
        dir: where logs are written (default: VITALS_LOG_DIR, else ./logs): a local
            directory, or any fsspec URL (`s3://bucket/prefix`; docs: guide/logs.md,
            "Logs in object storage").
        log_format: "json" (one JSON file) or "eval" (Inspect's zip format).
        reducer: how each sample's epochs become one score before the metrics: None
            (default: every epoch's score counts), "mean", "mode", "max" or
            "pass_at_<k>" (e.g. "pass_at_2"). `get_samples()` keeps every epoch.
        cluster: a metadata column whose values cluster the scores for the metrics'
            standard errors (default: a sample's epochs are one cluster). Every row
            needs a value.
        human: a metadata column of human grades (C/P/I, numbers or booleans) that some
            rows have: each scorer's mean is then also reported corrected by them, with
            its 95% interval (`task.corrected`; docs: guide/grading.md, "Human grades
            correct the judge").
        sandbox: where each sample's tools run, one sandbox a sample (per epoch): "bwrap"
            (bubblewrap: this host's system read-only, a work directory of its own, no
            network), "docker" (a container; `("docker", "Dockerfile")` builds one),
            "local" (a temporary directory, nothing isolated) or a `ve.SandboxSpec`. A
            sample's `files` column (path to contents) is written there and its `setup`
            column (a shell script) run before it is solved (docs: guide/agents.md).

    Example:
        >>> task = Task(
        ...     dataset=[{"input": "What's 2+2?", "target": "4"}],
        ...     solver=generate(chat_mock()),
        ...     scorer=detect_includes(),
        ... )
        >>> task.eval().metrics
        {'accuracy': 1.0}
    """

    def __init__(
        self,
        dataset: Any,
        solver: Callable[..., Any],
        scorer: Callable[..., Any] | Sequence[Callable[..., Any]] | None = None,
        metrics: dict[str, Metric] | None = None,
        epochs: int | None = None,
        name: str | None = None,
        dir: str | Path | None = None,
        log_format: str = "json",
        reducer: str | None = None,
        cluster: str | None = None,
        human: str | None = None,
        sandbox: str | tuple[Any, Any] | SandboxSpec | None = None,
    ) -> None:
        if log_format not in ("json", "eval"):
            raise ConfigError(f"`log_format` must be 'json' or 'eval', not {log_format!r}.")
        self.log_format = log_format
        rows = load_dataset(
            file_rows(dataset) if isinstance(dataset, str | os.PathLike) else dataset
        )
        chosen: Callable[..., Any] | None = as_scorer(scorer)
        # Checked in this order, so the first bad argument is the one reported.
        self._setup = TaskSetup(
            rows=rows,
            solver_spec=spec_of(solver, "solver"),
            scorer_spec=spec_of(chosen, "scorer") if chosen is not None else None,
            solver=solver,
            scorer=chosen,
            metric_fns=check_metrics(metrics),
            epochs=check_epochs(epochs),
            name=clean_task_name(name or dataset_name(dataset) or "task"),
            dir=Path(),
            reducer=check_reducer(reducer, epochs),
            cluster=_check_cluster(cluster, rows),
            human=check_human(human, rows),
            sandbox=solver_sandbox(sandbox_spec(sandbox), solver),
        )
        self._state = RunState()
        self.dir = dir

    # -- state ---------------------------------------------------------------

    # Public attributes that live in the setup or the run state, where runs and logs read them.
    @property
    def name(self) -> str:
        return self._setup.name

    @name.setter
    def name(self, value: str) -> None:
        self._setup.name = value

    @property
    def dir(self) -> Path | str:
        """Where the logs go: a local directory, or an object store's URL (whose runs
        write their journals in a staging directory of this machine, then ship them)."""
        return shown_dir(self._setup)

    @dir.setter
    def dir(self, value: str | os.PathLike[str] | None) -> None:
        self._setup.dir, self._setup.store = place(value)

    @property
    def cluster(self) -> str | None:
        """The metadata column whose values cluster the metrics' scores (None: a sample's
        epochs are one cluster), as `Task(cluster=)` set it."""
        return self._setup.cluster

    @property
    def metrics(self) -> dict[str, float] | None:
        return self._state.metrics

    @metrics.setter
    def metrics(self, value: dict[str, float] | None) -> None:
        self._state.metrics = value
        self._state.metric_stats = None  # they were those of the metrics replaced

    @property
    def metric_stats(self) -> dict[str, MetricStat] | None:
        """The metrics with their standard errors and 95% intervals (None before
        `measure()`): name -> `MetricStat(value, stderr, low, high, n, clusters)`.

        Example:
            >>> task.eval().metric_stats["accuracy"]
            MetricStat(value=0.7, stderr=0.1528, low=0.3544, high=1.0, n=10, clusters=10)
        """
        return self._state.metric_stats

    @property
    def metrics_by_scorer(self) -> dict[str, dict[str, float]] | None:
        """Each scorer's metrics by scorer name, the primary's first (None before
        `measure()`). With one scorer, its name and `task.metrics`.

        Example:
            >>> task = Task(ds, solver, scorer=[detect_includes(), model_graded_qa()])
            >>> task.eval().metrics_by_scorer
            {'detect_includes': {'accuracy': 0.8}, 'model_graded_qa': {'accuracy': 0.7}}
        """
        state = self._state
        if state.scorer_stats is not None and state.metrics is not None:
            return {
                name: {metric: stat.value for metric, stat in stats.items()}
                for name, stats in state.scorer_stats.items()
            }
        if state.metrics is None or self._setup.scorer_label is None:
            return None
        return {self._setup.scorer_label: dict(state.metrics)}

    @property
    def corrected(self) -> dict[str, CorrectedMean] | None:
        """Each scorer's mean corrected by the human grades of `Task(human=)`, by scorer
        name (None before `measure()` or without human grades; a scorer is missing when
        fewer than 2 of its scored samples have a human grade). Each holds the corrected
        mean with its 95% interval, the judge's and the humans' means, the judge's bias
        and its agreement with the humans.

        Example:
            >>> task = Task(ds, solver, scorer=model_graded_qa(), human="grade").eval()
            >>> task.corrected["model_graded_qa"].corrected.value
            0.71
        """
        return self._state.corrected

    @property
    def scorer_names(self) -> list[str]:
        """The names of the task's scorers, as its scores and log name them."""
        return self._setup.scorer_names

    @property
    def log_path(self) -> Path | None:
        return self._state.log_path

    @log_path.setter
    def log_path(self, value: Path | None) -> None:
        self._state.log_path = value

    @property
    def solved(self) -> bool:
        return self._state.records is not None

    @property
    def scored(self) -> bool:
        return self._state.scored

    @property
    def solver(self) -> Callable[..., Any]:
        """The solver, as given."""
        return self._setup.solver

    @property
    def scorer(self) -> Callable[..., Any] | None:
        """The scorer, as given (several are a `ScorerSet`: `.scorers` lists them)."""
        return self._setup.scorer

    def takes(self, argument: str) -> bool:
        """Whether `eval(argument=...)` would reach the solver or the scorer."""
        try:
            route_kwargs({argument: None}, self._setup.solver_spec, self._setup.scorer_spec)
        except ConfigError:
            return False
        return True

    @property
    def elapsed(self) -> float | None:
        """Seconds the last run took, or None before any run."""
        if self._state.started_at is None or self._state.completed_at is None:
            return None
        return self._state.completed_at - self._state.started_at

    def set_solver(self, solver: Callable[..., Any]) -> Task:
        """Use another solver; clears results, scores and metrics."""
        self._setup.solver_spec = spec_of(solver, "solver")
        self._setup.solver = solver
        self._state.reset_solutions()
        return self

    def set_scorer(self, scorer: Callable[..., Any] | Sequence[Callable[..., Any]]) -> Task:
        """Use another scorer (or a list of several); clears scores and metrics."""
        chosen: Callable[..., Any] = as_scorer(scorer)
        self._setup.scorer_spec = spec_of(chosen, "scorer")
        self._setup.scorer = chosen
        self._state.reset_scores()
        return self

    def set_metrics(self, metrics: dict[str, Metric] | None) -> Task:
        """Use other metrics (None: accuracy); clears computed metrics."""
        self._setup.metric_fns = check_metrics(metrics)
        self.metrics = None
        return self

    def clone(self) -> Task:
        """An independent copy: running it leaves this task untouched."""
        twin = copy.copy(self)
        twin._setup = copy.copy(self._setup)
        twin._state = state = copy.copy(self._state)
        if state.records is not None:
            state.records = [replace(r, usage=_copy_ledger(r.usage)) for r in state.records]
        state.solve_ledger = _copy_ledger(state.solve_ledger)
        state.score_ledger = _copy_ledger(state.score_ledger)
        state.metrics = dict(state.metrics) if state.metrics is not None else None
        state.metric_stats = dict(state.metric_stats) if state.metric_stats is not None else None
        state.scorer_stats = dict(state.scorer_stats) if state.scorer_stats is not None else None
        return twin

    # -- running -----------------------------------------------------------------

    def eval(
        self,
        *,
        view: bool = False,
        resume: bool | str | Path | None = None,
        **options: Unpack[EvalKeywords],
    ) -> Task:
        """Solve, score, measure and log, then return the task.

        Args:
            view: open the viewer on the log directory afterwards.
            resume: continue a run that did not finish: True finds the newest
                journal of this task in `task.dir`; or the path of a journal or
                unfinished log. A finished sample is kept, not run again, when its
                input, target, solver model and scorer match this run's; ids gone
                from the dataset are left out. A run of another solver, scorer or
                model is refused (ConfigError), unless `resume_anyway=True`.
            **options: the run's options, documented in `ve.EvalOptions`
                (`vitals_engine/engine/options.py`): `epochs`, `max_concurrency`,
                `rate_limits`, `retry`, `fail_on_error`, `cache`, `cost_budget`, ... Any other
                keyword is routed to the solver and/or scorer by their signatures, so
                `task.eval(solver_chat=other_chat)` re-runs on another model.

        Example:
            >>> task.eval(epochs=3, max_concurrency=50, retry=ve.Retry(max_attempts=8))
        """
        return run_sync(functools.partial(self.eval_async, view=view, resume=resume, **options))

    async def eval_async(
        self,
        *,
        view: bool = False,
        resume: bool | str | Path | None = None,
        **options: Unpack[EvalKeywords],
    ) -> Task:
        """The async form of `eval()`."""
        checked, kwargs = RunOptions.parse(options)
        await self._evaluate(checked, kwargs, resume=resume)
        if view:
            self.view()
        return self

    def stream_async(self, **options: Unpack[EvalKeywords]) -> SampleStream:
        """Evaluate, handing each sample to the caller as soon as it is solved and scored.

        A slow consumer slows the run (nothing piles up in memory); leaving
        the block early cancels the run and logs what finished. Takes `eval()`'s run
        options (`ve.EvalOptions`), `cache`, `cost_budget` and `token_budget` included (a run its
        budget stops ends the stream with `BudgetExceeded`); it draws no progress bar
        unless `progress=True`.

        Example:
            >>> async with task.stream_async(epochs=2) as samples:
            ...     async for record in samples:
            ...         print(record.sample.id, record.score.value if record.score else None)
        """
        checked, kwargs = RunOptions.parse({"progress": False, **options})
        return SampleStream(functools.partial(self._evaluate, checked, kwargs))

    def _own(self, options: RunOptions) -> RunOptions:
        """`options` with this task's defaults where they leave it to the task."""
        if options.log_format is None:
            return replace(options, log_format=self.log_format)
        return options

    async def _evaluate(
        self,
        options: RunOptions,
        kwargs: dict[str, Any],
        sink: Sink | None = None,
        *,
        resume: bool | str | Path | None = None,
    ) -> None:
        """One evaluation with its options checked: `eval()`'s, `stream_async()`'s (each
        finished sample to `sink`) and each run of an eval set. `kwargs` go to the solver
        and scorer."""
        setup = self._setup
        resumed = resumable(setup, resume)
        if setup.scorer_spec is None:
            raise TaskStateError("This task has no scorer: pass scorer= or call set_scorer().")
        solver_kw, scorer_kw = route_kwargs(
            kwargs, setup.solver_spec, setup.scorer_spec, _EVAL_OPTIONS
        )
        chats = _check_keys(setup.solver, solver_kw, "solver_chat") + _check_keys(
            setup.scorer, scorer_kw, "scorer_chat"
        )
        options = self._own(options)
        await run_task(
            setup,
            self._state,
            options,
            solve=True,
            score=True,
            solver_kwargs=solver_kw,
            scorer_kwargs=scorer_kw,
            sink=sink,
            resume=resumed,
            budget=make_budget(options, setup.rows, chats),
        )
        self.measure()
        self.log()
        over = budget_error(self._state)
        if over is not None:
            raise over
        raise_if_failed(self._state, options)

    def solve(self, **options: Unpack[SolveKeywords]) -> Task:
        """Run the solver on every sample (and epoch); clears earlier results.

        Takes the run options of `ve.SolveOptions` (`epochs`, `max_concurrency`,
        `rate_limits`, `retry`, `progress`, as `eval()` does); other keywords are routed
        to the solver.

        Example:
            >>> task.solve(epochs=2, max_concurrency=8).get_samples()["result"]
        """
        return run_sync(functools.partial(self.solve_async, **options))

    async def solve_async(self, **options: Unpack[SolveKeywords]) -> Task:
        """The async form of `solve()`."""
        checked, kwargs = RunOptions.parse(options, "solve")
        solver_kw, _ = route_kwargs(kwargs, self._setup.solver_spec, None, _SOLVE_OPTIONS)
        _check_keys(self._setup.solver, solver_kw, "solver_chat")
        await run_task(
            self._setup,
            self._state,
            self._own(checked),
            solve=True,
            score=False,
            solver_kwargs=solver_kw,
        )
        return self

    def score(self, **options: Unpack[ScoreKeywords]) -> Task:
        """Run the scorer on every solved sample; clears earlier scores.

        Takes the run options of `ve.ScoreOptions` (`max_concurrency`, `rate_limits`,
        `retry`, `progress`, as `eval()` does); other keywords are routed to the scorer.

        Example:
            >>> task.score(max_concurrency=8).metrics
        """
        return run_sync(functools.partial(self.score_async, **options))

    async def score_async(self, **options: Unpack[ScoreKeywords]) -> Task:
        """The async form of `score()`."""
        if self._state.records is None:
            raise TaskStateError("Task has not been solved yet. Run task.solve() first.")
        if self._setup.scorer_spec is None:
            raise TaskStateError("This task has no scorer: pass scorer= or call set_scorer().")
        checked, kwargs = RunOptions.parse(options, "score")
        _, scorer_kw = route_kwargs(kwargs, None, self._setup.scorer_spec, _SCORE_OPTIONS)
        _check_keys(self._setup.scorer, scorer_kw, "scorer_chat")
        await run_task(
            self._setup,
            self._state,
            self._own(checked),
            solve=False,
            score=True,
            scorer_kwargs=scorer_kw,
        )
        return self

    # -- results ------------------------------------------------------------------

    def measure(self) -> dict[str, float]:
        """Compute the metrics over the scores and return them (also in `task.metrics`;
        with their standard errors and 95% intervals in `task.metric_stats`).

        Samples that failed are left out. With `Task(reducer=)`, each sample's epochs are
        reduced to one score first. The standard errors treat a sample's epochs (or the
        rows sharing a value of `Task(cluster=)`'s column) as one cluster.
        """
        state, setup = self._state, self._setup
        if not state.scored or state.records is None:
            raise TaskStateError("Task has not been scored yet. Run task.score() first.")
        by_scorer = measure_scorers(setup, state.records)
        stats = next(iter(by_scorer.values()))
        self.metrics = {name: stat.value for name, stat in stats.items()}
        state.metric_stats = stats
        state.scorer_stats = by_scorer if len(by_scorer) > 1 else None
        if setup.human is not None:
            state.corrected, state.human_graded = correct_by_humans(setup, state.records)
        return self.metrics

    def get_samples(self) -> pl.DataFrame:
        """One row per (sample, epoch): id, epoch, input, target, metadata columns,
        result, score, scorer, answer, explanation, and the chats where present.
        Before solving, the dataset itself."""
        setup, state = self._setup, self._state
        if state.records is None:
            return dataset_frame(setup.rows)
        rehydrate_records(setup, state, state.records)
        return records_frame(state.records, setup.scorer_label, scored=state.scored)

    def get_cost(self) -> pl.DataFrame:
        """Requests, tokens and cost by role (solver, scorer) and model; `timed_out` counts
        the attempts that timed out after their request was sent, whose guessed input is
        in the row's tokens and cost."""
        ledger = UsageLedger()
        ledger.merge(self._state.solve_ledger)
        ledger.merge(self._state.score_ledger)
        return ledger.to_frame()

    # -- logging --------------------------------------------------------------------

    def log(self, dir: str | Path | None = None) -> Path:
        """Write the log of the last run into `dir` (default `task.dir`); return its path.

        `eval()` calls it. After `solve()` / `score()` the samples are already in
        the run's journal; this composes the final log from it.
        """
        return write_log(self._setup, self._state, dir)

    def view(self) -> Any:
        """Open the log viewer on this task's log directory, in the background.

        Returns the running viewer (`.url`, `.stop()`).
        """
        from ..viewer.launch import view

        return view(self.dir, block=False)

    # -- cost before the run --------------------------------------------------------

    def estimate_cost(
        self,
        sample: int = 20,
        *,
        epochs: int | None = None,
        local: bool = False,
        seed: int = 0,
        **kwargs: Any,
    ) -> Estimate:
        """What `eval()` would cost: tokens and dollars by role and model, with a range.

        Runs `sample` rows drawn at random (with `seed`: the same rows each time), once
        each, on a clone of this task logging into a temporary directory (removed after;
        this task is left as it was), and extrapolates each sample's own usage to every
        row x epoch. The range is about a 95% interval from the spread between the
        samples (see `vitals_engine/task/estimate.py`), never below what the sample
        spent; with every row sampled, the estimate is exact. Calls the cache answered
        are priced as if sent, as a fresh run would send them. A model with no known
        price has cost None.

        Args:
            sample: rows to run (every row when the dataset has no more).
            epochs: runs per sample of the run to estimate (default: `Task(epochs=)`,
                else 1); the sample runs each row once whatever it is.
            local: call nothing: count each row's input tokens for the solver's model
                (about 4 characters a token) and price them over every row x epoch.
                Output tokens and the scorer's calls stay unknown (None, with a note).
            seed: picks the rows (and, with `shuffle=True`, is the shuffle's seed).
            **kwargs: `limit`, `sample_ids` and `shuffle` estimate the run they select, as
                in `eval()`; the rest are routed to the solver and/or scorer as `eval()` routes them
                (`solver_chat=other_chat`); the run options `max_concurrency`,
                `limits`, `retry`, `fail_on_error`, `progress`, `backend` and `batch`
                go to the sample's run.

        Example:
            >>> estimate = task.estimate_cost(sample=20, epochs=2)
            >>> print(estimate)   # the table, then "about $12.40 ($10.90-$13.90) for ..."
            >>> task.estimate_cost(local=True).rows["input_tokens"]
        """
        return run_sync(
            functools.partial(
                self.estimate_cost_async, sample, epochs=epochs, local=local, seed=seed, **kwargs
            )
        )

    async def estimate_cost_async(
        self,
        sample: int = 20,
        *,
        epochs: int | None = None,
        local: bool = False,
        seed: int = 0,
        **kwargs: Any,
    ) -> Estimate:
        """The async form of `estimate_cost()`."""
        return await estimate_cost(
            self._setup,
            self._clone_with,
            sample,
            epochs=epochs,
            local=local,
            seed=seed,
            kwargs=kwargs,
        )

    def _clone_with(self, setup: TaskSetup) -> Task:
        """A clone of this task with another setup (the rows and log directory of an
        estimate's sample)."""
        twin = self.clone()
        twin._setup = setup
        return twin

    def __repr__(self) -> str:
        state = "scored" if self._state.scored else "solved" if self.solved else "not run"
        metrics = ", ".join(f"{k}={v:.3g}" for k, v in (self.metrics or {}).items())
        return (
            f"<Task {self.name}: {plural(len(self._setup.rows), 'sample')}, {state}"
            + (f", {metrics}" if metrics else "")
            + ">"
        )


def _check_keys(fn: Any, routed: dict[str, Any], slot: str) -> list[Chat]:
    """Before a run starts: an `AuthenticationError` naming the variable to set for a chat
    the run will use that has no API key. Those chats are the ones passed to this run
    (`eval(solver_chat=...)`, as `vitals eval --model` does) and, unless replaced, the one
    a built-in solver or judge holds (`generate(chat)`, `model_graded_qa(scorer_chat=)`).
    A chat hidden inside a function of the user's is checked at its first request.
    Returns the chats checked."""
    chats = known_chats(fn, routed, slot)
    for chat in chats:
        chat.provider.check_key()
    return chats


def _check_cluster(cluster: Any, rows: list[DatasetRow]) -> str | None:
    """`Task(cluster=)`: None, or a metadata column every row has a value in."""
    if cluster is None:
        return None
    if not isinstance(cluster, str) or not cluster:
        raise ConfigError(
            f"`cluster` must be the name of a metadata column, not {cluster!r}. "
            "Example: cluster='topic'."
        )
    for row in rows:
        value = row.metadata.get(cluster)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            raise ConfigError(
                f"`cluster={cluster!r}`: sample {row.id!r} has no value in column "
                f"{cluster!r}; every row needs one to cluster by (metadata columns: "
                f"{known_columns(rows)})."
            )
    return cluster


def _copy_ledger(ledger: UsageLedger) -> UsageLedger:
    twin = UsageLedger()
    twin.merge(ledger)
    return twin

"""`Task`: a dataset, a solver and a scorer, and the steps that evaluate them.

`eval()` = `solve()` -> `score()` -> `measure()` -> `log()`, with solving and
scoring pipelined in one run. Each running step has an `*_async` twin; the
sync ones work in scripts, in notebooks and in worker threads.
"""

from __future__ import annotations

import collections
import copy
import functools
import hashlib
import importlib.metadata
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import polars as pl

from .. import config
from .._errors import ConfigError, EvalFailedError, TaskStateError, VitalsError
from .._sync import run_sync
from ..chats.chat import Chat
from ..dataset import DatasetRow, dataset_name, expand_epochs, load_dataset
from ..engine.calls import FunctionSpec, describe, route_kwargs
from ..engine.run import Run
from ..frames import dataset_frame, records_frame
from ..log import schema as log_schema
from ..log.compose import RunHeader, compose_header, compose_sample
from ..log.writer import LogWriter, clean_task_name, log_file_name, new_id, write_json_log
from ..metrics import Metric, check_metrics, compute_metrics, score_series
from ..pacing.limits import Limits
from ..pacing.retry import Retry
from ..progress import ProgressBar
from ..samples import SampleRecord
from ..transport.pool import transport_scope
from ..vocab.usage import UsageLedger
from .options import DEFAULT_CONCURRENCY, RunOptions, allowed_failures, check_epochs
from .resume import Resumed, find_resumable, load_resume
from .spill import SPILL_AFTER, is_spilled, rehydrate, spill
from .streaming import SampleStream, Sink, first_error

__all__ = ["Task"]


class Task:
    """An evaluation: a dataset, a solver and a scorer.

    Args:
        dataset: a list of dicts, a polars or pandas DataFrame, or a path to a
            .jsonl/.json/.csv/.parquet file, with `input` and `target` columns
            (and optionally `id`; other columns are per-sample metadata).
        solver: a function of a sample's input, sync or async, returning the
            result string (or a `Solution` with the chat it used). See `generate()`.
        scorer: a function of a `SolvedSample` returning a grade, a number, a
            bool or a `Score`. See `detect_includes()` and friends.
        metrics: a dict of name -> function(scores) -> number; default accuracy.
        epochs: how many times to run each sample (default 1).
        name: the task's name in logs (default: the dataset file's name, or "task").
        dir: where logs are written (default: VITALS_LOG_DIR, else ./logs).
        log_format: "json" (one JSON file) or "eval" (Inspect's zip format).

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
        scorer: Callable[..., Any] | None = None,
        metrics: dict[str, Metric] | None = None,
        epochs: int | None = None,
        name: str | None = None,
        dir: str | Path | None = None,
        log_format: str = "json",
    ) -> None:
        if log_format not in ("json", "eval"):
            raise ConfigError(f"`log_format` must be 'json' or 'eval', not {log_format!r}.")
        self.log_format = log_format
        self._rows: list[DatasetRow] = load_dataset(dataset)
        self._solver_spec = describe(solver, "solver")
        self._scorer_spec = describe(scorer, "scorer") if scorer is not None else None
        self._solver = solver
        self._scorer = scorer
        self._metric_fns = check_metrics(metrics)
        self._epochs = check_epochs(epochs)
        self.name = clean_task_name(name or dataset_name(dataset) or "task")
        self.dir: Path = Path(dir or config.log_dir() or config.DEFAULT_LOG_DIR)
        self.metrics: dict[str, float] | None = None
        self.log_path: Path | None = None
        self._records: list[SampleRecord] | None = None
        self._scored = False
        #: Metrics over the samples scored before a run was cancelled or failed (the log's).
        self._partial_metrics: dict[str, float] | None = None
        self._solve_ledger = UsageLedger()
        self._score_ledger = UsageLedger()
        self._run_id: str | None = None
        self._eval_id: str | None = None
        self._created: float | None = None
        self._started_at: float | None = None
        self._completed_at: float | None = None
        self._status: log_schema.Status = "started"
        self._run_error: log_schema.EvalError | None = None
        self._run_epochs = 1
        self._limit_history: list[log_schema.ConnectionLimitChange] = []
        self._writer: LogWriter | None = None
        self._log_name: str | None = None
        self._positions = {row.id: i for i, row in enumerate(self._rows)}
        self._concurrency = DEFAULT_CONCURRENCY

    # -- state ---------------------------------------------------------------

    @property
    def solved(self) -> bool:
        return self._records is not None

    @property
    def scored(self) -> bool:
        return self._scored

    @property
    def solver(self) -> Callable[..., Any]:
        """The solver, as given."""
        return self._solver

    @property
    def scorer(self) -> Callable[..., Any] | None:
        """The scorer, as given."""
        return self._scorer

    def takes(self, argument: str) -> bool:
        """Whether `eval(argument=...)` would reach the solver or the scorer."""
        try:
            route_kwargs({argument: None}, self._solver_spec, self._scorer_spec)
        except ConfigError:
            return False
        return True

    @property
    def elapsed(self) -> float | None:
        """Seconds the last run took, or None before any run."""
        if self._started_at is None or self._completed_at is None:
            return None
        return self._completed_at - self._started_at

    def set_solver(self, solver: Callable[..., Any]) -> Task:
        """Use another solver; clears results, scores and metrics."""
        self._solver_spec = describe(solver, "solver")
        self._solver = solver
        self._reset_solutions()
        return self

    def set_scorer(self, scorer: Callable[..., Any]) -> Task:
        """Use another scorer; clears scores and metrics."""
        self._scorer_spec = describe(scorer, "scorer")
        self._scorer = scorer
        self._reset_scores()
        return self

    def set_metrics(self, metrics: dict[str, Metric] | None) -> Task:
        """Use other metrics (None: accuracy); clears computed metrics."""
        self._metric_fns = check_metrics(metrics)
        self.metrics = None
        return self

    def clone(self) -> Task:
        """An independent copy: running it leaves this task untouched."""
        twin = copy.copy(self)
        if self._records is not None:
            twin._records = [replace(r, usage=_copy_ledger(r.usage)) for r in self._records]
        twin._solve_ledger = _copy_ledger(self._solve_ledger)
        twin._score_ledger = _copy_ledger(self._score_ledger)
        twin.metrics = dict(self.metrics) if self.metrics is not None else None
        return twin

    def _reset_solutions(self) -> None:
        self._records = None
        self._solve_ledger = UsageLedger()
        self._reset_scores()

    def _reset_scores(self) -> None:
        self._scored = False
        self.metrics = None
        self._partial_metrics = None
        self._score_ledger = UsageLedger()
        for record in self._records or []:
            record.score = None
            record.score_started = record.score_completed = None
            record.usage.drop_role("scorer")
            if record.error is not None and record.error.stage == "score":
                record.error = None

    # -- running -----------------------------------------------------------------

    def eval(
        self,
        *,
        epochs: int | None = None,
        view: bool = False,
        max_concurrency: int | None = None,
        limits: Limits | None = None,
        retry: Retry | None = None,
        fail_on_error: bool | int | float | None = None,
        progress: bool | None = None,
        log_format: str | None = None,
        resume: bool | str | Path | None = None,
        **kwargs: Any,
    ) -> Task:
        """Solve, score, measure and log, then return the task.

        Args:
            epochs: runs per sample (default: `Task(epochs=)`, else 1).
            view: open the viewer on the log directory afterwards.
            max_concurrency: samples in flight at once (default 32).
            limits: `Limits(max_concurrency=, rpm=, tpm=)` for every model of
                the run (a model's own `limits=` wins).
            retry: `Retry(max_attempts=, timeout=, sample_timeout=)` for every
                model call of the run (a model's own `retry=` wins).
            fail_on_error: failed samples tolerated before the run fails:
                None/True none, False any, a count, or a fraction below 1.
                When exceeded, the log is written and `EvalFailedError` raised.
            progress: draw a progress bar on stderr (default: when stderr is
                a terminal).
            log_format: "json" or "eval" for this run (default: `Task(log_format=)`).
            resume: continue a run that did not finish: True finds the newest
                journal of this task in `task.dir`; or the path of a journal or
                unfinished log. Finished samples are kept and not run again.
            **kwargs: routed to the solver and/or scorer by their signatures,
                so `task.eval(solver_chat=other_chat)` re-runs on another model.
        """
        return run_sync(
            functools.partial(
                self.eval_async,
                epochs=epochs,
                view=view,
                max_concurrency=max_concurrency,
                limits=limits,
                retry=retry,
                fail_on_error=fail_on_error,
                progress=progress,
                log_format=log_format,
                resume=resume,
                **kwargs,
            )
        )

    async def eval_async(
        self,
        *,
        epochs: int | None = None,
        view: bool = False,
        max_concurrency: int | None = None,
        limits: Limits | None = None,
        retry: Retry | None = None,
        fail_on_error: bool | int | float | None = None,
        progress: bool | None = None,
        log_format: str | None = None,
        resume: bool | str | Path | None = None,
        **kwargs: Any,
    ) -> Task:
        """The async form of `eval()`."""
        options = self._options(
            epochs=epochs,
            max_concurrency=max_concurrency,
            limits=limits,
            retry=retry,
            fail_on_error=fail_on_error,
            progress=progress,
            log_format=log_format,
        )
        await self._evaluate(options, kwargs, None, self._resumable(resume))
        if view:
            self.view()
        return self

    def stream_async(
        self,
        *,
        epochs: int | None = None,
        max_concurrency: int | None = None,
        limits: Limits | None = None,
        retry: Retry | None = None,
        fail_on_error: bool | int | float | None = None,
        progress: bool | None = False,
        **kwargs: Any,
    ) -> SampleStream:
        """Evaluate, handing each sample to the caller as soon as it is solved and scored.

        A slow consumer slows the run (nothing piles up in memory); leaving
        the block early cancels the run and logs what finished.

        Example:
            >>> async with task.stream_async(epochs=2) as samples:
            ...     async for record in samples:
            ...         print(record.sample.id, record.score.value if record.score else None)
        """
        options = self._options(
            epochs=epochs,
            max_concurrency=max_concurrency,
            limits=limits,
            retry=retry,
            fail_on_error=fail_on_error,
            progress=progress,
        )
        return SampleStream(functools.partial(self._evaluate, options, kwargs))

    def _options(self, **given: Any) -> RunOptions:
        """eval()'s own options, checked, with this task's defaults filled in."""
        given["log_format"] = given.get("log_format") or self.log_format
        return RunOptions.check(**given)

    async def _evaluate(
        self,
        options: RunOptions,
        kwargs: dict[str, Any],
        sink: Sink | None,
        resume: Resumed | None = None,
    ) -> None:
        if self._scorer_spec is None:
            raise TaskStateError("This task has no scorer: pass scorer= or call set_scorer().")
        solver_kw, scorer_kw = route_kwargs(kwargs, self._solver_spec, self._scorer_spec)
        await self._run(
            options,
            solve=True,
            score=True,
            solver_kwargs=solver_kw,
            scorer_kwargs=scorer_kw,
            sink=sink,
            resume=resume,
        )
        self.measure()
        self.log()
        self._raise_if_failed(options)

    def solve(
        self, *, epochs: int | None = None, max_concurrency: int | None = None, **kwargs: Any
    ) -> Task:
        """Run the solver on every sample (and epoch); clears earlier results.

        Takes `epochs`, `max_concurrency` and the same `limits`, `retry` and
        `progress` options as `eval()`; other keywords are routed to the solver.
        """
        return run_sync(
            functools.partial(
                self.solve_async, epochs=epochs, max_concurrency=max_concurrency, **kwargs
            )
        )

    async def solve_async(
        self,
        *,
        epochs: int | None = None,
        max_concurrency: int | None = None,
        limits: Limits | None = None,
        retry: Retry | None = None,
        progress: bool | None = None,
        **kwargs: Any,
    ) -> Task:
        """The async form of `solve()`."""
        options = self._options(
            epochs=epochs,
            max_concurrency=max_concurrency,
            limits=limits,
            retry=retry,
            progress=progress,
        )
        solver_kw, _ = route_kwargs(kwargs, self._solver_spec, None)
        await self._run(options, solve=True, score=False, solver_kwargs=solver_kw)
        return self

    def score(self, *, max_concurrency: int | None = None, **kwargs: Any) -> Task:
        """Run the scorer on every solved sample; clears earlier scores.

        Takes `max_concurrency`, `limits`, `retry` and `progress` like
        `eval()`; other keywords are routed to the scorer.
        """
        return run_sync(
            functools.partial(self.score_async, max_concurrency=max_concurrency, **kwargs)
        )

    async def score_async(
        self,
        *,
        max_concurrency: int | None = None,
        limits: Limits | None = None,
        retry: Retry | None = None,
        progress: bool | None = None,
        **kwargs: Any,
    ) -> Task:
        """The async form of `score()`."""
        if self._records is None:
            raise TaskStateError("Task has not been solved yet. Run task.solve() first.")
        if self._scorer_spec is None:
            raise TaskStateError("This task has no scorer: pass scorer= or call set_scorer().")
        options = self._options(
            max_concurrency=max_concurrency, limits=limits, retry=retry, progress=progress
        )
        _, scorer_kw = route_kwargs(kwargs, None, self._scorer_spec)
        await self._run(options, solve=False, score=True, scorer_kwargs=scorer_kw)
        return self

    async def _run(
        self,
        options: RunOptions,
        *,
        solve: bool,
        score: bool,
        solver_kwargs: dict[str, Any] | None = None,
        scorer_kwargs: dict[str, Any] | None = None,
        sink: Sink | None = None,
        resume: Resumed | None = None,
    ) -> None:
        epochs = options.epochs or (resume.epochs if resume else None) or self._epochs or 1
        if solve:
            self._reset_solutions()
            self._run_id = new_id()
            if resume is not None:
                self._eval_id, self._created = resume.eval_id, resume.created
                self._log_name = resume.log_name
            else:
                self._eval_id, self._created = new_id(), time.time()
                ext = "eval" if options.log_format == "eval" else "json"
                self._log_name = log_file_name(self._created, self.name, self._eval_id, ext)
            self._run_epochs = epochs
            records: list[SampleRecord] = []
            done = resume.finished if resume is not None else {}
            source: Any = _collecting(expand_epochs(self._rows, epochs), records, done)
            total = len(self._rows) * epochs - len(done)
        else:
            self._reset_scores()
            records = list(self._records or [])
            self._rehydrate(records)
            source = records
            total = len(records)
        self._concurrency = options.max_concurrency
        bar = ProgressBar(self.name) if options.progress else None
        run = Run(
            solver=self._solver_spec if solve else None,
            scorer=self._scorer_spec if score else None,
            solver_kwargs=solver_kwargs,
            scorer_kwargs=scorer_kwargs,
            concurrency=options.max_concurrency,
            samples_frame=lambda recs: records_frame(recs, None, scored=False),
            limits=options.limits,
            retry=options.retry,
            total=total,
            on_progress=bar.update if bar is not None else None,
        )
        self._status = "started"
        self._run_error = None
        writer = self._open_writer(fresh=solve and resume is None)
        if resume is not None:
            self._solve_ledger.merge(resume.ledger, role="solver")
            self._score_ledger.merge(resume.ledger, role="scorer")
        scorer = self._scorer_label

        logged_keys: set[tuple[Any, int]] = set()

        async def logged(record: SampleRecord) -> None:
            writer.add(compose_sample(record, scorer))
            logged_keys.add(record.key)
            if sink is not None:
                await sink(record)
            if len(logged_keys) > SPILL_AFTER:
                spill(record)

        try:
            async with (
                transport_scope(pool_size=options.max_concurrency),
                anyio.create_task_group() as tg,
            ):
                await tg.start(writer.run)
                try:
                    if resume is not None and resume.source != writer.journal:
                        for logged_sample in resume.logged.values():  # events and times kept
                            writer.add(logged_sample)
                    await run.execute(source, logged)
                finally:
                    writer.stop()
        except BaseException as exc:
            error = first_error(exc)
            self._finish_run(run, options, solve, score, records, failed=error)
            for record in records:  # solved when the run stopped, but not through the pipeline
                started = record.result is not None or record.error is not None
                if started and record.key not in logged_keys:
                    writer.add(compose_sample(record, scorer))
            await writer.close()
            if records:
                self._finalize_log(writer)
            if error is not exc:
                raise error from None
            raise
        finally:
            if bar is not None:
                bar.update(run.progress(), force=True)
                bar.close()
        self._finish_run(run, options, solve, score, records, failed=None)
        await writer.close(compose_header(self._header(records)))

    def _resumable(self, resume: bool | str | Path | None) -> Resumed | None:
        """What `eval(resume=...)` continues from, or None for a fresh run."""
        if resume is None or resume is False:
            return None
        if resume is True:
            found = find_resumable(self.dir, self.name)
            if found is None:
                raise ConfigError(
                    f"Nothing to resume: no journal of task '{self.name}' in '{self.dir}'. "
                    "Pass the path of a journal or unfinished log, or run without resume."
                )
            path = found
        else:
            path = Path(resume)
        live = [
            c
            for c in (
                getattr(self._solver, "solver_chat", None),
                getattr(self._scorer, "scorer_chat", None),
            )
            if isinstance(c, Chat)
        ]
        return load_resume(path, self.name, live)

    def _open_writer(self, *, fresh: bool) -> LogWriter:
        """The journal of this task's current run: a new one when solving afresh, else the
        one left open (or, after its log was written, a new one under the same name)."""
        if not fresh and self._writer is not None and not self._writer.finalized:
            self._writer = LogWriter(
                self._writer.path,
                compose_header(self._header(self._records or [])),
                order=self._order,
                resume=True,
            )
            return self._writer
        path = self.dir / (self._log_name or "log.json")
        header = compose_header(self._header(self._records or []))
        self._writer = LogWriter(path, header, order=self._order, resume=not fresh)
        return self._writer

    def _order(self, key: tuple[Any, int]) -> tuple[int, int]:
        return (self._positions.get(key[0], len(self._positions)), key[1])

    def _finish_run(
        self,
        run: Run,
        options: RunOptions,
        solve: bool,
        score: bool,
        records: list[SampleRecord],
        failed: BaseException | None,
    ) -> None:
        self._solve_ledger.merge(run.ledger, role="solver")
        self._score_ledger.merge(run.ledger, role="scorer")
        self._limit_history = [
            log_schema.ConnectionLimitChange(when, f"{provider.lower()}/{model}", old, new, why)
            for (provider, _, model), limiter in run.limits.items()
            for when, old, new, why in limiter.history
        ]
        if solve:
            self._records = records
            self._started_at = run.started_at
        self._completed_at = time.time()
        if score and failed is None:
            self._scored = True
        if failed is not None:
            if score:
                self._partial_metrics = self._metrics_so_far(records)
            cancelled = isinstance(failed, anyio.get_cancelled_exc_class() | KeyboardInterrupt)
            self._status = "cancelled" if cancelled else "error"
            self._run_error = _eval_error(failed)
        else:
            failures = sum(1 for r in records if r.error is not None)
            allowed = allowed_failures(options.fail_on_error, len(records))
            self._status = "error" if failures > allowed else "success"

    def _metrics_so_far(self, records: list[SampleRecord]) -> dict[str, float] | None:
        """Metrics over the samples scored before the run stopped, for its log."""
        values = [r.score.value for r in records if r.score is not None and r.error is None]
        if not values:
            return None
        try:
            return compute_metrics(score_series(values), self._metric_fns)
        except VitalsError:  # a metric that cannot cope with a partial run: leave it out
            return None

    def _raise_if_failed(self, options: RunOptions) -> None:
        records = self._records or []
        failed = [r for r in records if r.error is not None]
        allowed = allowed_failures(options.fail_on_error, len(records))
        if len(failed) <= allowed:
            return
        reasons = collections.Counter(str(r.error) for r in failed)
        common = "; ".join(f"{why} ({n}x)" for why, n in reasons.most_common(3))
        allowance = "none" if allowed == 0 else f"at most {allowed:g}"
        raise EvalFailedError(
            f"{len(failed)} of {len(records)} samples failed (fail_on_error allows {allowance}). "
            f"Most common: {common}. The log with every finished sample: {self.log_path}",
            failed=len(failed),
            total=len(records),
            log_path=str(self.log_path) if self.log_path else None,
        )

    # -- results ------------------------------------------------------------------

    def measure(self) -> dict[str, float]:
        """Compute the metrics over the scores and return them (also in `task.metrics`)."""
        if not self._scored or self._records is None:
            raise TaskStateError("Task has not been scored yet. Run task.score() first.")
        scores = score_series(
            [r.score.value if r.score else None for r in self._records if r.error is None]
        )
        self.metrics = compute_metrics(scores, self._metric_fns)
        return self.metrics

    def _live_chats(self) -> list[Chat]:
        candidates = (
            getattr(self._solver, "solver_chat", None),
            getattr(self._scorer, "scorer_chat", None),
        )
        return [c for c in candidates if isinstance(c, Chat)]

    def _rehydrate(self, records: list[SampleRecord]) -> None:
        """Chats of spilled records, read back from the journal or the final log."""
        if not is_spilled(records):
            return
        writer = self._writer
        source = writer.journal if writer is not None and writer.journal.exists() else None
        source = source or self.log_path
        if source is None:
            return
        rehydrate(records, source, self._live_chats())

    def get_samples(self) -> pl.DataFrame:
        """One row per (sample, epoch): id, epoch, input, target, metadata columns,
        result, score, scorer, answer, explanation, and the chats where present.
        Before solving, the dataset itself."""
        if self._records is None:
            return dataset_frame(self._rows)
        self._rehydrate(self._records)
        return records_frame(self._records, self._scorer_label, scored=self._scored)

    def get_cost(self) -> pl.DataFrame:
        """Requests, tokens and cost by role (solver, scorer) and model."""
        ledger = UsageLedger()
        ledger.merge(self._solve_ledger)
        ledger.merge(self._score_ledger)
        return ledger.to_frame()

    @property
    def _scorer_label(self) -> str | None:
        return self._scorer_spec.label if self._scorer_spec else None

    # -- logging --------------------------------------------------------------------

    def log(self, dir: str | Path | None = None) -> Path:
        """Write the log of the last run into `dir` (default `task.dir`); return its path.

        `eval()` calls it. After `solve()` / `score()` the samples are already in
        the run's journal; this composes the final log from it.
        """
        if self._records is None:
            raise TaskStateError("Task has not been solved yet. Run task.eval() first.")
        target = Path(dir) if dir is not None else self.dir
        writer = self._writer
        if writer is not None and not writer.finalized and writer.journal.exists():
            return self._finalize_log(writer, target / writer.path.name)
        header = compose_header(self._header(self._records))
        header.samples = [compose_sample(r, self._scorer_label) for r in self._records]
        name = self._log_name or log_file_name(
            self._created or time.time(), self.name, self._eval_id or new_id()
        )
        self.log_path = write_json_log(target / Path(name).with_suffix(".json").name, header)
        return self.log_path

    def _finalize_log(self, writer: LogWriter, path: Path | None = None) -> Path:
        header = compose_header(self._header(self._records or []))
        self.log_path = writer.finalize(header, path)
        return self.log_path

    def _solver_model(self) -> str:
        records = self._records or []
        chat = next((r.solver_chat for r in records if r.solver_chat is not None), None)
        if chat is None:
            candidate = getattr(self._solver, "solver_chat", None)
            chat = candidate if isinstance(candidate, Chat) else None
        return chat.provider.model_id if chat is not None else "none/none"

    def _header(self, records: list[SampleRecord]) -> RunHeader:
        ledger = UsageLedger()
        ledger.merge(self._solve_ledger)
        ledger.merge(self._score_ledger)
        model = self._solver_model()
        spec: FunctionSpec = self._solver_spec
        fingerprint = "|".join([self.name, spec.label, self._scorer_label or "", model])
        partial = self._partial_metrics if self._status != "success" else None
        return RunHeader(
            task=self.name,
            task_id=hashlib.sha256(fingerprint.encode()).hexdigest()[:22],
            run_id=self._run_id or new_id(),
            eval_id=self._eval_id or new_id(),
            created=self._created or time.time(),
            model=model,
            solver=spec.label,
            scorer=self._scorer_label if self._scored or self.metrics or partial else None,
            epochs=self._run_epochs,
            dataset_name=self.name,
            sample_ids=[r.id for r in self._rows],
            metrics=self.metrics or partial or {},
            started_at=self._started_at,
            completed_at=self._completed_at,
            status=self._status,
            total_samples=len(records),
            completed_samples=sum(1 for r in records if r.error is None),
            scored_samples=sum(
                1 for r in records if r.score and r.score.value is not None and r.error is None
            ),
            ledger=ledger,
            error=self._run_error,
            limit_history=self._limit_history,
            max_samples=self._concurrency,
            packages={"vitals_engine": _version()},
        )

    def view(self) -> Any:
        """Open the log viewer on this task's log directory, in the background.

        Returns the running viewer (`.url`, `.stop()`).
        """
        from ..viewer.launch import view

        return view(self.dir, block=False)

    def __repr__(self) -> str:
        state = "scored" if self._scored else "solved" if self.solved else "not run"
        metrics = ", ".join(f"{k}={v:.3g}" for k, v in (self.metrics or {}).items())
        return (
            f"<Task {self.name}: {len(self._rows)} samples, {state}"
            + (f", {metrics}" if metrics else "")
            + ">"
        )


def _collecting(
    source: Iterator[Any],
    into: list[SampleRecord],
    done: dict[tuple[Any, int], SampleRecord] | None = None,
) -> Iterator[SampleRecord]:
    """Records made lazily from samples, remembered in run order as they are made.
    Samples in `done` (finished in a run being resumed) are remembered, not run."""
    for sample in source:
        finished = done.get((sample.id, sample.epoch)) if done else None
        if finished is not None:
            into.append(finished)
            continue
        record = SampleRecord(sample)
        into.append(record)
        yield record


async def _noop_sink(_: SampleRecord) -> None:
    return None


def _copy_ledger(ledger: UsageLedger) -> UsageLedger:
    twin = UsageLedger()
    twin.merge(ledger)
    return twin


def _eval_error(exc: BaseException) -> log_schema.EvalError:
    text = "".join(traceback.format_exception(exc))
    return log_schema.EvalError(f"{type(exc).__name__}: {exc}", text, text)


def _version() -> str:
    try:
        return importlib.metadata.version("vitals-engine")
    except importlib.metadata.PackageNotFoundError:
        return "0"

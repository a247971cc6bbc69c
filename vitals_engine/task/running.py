"""One run of a task: solving and/or scoring its samples through the engine, logged
as they finish, with the task's state updated when the run ends, however it ends.

A run reads the task's `TaskSetup` and writes its `RunState`. Each finished sample
goes to the run's journal before the caller's sink sees it; past `SPILL_AFTER`
logged samples (of the run, or of its eval set), the run keeps only its score in
memory (the caller gets a whole copy). A run that stops on an error (status "error"),
a cancellation, a KeyboardInterrupt or a SystemExit (status "cancelled") still
records its state and, once any sample had started, writes the log, then re-raises.
Its log, its header's counts and the task's records hold the samples that finished
(and those reused from a resumed run); samples in flight when it stopped have no
result yet, so they are neither logged nor counted, and a resume runs them again. Each
model reply goes to the journal the moment it arrives (`chats/layers/replies.py`; from
Ray workers, through the driver), so that resume answers those calls from it instead of
buying them again.

While samples stream their replies, the run keeps their text so far in a sidecar
beside the journal (`log/live.py`), for the live viewer; it is removed when the
run ends, however it ends. A run where nothing streams never writes one.
"""

from __future__ import annotations

import collections
import copy
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio

from .._errors import BudgetExceeded, ConfigError, EvalFailedError, JournalInUseError, LogWriteError
from .._sync import INTERRUPTS
from .._words import plural
from ..caching.lookup import CacheUse
from ..chats.layers.replies import Replies
from ..dataset import expand_epochs, select_rows
from ..distributed.backend import Ray
from ..distributed.driver import check_sendable, execute_on_ray
from ..engine.live_texts import LiveTexts
from ..engine.observing import RunObserver
from ..engine.options import RunOptions, allowed_failures
from ..engine.run import Run, RunJournal
from ..engine.work import RunWork
from ..frames import records_frame
from ..log import schema as log_schema
from ..log.compose import compose_header, compose_sample
from ..log.journal_format import encode_sample
from ..log.live import LIVE_EVENTS, LiveFile, LiveSample, input_excerpt, live_path
from ..log.transcript import LiveEvents
from ..log.writer import LogWriter, log_file_name, new_id
from ..pacing.budget import Budget
from ..progress import ProgressBar
from ..samples import SampleRecord
from ..storage.shipper import Shipper
from ..transport.pool import transport_scope
from .logfile import (
    configured_solver_chat,
    configured_solver_model,
    eval_error,
    finalize_log,
    open_writer,
    rehydrate_records,
    run_header,
)
from .measuring import scored_so_far
from .resume import UNFINISHED, Resumed, load_resume, newest_run, reconcile
from .spill import SPILL_AFTER, WholeSamples, shared_whole_samples
from .state import RunState, TaskSetup
from .stores import drop_refused, in_staging, open_shipper, shown_dir
from .streaming import Sink, first_error

__all__ = ["raise_if_failed", "resumable", "run_task"]


async def run_task(
    setup: TaskSetup,
    state: RunState,
    options: RunOptions,
    *,
    solve: bool,
    score: bool,
    solver_kwargs: dict[str, Any] | None = None,
    scorer_kwargs: dict[str, Any] | None = None,
    sink: Sink | None = None,
    resume: Resumed | None = None,
    budget: Budget | None = None,
) -> None:
    """Solve and/or score the task's samples; see the module docstring."""
    steps = _TaskRun(
        setup,
        state,
        options,
        solve=solve,
        score=score,
        solver_kwargs=solver_kwargs,
        scorer_kwargs=scorer_kwargs,
        sink=sink,
        resume=resume,
        budget=budget,
    )
    steps.reconcile_resume()
    steps.gather_samples()
    steps.check_sendable()
    steps.open_log()
    steps.make_run()
    try:
        await steps.execute()
    except BaseException as exc:
        error = await steps.stopped(exc)
        if error is not exc:
            raise error from None
        raise
    finally:
        steps.close_bar()
    await steps.finished()


class _TaskRun:
    """The steps of one `run_task`, in the order it takes them, and what they share: the
    records, the engine's run, the journal's writer, the live sidecar."""

    run: Run
    writer: LogWriter
    shipper: Shipper | None
    live: LiveFile

    def __init__(
        self,
        setup: TaskSetup,
        state: RunState,
        options: RunOptions,
        *,
        solve: bool,
        score: bool,
        solver_kwargs: dict[str, Any] | None,
        scorer_kwargs: dict[str, Any] | None,
        sink: Sink | None,
        resume: Resumed | None,
        budget: Budget | None,
    ) -> None:
        self.setup, self.state, self.options = setup, state, options
        self.solve, self.score = solve, score
        self.solver_kwargs, self.scorer_kwargs = solver_kwargs, scorer_kwargs
        self.sink, self.resume, self.budget = sink, resume, budget
        self.epochs = options.epochs or (resume.epochs if resume else None) or setup.epochs or 1
        self.scorer = setup.scorer_label
        #: The dataset's rows this run takes (`limit=`, `sample_ids=`, `shuffle=`): chosen
        #: once, here, before anything runs; a resumed run with the same options takes
        #: the same rows.
        self.rows = setup.rows
        if solve:
            self.rows = select_rows(
                setup.rows,
                limit=options.limit,
                sample_ids=options.sample_ids,
                shuffle=options.shuffle,
                seed=options.seed,
            )
        #: The samples the resumed run finished that this one keeps, by key: not run again.
        self.done: dict[tuple[Any, int], SampleRecord] = {}
        #: The run's records, in run order (made as the source is read, when solving).
        self.records: list[SampleRecord] = []
        self.source: Iterable[SampleRecord] = ()
        self.total = 0
        self.bar: ProgressBar | None = None
        self.texts = LiveTexts()
        self.logged_keys: set[tuple[Any, int]] = set()
        self.whole = shared_whole_samples() or WholeSamples(SPILL_AFTER)
        self.owns_journal = False  # the writer holds the journal's lock: its sidecar is this run's

    def reconcile_resume(self) -> None:
        """The model the solver will use, in the state; and what this run keeps of the run
        it resumes (a `ConfigError` when that one ran another solver, scorer or model)."""
        setup, resume = self.setup, self.resume
        if self.solve:
            self.state.solver_model = configured_solver_model(setup, self.solver_kwargs)
        if resume is None:
            return
        self.resume = resume = reconcile(
            resume,
            self.rows,
            self.epochs,
            solver=setup.solver_spec.label,
            scorers=setup.scorer_names if self.score else None,
            model=configured_solver_model(setup, self.solver_kwargs),
            anyway=self.options.resume_anyway,
        )
        self.done = resume.finished

    def gather_samples(self) -> None:
        """The records to run: to solve, made lazily from the dataset's rows (those the
        resumed run finished kept, not run); to score alone, the ones solved before."""
        setup, state = self.setup, self.state
        if self.solve:
            self._name_the_run()
            self.records = []
            rows = expand_epochs(self.rows, self.epochs)
            self.source = _collecting(rows, self.records, self.done)
            self.total = len(self.rows) * self.epochs - len(self.done)
        else:
            state.reset_scores()
            self.records = list(state.records or [])
            rehydrate_records(setup, state, self.records)
            self.source = self.records
            self.total = len(self.records)
        state.concurrency = self.options.max_concurrency

    def _name_the_run(self) -> None:
        """A solving run's ids, log name and epochs: the resumed run's, or new ones."""
        state, resume = self.state, self.resume
        state.reset_solutions()
        state.run_id = new_id()
        if resume is not None:
            state.eval_id, state.created = resume.eval_id, resume.created
            state.log_name = resume.log_name
        else:
            state.eval_id, state.created = new_id(), time.time()
            ext = "eval" if self.options.log_format == "eval" else "json"
            state.log_name = log_file_name(state.created, self.setup.name, state.eval_id, ext)
        state.epochs = self.epochs
        state.sample_ids = [row.id for row in self.rows]
        state.selection = self.options

    def _work(self) -> RunWork:
        setup = self.setup
        return RunWork(
            solver=setup.solver_spec if self.solve else None,
            scorer=setup.scorer_spec if self.score else None,
            solver_kwargs=self.solver_kwargs or {},
            scorer_kwargs=self.scorer_kwargs or {},
            samples_frame=lambda recs: records_frame(recs, None, scored=False),
            sandbox=setup.sandbox,
        )

    def check_sendable(self) -> None:
        """On Ray: the run's solver, scorer and a sample checked for sending, before
        anything is logged (nothing to log if they cannot go)."""
        if self.options.backend is not None:
            check_sendable(self._work(), self.rows[0] if self.rows else None)

    def open_log(self) -> None:
        """The run started: its journal's writer, the sidecar of its live texts, and the
        usage of the run it resumes counted from the start."""
        setup, state, resume = self.setup, self.state, self.resume
        state.status = "started"
        state.error = None
        self.writer = writer = open_writer(
            setup,
            state,
            fresh=self.solve and resume is None,
            exclude=resume.stale if resume else (),
        )
        self.shipper = open_shipper(setup, state, writer)
        texts = self.texts
        shown: dict[tuple[int | str, int], LiveEvents] = {}
        self.live = LiveFile(
            live_path(writer.journal), writer.path.name, lambda: _live_samples(texts, shown)
        )
        texts.on_change = self.live.changed
        if resume is not None:
            state.solve_ledger.merge(resume.ledger, role="solver")
            state.score_ledger.merge(resume.ledger, role="scorer")

    def make_run(self) -> None:
        """The engine's run of the records, with its options whole and its journal, and
        the progress bar."""
        setup, options, resume, writer = self.setup, self.options, self.resume, self.writer
        self.bar = bar = ProgressBar(setup.name) if options.progress else None
        chat = configured_solver_chat(setup, self.solver_kwargs) if self.solve else None
        self.run = Run(
            work=self._work(),
            options=options,
            journal=RunJournal(
                # each reply to the journal as it arrives; the resumed run's answer its calls
                replies=Replies(writer.add_reply, resume.replies if resume is not None else ()),
                batches=writer.add_batch,
                earlier_batches=resume.batches if resume is not None else (),
                # no sample taken while the journal's lock in the store is in doubt
                fence=self.shipper.admit if self.shipper is not None else None,
            ),
            cache=CacheUse(options.cache, task=setup.name, log=self.state.log_name),
            budget=self.budget,
            solver_endpoints=[(chat.provider.endpoint, chat.provider.rate_limits)] if chat else (),
            observer=RunObserver(task=setup.name, run_id=self.state.run_id),
            live=self.texts,
            total=self.total,
            on_progress=bar.update if bar is not None else None,
        )

    async def execute(self) -> None:
        """The samples run, here or on Ray, beside the writer in one task group, observed
        as one run (its trace, its fields on what is logged); the live sidecar is removed
        at the end, however it ends."""
        writer, live = self.writer, self.live
        try:
            with self.run.observer.running(self.run.progress, self._outcome):
                await self._execute_with_writer(writer, live)
        finally:
            if self.owns_journal:  # a run refused the journal leaves the running run's sidecar
                live.remove()  # its actor has ended with the task group

    def _outcome(self) -> str | None:
        """The type of the error an `eval()` whose samples all ended will raise: its budget
        reached, or more samples failed than it allows (None: it ended well)."""
        if not (self.solve and self.score):
            return None  # solve() and score() alone raise neither
        budget = self.run.budget
        if budget is not None and budget.reached is not None:
            return BudgetExceeded.__name__
        if _too_many_failed(self.records, self.options):
            return EvalFailedError.__name__
        return None

    async def _execute_with_writer(self, writer: LogWriter, live: LiveFile) -> None:
        async with (
            transport_scope(pool_size=self.options.max_concurrency, join=True),
            anyio.create_task_group() as tg,
        ):
            live.task_group = tg
            if self.shipper is not None:  # takes the store's lock before the journal
                await tg.start(self.shipper.run)
            await tg.start(writer.run)
            self.owns_journal = True
            try:
                self._carry_over_resumed()
                await self._run_samples()
            finally:
                writer.stop()
                live.stop()
                if self.shipper is not None:
                    self.shipper.stop()

    def _carry_over_resumed(self) -> None:
        """Into a new journal, what the resumed run's journal holds that this run keeps."""
        resume, writer = self.resume, self.writer
        if resume is None or resume.source == writer.journal:
            return
        for logged_sample in resume.logged.values():  # events and times kept
            writer.add(logged_sample)
        for batch in resume.batches:  # a later resume needs them as well
            writer.add_batch(batch)
        for reply in resume.replies:  # ... and the replies of the samples still to run
            writer.add_reply(reply)

    async def _run_samples(self) -> None:
        backend = self.options.backend
        if isinstance(backend, Ray):
            await execute_on_ray(
                backend,
                self.run,
                self.source,
                self.logged_together,
                scorer_label=self.scorer,
                keep_chats=self.sink is not None,
                replies=self.writer.add_reply_lines,
            )
        else:
            await self.run.execute(self.source, self.logged)

    async def logged(self, record: SampleRecord) -> None:
        await self.logged_together((record,))

    async def logged_together(
        self, finished: Sequence[SampleRecord], lines: Sequence[bytes] | None = None
    ) -> None:
        """Samples that finished together (a parcel back from a Ray worker): one write.
        `lines`: their journal lines, when a worker composed them."""
        if lines is None:
            lines = [encode_sample(compose_sample(record, self.scorer)) for record in finished]
        keys = [record.key for record in finished]  # one tuple each, for both: big runs
        self.writer.add_lines(zip(lines, keys, strict=True))
        self.logged_keys.update(keys)
        spill = not self.whole.keep(len(keys))
        sink = self.sink
        for record in finished:
            if sink is not None:  # the caller's copy stays whole: it may read it later
                await sink(copy.copy(record) if spill else record)
            if spill:
                record.spill()

    async def stopped(self, exc: BaseException) -> BaseException:
        """The run stopped on `exc`: its state recorded and, once any sample had started,
        its log written. Returns the error to raise (the first that is not a
        cancellation, when `exc` is a group)."""
        setup, writer = self.setup, self.writer
        error = first_error(exc)
        started = bool(self.records)
        if self.solve:  # samples in flight did not finish: not logged, not counted, run on resume
            self.records = _in_the_log(setup, self.records, self.logged_keys, self.done)
        self._finish(failed=error)
        if not self.solve:  # solved by an earlier run: each stays in the log, scored or not
            for record in self.records:
                if record.key not in self.logged_keys:
                    writer.add(compose_sample(record, self.scorer))
        try:
            await writer.close()
            await self._ship_rest()
            if started:
                finalize_log(setup, self.state, writer)
            elif self.shipper is not None:
                self.shipper.release()
                if isinstance(error, JournalInUseError) and not self.owns_journal:
                    drop_refused(writer.journal)
        except LogWriteError:
            if not isinstance(error, LogWriteError):
                raise
            # the log could not be written to begin with: that is the error to report
        return error

    def close_bar(self) -> None:
        bar = self.bar
        if bar is not None:
            bar.update(self.run.progress(), force=True)
            bar.close()

    async def finished(self) -> None:
        """The run ended: its state recorded, its log composed. When its budget stopped it,
        the samples that did not finish are kept as a stopped run keeps them."""
        budget = self.run.budget
        if budget is not None and budget.reached is not None:
            if self.solve:
                self.records = _in_the_log(self.setup, self.records, self.logged_keys, self.done)
            else:
                for record in self.records:
                    if record.key not in self.logged_keys:
                        self.writer.add(compose_sample(record, self.scorer))
        self._finish(failed=None)
        await self.writer.close(compose_header(run_header(self.setup, self.state, self.records)))
        await self._ship_rest()

    async def _ship_rest(self) -> None:
        """What the shipper has not yet put in the store (a run that logs to one)."""
        if self.shipper is not None:
            with anyio.CancelScope(shield=True):
                await self.shipper.finish()

    def _finish(self, failed: BaseException | None) -> None:
        _finish_run(
            self.setup,
            self.state,
            self.run,
            self.options,
            self.solve,
            self.score,
            self.records,
            failed=failed,
        )


def resumable(setup: TaskSetup, resume: bool | str | Path | None) -> Resumed | None:
    """What `eval(resume=...)` continues from, or None for a fresh run."""
    if resume is None or resume is False:
        return None
    if setup.store is not None:
        resume = in_staging(setup, resume)
    if resume is True:
        found = newest_run(setup.dir, setup.name)
        if found is None:
            raise ConfigError(
                f"Nothing to resume: no log or journal of task '{setup.name}' in "
                f"'{shown_dir(setup)}'. Run without resume, or pass the path of a journal or "
                "unfinished log."
            )
        path, status = found
        if status not in UNFINISHED:
            raise ConfigError(
                f"Nothing to resume: the newest run of task '{setup.name}' in "
                f"'{shown_dir(setup)}' "
                f"({path.name}) finished (status {status}). Run without resume for a new "
                "run, or pass the path of an older unfinished log to resume it."
            )
    else:
        path = Path(resume)
    return load_resume(path, setup.name, setup.live_chats())


def _finish_run(
    setup: TaskSetup,
    state: RunState,
    run: Run,
    options: RunOptions,
    solve: bool,
    score: bool,
    records: list[SampleRecord],
    failed: BaseException | None,
) -> None:
    """What the run leaves in the task's state: its usage, batches, cache counts and
    endpoint limits' history, its records and times, and how it ended."""
    _keep_what_it_used(state, run)
    if solve:
        state.records = records
        state.started_at = run.counts.started_at
    state.completed_at = time.time()
    if score and failed is None:
        state.scored = True
    budget = run.budget
    reason = budget.reason(run.ledger) if budget is not None and failed is None else None
    state.budget_reason = reason
    state.budget_spent = budget.spent(run.ledger) if budget is not None and reason else None
    if reason is not None:
        state.status = "cancelled"  # resumable: the samples not started run then
        state.error = log_schema.EvalError(reason, reason, reason)
    elif failed is not None:
        _stopped_by(setup, state, records, failed, score)
    else:
        state.status = "error" if _too_many_failed(records, options) else "success"


def _keep_what_it_used(state: RunState, run: Run) -> None:
    """The run's usage, batches, cache counts and its endpoints' limit changes, into the
    task's state; its endpoints let go of."""
    state.solve_ledger.merge(run.ledger, role="solver")
    state.score_ledger.merge(run.ledger, role="scorer")
    if run.batches is not None:
        state.batches.update(run.batches.records)
    state.count_cache(run.cache)
    run.limits.close()  # a run on Ray never calls run.execute() here: let go of its endpoints
    state.limit_history = [
        log_schema.ConnectionLimitChange(when, f"{provider.lower()}/{model}", old, new, why)
        for (provider, _, model), limiter in run.limits.items()
        for when, old, new, why in limiter.history
    ]


def _stopped_by(
    setup: TaskSetup,
    state: RunState,
    records: list[SampleRecord],
    failed: BaseException,
    score: bool,
) -> None:
    """A run `failed` stopped: the metrics of what it scored so far, and its status."""
    if score:
        by_scorer = scored_so_far(setup, records)
        state.partial_metrics = next(iter(by_scorer.values())) if by_scorer else None
        state.scorer_stats = by_scorer if by_scorer and len(by_scorer) > 1 else None
    # Ctrl-C and sys.exit() alike: the process stopping, not the run failing
    cancelled = isinstance(failed, (anyio.get_cancelled_exc_class(), *INTERRUPTS))
    state.status = "cancelled" if cancelled else "error"
    state.error = eval_error(failed)


def _too_many_failed(records: Sequence[SampleRecord], options: RunOptions) -> bool:
    failed = sum(1 for record in records if record.error is not None)
    return failed > allowed_failures(options.fail_on_error, len(records))


def raise_if_failed(state: RunState, options: RunOptions) -> None:
    """Raise `EvalFailedError` when more samples failed than `fail_on_error` allows."""
    records = state.records or []
    if not _too_many_failed(records, options):
        return
    failed = [r for r in records if r.error is not None]
    allowed = allowed_failures(options.fail_on_error, len(records))
    reasons = collections.Counter(str(r.error) for r in failed)
    common = "; ".join(f"{why} ({n}x)" for why, n in reasons.most_common(3))
    allowance = "none" if allowed == 0 else f"at most {allowed:g}"
    raise EvalFailedError(
        f"{len(failed)} of {plural(len(records), 'sample')} failed "
        f"(fail_on_error allows {allowance}). "
        f"Most common: {common}. The log with every finished sample: {state.log_path}",
        failed=len(failed),
        total=len(records),
        log_path=str(state.log_path) if state.log_path else None,
    )


def _live_samples(
    texts: LiveTexts, shown: dict[tuple[int | str, int], LiveEvents]
) -> list[LiveSample]:
    """The sidecar's samples: the streamed text of each in-flight sample, and the last
    records of its transcript as the log's events (`shown`: those rendered already, by
    sample, kept from one write to the next)."""
    entries = texts.entries
    for key in [key for key in shown if key not in entries]:
        del shown[key]
    return [
        LiveSample(
            id=entry.sample.id,
            epoch=entry.sample.epoch,
            role=entry.role,
            input=input_excerpt(entry.sample.input),
            text=entry.text,
            chars=entry.chars,
            updated=entry.updated,
            events=shown.setdefault(key, LiveEvents(LIVE_EVENTS)).of(entry.events)
            if entry.events
            else None,
        )
        for key, entry in entries.items()
    ]


def _in_the_log(
    setup: TaskSetup,
    records: list[SampleRecord],
    logged: set[tuple[Any, int]],
    reused: dict[tuple[Any, int], SampleRecord],
) -> list[SampleRecord]:
    """The records of a stopped run that its log holds, in run order: those that went
    through the pipeline, and those reused from the run it resumed (in its journal from
    the start, even when the run stopped before reaching them)."""
    kept = {record.key: record for record in records if record.key in logged}
    kept.update(reused)
    return sorted(kept.values(), key=lambda record: setup.order(record.key))


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

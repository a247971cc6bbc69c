"""Re-scoring a saved log: its logged outputs graded again by another scorer, no solver call.

`ve.read_log(path)` returns a `RescorableLog` (a `LoggedEval` that can re-score), and
`log.rescore(scorer)` or `rescore_log(path, scorer)` scores the log's finished samples
(each one's result, with its input, target, metadata and solver chat) with `scorer` and
writes a new log beside the original (or into `dir=`), which is never changed. The
new log's `eval.metadata.rescored_from` names the log, run and scorer it came from.

A finished sample is one with a result that did not fail while solving; a sample that
failed only while scoring is scored again. The others (failed, never answered, or
still in flight when a journal's run was killed) are left out, with a warning that
counts them.

The task rebuilt from the log is a `Task` whose solver cannot solve (it raises
`TaskStateError`); its samples are the logged records, with the solver's chats and
usage as logged, so `get_cost()` prices the solutions as well as the new scorer's calls.

Example:
    >>> task = ve.read_log("logs/run.json").rescore(ve.model_graded_qa(scorer_chat=judge))
    >>> task.metrics, task.log_path
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ._errors import ConfigError, TaskStateError
from ._logging import log
from ._sync import run_sync
from ._words import plural
from .log import schema as s
from .log.journal_format import JOURNAL_SUFFIX, JournalDamage, JournalStart, bulk_objects
from .log.logged_eval import LoggedEval
from .log.logged_sample import add_chat_usage, normalize_model, sample_record
from .log.reader import read_log as read_logged
from .samples import SampleRecord
from .storage.location import is_url

if TYPE_CHECKING:
    from .task.task import Task

__all__ = ["RescorableLog", "check_scorer", "read_log", "rescore_log"]


class RescorableLog(LoggedEval):
    """A log read back (`LoggedEval`: status, metrics, `get_samples()`, `get_cost()` ...)
    that can be scored again: `rescore(scorer)`.

    Attributes:
        source: where it was read from: the path or URL given to `read_log()`.

    Example:
        >>> logged = ve.read_log("logs/2026-01-14T16-19-11-06-00_simple-addition_abc.json")
        >>> strict = ve.model_graded_qa(instructions="Be strict.", scorer_chat=judge)
        >>> logged.rescore(strict).metrics
        {'accuracy': 0.5}
    """

    def __init__(
        self,
        path: Path,
        header: s.EvalLog,
        samples: list[s.EvalSample],
        damage: JournalDamage | None = None,
        header_only: bool = False,
        *,
        source: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(path, header, samples, damage, header_only)
        self.source = os.fspath(source) if source is not None else str(path)

    @classmethod
    def of(cls, logged: LoggedEval, source: str | os.PathLike[str] | None = None) -> RescorableLog:
        """`logged` as a `RescorableLog` (the same header and samples, not copied).

        Example:
            >>> RescorableLog.of(vitals_engine.log.reader.read_log(path)).rescore(scorer)
        """
        if isinstance(logged, RescorableLog) and source is None:
            return logged
        return cls(
            logged.path,
            logged.header,
            logged.samples,
            logged.damage,
            logged.header_only,
            source=source,
        )

    def rescore(
        self,
        scorer: Callable[..., Any] | Sequence[Callable[..., Any]],
        *,
        dir: str | os.PathLike[str] | None = None,
        human: str | None = None,
        **kwargs: Any,
    ) -> Task:
        """Score this log's finished samples with `scorer`, without solving again, and write
        a new log (into `dir=`, default the original's directory); return the new run as a
        `Task`. See `rescore_log()` for the arguments.

        Example:
            >>> task = ve.read_log("logs/run.json").rescore(ve.detect_exact())
            >>> task.metrics, task.log_path
        """
        return run_sync(
            functools.partial(self.rescore_async, scorer, dir=dir, human=human, **kwargs)
        )

    async def rescore_async(
        self,
        scorer: Callable[..., Any] | Sequence[Callable[..., Any]],
        *,
        dir: str | os.PathLike[str] | None = None,
        human: str | None = None,
        **kwargs: Any,
    ) -> Task:
        """The async form of `rescore()`.

        Example:
            >>> task = await ve.read_log("logs/run.json").rescore_async(ve.detect_exact())
        """
        check_scorer(scorer, kwargs)
        if self.header_only:
            raise TaskStateError(
                f"{self.source} was read with header_only=True, so it holds no samples to "
                f"re-score: read it whole, ve.read_log({self.source!r}).rescore(...)."
            )
        records, left_out = self.finished_records()
        if not records:
            raise ConfigError(
                f"Nothing to re-score in {self.source}: it has no finished sample "
                f"({plural(len(self.samples), 'sample')} logged, none with a result that did "
                "not fail while solving)."
            )
        if left_out:
            log.warning(
                "rescore: samples left out, not finished (no result, or failed while solving)",
                log=self.source,
                rescored=len(records),
                left_out=left_out,
            )
        task = _rebuilt_task(self, records, scorer, dir, human)
        task._state.started_at = time.time()
        await task.score_async(**kwargs)
        try:
            task.measure()
        finally:  # a metric that fails still leaves the new log, without metrics
            task.log()
        return task

    def finished_records(self) -> tuple[list[SampleRecord], int]:
        """The finished samples as fresh engine records (chats rebuilt, the solver's usage in
        each record's ledger, no score), and how many of the run's samples are left out
        (logged unfinished, or never logged: a journal's samples in flight).

        Example:
            >>> records, left_out = ve.read_log("logs/run.journal").finished_records()
        """
        self._load()
        model, ours = self.header.eval.model, self.ours
        records: list[SampleRecord] = []
        with bulk_objects():
            for sample in self.samples:
                record = sample_record(sample, model, ours)
                if _finished(record):
                    add_chat_usage(record, record.usage)
                    record.usage.drop_role("scorer")
                    records.append(record)
        return records, _left_out(self.header, self.samples, records)


def read_log(path: str | os.PathLike[str], header_only: bool = False) -> RescorableLog:
    """Read an eval log as `vitals_engine.log.reader.read_log()` does (ours, vitals' (R),
    Inspect's `.json` and `.eval`, journals; on disk or at an object store's URL), as a
    `RescorableLog`: a `LoggedEval` that can also `rescore()`.

    Raises `LogFormatError` (naming the file and the position) for a missing,
    truncated or corrupt log.

    Example:
        >>> logged = ve.read_log("logs/run.json")
        >>> logged.status, logged.metrics
        ('success', {'accuracy': 1.0})
        >>> logged.rescore(ve.detect_exact()).metrics
    """
    return RescorableLog.of(read_logged(os.fspath(path), header_only), source=path)


def rescore_log(
    path_or_logged: str | os.PathLike[str] | LoggedEval,
    scorer: Callable[..., Any] | Sequence[Callable[..., Any]],
    *,
    dir: str | os.PathLike[str] | None = None,
    human: str | None = None,
    **kwargs: Any,
) -> Task:
    """Score the finished samples of a saved log again with `scorer`, without calling the
    solver, and write a new log; return the new run as a `Task` (`metrics`,
    `metric_stats`, `get_samples()`, `get_cost()`, `log_path`).

    Args:
        path_or_logged: a log (`.json`, `.eval`), a journal of a running or killed run, or
            a log read with `read_log()`: ours, vitals' (R) or Inspect's.
        scorer: a scorer (or a list of them), as `Task(scorer=)` takes. A judge needs its
            own chat (`model_graded_qa(scorer_chat=...)`): the logged solver's model
            cannot be called from a log.
        dir: where the new log goes (default: the original's directory; an object
            store's URL for a log read from one).
        human: a metadata column of the logged samples holding human grades, as
            `Task(human=)` takes it: the new run's means are corrected by them.
        **kwargs: as `task.score()` takes them: `max_concurrency`, `limits`, `retry`,
            `progress`, and arguments routed to the scorer (`scorer_chat=`).

    The new log's `eval.metadata["rescored_from"]` is `{"log": <the original's path>,
    "eval_id": <its eval id>, "scorer": <its scorer's name, or None>}`. A sample whose
    scoring fails keeps its error in the new log (status "error"). Raises
    `LogFormatError` for a missing or corrupt log, `ConfigError` for a scorer that is not
    one or a log with nothing to re-score, `TaskStateError` for a header-only read.

    Example:
        >>> task = ve.rescore_log("logs/run.json", ve.model_graded_qa(scorer_chat=judge))
        >>> task.metrics
        {'accuracy': 0.75}
    """
    check_scorer(scorer, kwargs)
    if isinstance(path_or_logged, LoggedEval):
        logged = RescorableLog.of(path_or_logged)
    else:
        logged = read_log(path_or_logged)
    return logged.rescore(scorer, dir=dir, human=human, **kwargs)


# -- what is scored ----------------------------------------------------------------------


def _finished(record: SampleRecord) -> bool:
    """A sample to re-score: it has a result and did not fail while solving (one that
    failed only while scoring is scored again)."""
    if record.result is None:
        return False
    return record.error is None or record.error.stage == "score"


def _left_out(header: s.EvalLog, samples: list[s.EvalSample], records: list[SampleRecord]) -> int:
    """The samples of the run not re-scored: logged unfinished, or (when the header's
    sample ids name the logged ones) never logged, as a killed run's in flight."""
    logged = {(sample.id, sample.epoch) for sample in samples}
    expected = set(logged)
    ids = header.eval.dataset.sample_ids or []
    epochs = header.eval.config.epochs or max((key[1] for key in logged), default=1)
    if ids and {key[0] for key in logged} <= set(ids):
        expected |= {(i, epoch) for i in ids for epoch in range(1, epochs + 1)}
    return len(expected) - len(records)


# -- the scorer ----------------------------------------------------------------------------


def check_scorer(scorer: Any, kwargs: dict[str, Any] | None = None) -> None:
    """A `ConfigError` for what is not a scorer (as `Task(scorer=)` says it) and for a
    judge that would grade with the logged solver's model, which a log cannot call
    (unless `kwargs`, the arguments of the re-scoring, give it a `scorer_chat`).

    Example:
        >>> check_scorer(ve.model_graded_qa())
        Traceback (most recent call last):
        ConfigError: model_graded_qa judges with the solver's model by default, ...
    """
    from .engine.user_functions import spec_of

    kwargs = kwargs or {}

    if scorer is None:
        raise ConfigError(
            "rescore needs a scorer: e.g. rescore(ve.detect_includes()) or "
            "rescore(ve.model_graded_qa(scorer_chat=ve.chat_openai('gpt-4.1')))."
        )
    items = list(scorer) if isinstance(scorer, list | tuple) else [scorer]
    for item in items:
        spec_of(item, "scorer")
        own_judge = getattr(item, "scorer_chat", None) is not None or getattr(item, "judges", None)
        if hasattr(item, "scorer_chat") and not own_judge and "scorer_chat" not in kwargs:
            name = getattr(item, "__name__", type(item).__name__)
            raise ConfigError(
                f"{name} judges with the solver's model by default, but a log cannot call the "
                f"model it was solved with: give the judge a chat, e.g. {name}(scorer_chat="
                "ve.chat_openai('gpt-4.1')), or rescore(..., scorer_chat=...)."
            )


class _LoggedSolver:
    """The solver of a task rebuilt from a log to re-score it: named as the logged one, it
    cannot solve."""

    def __init__(self, label: str, source: str) -> None:
        self.__name__ = "logged_solver"
        self.__vitals_label__ = label
        self.source = source

    def __repr__(self) -> str:
        return f"<the solver {self.__vitals_label__!r} of the log {self.source}: it cannot solve>"

    def __call__(self, input: Any) -> str:
        raise TaskStateError(
            f"This task was rebuilt from the log {self.source} to re-score it; it cannot "
            "solve. Build a Task with a solver to run the samples again."
        )


# -- the task -------------------------------------------------------------------------------


def _rebuilt_task(
    logged: RescorableLog,
    records: list[SampleRecord],
    scorer: Any,
    dir: str | os.PathLike[str] | None,
    human: str | None = None,
) -> Task:
    """A Task whose state is the log's finished records, solved, not scored, named and
    logged as a new run of the logged task."""
    from .log.writer import log_file_name, new_id
    from .task.rescored import RescoredTask

    header = logged.header
    epochs = header.eval.config.epochs or max(r.sample.epoch for r in records)
    rows = _rows(records)
    task = RescoredTask(
        rows,
        _LoggedSolver(_solver_label(header), logged.source),
        scorer,
        epochs=epochs,
        name=header.eval.task,
        dir=os.fspath(dir) if dir is not None else _default_dir(logged),
        log_format=_log_format(logged.path),
        reducer=_reducer(header, epochs),
        cluster=_cluster(logged.cluster, rows),
        human=human,
        source=logged.source,
    )
    task.name = header.eval.task  # as logged (Task() makes a name fit for files)
    state = task._state
    state.records = records
    state.sample_ids = [row["id"] for row in rows]
    state.epochs = epochs
    state.solver_model = normalize_model(header.eval.model)
    state.run_id, state.eval_id, state.created = new_id(), new_id(), time.time()
    state.log_name = log_file_name(state.created, task.name, state.eval_id, task.log_format)
    for record in records:
        state.solve_ledger.merge(record.usage, role="solver")
    state.header_metadata = {
        "rescored_from": {
            "log": logged.source,
            "eval_id": header.eval.eval_id,
            "scorer": logged.scorer,
        }
    }
    return task


def _rows(records: list[SampleRecord]) -> list[dict[str, Any]]:
    """The dataset of the records: one row per sample id, in the log's order."""
    rows: dict[Any, dict[str, Any]] = {}
    for record in records:
        sample = record.sample
        if sample.id not in rows:
            rows[sample.id] = {
                **sample.metadata,
                "id": sample.id,
                "input": sample.input,
                "target": sample.target,
            }
    return list(rows.values())


def _solver_label(header: s.EvalLog) -> str:
    """The logged solver's name: the eval's (ours, Inspect's), else its plan's steps."""
    if header.eval.solver:
        return header.eval.solver
    steps = [step.solver for step in header.plan.steps if step.solver]
    return ", ".join(steps) or "solver"


def _default_dir(logged: RescorableLog) -> str | Path:
    """The original's directory (an object store's URL for a log read from one)."""
    if is_url(logged.source):
        return logged.source.rstrip("/").rsplit("/", 1)[0]
    return Path(logged.source).parent


def _log_format(path: Path) -> str:
    """The original's format: `.eval` or `.json` (a journal's, as its final log's name)."""
    name = path.name
    if path.suffix == JOURNAL_SUFFIX:
        try:
            with path.open("rb") as fh:
                name = msgspec.json.decode(fh.readline(), type=JournalStart).log
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return "json"
    return "eval" if name.endswith(".eval") else "json"


def _reducer(header: s.EvalLog, epochs: int) -> str | None:
    """The logged epoch reducer, when it is one of ours (else None: every epoch counts)."""
    from .statistics.reducers import check_reducer

    reducers = header.eval.config.epochs_reducer or []
    if len(reducers) != 1:
        return None
    try:
        return check_reducer(reducers[0], epochs)
    except ConfigError:
        return None


def _cluster(column: str | None, rows: list[dict[str, Any]]) -> str | None:
    """The logged cluster column, when every row has a value in it."""
    if column is None or any(row.get(column) is None for row in rows):
        return None
    return column

"""The log of a task's run: its header made from the task's state, the run's journal,
the final log, and the chats of spilled samples read back from either."""

from __future__ import annotations

import hashlib
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec

from .._errors import LogWriteError, TaskStateError, VitalsError
from .._version import version
from ..chats.chat import Chat
from ..engine.user_functions import FunctionSpec
from ..log import schema as log_schema
from ..log.compose import (
    RunHeader,
    SampleSelection,
    ScorerResults,
    compose_header,
    compose_sample,
)
from ..log.journal_format import read_journal_batches, read_journal_replies
from ..log.logged_batches import with_batches
from ..log.logged_replies import with_replies
from ..log.reader import read_log
from ..log.writer import LogWriter, log_file_name, new_id, write_json_log
from ..samples import SampleRecord
from ..statistics.corrected import CorrectedMean
from ..statistics.intervals import MetricStat
from ..vocab.batch_records import BatchRecord
from ..vocab.usage import UsageLedger
from .measuring import panel_metadata, scorers_agreement
from .spill import is_spilled, rehydrate
from .state import RunState, TaskSetup
from .stores import publish

__all__ = [
    "configured_solver_chat",
    "configured_solver_model",
    "eval_error",
    "finalize_log",
    "open_writer",
    "rehydrate_records",
    "run_header",
    "write_log",
]


def write_log(setup: TaskSetup, state: RunState, dir: str | Path | None) -> Path:
    """`Task.log()`: write the final log of the last run into `dir`; return its path."""
    if state.records is None:
        raise TaskStateError("Task has not been solved yet. Run task.eval() first.")
    target = Path(dir) if dir is not None else setup.dir
    writer = state.writer
    if writer is not None and not writer.finalized and writer.journal.exists():
        return finalize_log(setup, state, writer, target / writer.path.name)
    header = compose_header(run_header(setup, state, state.records))
    logged = state.log_path
    if is_spilled(state.records) and logged is not None and logged.exists():
        header.samples = read_log(logged).samples  # spilled samples are whole only there
    else:
        header.samples = [compose_sample(r, setup.scorer_label) for r in state.records]
    name = state.log_name or log_file_name(
        state.created or time.time(), setup.name, state.eval_id or new_id()
    )
    state.log_path = write_json_log(target / Path(name).with_suffix(".json").name, header)
    return state.log_path


def finalize_log(
    setup: TaskSetup, state: RunState, writer: LogWriter, path: Path | None = None
) -> Path:
    header = compose_header(run_header(setup, state, state.records or []))
    if state.batches and state.status != "success":
        batches = batches_to_resume(writer.journal, state.records or [])
        header.eval.metadata = with_batches(header.eval.metadata, batches)
    if state.status != "success":  # the replies its unfinished samples had, for a resume
        replies = read_journal_replies(writer.journal)
        header.eval.metadata = with_replies(header.eval.metadata, replies)
    state.log_path = writer.finalize(header, path, check=_reads_back(header, writer.journal))
    if state.log_path.parent == setup.dir:
        publish(state, state.log_path)
    return state.log_path


def batches_to_resume(journal: Path, records: Iterable[SampleRecord]) -> list[BatchRecord]:
    """The journal's provider batches, each with its requests of the samples that did not
    finish (a run that stopped: resuming its log takes their outcomes, not sending them)."""
    finished = {record.key for record in records if record.error is None}
    batches = []
    for batch in read_journal_batches(journal):
        entries = [
            entry
            for entry in batch.entries or ()
            if entry.sample is not None and (entry.sample, entry.epoch) not in finished
        ]
        batches.append(msgspec.structs.replace(batch, entries=entries or None))
    return batches


def _reads_back(header: log_schema.EvalLog, journal: Path) -> Callable[[Path], None]:
    """A check that a newly composed log reads back as the log of this run."""

    def check(path: Path) -> None:
        try:
            got = read_log(path, header_only=True).header
        except VitalsError as exc:
            why = f"does not read back: {exc}"
        else:
            if got.eval.eval_id == header.eval.eval_id and got.status == header.status:
                return
            why = f"reads back as run {got.eval.eval_id} ({got.status})"
        raise LogWriteError(
            f"The final log composed from {journal} {why}. Nothing was replaced and the "
            "journal is kept; resume the run to finish its log.",
            path=str(path),
        )

    return check


def open_writer(
    setup: TaskSetup,
    state: RunState,
    *,
    fresh: bool,
    exclude: Iterable[tuple[Any, int]] = (),
) -> LogWriter:
    """The journal of this task's current run: a new one when solving afresh, else the
    one left open (or, after its log was written, a new one under the same name).
    `exclude`: samples in the journal that the final log must leave out."""
    earlier = state.writer
    if earlier is not None and not earlier.finalized:
        earlier.release()  # its lock, which the new writer takes
    if not fresh and earlier is not None and not earlier.finalized:
        state.writer = LogWriter(
            earlier.path,
            compose_header(run_header(setup, state, state.records or [])),
            order=setup.order,
            resume=True,
            exclude={*earlier.exclude, *exclude},
        )
        return state.writer
    path = setup.dir / (state.log_name or "log.json")
    header = compose_header(run_header(setup, state, state.records or []))
    state.writer = LogWriter(path, header, order=setup.order, resume=not fresh, exclude=exclude)
    return state.writer


def rehydrate_records(setup: TaskSetup, state: RunState, records: list[SampleRecord]) -> None:
    """Chats of spilled records, read back from the journal or the final log."""
    if not is_spilled(records):
        return
    writer = state.writer
    source = writer.journal if writer is not None and writer.journal.exists() else None
    source = source or state.log_path
    if source is None:
        return
    rehydrate(records, source, setup.live_chats())


def configured_solver_chat(
    setup: TaskSetup, solver_kwargs: dict[str, Any] | None = None
) -> Chat | None:
    """The chat the solver will talk to, when known before it runs: the `solver_chat`
    given to eval(), else the solver's own."""
    for candidate in (
        (solver_kwargs or {}).get("solver_chat"),
        getattr(setup.solver, "solver_chat", None),
    ):
        if isinstance(candidate, Chat):
            return candidate
    return None


def configured_solver_model(
    setup: TaskSetup, solver_kwargs: dict[str, Any] | None = None
) -> str | None:
    """The model of `configured_solver_chat`."""
    chat = configured_solver_chat(setup, solver_kwargs)
    return chat.provider.model_id if chat is not None else None


def _solver_model(setup: TaskSetup, state: RunState) -> str:
    records = state.records or []
    chat = next((r.solver_chat for r in records if r.solver_chat is not None), None)
    if chat is not None:
        return chat.provider.model_id
    return state.solver_model or configured_solver_model(setup) or "none/none"


def _selection(state: RunState) -> SampleSelection | None:
    """How the last solving run chose its samples, for the log's header (None: all)."""
    options = state.selection
    if options is None or not (options.limit or options.sample_ids or options.shuffle):
        return None
    return SampleSelection(
        limit=options.limit,
        sample_ids=list(options.sample_ids) if options.sample_ids is not None else None,
        seed=options.seed if options.shuffle else None,
    )


def run_header(setup: TaskSetup, state: RunState, records: list[SampleRecord]) -> RunHeader:
    ledger = UsageLedger()
    ledger.merge(state.solve_ledger)
    ledger.merge(state.score_ledger)
    model = _solver_model(setup, state)
    spec: FunctionSpec = setup.solver_spec
    fingerprint = "|".join([setup.name, spec.label, setup.scorer_label or "", model])
    partial = state.partial_metrics if state.status != "success" else None
    stats = state.metric_stats if state.metrics else partial
    return RunHeader(
        task=setup.name,
        task_id=hashlib.sha256(fingerprint.encode()).hexdigest()[:22],
        run_id=state.run_id or new_id(),
        eval_id=state.eval_id or new_id(),
        created=state.created or time.time(),
        model=model,
        solver=spec.label,
        scorer=setup.scorer_label if state.scored or state.metrics or partial else None,
        epochs=state.epochs,
        dataset_name=setup.name,
        sample_ids=state.sample_ids if state.sample_ids is not None else [r.id for r in setup.rows],
        selection=_selection(state),
        metrics=state.metrics or {k: stat.value for k, stat in (partial or {}).items()},
        metric_stats=stats or {},
        reducer=setup.reducer,
        cluster=setup.cluster,
        started_at=state.started_at,
        completed_at=state.completed_at,
        status=state.status,
        total_samples=len(records),
        completed_samples=sum(1 for r in records if r.error is None),
        scored_samples=_scored_samples(records, None),
        ledger=ledger,
        error=state.error,
        limit_history=state.limit_history,
        max_samples=state.concurrency,
        packages={"vitals_engine": version()},
        batches=list(state.batches.values()),
        score_metadata=panel_metadata(records, None),
        more_scorers=_more_scorers(setup, records, state.scorer_stats, state.corrected),
        corrected=(state.corrected or {}).get(setup.scorer_label or ""),
        human=setup.human,
        results_metadata=scorers_agreement(setup.scorer_names, records),
        metadata=state.header_metadata,
    )


def _more_scorers(
    setup: TaskSetup,
    records: list[SampleRecord],
    stats: dict[str, dict[str, MetricStat]] | None,
    corrected: dict[str, CorrectedMean] | None,
) -> list[ScorerResults]:
    """The results of the scorers after the first (a task of several), each over its
    own scores."""
    names = setup.scorer_names[1:] if stats else []
    return [
        ScorerResults(
            name,
            {metric: stat.value for metric, stat in (stats or {}).get(name, {}).items()},
            (stats or {}).get(name, {}),
            _scored_samples(records, name),
            panel_metadata(records, name),
            (corrected or {}).get(name),
        )
        for name in names
    ]


def _scored_samples(records: list[SampleRecord], scorer: str | None) -> int:
    return sum(
        1
        for r in records
        if r.error is None and (score := r.score_by(scorer)) is not None and score.value is not None
    )


def eval_error(exc: BaseException) -> log_schema.EvalError:
    text = "".join(traceback.format_exception(exc))
    return log_schema.EvalError(f"{type(exc).__name__}: {exc}", text, text)

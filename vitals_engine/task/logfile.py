"""The log of a task's run: its header made from the task's state, the run's journal,
the final log, and the chats of spilled samples read back from either."""

from __future__ import annotations

import hashlib
import time
import traceback
from pathlib import Path

from .._errors import TaskStateError
from .._version import version
from ..chats.chat import Chat
from ..engine.calls import FunctionSpec
from ..log import schema as log_schema
from ..log.compose import RunHeader, compose_header, compose_sample
from ..log.writer import LogWriter, log_file_name, new_id, write_json_log
from ..samples import SampleRecord
from ..vocab.usage import UsageLedger
from .spill import is_spilled, rehydrate
from .state import RunState, TaskSetup

__all__ = [
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
    state.log_path = writer.finalize(header, path)
    return state.log_path


def open_writer(setup: TaskSetup, state: RunState, *, fresh: bool) -> LogWriter:
    """The journal of this task's current run: a new one when solving afresh, else the
    one left open (or, after its log was written, a new one under the same name)."""
    if not fresh and state.writer is not None and not state.writer.finalized:
        state.writer = LogWriter(
            state.writer.path,
            compose_header(run_header(setup, state, state.records or [])),
            order=setup.order,
            resume=True,
        )
        return state.writer
    path = setup.dir / (state.log_name or "log.json")
    header = compose_header(run_header(setup, state, state.records or []))
    state.writer = LogWriter(path, header, order=setup.order, resume=not fresh)
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


def _solver_model(setup: TaskSetup, state: RunState) -> str:
    records = state.records or []
    chat = next((r.solver_chat for r in records if r.solver_chat is not None), None)
    if chat is None:
        candidate = getattr(setup.solver, "solver_chat", None)
        chat = candidate if isinstance(candidate, Chat) else None
    return chat.provider.model_id if chat is not None else "none/none"


def run_header(setup: TaskSetup, state: RunState, records: list[SampleRecord]) -> RunHeader:
    ledger = UsageLedger()
    ledger.merge(state.solve_ledger)
    ledger.merge(state.score_ledger)
    model = _solver_model(setup, state)
    spec: FunctionSpec = setup.solver_spec
    fingerprint = "|".join([setup.name, spec.label, setup.scorer_label or "", model])
    partial = state.partial_metrics if state.status != "success" else None
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
        sample_ids=[r.id for r in setup.rows],
        metrics=state.metrics or partial or {},
        started_at=state.started_at,
        completed_at=state.completed_at,
        status=state.status,
        total_samples=len(records),
        completed_samples=sum(1 for r in records if r.error is None),
        scored_samples=sum(
            1 for r in records if r.score and r.score.value is not None and r.error is None
        ),
        ledger=ledger,
        error=state.error,
        limit_history=state.limit_history,
        max_samples=state.concurrency,
        packages={"vitals_engine": version()},
    )


def eval_error(exc: BaseException) -> log_schema.EvalError:
    text = "".join(traceback.format_exception(exc))
    return log_schema.EvalError(f"{type(exc).__name__}: {exc}", text, text)

"""Continuing a run that did not finish: find its journal, keep what finished.

`task.eval(resume=True)` looks in the task's log directory for the newest
journal of a task of the same name (a run killed mid-way leaves one); with
a path it takes that journal or an unfinished log (status "started",
"error" or "cancelled"). Samples that were solved and scored without error
are kept as they are and never sent to a model again; errored, unscored and
missing ones run.
The resumed run appends to the same journal and finishes the same log.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from .._errors import ConfigError, LogFormatError
from ..chats.chat import Chat
from ..log import schema as s
from ..log.journal_format import JOURNAL_SUFFIX, JournalStart, read_journal
from ..log.logged_sample import normalize_model, sample_record
from ..log.reader import read_log
from ..samples import SampleRecord
from ..vocab.usage import UsageLedger

__all__ = ["Resumed", "find_resumable", "load_resume"]


@dataclass(slots=True)
class Resumed:
    """What a resumed run starts from."""

    source: Path
    log_name: str
    eval_id: str
    created: float
    epochs: int | None
    finished: dict[tuple[Any, int], SampleRecord]
    ledger: UsageLedger
    #: The finished samples as logged, written as they are into a new journal.
    logged: dict[tuple[Any, int], s.EvalSample]


def _start_record(journal: Path) -> JournalStart | None:
    try:
        with journal.open("rb") as fh:
            return msgspec.json.decode(fh.readline(), type=JournalStart)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def find_resumable(directory: Path, task: str) -> Path | None:
    """The newest journal in `directory` of a task named `task`, or None."""
    if not directory.is_dir():
        return None
    candidates = []
    for journal in directory.glob(f"*{JOURNAL_SUFFIX}"):
        start = _start_record(journal)
        if start is not None and start.header.eval.task == task:
            candidates.append((journal.stat().st_mtime, journal))
    return max(candidates)[1] if candidates else None


def _created(header: s.EvalLog) -> float:
    try:
        return datetime.fromisoformat(header.eval.created).timestamp()
    except ValueError:
        return datetime.now().timestamp()


def load_resume(path: Path, task_name: str, live: list[Chat]) -> Resumed:
    """Read what `path` (a journal or an unfinished log) finished, for task `task_name`.

    Rebuilt chats talk to the live model of `live` with the same provider and
    model, so a resumed task's chats can go on talking.
    """
    if not path.exists():
        raise ConfigError(f"Cannot resume from '{path}': it does not exist.")
    if path.suffix == JOURNAL_SUFFIX:
        start = _start_record(path)
        if start is None:
            raise LogFormatError(f"{path}: not a journal: its first line is not a start record.")
        contents = read_journal(path)
        header, samples, log_name = contents.header, contents.samples, start.log
    else:
        logged = read_log(path)
        header, samples, log_name = logged.header, logged.samples, path.name
    if header.eval.task != task_name:
        raise ConfigError(
            f"Cannot resume task '{task_name}' from '{path}': it is a log of task "
            f"'{header.eval.task}'."
        )
    if header.status == "success":
        raise ConfigError(
            f"Cannot resume from '{path}': that run finished successfully. "
            "Run task.eval() for a new run."
        )
    default_model = normalize_model(header.eval.model)
    by_model = {chat.provider.model_id: chat for chat in live}
    finished: dict[tuple[Any, int], SampleRecord] = {}
    as_logged: dict[tuple[Any, int], s.EvalSample] = {}
    ledger = UsageLedger()
    for sample in samples:
        if sample.error is not None or not sample.scores:
            continue  # failed, or stopped before it was scored: run it again
        record = sample_record(sample, default_model, ours=True)
        for role, chat in (
            ("solver", record.solver_chat),
            ("scorer", record.score.chat if record.score else None),
        ):
            if chat is None:
                continue
            if chat.provider.model_id in by_model:
                chat._provider = by_model[chat.provider.model_id].provider
            for turn in chat.turns:
                if turn.role == "assistant" and turn.tokens is not None:
                    for target in (ledger, record.usage):
                        target.record(role, chat.provider.name, chat.model, turn.tokens, turn.cost)
        finished[record.key] = record
        as_logged[record.key] = sample
    return Resumed(
        source=path,
        log_name=log_name,
        eval_id=header.eval.eval_id or Path(log_name).stem.rsplit("_", 1)[-1],
        created=_created(header),
        epochs=header.eval.config.epochs,
        finished=finished,
        ledger=ledger,
        logged=as_logged,
    )

"""Continuing a run that did not finish: find its journal, keep what finished.

`task.eval(resume=True)` looks in the task's log directory for the newest
run of a task of the same name and continues it when it did not finish: a
journal (a run killed mid-way leaves one) or a log with status "started",
"error" or "cancelled" (a run stopped by Ctrl-C or a cancellation, or one
with failed samples), `.json` or `.eval`. When the newest run finished,
there is nothing to resume. With a path it takes that journal or unfinished
log. The resumed run appends to the same journal and finishes the same log.

A journal is a run whose final log was never put in place (or whose journal
was not yet removed after it was), whatever its last header says: a run killed
while it wrote its final log, or one whose disk was full then, says "success"
there. Resuming it finishes it: every sample it logged is kept as it was, failed
ones too, nothing is sent, and the final log is composed from the journal.

What a journal holds of the samples that did not finish, the model replies that
had arrived (`reply` records), answers the same calls when those samples run
again (`chats/layers/replies.py`): a resumed run sends only the requests that were
unanswered when its predecessor stopped.

What is reused (`reconcile`): a run solved by another solver, scored by
another scorer or run on another model is refused (`ConfigError`) unless the
caller resumes anyway. A logged sample is kept, never sent to a model again,
only when it finished without error and its input, target, solver model and
scorer match this run's row of the same id and epoch; the others run again.
Samples whose id (or epoch) is no longer in the dataset are left out of the
final log.

A re-score (`read_log(...).rescore()`, `vitals score`) writes its log under the task's
name beside the run it scored, but it is not a run of the task: `resume=True` passes it
by, and naming it is refused. Resuming it would solve every sample again under the
re-score's scorer and leave the task's own unfinished run behind.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from .._errors import ConfigError, LogFormatError, VitalsError
from .._logging import log
from .._words import plural
from ..chats.chat import Chat
from ..dataset import DatasetRow
from ..log import schema as s
from ..log.compose import logged_input
from ..log.journal_format import (
    JOURNAL_SUFFIX,
    JournalStart,
    encoder,
    journal_path,
    read_journal,
    written_key,
)
from ..log.listing import LISTING
from ..log.logged_batches import logged_batches
from ..log.logged_replies import logged_replies
from ..log.logged_sample import add_chat_usage, normalize_model, sample_record
from ..log.reader import read_log
from ..samples import SampleRecord
from ..vocab.batch_records import BatchRecord
from ..vocab.model_calls import JournaledReply
from ..vocab.usage import UsageLedger

__all__ = ["UNFINISHED", "Resumed", "find_resumable", "load_resume", "newest_run", "reconcile"]


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
    #: The solver (label) and model the run was made with, as its header says.
    solver: str | None = None
    model: str | None = None
    #: Every (id, epoch) the source holds, finished or not.
    keys: set[tuple[Any, int]] = field(default_factory=set)
    #: Samples of the source the final log leaves out unless this run logs them anew:
    #: failed, unscored, changed, or gone from the dataset.
    stale: set[tuple[Any, int]] = field(default_factory=set)
    #: The provider batches the source sent (with the requests of unfinished samples):
    #: the resumed run takes their outcomes instead of sending those requests again.
    batches: tuple[BatchRecord, ...] = ()
    #: The model replies the source journaled for the samples that did not finish: they
    #: answer the same calls of the resumed run instead of sending them again.
    replies: tuple[JournaledReply, ...] = ()


def _start_record(journal: Path) -> JournalStart | None:
    try:
        with journal.open("rb") as fh:
            return msgspec.json.decode(fh.readline(), type=JournalStart)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


#: JSON files a log directory holds that are not logs (viewer manifests).
_MANIFESTS = frozenset({LISTING, "logs.json", "eval-set.json"})

#: The statuses of a run that did not finish: what `resume=True` continues.
UNFINISHED = ("started", "error", "cancelled")


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return float("-inf")


def newest_run(directory: Path, task: str) -> tuple[Path, str] | None:
    """The newest run in `directory` of a task named `task` (its log or, when it has
    none, its journal, in any format) and its status; None when there is none.

    Files are tried newest first (by modification time) and only their headers are
    read, until one of the task is found: cheap however many and however big the logs
    are. Files that cannot be read as logs are passed over. A journal is a run that
    wrote no final log, so it counts as unfinished whatever its last header says; so
    does a finished log whose journal is still beside it (its run was stopped between
    putting the log in place and removing the journal): the journal is returned."""
    if not directory.is_dir():
        return None
    files = [
        path
        for path in directory.iterdir()
        if path.suffix in (".json", ".eval", JOURNAL_SUFFIX)
        and path.name not in _MANIFESTS
        and not path.name.startswith(".")
    ]
    for path in sorted(files, key=_modified, reverse=True):
        try:
            header = read_log(path, header_only=True).header
        except VitalsError:  # damaged, not a log, or gone since the listing
            continue
        if header.eval.task != task or rescored_from(header) is not None:
            continue
        status = header.status if path.suffix != JOURNAL_SUFFIX else "started"
        if status not in UNFINISHED and journal_path(path).exists():
            return journal_path(path), "started"  # to finish what its run left
        return path, status
    return None


def rescored_from(header: s.EvalLog) -> str | None:
    """The log a re-score scored, when `header` is a re-score's (else None).

    Example:
        >>> rescored_from(read_log("logs/rescored.json", header_only=True).header)
        'logs/2026-01-14T16-19-11-06-00_sums_abc.json'
    """
    source = (header.eval.metadata or {}).get("rescored_from")
    if not isinstance(source, dict):
        return None
    return str(source.get("log") or "another log")


def find_resumable(directory: Path, task: str) -> Path | None:
    """The newest run in `directory` of a task named `task` when it did not finish (a
    journal, or a log with status started, error or cancelled), else None."""
    found = newest_run(directory, task)
    return found[0] if found is not None and found[1] in UNFINISHED else None


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
        batches, replies = contents.batches, contents.replies
    else:
        logged = read_log(path)
        header, samples, log_name = logged.header, logged.samples, path.name
        batches = tuple(logged_batches(logged.header))
        replies = tuple(logged_replies(logged.header))  # a stopped run's, of unfinished samples
    if header.eval.task != task_name:
        raise ConfigError(
            f"Cannot resume task '{task_name}' from '{path}': it is a log of task "
            f"'{header.eval.task}'."
        )
    if (scored := rescored_from(header)) is not None:
        raise ConfigError(
            f"Cannot resume task '{task_name}' from '{path}': it is a re-score of "
            f"'{scored}', not a run of the task. Resume the task's own run (resume=True "
            "finds it), or re-score that log again."
        )
    # a journal that says success lacks its final log: finish it (see the module docstring)
    finishing = header.status == "success" and path.suffix == JOURNAL_SUFFIX
    if header.status == "success" and not finishing:
        raise ConfigError(
            f"Cannot resume from '{path}': that run finished successfully. "
            "Run task.eval() for a new run."
        )
    default_model = normalize_model(header.eval.model)
    by_model = {chat.provider.model_id: chat for chat in live}
    finished: dict[tuple[Any, int], SampleRecord] = {}
    as_logged: dict[tuple[Any, int], s.EvalSample] = {}
    ledger = UsageLedger()
    keys: set[tuple[Any, int]] = set()
    for sample in samples:
        keys.add((sample.id, sample.epoch))
        if sample.error is None and not sample.scores:
            continue  # stopped before it was scored: run it again
        if sample.error is not None and not finishing:
            continue  # failed: run it again, unless the run ended well with it
        record = sample_record(sample, default_model, ours=True)
        for chat in (record.solver_chat, *record.judge_chats):
            if chat is not None and chat.provider.model_id in by_model:
                chat._provider = by_model[chat.provider.model_id].provider
        add_chat_usage(record, ledger, record.usage)
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
        solver=header.eval.solver,
        model=default_model,
        keys=keys,
        batches=batches,
        replies=replies,
    )


def _known(model: str | None) -> str | None:
    return model.lower() if model and model != "none/none" else None


def _one_model(resumed: Resumed) -> str | None:
    """The solver model of the finished samples, when they all had one and the same."""
    models = {
        chat.provider.model_id.lower()
        for record in resumed.finished.values()
        if (chat := record.solver_chat) is not None
    }
    return models.pop() if len(models) == 1 else None


def _setup_changes(
    resumed: Resumed, solver: str | None, scorers: list[str] | None, model: str | None
) -> list[str]:
    changes = []
    if resumed.solver and solver and resumed.solver != solver:
        changes.append(f"the solver {resumed.solver!r} (this run's is {solver!r})")
    logged = sorted({name for sample in resumed.logged.values() for name in sample.scores or {}})
    if scorers and logged and logged != sorted(scorers):
        was, now = ", ".join(map(repr, logged)), ", ".join(map(repr, scorers))
        changes.append(f"the scorer {was} (this run's: {now})")
    was, now = _known(resumed.model) or _one_model(resumed), _known(model)
    if was and now and was != now:
        changes.append(f"the model {was!r} (this run's is {now!r})")
    return changes


def _same_json(a: Any, b: Any) -> bool:
    return a == b or encoder.encode(a) == encoder.encode(b)  # lone surrogates as logged


def _still_valid(
    sample: s.EvalSample,
    record: SampleRecord,
    row: DatasetRow,
    scorers: list[str] | None,
    model: str | None,
) -> bool:
    if not _same_json(sample.input, logged_input(row.input)):
        return False
    if not _same_json(sample.target, row.target):
        return False
    if scorers and sample.scores and list(sample.scores) != scorers:
        return False  # (a sample without scores failed: kept only when finishing)
    now = _known(model)
    chat = record.solver_chat
    return not (now and chat is not None and chat.provider.model_id.lower() != now)


def _refusal(resumed: Resumed, changes: list[str], kept: int) -> ConfigError:
    """Why a changed setup is not resumed, and what resuming anyway would keep: it is
    suggested only when it keeps a finished sample (else it re-buys every reply)."""
    done = len(resumed.logged)
    said = (
        f"Cannot resume from '{resumed.source}': it was run with {'; '.join(changes)}. "
        "Its samples would mix two setups in one log."
    )
    if kept == 0:
        return ConfigError(
            f"{said} None of its {plural(done, 'finished sample')} would be kept under this "
            "setup: run without resume for a new run."
        )
    return ConfigError(
        f"{said} Run without resume for a new run, or resume anyway with "
        "eval(resume=..., resume_anyway=True) (`vitals eval --resume --resume-anyway`): it "
        f"keeps {kept} of {plural(done, 'finished sample')} (those whose input, target, "
        "solver model and scorer still match) and runs the rest again."
    )


def reconcile(
    resumed: Resumed,
    rows: Iterable[DatasetRow],
    epochs: int,
    *,
    solver: str | None,
    scorers: list[str] | None,
    model: str | None,
    anyway: bool = False,
) -> Resumed:
    """What of `resumed` this run may reuse, given its dataset `rows`, `epochs`, solver
    label, scorers' names and solver model (None: not known before the run). See the
    module docstring. Raises `ConfigError` for a changed setup unless `anyway`."""
    changes = _setup_changes(resumed, solver, scorers, model)
    # the source's ids as logged: a lone surrogate in an id is read back escaped
    by_id = {written_key((row.id, 1))[0]: row for row in rows}
    finished: dict[tuple[Any, int], SampleRecord] = {}
    logged: dict[tuple[Any, int], s.EvalSample] = {}
    changed = 0
    for key, sample in resumed.logged.items():
        row = by_id.get(key[0])
        if row is None or key[1] > epochs:
            continue
        record = resumed.finished[key]
        if _still_valid(sample, record, row, scorers, model):
            live = (row.id, key[1])
            finished[live], logged[live] = record, sample
        else:
            changed += 1
    if changes and not anyway:
        raise _refusal(resumed, changes, len(finished))
    for (live_id, _), record in finished.items():
        if record.sample.id != live_id:  # the record under the dataset's own id
            record.sample = dataclasses.replace(record.sample, id=live_id)
    gone = sum(1 for key in resumed.keys if key[0] not in by_id or key[1] > epochs)
    # Every sample of the source not reused: the final log holds it only once this run
    # logs it anew, so a resumed run that stops again logs (and counts) what it holds.
    stale = resumed.keys - {written_key(key) for key in finished}
    ledger = UsageLedger()
    for record in finished.values():
        ledger.merge(record.usage)
    if changed or gone:
        log.warning(
            "resume: samples not reused",
            source=str(resumed.source),
            reused=len(finished),
            changed=changed,
            gone_from_dataset=gone,
        )
    return dataclasses.replace(
        resumed, finished=finished, ledger=ledger, logged=logged, stale=stale
    )

"""Losing finished work (issue #33): a run killed while it writes its final log, or whose
disk fills up then, leaves its journal, which says the run succeeded; `resume` finishes
it from the journal, sending nothing. Each run here is killed for real (SIGKILL, in a
child process) at a step of finishing: before the final log is written, while it is
written, once it is in place, once it is listed."""

from __future__ import annotations

import errno
import io
import itertools
import os
from pathlib import Path
from typing import Any

import pytest

import vitals_engine as ve
from tests.children import die, finish, start
from tests.helpers import sums, until
from vitals_engine.log import writer as writer_module
from vitals_engine.log.journal_format import read_journal
from vitals_engine.log.listing import read_listing

#: The inputs the solver was asked, in this process (a child's are its own).
ASKED: list[str] = []
#: In a child: the input whose sample ends the process once another sample is journaled.
DIE_AT: dict[str, str] = {}

LONE = "a\ud800"  # a sample id holding a lone surrogate
SURROGATE_ROWS = [
    {"id": LONE, "input": "What's 1+1?", "target": "2"},
    {"id": "b", "input": "What's 2+2?", "target": "4"},
]


async def answer(input: str) -> str:
    """The solver: the mock model's answer, each input noted."""
    ASKED.append(input)
    if DIE_AT.get("input") == input:  # killed mid-run, once another sample is journaled
        journal = next(Path(DIE_AT["dir"]).glob("*.journal"))  # noqa: ASYNC240
        await until(lambda: b'{"kind":"sample"' in journal.read_bytes(), "a sample journaled")
        die()
    return await ve.chat_mock().chat_async(input)


def make_task(
    directory: Path, log_format: str = "json", rows: list[dict[str, Any]] | None = None
) -> ve.Task:
    return ve.Task(
        rows or sums(6),
        solver=answer,
        scorer=ve.detect_includes(),
        dir=directory,
        name="finishing",
        log_format=log_format,
    )


# -- in the child: where it dies ---------------------------------------------------------------


def _half_then(then: Any) -> Any:
    """`replace_atomically` writing half of the final log, then calling `then()`."""
    real = writer_module.replace_atomically

    def replace(path: Path, write: Any, suffix: str, **options: Any) -> Path:
        def half(fh: Any) -> None:
            whole = io.BytesIO()
            write(whole)
            fh.write(whole.getvalue()[: len(whole.getvalue()) // 2])
            fh.flush()
            then()

        return real(path, half, suffix, **options)

    return replace


def _die_at(step: str) -> None:
    """Make this process die at `step` of finishing a run's log."""
    if step == "closed":  # the journal says success, nothing of the final log is written
        writer_module.LogWriter.finalize = lambda *args, **kwargs: die()  # type: ignore[method-assign]
    elif step == "writing":  # half of it written, in a temporary file beside it
        writer_module.replace_atomically = _half_then(die)  # type: ignore[assignment]
    elif step == "written":  # in place, not yet in listing.json, the journal still there
        writer_module.update_listing = lambda *args, **kwargs: die()  # type: ignore[assignment]
    elif step == "listed":  # listed, the journal not yet removed
        listed = writer_module.update_listing

        def listed_then_die(*args: Any, **kwargs: Any) -> None:
            listed(*args, **kwargs)
            die()

        writer_module.update_listing = listed_then_die  # type: ignore[assignment]


def run_killed_at(step: str, directory: str, log_format: str, surrogate: bool) -> None:
    """In a child: run the task; die at `step` of finishing its log."""
    _die_at(step)
    rows = SURROGATE_ROWS if surrogate else None
    make_task(Path(directory), log_format, rows).eval(progress=False)


def run_killed_mid_way(directory: str, input: str) -> None:
    """In a child: run the surrogate task; die once a sample is journaled while the sample
    of `input` is solving."""
    DIE_AT.update(dir=directory, input=input)
    make_task(Path(directory), rows=SURROGATE_ROWS).eval(progress=False, max_concurrency=1)


# -- the tests ---------------------------------------------------------------------------------


def killed_at(
    step: str, directory: Path, log_format: str = "json", surrogate: bool = False
) -> Path:
    """A run killed at `step` of finishing; its journal, which says it succeeded."""
    child = start(run_killed_at, step, str(directory), log_format, surrogate)
    assert finish(child) == -9
    [journal] = directory.glob("*.journal")
    assert read_journal(journal).header.status == "success"
    return journal


def assert_finished(task: ve.Task, journal: Path, n: int) -> ve.LoggedEval:
    """Resume sent nothing and left the log the killed run would have: every sample, status
    success, listed, no journal (nor its lock)."""
    assert ASKED == []
    final = task.log_path
    assert final is not None
    assert final.stem == journal.stem
    logged = ve.read_log(final)
    assert logged.status == "success"
    assert len(logged.samples) == n
    assert not journal.exists()
    assert not list(final.parent.glob(".*.lock")) or not list(final.parent.glob(".*journal.lock"))
    assert read_listing(final.parent)[final.name]["status"] == "success"
    return logged


@pytest.mark.parametrize("log_format", ["json", "eval"])
@pytest.mark.parametrize("step", ["closed", "writing", "written", "listed"])
def test_a_run_killed_while_it_writes_its_final_log_is_finished_by_resume(
    tmp_path, step, log_format
):
    """Killed before, during or after the final write: `resume=True` finishes the run from
    its journal, asking the model nothing; its log is whole, listed, the journal gone."""
    journal = killed_at(step, tmp_path, log_format)
    final = journal.with_suffix(f".{log_format}")
    assert final.exists() == (step in ("written", "listed"))
    ASKED.clear()
    task = make_task(tmp_path, log_format)
    task.eval(resume=True, progress=False)
    assert_finished(task, journal, 6)
    assert task.metrics == {"accuracy": 1.0}


@pytest.mark.parametrize("log_format", ["json", "eval"])
def test_a_disk_full_while_the_final_log_is_written_keeps_a_journal_resume_finishes(
    tmp_path, monkeypatch, log_format
):
    """The disk fills up half-way through the final log: the run fails with a LogWriteError,
    no log and no temporary file are left, the journal is kept; once there is space, resume
    finishes it, asking the model nothing."""

    def full() -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(writer_module, "replace_atomically", _half_then(full))
    with pytest.raises(ve.LogWriteError, match="No space left on device"):
        make_task(tmp_path, log_format).eval(progress=False)
    [journal] = tmp_path.glob("*.journal")
    assert not list(tmp_path.glob(f"*.{log_format}"))
    assert not list(tmp_path.glob(".tmp-*"))
    monkeypatch.undo()
    ASKED.clear()
    task = make_task(tmp_path, log_format)
    task.eval(resume=True, progress=False)
    assert_finished(task, journal, 6)


# -- an eval set --------------------------------------------------------------------------------


def trials(directory: Path) -> list[ve.Task]:
    return [
        ve.Task(sums(3), answer, ve.detect_includes(), dir=directory, name=f"trial-{i}")
        for i in range(8)
    ]


def run_set_killed_at_its_fifth_log(directory: str) -> None:
    """In a child: an eval set of eight runs, killed as the fifth writes its final log."""
    finalize = writer_module.LogWriter.finalize
    count = itertools.count(1)

    def fifth_dies(self: Any, *args: Any, **kwargs: Any) -> Any:
        if next(count) == 5:
            die()
        return finalize(self, *args, **kwargs)

    writer_module.LogWriter.finalize = fifth_dies  # type: ignore[method-assign]
    ve.eval_set(trials(Path(directory)), progress=False)


def test_an_eval_set_killed_while_its_runs_write_their_logs_is_finished_by_resume(tmp_path):
    """Eight runs, killed as the fifth writes its log: four logs, the rest journals (the
    fifth's says success). Resumed, every run ends with its log; the model is asked only
    for the samples no journal or log held."""
    child = start(run_set_killed_at_its_fifth_log, str(tmp_path))
    assert finish(child) == -9
    logs = [p for p in tmp_path.glob("*.json") if p.name != "listing.json"]
    journals = list(tmp_path.glob("*.journal"))
    assert (len(logs), len(journals)) == (4, 4)
    stranded = [j for j in journals if read_journal(j).header.status == "success"]
    assert stranded
    held = sum(len(read_journal(j).samples) for j in journals) + 3 * len(logs)
    ASKED.clear()
    result = ve.eval_set(trials(tmp_path), resume=True, progress=False)
    assert len(ASKED) == 24 - held
    assert not list(tmp_path.glob("*.journal"))
    assert result.errors == {}
    paths = [path for path in result.log_paths if path is not None]
    assert len(set(paths)) == 8
    assert all(ve.read_log(path).status == "success" for path in paths)


# -- a sample id with a lone surrogate --------------------------------------------------------


@pytest.mark.parametrize("log_format", ["json", "eval"])
def test_a_lone_surrogate_in_a_sample_id_is_logged_escaped(tmp_path, log_format):
    """The run succeeds and its log holds the id as its escape (the log used not to be
    written at all, the journal's id reading back unlike the run's)."""
    task = make_task(tmp_path, log_format, SURROGATE_ROWS)
    task.eval(progress=False)
    logged = ve.read_log(task.log_path)
    assert logged.status == "success"
    assert [sample.id for sample in logged.samples] == ["a\\ud800", "b"]
    assert not list(tmp_path.glob("*.journal"))


def test_a_lone_surrogate_id_killed_while_finishing_is_finished_sending_nothing(tmp_path):
    """Killed before its final log, the run with that id is finished by resume: nothing is
    asked again, the log holds both samples."""
    journal = killed_at("closed", tmp_path, surrogate=True)
    ASKED.clear()
    task = make_task(tmp_path, rows=SURROGATE_ROWS)
    task.eval(resume=True, progress=False)
    logged = assert_finished(task, journal, 2)
    assert [sample.id for sample in logged.samples] == ["a\\ud800", "b"]


def test_a_lone_surrogate_id_that_finished_before_a_kill_is_not_run_again(tmp_path):
    """Killed mid-run after the sample with that id was journaled: the resumed run asks the
    model only for the other sample, and its log holds each sample once."""
    child = start(run_killed_mid_way, str(tmp_path), "What's 2+2?")
    assert finish(child) == -9
    ASKED.clear()
    task = make_task(tmp_path, rows=SURROGATE_ROWS)
    task.eval(resume=True, progress=False)
    assert ASKED == ["What's 2+2?"]
    logged = ve.read_log(task.log_path)
    assert logged.status == "success"
    assert [sample.id for sample in logged.samples] == ["a\\ud800", "b"]

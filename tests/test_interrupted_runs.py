"""Interrupted runs (issue #14): a run stopped by Ctrl-C or a cancellation is resumed by
`eval(resume=True)` / `vitals eval --resume`, and every count of it (the log's samples,
its header, `vitals ls`, the viewer, the task in memory, the printed summary) agrees.

Samples in flight when a run stops have not finished: they are neither logged nor
counted, and a resume runs them again."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

import vitals_engine as ve
from tests import helpers
from vitals_engine.cli import main
from vitals_engine.log.journal_format import encode_sample, encode_start
from vitals_engine.report import summary
from vitals_engine.viewer.catalog import Catalog

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[1]

#: The rows of this module's tasks are numbered from 1, each with its number as id.
sums = functools.partial(helpers.sums, start=1, ids=True)


class Solver:
    """Answers every sample, noting its id; raises KeyboardInterrupt on `stop_at`, and
    fails the samples in `broken`."""

    def __init__(self, stop_at: int | None = None, broken: tuple[int, ...] = ()) -> None:
        self.asked: list[int] = []
        self.stop_at = stop_at
        self.broken = broken

    async def __call__(self, input: str, sample: ve.Sample) -> str:
        if sample.id == self.stop_at:
            raise KeyboardInterrupt
        self.asked.append(int(sample.id))
        if sample.id in self.broken:
            raise RuntimeError("broken")
        return str(2 * int(sample.id))


def the_log(directory: Path) -> Path:
    logs = [p for p in directory.iterdir() if p.suffix in (".json", ".eval")]
    logs = [p for p in logs if p.name != "listing.json"]
    assert len(logs) == 1, logs
    return logs[0]


# -- 1. resume=True finds the interrupted run ---------------------------------------------


@pytest.mark.parametrize("log_format", ["json", "eval"])
async def test_resume_true_continues_a_run_stopped_by_ctrl_c(tmp_path, log_format):
    """A run stopped by KeyboardInterrupt ends with a "cancelled" log and no journal;
    resume=True finds that log and runs only the samples that did not finish. The final
    log (same file) holds every sample once, with status success."""
    first = Solver(stop_at=6)
    task = ve.Task(sums(10), solver=first, scorer=ve.detect_includes(), dir=tmp_path, name="t")
    with pytest.raises(KeyboardInterrupt):
        await task.eval_async(max_concurrency=1, log_format=log_format)
    path = task.log_path
    assert path is not None
    assert path.suffix == f".{log_format}"
    stopped = ve.read_log(path)
    assert stopped.status == "cancelled"
    assert not list(tmp_path.glob("*.journal"))
    finished = {int(s.id) for s in stopped.samples}
    assert finished
    assert finished < set(range(1, 10))

    again = Solver()
    twin = ve.Task(sums(10), solver=again, scorer=ve.detect_includes(), dir=tmp_path, name="t")
    await twin.eval_async(resume=True)
    assert sorted(again.asked) == sorted(set(range(1, 11)) - finished)
    assert twin.log_path == path
    final = ve.read_log(path)
    assert final.status == "success"
    assert sorted(int(s.id) for s in final.samples) == list(range(1, 11))
    assert twin.metrics == {"accuracy": 1.0}


async def test_resume_true_after_a_cancellation(tmp_path):
    """A run cancelled by its caller (leaving stream_async early) is resumed by resume=True."""
    task = ve.Task(sums(6), solver=Solver(), scorer=ve.detect_includes(), dir=tmp_path, name="t")
    async with task.stream_async(max_concurrency=1) as samples:
        async for record in samples:
            if record.sample.id == 2:
                break
    stopped = ve.read_log(task.log_path)
    assert stopped.status == "cancelled"
    finished = {int(s.id) for s in stopped.samples}

    again = Solver()
    twin = ve.Task(sums(6), solver=again, scorer=ve.detect_includes(), dir=tmp_path, name="t")
    await twin.eval_async(resume=True)
    assert sorted(again.asked) == sorted(set(range(1, 7)) - finished)
    assert sorted(int(s.id) for s in ve.read_log(twin.log_path).samples) == list(range(1, 7))


async def test_resume_true_when_the_newest_run_finished_says_so(tmp_path):
    """An interrupted run followed by one that finished: the newest run of the task has
    nothing to resume, and the error says to run without resume (runs of other tasks in
    the directory do not count)."""
    task = ve.Task(
        sums(4), solver=Solver(stop_at=3), scorer=ve.detect_includes(), dir=tmp_path, name="t"
    )
    with pytest.raises(KeyboardInterrupt):
        await task.eval_async(max_concurrency=1)
    done = ve.Task(sums(4), solver=Solver(), scorer=ve.detect_includes(), dir=tmp_path, name="t")
    await done.eval_async()
    other = ve.Task(
        sums(4), solver=Solver(stop_at=2), scorer=ve.detect_includes(), dir=tmp_path, name="u"
    )
    with pytest.raises(KeyboardInterrupt):
        await other.eval_async(max_concurrency=1)

    again = ve.Task(sums(4), solver=Solver(), scorer=ve.detect_includes(), dir=tmp_path, name="t")
    with pytest.raises(ve.ConfigError, match="Nothing to resume") as caught:
        await again.eval_async(resume=True)
    message = str(caught.value)
    assert done.log_path is not None
    assert done.log_path.name in message
    assert "finished" in message
    assert "without resume" in message


@pytest.mark.no_inspect_check  # it leaves damaged logs on purpose
async def test_resume_true_reads_only_headers_and_passes_over_damaged_files(tmp_path, monkeypatch):
    """Finding the run to resume reads the logs' headers, never their samples; files
    that cannot be read as logs are passed over."""
    task = ve.Task(
        sums(4), solver=Solver(stop_at=3), scorer=ve.detect_includes(), dir=tmp_path, name="t"
    )
    with pytest.raises(KeyboardInterrupt):
        await task.eval_async(max_concurrency=1)
    for n in range(3):
        other = ve.Task(
            sums(4), solver=Solver(), scorer=ve.detect_includes(), dir=tmp_path, name=f"o{n}"
        )
        await other.eval_async(log_format="eval" if n else "json")
    (tmp_path / "zz-broken.json").write_text('{"version": 2, "eval": ')
    (tmp_path / "zz-broken.eval").write_bytes(b"not a zip")
    (tmp_path / "zz-broken.journal").write_bytes(b"garbage\n")

    from vitals_engine.task import resume

    reads: list[tuple[Path, bool]] = []
    real = resume.read_log

    def spy(path: Any, header_only: bool = False) -> Any:
        reads.append((Path(path), header_only))
        return real(path, header_only=header_only)

    monkeypatch.setattr(resume, "read_log", spy)
    assert resume.find_resumable(tmp_path, "t") == task.log_path
    assert reads
    assert all(header_only for _, header_only in reads)


# -- 2. every count agrees after an interrupt -----------------------------------------------


def ls_samples(directory: Path, name: str, capsys) -> str:
    assert main(["ls", str(directory)]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.endswith(name)]
    assert len(lines) == 1, out
    header = out.splitlines()[0]
    start = header.index("samples")
    return lines[0][start:].split()[0]


@pytest.mark.parametrize("how", ["KeyboardInterrupt", "cancel"])
async def test_every_count_is_the_samples_in_the_log(tmp_path, capsys, how):
    """Samples 1-3 finish; 4 and 5 are still solving, 7 is solved but still being scored
    when the run stops (Ctrl-C from sample 6, or the caller cancelling). The log holds 1-3
    and only them; its header, `vitals ls`, the viewer's listing, the task in memory and
    the printed summary all count 3. A resume runs every other sample."""
    three_finished = anyio.Event()
    first_run = True
    asked: list[int] = []

    async def solver(input: str, sample: ve.Sample) -> str:
        asked.append(int(sample.id))
        if first_run and sample.id in (4, 5):
            await anyio.sleep_forever()
        if first_run and sample.id == 6:
            await three_finished.wait()
            if how == "KeyboardInterrupt":
                raise KeyboardInterrupt
            await anyio.sleep_forever()
        return str(2 * int(sample.id))

    async def scorer(sample: ve.SolvedSample) -> bool:
        if first_run and sample.id == 7:
            await anyio.sleep_forever()
        return sample.result == sample.target

    task = ve.Task(sums(8), solver=solver, scorer=scorer, dir=tmp_path, name="t")
    seen: list[int] = []

    async def consume() -> None:
        async with task.stream_async(max_concurrency=8) as samples:
            async for record in samples:
                seen.append(int(record.sample.id))
                if sorted(seen) == [1, 2, 3, 8]:
                    three_finished.set()
                    if how == "cancel":
                        break

    with anyio.fail_after(30):  # a guard against a hang, not a timing
        if how == "KeyboardInterrupt":
            with pytest.raises(KeyboardInterrupt):
                await consume()
        else:
            await consume()

    path = the_log(tmp_path)
    assert task.log_path == path
    logged = ve.read_log(path)
    assert logged.status == "cancelled"
    assert sorted(int(s.id) for s in logged.samples) == [1, 2, 3, 8]
    results = logged.header.results
    assert results.total_samples == results.completed_samples == 4
    assert results.scores[0].scored_samples == 4
    assert ve.read_log(path, header_only=True).header.results.total_samples == 4
    assert logged.get_samples().height == 4
    assert task.get_samples().height == 4
    assert ls_samples(tmp_path, path.name, capsys) == "4"
    [entry] = [e for e in Catalog(tmp_path).entries() if e["name"] == path.name]
    assert entry["samples"] == entry["total_samples"] == 4
    assert summary(task).startswith("Task t: 4 samples, 0 failed")
    assert "Metrics: accuracy = 1" in summary(task)

    first_run = False
    asked.clear()
    twin = ve.Task(sums(8), solver=solver, scorer=scorer, dir=tmp_path, name="t")
    await twin.eval_async(resume=True)
    assert sorted(asked) == [4, 5, 6, 7]
    final = ve.read_log(path)
    assert final.status == "success"
    assert sorted(int(s.id) for s in final.samples) == list(range(1, 9))
    assert final.header.results.total_samples == 8


async def test_a_resumed_run_stopped_again_counts_what_its_log_holds(tmp_path):
    """A journal holding finished and failed samples, resumed and stopped again before
    reaching them: the log holds the finished ones (reused) and the newly finished, not the
    failed ones the resumed run had not run again; the header and the task count the same."""
    flaky = Solver(broken=(2, 5))
    task = ve.Task(sums(6), solver=flaky, scorer=ve.detect_includes(), dir=tmp_path, name="t")
    with pytest.raises(ve.EvalFailedError):
        await task.eval_async(max_concurrency=1)
    failed = ve.read_log(task.log_path)
    assert [s.id for s in failed.samples if s.error is not None] == [2, 5]
    # What the run would have left had it been killed before its final log.
    started = msgspec.structs.replace(failed.header, status="started", results=msgspec.UNSET)
    journal = task.log_path.with_suffix(".journal")
    journal.write_bytes(
        encode_start(started, task.log_path.name)
        + b"".join(encode_sample(sample) for sample in failed.samples)
    )
    task.log_path.unlink()

    twin = ve.Task(
        sums(6), solver=Solver(stop_at=2), scorer=ve.detect_includes(), dir=tmp_path, name="t"
    )
    with pytest.raises(KeyboardInterrupt):
        await twin.eval_async(resume=True, max_concurrency=1)
    assert twin.log_path is not None
    assert twin.log_path.name == task.log_path.name
    assert not journal.exists()
    logged = ve.read_log(twin.log_path)
    assert logged.status == "cancelled"
    assert sorted(int(s.id) for s in logged.samples) == [1, 3, 4, 6]
    assert logged.header.results.total_samples == 4
    assert twin.get_samples().height == 4


# -- through the command line ---------------------------------------------------------------

STOPPING_TASK = """
import os

import vitals_engine as ve

STOP = os.environ.get("CLI_TEST_STOP")
CALLS = os.environ["CLI_TEST_CALLS"]


def solver(input: str, sample: ve.Sample) -> str:
    if str(sample.id) == STOP:
        raise KeyboardInterrupt
    with open(CALLS, "a") as fh:
        fh.write(f"{sample.id}\\n")
    return input.upper()


stopping = ve.Task(
    [{"id": f"s{i}", "input": f"word{i}", "target": f"WORD{i}"} for i in range(1, 7)],
    solver=solver,
    scorer=ve.detect_includes(),
    name="stopping",
)
"""


def test_cli_resume_continues_a_run_stopped_by_ctrl_c(tmp_path):
    """`vitals eval FILE` stopped by Ctrl-C (exit 130) prints the counts its log holds;
    `vitals eval FILE --resume` then runs only the samples that did not finish and ends
    the same log with every sample once."""
    task_file = tmp_path / "stopping_task.py"
    task_file.write_text(textwrap.dedent(STOPPING_TASK))
    logs = tmp_path / "logs"
    calls = tmp_path / "calls.txt"
    command = [
        sys.executable,
        "-m",
        "vitals_engine",
        "eval",
        str(task_file),
        "--log-dir",
        str(logs),
        "--no-progress",
        "--max-concurrency",
        "1",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CLI_TEST_CALLS": str(calls)}

    stopped = subprocess.run(
        [*command],
        env={**env, "CLI_TEST_STOP": "s4"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert stopped.returncode == 130, stopped.stderr
    assert "interrupted" in stopped.stderr
    log = the_log(logs)
    first = ve.read_log(log)
    assert first.status == "cancelled"
    count = len(first.samples)
    assert f"Task stopping: {count} samples, 0 failed" in stopped.stdout
    assert first.header.results.total_samples == count
    finished = {s.id for s in first.samples}
    assert finished
    assert "s4" not in finished
    calls.unlink()

    done = subprocess.run(
        [*command, "--resume"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert sorted(calls.read_text().split()) == sorted({f"s{i}" for i in range(1, 7)} - finished)
    assert "Task stopping: 6 samples, 0 failed" in done.stdout
    assert the_log(logs) == log
    final = ve.read_log(log)
    assert final.status == "success"
    assert sorted(s.id for s in final.samples) == [f"s{i}" for i in range(1, 7)]

"""The live text of in-flight samples: kept by the run, written beside the journal, served.

Runs here stream through `chat_mock(stream=True)` with scripted replies that wait
on events the test sets, so every check happens while a reply is held mid-stream.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import vitals_engine as ve
from tests.helpers import until
from tests.journals import started_journal
from vitals_engine.cli import main
from vitals_engine.engine.live_texts import TEXT_LIMIT, LiveTexts
from vitals_engine.engine.options import RunOptions
from vitals_engine.engine.run import Run
from vitals_engine.engine.user_functions import spec_of
from vitals_engine.engine.work import RunWork
from vitals_engine.log import live as live_module
from vitals_engine.log.listing import read_listing
from vitals_engine.log.live import LiveFile, live_path, read_live
from vitals_engine.providers.mock import mock_reply
from vitals_engine.samples import Sample, SampleRecord
from vitals_engine.viewer.catalog import Catalog
from vitals_engine.viewer.server import ViewServer

pytestmark = pytest.mark.anyio

GUARD = 20  # seconds any one wait may take before the test fails


def sample(id: int | str, epoch: int = 1, input: str = "q") -> Sample:
    return Sample(id=id, epoch=epoch, input=input, target="")


# -- the run's sink ----------------------------------------------------------------------------


def test_a_new_attempt_replaces_the_text_and_only_the_last_characters_are_kept() -> None:
    """Pieces of one attempt add up; a new key starts over; the text keeps its last
    TEXT_LIMIT characters while `chars` counts them all; drop() forgets; every change
    is told."""
    changes: list[int] = []
    texts = LiveTexts(on_change=lambda: changes.append(1))
    one, two = sample(1, input="What's 1+1?"), sample("b", epoch=2)
    sink_one, sink_two = texts.sink(one, "solver"), texts.sink(two, "scorer")
    first, retry = object(), object()
    sink_one(first, "Hel")
    sink_one(first, "lo")
    sink_two(object(), "other")
    entry = texts.entries[(1, 1)]
    assert (entry.role, entry.text, entry.chars, entry.sample) == ("solver", "Hello", 5, one)
    assert entry.updated > 0
    assert texts.entries[("b", 2)].role == "scorer"

    sink_one(retry, "Bye")
    assert texts.entries[(1, 1)].text == "Bye"
    assert texts.entries[(1, 1)].chars == 3

    sink_one(retry, "x" * TEXT_LIMIT)
    assert texts.entries[(1, 1)].text == "x" * TEXT_LIMIT
    sink_one(retry, "yz")
    assert texts.entries[(1, 1)].text == "x" * (TEXT_LIMIT - 2) + "yz"
    assert texts.entries[(1, 1)].chars == 3 + TEXT_LIMIT + 2
    assert len(changes) == 6

    texts.drop((1, 1))
    texts.drop((1, 1))  # twice: nothing to forget, nothing told
    assert list(texts.entries) == [("b", 2)]
    assert len(changes) == 7


class Wait:
    """In a scripted reply: wait here until the test opens the gate of this name."""

    def __init__(self, gate: str) -> None:
        self.gate = gate


class Held:
    """Scripted streamed replies, each waiting at gates the test opens."""

    def __init__(self) -> None:
        self.gates: dict[str, anyio.Event] = {}

    def gate(self, name: str) -> anyio.Event:
        return self.gates.setdefault(name, anyio.Event())

    def reply(self, *parts: str | Wait) -> Callable[[str], AsyncIterator[str]]:
        """A reply function: each str is a piece, each `Wait` a gate to wait at;
        "!retry" raises a retryable error, "!fail" a fatal one."""

        async def pieces(_: str) -> AsyncIterator[str]:
            for part in parts:
                if isinstance(part, Wait):
                    await self.gate(part.gate).wait()
                elif part == "!retry":
                    raise ve.ProviderUnavailable("overloaded", status=503)
                elif part == "!fail":
                    raise ve.AuthenticationError("bad key", status=401)
                else:
                    yield part

        return pieces


def solver_of(chat: ve.Chat) -> Callable[..., Any]:
    async def solver(input: str) -> str:
        return await chat.clone().chat_async(input)

    return solver


async def run_records(run: Run, records: list[SampleRecord], done: list[SampleRecord]) -> None:
    async def sink(record: SampleRecord) -> None:
        done.append(record)

    await run.execute(records, sink)


async def test_the_run_keeps_each_samples_text_until_it_finishes_or_fails() -> None:
    """Solving, a sample's streamed text is kept under its (id, epoch) and role; scoring, the
    judge's replaces it; the entry goes when the sample finishes, or fails."""
    held = Held()
    by_prompt = {
        "one": held.reply("The answer ", Wait("one"), "is 1"),
        "two": held.reply("Let me ", Wait("two"), "!fail"),
    }
    solver_chat = ve.chat_mock(lambda prompt: by_prompt[prompt](prompt), stream=True)
    judge = ve.chat_mock(held.reply("Grading ", Wait("judge"), "C"), stream=True)

    async def scorer(solved: Any) -> str:
        return await judge.clone().chat_async(solved.result)

    texts = LiveTexts()
    run = Run(
        work=RunWork(
            solver=spec_of(solver_of(solver_chat), "solver"), scorer=spec_of(scorer, "scorer")
        ),
        options=RunOptions(max_concurrency=4),
        live=texts,
    )
    records = [SampleRecord(sample(1, input="one")), SampleRecord(sample(2, input="two"))]
    done: list[SampleRecord] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_records, run, records, done)
        await until(lambda: len(texts.entries) == 2)
        assert texts.entries[(1, 1)].text == "The answer "
        assert texts.entries[(1, 1)].role == "solver"
        assert texts.entries[(2, 1)].text == "Let me "

        held.gate("two").set()  # sample 2 fails: its text goes
        await until(lambda: len(done) == 1)
        assert done[0].error is not None
        assert (2, 1) not in texts.entries

        held.gate("one").set()  # sample 1 is solved; its judge streams
        await until(lambda: texts.entries[(1, 1)].role == "scorer")
        assert texts.entries[(1, 1)].text == "Grading "
        held.gate("judge").set()
    assert [r.key for r in done] == [(2, 1), (1, 1)]
    assert done[1].score is not None
    assert texts.entries == {}


async def test_a_retried_call_starts_its_text_afresh() -> None:
    """The text of a failed attempt is replaced by the retry's, not added to."""
    held = Held()
    chat = ve.chat_mock(
        [
            held.reply("Wrong ", Wait("first"), "!retry")(""),
            held.reply("Right ", Wait("second"), "on")(""),
        ],
        stream=True,
        retry=ve.Retry(max_attempts=2, backoff=0.0),
    )
    texts = LiveTexts()
    run = Run(
        work=RunWork(solver=spec_of(solver_of(chat), "solver"), scorer=None),
        options=RunOptions(max_concurrency=1),
        live=texts,
    )
    done: list[SampleRecord] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_records, run, [SampleRecord(sample(1))], done)
        await until(lambda: (1, 1) in texts.entries)
        assert texts.entries[(1, 1)].text == "Wrong "
        held.gate("first").set()
        await until(lambda: texts.entries[(1, 1)].text != "Wrong ")
        assert texts.entries[(1, 1)].text == "Right "
        assert texts.entries[(1, 1)].chars == len("Right ")
        held.gate("second").set()
    assert done[0].result == "Right on"
    assert done[0].retries == 1
    assert texts.entries == {}


# -- the sidecar ---------------------------------------------------------------------------------


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every sidecar write (the actor's), by path."""
    seen: list[Path] = []
    original = LiveFile._write

    def spy(self: LiveFile, document: live_module.LiveDocument) -> None:
        seen.append(self.path)
        original(self, document)

    monkeypatch.setattr(LiveFile, "_write", spy)
    return seen


def streaming_task(tmp_path: Path, held: Held, n: int = 1, **task: Any) -> ve.Task:
    """A task whose sample 1 streams "Thinking about it" and holds at gate "go"; the
    others answer at once."""

    def reply(prompt: str) -> Any:
        if prompt == "What's 1+1?":
            return held.reply("Thinking ", "about it", Wait("go"), " ... 2")(prompt)
        return mock_reply(prompt)

    chat = ve.chat_mock(reply, stream=True)
    dataset = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(1, n + 1)]
    return ve.Task(
        dataset, solver=solver_of(chat), scorer=ve.detect_includes(), dir=tmp_path, **task
    )


@asynccontextmanager
async def held_run(directory: Path, n: int = 1) -> AsyncIterator[tuple[Held, ve.Task, Path]]:
    """A `streaming_task` of `n` samples running in the background, entered once its sidecar
    shows: the held replies, the task and the sidecar. Leaving waits for the run to end
    (open gate "go" first)."""
    held = Held()
    task = streaming_task(directory, held, n=n)
    async with anyio.create_task_group() as tg:
        tg.start_soon(task.eval_async)
        yield held, task, await until(lambda: sidecar(directory))


def held_alone(path: Path) -> dict[str, Any] | None:
    """The sidecar's document once sample 1, held, is all it lists, with all its text."""
    try:
        document = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    samples = document["samples"]
    alone = [s["id"] for s in samples] == [1] and samples[0]["text"] == "Thinking about it"
    return document if alone else None


def sidecar(directory: Path) -> Path | None:
    """The run's sidecar (not the hidden temporary file it is written through)."""
    return next((p for p in directory.glob("*.live") if not p.name.startswith(".")), None)


def journal_of(directory: Path) -> Path | None:
    """The run's journal, once it reads (see `started_journal`)."""
    return started_journal(directory)


def names(directory: Path) -> list[str]:
    """The directory's files, hidden ones (a lock, temporary files) left out."""
    return sorted(p.name for p in directory.iterdir() if not p.name.startswith("."))


async def test_the_sidecar_holds_the_streamed_text_while_the_run_goes_on(
    tmp_path: Path, writes: list[Path]
) -> None:
    """Beside the journal a `.live` file holds the held sample's text in the documented shape;
    it is gone once the run ends."""
    async with held_run(tmp_path, n=3) as (held, task, path):
        journal = journal_of(tmp_path)
        assert path == live_path(journal)
        raw = await until(lambda: held_alone(path))  # the others finished
        assert set(raw) == {"live", "log", "updated", "samples"}
        assert raw["live"] == 1
        assert raw["log"] == journal.with_suffix(".json").name
        (entry,) = raw["samples"]
        assert set(entry) == {"id", "epoch", "role", "input", "text", "chars", "updated"}
        assert (entry["id"], entry["epoch"], entry["role"]) == (1, 1, "solver")
        assert entry["input"] == "What's 1+1?"
        assert entry["text"] == "Thinking about it"
        assert raw["updated"] >= entry["updated"] > 0
        assert read_live(path) == live_module.LiveDocument(
            log=raw["log"],
            updated=raw["updated"],
            samples=[live_module.LiveSample(**entry)],
        )
        held.gate("go").set()
    assert sidecar(tmp_path) is None
    assert task.metrics == {"accuracy": 1.0}
    assert writes
    assert set(writes) == {path}
    assert names(tmp_path) == sorted([task.log_path.name, "listing.json"])


async def test_the_sidecar_goes_when_the_run_is_cancelled(tmp_path: Path) -> None:
    """Cancelled mid-stream, the run removes its sidecar and logs the run as cancelled."""
    held = Held()
    task = streaming_task(tmp_path, held)
    async with anyio.create_task_group() as tg:
        tg.start_soon(task.eval_async)
        await until(lambda: sidecar(tmp_path))
        tg.cancel_scope.cancel()
    assert sidecar(tmp_path) is None
    assert ve.read_log(task.log_path).header.status == "cancelled"


async def test_the_sidecar_goes_when_the_run_fails(tmp_path: Path) -> None:
    """A run that stops on an error (a solver breaking its contract) removes its sidecar."""
    held = Held()
    chat = ve.chat_mock(held.reply("Streaming ", Wait("go")), stream=True)

    async def solver(input: str) -> str:
        text = await chat.clone().chat_async(input)
        raise ve.SolverError(f"this solver breaks the run after {text!r}")

    task = ve.Task(
        [{"input": "x", "target": "y"}], solver=solver, scorer=ve.detect_includes(), dir=tmp_path
    )

    async def evaluate() -> None:
        with pytest.raises(ve.SolverError, match="breaks the run"):
            await task.eval_async()

    async with anyio.create_task_group() as tg:
        tg.start_soon(evaluate)
        await until(lambda: sidecar(tmp_path))
        held.gate("go").set()
    assert sidecar(tmp_path) is None


async def test_a_run_where_nothing_streams_writes_no_sidecar(
    tmp_path: Path, writes: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without streaming there is no sidecar at any time and its actor never starts."""
    started: list[LiveFile] = []
    original = LiveFile._run

    async def spy(self: LiveFile) -> None:
        started.append(self)
        await original(self)

    monkeypatch.setattr(LiveFile, "_run", spy)
    gate = anyio.Event()
    chat = ve.chat_mock()  # no stream

    async def solver(input: str) -> str:
        if input == "What's 1+1?":
            await gate.wait()
        return await chat.clone().chat_async(input)

    dataset = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(1, 4)]
    task = ve.Task(dataset, solver=solver, scorer=ve.detect_includes(), dir=tmp_path)
    async with anyio.create_task_group() as tg:
        tg.start_soon(task.eval_async)
        journal = await until(lambda: journal_of(tmp_path))
        await until(lambda: len(ve.read_log(journal).samples) == 2)  # the others are done
        assert names(tmp_path) == [journal.name]
        gate.set()
    assert task.metrics == {"accuracy": 1.0}
    assert writes == []
    assert started == []


async def test_the_sidecar_is_never_taken_for_a_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """While it exists: not in the viewer's catalog, `vitals ls`, `read_logs()`;
    `read_log()` refuses it; after the run, not in listing.json."""
    async with held_run(tmp_path, n=2) as (held, task, path):
        journal = journal_of(tmp_path)
        await until(lambda: ve.read_log(journal).samples)  # sample 2 is journaled
        catalog = Catalog(tmp_path)
        catalog.refresh()
        assert [e["file"] for e in catalog.entries()] == [journal.name]
        capsys.readouterr()
        assert main(["ls", str(tmp_path)]) == 0
        listed = capsys.readouterr().out.splitlines()[1:]
        assert [line.split()[-1] for line in listed] == [journal.name]
        assert ve.read_logs(tmp_path)["log"].unique().to_list() == [journal.name]
        with pytest.raises(ve.LogFormatError, match="not a log file"):
            ve.read_log(path)
        held.gate("go").set()
    assert list(read_listing(tmp_path)) == [task.log_path.name]


# -- the viewer ----------------------------------------------------------------------------------


async def test_the_viewer_serves_the_live_text_of_a_running_eval(tmp_path: Path) -> None:
    """`api/logs/<journal>/live.json` has each in-flight sample with its key and text so far;
    once the run is over the final log has no live text, and its rows say when they finished."""
    with ViewServer(tmp_path).start() as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=GUARD) as http:
            async with held_run(tmp_path, n=2) as (held, task, _):
                journal = (await until(lambda: journal_of(tmp_path))).name

                async def live() -> dict[str, Any]:
                    response = await http.get(f"/api/logs/{journal}/live.json")
                    assert response.status_code == 200
                    return response.json()

                with anyio.fail_after(GUARD):
                    while True:  # until sample 1, held, is all it lists, with all its text
                        document = await live()
                        texts = [(s["id"], s["text"]) for s in document["samples"]]
                        if texts == [(1, "Thinking about it")]:
                            break
                        await anyio.sleep(0.005)
                assert document["file"] == journal
                assert document["running"] is True
                (entry,) = document["samples"]
                assert entry["key"] == "1"
                assert (entry["id"], entry["epoch"], entry["role"]) == (1, 1, "solver")
                assert entry["text"] == "Thinking about it"
                updated = entry["updated"]
                held.gate("go").set()
            final = task.log_path.name
            for file in (final, journal):  # the journal gave way to its final log
                after = (await http.get(f"/api/logs/{file}/live.json")).json()
                assert after == {"file": file, "running": False, "updated": None, "samples": []}
            rows = (await http.get(f"/api/logs/{final}/summaries.json")).json()["rows"]
            assert rows[0]["completed"] >= updated

"""Agents in runs: each sample's sandbox made when it starts and removed when it ends,
whatever way it ends; at most `max_sandboxes` at once; a sandbox that cannot be made
fails its sample only; scorers that look in the sandbox; the transcript of what the
agent did; the capture-the-flag task of the docs, on the mock server over HTTP.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest

import vitals_engine as ve
from tests.helpers import openai, until
from vitals_engine.testing import last_tool_text, trajectory
from vitals_engine.vocab.transcript import SandboxRecord, ToolRecord

pytestmark = pytest.mark.anyio

KINDS = [
    "local",
    pytest.param(
        "bwrap",
        marks=pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing"),
    ),
]

CTF = "Find the flag in this machine's files and submit it."


def flags(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "input": CTF,
            "target": f"flag{{{i}}}",
            "files": {"notes/flag.txt": f"flag{{{i}}}"},
        }
        for i in range(1, n + 1)
    ]


def ctf_task(server: Any, tmp_path: Path, kind: str, n: int = 3, **options: Any) -> ve.Task:
    server.script(trajectory(("bash", {"cmd": "cat notes/flag.txt"}), submit=last_tool_text))
    solver = ve.react(openai(server), tools=[ve.bash(timeout=30)])
    return ve.Task(flags(n), solver, ve.detect_includes(), sandbox=kind, dir=tmp_path, **options)


async def leftovers(kind: str) -> int:
    """The sandboxes of `kind` this process still has (their directories), plus those a
    dead process left (removed now)."""
    from vitals_engine.sandboxes import SandboxSpec, sandbox_kind
    from vitals_engine.sandboxes.owners import owner

    pid, started = owner()
    mine = glob.glob(os.path.join(tempfile.gettempdir(), f"vitals-{kind}-{pid}-{started}-*"))
    return len(mine) + await sandbox_kind(SandboxSpec(kind)).remove_leftovers()


@pytest.mark.parametrize("kind", KINDS)
async def test_each_sample_finds_its_own_flag_in_its_own_sandbox(server, tmp_path, kind):
    """Three samples, each with its own file: each agent reads its own flag and submits
    it, and no sandbox is left once the run is over."""
    task = ctf_task(server, tmp_path, kind)
    await task.eval_async(progress=False)
    assert task.metrics == {"accuracy": 1.0}
    assert sorted(task.get_samples()["result"].to_list()) == ["flag{1}", "flag{2}", "flag{3}"]
    assert await leftovers(kind) == 0


async def test_the_transcript_holds_each_tool_call_and_what_it_did_in_the_sandbox(server, tmp_path):
    """A sample's events: the bash call, inside its span the exec it ran (the command and
    what it printed), then the submission."""
    records: list[Any] = []
    task = ctf_task(server, tmp_path, "local", n=1)
    async with task.stream_async() as samples:
        async for record in samples:
            records.append(record)
    (record,) = records
    tools = [e for e in record.events if isinstance(e, ToolRecord)]
    (ran,) = [e for e in record.events if isinstance(e, SandboxRecord)]
    assert [tool.function for tool in tools] == ["bash", "submit"]
    assert ran.action == "exec"
    assert "cat notes/flag.txt" in (ran.cmd or "")
    assert ran.output == "flag{1}"
    assert ran.span == tools[0].span


async def test_max_sandboxes_bounds_the_sandboxes_alive_at_once(server, tmp_path):
    """max_sandboxes=2 with 8 samples at work: never more than 2 sandboxes at once."""
    from vitals_engine.sandboxes import local

    alive, most = 0, 0
    made, removed = local.LocalKind.create, local.LocalKind.remove

    async def counting_create(self, **kw):
        nonlocal alive, most
        alive += 1
        most = max(most, alive)
        return await made(self, **kw)

    async def counting_remove(self, sandbox):
        nonlocal alive
        alive -= 1
        await removed(self, sandbox)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(local.LocalKind, "create", counting_create)
        patch.setattr(local.LocalKind, "remove", counting_remove)
        task = ctf_task(server, tmp_path, "local", n=8)
        await task.eval_async(max_concurrency=8, max_sandboxes=2, progress=False)
    assert task.metrics == {"accuracy": 1.0}
    assert most == 2
    assert alive == 0


async def test_a_setup_that_fails_fails_its_sample_not_the_run(server, tmp_path):
    """A sample whose setup script fails is an error carrying the script's output; the
    other samples run, and no sandbox is left."""
    rows = flags(2)
    rows[0]["setup"] = "echo cannot set up; exit 3"
    rows[1]["setup"] = ""
    server.script(trajectory(("bash", {"cmd": "cat notes/flag.txt"}), submit=last_tool_text))
    solver = ve.react(openai(server), tools=[ve.bash()])
    task = ve.Task(rows, solver, ve.detect_includes(), sandbox="local", dir=tmp_path)
    await task.eval_async(fail_on_error=False, progress=False)
    log = ve.read_log(task.log_path)
    failed = [s for s in log.samples if s.error is not None]
    assert [s.id for s in failed] == [1]
    assert "cannot set up" in failed[0].error.message
    frame = task.get_samples()
    assert frame.filter(frame["id"] == 2)["score"].to_list() == ["C"]
    assert await leftovers("local") == 0


async def test_a_scorer_runs_its_tests_in_the_samples_sandbox(server, tmp_path):
    """A scorer of one's own runs a command in the sample's sandbox (ve.sandbox()) before
    it is removed: here it checks the file the agent wrote."""
    server.script(
        trajectory(
            ("text_editor", {"command": "create", "path": "answer.txt", "file_text": "42"}),
            submit="done",
        )
    )

    async def file_says_42(solved: ve.SolvedSample) -> str:
        result = await ve.sandbox().exec("cat answer.txt")
        return "C" if result.stdout.strip() == "42" else "I"

    solver = ve.react(openai(server), tools=[ve.text_editor()])
    task = ve.Task(
        [{"input": "Write 42.", "target": "42"}],
        solver,
        file_says_42,
        sandbox="local",
        dir=tmp_path,
    )
    await task.eval_async(progress=False)
    assert task.metrics == {"accuracy": 1.0}


async def test_a_cancelled_run_leaves_no_sandbox(server, tmp_path):
    """A run cancelled once every sample's agent has asked for a long command: every
    sandbox is removed, the commands in them killed."""
    server.script(trajectory(("bash", {"cmd": "sleep 30"}), submit="late"))
    solver = ve.react(openai(server), tools=[ve.bash(timeout=60)])
    task = ve.Task(flags(3), solver, ve.detect_includes(), sandbox="local", dir=tmp_path)
    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(task.eval_async, progress=False))
        await until(lambda: server.requests >= 3)
        tg.cancel_scope.cancel()
    assert await leftovers("local") == 0


def test_a_sandbox_kind_that_is_not_one_is_a_config_error(tmp_path):
    """Task(sandbox=...) names a kind, a Dockerfile or a spec: anything else is refused
    when the task is made."""
    with pytest.raises(ve.ConfigError, match="sandbox="):
        ve.Task(
            [{"input": "Q", "target": "A"}],
            ve.generate(ve.chat_mock()),
            ve.detect_includes(),
            sandbox="vm",
        )


async def test_a_resumed_agent_buys_no_reply_twice(server, tmp_path):
    """A run of 3 agents stopped while each runs its third tool (three replies in):
    resumed, each agent's first three calls are answered from the journal and its tools
    re-run in a new sandbox, so only the fourth call of each goes out, and every sample
    ends as an uninterrupted run would."""
    go_on, waiting = tmp_path / "go-on", tmp_path / "waiting"
    waiting.mkdir()
    wait = f"mktemp -p {waiting} >/dev/null; until test -e {go_on}; do sleep 0.05; done"
    server.script(
        trajectory(
            ("bash", {"cmd": "ls notes"}),
            ("bash", {"cmd": "cat notes/flag.txt"}),
            ("bash", {"cmd": wait}),
            submit=lambda request: "flag{" + request.all_text.split("flag{")[1].split("}")[0] + "}",
        )
    )
    solver = ve.react(openai(server), tools=[ve.bash(timeout=60)])
    task = ve.Task(flags(3), solver, ve.detect_includes(), sandbox="local", dir=tmp_path)
    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(task.eval_async, progress=False))
        await until(lambda: len(list(waiting.iterdir())) == 3)  # each in its third tool
        tg.cancel_scope.cancel()
    first = server.requests
    assert first == 9
    go_on.touch()

    again = ve.Task(flags(3), solver, ve.detect_includes(), sandbox="local", dir=tmp_path)
    await again.eval_async(resume=True, progress=False)
    assert server.requests - first == 3  # the fourth call of each, nothing else
    assert again.metrics == {"accuracy": 1.0}
    assert await leftovers("local") == 0


async def test_a_resumed_agent_whose_tool_says_otherwise_goes_on_live(server, tmp_path):
    """Resumed where a tool now gives another result than it gave the stopped run: the
    agent's calls from there go out live (their journaled replies answer nothing), and its
    transcript says so."""
    from vitals_engine.vocab.transcript import NoteRecord

    state, waiting, go_on = tmp_path / "state", tmp_path / "waiting", tmp_path / "go-on"
    state.write_text("one")
    waiting.mkdir()
    wait = f"mktemp -p {waiting} >/dev/null; until test -e {go_on}; do sleep 0.05; done"
    server.script(
        trajectory(
            ("bash", {"cmd": f"cat {state}"}),
            ("bash", {"cmd": wait}),
            submit="flag{1}",
        )
    )
    solver = ve.react(openai(server), tools=[ve.bash(timeout=60)])
    task = ve.Task(flags(1), solver, ve.detect_includes(), sandbox="local", dir=tmp_path)
    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(task.eval_async, progress=False))
        await until(lambda: len(list(waiting.iterdir())) == 1)
        tg.cancel_scope.cancel()
    first = server.requests
    state.write_text("two")  # the first tool's result differs from now on
    go_on.touch()

    again = ve.Task(flags(1), solver, ve.detect_includes(), sandbox="local", dir=tmp_path)
    await again.eval_async(resume=True, progress=False)
    assert server.requests - first == 2  # the second call (now live) and the third
    (record,) = again._state.records or []
    (note,) = [e for e in record.events if isinstance(e, NoteRecord)]
    assert "went on live" in note.message


def test_agents_with_sandboxes_run_on_ray_workers(local_ray, server, tmp_path):
    """On Ray, each worker makes the sandboxes of the samples it runs: the agents find
    their flags there, and no sandbox is left."""
    task = ctf_task(server, tmp_path, "local", n=4)
    task.eval(backend=ve.Ray(workers=2), progress=False)
    assert task.metrics == {"accuracy": 1.0}
    assert sorted(task.get_samples()["result"].to_list()) == [f"flag{{{i}}}" for i in range(1, 5)]
    assert glob.glob(os.path.join(tempfile.gettempdir(), "vitals-local-*")) == []  # any process


async def test_a_running_agents_transcript_is_in_the_live_sidecar(server, tmp_path):
    """While an agent waits in its second tool, the run's live sidecar shows its
    transcript so far: the first tool call, with the command it ran and its output."""
    from vitals_engine.log.live import live_path, read_live

    go_on, waiting = tmp_path / "go-on", tmp_path / "waiting"
    waiting.mkdir()
    wait = f"mktemp -p {waiting} >/dev/null; until test -e {go_on}; do sleep 0.05; done"
    server.script(
        trajectory(("bash", {"cmd": "cat notes/flag.txt"}), ("bash", {"cmd": wait}), submit="x")
    )
    solver = ve.react(openai(server), tools=[ve.bash(timeout=60)])
    task = ve.Task(flags(1), solver, ve.detect_includes(), sandbox="local", dir=tmp_path)
    seen: list[Any] = []

    def live_events() -> list[Any]:
        journals = list(tmp_path.glob("*.journal"))
        document = read_live(live_path(journals[0])) if journals else None
        return document.samples[0].events or [] if document and document.samples else []

    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(task.eval_async, progress=False))
        await until(lambda: len(list(waiting.iterdir())) == 1)
        await until(lambda: any(e["event"] == "tool" for e in live_events()))
        seen = live_events()
        go_on.touch()
    kinds = [event["event"] for event in seen]
    assert "span_begin" in kinds
    (tool,) = [event for event in seen if event["event"] == "tool"]
    assert (tool["function"], tool["result"]) == ("bash", "flag{1}")
    sandbox = [event for event in seen if event["event"] == "sandbox"]
    assert sandbox[0]["cmd"].endswith("cat notes/flag.txt")

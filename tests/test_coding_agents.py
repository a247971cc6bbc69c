"""Coding agents as solvers, the real CLIs (Claude Code and Codex, pinned, installed by
`make test` into the project's tool cache) in a sandbox per sample, their model calls
served through the bridge by a chat against the mock server: a scripted task (read a
file, edit it, run a command, answer), their tool calls in the sample's transcript,
tokens and cost as the mock billed them, a limit that stops the CLI, a CLI that fails;
each in a local, a bwrap and a docker sandbox (the agents' test image). And the forwarder
a sandbox reaches the bridge through: python3's where the image has no node, a clear
error where it has neither.
"""

from __future__ import annotations

import functools
import re
import sys
import tempfile
from importlib import resources
from pathlib import Path

import anyio
import pytest

import vitals_engine as ve
from tests.addresses import free_port
from tests.helpers import until
from tests.sandboxes import TEST_IMAGE
from vitals_engine.agents.cli_install import installed_agent
from vitals_engine.agents.harness import _with_forwarder
from vitals_engine.pricing.cost import cost_of
from vitals_engine.testing import MockToolCall, reply
from vitals_engine.vocab.transcript import LimitRecord, ToolRecord

pytestmark = pytest.mark.anyio

#: Tokens the mock bills for each call (no prompt caching: see `no_caching`).
IN, OUT = 100, 10
PATCH = "*** Begin Patch\n*** Update File: notes.txt\n@@\n-flag{x}\n+flag{y}\n*** End Patch\n"


@pytest.fixture(params=["local", "bwrap", "docker"])
def kind(request) -> ve.SandboxSpec:
    """Each sandbox kind the CLIs run in here, as the task's sandbox (bwrap and docker
    skipped, saying why, where they cannot run; docker runs the agents' test image)."""
    if request.param == "local":
        return ve.SandboxSpec("local")
    request.getfixturevalue(f"{request.param}_ready")
    if request.param == "docker":
        return ve.SandboxSpec("docker", image=request.getfixturevalue("docker_agent_ready"))
    return ve.SandboxSpec(request.param)


def _installed(name: str) -> None:
    try:
        installed_agent(name)
    except ve.ConfigError as exc:
        pytest.skip(f"{exc} (`make agents`)")


@pytest.fixture
def no_caching(server):
    server.min_cacheable_tokens = 10**9  # the prompts are the CLIs': bill them flat
    return server


def _workdir(request) -> str:
    found = re.search(r"[Ww]orking directory: (\S+)", request.system or "") or re.search(
        r"<cwd>(\S+)</cwd>", " ".join(m.text for m in request.messages)
    )
    return found.group(1) if found else "."


def _flag(request) -> str:
    results = [m.text for m in request.messages if m.role == "tool"]
    found = re.search(r"flag\{\w+\}", results[-1] if results else "")
    return found.group(0) if found else "no flag"


def _call(name: str, arguments: dict, step: int = 0) -> object:
    return reply(
        tool_calls=[MockToolCall(f"call_{step}_{name}", name, arguments)],
        finish="tool_calls",
        input_tokens=IN,
        output_tokens=OUT,
    )


def claude_script(request):
    """Read notes.txt, change its flag with Edit, cat it with Bash, answer what it said."""
    step = sum(1 for m in request.messages if m.role == "assistant")
    path = f"{_workdir(request)}/notes.txt"
    steps = [
        ("Read", {"file_path": path}),
        ("Edit", {"file_path": path, "old_string": "flag{x}", "new_string": "flag{y}"}),
        ("Bash", {"command": "cat notes.txt", "description": "Show the file"}),
    ]
    if step < len(steps):
        return _call(*steps[step], step)
    return reply(f"The answer is {_flag(request)}.", input_tokens=IN, output_tokens=OUT)


def codex_script(request):
    """cat notes.txt, change its flag (apply_patch where offered, else sed), cat it, answer."""
    step = sum(1 for m in request.messages if m.role == "assistant")
    tools = {tool["name"] for tool in request.tools}
    edit = (
        ("apply_patch", {"input": PATCH})
        if "apply_patch" in tools
        else ("exec_command", {"cmd": "sed -i s/flag{x}/flag{y}/ notes.txt"})
    )
    steps = [
        ("exec_command", {"cmd": "cat notes.txt"}),
        edit,
        ("exec_command", {"cmd": "cat notes.txt"}),
    ]
    if step < len(steps):
        return _call(*steps[step], step)
    return reply(f"The answer is {_flag(request)}.", input_tokens=IN, output_tokens=OUT)


def _task(solver, sandbox: ve.SandboxSpec, tmp_path) -> ve.Task:
    return ve.Task(
        [
            {
                "input": "Change the flag in notes.txt to flag{y} and tell me the file's flag.",
                "target": "flag{y}",
                "files": {"notes.txt": "flag{x}\n"},
            }
        ],
        solver,
        ve.detect_includes(),
        sandbox=sandbox,
        dir=tmp_path,
    )


async def _run(task: ve.Task, **options):
    async with task.stream_async(**options) as samples:
        (record,) = [record async for record in samples]
    return record


CASES = {
    "claude_code": (
        lambda server: ve.chat_anthropic(
            "claude-sonnet-4-5", base_url=server.base_url("anthropic"), api_key="real-key"
        ),
        ve.claude_code,
        claude_script,
        ["Read", "Edit", "Bash"],
    ),
    "codex": (
        lambda server: ve.chat_openai(
            "gpt-4.1-mini", base_url=server.base_url(), api_key="real-key"
        ),
        ve.codex,
        codex_script,
        None,
    ),
}


@pytest.mark.parametrize("agent", sorted(CASES))
async def test_the_cli_does_a_scripted_task_in_the_samples_sandbox(
    agent, kind, no_caching, tmp_path
):
    """The CLI reads, edits and runs in the sandbox, and answers; its tool calls are the
    sample's `tool` events; its tokens and cost are what the mock billed; the mock saw the
    chat's key, never the bridge's."""
    _installed(agent)
    make_chat, make_solver, script, expected_tools = CASES[agent]
    no_caching.script(script)
    chat = make_chat(no_caching)
    task = _task(make_solver(chat), kind, tmp_path)
    record = await _run(task)
    assert record.error is None, record.error
    assert "flag{y}" in task.get_samples()["result"][0]
    assert task.metrics == {"accuracy": 1.0}
    tools = [e.function for e in record.events if isinstance(e, ToolRecord)]
    assert len(tools) == 3
    if expected_tools is not None:
        assert tools == expected_tools
    (row,) = task.get_cost().to_dicts()
    assert (row["role"], row["model"], row["requests"]) == ("solver", chat.model, 4)
    assert (row["input_tokens"], row["output_tokens"]) == (4 * IN, 4 * OUT)
    billed = ve.TokenUsage(input=4 * IN, output=4 * OUT)
    assert row["cost"] == pytest.approx(cost_of(row["provider"], chat.model, billed))
    keys = {e.headers.get("Authorization") or e.headers.get("x-api-key") for e in no_caching.log}
    assert keys <= {"real-key", "Bearer real-key"}


async def test_a_message_limit_stops_claude_code_where_it_is(kind, no_caching, tmp_path):
    """A CLI that would go on for ever stops at the sample's message limit: the limit is in
    the transcript, the sample is scored on what it had, and no process of it is left."""
    _installed("claude_code")
    no_caching.script(
        lambda request: _call(
            "Bash", {"command": "echo again"}, sum(m.role == "assistant" for m in request.messages)
        )
    )
    chat = CASES["claude_code"][0](no_caching)
    task = _task(ve.claude_code(chat), kind, tmp_path)
    record = await _run(task, message_limit=6)
    (limit,) = [e for e in record.events if isinstance(e, LimitRecord)]
    assert (limit.type, limit.limit) == ("message", 6)
    assert record.error is None
    assert no_caching.requests < 10


async def test_a_cli_that_fails_is_a_sample_error_saying_what_it_printed(kind, server, tmp_path):
    """An agent CLI that exits non-zero fails its sample with its exit code and the last
    it printed."""
    chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="real-key")
    solver = ve.agent_cli(
        ["sh", "-c", "echo cannot find my config >&2; exit 3"], chat=chat, api="chat_completions"
    )
    with pytest.raises(ve.EvalFailedError, match="agent_cli exited with 3: cannot find my config"):
        await _task(solver, kind, tmp_path).eval_async(progress=False)


AGENT = """
import json, os, sys, urllib.request
body = {"model": "any", "messages": [{"role": "user", "content": sys.argv[1]}]}
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=json.dumps(body).encode(),
    headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
             "Content-Type": "application/json"})
print(json.load(urllib.request.urlopen(request))["choices"][0]["message"]["content"])
"""


async def test_any_harness_speaking_an_api_is_served_through_the_bridge(kind, server, tmp_path):
    """agent_cli(): a harness of one's own (here a Python script on Chat Completions), given
    the bridge's address and key in its environment, answers through the user's chat."""
    server.script(lambda request: reply("flag{y}"))
    chat = ve.chat_anthropic(
        "claude-sonnet-4-5", base_url=server.base_url("anthropic"), api_key="real-key"
    )
    solver = ve.agent_cli(["python3", "-c", AGENT, "{input}"], chat=chat, api="chat_completions")
    record = await _run(_task(solver, kind, tmp_path))
    assert record.error is None, record.error
    assert record.result == "flag{y}"
    assert server.requests_by_model == {"claude-sonnet-4-5": 1}


async def test_an_image_without_node_reaches_the_bridge_through_python3(
    docker_ready, server, tmp_path
):
    """In an image with python3 and no node (the sandbox tests' image), python3 runs the
    forwarder to the bridge."""
    server.script(lambda request: reply("flag{y}"))
    chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="real-key")
    harness = 'command -v node && exit 9; exec python3 -c "$0" "$1"'
    solver = ve.agent_cli(
        ["sh", "-c", harness, AGENT, "{input}"], chat=chat, api="chat_completions"
    )
    record = await _run(_task(solver, ve.SandboxSpec("docker", image=TEST_IMAGE), tmp_path))
    assert record.error is None, record.error
    assert record.result == "flag{y}"


async def test_a_sandbox_with_neither_node_nor_python3_is_told_so():
    """Where the sandbox has no program to run a forwarder, the CLI's command says so and
    exits 127 before the CLI starts."""
    argv = _with_forwarder("/vitals-shared/vitals-bridges-x/ab.sock", ["my-agent"])
    done = await anyio.run_process(["/bin/sh", *argv[1:]], env={"PATH": "/nowhere"}, check=False)
    assert done.returncode == 127
    said = done.stderr.decode()
    assert "node or python3" in said
    assert "neither" in said


async def test_the_python_forwarder_joins_a_tcp_port_to_the_unix_socket(tmp_path):
    """forward.py, as the sandbox runs it: what a client sends on 127.0.0.1:PORT reaches
    the unix socket, and the answer comes back."""
    socket, ready = str(tmp_path / "bridge.sock"), tmp_path / "ready"

    async def answer(stream) -> None:
        async with stream:
            await stream.send(b"pong:" + await stream.receive())

    script = resources.files("vitals_engine.agents").joinpath("forward.py")
    async with (
        await anyio.create_unix_listener(socket) as listener,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(listener.serve, answer)
        port = free_port()
        forwarder = await anyio.open_process(
            [sys.executable, str(script), socket, str(port), str(ready)]
        )
        try:
            with anyio.fail_after(10):
                while not ready.exists():  # noqa: ASYNC110 - a file another process makes
                    await anyio.sleep(0.01)
                async with await anyio.connect_tcp("127.0.0.1", port) as client:
                    await client.send(b"ping")
                    assert await client.receive() == b"pong:ping"
        finally:
            forwarder.kill()
            await forwarder.aclose()
            tg.cancel_scope.cancel()


async def test_a_resumed_claude_code_buys_no_reply_twice(bwrap_ready, no_caching, tmp_path):
    """Stopped while Claude Code runs its second command (two replies in): resumed, the CLI
    starts afresh in a new sandbox, its first two calls are answered from the run's
    journal (the same requests: same directory, same files), and only its third goes out."""
    _installed("claude_code")
    steps = [{"command": "cat notes.txt"}, {"command": "touch started && sleep 1"}]

    def script(request):
        step = sum(1 for m in request.messages if m.role == "assistant")
        if step < len(steps):
            return _call("Bash", steps[step], step)
        return reply("The answer is flag{y}.", input_tokens=IN, output_tokens=OUT)

    no_caching.script(script)
    chat = CASES["claude_code"][0](no_caching)
    started = lambda: list(Path(tempfile.gettempdir()).glob("vitals-bwrap-*/work/started"))  # noqa: E731
    before = set(started())
    task = _task(ve.claude_code(chat), "bwrap", tmp_path)
    async with anyio.create_task_group() as group:
        group.start_soon(functools.partial(task.eval_async, progress=False))
        await until(lambda: set(started()) - before, "the second command")
        group.cancel_scope.cancel()
    assert no_caching.requests == 2

    again = _task(ve.claude_code(chat), "bwrap", tmp_path)
    await again.eval_async(resume=True, progress=False)
    assert no_caching.requests == 3
    assert again.metrics == {"accuracy": 1.0}

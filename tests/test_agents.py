"""Agents: `ve.react()` acting with tools until it submits, attempts graded by the task's
scorer, the per-sample limits that stop a sample where it is, and the tools' transcript.

These run on `chat_mock` scripted turn by turn and an in-memory sandbox (the sandbox
kinds have their own conformance suite); the agent runs on the mock server over real
HTTP are in tests/test_agents_http.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

import vitals_engine as ve
from vitals_engine.samples import SampleRecord
from vitals_engine.vocab.transcript import LimitRecord, SpanBegin, SpanEnd, ToolRecord
from vitals_engine.vocab.turns import ContentText, ContentToolRequest, TokenUsage, Turn

pytestmark = pytest.mark.anyio

_ids = itertools.count()


def calls(*requests: tuple[str, dict[str, Any]], text: str = "", tokens: int = 10) -> Turn:
    """An assistant turn calling tools, in order."""
    contents: list[Any] = [ContentText(text)] if text else []
    contents += [ContentToolRequest(f"call_{next(_ids)}", name, args) for name, args in requests]
    return Turn("assistant", contents, tokens=TokenUsage(input=tokens, output=tokens))


def says(text: str, tokens: int = 10) -> Turn:
    return Turn("assistant", [ContentText(text)], tokens=TokenUsage(input=tokens, output=tokens))


@dataclass
class Ran:
    returncode: int = 0
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    truncated: bool = False
    seconds: float = 0.0


class MemorySandbox:
    """A sandbox of files in memory, whose commands are `echo`, `cat` and `sleep`."""

    kind = "memory"
    workdir = "/work"

    def __init__(self, files: dict[str, str] | None = None) -> None:
        self.files = dict(files or {})
        self.commands: list[Any] = []

    async def exec(
        self,
        cmd: Any,
        *,
        input: Any = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the sandbox interface's
        **_: Any,
    ) -> Ran:
        self.commands.append(cmd)
        line = cmd[-1] if isinstance(cmd, list) else cmd
        if line.startswith("sleep"):
            with anyio.move_on_after(timeout or 1e9):
                await anyio.sleep(float(line.split()[1]))
                return Ran()
            return Ran(returncode=-1, timed_out=True)
        if line.startswith("cat "):
            path = line.split()[1]
            if path in self.files:
                return Ran(stdout=self.files[path])
            return Ran(returncode=1, stderr=f"cat: {path}: No such file or directory")
        if line.startswith("echo "):
            return Ran(stdout=line[5:] + "\n")
        return Ran(returncode=127, stderr=f"{line}: command not found")

    async def read_file(self, path: str, *, text: bool = True) -> str:
        return self.files[path]

    async def write_file(self, path: str, contents: str | bytes) -> None:
        self.files[path] = contents if isinstance(contents, str) else contents.decode()


async def solve_in(sandbox: MemorySandbox, solver: Any, input: str, **limits: Any) -> SampleRecord:
    """Run `solver` on one sample whose sandbox is `sandbox`, as a run's solve stage does."""
    from vitals_engine.chats.layers.stacks import CallStacks
    from vitals_engine.engine.observing import RunObserver
    from vitals_engine.engine.options import RunOptions
    from vitals_engine.engine.stages import SampleStages
    from vitals_engine.engine.user_functions import spec_of
    from vitals_engine.engine.work import RunWork
    from vitals_engine.pacing.clock import SystemClock
    from vitals_engine.samples import Sample
    from vitals_engine.vocab.usage import UsageLedger

    options = RunOptions.check(**limits)
    work = RunWork(solver=spec_of(solver, "solver"), scorer=spec_of(ve.detect_includes(), "scorer"))
    stages = SampleStages(
        work=work,
        stacks=CallStacks(
            retry=ve.Retry(), clock=SystemClock(), sample_limits=options.sample_limits is not None
        ),
        ledger=UsageLedger(),
        observer=RunObserver(),
        threads=anyio.CapacityLimiter(4),
        limits=options.sample_limits,
    )
    record = SampleRecord(Sample(1, 1, input, "flag{x}"))
    record.sandbox = sandbox
    await stages.solve(record)
    return record


def tools_of(record: SampleRecord) -> list[ToolRecord]:
    return [event for event in record.events if isinstance(event, ToolRecord)]


async def test_react_acts_with_tools_until_it_submits():
    """The agent reads a file with bash, then submits what it found: the answer is the
    result, each tool call is in the transcript inside a span of its own."""
    chat = ve.chat_mock(
        [
            calls(("bash", {"cmd": "cat notes/flag.txt"})),
            calls(("submit", {"answer": "flag{x}"})),
        ]
    )
    sandbox = MemorySandbox({"notes/flag.txt": "flag{x}"})
    record = await solve_in(sandbox, ve.react(chat, tools=[ve.bash(timeout=5)]), "Find the flag.")
    assert record.error is None
    assert record.result == "flag{x}"
    bash, submit = tools_of(record)
    assert (bash.function, bash.arguments, bash.result) == (
        "bash",
        {"cmd": "cat notes/flag.txt"},
        "flag{x}",
    )
    assert submit.function == "submit"
    begins = [e for e in record.events if isinstance(e, SpanBegin)]
    ends = [e for e in record.events if isinstance(e, SpanEnd)]
    assert [b.name for b in begins] == ["bash", "submit"]
    assert {b.id for b in begins} == {e.id for e in ends} == {bash.span, submit.span}
    assert sandbox.commands[0][-1] == "cat notes/flag.txt"
    conversation = record.solver_chat.turns
    assert conversation[0].text == "Find the flag."
    assert conversation[2].contents[0].value == "flag{x}"


async def test_a_failing_command_goes_back_to_the_model_not_the_sample():
    """A command that exits non-zero, and one that times out, are the tool's errors: the
    model sees them (with the output), the sample goes on, and the transcript says which."""
    chat = ve.chat_mock(
        [
            calls(("bash", {"cmd": "cat missing.txt"})),
            calls(("bash", {"cmd": "sleep 30"})),
            calls(("submit", {"answer": "no flag"})),
        ]
    )
    record = await solve_in(MemorySandbox(), ve.react(chat, tools=[ve.bash(timeout=0.05)]), "Go.")
    assert record.error is None
    missing, slept, _ = tools_of(record)
    assert missing.error_type == "exit"
    assert "No such file" in (missing.error_message or "")
    assert slept.error_type == "timeout"
    shown = record.solver_chat.turns[2].contents[0]
    assert shown.error is not None
    assert "exit code 1" in shown.error


async def test_a_reply_without_a_tool_call_is_asked_to_go_on():
    """A reply that calls no tool gets the continue message, and the loop goes on."""
    chat = ve.chat_mock([says("Let me think."), calls(("submit", {"answer": "42"}))])
    record = await solve_in(MemorySandbox(), ve.react(chat, continue_message="Go on."), "Q")
    assert record.result == "42"
    assert [t.text for t in record.solver_chat.turns][:3] == ["Q", "Let me think.", "Go on."]


async def test_a_wrong_submission_is_answered_incorrect_while_attempts_remain():
    """With attempts=2 the task's scorer grades each answer: a wrong one is answered
    "incorrect" and the agent goes on; its second answer is the result."""
    chat = ve.chat_mock(
        [calls(("submit", {"answer": "flag{no}"})), calls(("submit", {"answer": "flag{x}"}))]
    )
    solver = ve.react(chat, attempts=2, incorrect_message="Wrong, try again.")
    record = await solve_in(MemorySandbox(), solver, "Q")
    assert record.result == "flag{x}"
    told = record.solver_chat.turns[2].contents[0]
    assert told.value == "Wrong, try again."


async def test_the_last_attempt_is_the_answer_however_graded():
    """With attempts=1 the first submission is the answer, right or wrong."""
    chat = ve.chat_mock([calls(("submit", {"answer": "flag{no}"}))])
    record = await solve_in(MemorySandbox(), ve.react(chat), "Q")
    assert record.result == "flag{no}"


@pytest.mark.parametrize(
    ("limits", "kind"),
    [
        ({"message_limit": 4}, "message"),
        ({"token_limit": 50}, "token"),
        ({"cost_limit": 0.0000001}, "cost"),
    ],
)
async def test_a_limit_stops_the_agent_and_the_sample_keeps_what_it_has(limits, kind, monkeypatch):
    """An agent that never submits, under a message, token or cost limit: it stops at the
    limit, the limit is in its transcript, and its result is its last reply."""
    from vitals_engine.pricing import table

    monkeypatch.setattr(table, "_user_prices", {})
    monkeypatch.setattr(table, "_found", {})
    ve.set_price("Mock", "priced", input=1.0, output=1.0)  # the mock is free otherwise
    endless = [calls(("bash", {"cmd": f"echo step {i}"}), text=f"step {i}") for i in range(50)]
    chat = ve.chat_mock(endless, model="priced")
    record = await solve_in(MemorySandbox(), ve.react(chat, tools=[ve.bash()]), "Q", **limits)
    assert record.error is None
    (hit,) = [e for e in record.events if isinstance(e, LimitRecord)]
    assert hit.type == kind
    assert record.result is not None
    assert record.result.startswith("step ")
    assert len(tools_of(record)) < 10
    assert record.solver_chat is not None


async def test_a_time_limit_stops_a_tool_in_flight():
    """A time limit stops the sample while its tool runs (a command sleeping past it)."""
    chat = ve.chat_mock([calls(("bash", {"cmd": "sleep 30"}), text="waiting")])
    with anyio.fail_after(10):
        record = await solve_in(
            MemorySandbox(), ve.react(chat, tools=[ve.bash(timeout=60)]), "Q", time_limit=0.2
        )
    (hit,) = [e for e in record.events if isinstance(e, LimitRecord)]
    assert (hit.type, hit.limit) == ("time", 0.2)
    assert record.result == "waiting"


def test_limits_must_be_positive_numbers(tmp_path: Path):
    """A limit that is not a positive number is a ConfigError naming it."""
    task = ve.Task(
        [{"input": "Q", "target": "A"}],
        ve.generate(ve.chat_mock()),
        ve.detect_includes(),
        dir=tmp_path,
    )
    for name, value in (("message_limit", 0), ("token_limit", 1.5), ("time_limit", -1)):
        with pytest.raises(ve.ConfigError, match=name):
            task.eval(**{name: value})


def test_react_refuses_what_is_not_a_tool_or_a_chat():
    """react() checks its chat, tools, attempts and steps when it is made."""
    with pytest.raises(ve.ConfigError, match="Chat"):
        ve.react("gpt-4.1")  # type: ignore[arg-type]
    with pytest.raises(ve.ConfigError, match="Tools"):
        ve.react(ve.chat_mock(), tools=[print])  # type: ignore[list-item]
    with pytest.raises(ve.ConfigError, match="attempts"):
        ve.react(ve.chat_mock(), attempts=0)


def test_sandbox_outside_a_sample_says_where_it_works():
    """ve.sandbox() outside a sample is a ConfigError saying where it can be called."""
    with pytest.raises(ve.ConfigError, match="Task\\(sandbox="):
        ve.sandbox()


def _names(tools: Sequence[Any]) -> list[str]:
    return [tool.name for tool in tools]


def test_the_sandbox_tools_describe_themselves_to_the_model():
    """bash, python and text_editor are tools with the parameters models know."""
    bash, python, editor = ve.bash(), ve.python(), ve.text_editor()
    assert _names([bash, python, editor]) == ["bash", "python", "text_editor"]
    assert bash.definition.parameters["required"] == ["cmd"]
    assert python.definition.parameters["required"] == ["code"]
    commands = editor.definition.parameters["properties"]["command"]["enum"]
    assert sorted(commands) == ["create", "insert", "str_replace", "undo_edit", "view"]


# -- over HTTP, in each provider's wire format ------------------------------------------------


def provider_chat(server: Any, api: str, **options: Any) -> ve.Chat:
    if api == "anthropic":
        return ve.chat_anthropic("claude-test", base_url=server.base_url("anthropic"), api_key="k")
    if api == "google":
        return ve.chat_google_gemini("gemini-test", base_url=server.base_url("google"), api_key="k")
    return ve.chat_openai("gpt-test", base_url=server.base_url(), api_key="k", api=api, **options)


@pytest.mark.parametrize("api", ["chat_completions", "responses", "anthropic", "google"])
@pytest.mark.parametrize("stream", [False, True])
async def test_react_follows_a_trajectory_in_every_wire_format(server, api, stream):
    """The mock model's trajectory (read a file, then submit what it said) drives the agent
    over each provider's API, streamed or not: the submitted answer is the file's text."""
    from vitals_engine.testing import last_tool_text, trajectory

    server.script(trajectory(("bash", {"cmd": "cat notes/flag.txt"}), submit=last_tool_text))
    chat = provider_chat(server, api)
    if stream:
        chat.provider.stream = True
    sandbox = MemorySandbox({"notes/flag.txt": "flag{x}"})
    record = await solve_in(sandbox, ve.react(chat, tools=[ve.bash()]), "Find the flag.")
    assert record.error is None
    assert record.result == "flag{x}"
    assert [tool.function for tool in tools_of(record)] == ["bash", "submit"]
    assert server.requests == 2

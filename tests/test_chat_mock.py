"""chat_mock(): the deterministic offline model behind examples and tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

import vitals_engine as ve
from tests.helpers import until
from vitals_engine.pacing.scope import CallScope
from vitals_engine.providers.mock import STREAM_PAUSE, mock_reply

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("prompt", "reply"),
    [
        ("What's 2+2?", "2 + 2 = 4"),
        ("what is 10 - 3?", "10 - 3 = 7"),
        ("What's 6*7?", "6 * 7 = 42"),
        ("What's 1.5+1?", "1.5 + 1 = 2.5"),
        ("What's 1/0?", "1 / 0 = undefined"),
        ("Tell me a joke", "Tell me a joke"),
    ],
)
def test_mock_answers_sums_and_echoes_the_rest(prompt, reply):
    """The default mock answers "What's A+B?" with the sum and echoes anything else."""
    assert mock_reply(prompt) == reply


def test_mock_grades_model_graded_prompts():
    """Asked to grade, the mock says C when the criterion is in the submission, else I."""
    prompt = "[Submission]: 2 + 2 = 4\n***\n[Criterion]: 4\n***\nreply with GRADE: $LETTER"
    assert mock_reply(prompt).endswith("GRADE: C")
    assert mock_reply(prompt.replace("Criterion]: 4", "Criterion]: 5")).endswith("GRADE: I")


async def test_chat_keeps_turns_tokens_and_cost():
    """A chat records user and assistant turns with token counts; the mock costs $0."""
    chat = ve.chat_mock(system_prompt="Be brief.")
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    assert [t.role for t in chat.turns] == ["user", "assistant"]
    last = chat.last_turn()
    assert last.text == "2 + 2 = 4"
    assert last.tokens == ve.TokenUsage(input=4, output=5)
    assert last.finish_reason == "stop"
    assert chat.get_tokens()["input"].to_list() == [4]
    assert chat.get_cost() == 0.0


async def test_clone_is_independent():
    """A clone shares the model and system prompt but not the turns."""
    chat = ve.chat_mock(system_prompt="Hi")
    await chat.chat_async("one")
    twin = chat.clone()
    await twin.chat_async("two")
    assert len(chat.turns) == 2
    assert len(twin.turns) == 4
    assert twin.system_prompt == "Hi"


async def test_scripted_replies_by_function_and_list():
    """replies= scripts the mock: a function of the prompt, or a list taken in order."""
    assert await ve.chat_mock(lambda p: p.upper()).chat_async("hey") == "HEY"
    chat = ve.chat_mock(["first", "second"])
    assert await chat.chat_async("a") == "first"
    assert await chat.chat_async("b") == "second"
    with pytest.raises(ve.ConfigError, match="ran out of scripted replies: 2 given"):
        await chat.chat_async("c")


def test_bad_replies_are_rejected():
    """replies must be a function or a list."""
    with pytest.raises(ve.ConfigError, match="function of the prompt or a list"):
        ve.chat_mock(replies=42)


def test_empty_prompt_is_an_error():
    """chat() needs a prompt."""
    with pytest.raises(ve.ConfigError, match="needs a prompt"):
        ve.chat_mock().chat()


async def test_model_name_is_settable():
    """chat_mock(model=...) names the model in turns and in the chat."""
    chat = ve.chat_mock(model="m-1")
    await chat.chat_async("x")
    assert chat.model == "m-1"
    assert chat.last_turn().model == "m-1"
    assert chat.provider.model_id == "mock/m-1"


# -- streaming -----------------------------------------------------------------------------------


class Sink:
    """A text sink that remembers what it was sent: (attempt key, piece)."""

    def __init__(self) -> None:
        self.got: list[tuple[object, str]] = []

    def __call__(self, key: object, delta: str) -> None:
        self.got.append((key, delta))

    @property
    def pieces(self) -> list[str]:
        return [delta for _, delta in self.got]

    @property
    def keys(self) -> list[object]:
        return list({id(key): key for key, _ in self.got}.values())


async def test_stream_sends_the_reply_in_pieces_then_returns_the_whole_turn():
    """stream=True: the reply goes to the scope's text sink a word at a time under one key;
    the turn returned is the one a non-streaming mock returns."""
    sink = Sink()
    chat = ve.chat_mock(stream=True)
    with CallScope(role="solver", on_text=sink):
        assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    assert sink.pieces == ["2 ", "+ ", "2 ", "= ", "4"]
    assert len(sink.keys) == 1
    plain = ve.chat_mock()
    await plain.chat_async("What's 2+2?")
    streamed, whole = chat.last_turn(), plain.last_turn()
    assert (streamed.contents, streamed.tokens) == (whole.contents, whole.tokens)
    assert streamed.finish_reason == whole.finish_reason == "stop"


async def test_without_stream_nothing_is_sent():
    """By default the mock does not stream, even where a sink listens."""
    sink = Sink()
    with CallScope(role="solver", on_text=sink):
        assert await ve.chat_mock().chat_async("What's 2+2?") == "2 + 2 = 4"
    assert sink.got == []


async def test_each_attempt_streams_under_a_fresh_key():
    """A retried call and the next call each start a new text (a new key)."""

    async def broken(_: str) -> AsyncIterator[str]:
        yield "Wro"
        raise ve.ProviderUnavailable("overloaded", status=503)

    chat = ve.chat_mock(
        [broken(""), "Right on", "Again"],
        stream=True,
        retry=ve.Retry(max_attempts=2, backoff=0.0),
    )
    sink = Sink()
    with CallScope(role="solver", on_text=sink):
        assert await chat.chat_async("a") == "Right on"
        assert await chat.chat_async("b") == "Again"
    assert sink.pieces == ["Wro", "Right ", "on", "Again"]
    first, retry, second = sink.keys
    assert [key for key, _ in sink.got] == [first, retry, retry, second]


async def test_a_reply_given_in_pieces_streams_as_they_come():
    """A scripted async iterable of pieces streams each as it is yielded (held at will) and
    makes the reply; without stream= the pieces are only joined."""
    gate = anyio.Event()

    async def pieces(_: str) -> AsyncIterator[str]:
        yield "Hold "
        await gate.wait()
        yield "on"

    sink = Sink()
    chat = ve.chat_mock(pieces, stream=0)
    replies: list[str] = []

    async def ask() -> None:
        with CallScope(role="solver", on_text=sink):
            replies.append(await chat.chat_async("x"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        await until(lambda: sink.pieces == ["Hold "], "the first piece", limit=10)
        assert replies == []
        gate.set()
    assert replies == ["Hold on"]
    assert sink.pieces == ["Hold ", "on"]
    assert chat.last_turn().tokens == ve.TokenUsage(input=1, output=2)

    quiet = Sink()
    with CallScope(role="solver", on_text=quiet):
        assert await ve.chat_mock(pieces).chat_async("x") == "Hold on"
    assert quiet.got == []


async def test_stream_outside_a_run_just_answers():
    """With nobody listening (no scope), a streaming mock answers as usual."""
    assert await ve.chat_mock(stream=True).chat_async("What's 1+2?") == "1 + 2 = 3"


def test_stream_takes_true_or_a_pause():
    """stream=True pauses STREAM_PAUSE between pieces, a number that many seconds; anything
    else is a ConfigError."""
    assert ve.chat_mock(stream=True).provider.stream == STREAM_PAUSE
    assert ve.chat_mock(stream=0.2).provider.stream == 0.2
    assert ve.chat_mock(stream=False).provider.stream is None
    for bad in (-1, "fast"):
        with pytest.raises(ve.ConfigError, match="stream="):
            ve.chat_mock(stream=bad)


# -- tools: chat_mock calls them as the mock server's model does -----------------------


def _tool_chat(chat: ve.Chat) -> tuple[ve.Chat, list[tuple[int, int]]]:
    """`chat` with an `add` tool that records its calls, and those calls."""
    calls: list[tuple[int, int]] = []

    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first number.
            b: The second number.
        """
        calls.append((a, b))
        return a + b

    def divide(a: int, b: int) -> float:
        """Divide a by b."""
        return a / b

    chat.register_tool(add)
    chat.register_tool(divide)
    return chat, calls


def _shape(chat: ve.Chat) -> list[tuple[str, list[str]]]:
    """Each turn's role and the kinds of its contents."""
    return [(t.role, [type(c).__name__ for c in t.contents]) for t in chat.turns]


async def test_chat_mock_calls_the_tool_the_prompt_names_and_uses_its_result():
    """Asked to use a registered tool, chat_mock calls it with the prompt's numbers, the
    chat runs it, and the mock answers with what it returned."""
    chat, calls = _tool_chat(ve.chat_mock())
    assert await chat.chat_async("Use add to compute 3 and 4") == "The tool returned 7."
    assert calls == [(3, 4)]
    assert _shape(chat) == [
        ("user", ["ContentText"]),
        ("assistant", ["ContentToolRequest"]),
        ("user", ["ContentToolResult"]),
        ("assistant", ["ContentText"]),
    ]
    (request,) = chat.turns[1].tool_requests
    assert (request.name, request.arguments) == ("add", {"a": 3, "b": 4})
    assert chat.turns[1].finish_reason == "tool_calls"
    assert chat.turns[3].finish_reason == "stop"


async def test_chat_mock_without_a_named_tool_answers_as_before():
    """Tools the prompt does not name are not called; a prompt naming no tool gets the
    usual answer."""
    chat, calls = _tool_chat(ve.chat_mock())
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    assert calls == []
    assert len(chat.turns) == 2


async def test_chat_mock_says_back_a_tool_error():
    """A tool that raises is reported back as the tool's error."""
    chat, _ = _tool_chat(ve.chat_mock())
    reply = await chat.chat_async("Use divide on 1 and 0")
    assert reply.startswith("The tool failed with Error: ")
    assert "division by zero" in reply


async def test_scripted_chat_mock_is_not_overridden_by_tools():
    """With replies= the script decides, tools or not."""
    chat, calls = _tool_chat(ve.chat_mock(["scripted"]))
    assert await chat.chat_async("Use add to compute 3 and 4") == "scripted"
    assert calls == []


@pytest.mark.parametrize(
    "prompt", ["Use add to compute 3 and 4", "Use divide on 1 and 0", "Use add and divide on 6 3"]
)
async def test_chat_mock_uses_tools_as_the_mock_server_does(server, prompt):
    """chat_mock in process and the mock server over HTTP (OpenAI's format) call the same
    tools with the same arguments and answer the same."""
    local, local_calls = _tool_chat(ve.chat_mock())
    remote, remote_calls = _tool_chat(
        ve.chat_openai("gpt-test", base_url=server.base_url(), api_key="k")
    )
    assert await local.chat_async(prompt) == await remote.chat_async(prompt)
    assert local_calls == remote_calls
    assert _shape(local) == _shape(remote)
    assert local.turns[1].tool_requests == remote.turns[1].tool_requests
    assert [t.tokens for t in local.turns] == [t.tokens for t in remote.turns]

"""An in-process, deterministic model: the embedded default for examples and tests.

It answers "What's A+B?" with the sum, grades model-graded prompts by
checking whether the criterion appears in the submission, fills structured
output requests with a value of the right shape, and echoes anything else.
Offered tools, it calls the ones the prompt names (as the mock server's model
does: both decide with `tool_calls()` and `tool_results_reply()` here), then
answers with what they returned. Replies can be scripted with a function or a
list.

It can stream, as a streaming provider does: each reply's text goes to the
running sample's text sink (`pacing.scope.text_sink()`) in pieces, about a
word each, with a pause between them, under a fresh key per attempt; then
the whole turn is returned as without streaming. A scripted reply may also
be an async iterable of text pieces, taken as they come (so a test can hold
a reply mid-stream).
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import AsyncIterable, Callable, Iterable, Sequence
from typing import Any

import anyio
import msgspec

from .._errors import ConfigError
from ..pacing.scope import TextSink, text_sink
from ..structured.examples import example_value
from ..vocab.model_calls import ChatRequest
from ..vocab.turns import (
    Content,
    ContentText,
    ContentToolRequest,
    ContentToolResult,
    TokenUsage,
    Turn,
)
from .base import Provider

__all__ = [
    "STREAM_PAUSE",
    "MockProvider",
    "mock_reply",
    "stream_pieces",
    "tool_calls",
    "tool_results_reply",
]

#: A reply, or the pieces of its text as a streaming model sends them.
Reply = str | Turn | AsyncIterable[str]
ReplyScript = Callable[[str], Reply] | Sequence[Reply]

_SUM = re.compile(
    r"what(?:'s| is)\s+(-?\d+(?:\.\d+)?)\s*([-+*/x\u00d7])\s*(-?\d+(?:\.\d+)?)\s*\??", re.IGNORECASE
)
_GRADING = re.compile(
    r"\[(?:Submission)\]:\s*(?P<answer>.*?)\s*\*{3}.*?\[(?:Criterion|Expert)\]:\s*(?P<crit>.*?)\s*\*{3}",
    re.DOTALL,
)
_GRADING_EXPERT_FIRST = re.compile(
    r"\[Expert\]:\s*(?P<crit>.*?)\s*\*{3}.*?\[Submission\]:\s*(?P<answer>.*?)\s*\*{3}", re.DOTALL
)


def _number(text: str) -> str:
    value = float(text)
    return str(int(value)) if value.is_integer() else f"{value:g}"


def mock_reply(prompt: str) -> str:
    """The default mock's answer to `prompt`.

    Example:
        >>> mock_reply("What's 2+2?")
        '2 + 2 = 4'
    """
    grading = _GRADING_EXPERT_FIRST.search(prompt) or _GRADING.search(prompt)
    if grading and "GRADE" in prompt:
        answer, criterion = grading["answer"], grading["crit"]
        found = criterion.strip().lower() in answer.strip().lower()
        verdict = "meets" if found else "does not meet"
        return f"The submission {verdict} the criterion.\n\nGRADE: {'C' if found else 'I'}"
    match = _SUM.search(prompt)
    if match:
        a, op, b = float(match[1]), match[2], float(match[3])
        ops: dict[str, Callable[[float, float], float]] = {
            "+": lambda x, y: x + y,
            "-": lambda x, y: x - y,
            "*": lambda x, y: x * y,
            "x": lambda x, y: x * y,
            "\u00d7": lambda x, y: x * y,
            "/": lambda x, y: x / y if y else float("nan"),
        }
        result = ops[op](a, b)
        shown = "undefined" if result != result else _number(str(result))
        return f"{_number(match[1])} {op} {_number(match[3])} = {shown}"
    return prompt


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def tool_calls(
    prompt: str, tools: Iterable[tuple[str, dict[str, Any]]]
) -> list[tuple[str, dict[str, Any]]]:
    """The calls the mock makes: each offered tool (name, JSON-schema parameters) the
    prompt names as a word, with its arguments.

    Number parameters take the prompt's numbers in order; any other parameter
    (or a number one when the numbers run out) an example value of its schema.

    Example:
        >>> add = ("add", {"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}})
        >>> tool_calls("Use add to compute 3 and 4", [add])
        [('add', {'a': 3, 'b': 4})]
    """
    calls: list[tuple[str, dict[str, Any]]] = []
    for name, parameters in tools:
        if not re.search(rf"\b{re.escape(name)}\b", prompt):
            continue
        numbers = [float(x) for x in _NUMBER.findall(prompt)]
        arguments: dict[str, Any] = {}
        for param, schema in ((parameters or {}).get("properties") or {}).items():
            kind = schema.get("type") if isinstance(schema, dict) else None
            if kind in ("integer", "number") and numbers:
                value = numbers.pop(0)
                arguments[param] = int(value) if kind == "integer" or value.is_integer() else value
            else:
                arguments[param] = example_value(schema) if isinstance(schema, dict) else "mock"
        calls.append((name, arguments))
    return calls


def tool_results_reply(results: Iterable[tuple[str, bool]]) -> str:
    """The mock's answer once its tools have answered: each result's text (and whether
    it is an error), said back.

    Example:
        >>> tool_results_reply([("7", False)])
        'The tool returned 7.'
    """
    return " ".join(
        f"The tool {'failed with' if error else 'returned'} {text}." for text, error in results
    )


#: The pause between streamed pieces (seconds) of `chat_mock(stream=True)`.
STREAM_PAUSE = 0.01
_PIECE = re.compile(r"\S+\s*|\s+")


def stream_pieces(text: str) -> list[str]:
    """The pieces a streamed reply is sent in: a word each, with the spaces after it.

    Example:
        >>> stream_pieces("2 + 2 = 4")
        ['2 ', '+ ', '2 ', '= ', '4']
    """
    return _PIECE.findall(text)


def count_tokens(text: str) -> int:
    """A deterministic stand-in for a tokenizer: whitespace-separated words."""
    return len(text.split())


def _default_reply(request: ChatRequest, prompt: str) -> Reply:
    """The unscripted mock's reply: as the mock server's model decides it.

    After tool results, what they returned; offered tools the prompt names, calls
    to them; asked for structured output, a value of the schema's shape; else
    `mock_reply()`.
    """
    last = request.turns[-1] if request.turns else None
    results = [c for c in last.contents if isinstance(c, ContentToolResult)] if last else []
    if results:
        return tool_results_reply((r.text, r.error is not None) for r in results)
    calls = tool_calls(prompt, ((t.name, t.parameters) for t in request.tools))
    if calls:
        contents: list[Content] = [
            ContentToolRequest(f"call_{i}_{name}", name, arguments)
            for i, (name, arguments) in enumerate(calls)
        ]
        return Turn("assistant", contents)
    if request.output_schema is not None:
        return msgspec.json.encode(example_value(request.output_schema)).decode()
    return mock_reply(prompt)


class MockProvider(Provider):
    """The provider behind `chat_mock()`: no network, no key, deterministic."""

    name = "Mock"

    def __init__(
        self,
        model: str = "mock-model",
        replies: ReplyScript | None = None,
        latency: float = 0.0,
        stream: float | None = None,
    ) -> None:
        super().__init__(model=model, base_url="mock://")
        self.latency = latency
        #: The pause between streamed pieces (seconds); None: replies are not streamed.
        self.stream = stream
        self._script: Callable[[str], Reply]
        if replies is None:
            self._script = mock_reply
        elif callable(replies):
            self._script = replies
        elif isinstance(replies, Sequence) and not isinstance(replies, str):
            self._script = self._from_list(list(replies))
        else:
            raise ConfigError(
                "chat_mock(replies=...) takes a function of the prompt or a list of replies, "
                f"not {type(replies).__name__}."
            )

    @staticmethod
    def _from_list(replies: list[Reply]) -> Callable[[str], Reply]:
        counter = itertools.count()
        lock = threading.Lock()

        def next_reply(_: str) -> Reply:
            with lock:
                i = next(counter)
            if i >= len(replies):
                raise ConfigError(
                    f"chat_mock ran out of scripted replies: {len(replies)} given, "
                    f"call {i + 1} asked for another."
                )
            return replies[i]

        return next_reply

    async def generate(self, request: ChatRequest) -> Turn:
        started = time.time()
        if self.latency:
            await anyio.sleep(self.latency)
        prompt = request.turns[-1].text if request.turns else ""
        reply: Reply
        if self._script is mock_reply:
            reply = _default_reply(request, prompt)
        else:
            reply = self._script(prompt)
        sink = text_sink() if self.stream is not None else None
        if isinstance(reply, AsyncIterable):
            reply = await self._take_pieces(reply, sink)
        elif self.stream is not None:
            await self._send_pieces(reply.text if isinstance(reply, Turn) else str(reply), sink)
        turn = reply if isinstance(reply, Turn) else Turn("assistant", [ContentText(str(reply))])
        seen = " ".join(
            [request.system_prompt or ""]
            + [t.text for t in request.turns]
            + [
                c.text
                for t in request.turns
                for c in t.contents
                if isinstance(c, ContentToolResult)
            ]
        )
        spoken = turn.text + " ".join(
            msgspec.json.encode(c.arguments).decode() for c in turn.tool_requests
        )
        tokens = turn.tokens or TokenUsage(
            input=max(1, count_tokens(seen)), output=max(1, count_tokens(spoken))
        )
        finish = turn.finish_reason or ("tool_calls" if turn.tool_requests else "stop")
        return Turn(
            "assistant",
            turn.contents,
            tokens=tokens,
            finish_reason=finish,
            model=self.model,
            started_at=started,
            duration=time.time() - started,
        )

    async def _send_pieces(self, text: str, sink: TextSink | None) -> None:
        """Stream `text` to `sink` in pieces, pausing between them (one attempt, one key)."""
        attempt = object()
        for i, piece in enumerate(stream_pieces(text)):
            if i and self.stream:
                await anyio.sleep(self.stream)
            if sink is not None:
                sink(attempt, piece)

    async def _take_pieces(self, pieces: AsyncIterable[str], sink: TextSink | None) -> str:
        """A scripted reply given in pieces: each streamed as it comes; the whole text."""
        attempt, taken = object(), []
        try:
            async for piece in pieces:
                if taken and self.stream:
                    await anyio.sleep(self.stream)
                taken.append(piece)
                if sink is not None:
                    sink(attempt, piece)
        finally:
            aclose = getattr(pieces, "aclose", None)
            if aclose is not None:
                await aclose()
        return "".join(taken)

"""The mock server's model, independent of wire formats.

Each wire format turns its request body into a `MockRequest` and renders a
`MockReply` back. `answer()` decides the reply deterministically:

1. a scripted function, when the test set one and it returns something;
2. after a tool result: "The tool returned <result>." (or the tool's error);
3. when tools are offered and the prompt names one: a call to that tool,
   its number parameters filled with the numbers of the prompt in order;
4. when structured output is asked for: a JSON value of the schema's shape;
5. otherwise the in-process mock's answer (sums, grading, echo).

Token counts are whitespace words, so tests can predict them exactly.

Prompt caching is modelled here too, apart from any wire format: a format
that reads cache breakpoints (Anthropic's `cache_control`) describes the
prompt as a `CachePlan`, and the server's `PromptCache` says how much of it
was read from the cache and how much was written (see `PromptCache.use`).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..providers.mock import count_tokens, mock_reply, tool_calls, tool_results_reply
from ..structured.examples import example_value

__all__ = [
    "CachePlan",
    "CacheUse",
    "MockMessage",
    "MockReply",
    "MockRequest",
    "MockToolCall",
    "PromptCache",
    "Script",
    "answer",
    "cache_plan",
]


@dataclass(slots=True)
class MockToolCall:
    """A tool call in a request's history, or one a scripted `MockReply` makes.

    Example:
        >>> from vitals_engine.testing import MockReply, MockServer, MockToolCall
        >>> def script(request):
        ...     if request.messages[-1].role == "user":  # then, after the tool: the mock's own
        ...         return MockReply(tool_calls=[MockToolCall("call_1", "add", {"a": 3, "b": 4})])
        >>> def add(a: int, b: int) -> int:
        ...     '''Add two numbers.'''
        ...     return a + b
        >>> with MockServer() as server:
        ...     server.script(script)
        ...     chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="x")
        ...     _ = chat.register_tool(add)
        ...     chat.chat("What's 3+4?")
        'The tool returned 7.'
    """

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(slots=True)
class MockMessage:
    """One message as the mock sees it: role, text, and tool traffic.

    Example:
        >>> from vitals_engine.testing import MockServer
        >>> with MockServer() as server:
        ...     server.script(lambda request: " ".join(m.role for m in request.messages))
        ...     chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="x")
        ...     _ = chat.chat("Hello")
        ...     chat.chat("Again")
        'user assistant user'
    """

    role: str  # "user" | "assistant" | "tool"
    text: str = ""
    tool_calls: list[MockToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    tool_error: bool = False
    images: int = 0
    #: An assistant message's reasoning, as it came back (a thinking block, a reasoning
    #: item's decrypted content), or None.
    reasoning: str | None = None


@dataclass(slots=True)
class MockRequest:
    """A request in any wire format, reduced to what the mock needs.

    A script (`MockServer.script()`) is given one.

    Example:
        >>> from vitals_engine.testing import MockRequest, MockServer
        >>> def echo(request: MockRequest) -> str:
        ...     return f"{request.model} ({request.system}): {request.prompt}"
        >>> with MockServer() as server:
        ...     server.script(echo)
        ...     chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="x",
        ...                           system_prompt="Be brief.")
        ...     chat.chat("Hello")
        'gpt-4.1-mini (Be brief.): Hello'
    """

    format: str
    model: str
    system: str | None = None
    messages: list[MockMessage] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)  # {name, description, parameters}
    schema: dict[str, Any] | None = None
    max_tokens: int | None = None
    #: Whether the reply is to be streamed (server-sent events).
    stream: bool = False
    #: Whether a streamed reply ends with a usage chunk (OpenAI's `include_usage`).
    stream_usage: bool = False
    #: What the format echoes back in its reply (the Responses API echoes its parameters).
    options: dict[str, Any] = field(default_factory=dict)
    #: The prompt's cache breakpoints, when it has some (Anthropic's `cache_control`).
    cache: CachePlan | None = None

    @property
    def continuing(self) -> bool:
        """Whether the request ends with an assistant message the model is to go on from
        (after Anthropic's `pause_turn`, or a prefill)."""
        return bool(self.messages) and self.messages[-1].role == "assistant"

    @property
    def prompt(self) -> str:
        """The text of the last user message."""
        for message in reversed(self.messages):
            if message.role == "user":
                return message.text
        return ""

    @property
    def all_text(self) -> str:
        return " ".join([self.system or ""] + [m.text for m in self.messages])


@dataclass(slots=True)
class MockReply:
    """What the mock answers, before a wire format renders it.

    Example:
        >>> from vitals_engine.testing import MockReply, MockServer
        >>> with MockServer() as server:
        ...     server.script(lambda request: MockReply(text="It is", finish="max_tokens"))
        ...     chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="x")
        ...     print(chat.chat("What's 2+2?"), chat.last_turn().finish_reason)
        It is max_tokens
    """

    text: str = ""
    tool_calls: list[MockToolCall] = field(default_factory=list)
    reasoning: str | None = None
    finish: str = "stop"  # stop | max_tokens | tool_calls | content_filter | pause_turn
    #: The whole prompt; the cache's reads and writes below are parts of it.
    input_tokens: int = 0
    output_tokens: int = 0
    #: Prompt tokens read from a cache.
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    #: Prompt tokens written to a cache for 5 minutes, and for an hour (Anthropic).
    cache_write_5m_tokens: int = 0
    cache_write_1h_tokens: int = 0
    #: Web searches the model ran on the server's side, by query (Anthropic's
    #: `server_tool_use` blocks, OpenAI Responses' `web_search_call` items).
    web_searches: list[str] = field(default_factory=list)
    #: Prompt tokens of tool results the server's tools added (Gemini's
    #: `toolUsePromptTokenCount`).
    tool_use_prompt_tokens: int = 0

    @property
    def cache_numbers(self) -> bool:
        """Whether the reply says anything of a cache (read or written)."""
        return bool(self.cached_tokens or self.cache_write_5m_tokens or self.cache_write_1h_tokens)


Script = Callable[[MockRequest], "str | MockReply | None"]


def _default(request: MockRequest) -> MockReply:
    last = request.messages[-1] if request.messages else MockMessage("user")
    if last.role == "tool":
        trailing: list[MockMessage] = []
        for message in reversed(request.messages):
            if message.role != "tool":
                break
            trailing.insert(0, message)
        return MockReply(text=tool_results_reply((m.text, m.tool_error) for m in trailing))
    prompt = request.prompt
    named = tool_calls(prompt, ((t["name"], t.get("parameters") or {}) for t in request.tools))
    if named:
        calls = [
            MockToolCall(id=f"call_{i}_{name}", name=name, arguments=arguments)
            for i, (name, arguments) in enumerate(named)
        ]
        return MockReply(tool_calls=calls, finish="tool_calls")
    if request.schema is not None:
        return MockReply(text=msgspec.json.encode(example_value(request.schema)).decode())
    return MockReply(text=mock_reply(prompt))


def answer(request: MockRequest, script: Script | None = None) -> MockReply:
    """The mock's reply to `request`, with token counts filled in."""
    reply: MockReply | None = None
    if script is not None:
        scripted = script(request)
        if isinstance(scripted, str):
            reply = MockReply(text=scripted)
        elif isinstance(scripted, MockReply):
            reply = scripted
    if reply is None:
        reply = _default(request)
    if reply.tool_calls and reply.finish == "stop":
        reply.finish = "tool_calls"
    if not reply.input_tokens:
        unseen = request.cache.extra_tokens if request.cache is not None else 0
        reply.input_tokens = max(1, count_tokens(request.all_text) + unseen)
    if not reply.output_tokens:
        spoken = reply.text + " ".join(
            msgspec.json.encode(c.arguments).decode() for c in reply.tool_calls
        )
        reply.output_tokens = max(1, count_tokens(spoken)) + reply.reasoning_tokens
    return reply


# -- prompt caching ------------------------------------------------------------------------------

#: How long a cache entry lives after it was last written or read, by its breakpoint's ttl.
CACHE_TTL = {"5m": 300.0, "1h": 3600.0}
#: How many blocks before a breakpoint the cache looks back for an earlier entry.
CACHE_LOOKBACK = 20


@dataclass(frozen=True, slots=True)
class CachePlan:
    """A prompt as a cache sees it: one boundary per block, and the breakpoints.

    `boundaries[i]` is (the prompt's tokens up to and including its block i, a key of
    that prefix); `breakpoints` are (boundary index, ttl "5m" or "1h"), in prompt order.
    `extra_tokens` are prompt tokens the brain does not count (tool definitions).
    Made by `cache_plan()`.
    """

    boundaries: tuple[tuple[int, str], ...]
    breakpoints: tuple[tuple[int, str], ...]
    extra_tokens: int = 0


def cache_plan(
    model: str, blocks: Iterable[tuple[int, Any, str | None]], *, extra_tokens: int = 0
) -> CachePlan | None:
    """The plan of a prompt made of `blocks` (tokens, content, breakpoint ttl or None), in
    the order the provider caches them; None when no block is a breakpoint. A prefix's key
    covers the model and every block's content up to it.

    Example:
        >>> blocks = [(1200, {"system": "..."}, "5m"), (2, {"user": "hi"}, None)]
        >>> cache_plan("claude-x", blocks).breakpoints
        ((0, '5m'),)
    """
    digest = hashlib.sha256(model.encode())
    tokens = 0
    boundaries: list[tuple[int, str]] = []
    breakpoints: list[tuple[int, str]] = []
    for index, (count, content, ttl) in enumerate(blocks):
        digest.update(msgspec.json.encode(content))
        tokens += count
        boundaries.append((tokens, digest.copy().hexdigest()))
        if ttl is not None:
            breakpoints.append((index, ttl))
    if not breakpoints:
        return None
    return CachePlan(tuple(boundaries), tuple(breakpoints), extra_tokens)


@dataclass(frozen=True, slots=True)
class CacheUse:
    """What one request did with the cache: tokens read, and written by ttl."""

    read: int = 0
    written_5m: int = 0
    written_1h: int = 0


class PromptCache:
    """The server's cache of prompt prefixes, as Anthropic's prompt caching behaves.

    A prefix is written at a breakpoint when it is at least `minimum` tokens long (shorter
    ones are not cached, and that is no error), and lives `CACHE_TTL[ttl]` seconds from its
    last write or read. A request reads the longest live prefix found at one of its
    breakpoints or up to `CACHE_LOOKBACK` blocks before one; its later breakpoints are
    written, each one's new tokens counted under its own ttl. Its clock is the monotonic
    clock plus `advance()`s, so a test moves time instead of waiting.

    Example:
        >>> cache = PromptCache(minimum=3)
        >>> plan = cache_plan("m", [(4, "long system prompt here", "5m"), (1, "hi", None)])
        >>> cache.use(plan), cache.use(plan)
        (CacheUse(read=0, written_5m=4, written_1h=0), CacheUse(read=4, written_5m=0, written_1h=0))
        >>> cache.advance(301); cache.use(plan).written_5m
        4
    """

    def __init__(self, minimum: int = 1024) -> None:
        self.minimum = minimum
        self._entries: dict[str, tuple[float, str]] = {}  # key -> (expiry, ttl)
        self._offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        return time.monotonic() + self._offset

    def advance(self, seconds: float) -> None:
        """Move the cache's clock `seconds` forward (entries expire as if that long passed)."""
        with self._lock:
            self._offset += seconds

    def clear(self) -> None:
        """Forget every entry (the clock stays where it is)."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        """The entries alive now."""
        now = self.now()
        with self._lock:
            return sum(1 for expiry, _ in self._entries.values() if expiry > now)

    def use(self, plan: CachePlan) -> CacheUse:
        """Read what `plan`'s prompt finds in the cache and write its breakpoints' prefixes."""
        now = self.now()
        with self._lock:
            read, hit = 0, None
            for index, _ in plan.breakpoints:
                for back in range(index, max(-1, index - CACHE_LOOKBACK - 1), -1):
                    tokens, key = plan.boundaries[back]
                    entry = self._entries.get(key)
                    if entry is not None and entry[0] > now:
                        if tokens > read:
                            read, hit = tokens, key
                        break
            if hit is not None:
                ttl = self._entries[hit][1]
                self._entries[hit] = (now + CACHE_TTL[ttl], ttl)
            covered, written = read, {"5m": 0, "1h": 0}
            for index, ttl in plan.breakpoints:
                tokens, key = plan.boundaries[index]
                if tokens < self.minimum or tokens <= covered:
                    continue
                written[ttl] += tokens - covered
                covered = tokens
                self._entries[key] = (now + CACHE_TTL[ttl], ttl)
        return CacheUse(read, written["5m"], written["1h"])

"""`Chat`: a conversation with one model.

A chat holds a system prompt, its turns and its tools, and talks to one
provider. Each model call goes through `call_model`, which applies the run's
limits and retries (when a run is active) and records tokens and cost in the
run's usage ledger under the current role.

A chat is not safe to use from two tasks at once; `clone()` it instead.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

import anyio

from .._errors import ConfigError
from .._sync import carry, raise_carried, run_sync
from .._words import plural
from ..providers.base import Provider
from ..structured.schemas import parse_structured, schema_for
from ..vocab.model_calls import ChatRequest
from ..vocab.turns import Content, ContentText, ContentToolRequest, ContentToolResult, Turn
from .dispatch import call_model
from .tools import Tool, tool_from_function

if TYPE_CHECKING:
    import polars as pl

__all__ = ["Chat"]

T = TypeVar("T")
Prompt = str | Content


class Chat:
    """A conversation with one model.

    Example:
        >>> chat = chat_mock()
        >>> chat.chat("What's 2+2?")
        '2 + 2 = 4'
        >>> chat.last_turn().tokens
        TokenUsage(input=2, output=5)
    """

    def __init__(
        self,
        provider: Provider,
        *,
        system_prompt: str | None = None,
        turns: list[Turn] | None = None,
        max_tool_rounds: int = 16,
    ) -> None:
        if not isinstance(provider, Provider):
            raise ConfigError(f"Chat needs a Provider, not {type(provider).__name__}.")
        self._provider = provider
        self._system_prompt = system_prompt
        self._turns: list[Turn] = list(turns or [])
        self._tools: dict[str, Tool] = {}
        self.max_tool_rounds = max_tool_rounds

    # -- identity -----------------------------------------------------------

    @property
    def provider(self) -> Provider:
        return self._provider

    @property
    def model(self) -> str:
        return self._provider.model

    @property
    def system_prompt(self) -> str | None:
        return self._system_prompt

    @system_prompt.setter
    def system_prompt(self, value: str | None) -> None:
        self._system_prompt = value

    @property
    def turns(self) -> list[Turn]:
        """The conversation so far, oldest first (the system prompt is separate)."""
        return list(self._turns)

    def set_turns(self, turns: list[Turn]) -> None:
        """Replace the conversation."""
        self._turns = list(turns)

    def last_turn(self, role: str = "assistant") -> Turn | None:
        """The most recent turn of `role`, or None."""
        for turn in reversed(self._turns):
            if turn.role == role:
                return turn
        return None

    def clone(self) -> Chat:
        """An independent copy: same provider, system prompt and tools; its own turns."""
        if type(self) is Chat:  # what copy.copy does, without its generic dispatch
            twin = Chat.__new__(Chat)
            twin.__dict__.update(self.__dict__)
        else:
            twin = copy.copy(self)
        twin._turns = list(self._turns)
        twin._tools = dict(self._tools)
        return twin

    # -- tools --------------------------------------------------------------

    def register_tool(self, fn: Callable[..., Any], *, name: str | None = None) -> Tool:
        """Let the model call `fn`, a typed function (sync or async) with a docstring.

        Example:
            >>> def add(a: int, b: int) -> int:
            ...     '''Add two integers.'''
            ...     return a + b
            >>> chat.register_tool(add)
        """
        tool = tool_from_function(fn, name=name)
        self._tools[tool.definition.name] = tool
        return tool

    def add_tool(self, tool: Tool) -> Tool:
        """Give the chat a tool made already (`ve.bash()`, `tool_from_function(f)` ...).

        Example:
            >>> chat.add_tool(ve.bash(timeout=60))
            <Tool bash>
        """
        self._tools[tool.definition.name] = tool
        return tool

    @property
    def tools(self) -> list[Tool]:
        return list(self._tools.values())

    # -- talking ------------------------------------------------------------

    async def chat_async(self, *prompt: Prompt, **params: Any) -> str:
        """Send a user turn, run any tool calls the model makes, return its final text."""
        turn = await self._converse(Turn.user(*_check_prompt(prompt)), params)
        return turn.text

    def chat(self, *prompt: Prompt, **params: Any) -> str:
        """The synchronous form of `chat_async`; works in scripts and notebooks."""
        return run_sync(self._chat_kw, prompt, params)

    async def _chat_kw(self, prompt: tuple[Prompt, ...], params: dict[str, Any]) -> str:
        return await self.chat_async(*prompt, **params)

    @overload
    async def extract_data_async(self, *prompt: Prompt, type: type[T]) -> T: ...
    @overload
    async def extract_data_async(self, *prompt: Prompt, type: dict[str, Any]) -> Any: ...
    async def extract_data_async(self, *prompt: Prompt, type: Any) -> Any:
        """Ask for a reply of a given shape and return it validated.

        `type` is a msgspec Struct (or any type msgspec knows), which msgspec
        decodes the reply into, or a JSON schema dict, which the reply is
        validated against (the full JSON Schema, draft 2020-12). A reply that
        does not validate raises `ExtractionError` naming where and what,
        holding the raw reply; a schema dict that is not valid JSON Schema
        raises `ConfigError` before the model is asked.

        Example:
            >>> n = {"type": "integer", "minimum": 3}
            >>> schema = {"type": "object", "properties": {"n": n}, "required": ["n"]}
            >>> await chat_mock().extract_data_async("Pick n.", type=schema)
            {'n': 3}
        """
        schema = schema_for(type)
        turn = await self._converse(Turn.user(*_check_prompt(prompt)), {}, output_schema=schema)
        return parse_structured(turn.text, type, schema)

    def extract_data(self, *prompt: Prompt, type: Any) -> Any:
        """The synchronous form of `extract_data_async`."""
        return run_sync(self._extract_kw, prompt, type)

    async def _extract_kw(self, prompt: tuple[Prompt, ...], kind: Any) -> Any:
        return await self.extract_data_async(*prompt, type=kind)

    async def _converse(
        self,
        user: Turn,
        params: dict[str, Any],
        output_schema: dict[str, Any] | None = None,
    ) -> Turn:
        start = len(self._turns)
        self._turns.append(user)
        try:
            return await self._complete(output_schema, params)
        except BaseException:
            del self._turns[start:]  # a failed exchange leaves the conversation as it was
            raise

    async def step_async(self, *prompt: Prompt, **params: Any) -> Turn:
        """One model call: send the conversation (and a user turn of `prompt`, if given),
        with the chat's tools, and add the reply to it; the tools it asks for are not run
        (`run_tools_async` runs them). What an agent loop takes one step at a time.

        Example:
            >>> reply = await chat.step_async("List the files.")
            >>> if reply.tool_requests:
            ...     await chat.run_tools_async(reply)
        """
        if prompt:
            self._turns.append(Turn.user(*_check_prompt(prompt)))
        return await self._one_call(None, params)

    async def run_tools_async(self, turn: Turn) -> Turn:
        """Run the tool calls of the assistant `turn` (side by side), add their results to
        the conversation as a user turn, and return it.

        Example:
            >>> results = await chat.run_tools_async(chat.last_turn())
            >>> [content.text for content in results.contents]
            ['7']
        """
        results = Turn("user", list(await self._run_tools(turn.tool_requests)))
        self._turns.append(results)
        return results

    async def _one_call(self, output_schema: dict[str, Any] | None, params: dict[str, Any]) -> Turn:
        request = ChatRequest(
            turns=list(self._turns),
            system_prompt=self._system_prompt,
            tools=[t.definition for t in self._tools.values()],
            output_schema=output_schema,
            params=params,
        )
        reply = await call_model(self._provider, request)
        self._turns.append(reply)
        return reply

    async def _complete(self, output_schema: dict[str, Any] | None, params: dict[str, Any]) -> Turn:
        for _ in range(self.max_tool_rounds + 1):
            reply = await self._one_call(output_schema, params)
            requests = reply.tool_requests
            if not requests:
                return reply
            self._turns.append(Turn("user", list(await self._run_tools(requests))))
        raise ConfigError(
            f"The model kept calling tools for {plural(self.max_tool_rounds, 'round')} "
            "without answering; raise Chat(max_tool_rounds=...) if that is expected."
        )

    async def _run_tools(self, requests: list[ContentToolRequest]) -> list[ContentToolResult]:
        results: list[ContentToolResult | None] = [None] * len(requests)

        async def run_one(i: int, req: ContentToolRequest) -> None:
            tool = self._tools.get(req.name)
            if tool is None:
                results[i] = ContentToolResult(
                    req.id, req.name, error=f"Unknown tool '{req.name}'."
                )
            else:
                results[i] = await tool.invoke(req)

        try:
            async with anyio.create_task_group() as tg:
                for i, req in enumerate(requests):
                    tg.start_soon(carry, run_one, i, req)
        except BaseExceptionGroup as group:
            raise_carried(group)  # a tool's KeyboardInterrupt or SystemExit, as itself
            raise
        return [r for r in results if r is not None]

    # -- accounting ---------------------------------------------------------

    def get_tokens(self) -> pl.DataFrame:
        """Tokens per assistant turn: input, output, cached input, and cost."""
        import polars as pl

        rows = [t for t in self._turns if t.role == "assistant" and t.tokens is not None]
        return pl.DataFrame(
            {
                "turn": [i + 1 for i in range(len(rows))],
                "input": [t.tokens.input for t in rows if t.tokens],
                "output": [t.tokens.output for t in rows if t.tokens],
                "cached_input": [t.tokens.cached_input for t in rows if t.tokens],
                "cache_write": [t.tokens.cache_write for t in rows if t.tokens],
                "cost": [t.cost for t in rows],
            },
            schema={
                "turn": pl.Int64,
                "input": pl.Int64,
                "output": pl.Int64,
                "cached_input": pl.Int64,
                "cache_write": pl.Int64,
                "cost": pl.Float64,
            },
        )

    def get_cost(self) -> float | None:
        """Total USD cost of this conversation, or None if any call's price is unknown."""
        total = 0.0
        for turn in self._turns:
            if turn.role == "assistant" and turn.tokens is not None:
                if turn.cost is None:
                    return None
                total += turn.cost
        return total

    def __repr__(self) -> str:
        return (
            f"<Chat {self._provider.name}/{self.model} turns={len(self._turns)}"
            f" tokens={sum((t.tokens.total for t in self._turns if t.tokens), 0)}>"
        )


def _check_prompt(prompt: tuple[Prompt, ...]) -> tuple[Prompt, ...]:
    if not prompt:
        raise ConfigError("chat() needs a prompt: a string or content objects.")
    for part in prompt:
        if not isinstance(part, str | ContentText) and not hasattr(part, "__struct_fields__"):
            raise ConfigError(
                f"A prompt part must be a string or a content object, not {type(part).__name__}."
            )
    return prompt

"""The bridge for one agent: an HTTP server that answers the agent's model calls in the
API it speaks, each call sent through the run's call pipeline with the user's chat.

`serve_bridge(chat)` is an async context manager: inside it, the bridge listens (on
127.0.0.1, or on a unix socket) and hands out a key the agent authenticates with
instead of a real API key. Its handlers run as tasks of the block that opened it, so
each call is the sample's (its role, limits, transcript, budget, reply journal). What
the agent sees of the model is what the API gives: the model's reply, its usage; the
model and the parameters are the user's chat's, whatever the agent asked for.

A call that fails past the pipeline's retries (or the budget) ends the bridge: the agent
is answered with an error, the block is cancelled, and the failure is raised where the
block was opened, as a sample error.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from .._errors import ConfigError
from ..chats.chat import Chat
from ..chats.dispatch import call_model
from ..pacing.transcript import record
from ..providers.anthropic import AnthropicProvider
from ..vocab.model_calls import ChatRequest
from ..vocab.transcript import ToolRecord
from ..vocab.turns import ContentToolRequest, ContentToolResult, Turn
from .anthropic_api import AnthropicApi, count_tokens_body
from .chat_completions_api import ChatCompletionsApi
from .http_server import HttpRequest, Responder, serve_http
from .responses_api import ResponsesApi
from .wire import AgentRequest, ApiFormat, WireError

__all__ = ["Bridge", "BridgeAddress", "bridge", "serve_bridge"]

_APIS: tuple[ApiFormat, ...] = (AnthropicApi(), ChatCompletionsApi(), ResponsesApi())


_JSON = {"Content-Type": "application/json"}
_SSE = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


def _api_for(path: str) -> ApiFormat | None:
    """The API a request's path names: its last segments, so that a base URL with or
    without `/v1` (or with a prefix of the agent's) finds it."""
    for api in _APIS:
        suffix = api.path.removeprefix("/v1")
        if path.rstrip("/").endswith(suffix):
            return api
    return None


def _max_tokens_params(chat: Chat, asked: int | None) -> dict[str, Any]:
    """The agent's output cap, where the user's chat sets none and its provider takes
    `max_tokens` (Anthropic's Messages API): else the chat's own default serves."""
    provider = chat.provider
    if asked is None or provider.params.get("max_tokens") is not None:
        return {}
    if isinstance(provider, AnthropicProvider):
        return {"max_tokens": asked}
    return {}


@dataclass
class _AgentTools:
    """The agent's own tool calls, told by its requests: a call asked for in one reply and
    answered in the next request is recorded in the transcript as a `tool` event."""

    asked: dict[str, tuple[ContentToolRequest, float]] = field(default_factory=dict)
    answered: set[str] = field(default_factory=set)

    def replied(self, turn: Turn) -> None:
        now = time.time()
        for request in turn.tool_requests:
            self.asked[request.id] = (request, now)

    def requested(self, turns: list[Turn]) -> None:
        now = time.time()
        for turn in turns:
            for content in turn.contents:
                if isinstance(content, ContentToolResult) and content.id not in self.answered:
                    self.answered.add(content.id)
                    self._record(content, now)

    def _record(self, result: ContentToolResult, now: float) -> None:
        asked = self.asked.pop(result.id, None)
        if asked is None:
            return  # a result of a call this bridge did not hand out (a resumed agent's)
        request, started = asked
        record(
            ToolRecord(
                call_id=request.id,
                function=request.name,
                arguments=dict(request.arguments or {}),
                result=result.text if result.error is None else "",
                started=started,
                completed=now,
                error_type=None if result.error is None else "unknown",
                error_message=result.error,
            )
        )


class Bridge:
    """Answers one agent's requests with `chat` (its model, parameters and provider).

    `chat` is the conversation as the agent last had it (each call's request and reply),
    what a limit leaves and the log keeps; `calls` counts the model calls served.
    """

    def __init__(self, chat: Chat, key: str, on_failure: Callable[[BaseException], None]) -> None:
        self.chat = chat
        self.key = key
        self.calls = 0
        self._on_failure = on_failure
        self._tools = _AgentTools()

    def _authorised(self, headers: Mapping[str, str]) -> bool:
        given = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
        return secrets.compare_digest(given.strip(), self.key)

    async def handle(self, request: HttpRequest, responder: Responder) -> None:
        """Answer one HTTP request (the `serve_http` handler)."""
        if request.method == "GET" and request.path.rstrip("/").endswith("/models"):
            await self._models(responder)
            return
        api = _api_for(request.path.removesuffix("/count_tokens"))
        if request.method != "POST" or api is None:
            await _send(responder, 404, {"error": {"message": f"No route {request.path}."}})
            return
        if not self._authorised(request.headers):
            await _send(responder, 401, api.error(401, "The bridge's key was not given."))
            return
        try:
            body = json.loads(request.body or b"null")
            if request.path.rstrip("/").endswith("/count_tokens"):
                await _send(responder, 200, count_tokens_body(body))
                return
            asked = api.read(body)
        except (ValueError, WireError) as exc:
            status = exc.status if isinstance(exc, WireError) else 400
            await _send(responder, status, api.error(status, str(exc)))
            return
        await self._serve(api, asked, responder)

    async def _serve(self, api: ApiFormat, asked: AgentRequest, responder: Responder) -> None:
        self._tools.requested(asked.request.turns)
        request = ChatRequest(
            turns=asked.request.turns,
            system_prompt=asked.request.system_prompt,
            tools=asked.request.tools,
            output_schema=asked.request.output_schema,
            params=_max_tokens_params(self.chat, asked.max_tokens),
        )
        try:
            turn = await call_model(self.chat.provider, request)
        except Exception as exc:
            await _send(responder, 500, api.error(500, f"The eval stopped this agent: {exc}"))
            self._on_failure(exc)
            return
        self.calls += 1
        self.chat.system_prompt = request.system_prompt
        self.chat.set_turns([*request.turns, turn])
        self._tools.replied(turn)
        if asked.stream:
            await responder.send(
                200, _SSE, b"".join(api.stream(turn, model=asked.model, request=asked))
            )
        else:
            await _send(responder, 200, api.reply(turn, model=asked.model, request=asked))

    async def _models(self, responder: Responder) -> None:
        model = self.chat.model
        listing = {
            "object": "list",
            "data": [{"id": model, "object": "model", "type": "model", "display_name": model}],
        }
        await _send(responder, 200, listing)


async def _send(responder: Responder, status: int, body: Any) -> None:
    await responder.send(status, _JSON, json.dumps(body).encode())


@dataclass(frozen=True)
class BridgeAddress:
    """Where an agent reaches the bridge: `base_url` (for Anthropic's clients; OpenAI's take
    `openai_base_url`, which ends in /v1), or the unix socket `socket`; and the `api_key`
    it sends. `bridge` is the bridge itself (its conversation and calls so far).

    Example:
        >>> async with ve.bridge(ve.chat_anthropic("claude-sonnet-4-5")) as address:
        ...     client = anthropic.AsyncAnthropic(base_url=address.base_url,
        ...                                       api_key=address.api_key)
    """

    base_url: str
    api_key: str
    bridge: Bridge
    socket: str | None = None

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"


@asynccontextmanager
async def serve_bridge(
    chat: Chat, *, socket: str | Path | None = None
) -> AsyncIterator[BridgeAddress]:
    """Serve `chat` to an agent for the duration of the block (on 127.0.0.1 at a free
    port, or on the unix socket `socket`); a call that fails ends the block and is
    raised here.

    Example:
        >>> async with serve_bridge(chat) as address:
        ...     await run_agent(base_url=address.base_url, api_key=address.api_key)
    """
    if not isinstance(chat, Chat):
        raise ConfigError(f"The bridge serves a Chat, not {type(chat).__name__}.")
    failures: list[BaseException] = []
    listener: anyio.abc.Listener[Any]
    if socket is not None:
        listener = await anyio.create_unix_listener(socket)
        base_url = "http://localhost"
    else:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        base_url = f"http://127.0.0.1:{port}"
    try:
        async with anyio.create_task_group() as group:

            def failed(exc: BaseException) -> None:
                if not failures:
                    failures.append(exc)
                group.cancel_scope.cancel()

            bridge = Bridge(chat.clone(), "vb-" + secrets.token_hex(16), failed)
            group.start_soon(serve_http, listener, bridge.handle)
            try:
                yield BridgeAddress(
                    base_url, bridge.key, bridge, str(socket) if socket is not None else None
                )
            finally:
                group.cancel_scope.cancel()
    except BaseExceptionGroup as raised:  # what the block raised, as itself
        if len(raised.exceptions) == 1:
            raise raised.exceptions[0] from None
        raise
    finally:
        if socket is not None:  # the socket goes with its bridge (one quick unlink)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(socket)
    if failures:
        raise failures[0]


#: The public name: `ve.bridge(chat)`.
bridge = serve_bridge

"""The bridge's side of an API's wire: a request an agent sent, read into the engine's
`ChatRequest`, and the engine's reply (a `Turn`) written back as that API's response
body, or as its stream of server-sent events.

One module per API (`anthropic_api`, `chat_completions_api`, `responses_api`), each an
`ApiFormat`. They are the mirror of `providers/`: a provider writes requests and reads
replies; an API format here reads requests and writes replies, so that a call an agent
makes in one API's format can be served by any provider.
"""

from __future__ import annotations

import base64
import binascii
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import msgspec

from ..vocab.model_calls import ChatRequest
from ..vocab.turns import ContentThinking, Turn

__all__ = ["AgentRequest", "ApiFormat", "WireError", "seal_thinking", "unseal_thinking"]

_SEAL = "vitals1:"


def seal_thinking(thinking: ContentThinking) -> str:
    """The model's reasoning as an opaque string an agent sends back unchanged (Anthropic's
    `signature`, the Responses API's `encrypted_content`): the whole `ContentThinking`, so
    that whichever provider serves the next call gets its own signature back.

    Example:
        >>> unseal_thinking(seal_thinking(ContentThinking("hmm", signature="sig")))
        ContentThinking(thinking='hmm', signature='sig', redacted=False, id=None)
    """
    return _SEAL + base64.b64encode(msgspec.json.encode(thinking)).decode("ascii")


def unseal_thinking(sealed: str | None) -> ContentThinking | None:
    """The `ContentThinking` that `seal_thinking` sealed (None: not one of ours)."""
    if not sealed or not sealed.startswith(_SEAL):
        return None
    try:
        return msgspec.json.decode(base64.b64decode(sealed[len(_SEAL) :]), type=ContentThinking)
    except (binascii.Error, msgspec.DecodeError, msgspec.ValidationError):
        return None


class WireError(ValueError):
    """A request the bridge cannot read: the HTTP status it answers with and why, which
    the API format writes as its own error body for the agent to see. Never raised to the
    user (the agent gets it as the API's error), so not a `VitalsError`."""

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True, slots=True)
class AgentRequest:
    """One request of an agent, read: the conversation (`request`: turns, system prompt,
    tools, an output schema; its `params` empty, since the user's chat's parameters are
    the ones that serve), the model the agent named, whether it asked for a stream, and
    the most output tokens it allows (None: it named none).

    `extra` is what the API format read from the request and needs again to write the reply,
    which the conversation cannot carry (the Responses API's freeform and namespaced tools,
    whose calls are written back as their own item types): the format's own, handed back
    to its `reply()` and `stream()` as `request=`.

    Example:
        >>> AgentRequest(ChatRequest([Turn.user("Hi")]), "gpt-5", stream=False).extra
        {}
    """

    request: ChatRequest
    model: str
    stream: bool
    max_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class ApiFormat(ABC):
    """One API as the bridge serves it."""

    #: Short name: "anthropic", "chat_completions", "responses".
    name: ClassVar[str]
    #: The path it is served at, under the bridge's base URL: "/v1/messages" ...
    path: ClassVar[str]

    @abstractmethod
    def read(self, body: Any) -> AgentRequest:
        """The request body (decoded JSON) as an `AgentRequest`; `WireError` for a body
        the API would refuse (missing fields, wrong types). Fields the API accepts but the
        bridge has no use for are ignored, never refused."""

    @abstractmethod
    def reply(
        self, turn: Turn, *, model: str, request: AgentRequest | None = None
    ) -> dict[str, Any]:
        """The API's response body for the assistant `turn` (its usage from
        `turn.tokens`), naming `model` as the one that answered; `request` is the request
        it answers, as `read()` gave it (its `extra`), where the format needs it."""

    @abstractmethod
    def stream(self, turn: Turn, *, model: str, request: AgentRequest | None = None) -> list[bytes]:
        """The same reply as the API's stream: each server-sent event encoded
        (`event: ...\\ndata: ...\\n\\n`), up to the API's end marker."""

    @abstractmethod
    def error(self, status: int, message: str) -> dict[str, Any]:
        """The API's error body for a failure of `status`."""

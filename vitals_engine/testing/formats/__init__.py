"""Wire formats the mock server speaks: each turns a request body into a
`MockRequest` and a `MockReply` into the provider's real response body, or
into the server-sent events of the provider's real stream."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import msgspec

from ..brain import MockReply, MockRequest

__all__ = ["Refused", "StreamEvent", "WireFormat", "fragments", "pieces"]

_WORD = re.compile(r"\S+\s*|\s+")


def pieces(text: str | None) -> list[str]:
    """`text` cut into the deltas a model streams: a word each, with its trailing space.

    Example:
        >>> pieces("2 + 2 = 4")
        ['2 ', '+ ', '2 ', '= ', '4']
    """
    return _WORD.findall(text or "")


def fragments(text: str, count: int = 3) -> list[str]:
    """`text` (tool-call JSON) cut anywhere into `count` fragments, as APIs stream it."""
    if not text:
        return []
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]


class Refused(ValueError):
    """A request the real API refuses, and the error it answers with: its HTTP status,
    message, and the fields OpenAI's error bodies add (`param`, `code`, `type`).

    Example:
        >>> raise Refused("Unknown parameter: 'seed'.", param="seed", code="unknown_parameter")
    """

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        param: str | None = None,
        code: str | None = None,
        kind: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param
        self.code = code
        self.kind = kind


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One server-sent event: its data (JSON, or a string sent as is), its name, and
    whether it carries a piece of the reply's text."""

    data: Any
    event: str | None = None
    text: bool = False

    def encode(self) -> bytes:
        data = self.data if isinstance(self.data, str) else msgspec.json.encode(self.data).decode()
        head = f"event: {self.event}\n" if self.event else ""
        return f"{head}data: {data}\n\n".encode()


class WireFormat(ABC):
    """One provider's wire format, as the mock server sees it."""

    #: Short name: "openai", "anthropic", "google".
    name: ClassVar[str]
    #: aiohttp route of the endpoint, e.g. "/v1/chat/completions".
    route: ClassVar[str]
    #: The HTTP status a "stream-error" stands for unless told: the format's overload.
    stream_error_status: ClassVar[int] = 503
    #: The content type of a streamed reply (the bytes of each `StreamEvent.encode()`).
    stream_content_type: ClassVar[str] = "text/event-stream"

    def check_auth(self, method: str, target: str, headers: Mapping[str, str], body: bytes) -> None:
        """Raise `Refused` (401 or 403, in the format's own words) for a request whose
        credentials the platform would not take: `target` is the path and query string as
        sent, `headers` the request's (any case). Default: any credentials do."""
        return

    def error_headers(self, status: int, kind: str | None = None) -> dict[str, str]:
        """Headers of an error answer of `status` (`kind`: a refusal's `Refused.kind`):
        Bedrock names its exception in `x-amzn-ErrorType`. Default: none."""
        return {}

    def more_routes(self) -> list[tuple[str, str, Any]]:
        """Routes the format serves besides its endpoint, as (method, path, aiohttp
        handler): a platform's token endpoint, say. Default: none."""
        return []

    @abstractmethod
    def parse(
        self, body: Any, path: Mapping[str, str], query: Mapping[str, str] | None = None
    ) -> MockRequest:
        """The request body (and path and query parameters) as a `MockRequest`, with
        `stream` set when the request asks for a streamed reply.

        Raise `Refused` for a request the real API refuses, with its status and error
        fields; any other ValueError is answered as a 400 "invalid request".
        """

    @abstractmethod
    def render(self, request: MockRequest, reply: MockReply) -> dict[str, Any]:
        """The provider's response body for `reply`, usage block included."""

    @abstractmethod
    def render_stream(self, request: MockRequest, reply: MockReply) -> list[StreamEvent]:
        """The events of the provider's stream for `reply`: the same reply as `render()`,
        its text in several deltas, up to the format's completion marker."""

    @abstractmethod
    def stream_error(
        self, status: int, message: str, *, sequence: int = 0, request: MockRequest | None = None
    ) -> StreamEvent:
        """The error event the provider sends mid-stream for a failure of `status`, after
        `sequence` events of its reply to `request`."""

    def malformed_event(self) -> StreamEvent:
        """An event whose data is not JSON."""
        return StreamEvent('{"choices": [oops')

    @abstractmethod
    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """The provider's error body."""

    def refusal_body(self, refused: Refused) -> dict[str, Any]:
        """The provider's error body for a request it refuses (`Refused` from `parse()`)."""
        return self.error_body(refused.status, refused.message)

    @abstractmethod
    def quota_error(
        self, model: str, retry_after: float | None
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        """The provider's answer when the account's quota or credit is spent: HTTP
        status, body and headers (`retry_after`: seconds the answer announces, if any)."""

    def rate_limit_headers(self, retry_after: float) -> dict[str, str]:
        """Provider-specific headers of a 429 besides `retry-after`."""
        return {}

    def incomplete_body(self) -> dict[str, Any]:
        """Valid JSON that lacks the fields the API promises."""
        return {"id": "incomplete"}

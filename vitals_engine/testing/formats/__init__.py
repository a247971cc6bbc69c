"""Wire formats the mock server speaks: each turns a request body into a
`MockRequest` and a `MockReply` into the provider's real response body."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from ..brain import MockReply, MockRequest

__all__ = ["WireFormat"]


class WireFormat(ABC):
    """One provider's wire format, as the mock server sees it."""

    #: Short name: "openai", "anthropic", "google".
    name: ClassVar[str]
    #: aiohttp route of the endpoint, e.g. "/v1/chat/completions".
    route: ClassVar[str]

    @abstractmethod
    def parse(self, body: Any, path: Mapping[str, str]) -> MockRequest:
        """The request body (and path parameters) as a `MockRequest`.

        Raise ValueError with a message for a request the real API would
        refuse with 400.
        """

    @abstractmethod
    def render(self, request: MockRequest, reply: MockReply) -> dict[str, Any]:
        """The provider's response body for `reply`, usage block included."""

    @abstractmethod
    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """The provider's error body."""

    def rate_limit_headers(self, retry_after: float) -> dict[str, str]:
        """Provider-specific headers of a 429 besides `retry-after`."""
        return {}

    def incomplete_body(self) -> dict[str, Any]:
        """Valid JSON that lacks the fields the API promises."""
        return {"id": "incomplete"}

"""What every transport shares: which redirects it may follow, and the buffered stream."""

from __future__ import annotations

import pytest

from vitals_engine.transport.base import HttpResponse, Timeouts, Transport, same_origin_redirect

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("status", "location", "expected"),
    [
        (307, "/v2/chat", "https://api.test/v2/chat"),
        (308, "https://api.test:443/v2/chat", "https://api.test:443/v2/chat"),
        (308, "https://other.test/v1/chat", None),
        (308, "http://api.test/v1/chat", None),
        (308, "https://api.test:8443/v1/chat", None),
        (301, "/v2/chat", None),
        (302, "/v2/chat", None),
        (308, "", None),
    ],
)
def test_only_307_and_308_to_the_same_origin_are_followed(status, location, expected):
    """A POST may follow a 307/308 to the same scheme, host and port (default ports equal to
    none given); any other redirect is handed back for the provider to name."""
    url = "https://api.test/v1/chat"
    assert same_origin_redirect(url, status, {"location": location}) == expected


class _Fixed(Transport):
    async def post(self, url, headers, body, timeouts):
        return HttpResponse(200, {"content-type": "text/event-stream"}, b"data: 1\n\n")

    async def aclose(self):
        return None


async def test_a_transport_without_streaming_hands_over_the_whole_body():
    """The base class's stream() reads the response, then hands it over as one chunk."""
    async with _Fixed().stream("http://h/x", {}, b"{}", Timeouts()) as response:
        assert (response.status, response.headers["content-type"]) == (200, "text/event-stream")
        assert [chunk async for chunk in response.chunks()] == [b"data: 1\n\n"]
        assert await response.read() == b""

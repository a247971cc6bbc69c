"""Http11Transport.stream(): the head as soon as it arrives, then the body as it comes
(by length, chunked, to EOF, compressed), timeouts between chunks and over the whole,
cuts, limits, and which connections go back to the pool."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import AsyncIterator

import anyio
import pytest

from tests.netservers import (
    Peer,
    RawServer,
    answer_each,
    chunked,
    drip,
    framed,
    raw_server,
    response,
    wait_for_eof,
)
from tests.test_http11 import (
    HEADERS,
    QUICK,
    no_proxy_env,  # noqa: F401 (a fixture)
    post,
    transport,
)
from vitals_engine import ProviderError, ProviderTimeout, ProviderUnavailable
from vitals_engine.transport import response as reading
from vitals_engine.transport.base import Timeouts
from vitals_engine.transport.http11 import Http11Transport
from vitals_engine.transport.sse import server_sent_events

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_retries", "no_proxy_env")]


class Paced:
    """A server that answers each request with a head, then sends each part of the body
    only when the test says so (`release()`): what the client hands over before that
    was read as it came, not after the whole body."""

    def __init__(self, head: bytes, parts: list[bytes], close: bool = False) -> None:
        self.head = head
        self.parts = parts
        self.close = close  # end the connection after the last part (an EOF-delimited body)
        self._go, self._gate = anyio.create_memory_object_stream[None](100)

    async def release(self) -> None:
        await self._go.send(None)

    async def respond(self, conn: Peer, server: RawServer) -> None:
        while (request := await conn.read_request()) is not None:
            server.requests.append(request.head)
            await conn.send(self.head)
            for part in self.parts:
                await self._gate.receive()
                await conn.send(part)
            if self.close:
                return


async def take(chunks: AsyncIterator[bytes], n: int) -> bytes:
    """At least `n` bytes from `chunks` (chunk boundaries are the network's)."""
    got = b""
    with anyio.fail_after(5):
        while len(got) < n:
            got += await anext(chunks)
    return got


async def rest(chunks: AsyncIterator[bytes]) -> bytes:
    with anyio.fail_after(5):
        return b"".join([chunk async for chunk in chunks])


LENGTH_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 16\r\n\r\n"
CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
EOF_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
PIECES = [b"first", b"-second", b"-end"]


@pytest.mark.parametrize(
    ("head", "parts", "close"),
    [
        (LENGTH_HEAD, PIECES, False),
        (
            CHUNKED_HEAD,
            [b"5\r\nfirst\r\n", b"7;x=1\r\n-second\r\n", b"4\r\n-end\r\n0\r\nX-T: 1\r\n\r\n"],
            False,
        ),
        (EOF_HEAD, PIECES, True),
    ],
    ids=["length", "chunked", "eof"],
)
async def test_body_arrives_piece_by_piece(head, parts, close):
    """The head is handed over before any body byte is sent, and each piece of the body as
    soon as it arrives, for a Content-Length, a chunked and an EOF-delimited body."""
    server = Paced(head, parts, close)
    async with raw_server(server.respond) as raw, transport() as client:
        async with client.stream(raw.url(), HEADERS, b"{}", QUICK) as reply:
            assert reply.status == 200  # no part of the body has been released yet
            chunks = reply.chunks()
            for piece in PIECES:
                await server.release()
                assert await take(chunks, len(piece)) == piece
            assert await rest(chunks) == b""
        # read to its end: kept alive, unless the body ended with the connection
        assert client.open_connections == (0 if close else 1)
    assert raw.connections == 1


async def test_compressed_body_is_decompressed_as_it_arrives():
    """A gzip body flushed piece by piece is handed over decompressed, piece by piece."""
    packer = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    parts = [packer.compress(p) + packer.flush(zlib.Z_SYNC_FLUSH) for p in PIECES]
    parts[-1] += packer.flush()
    head = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
    server = Paced(head, [b"%x\r\n%b\r\n" % (len(p), p) for p in parts[:-1]])
    server.parts.append(b"%x\r\n%b\r\n0\r\n\r\n" % (len(parts[-1]), parts[-1]))
    async with raw_server(server.respond) as raw, transport() as client:
        async with client.stream(raw.url(), HEADERS, b"{}", QUICK) as reply:
            chunks = reply.chunks()
            for piece in PIECES:
                await server.release()
                assert await take(chunks, len(piece)) == piece
            assert await rest(chunks) == b""
        assert client.open_connections == 1
    assert raw.connections == 1


@pytest.mark.parametrize("coding", ["gzip", "deflate", "raw-deflate"])
async def test_whole_compressed_body_cut_anywhere(coding):
    """A compressed body arriving a few bytes at a time decodes the same (deflate's
    wrapping is told from its first two bytes, whatever the cut)."""
    body = b'{"text": "' + b"stream me " * 500 + b'"}'
    if coding == "gzip":
        packed = gzip.compress(body)
    elif coding == "deflate":
        packed = zlib.compress(body)
    else:
        packed = zlib.compress(body, wbits=-15)
    name = "gzip" if coding == "gzip" else "deflate"
    data = response(packed, headers=f"Content-Encoding: {name}\r\n")
    async with (
        raw_server(answer_each(data, piece=1)) as raw,
        transport() as client,
        client.stream(raw.url(), HEADERS, b"{}", QUICK) as reply,
    ):
        assert await reply.read() == body


async def test_error_answer_is_read_whole():
    """An error status comes with its headers first, then read() gives its body."""
    data = response(b'{"error":"overloaded"}', "529 Overloaded", "Retry-After: 3\r\n")
    async with raw_server(answer_each(data)) as raw, transport() as client:
        async with client.stream(raw.url(), HEADERS, b"{}", QUICK) as reply:
            assert (reply.status, reply.headers["retry-after"]) == (529, "3")
            assert await reply.read() == b'{"error":"overloaded"}'
        assert client.open_connections == 1


async def test_server_sent_events_through_a_stream():
    """What the providers do: SSE parsed from the chunks as they come."""
    events = b"data: one\n\nevent: done\ndata: two\n\n"
    data = response(chunked(events, 7), headers="Transfer-Encoding: chunked\r\n", length=False)
    async with (
        raw_server(answer_each(data, piece=5)) as raw,
        transport() as client,
        client.stream(raw.url(), HEADERS, b"{}", QUICK) as reply,
    ):
        got = [(e.event, e.data) async for e in server_sent_events(reply.chunks())]
    assert got == [("message", "one"), ("done", "two")]


# -- which connections go back ------------------------------------------------------------------


async def test_stream_read_to_its_end_keeps_the_connection():
    """Streams and posts read to their end share one keep-alive connection."""
    data = response(chunked(b"x" * 100, 30), headers="Transfer-Encoding: chunked\r\n", length=False)
    async with raw_server(answer_each(data)) as raw, transport() as client:
        for _ in range(3):
            async with client.stream(raw.url(), HEADERS, b"{}", QUICK) as reply:
                assert await reply.read() == b"x" * 100
            assert (await post(client, raw.url())).body == b"x" * 100
        assert client.open_connections == 1
    assert raw.connections == 1


async def test_stream_left_before_its_end_closes_the_connection():
    """A stream left while its body is still coming closes its connection; the next
    request opens another."""
    server = Paced(LENGTH_HEAD, [b"first", b"-second-end"])
    async with raw_server(server.respond) as raw, transport() as client:
        async with client.stream(raw.url(), HEADERS, b"{}", QUICK) as reply:
            await server.release()
            assert await take(reply.chunks(), 5) == b"first"
        assert client.open_connections == 0
        await server.release()  # the rest goes nowhere, then the server finds it closed
        with anyio.fail_after(5):
            await raw.ended[0].wait()
        async with client.stream(raw.url(), HEADERS, b"{}", QUICK) as reply:
            await server.release()
            await server.release()
            assert await reply.read() == b"first-second-end"
        assert client.open_connections == 1
    assert raw.connections == 2


async def test_stream_left_with_the_rest_of_its_body_already_read_keeps_the_connection():
    """A stream left unread whose whole body came with its head: nothing is left on the
    wire, so the connection is kept."""
    async with raw_server(answer_each(response(b'{"small":1}'))) as raw, transport() as client:
        for _ in range(2):
            async with client.stream(raw.url(), HEADERS, b"{}", QUICK) as reply:
                assert reply.status == 200
        assert client.open_connections == 1
    assert raw.connections == 1


async def test_error_in_the_block_closes_the_connection():
    """An exception raised inside the block closes the connection and goes on up."""
    server = Paced(LENGTH_HEAD, [b"first", b"-second-end"])
    async with raw_server(server.respond) as raw, transport() as client:
        with pytest.raises(RuntimeError, match="caller's own"):
            async with client.stream(raw.url(), HEADERS, b"{}", QUICK):
                raise RuntimeError("the caller's own")
        assert client.open_connections == 0
    assert raw.connections == 1


async def test_a_stream_holds_its_pool_slot_until_left():
    """With pool_size=1, a request waits while a stream is open, then reuses its
    connection."""
    server = Paced(LENGTH_HEAD, [b"first-second-", b"end"])
    results: list[int] = []

    async def post_one(client: Http11Transport, url: str) -> None:
        results.append((await client.post(url, HEADERS, b"{}", QUICK)).status)

    async with raw_server(server.respond) as raw, transport(pool_size=1) as client:
        async with anyio.create_task_group() as tg:
            async with client.stream(raw.url(), HEADERS, b"{}", QUICK) as reply:
                tg.start_soon(post_one, client, raw.url())
                await anyio.wait_all_tasks_blocked()
                assert (len(raw.requests), client.open_connections) == (1, 1)  # it waits
                await server.release()
                await server.release()
                assert await reply.read() == b"first-second-end"
            await server.release()
            await server.release()
        assert results == [200]
        assert client.open_connections == 1
    assert raw.connections == 1


# -- failures --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "sent"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", b"0123456789"),
        (CHUNKED_HEAD, b"a\r\n0123456789\r\n20\r\nabc"),
    ],
    ids=["length", "chunked"],
)
async def test_body_cut_short_raises_at_the_cut(head, sent):
    """A body that ends before its length (or its last chunk) hands over what came, then
    raises ProviderUnavailable."""

    async def cut(conn: Peer, server: RawServer) -> None:
        assert await conn.read_request() is not None
        await conn.send(head + sent)

    async with raw_server(cut) as raw, transport() as client:
        async with client.stream(raw.url(), HEADERS, b"{}", QUICK) as reply:
            chunks = reply.chunks()
            assert (await take(chunks, 10))[:10] == b"0123456789"
            with pytest.raises(ProviderUnavailable, match="before the response was complete"):
                await rest(chunks)
        assert client.open_connections == 0


async def test_read_timeout_applies_between_chunks():
    """A stream whose next chunk does not come within the read timeout raises
    ProviderTimeout, after handing over what came."""
    server = Paced(LENGTH_HEAD, [b"first", b"-second-end"])
    async with raw_server(server.respond) as raw, transport() as client:
        async with client.stream(
            raw.url(), HEADERS, b"{}", Timeouts(connect=5.0, read=0.3, total=None)
        ) as reply:
            chunks = reply.chunks()
            await server.release()
            assert await take(chunks, 5) == b"first"
            with pytest.raises(ProviderTimeout, match=r"read timeout of 0\.3 s"):
                await anext(chunks)
        assert client.open_connections == 0


async def test_total_timeout_bounds_the_whole_stream():
    """A stream dripping bytes within the read timeout ends at the total deadline."""
    async with raw_server(drip()) as raw, transport() as client:
        async with client.stream(
            raw.url(), HEADERS, b"{}", Timeouts(connect=5.0, read=2.0, total=0.5)
        ) as reply:
            assert reply.status == 200
            with pytest.raises(ProviderTimeout, match=r"total timeout of 0\.5 s"):
                await rest(reply.chunks())
        assert client.open_connections == 0


async def test_no_head_in_time_is_a_timeout_on_entering():
    """A server that never answers: entering the block raises ProviderTimeout."""
    async with raw_server(wait_for_eof) as raw, transport() as client:
        with pytest.raises(ProviderTimeout, match=r"read timeout of 0\.2 s"):
            async with client.stream(raw.url(), HEADERS, b"{}", Timeouts(read=0.2)):
                pytest.fail("no head came")
        assert client.open_connections == 0


@pytest.mark.parametrize("framing", ["chunked", "eof", "gzip"])
async def test_oversized_streamed_bodies_are_refused(monkeypatch, framing):
    """Chunked, EOF-delimited and decompressed streamed bodies beyond the body limit raise
    ProviderUnavailable (a compressed one never inflates past the limit in memory)."""
    monkeypatch.setattr(reading, "MAX_BODY_BYTES", 1000)
    async with raw_server(answer_each(framed(b"z" * 5000, framing))) as raw, transport() as client:
        async with client.stream(raw.url(), HEADERS, b"{}", QUICK) as reply:
            with pytest.raises(ProviderError, match="larger than the 0 MiB limit"):
                await rest(reply.chunks())
        assert client.open_connections == 0


async def test_truncated_compressed_stream_is_unavailable():
    """A gzip body whose compressed stream stops short raises at its end."""
    packed = gzip.compress(b"x" * 1000)[:-8]
    data = response(packed, headers="Content-Encoding: gzip\r\n")
    async with (
        raw_server(answer_each(data)) as raw,
        transport() as client,
        client.stream(raw.url(), HEADERS, b"{}", QUICK) as reply,
    ):
        with pytest.raises(ProviderUnavailable, match="gzip body is truncated"):
            await rest(reply.chunks())


async def test_same_origin_redirect_is_followed_by_a_stream():
    """A stream follows a 307 to the same origin, with the same body."""

    async def redirect_once(conn: Peer, server: RawServer) -> None:
        while (request := await conn.read_request()) is not None:
            server.requests.append(request.head + b"\r\n\r\n" + request.body)
            if len(server.requests) == 1:
                await conn.send(response(b"moved", "307 Temporary Redirect", "Location: /v2\r\n"))
            else:
                await conn.send(response(b"data: 1\n\n"))

    async with (
        raw_server(redirect_once) as raw,
        transport() as client,
        client.stream(raw.url(), HEADERS, b'{"q":1}', QUICK) as reply,
    ):
        assert (reply.status, await reply.read()) == (200, b"data: 1\n\n")
    assert raw.requests[1].startswith(b"POST /v2 HTTP/1.1\r\n")
    assert raw.requests[1].endswith(b'{"q":1}')


async def test_stream_on_a_reused_connection_closed_after_sending_is_not_resent():
    """The resend rule holds for streams too: a reused connection closed after the request
    went out raises on entering, and the server saw the request once."""

    async def answer_then_hang_up(conn: Peer, server: RawServer) -> None:
        while (request := await conn.read_request()) is not None:
            server.requests.append(request.head)
            if len(server.requests) == 2:
                return
            await conn.send(response())

    async with raw_server(answer_then_hang_up) as raw, transport() as client:
        await post(client, raw.url())
        with pytest.raises(ProviderUnavailable, match="after the request was sent"):
            async with client.stream(raw.url(), HEADERS, b"{}", QUICK):
                pytest.fail("no answer came")
    assert (len(raw.requests), raw.connections) == (2, 1)

"""Http11Transport: our HTTP/1.1 client, against the mock server and tiny raw servers, on
asyncio and trio."""

from __future__ import annotations

import gzip
import json
import socket
import ssl
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress

import anyio
import anyio.abc
import pytest
from anyio.abc import SocketAttribute
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.tls import TLSListener

import vitals_engine as ve
from vitals_engine import ProviderTimeout, ProviderUnavailable
from vitals_engine.testing import MockServer
from vitals_engine.transport import http11
from vitals_engine.transport.base import Timeouts
from vitals_engine.transport.http11 import Http11Transport
from vitals_engine.transport.pool import TransportPool

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_retries")]

BODY = json.dumps({"model": "gpt-test", "messages": [{"role": "user", "content": "What's 2+2?"}]})
HEADERS = {"content-type": "application/json", "authorization": "Bearer k"}
QUICK = Timeouts(connect=5.0, read=5.0)


@asynccontextmanager
async def transport(**kw) -> AsyncIterator[Http11Transport]:
    client = Http11Transport(**kw)
    try:
        yield client
    finally:
        await client.aclose()


async def post(client: Http11Transport, url: str, timeouts: Timeouts = QUICK, body=BODY):
    return await client.post(url, HEADERS, body.encode(), timeouts)


def chat_url(server: MockServer) -> str:
    return server.base_url() + "/chat/completions"


# -- tiny raw servers -------------------------------------------------------------------------


class RawConnection:
    """The server side of one connection: read requests, send bytes."""

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        self.reader = BufferedByteReceiveStream(stream)

    async def read_request(self) -> tuple[bytes, bytes] | None:
        """The next request's head and body, or None once the client closed the connection."""
        try:
            head = await self.reader.receive_until(b"\r\n\r\n", 1 << 20)
        except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError):
            return None
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return head, await self.reader.receive_exactly(length)

    async def send(self, data: bytes, piece: int = 0) -> None:
        """Send `data`, in pieces of `piece` bytes when asked (0: at once)."""
        if not piece:
            await self.stream.send(data)
            return
        for start in range(0, len(data), piece):
            await self.stream.send(data[start : start + piece])


class RawServer:
    """A TCP (or TLS) server on 127.0.0.1 that runs `respond` for each connection."""

    def __init__(self, port: int, tls: bool) -> None:
        self.port = port
        self.tls = tls
        self.connections = 0
        self.requests: list[bytes] = []  # request heads, in order
        self.ended: list[anyio.Event] = []  # per connection: set once its handler finished

    def url(self, path: str = "/v1/chat/completions", host: str = "127.0.0.1") -> str:
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}{path}"


Respond = Callable[[RawConnection, RawServer], Awaitable[None]]


@asynccontextmanager
async def raw_server(
    respond: Respond, tls: ssl.SSLContext | None = None
) -> AsyncIterator[RawServer]:
    listener: anyio.abc.Listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    raw = RawServer(listener.extra(SocketAttribute.local_port), tls is not None)
    if tls is not None:
        listener = TLSListener(listener, tls, standard_compatible=False)

    async def handle(stream: anyio.abc.ByteStream) -> None:
        raw.connections += 1
        ended = anyio.Event()
        raw.ended.append(ended)
        try:
            async with stream:
                with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await respond(RawConnection(stream), raw)
        finally:
            ended.set()

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        yield raw
        tg.cancel_scope.cancel()


def response(
    body: bytes = b'{"ok":true}', status: str = "200 OK", headers: str = "", length: bool = True
) -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{headers}"
    if length:
        head += f"Content-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def answer_each(data: bytes, piece: int = 0) -> Respond:
    """Answer every request on a connection with `data` (sent in `piece`-byte pieces)."""

    async def respond(conn: RawConnection, server: RawServer) -> None:
        while (request := await conn.read_request()) is not None:
            server.requests.append(request[0])
            await conn.send(data, piece)

    return respond


def answer_once(data: bytes) -> Respond:
    """Answer one request with `data`, then close the connection."""

    async def respond(conn: RawConnection, server: RawServer) -> None:
        request = await conn.read_request()
        if request is not None:
            server.requests.append(request[0])
            await conn.send(data)

    return respond


@asynccontextmanager
async def counting_proxy(port: int) -> AsyncIterator[RawServer]:
    """A TCP proxy to 127.0.0.1:`port` that counts the connections made through it."""

    async def pump(source: anyio.abc.ByteStream, sink: anyio.abc.ByteStream) -> None:
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            async for chunk in source:
                await sink.send(chunk)

    async def relay(conn: RawConnection, server: RawServer) -> None:
        upstream = await anyio.connect_tcp("127.0.0.1", port)
        async with upstream, anyio.create_task_group() as tg:
            tg.start_soon(pump, upstream, conn.stream)
            await pump(conn.stream, upstream)
            tg.cancel_scope.cancel()

    async with raw_server(relay) as proxy:
        yield proxy


# -- against the mock server ------------------------------------------------------------------


async def test_chat_round_trip_through_http11(server, monkeypatch):
    """A chat whose run pool hands out Http11Transport gets the mock server's answers."""
    made: list[Http11Transport] = []

    def get(self: TransportPool, base_url: str, client=None) -> Http11Transport:
        key = (base_url, 0)
        if key not in self._transports:
            made.append(Http11Transport(self.pool_size))
            self._transports[key] = made[-1]
        return made[-1]

    monkeypatch.setattr(TransportPool, "get", get)
    chat = ve.chat_openai("gpt-test", base_url=server.base_url(), api_key="k")
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    assert await chat.chat_async("What's 1+3?") == "1 + 3 = 4"
    assert len(made) == 2  # a chat outside a run opens a pool per call
    assert all(t.open_connections == 0 for t in made)  # ... and closes it afterwards
    assert server.log[-1].headers["Authorization"] == "Bearer k"


async def test_post_returns_status_lowercased_headers_and_body(server):
    """post() returns the status, the headers with lower-case names, and the raw JSON body."""
    async with transport() as client:
        reply = await post(client, chat_url(server))
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("application/json")
    assert reply.headers["x-request-id"] == "req_1"
    assert json.loads(reply.body)["choices"][0]["message"]["content"] == "2 + 2 = 4"


async def test_sequential_requests_reuse_one_keep_alive_connection(server):
    """Requests one after another all travel over the same keep-alive connection."""
    async with counting_proxy(server.port) as proxy, transport() as client:
        url = proxy.url()
        for _ in range(20):
            assert (await post(client, url)).status == 200
        assert client.open_connections == 1
    assert proxy.connections == 1
    assert server.requests == 20


async def test_concurrency_never_opens_more_than_pool_size_connections(server):
    """200 concurrent requests with pool_size 50 open exactly 50 connections and all succeed."""
    server.latency = 0.05
    statuses: list[int] = []

    async def one(client: Http11Transport, url: str) -> None:
        statuses.append((await post(client, url)).status)

    async with counting_proxy(server.port) as proxy, transport(pool_size=50) as client:
        async with anyio.create_task_group() as tg:
            for _ in range(200):
                tg.start_soon(one, client, proxy.url())
        assert client.open_connections == 50
    assert statuses == [200] * 200
    assert proxy.connections == 50
    assert server.peak_in_flight <= 50


async def test_dropped_connection_is_unavailable(server):
    """A server that drops a fresh connection mid-request raises ProviderUnavailable."""
    server.fail("drop")
    async with transport() as client:
        with pytest.raises(ProviderUnavailable, match=r"connection to http://127\.0\.0\.1:\d+/"):
            await post(client, chat_url(server))
        assert client.open_connections == 0
        assert (await post(client, chat_url(server))).status == 200


async def test_drop_on_reused_connection_is_retried_once_only(server):
    """A drop on a reused connection looks like an idle close: one retry, then the error."""
    async with transport() as client:
        await post(client, chat_url(server))
        server.fail("drop", times=2)
        with pytest.raises(ProviderUnavailable, match="failed"):
            await post(client, chat_url(server))
    assert server.requests == 3


async def test_hang_hits_the_read_timeout(server):
    """A server that never answers raises ProviderTimeout after the read timeout."""
    server.fail("hang")
    async with transport() as client:
        with pytest.raises(
            ProviderTimeout, match=r"no answer from .* in time \(read timeout of 0\.2 s\)"
        ):
            await post(client, chat_url(server), Timeouts(connect=5.0, read=0.2))
        assert client.open_connections == 0


async def test_malformed_json_is_just_a_body(server):
    """The transport hands over an invalid JSON body as is; judging it is the provider's job."""
    server.fail("malformed")
    async with transport() as client:
        reply = await post(client, chat_url(server))
    assert (reply.status, reply.body) == (200, b'{"choices": [oops')


async def test_error_statuses_are_responses_not_exceptions(server):
    """A 429 comes back as a response with its Retry-After header, and the connection stays."""
    server.fail("429", retry_after=2)
    async with counting_proxy(server.port) as proxy, transport() as client:
        reply = await post(client, proxy.url())
        assert (reply.status, reply.headers["retry-after"]) == (429, "2")
        assert (await post(client, proxy.url())).status == 200
    assert proxy.connections == 1


async def test_connection_refused_is_unavailable():
    """Nothing listening on the port raises ProviderUnavailable("cannot connect to ...")."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with transport() as client:
        with pytest.raises(
            ProviderUnavailable, match=rf"cannot connect to http://127\.0\.0\.1:{port}"
        ):
            await post(client, f"http://127.0.0.1:{port}/v1/chat/completions")


# -- raw servers: framing -----------------------------------------------------------------------


async def test_request_is_a_well_formed_keep_alive_post():
    """The request carries the path and query, Host, Content-Length, our headers and
    Accept-Encoding, and no Connection: close."""
    async with raw_server(answer_each(response())) as raw, transport() as client:
        headers = {**HEADERS, "Content-Length": "1", "X-Extra": "yes"}
        await client.post(raw.url("/v1/chat?x=1"), headers, BODY.encode(), QUICK)
    head = raw.requests[0].decode()
    lines = head.split("\r\n")
    assert lines[0] == "POST /v1/chat?x=1 HTTP/1.1"
    fields = [line.lower() for line in lines[1:] if line]
    assert f"host: 127.0.0.1:{raw.port}" in fields
    assert f"content-length: {len(BODY)}" in fields
    assert "accept-encoding: gzip, deflate" in fields
    assert {"content-type: application/json", "authorization: bearer k", "x-extra: yes"} <= set(
        fields
    )
    assert not [f for f in fields if f.startswith("connection")]
    assert len([f for f in fields if f.startswith("content-length")]) == 1


async def test_header_with_line_break_is_refused():
    """A header value holding CR/LF (request splitting) is refused before anything is sent."""
    async with raw_server(answer_each(response())) as raw, transport() as client:
        with pytest.raises(ValueError, match="line break"):
            await client.post(raw.url(), {"x-evil": "a\r\nHost: other"}, b"{}", QUICK)
    assert raw.connections == 0


async def test_idle_connection_closed_by_server_is_replaced_transparently():
    """A keep-alive connection the server closed while idle is retried on a fresh one."""
    async with raw_server(answer_once(response())) as raw, transport() as client:
        assert (await post(client, raw.url())).status == 200
        with anyio.fail_after(5):
            await raw.ended[0].wait()  # the server has closed the idle connection
        assert client.open_connections == 1  # ... which the client has not noticed yet
        assert (await post(client, raw.url())).status == 200
        assert (raw.connections, len(raw.requests)) == (2, 2)


async def test_connection_close_header_is_honoured():
    """A response with Connection: close is not pooled; the next request opens a new one."""
    data = response(headers="Connection: close\r\n")
    async with raw_server(answer_each(data)) as raw, transport() as client:
        assert (await post(client, raw.url())).status == 200
        assert client.open_connections == 0
        assert (await post(client, raw.url())).status == 200
    assert (raw.connections, len(raw.requests)) == (2, 2)


async def test_http10_response_closes_unless_keep_alive():
    """An HTTP/1.0 response without keep-alive ends the connection's use."""
    data = response().replace(b"HTTP/1.1", b"HTTP/1.0", 1)
    async with raw_server(answer_each(data)) as raw, transport() as client:
        assert (await post(client, raw.url())).body == b'{"ok":true}'
        assert client.open_connections == 0


async def test_interim_100_continue_is_skipped():
    """1xx interim responses before the final one are read past."""
    data = (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + response()
    )
    async with raw_server(answer_each(data, piece=7)) as raw, transport() as client:
        reply = await post(client, raw.url())
        assert (reply.status, reply.body, "link" in reply.headers) == (200, b'{"ok":true}', False)
        assert (await post(client, raw.url())).status == 200
    assert raw.connections == 1


def chunked(body: bytes, size: int = 5, trailers: str = "") -> bytes:
    out = b""
    for start in range(0, len(body), size):
        piece = body[start : start + size]
        out += b"%x;ext=1\r\n%b\r\n" % (len(piece), piece)
    return out + b"0\r\n" + trailers.encode() + b"\r\n"


@pytest.mark.parametrize("piece", [0, 1, 3])
@pytest.mark.parametrize("trailers", ["", "X-Checksum: abc\r\nX-More: 1\r\n"])
async def test_chunked_body_with_trailers_is_read_whole(piece, trailers):
    """A chunked body (split anywhere, with extensions and trailers) is joined, and the
    connection stays usable."""
    body = json.dumps({"text": "x" * 300}).encode()
    data = response(
        chunked(body, 37, trailers), headers="Transfer-Encoding: chunked\r\n", length=False
    )
    async with raw_server(answer_each(data, piece)) as raw, transport() as client:
        for _ in range(2):
            reply = await post(client, raw.url())
            assert reply.body == body
            assert reply.headers["transfer-encoding"] == "chunked"
    assert raw.connections == 1


@pytest.mark.parametrize(
    ("coding", "encode"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda b: zlib.compress(b, wbits=-15)),  # raw deflate, as some servers send
    ],
)
@pytest.mark.parametrize("framing", ["length", "chunked"])
async def test_compressed_bodies_are_decompressed(coding, encode, framing):
    """gzip and deflate bodies (by length or chunked) come back decompressed."""
    body = json.dumps({"text": "compress me " * 100}).encode()
    packed = encode(body)
    if framing == "chunked":
        data = response(
            chunked(packed, 50),
            headers=f"Content-Encoding: {coding}\r\nTransfer-Encoding: chunked\r\n",
            length=False,
        )
    else:
        data = response(packed, headers=f"Content-Encoding: {coding}\r\n")
    async with raw_server(answer_each(data, piece=64)) as raw, transport() as client:
        assert (await post(client, raw.url())).body == body


async def test_body_without_length_is_read_to_eof():
    """A response with neither Content-Length nor chunking is read until the server closes."""
    body = b'{"streamed": "' + b"y" * 100_000 + b'"}'
    async with raw_server(answer_once(response(body, length=False))) as raw, transport() as client:
        reply = await post(client, raw.url())
        assert reply.body == body
        assert client.open_connections == 0


async def test_repeated_headers_are_joined():
    """Repeated header fields arrive as one value joined with ", "."""
    data = response(headers="Vary: a\r\nX-Multi: 1\r\nvary: b\r\nX-MULTI:  2 \r\n")
    async with raw_server(answer_each(data)) as raw, transport() as client:
        reply = await post(client, raw.url())
    assert (reply.headers["vary"], reply.headers["x-multi"]) == ("a, b", "1, 2")


# -- raw servers: failures and limits ---------------------------------------------------------


async def test_oversized_headers_are_refused():
    """A header block over 64 KiB raises ProviderUnavailable naming the limit."""
    data = response(headers=f"X-Big: {'a' * 70_000}\r\n")
    async with raw_server(answer_each(data)) as raw, transport() as client:
        with pytest.raises(ProviderUnavailable, match="headers are larger than the 64 KiB limit"):
            await post(client, raw.url())
        assert client.open_connections == 0


async def test_oversized_content_length_is_refused():
    """A Content-Length over 256 MiB is refused before its body is read."""
    data = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n{" % (300 << 20)
    async with raw_server(answer_each(data)) as raw, transport() as client:
        with pytest.raises(ProviderUnavailable, match="larger than the 256 MiB limit"):
            await post(client, raw.url())


@pytest.mark.parametrize("framing", ["chunked", "eof", "gzip"])
async def test_oversized_bodies_are_refused(monkeypatch, framing):
    """Chunked, read-to-EOF and decompressed bodies over the body limit are refused."""
    monkeypatch.setattr(http11, "MAX_BODY_BYTES", 1000)
    body = b"z" * 5000
    if framing == "chunked":
        data = response(chunked(body, 600), headers="Transfer-Encoding: chunked\r\n", length=False)
    elif framing == "eof":
        data = response(body, length=False)
    else:
        data = response(gzip.compress(body), headers="Content-Encoding: gzip\r\n")
    async with raw_server(answer_once(data)) as raw, transport() as client:
        with pytest.raises(ProviderUnavailable, match="larger than the 0 MiB limit"):
            await post(client, raw.url())


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"HTTP/2 200 OK\r\n\r\n", "malformed status line"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "malformed header line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\n{}", "conflicting Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "malformed chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "unsupported Transfer-Encoding"),
        (b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc", "gzip"),
    ],
)
async def test_protocol_violations_are_unavailable(data, why):
    """Responses that break HTTP/1.1 raise ProviderUnavailable saying what was wrong."""
    async with raw_server(answer_each(data)) as raw, transport() as client:
        with pytest.raises(ProviderUnavailable, match=f"connection to .* failed: .*{why}"):
            await post(client, raw.url())
        assert client.open_connections == 0


async def test_server_closing_mid_body_is_unavailable():
    """A connection that ends before Content-Length bytes arrived raises ProviderUnavailable."""
    data = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"
    async with raw_server(answer_once(data)) as raw, transport() as client:
        with pytest.raises(ProviderUnavailable, match="before the response was complete"):
            await post(client, raw.url())


async def test_fresh_connection_closed_without_answer_is_not_retried():
    """A fresh connection closed before any response byte fails at once, without a retry."""

    async def hang_up(conn: RawConnection, server: RawServer) -> None:
        await conn.read_request()

    async with raw_server(hang_up) as raw, transport() as client:
        with pytest.raises(ProviderUnavailable, match="closed the connection"):
            await post(client, raw.url())
    assert raw.connections == 1


# -- cancellation and closing ------------------------------------------------------------------


async def wait_for_eof(conn: RawConnection, server: RawServer) -> None:
    """Read one request, never answer it, and return once the client closes."""
    request = await conn.read_request()
    assert request is not None
    server.requests.append(request[0])
    assert await conn.read_request() is None


async def test_cancelled_request_closes_its_connection():
    """Cancelling a request in flight closes its connection instead of pooling it half-read."""
    async with raw_server(wait_for_eof) as raw, transport() as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(post, client, raw.url())
            await anyio.wait_all_tasks_blocked()
            while not raw.requests:  # the request reached the server (tasks all blocked again)
                await anyio.wait_all_tasks_blocked()
            tg.cancel_scope.cancel()
        assert client.open_connections == 0
        with anyio.fail_after(5):
            await raw.ended[0].wait()  # the server saw the connection close


async def test_aclose_closes_idle_and_busy_connections():
    """aclose() closes every connection, idle or in use; a request in flight then fails."""
    errors: list[BaseException] = []

    async def stuck(client: Http11Transport, url: str) -> None:
        try:
            await post(client, url)
        except ProviderUnavailable as exc:
            errors.append(exc)

    async with raw_server(answer_each(response())) as answering, raw_server(wait_for_eof) as silent:
        client = Http11Transport()
        await post(client, answering.url())  # one idle connection
        async with anyio.create_task_group() as tg:
            tg.start_soon(stuck, client, silent.url())
            tg.start_soon(stuck, client, silent.url())
            while len(silent.requests) < 2:
                await anyio.wait_all_tasks_blocked()
            assert client.open_connections == 3
            await client.aclose()
        assert client.open_connections == 0
        assert len(errors) == 2
        assert all("the transport was closed" in str(e) for e in errors)
        with anyio.fail_after(5):
            for ended in answering.ended + silent.ended:
                await ended.wait()  # each server saw its connections close
        with pytest.raises(RuntimeError, match="closed"):
            await post(client, answering.url())


# -- TLS --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls():
    """A throwaway CA, a server context with a certificate for localhost, and a client
    context that trusts the CA."""
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    return server_context, client_context


async def test_https_round_trip_with_sni_and_keep_alive(tls):
    """An https request verifies the server against the given CA, sends SNI, and reuses
    the TLS connection."""
    server_context, client_context = tls
    names: list[str | None] = []
    server_context.sni_callback = lambda sock, name, ctx: names.append(name)
    try:
        async with (
            raw_server(answer_each(response(b'{"tls":1}')), tls=server_context) as raw,
            transport(ssl_context=client_context) as client,
        ):
            for _ in range(3):
                assert (await post(client, raw.url(host="localhost"))).body == b'{"tls":1}'
    finally:
        server_context.sni_callback = None
    assert raw.connections == 1
    assert names == ["localhost"]
    assert raw.requests[0].split(b"\r\n")[1].lower() == f"host: localhost:{raw.port}".encode()


async def test_https_with_untrusted_certificate_cannot_connect(tls):
    """The default context rejects a certificate from an unknown CA: cannot connect."""
    server_context, _ = tls
    async with (
        raw_server(answer_each(response()), tls=server_context) as raw,
        transport() as client,
    ):
        with pytest.raises(ProviderUnavailable, match=r"cannot connect to .*CERTIFICATE_VERIFY"):
            await post(client, raw.url(host="localhost"))

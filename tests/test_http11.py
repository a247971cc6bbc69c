"""Http11Transport: our HTTP/1.1 client, against the mock server and tiny raw servers, on
asyncio and trio."""

from __future__ import annotations

import gzip
import json
import os
import select
import socket
import ssl
import struct
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from anyio.abc import SocketAttribute

import vitals_engine as ve
from tests.addresses import refusing_port
from tests.netservers import (
    Peer,
    RawServer,
    Respond,
    answer_each,
    answer_once,
    chunked,
    counting_proxy,
    drip,
    framed,
    raw_server,
    response,
    server_names,
    wait_for_eof,
)
from vitals_engine import ProviderError, ProviderTimeout, ProviderUnavailable
from vitals_engine.testing import MockServer
from vitals_engine.transport import response as reading
from vitals_engine.transport.base import Timeouts
from vitals_engine.transport.http11 import Http11Transport
from vitals_engine.transport.pool import TransportPool

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_retries", "no_proxy_env")]

BODY = json.dumps({"model": "gpt-test", "messages": [{"role": "user", "content": "What's 2+2?"}]})
HEADERS = {"content-type": "application/json", "authorization": "Bearer k"}
QUICK = Timeouts(connect=5.0, read=5.0)


@pytest.fixture
def no_proxy_env(monkeypatch):
    """Requests go direct, whatever proxies the machine's environment names."""
    for name in list(os.environ):
        if name.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
            monkeypatch.delenv(name)


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


# -- raw servers (`tests/netservers.py`): what only these tests need ------------------------


def wait_until_idle_readable(client: Http11Transport) -> None:
    """Block until something (bytes, EOF) has reached every idle connection of `client`:
    what the server sent is then there for the client's check before reuse to find."""
    for pool in client._pool.hosts.values():
        for conn in pool.idle:
            assert select.select([conn.sock], [], [], 5)[0], "nothing reached the client"


def reset_on_close(conn: Peer) -> None:
    """Make closing this server connection send a reset (RST) instead of a FIN."""
    raw = conn.stream.extra(SocketAttribute.raw_socket)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


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


async def test_drop_on_reused_connection_is_not_resent(server):
    """A reused connection dropped after the request went out is an error, not a secret
    second request: the server may have acted on it."""
    async with transport() as client:
        await post(client, chat_url(server))
        server.fail("drop", times=2)
        with pytest.raises(ProviderUnavailable, match="after the request was sent"):
            await post(client, chat_url(server))
    assert server.requests == 2


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
    with refusing_port() as port:
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
    """A keep-alive connection the server closed while idle is found closed before reuse
    and replaced by a fresh one; the request goes out once."""
    async with raw_server(answer_once(response())) as raw, transport() as client:
        assert (await post(client, raw.url())).status == 200
        with anyio.fail_after(5):
            await raw.ended[0].wait()  # the server has closed the idle connection
        wait_until_idle_readable(client)
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
        with pytest.raises(ProviderError, match="larger than the 256 MiB limit"):
            await post(client, raw.url())


@pytest.mark.parametrize("framing", ["chunked", "eof", "gzip"])
async def test_oversized_bodies_are_refused(monkeypatch, framing):
    """Chunked, read-to-EOF and decompressed bodies over the body limit are refused."""
    monkeypatch.setattr(reading, "MAX_BODY_BYTES", 1000)
    async with raw_server(answer_once(framed(b"z" * 5000, framing))) as raw, transport() as client:
        with pytest.raises(ProviderError, match="larger than the 0 MiB limit"):
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

    async def hang_up(conn: Peer, server: RawServer) -> None:
        await conn.read_request()

    async with raw_server(hang_up) as raw, transport() as client:
        with pytest.raises(
            ProviderUnavailable,
            match="closed the connection after the request was sent and before any answer",
        ):
            await post(client, raw.url())
    assert raw.connections == 1


# -- cancellation and closing ------------------------------------------------------------------


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
    with server_names(server_context) as names:
        async with (
            raw_server(answer_each(response(b'{"tls":1}')), tls=server_context) as raw,
            transport(ssl_context=client_context) as client,
        ):
            for _ in range(3):
                assert (await post(client, raw.url(host="localhost"))).body == b'{"tls":1}'
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


# -- a request is never sent twice in secret ---------------------------------------------------


async def test_reused_connection_closed_after_the_request_is_not_resent():
    """A reused connection that the server closes after reading a whole request, before
    answering, raises ProviderUnavailable; the server sees that request once."""

    async def answer_then_hang_up(conn: Peer, server: RawServer) -> None:
        request = await conn.read_request()
        assert request is not None
        server.requests.append(request.head)
        if server.connections == 1:  # the first connection: answer, then read and hang up
            await conn.send(response())
            request = await conn.read_request()
            assert request is not None
            server.requests.append(request.head)
        else:  # any other connection would be a copy sent in secret: answer it
            await conn.send(response())

    async with raw_server(answer_then_hang_up) as raw, transport() as client:
        assert (await post(client, raw.url())).status == 200
        with pytest.raises(
            ProviderUnavailable,
            match=r"closed the connection after the request was sent and before any answer\. "
            "It was not sent again",
        ):
            await post(client, raw.url(), body='{"second": true}')
        assert client.open_connections == 0
    assert len(raw.requests) == 2
    assert raw.connections == 1


async def test_reused_connection_reset_before_answer_is_not_resent():
    """A reset instead of a close, after the request was read, is not resent either."""

    async def answer_then_reset(conn: Peer, server: RawServer) -> None:
        while (request := await conn.read_request()) is not None:
            server.requests.append(request.head)
            if len(server.requests) == 2:
                reset_on_close(conn)
                return
            await conn.send(response())

    async with raw_server(answer_then_reset) as raw, transport() as client:
        assert (await post(client, raw.url())).status == 200
        with pytest.raises(ProviderUnavailable, match="after the request was sent"):
            await post(client, raw.url())
    assert (len(raw.requests), raw.connections) == (2, 1)


async def test_send_failing_on_reused_connection_is_resent_once_on_a_fresh_one(anyio_backend):
    """When sending on a reused connection fails (reset between the check before reuse and
    the send), the server never had the request: it goes once more on a fresh connection.
    Never two copies: trio reports the failed send, so the request is resent; asyncio's
    transport swallows it and reports a broken connection after the send, so the request
    is not resent and the caller gets ProviderUnavailable."""

    async def answer_then_reset(conn: Peer, server: RawServer) -> None:
        request = await conn.read_request()
        assert request is not None
        server.requests.append(request.head)
        await conn.send(response())
        if server.connections == 1:
            reset_on_close(conn)  # the idle connection dies with a reset

    async with raw_server(answer_then_reset) as raw, transport() as client:
        assert (await post(client, raw.url())).status == 200
        with anyio.fail_after(5):
            await raw.ended[0].wait()
        wait_until_idle_readable(client)
        for pool in client._pool.hosts.values():  # the race, forced: the check sees nothing
            for conn in pool.idle:
                conn.poller = conn.sock = None
        try:
            reply = await post(client, raw.url())
        except ProviderUnavailable:
            resent = False
        else:
            resent = True
            assert reply.status == 200
    assert len(raw.requests) == 1 + resent
    assert raw.connections == 1 + resent
    assert resent == (anyio_backend == "trio")


# -- idle connections are checked before reuse ---------------------------------------------------


@pytest.mark.parametrize("then_close", [True, False])
async def test_bytes_on_an_idle_connection_are_not_taken_as_the_next_response(then_close):
    """A server's 408 sent on an idle connection (then closing it, or not) is not the next
    request's answer: the connection is dropped before reuse, the request goes on a fresh
    one, once."""
    go, sent = anyio.Event(), anyio.Event()

    async def time_out_idle(conn: Peer, server: RawServer) -> None:
        request = await conn.read_request()
        assert request is not None
        server.requests.append(request.head)
        await conn.send(response(b'{"n":%d}' % server.connections))
        if server.connections == 1:
            await go.wait()  # the client has read the answer: the connection is idle
            await conn.send(response(b"{}", "408 Request Timeout", "Connection: close\r\n"))
            sent.set()
            if not then_close:
                assert await conn.read_request() is None  # until the client closes

    async with raw_server(time_out_idle) as raw, transport() as client:
        assert (await post(client, raw.url())).body == b'{"n":1}'
        go.set()
        with anyio.fail_after(5):
            await sent.wait()
        wait_until_idle_readable(client)
        reply = await post(client, raw.url())
        assert (reply.status, reply.body) == (200, b'{"n":2}')
        assert client.open_connections == 1
        with anyio.fail_after(5):
            await raw.ended[0].wait()  # the client closed the first connection
    assert (raw.connections, len(raw.requests)) == (2, 2)


async def test_quiet_idle_connections_are_reused():
    """The check before reuse passes a connection on which nothing arrived, over and over."""
    async with raw_server(answer_each(response())) as raw, transport() as client:
        for _ in range(5):
            assert (await post(client, raw.url())).status == 200
    assert raw.connections == 1


# -- an answer that comes while the request is still being sent --------------------------------

BIG = b'{"x":"' + b"y" * (16 << 20) + b'"}'  # far more than the sockets' buffers hold


@pytest.mark.parametrize("closes", [True, False])
async def test_early_answer_to_a_large_upload_is_returned(closes):
    """A server that answers 413 after the head, without reading the body, and closes (a
    reset, since the body is unread) or just stops reading: the client returns the 413,
    and closes the connection."""

    async def too_large(conn: Peer, server: RawServer) -> None:
        head = await conn.reader.receive_until(b"\r\n\r\n", 1 << 20)
        server.requests.append(head)
        await conn.send(response(b'{"error":"too large"}', "413 Payload Too Large"))
        if not closes:
            await anyio.sleep_forever()  # neither reads nor closes: the client must stop

    async with raw_server(too_large) as raw, transport() as client:
        reply = await client.post(raw.url(), HEADERS, BIG, QUICK)
        assert (reply.status, reply.body) == (413, b'{"error":"too large"}')
        assert client.open_connections == 0
        assert (await post(client, raw.url())).status == 413  # a fresh connection
    assert raw.connections == 2


async def test_large_upload_read_whole_is_answered_normally():
    """A large body that the server reads whole before answering: the usual response, and
    the connection is kept."""
    async with raw_server(answer_each(response())) as raw, transport() as client:
        for _ in range(2):
            reply = await client.post(raw.url(), HEADERS, BIG, QUICK)
            assert reply.status == 200
        assert client.open_connections == 1
    assert raw.connections == 1


async def test_large_upload_closed_without_answer_is_unavailable():
    """A server that closes while a large body is going out, without an answer: the
    failed send is reported as such."""

    async def hang_up(conn: Peer, server: RawServer) -> None:
        await conn.reader.receive_until(b"\r\n\r\n", 1 << 20)
        reset_on_close(conn)

    async with raw_server(hang_up) as raw, transport() as client:
        with pytest.raises(ProviderUnavailable, match=r"connection to .* failed"):
            await client.post(raw.url(), HEADERS, BIG, QUICK)
        assert client.open_connections == 0
    assert raw.connections == 1


# -- header names ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["x bad", "x:y", "", "caf\u00e9", "(x)", "x\r\ny", "a\tb", "x/y"])
async def test_header_name_that_is_not_a_token_is_refused(name):
    """A header name that is not an RFC 9110 token is refused before anything is sent."""
    async with raw_server(answer_each(response())) as raw, transport() as client:
        with pytest.raises(ValueError, match="not an HTTP field name"):
            await client.post(raw.url(), {**HEADERS, name: "v"}, b"{}", QUICK)
    assert raw.connections == 0


async def test_token_header_names_are_sent():
    """Every character a token allows goes out as given."""
    name = "X-Ok!#$%&'*+.^_`|~09"
    async with raw_server(answer_each(response())) as raw, transport() as client:
        await client.post(raw.url(), {name: "v"}, b"{}", QUICK)
    assert f"\r\n{name}: v\r\n".encode() in raw.requests[0]


# -- the total deadline of an attempt -------------------------------------------------------------


async def test_a_server_dripping_bytes_hits_the_total_timeout():
    """Bytes that each come within the read timeout still end at the total deadline."""
    async with raw_server(drip()) as raw, transport() as client:
        with pytest.raises(
            ProviderTimeout,
            match=r"no complete answer from .* in time \(total timeout of 0\.5 s",
        ):
            await post(client, raw.url(), Timeouts(connect=5.0, read=2.0, total=0.5))
        assert client.open_connections == 0


async def test_total_none_sets_no_deadline():
    """Timeouts(total=None): the dripped body is read to its end."""
    async with raw_server(drip(length=20)) as raw, transport() as client:
        reply = await post(client, raw.url(), Timeouts(connect=5.0, read=2.0, total=None))
    assert reply.body == b"x" * 20


async def test_total_timeout_also_bounds_a_silent_server():
    """A total shorter than the read timeout ends a wait for the first byte, and says so."""
    async with raw_server(wait_for_eof) as raw, transport() as client:
        with pytest.raises(ProviderTimeout, match=r"total timeout of 0\.2 s"):
            await post(client, raw.url(), Timeouts(connect=5.0, read=30.0, total=0.2))


# -- redirects ------------------------------------------------------------------------------------


def redirect_to(location: str, status: str = "307 Temporary Redirect", times: int = 1) -> Respond:
    """Answer the first `times` requests with a redirect to `location`, the rest with 200."""

    async def respond(conn: Peer, server: RawServer) -> None:
        while (request := await conn.read_request()) is not None:
            server.requests.append(request.head + b"\r\n\r\n" + request.body)
            if len(server.requests) <= times:
                where = location.replace("{port}", str(server.port))
                await conn.send(response(b"", status, f"Location: {where}\r\n"))
            else:
                await conn.send(response(b'{"final":true}'))

    return respond


@pytest.mark.parametrize(
    ("status", "location"),
    [
        ("307 Temporary Redirect", "/v2/chat"),
        ("308 Permanent Redirect", "http://127.0.0.1:{port}/v2/chat?x=1"),
    ],
)
async def test_same_origin_307_and_308_are_followed_with_method_body_and_headers(status, location):
    """A 307/308 to the same origin is followed with the same method, body and headers,
    over the same keep-alive connection."""
    async with raw_server(redirect_to(location, status)) as raw, transport() as client:
        reply = await post(client, raw.url())
        assert (reply.status, reply.body) == (200, b'{"final":true}')
    first, second = raw.requests
    assert first.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert second.startswith(b"POST /v2/chat")
    assert second.split(b"\r\n", 1)[1] == first.split(b"\r\n", 1)[1]  # headers and body
    assert b"authorization: Bearer k" in second
    assert second.endswith(BODY.encode())
    assert raw.connections == 1


@pytest.mark.parametrize(
    ("status", "location"),
    [
        ("301 Moved Permanently", "/v2/chat"),
        ("302 Found", "/v2/chat"),
        ("303 See Other", "/v2/chat"),
        ("307 Temporary Redirect", "http://localhost:{port}/v2/chat"),  # another host
        ("308 Permanent Redirect", "https://127.0.0.1:{port}/v2/chat"),  # another scheme
    ],
)
async def test_other_redirects_are_returned_as_responses(status, location):
    """Any other 3xx (or one to another origin) comes back as the response, not followed."""
    async with raw_server(redirect_to(location, status)) as raw, transport() as client:
        reply = await post(client, raw.url())
    assert reply.status == int(status[:3])
    assert reply.headers["location"] == location.replace("{port}", str(raw.port))
    assert len(raw.requests) == 1

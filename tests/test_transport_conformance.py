"""The transport conformance suite: the same cases against every transport we ship.

Each case runs on `Http11Transport` (asyncio and trio), `AiohttpTransport` (asyncio
only) and `HttpxTransport` (asyncio and trio), against the local servers of
`tests/netservers.py` (a scripted HTTP/1.1 server on plain and TLS listeners, and a
forward proxy), started once for the module on an event loop of their own. Each test
adds a route with its own handler and reads back what the route saw.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import random
import ssl
import threading
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest

import vitals_engine as ve
from tests.addresses import refusing_port
from tests.netservers import (
    OPENAI_COMPLETION,
    Handler,
    Peer,
    Request,
    Route,
    Servers,
    answer,
    chunked,
    response,
    running_servers,
    wait_for,
)
from vitals_engine import (
    AuthenticationError,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
)
from vitals_engine.transport import aiohttp_client, http11, httpx_client
from vitals_engine.transport import response as reading
from vitals_engine.transport.aiohttp_client import AiohttpTransport
from vitals_engine.transport.base import MAX_REDIRECTS, StreamedResponse, Timeouts, Transport
from vitals_engine.transport.http11 import Http11Transport
from vitals_engine.transport.httpx_client import HttpxTransport
from vitals_engine.transport.pool import TransportPool

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_retries", "clean_environment")]

BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "What's 2+2?"}]})
HEADERS = {"content-type": "application/json", "authorization": "Bearer k"}
QUICK = Timeouts(connect=10.0, read=10.0, total=60.0)

FLAVOURS = [
    ("http11", "asyncio"),
    ("http11", "trio"),
    ("aiohttp", "asyncio"),
    ("httpx", "asyncio"),
    ("httpx", "trio"),
]
TRANSPORTS = {"http11": Http11Transport, "aiohttp": AiohttpTransport, "httpx": HttpxTransport}


@pytest.fixture(params=[pytest.param(f, id=f"{f[0]}-{f[1]}") for f in FLAVOURS])
def flavour(request) -> tuple[str, str]:
    """Which transport, on which backend (aiohttp runs on asyncio only)."""
    return request.param


@pytest.fixture
def anyio_backend(flavour):
    return flavour[1]


@pytest.fixture
def kind(flavour) -> str:
    return flavour[0]


@asynccontextmanager
async def opened(kind: str) -> AsyncIterator[Transport]:
    """A fresh transport of `kind`, made after the test set its environment, closed after."""
    transport = TRANSPORTS[kind]()
    try:
        yield transport
    finally:
        await transport.aclose()


async def post(
    transport: Transport, url: str, timeouts: Timeouts = QUICK, body: str | bytes = BODY
):
    data = body.encode() if isinstance(body, str) else body
    return await transport.post(url, HEADERS, data, timeouts)


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    """A private CA (its PEM file) and the server contexts of the two TLS listeners: one
    with a certificate for 127.0.0.1, one for another name."""
    trustme = pytest.importorskip("trustme")
    authority = trustme.CA()
    pem = tmp_path_factory.mktemp("ca") / "ca.pem"
    authority.cert_pem.write_to_path(str(pem))
    right = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(right)
    wrong = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("wrong.example").configure_cert(wrong)
    return str(pem), right, wrong


@pytest.fixture(scope="module")
def running(ca):
    _, right, wrong = ca
    with running_servers(right, wrong) as servers:
        yield servers


@pytest.fixture
def servers(running: Servers):
    """The module's servers; after each test, nothing a handler raised."""
    running.proxy.reset()
    yield running
    errors, running.errors[:] = list(running.errors), []
    assert not errors, f"the test servers failed: {errors!r}"


@pytest.fixture
def clean_environment(monkeypatch):
    """No proxy variables (nor CGI's REQUEST_METHOD) from the machine running the tests."""
    for name in list(os.environ):
        if name.lower().endswith("_proxy") or name == "REQUEST_METHOD":
            monkeypatch.delenv(name)


@pytest.fixture
def trust_ca(ca, monkeypatch):
    """Trust the private CA, as a user would: through SSL_CERT_FILE."""
    monkeypatch.setenv("SSL_CERT_FILE", ca[0])


@pytest.fixture
def small_cap(monkeypatch):
    """A body limit of 64 KiB in every transport, so oversized bodies stay small."""
    for module in (reading, aiohttp_client, httpx_client):
        monkeypatch.setattr(module, "MAX_BODY_BYTES", 64 * 1024)


def basic(credentials: str) -> str:
    return "Basic " + base64.b64encode(credentials.encode()).decode()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


EVENTS_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
CHUNKED_EVENTS = EVENTS_HEAD + b"Transfer-Encoding: chunked\r\n\r\n"


def test_every_transport_has_the_same_body_limit():
    """The adapters refuse bodies over the limit our own client has."""
    assert aiohttp_client.MAX_BODY_BYTES == httpx_client.MAX_BODY_BYTES == http11.MAX_BODY_BYTES


# -- proxies -----------------------------------------------------------------------------------


async def test_http_goes_through_http_proxy_in_absolute_form(kind, servers, monkeypatch):
    """With HTTP_PROXY, an http request goes to the proxy in absolute form."""
    route = servers.route(answer(response(b'{"via":"proxy"}')))
    monkeypatch.setenv("HTTP_PROXY", servers.proxy.url)
    async with opened(kind) as transport:
        reply = await post(transport, route.url())
    assert (reply.status, reply.body) == (200, b'{"via":"proxy"}')
    assert [(r.method, r.target) for r in servers.proxy.seen] == [("POST", route.url())]
    assert route.seen[0].body == BODY.encode()


async def test_https_goes_through_a_connect_tunnel(kind, servers, monkeypatch, trust_ca):
    """With HTTPS_PROXY, an https request goes through a CONNECT tunnel, with TLS to the
    server inside it."""
    route = servers.route(answer(response(b'{"via":"tunnel"}')))
    monkeypatch.setenv("HTTPS_PROXY", servers.proxy.url)
    async with opened(kind) as transport:
        reply = await post(transport, route.url(on="tls"))
    assert (reply.status, reply.body) == (200, b'{"via":"tunnel"}')
    port = servers.ports["tls"]
    assert [(r.method, r.target) for r in servers.proxy.seen] == [("CONNECT", f"127.0.0.1:{port}")]
    assert route.seen[0].target == f"{route.path}/v1/chat/completions"  # origin form, inside


@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_proxy_credentials_become_proxy_authorization(
    kind, servers, monkeypatch, trust_ca, scheme
):
    """user:password in the proxy URL reach the proxy as Basic Proxy-Authorization (on the
    request for http, on the CONNECT for https), and never the server."""
    expected = basic("bob:p@ss")
    servers.proxy.reset(authorization=expected)
    route = servers.route(answer(response()))
    variable = "HTTP_PROXY" if scheme == "http" else "HTTPS_PROXY"
    monkeypatch.setenv(variable, f"http://bob:p%40ss@127.0.0.1:{servers.proxy.port}")
    async with opened(kind) as transport:
        reply = await post(transport, route.url(on="plain" if scheme == "http" else "tls"))
    assert reply.status == 200
    assert [r.headers.get("proxy-authorization") for r in servers.proxy.seen] == [expected]
    assert "proxy-authorization" not in route.seen[0].headers


async def test_no_proxy_goes_direct(kind, servers, monkeypatch):
    """A host in NO_PROXY is reached directly, not through HTTP_PROXY."""
    route = servers.route(answer(response()))
    monkeypatch.setenv("HTTP_PROXY", servers.proxy.url)
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    async with opened(kind) as transport:
        assert (await post(transport, route.url())).status == 200
    assert servers.proxy.seen == []
    assert len(route.seen) == 1


@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_all_proxy_is_the_fallback(kind, servers, monkeypatch, trust_ca, scheme):
    """ALL_PROXY serves a scheme without a variable of its own."""
    route = servers.route(answer(response()))
    monkeypatch.setenv("ALL_PROXY", servers.proxy.url)
    async with opened(kind) as transport:
        reply = await post(transport, route.url(on="plain" if scheme == "http" else "tls"))
    assert reply.status == 200
    assert [r.method for r in servers.proxy.seen] == ["POST" if scheme == "http" else "CONNECT"]


@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_407_from_the_proxy_is_an_error_naming_it(
    kind, servers, monkeypatch, trust_ca, scheme
):
    """A proxy that wants credentials we did not give answers 407: an AuthenticationError
    (not retried) naming the proxy, and nothing reaches the server."""
    servers.proxy.reset(authorization=basic("bob:secret"))
    route = servers.route(answer(response()))
    monkeypatch.setenv("HTTP_PROXY" if scheme == "http" else "HTTPS_PROXY", servers.proxy.url)
    async with opened(kind) as transport:
        with pytest.raises(
            AuthenticationError, match=rf"127\.0\.0\.1:{servers.proxy.port}"
        ) as caught:
            await post(transport, route.url(on="plain" if scheme == "http" else "tls"))
    assert "407" in str(caught.value)
    assert route.seen == []


# -- TLS ---------------------------------------------------------------------------------------


async def test_private_ca_from_ssl_cert_file_is_trusted(kind, servers, trust_ca):
    """A server whose certificate comes from the CA in SSL_CERT_FILE is trusted."""
    route = servers.route(answer(response(b'{"tls":true}')))
    async with opened(kind) as transport:
        reply = await post(transport, route.url(on="tls"))
    assert (reply.status, reply.body) == (200, b'{"tls":true}')


async def test_certificate_for_another_name_is_refused(kind, servers, trust_ca):
    """A certificate from a trusted CA, but for another host name, is refused: cannot
    connect, and no request is sent."""
    route = servers.route(answer(response()))
    async with opened(kind) as transport:
        with pytest.raises(ProviderUnavailable, match=r"cannot connect to .*CERTIFICATE_VERIFY"):
            await post(transport, route.url(on="wrong_name"))
    assert route.seen == []


async def test_a_refused_connection_is_marked_refused(kind, servers):
    """Connecting to a port nothing listens on is a ProviderUnavailable marked `refused`
    (localhost too, where ::1 and 127.0.0.1 are both tried); other failures are not."""
    with refusing_port() as port:
        async with opened(kind) as transport:
            for host in ("127.0.0.1", "localhost"):
                with pytest.raises(ProviderUnavailable, match="cannot connect to") as info:
                    await post(transport, f"http://{host}:{port}/v1/chat/completions")
                assert info.value.refused
    async with opened(kind) as transport:
        route = servers.route(answer(response()))
        with pytest.raises(ProviderUnavailable) as info:
            await post(transport, route.url(on="wrong_name"))
        assert not info.value.refused


# -- framing -----------------------------------------------------------------------------------

TEXT = json.dumps({"text": "framed " * 500}).encode()
FRAMINGS = {
    "content-length": response(TEXT),
    "chunked-with-trailers": response(
        chunked(TEXT, 700, "X-Checksum: abc\r\nX-More: 1\r\n"),
        headers="Transfer-Encoding: chunked\r\n",
        length=False,
    ),
    "eof-delimited": response(TEXT, length=False),
    "gzip": response(gzip.compress(TEXT), headers="Content-Encoding: gzip\r\n"),
    "gzip-chunked": response(
        chunked(gzip.compress(TEXT), 50),
        headers="Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
        length=False,
    ),
    "deflate": response(zlib.compress(TEXT), headers="Content-Encoding: deflate\r\n"),
    "raw-deflate": response(
        zlib.compress(TEXT, wbits=-15), headers="Content-Encoding: deflate\r\n"
    ),
}


@pytest.mark.parametrize("framing", list(FRAMINGS))
async def test_bodies_of_every_framing_are_read_whole(kind, servers, framing):
    """Content-Length, chunked (with trailers), read-to-EOF, gzip and deflate bodies come
    back whole and decoded; the connection is kept unless the body ended it."""
    eof = framing == "eof-delimited"
    route = servers.route(answer(FRAMINGS[framing], keep=not eof, piece=333))
    async with opened(kind) as transport:
        for _ in range(2):
            assert (await post(transport, route.url())).body == TEXT
    assert len(route.connections) == (2 if eof else 1)


REPEATED = "Vary: a\r\nX-Note: one\r\nvary: b\r\nX-NOTE: two\r\nVary: c\r\n"


async def test_repeated_headers_are_joined_in_order(kind, servers):
    """A header the response repeats comes back once under its lower-cased name, its
    values joined with ", " in the order they came, whole or streamed."""
    route = servers.route(answer(response(headers=REPEATED)))
    async with opened(kind) as transport:
        whole = await post(transport, route.url())
        async with transport.stream(route.url(), HEADERS, BODY.encode(), QUICK) as streamed:
            assert await streamed.read() == b'{"ok":true}'
    for headers in (whole.headers, streamed.headers):
        assert headers["vary"] == "a, b, c"
        assert headers["x-note"] == "one, two"
        assert headers["content-type"] == "application/json"


OVERSIZED = {
    "content-length": response(b"z" * 70_000),
    "chunked": response(
        chunked(b"z" * 70_000, 8000), headers="Transfer-Encoding: chunked\r\n", length=False
    ),
    "eof-delimited": response(b"z" * 70_000, length=False),
    "gzip-bomb": response(gzip.compress(b"\0" * (4 << 20)), headers="Content-Encoding: gzip\r\n"),
}


@pytest.mark.parametrize("framing", list(OVERSIZED))
async def test_oversized_bodies_and_bombs_are_refused(kind, servers, small_cap, framing):
    """A body over the limit, however framed, or one that decompresses past it, is a
    ProviderError naming the limit, not retried: the same request would get it again."""
    route = servers.route(answer(OVERSIZED[framing], keep=False))
    async with opened(kind) as transport:
        with pytest.raises(ProviderError, match=r"larger than the \d+ MiB limit") as caught:
            await post(transport, route.url())
    assert not caught.value.retryable
    assert "not retried" in str(caught.value).lower()


# -- keep-alive --------------------------------------------------------------------------------


async def test_sequential_requests_reuse_one_connection(kind, servers):
    """Requests made one after another travel over one keep-alive connection."""
    route = servers.route(answer(response()))
    async with opened(kind) as transport:
        for _ in range(5):
            assert (await post(transport, route.url())).status == 200
    assert len(route.seen) == 5
    assert len(route.connections) == 1


async def test_connection_close_is_honoured(kind, servers):
    """After a response with Connection: close the client closes that connection itself
    (the server leaves it open) and sends the next request on a new one."""

    async def close_please(peer: Peer, request: Request, route: Route) -> bool:
        await peer.send(response(headers="Connection: close\r\n"))
        route.notes.setdefault("sent after", []).append(await peer.wait_closed())
        route.event(f"closed {len(route.notes['sent after'])}").set()
        return False

    route = servers.route(close_please)
    async with opened(kind) as transport:
        assert (await post(transport, route.url())).status == 200
        await wait_for(route.event("closed 1"))  # the client closed the first connection
        assert (await post(transport, route.url())).status == 200
    assert route.notes["sent after"][0] == b""  # ... and sent nothing more on it
    assert len(route.connections) == 2


@pytest.mark.parametrize("closes", [True, False], ids=["then-closes", "left-open"])
async def test_408_on_an_idle_connection_is_never_the_next_response(kind, servers, closes):
    """A server that times out an idle keep-alive connection with a 408 (and closes it, or
    not yet): the next request gets its own answer on a new connection, never that 408."""

    async def idle_408(peer: Peer, request: Request, route: Route) -> bool:
        if len(route.seen) > 1:
            await peer.send(response(b'{"n":2}'))
            return True
        await peer.send(response(b'{"n":1}'))
        await peer.wait(route.event("idle"))
        await peer.send(b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n")
        await peer.send(b"Content-Length: 0\r\n\r\n")
        if closes:
            await peer.stream.aclose()
            route.event("sent 408").set()
        else:
            route.event("sent 408").set()
            route.notes["sent after 408"] = await peer.wait_closed()
            route.event("closed").set()
        return False

    route = servers.route(idle_408)
    async with opened(kind) as transport:
        assert (await post(transport, route.url())).body == b'{"n":1}'
        route.event("idle").set()
        await wait_for(route.event("sent 408"))
        reply = await post(transport, route.url())
    assert (reply.status, reply.body) == (200, b'{"n":2}')
    assert len(route.connections) == 2
    if not closes:
        await wait_for(route.event("closed"))
        assert route.notes["sent after 408"] == b""  # no request went to the 408'd connection


# -- hostile servers ---------------------------------------------------------------------------

DRIP = response(b"d" * 150, headers=f"X-Pad: {'p' * 150}\r\n")


async def drip(peer: Peer, request: Request, route: Route) -> bool:
    """One byte at a time, far more often than the read timeout: only the total stops it."""
    await peer.send(DRIP, piece=1, pause=0.005)
    return False


DRIP_TIMEOUTS = Timeouts(connect=10.0, read=1.0, total=0.25)


async def test_dripping_server_is_stopped_by_the_total_timeout(kind, servers):
    """A server sending a byte at a time, each well within the read timeout, is stopped by
    the total timeout: ProviderTimeout saying so."""
    route = servers.route(drip)
    async with opened(kind) as transport:
        with pytest.raises(ProviderTimeout, match="total"):
            await post(transport, route.url(), DRIP_TIMEOUTS)


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
async def test_body_cut_midway_is_unavailable(kind, servers, framing):
    """A connection that ends in the middle of the body is ProviderUnavailable, never a
    short body."""
    if framing == "chunked":
        data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n5\r\nwor"
    else:
        data = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b'{"cut": "he'
    route = servers.route(answer(data, keep=False))
    async with opened(kind) as transport:
        with pytest.raises(ProviderUnavailable, match="connection to"):
            await post(transport, route.url())


@pytest.mark.parametrize(
    "status_line", [b"SMTP ready\r\n", b"HTTP/1.1 2x0 OK\r\n", b"HTTP/1.1 200OK\r\n"]
)
async def test_garbage_status_line_is_an_error(kind, servers, status_line):
    """A status line that is not HTTP/1.x's is ProviderUnavailable."""
    route = servers.route(answer(status_line + b"Content-Length: 2\r\n\r\n{}", keep=False))
    async with opened(kind) as transport:
        with pytest.raises(ProviderUnavailable, match="connection to"):
            await post(transport, route.url())


async def test_request_the_server_hung_up_on_is_never_sent_twice(kind, servers):
    """A server that reads a request on a kept-alive connection and closes without
    answering: the caller gets ProviderUnavailable, and the server saw that request once
    (a POST may have been acted on: it is never resent silently)."""

    async def hang_up_on_second(peer: Peer, request: Request, route: Route) -> bool:
        if len(route.seen) == 1:
            await peer.send(response())
            return True
        return False  # read, not answered: close

    route = servers.route(hang_up_on_second)
    async with opened(kind) as transport:
        assert (await post(transport, route.url())).status == 200
        with pytest.raises(ProviderUnavailable):
            await post(transport, route.url(), body='{"second": true}')
    assert [r.body for r in route.seen].count(b'{"second": true}') == 1


UPLOAD = b'{"blob": "' + b"x" * (32 << 20) + b'"}'  # more than the sockets' buffers hold


@pytest.mark.parametrize("on", ["plain", "tls"])
async def test_early_413_during_a_large_upload_is_the_answer(kind, servers, trust_ca, on):
    """A server that answers 413 as soon as it read the head of a large upload, and closes
    without reading the rest: the caller gets the 413, not a broken connection."""
    route = servers.route(
        answer(
            response(b'{"error":"too large"}', "413 Payload Too Large", "Connection: close\r\n"),
            keep=False,
        ),
        read_body=False,
    )
    async with opened(kind) as transport:
        reply = await post(transport, route.url(on=on), body=UPLOAD)
    assert (reply.status, reply.body) == (413, b'{"error":"too large"}')


# -- redirects ---------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [307, 308])
async def test_same_origin_307_and_308_are_followed_with_the_same_body(kind, servers, status):
    """A 307 or 308 to the same origin is followed: the same POST, body and headers go to
    the new address, and its answer is the response."""
    target = servers.route(answer(response(b'{"moved":true}')))
    moved = f"{status} Moved\r\nLocation: {target.path}/v1/chat/completions"
    route = servers.route(answer(response(b"{}", moved)))
    async with opened(kind) as transport:
        reply = await post(transport, route.url())
    assert (reply.status, reply.body) == (200, b'{"moved":true}')
    [request] = target.seen
    assert (request.method, request.body) == ("POST", BODY.encode())
    assert request.headers["authorization"] == "Bearer k"


@pytest.mark.parametrize(
    ("status", "where"), [(301, "plain"), (302, "plain"), (303, "plain"), (308, "other")]
)
async def test_other_redirects_come_back_as_the_response(kind, servers, status, where):
    """A 301/302/303, or a 307/308 to another origin, is not followed: it comes back as
    the response, for the provider to name."""
    target = servers.route(answer(response()))
    location = target.url(on=where)
    route = servers.route(answer(response(b"{}", f"{status} Moved\r\nLocation: {location}")))
    async with opened(kind) as transport:
        reply = await post(transport, route.url())
    assert (reply.status, reply.headers["location"]) == (status, location)
    assert target.seen == []


# -- credentials -------------------------------------------------------------------------------

COMPLETION = json.dumps(OPENAI_COMPLETION).encode()


async def test_url_credentials_reach_the_server_as_basic_auth(kind, servers, monkeypatch):
    """chat_vllm(base_url="http://user:pass@host/v1") through the transport that
    VITALS_TRANSPORT names: the server sees Basic auth, the URL no credentials."""
    monkeypatch.setenv("VITALS_TRANSPORT", kind)
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    used: list[str] = []
    get = TransportPool.get

    def spy(self: TransportPool, base_url: str, client=None) -> Transport:
        transport = get(self, base_url, client)
        used.append(type(transport).__name__)
        return transport

    monkeypatch.setattr(TransportPool, "get", spy)
    route = servers.route(answer(response(COMPLETION)))
    base_url = route.url("/v1").replace("http://", "http://user:p%40ss@")
    chat = ve.chat_vllm("m", base_url=base_url)
    assert await chat.chat_async("What's 2+2?") == "4"
    assert used == [TRANSPORTS[kind].__name__]
    [request] = route.seen
    assert request.headers["authorization"] == basic("user:p@ss")
    assert request.target == f"{route.path}/v1/chat/completions"


# -- streaming ---------------------------------------------------------------------------------


async def collect(
    streamed: StreamedResponse, got: list[bytes], seen: threading.Event | None = None
) -> None:
    """Read a stream's chunks into `got`; set `seen` once one came."""
    async for piece in streamed.chunks():
        got.append(piece)
        if seen is not None:
            seen.set()


async def test_stream_hands_chunks_over_before_the_body_ends(kind, servers):
    """stream() hands the first chunk over while the server still holds the rest (until
    the client has seen that chunk)."""

    async def hold_the_rest(peer: Peer, request: Request, route: Route) -> bool:
        await peer.send(CHUNKED_EVENTS + chunk(b"data: 1\n\n"))
        route.notes["released"] = await peer.wait(route.event("first seen"), 5.0)
        await peer.send(chunk(b"data: 2\n\n") + b"0\r\n\r\n")
        return True

    route = servers.route(hold_the_rest)
    got: list[bytes] = []
    async with (
        opened(kind) as transport,
        transport.stream(route.url(), HEADERS, BODY.encode(), QUICK) as streamed,
    ):
        assert (streamed.status, streamed.headers["content-type"]) == (200, "text/event-stream")
        await collect(streamed, got, route.event("first seen"))
    assert b"".join(got) == b"data: 1\n\ndata: 2\n\n"
    assert route.notes["released"] is True  # the client saw a chunk before the body ended


async def test_stream_read_timeout_applies_between_chunks(kind, servers):
    """A stream whose server goes quiet after the first chunk: ProviderTimeout once the
    read timeout passes without more."""

    async def go_quiet(peer: Peer, request: Request, route: Route) -> bool:
        await peer.send(CHUNKED_EVENTS + chunk(b"data: 1\n\n"))
        await peer.wait_closed()
        return False

    route = servers.route(go_quiet)
    got: list[bytes] = []
    timeouts = Timeouts(connect=10.0, read=1.0, total=None)
    async with (
        opened(kind) as transport,
        transport.stream(route.url(), HEADERS, BODY.encode(), timeouts) as streamed,
    ):
        with pytest.raises(ProviderTimeout, match="read timeout"):
            await collect(streamed, got)
    assert got == [b"data: 1\n\n"]


@pytest.mark.parametrize("framing", ["chunked", "content-length"])
async def test_stream_cut_midway_raises_at_the_cut(kind, servers, framing):
    """A stream that ends mid-body hands over what came, then raises ProviderUnavailable."""
    if framing == "chunked":
        head = CHUNKED_EVENTS + chunk(b"data: 1\n\n")
    else:
        head = EVENTS_HEAD + b"Content-Length: 100\r\n\r\ndata: 1\n\n"

    async def cut(peer: Peer, request: Request, route: Route) -> bool:
        await peer.send(head)
        await peer.wait(route.event("first seen"), 5.0)
        return False  # closes: the body stops in the middle

    route = servers.route(cut)
    got: list[bytes] = []
    async with (
        opened(kind) as transport,
        transport.stream(route.url(), HEADERS, BODY.encode(), QUICK) as streamed,
    ):
        with pytest.raises(ProviderUnavailable, match="connection to"):
            await collect(streamed, got, route.event("first seen"))
    assert got == [b"data: 1\n\n"]


async def test_connection_is_reused_after_a_stream_read_to_its_end(kind, servers):
    """A stream read to its end gives its connection back for the next request."""
    events = b"".join(chunk(b"data: %d\n\n" % n) for n in range(3)) + b"0\r\n\r\n"
    route = servers.route(answer(CHUNKED_EVENTS + events))
    async with opened(kind) as transport:
        for _ in range(2):
            async with transport.stream(route.url(), HEADERS, BODY.encode(), QUICK) as streamed:
                assert await streamed.read() == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"
        assert (await post(transport, route.url())).status == 200
    assert len(route.connections) == 1


async def test_stream_is_stopped_by_the_total_timeout(kind, servers):
    """The total timeout bounds a stream too, however steadily it drips."""
    route = servers.route(drip)
    async with opened(kind) as transport:
        with pytest.raises(ProviderTimeout, match="total"):
            async with transport.stream(
                route.url(), HEADERS, BODY.encode(), DRIP_TIMEOUTS
            ) as streamed:
                await streamed.read()


# -- GET, and uploads of other bodies -----------------------------------------------------------

GET_HEADERS = {"accept": "application/json", "authorization": "Bearer k"}
BATCH = json.dumps(
    {"id": "batch_1", "status": "completed", "request_counts": {"total": 2, "failed": 0}}
).encode()
METHODS = ["POST", "GET"]


async def get(transport: Transport, url: str, timeouts: Timeouts = QUICK):
    return await transport.get(url, GET_HEADERS, timeouts)


async def send(transport: Transport, method: str, url: str, timeouts: Timeouts = QUICK):
    """The usual request of `method` to `url`: `post()` of BODY, or `get()`."""
    if method == "GET":
        return await get(transport, url, timeouts)
    return await post(transport, url, timeouts)


def assert_bodiless_get(request: Request) -> None:
    """A GET as RFC 9110 has it: no body, and no header announcing one."""
    assert request.method == "GET"
    assert "content-length" not in request.headers
    assert "transfer-encoding" not in request.headers
    assert request.body == b""


@pytest.mark.parametrize("on", ["plain", "tls"])
async def test_get_returns_a_json_answer(kind, servers, trust_ca, on):
    """A GET of a batch's status: the server sees a GET of the path and query with the
    caller's headers and no body; the JSON answer comes back whole."""
    route = servers.route(answer(response(BATCH)))
    async with opened(kind) as transport:
        reply = await get(transport, route.url("/v1/batches/batch_1?limit=2", on=on))
    assert (reply.status, reply.headers["content-type"]) == (200, "application/json")
    assert json.loads(reply.body)["status"] == "completed"
    [request] = route.seen
    assert request.target == f"{route.path}/v1/batches/batch_1?limit=2"
    assert_bodiless_get(request)
    assert request.headers["authorization"] == "Bearer k"
    assert request.headers["accept-encoding"] == "gzip, deflate"


@pytest.fixture(scope="module")
def results_file() -> tuple[bytes, dict[str, bytes]]:
    """A batch's results: 24 MiB of JSON lines, no two alike; and the server's answers
    carrying them gzip-compressed, by Content-Length and chunked."""
    rng = random.Random(7)
    words = ["the", "answer", "is", "four", "because", "two", "and", "two", "make", "four"]
    lines = []
    size = 0
    while size < 24 << 20:
        content = " ".join(rng.choices(words, k=30))
        line = (
            f'{{"custom_id":"request-{len(lines)}","response":{{"status_code":200,'
            f'"body":{{"id":"{rng.randbytes(8).hex()}","content":"{content}"}}}}}}\n'
        ).encode()
        lines.append(line)
        size += len(line)
    data = b"".join(lines)
    packed = gzip.compress(data, compresslevel=1)
    answers = {
        "content-length": response(packed, headers="Content-Encoding: gzip\r\n"),
        "chunked": response(
            chunked(packed, 64 * 1024),
            headers="Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
            length=False,
        ),
    }
    return data, answers


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
async def test_get_reads_a_large_gzip_body_whole(kind, servers, results_file, framing):
    """A results file of 24 MiB, gzip-compressed by the server (by Content-Length or
    chunked) comes back whole and decoded, and its connection carries the next request."""
    data, answers = results_file
    route = servers.route(answer(answers[framing]))
    status = servers.route(answer(response(BATCH)))
    async with opened(kind) as transport:
        reply = await get(transport, route.url("/v1/files/file_1/content"))
        assert (await get(transport, status.url("/v1/batches/batch_1"))).body == BATCH
    assert reply.status == 200
    assert len(reply.body) == len(data)  # (not reply.body == data: no 24 MiB diff on failure)
    assert hashlib.sha256(reply.body).digest() == hashlib.sha256(data).digest()
    assert route.seen[0].connection == status.seen[0].connection


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_get_follows_every_same_origin_redirect(kind, servers, status):
    """A GET follows a 301, 302, 303, 307 or 308 to the same origin, still a GET with the
    same headers and no body; the answer there is the response."""
    target = servers.route(answer(response(b'{"moved":true}')))
    moved = f"{status} Moved\r\nLocation: {target.path}/v1/files/file_1/content"
    route = servers.route(answer(response(b"{}", moved)))
    async with opened(kind) as transport:
        reply = await get(transport, route.url("/v1/files/file_1/content"))
    assert (reply.status, reply.body) == (200, b'{"moved":true}')
    [request] = target.seen
    assert_bodiless_get(request)
    assert request.headers["authorization"] == "Bearer k"


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_get_hands_back_a_redirect_to_another_origin(kind, servers, status):
    """A redirect to another origin is not followed, so the credentials never leave theirs:
    it comes back as the response, its Location for the caller to judge."""
    target = servers.route(answer(response()))
    location = target.url("/v1/files/file_1/content", on="other")
    route = servers.route(answer(response(b"{}", f"{status} Moved\r\nLocation: {location}")))
    async with opened(kind) as transport:
        reply = await get(transport, route.url())
    assert (reply.status, reply.headers["location"]) == (status, location)
    assert target.seen == []


@pytest.mark.parametrize("method", METHODS)
async def test_redirect_loop_stops_after_max_redirects_whatever_the_method(kind, servers, method):
    """A redirect to itself is followed MAX_REDIRECTS times, by a POST (307) as by a GET
    (302); then the redirect is the response."""
    status = "307" if method == "POST" else "302"

    async def loop(peer: Peer, request: Request, route: Route) -> bool:
        await peer.send(response(b"{}", f"{status} Again\r\nLocation: {route.path}/again"))
        return True

    route = servers.route(loop)
    async with opened(kind) as transport:
        reply = await send(transport, method, route.url())
    assert reply.status == int(status)
    assert [request.method for request in route.seen] == [method] * (MAX_REDIRECTS + 1)


@pytest.mark.parametrize("status", ["404 Not Found", "429 Too Many Requests", "500 Server Error"])
async def test_get_error_status_is_the_response(kind, servers, status):
    """An error answer to a GET comes back as the response (status, headers, body) for
    the provider to name, as for a POST; its connection carries the next request."""
    error = json.dumps({"error": {"message": "No batch found with id 'batch_9'"}}).encode()
    route = servers.route(answer(response(error, status, "Retry-After: 1\r\n")))
    async with opened(kind) as transport:
        replies = [await get(transport, route.url("/v1/batches/batch_9")) for _ in range(2)]
    for reply in replies:
        assert (reply.status, reply.body) == (int(status[:3]), error)
        assert reply.headers["retry-after"] == "1"
    assert len(route.connections) == 1


@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_get_goes_through_the_proxy(kind, servers, monkeypatch, trust_ca, scheme):
    """With HTTP_PROXY (HTTPS_PROXY), a GET goes to the proxy in absolute form (through a
    CONNECT tunnel), with the proxy's credentials for it alone, and reaches the server
    without a body."""
    expected = basic("bob:p@ss")
    servers.proxy.reset(authorization=expected)
    route = servers.route(answer(response(BATCH)))
    variable = "HTTP_PROXY" if scheme == "http" else "HTTPS_PROXY"
    monkeypatch.setenv(variable, f"http://bob:p%40ss@127.0.0.1:{servers.proxy.port}")
    url = route.url("/v1/batches/batch_1", on="plain" if scheme == "http" else "tls")
    async with opened(kind) as transport:
        assert (await get(transport, url)).body == BATCH
    [seen] = servers.proxy.seen
    assert seen.headers.get("proxy-authorization") == expected
    if scheme == "http":
        assert seen.target == url
        assert_bodiless_get(seen)
    else:
        assert (seen.method, seen.target) == ("CONNECT", f"127.0.0.1:{servers.ports['tls']}")
    [request] = route.seen
    assert_bodiless_get(request)
    assert "proxy-authorization" not in request.headers


def multipart(boundary: str, size: int) -> bytes:
    """A multipart/form-data upload of a batch's input file: a text field, then a file of
    about `size` bytes holding JSON lines and every byte value (CR, LF and NUL among them)."""
    every_byte = bytes(range(256))
    line = b'{"custom_id":"r","body":{"messages":[]}}\n' + every_byte + b"\r\n"
    data = line * (size // len(line) + 1)
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    )
    return head.encode() + data + f"\r\n--{boundary}--\r\n".encode()


@pytest.mark.parametrize("size", [4 * 1024, 3 << 20], ids=["small", "large"])
async def test_a_multipart_upload_arrives_intact(kind, servers, size):
    """post() sends a body as given, whatever its type: a multipart/form-data upload (small,
    or larger than the sockets' buffers) reaches the server byte for byte, with the
    caller's Content-Type and its length."""
    boundary = "vitals-7b1f0e5c"
    body = multipart(boundary, size)
    headers = {
        "authorization": "Bearer k",
        "content-type": f"multipart/form-data; boundary={boundary}",
    }
    route = servers.route(answer(response(b'{"id":"file_1"}')))
    async with opened(kind) as transport:
        reply = await transport.post(route.url("/v1/files"), headers, body, QUICK)
    assert (reply.status, reply.body) == (200, b'{"id":"file_1"}')
    [request] = route.seen
    assert request.method == "POST"
    assert request.headers["content-type"] == headers["content-type"]
    assert request.headers["content-length"] == str(len(body))
    assert len(request.body) == len(body)
    assert request.body == body


async def test_gets_and_posts_share_keep_alive_connections(kind, servers):
    """A GET, a JSON POST, a multipart upload and a GET again, one after another, travel
    over one keep-alive connection, each arriving as it was sent."""

    async def echo(peer: Peer, request: Request, route: Route) -> bool:
        said = {"method": request.method, "length": len(request.body)}
        await peer.send(response(json.dumps(said).encode()))
        return True

    route = servers.route(echo)
    upload = multipart("b0undary", 100_000)
    form = {"content-type": "multipart/form-data; boundary=b0undary"}
    async with opened(kind) as transport:
        replies = [
            await get(transport, route.url("/v1/batches/batch_1")),
            await post(transport, route.url("/v1/batches")),
            await transport.post(route.url("/v1/files"), form, upload, QUICK),
            await get(transport, route.url("/v1/files/file_1/content")),
        ]
    assert [json.loads(reply.body) for reply in replies] == [
        {"method": "GET", "length": 0},
        {"method": "POST", "length": len(BODY)},
        {"method": "POST", "length": len(upload)},
        {"method": "GET", "length": 0},
    ]
    assert route.seen[1].body == BODY.encode()
    assert route.seen[2].body == upload
    for request in (route.seen[0], route.seen[3]):
        assert_bodiless_get(request)
    assert len(route.connections) == 1


async def test_a_large_upload_keeps_its_connection_for_the_next_request(kind, servers):
    """After an upload larger than the part sent with the head, answered once it had all
    arrived, the connection carries the next request: the answer is not mistaken for an
    early one (on trio the sender may not have run since its last write when the answer
    is read). Many rounds, since that window is narrow."""
    route = servers.route(answer(response(b'{"id":"file_1"}')))
    upload = multipart("b0undary", 100_000)
    form = {"content-type": "multipart/form-data; boundary=b0undary"}
    async with opened(kind) as transport:
        for _ in range(100):
            assert (await transport.post(route.url("/v1/files"), form, upload, QUICK)).status == 200
            assert (await get(transport, route.url("/v1/batches/batch_1"))).status == 200
    assert len(route.seen) == 200
    assert len(route.connections) == 1


async def _hang_up(peer: Peer, request: Request, route: Route) -> bool:
    return False  # read, never answered: close


async def _never_answer(peer: Peer, request: Request, route: Route) -> bool:
    await peer.wait_closed()  # until the client gives up
    return False


CUT_CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n5\r\nwor"
CUT_LENGTH = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b'{"cut": "he'


@dataclass(frozen=True)
class Failure:
    """A way for a request to fail, and the error it must raise."""

    error: type[ProviderError]
    handler: Handler | None  # how the route answers; None: nothing listens
    on: str = "plain"  # the listener
    proxy: str | None = None  # the variable naming the test proxy
    proxy_down: bool = False  # ... or a port nothing listens on
    proxy_credentials: bool = False  # the proxy wants some (that the request lacks)
    timeouts: Timeouts = QUICK


FAILURES = {
    "refused": Failure(ProviderUnavailable, None),
    "wrong-certificate": Failure(ProviderUnavailable, answer(response()), on="wrong_name"),
    "cut-content-length": Failure(ProviderUnavailable, answer(CUT_LENGTH, keep=False)),
    "cut-chunked": Failure(ProviderUnavailable, answer(CUT_CHUNKED, keep=False)),
    "oversized": Failure(ProviderError, answer(OVERSIZED["chunked"], keep=False)),
    "gzip-bomb": Failure(ProviderError, answer(OVERSIZED["gzip-bomb"], keep=False)),
    "garbage-status": Failure(ProviderUnavailable, answer(b"SMTP ready\r\n\r\n", keep=False)),
    "hung-up": Failure(ProviderUnavailable, _hang_up),
    "read-timeout": Failure(ProviderTimeout, _never_answer, timeouts=Timeouts(read=0.5)),
    "total-timeout": Failure(ProviderTimeout, drip, timeouts=DRIP_TIMEOUTS),
    "proxy-407-http": Failure(
        AuthenticationError, answer(response()), proxy="HTTP_PROXY", proxy_credentials=True
    ),
    "proxy-407-https": Failure(
        AuthenticationError,
        answer(response()),
        on="tls",
        proxy="HTTPS_PROXY",
        proxy_credentials=True,
    ),
    "proxy-down": Failure(
        ProviderUnavailable, answer(response()), proxy="HTTP_PROXY", proxy_down=True
    ),
}


@pytest.mark.parametrize("case", list(FAILURES))
async def test_a_get_fails_as_a_post_does(kind, servers, monkeypatch, trust_ca, small_cap, case):
    """Whatever fails a POST (a refused connection, a certificate for another name, a body
    cut short or too large, a server that hangs up, is silent or drips, a proxy that wants
    credentials or is down) fails a GET the same way: the same ProviderError subclass, the
    same message, `refused` alike."""
    failure = FAILURES[case]
    with refusing_port() as closed:
        if failure.handler is None:
            url = f"http://127.0.0.1:{closed}/v1/batches/batch_1"
        else:
            url = servers.route(failure.handler).url("/v1/batches/batch_1", on=failure.on)
        if failure.proxy_credentials:
            servers.proxy.reset(authorization=basic("bob:secret"))
        if failure.proxy is not None:
            port = closed if failure.proxy_down else servers.proxy.port
            monkeypatch.setenv(failure.proxy, f"http://127.0.0.1:{port}")
        errors = []
        async with opened(kind) as transport:
            for method in METHODS:
                with pytest.raises(failure.error) as caught:
                    await send(transport, method, url, failure.timeouts)
                errors.append(caught.value)
    posted, got = errors
    assert type(got) is type(posted)
    assert str(got) == str(posted)
    assert got.refused == posted.refused == (case == "refused")

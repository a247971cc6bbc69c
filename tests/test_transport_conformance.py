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
import json
import os
import socket
import ssl
import threading
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

import vitals_engine as ve
from tests.netservers import (
    OPENAI_COMPLETION,
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
from vitals_engine import AuthenticationError, ProviderTimeout, ProviderUnavailable
from vitals_engine.transport import aiohttp_client, http11, httpx_client
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
    for module in (http11, aiohttp_client, httpx_client):
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
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with opened(kind) as transport:
        for host in ("127.0.0.1", "localhost"):
            with pytest.raises(ProviderUnavailable, match="cannot connect to") as info:
                await post(transport, f"http://{host}:{port}/v1/chat/completions")
            assert info.value.refused
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
    """A body over the limit, however framed, or one that decompresses past it, is
    ProviderUnavailable naming the limit."""
    route = servers.route(answer(OVERSIZED[framing], keep=False))
    async with opened(kind) as transport:
        with pytest.raises(ProviderUnavailable, match=r"larger than the \d+ MiB limit"):
            await post(transport, route.url())


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


async def test_redirect_loop_stops_after_max_redirects(kind, servers):
    """A 307 to itself is followed MAX_REDIRECTS times; then the 307 is the response."""

    async def loop(peer: Peer, request: Request, route: Route) -> bool:
        await peer.send(response(b"{}", f"307 Again\r\nLocation: {route.path}/again"))
        return True

    route = servers.route(loop)
    async with opened(kind) as transport:
        reply = await post(transport, route.url())
    assert reply.status == 307
    assert len(route.seen) == MAX_REDIRECTS + 1


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

"""Http11Transport through proxies named by the environment: absolute-form requests for
http://, CONNECT tunnels for https://, refusals, and pools kept apart from direct ones."""

from __future__ import annotations

import base64

import pytest

from tests.addresses import refusing_port
from tests.netservers import (
    Peer,
    RawServer,
    answer_each,
    connect_proxy,
    counting_proxy,
    raw_server,
    response,
    server_names,
)
from tests.test_http11 import (
    HEADERS,
    QUICK,
    no_proxy_env,  # noqa: F401 (a fixture)
    post,
    tls,  # noqa: F401 (a fixture)
    transport,
)
from vitals_engine import (
    AuthenticationError,
    ConfigError,
    ProviderError,
    ProviderUnavailable,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_retries", "no_proxy_env")]


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


# -- http:// through a proxy ------------------------------------------------------------------


async def test_http_goes_to_the_proxy_in_absolute_form_with_its_credentials(monkeypatch):
    """An http:// URL goes to HTTP_PROXY as `POST http://host:port/path`, with the origin's
    Host and the proxy's Basic credentials, over one keep-alive connection."""
    answer = response(b'{"via":"proxy"}')
    async with raw_server(answer_each(answer)) as proxy, transport() as client:
        monkeypatch.setenv("HTTP_PROXY", f"http://us%40er:p%3Ass@127.0.0.1:{proxy.port}")
        url = "http://api.example.test:8080/v1/chat?x=1"  # never resolved: the proxy answers
        for _ in range(2):
            assert (await post(client, url)).body == b'{"via":"proxy"}'
        assert client.open_connections == 1
    lines = proxy.requests[0].decode().split("\r\n")
    assert lines[0] == "POST http://api.example.test:8080/v1/chat?x=1 HTTP/1.1"
    assert "Host: api.example.test:8080" in lines
    assert f"Proxy-Authorization: {basic('us@er', 'p:ss')}" in lines
    assert (proxy.connections, len(proxy.requests)) == (1, 2)


async def test_http_through_a_proxy_without_credentials_sends_no_proxy_authorization(
    monkeypatch,
):
    """A proxy URL without user:password@ adds no Proxy-Authorization."""
    async with raw_server(answer_each(response())) as proxy, transport() as client:
        monkeypatch.setenv("http_proxy", f"127.0.0.1:{proxy.port}")  # no scheme: http
        await post(client, "http://api.example.test/v1/chat")
    head = proxy.requests[0].decode()
    assert head.startswith("POST http://api.example.test/v1/chat HTTP/1.1\r\n")
    assert "\r\nHost: api.example.test\r\n" in head
    assert "proxy-authorization" not in head.lower()


async def test_proxied_and_direct_connections_pool_apart(monkeypatch):
    """Connections through a proxy are never reused for direct requests to the same
    origin, nor the other way round; each kind is kept alive on its own."""
    async with (
        raw_server(answer_each(response())) as origin,
        counting_proxy(origin.port) as proxy,  # relays to the origin, which answers both forms
        transport() as client,
    ):
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        via = origin.url("/via")
        assert (await post(client, via)).status == 200  # resolved with the proxy, and kept so
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        direct = origin.url("/direct")
        for url in (direct, via, direct, via):
            assert (await post(client, url)).status == 200
        assert client.open_connections == 2
    assert proxy.connections == 1
    assert origin.connections == 2  # the proxy's and the direct one
    lines = [head.split(b"\r\n", 1)[0] for head in origin.requests]
    assert lines[0] == f"POST http://127.0.0.1:{origin.port}/via HTTP/1.1".encode()
    assert lines[1] == b"POST /direct HTTP/1.1"


async def test_no_proxy_sends_matching_hosts_direct(monkeypatch):
    """NO_PROXY hosts go direct even with a proxy set for every scheme."""
    async with raw_server(answer_each(response())) as origin, transport() as client:
        monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")  # would refuse: never used
        monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.0/8")
        assert (await post(client, origin.url())).status == 200
    assert origin.requests[0].startswith(b"POST /v1/chat/completions HTTP/1.1")


async def test_unreachable_proxy_is_named_without_credentials(monkeypatch):
    """A proxy that cannot be reached: ProviderUnavailable naming the proxy, never its
    password."""
    with refusing_port() as port:
        monkeypatch.setenv("HTTPS_PROXY", f"http://user:hunter2@127.0.0.1:{port}")
        async with transport() as client:
            with pytest.raises(ProviderUnavailable) as caught:
                await post(client, "https://api.example.test/v1/chat")
    message = str(caught.value)
    assert f"through the proxy http://127.0.0.1:{port}" in message
    assert "hunter2" not in message
    assert basic("user", "hunter2") not in message


async def test_a_proxy_scheme_we_cannot_use_is_a_config_error(monkeypatch):
    """A SOCKS proxy is refused when the URL is first resolved, before any connection."""
    monkeypatch.setenv("HTTPS_PROXY", "socks5://127.0.0.1:1080")
    async with transport() as client:
        with pytest.raises(ConfigError, match="HTTPS_PROXY"):
            await post(client, "https://api.example.test/v1/chat")
        assert client.open_connections == 0


# -- https:// through a CONNECT tunnel ---------------------------------------------------------


async def test_https_goes_through_a_connect_tunnel_with_tls_to_the_origin(monkeypatch, tls):  # noqa: F811
    """An https:// URL opens a CONNECT tunnel (with Host and the proxy's credentials), then
    TLS inside it, verified against the origin's name; the tunnel is kept alive."""
    server_context, client_context = tls
    with server_names(server_context) as names:
        async with (
            raw_server(answer_each(response(b'{"tls":1}')), tls=server_context) as origin,
            raw_server(connect_proxy()) as proxy,
            transport(ssl_context=client_context) as client,
        ):
            monkeypatch.setenv("HTTPS_PROXY", f"http://user:secret@127.0.0.1:{proxy.port}")
            for _ in range(3):
                assert (await post(client, origin.url(host="localhost"))).body == b'{"tls":1}'
            assert client.open_connections == 1
    authority = f"localhost:{origin.port}"
    assert proxy.requests == [
        (
            f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n"
            f"Proxy-Authorization: {basic('user', 'secret')}"
        ).encode()
    ]
    assert (proxy.connections, origin.connections, len(origin.requests)) == (1, 1, 3)
    inside = origin.requests[0].decode()
    assert inside.startswith("POST /v1/chat/completions HTTP/1.1\r\n")  # origin form inside
    assert f"\r\nHost: {authority}\r\n" in inside
    assert "proxy-authorization" not in inside.lower()  # the proxy's secret stays outside
    assert names == ["localhost"]


async def test_tunnel_to_an_untrusted_origin_cannot_connect(monkeypatch, tls):  # noqa: F811
    """TLS inside the tunnel verifies the origin: an unknown CA fails to connect."""
    server_context, _ = tls
    async with (
        raw_server(answer_each(response()), tls=server_context) as origin,
        raw_server(connect_proxy()) as proxy,
        transport() as client,
    ):
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        with pytest.raises(
            ProviderUnavailable,
            match=r"cannot connect to .* through the proxy .*CERTIFICATE_VERIFY",
        ):
            await post(client, origin.url(host="localhost"))
        assert client.open_connections == 0
    assert proxy.requests[0].startswith(f"CONNECT localhost:{origin.port} ".encode())


@pytest.mark.parametrize(
    ("status", "credentials", "error", "says"),
    [
        ("407 Proxy Authentication Required", True, AuthenticationError, "check the credentials"),
        ("407 Proxy Authentication Required", False, AuthenticationError, "wants credentials"),
        ("403 Forbidden", True, ProviderError, "NO_PROXY"),
        ("502 Bad Gateway", True, ProviderUnavailable, "could not reach the server"),
    ],
)
async def test_a_refused_tunnel_names_the_proxy_and_its_answer(
    monkeypatch, status, credentials, error, says
):
    """A proxy refusing CONNECT raises an error naming the proxy (without credentials) and
    its status: 407 an AuthenticationError about the credentials, 5xx ProviderUnavailable,
    others a ProviderError."""
    refusal = f"HTTP/1.1 {status}\r\nContent-Length: 2\r\n\r\nno".encode()
    async with raw_server(connect_proxy(refusal)) as proxy, transport() as client:
        userinfo = "user:hunter2@" if credentials else ""
        monkeypatch.setenv("HTTPS_PROXY", f"http://{userinfo}127.0.0.1:{proxy.port}")
        with pytest.raises(ProviderError) as caught:
            await post(client, "https://api.example.test/v1/chat")
        assert client.open_connections == 0
    assert type(caught.value) is error
    message = str(caught.value)
    assert f"the proxy http://127.0.0.1:{proxy.port} refused to carry a request to" in message
    assert "api.example.test:443" in message
    assert status in message
    assert says in message
    assert "hunter2" not in message
    assert basic("user", "hunter2") not in message
    assert proxy.requests[0].startswith(b"CONNECT api.example.test:443 HTTP/1.1\r\n")


async def test_proxy_closing_before_answering_connect_cannot_connect(monkeypatch):
    """A proxy that hangs up on CONNECT: ProviderUnavailable saying so."""

    async def hang_up(conn: Peer, server: RawServer) -> None:
        await conn.reader.receive_until(b"\r\n\r\n", 1 << 16)

    async with raw_server(hang_up) as proxy, transport() as client:
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        with pytest.raises(ProviderUnavailable, match="closed the connection without answering"):
            await client.post("https://api.example.test/v1", HEADERS, b"{}", QUICK)

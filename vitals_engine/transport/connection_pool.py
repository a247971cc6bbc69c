"""The connections of one `Http11Transport`: what a URL resolves to, one pool per origin
and route, and opening, checking out, giving back and closing connections.

- At most `size` connections are open per pool, in use and idle together. A pool is one
  origin (scheme, host, port) by one route: direct, or through one proxy (connections
  through a proxy never mix with direct ones). A request holds one of the pool's `slots`
  from before it takes a connection until after it gave the connection back or closed
  it, and a connection is opened only when no idle one passes the check
  (`Connection.quiet()`). Idle connections are reused last-in, first-out.
- A connection goes back to its pool only when the exchange that used it says it may,
  with nothing left in its buffer, and while the transport is open.
- Opening one: `Timeouts.connect` bounds the TCP connect, a proxy's answer to CONNECT
  and the TLS handshake. An https:// URL through a proxy goes through a CONNECT tunnel,
  inside which TLS runs with the origin's name; a refused tunnel is an error naming the
  proxy and its answer (407: `AuthenticationError`; 5xx: `ProviderUnavailable`; others:
  `ProviderError`), never its credentials. TLS: `tls.default_tls()` unless a context is
  given.
"""

from __future__ import annotations

import ssl
from urllib.parse import quote, urlsplit

import anyio
import anyio.abc
from anyio.streams.tls import TLSStream

from .._errors import ProviderUnavailable
from .base import Timeouts, describe, refusal
from .connection import RECEIVE, Connection, ProtocolError, attempt_timed_out
from .proxies import Proxy, proxy_for, proxy_refused
from .response import MAX_HEADER_BYTES, parse_head
from .tls import default_tls

__all__ = ["ConnectionPool", "HostPool", "Target"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
_MAX_TARGETS = 1024  # distinct URLs whose request line we keep


class HostPool:
    """The connections of one pool (origin and route): idle ones and the slots to use one."""

    __slots__ = ("idle", "slots")

    def __init__(self, size: int) -> None:
        self.slots = anyio.Semaphore(size)
        self.idle: list[Connection] = []


class Target:
    """What a URL resolves to: where to connect, through which proxy, and the start of
    each request."""

    __slots__ = ("authority", "host", "pool", "port", "prefix", "proxy", "tls")

    def __init__(
        self,
        host: str,
        port: int,
        tls: bool,
        prefix: bytes,
        pool: HostPool,
        proxy: Proxy | None,
    ) -> None:
        self.host = host
        self.port = port
        self.tls = tls
        self.prefix = prefix  # from the request line after its method; Proxy-Authorization too
        self.pool = pool
        self.proxy = proxy
        self.authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class ConnectionPool:
    """Every connection of one transport, by pool, and the targets of the URLs seen."""

    def __init__(self, size: int, ssl_context: ssl.SSLContext | None = None) -> None:
        self.size = size
        self.hosts: dict[tuple[str, str, int, Proxy | None], HostPool] = {}
        self.targets: dict[str, Target] = {}
        #: Every connection open now, in use and idle.
        self.connections: set[Connection] = set()
        self.closed = False
        self._ssl_context = ssl_context

    def target(self, url: str) -> Target:
        """Where a request to `url` goes (made once per URL: its proxy is read then)."""
        return self.targets.get(url) or self._target(url)

    def _target(self, url: str) -> Target:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        host = parts.hostname
        if scheme not in _DEFAULT_PORTS or not host:
            raise ValueError(f"Http11Transport takes http:// and https:// URLs, not {url!r}")
        port = parts.port or _DEFAULT_PORTS[scheme]
        authority = f"[{host}]" if ":" in host else host
        if parts.port is not None and parts.port != _DEFAULT_PORTS[scheme]:
            authority += f":{parts.port}"
        path = quote(parts.path or "/", safe="/%:@!$&'()*+,;=-._~")
        if parts.query:
            path += "?" + quote(parts.query, safe="/%:@!$&'()*+,;=-._~?")
        proxy = proxy_for(url)
        if proxy is not None and scheme == "http":  # absolute form, to the proxy
            prefix = f" http://{authority}{path} HTTP/1.1\r\nHost: {authority}\r\n"
            if proxy.authorization is not None:
                prefix += f"Proxy-Authorization: {proxy.authorization}\r\n"
        else:  # direct, or inside a CONNECT tunnel
            prefix = f" {path} HTTP/1.1\r\nHost: {authority}\r\n"
        key = (scheme, host, port, proxy)
        pool = self.hosts.get(key)
        if pool is None:
            pool = self.hosts[key] = HostPool(self.size)
        if len(self.targets) >= _MAX_TARGETS:
            self.targets.clear()
        target = Target(host, port, scheme == "https", prefix.encode("latin-1"), pool, proxy)
        self.targets[url] = target
        return target

    async def checkout(
        self,
        target: Target,
        url: str,
        timeouts: Timeouts,
        limit: float,
        spoilt: Connection | None = None,
    ) -> Connection:
        """The most recent idle connection on which nothing is waiting, or a new one
        (`spoilt`: one already taken from the idle ones that failed the check)."""
        if spoilt is not None:
            await self.discard(spoilt)
        idle = target.pool.idle
        while idle:
            conn = idle.pop()
            if conn.quiet():
                return conn
            await self.discard(conn)  # closed by the server, or bytes nobody asked for
        return await self.connect(target, url, timeouts, limit)

    async def connect(
        self, target: Target, url: str, timeouts: Timeouts, limit: float
    ) -> Connection:
        """A new connection to `target` (through its proxy, TLS on top for https), within
        the connect timeout and before `limit`."""
        proxy = target.proxy
        via = "" if proxy is None else f" through the proxy {proxy.url}"
        deadline = anyio.current_time() + timeouts.connect
        stream: anyio.abc.ByteStream | None = None
        done = False
        try:
            with anyio.CancelScope(deadline=deadline if deadline < limit else limit):
                if proxy is None:
                    stream = await anyio.connect_tcp(target.host, target.port)
                else:
                    stream = await anyio.connect_tcp(proxy.host, proxy.port)
                    if target.tls:
                        await _tunnel(stream, target, proxy)
                if target.tls:
                    stream = await TLSStream.wrap(
                        stream,
                        hostname=target.host,
                        ssl_context=self._tls(),
                        standard_compatible=False,
                    )
                done = True
        except BaseException as exc:
            if stream is not None:
                await anyio.aclose_forcefully(stream)
            if isinstance(exc, (OSError, anyio.BrokenResourceError, anyio.EndOfStream)):
                error = ProviderUnavailable(f"cannot connect to {url}{via}: {describe(exc)}")
                raise (error if proxy else refusal(error, exc)) from exc
            if isinstance(exc, ProtocolError):
                raise ProviderUnavailable(f"cannot connect to {url}{via}: {exc}") from None
            raise
        if not done or stream is None:
            if stream is not None:
                await anyio.aclose_forcefully(stream)
            raise attempt_timed_out(url + via, timeouts, limit, "connect")
        if self.closed:  # aclose() ran while we connected
            await anyio.aclose_forcefully(stream)
            raise ProviderUnavailable(f"connection to {url} failed: the transport was closed")
        conn = Connection(stream)
        self.connections.add(conn)
        return conn

    def _tls(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            self._ssl_context = default_tls()
        return self._ssl_context

    async def release(self, target: Target, conn: Connection, keep: bool) -> None:
        """Put a connection whose exchange ended back in its pool if it may carry another
        request, else close it."""
        if keep and conn.open and not conn.buffer and not self.closed:
            conn.reused = True
            target.pool.idle.append(conn)
        else:
            conn.buffer.clear()
            await self.discard(conn)

    async def discard(self, conn: Connection) -> None:
        """Close a connection (once)."""
        if conn.open:
            conn.open = False
            self.connections.discard(conn)
            await anyio.aclose_forcefully(conn.stream)

    async def aclose(self) -> None:
        """Close every connection, idle or in use; requests in flight then fail."""
        self.closed = True
        connections, self.connections = list(self.connections), set()
        for pool in self.hosts.values():
            pool.idle.clear()
        for conn in connections:
            conn.open = False
            await anyio.aclose_forcefully(conn.stream)


async def _tunnel(stream: anyio.abc.ByteStream, target: Target, proxy: Proxy) -> None:
    """Ask `proxy` for a CONNECT tunnel to the target's host and port, on `stream`."""
    authority = target.authority
    request = f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n"
    if proxy.authorization is not None:
        request += f"Proxy-Authorization: {proxy.authorization}\r\n"
    await stream.send((request + "\r\n").encode("latin-1"))
    buf = bytearray()
    while True:  # until a final (non-1xx) answer
        while (end := buf.find(b"\r\n\r\n")) < 0:
            if len(buf) > MAX_HEADER_BYTES:
                raise ProtocolError(
                    f"the proxy's answer to CONNECT is larger than {MAX_HEADER_BYTES >> 10} KiB"
                )
            try:
                buf += await stream.receive(RECEIVE)
            except anyio.EndOfStream:
                raise ProtocolError(
                    "the proxy closed the connection without answering CONNECT"
                ) from None
        head = buf[:end].decode("latin-1")
        status, _, _ = parse_head(head)
        del buf[: end + 4]
        if status >= 200:
            break
    if 200 <= status < 300:
        if buf:
            raise ProtocolError("the proxy sent bytes after accepting the tunnel")
        return
    raise proxy_refused(proxy, authority, status, head.split("\r\n", 1)[0][13:])

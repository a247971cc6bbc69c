"""The transport seam: POST a body (or GET a resource), get status, headers and body back.

Providers never touch an HTTP library; they hand a `Transport` the URL, headers,
encoded body (none for a GET) and `Timeouts(connect, read, total)`. Three
implementations, one module each (`pool.py` picks one):

- `Http11Transport` (`http11.py`), the default on asyncio and trio: our own
  HTTP/1.1 client over anyio streams, 0.12-0.2 ms CPU per request.
- `AiohttpTransport` (`aiohttp_client.py`): aiohttp's client on asyncio
  (`VITALS_TRANSPORT=aiohttp`), 0.26-0.67 ms CPU per request.
- `HttpxTransport` (`httpx_client.py`): used whenever the user hands us an
  `httpx.AsyncClient` (custom auth, its own TLS settings), used as it is, or with
  `VITALS_TRANSPORT=httpx`.

They follow the same rules (`tests/test_transport_conformance.py` runs the same cases
against each): proxies as HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY say
(`proxies.proxy_for`); the system's certificates, or those SSL_CERT_FILE / SSL_CERT_DIR
name (`tls.default_tls`); gzip and deflate bodies decoded, no body over 256 MiB raw or
decoded (`decoding.py`); redirects to the same origin followed (`same_origin_redirect`): 307
and 308 for a POST, also 301, 302 and 303 for a GET.

Errors: `ProviderTimeout` when a limit of `Timeouts` runs out: `connect` for the
connection, `read` for each wait for bytes of the answer, `total` a deadline for one
whole attempt (redirects and a streamed body included; 1800 s unless told, None for
none). `ProviderUnavailable` for connections that fail or drop and for bodies refused.
A proxy's refusal is `proxies.proxy_refused`: 407 an `AuthenticationError`, 5xx
`ProviderUnavailable`, naming the proxy. The provider fills in its name and model.
`ConfigError` for a `Timeouts` made with a limit that is not a positive finite number.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from math import inf
from typing import Any, Literal
from urllib.parse import urljoin, urlsplit

import anyio

from .._errors import ConfigError, ProviderTimeout, ProviderUnavailable

__all__ = [
    "MAX_REDIRECTS",
    "OWN_HEADERS",
    "HttpResponse",
    "StreamedResponse",
    "Timeouts",
    "Transport",
    "deadline",
    "describe",
    "lower_headers",
    "refusal",
    "same_origin_redirect",
    "timed_out",
]

#: How many redirects to the same server one request follows.
MAX_REDIRECTS = 5
#: The redirects each method follows to the same origin: a POST only those that keep its
#: method and body (307, 308), a GET every one, since it stays a GET either way.
_FOLLOWED = {"POST": frozenset((307, 308)), "GET": frozenset((301, 302, 303, 307, 308))}
#: Request headers a transport writes itself; the caller's own are dropped.
OWN_HEADERS = frozenset(
    ("host", "content-length", "transfer-encoding", "connection", "accept-encoding")
)


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Per-attempt limits, in seconds: to connect, between bytes (or events) read, and for
    the whole attempt, so a server dripping one byte at a time cannot hold it forever
    (`total=None`: no deadline). Each is a positive finite number of seconds.

    Example:
        >>> chat_anthropic(timeouts=Timeouts(read=120, total=3600))  # long reasoning streams
    """

    connect: float = 10.0
    read: float = 600.0
    total: float | None = 1800.0

    def __post_init__(self) -> None:
        for name in ("connect", "read", "total"):
            value = getattr(self, name)
            if value is None and name == "total":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < inf:
                raise ConfigError(
                    f"Timeouts({name}={value!r}) must be a positive finite number of seconds"
                    + (", or None for no limit." if name == "total" else ".")
                )


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """A response: status, headers (lower-cased names) and the raw body."""

    status: int
    headers: Mapping[str, str]
    body: bytes


class StreamedResponse(ABC):
    """A response handed over as it arrives: status and headers first, then the body.

    Example:
        >>> async with transport.stream(url, headers, body, timeouts) as response:
        ...     if response.status >= 400:
        ...         error = await response.read()
        ...     async for chunk in response.chunks():
        ...         ...
    """

    status: int
    headers: Mapping[str, str]  # lower-cased names

    @abstractmethod
    def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive, decompressed; each wait for more is bounded by
        the read timeout. A body cut short raises `ProviderUnavailable` at the cut."""

    async def read(self) -> bytes:
        """The rest of the body at once (for an error answer)."""
        return b"".join([chunk async for chunk in self.chunks()])


class _Whole(StreamedResponse):
    """A response already read in full, handed over as one chunk."""

    def __init__(self, response: HttpResponse) -> None:
        self.status = response.status
        self.headers = response.headers
        self._body = response.body

    async def chunks(self) -> AsyncIterator[bytes]:
        body, self._body = self._body, b""
        if body:
            yield body


class Transport(ABC):
    """Sends POST and GET requests over a pool of connections."""

    @abstractmethod
    async def post(
        self, url: str, headers: Mapping[str, str], body: bytes, timeouts: Timeouts
    ) -> HttpResponse:
        """POST `body` to `url` and return the whole response."""

    async def get(self, url: str, headers: Mapping[str, str], timeouts: Timeouts) -> HttpResponse:
        """GET `url` and return the whole response, as `post` does: the same timeouts,
        errors, decoding, body limit, connections and proxies. No body goes out, and no
        Content-Length (RFC 9110 8.6). A 301, 302, 303, 307 or 308 to the same origin is
        followed, still a GET with the same headers, at most `MAX_REDIRECTS` times; any
        other redirect, one to another origin too (the credentials stay with their origin),
        comes back as the response, its Location in the headers.

        The shipped transports implement it; this fallback raises NotImplementedError.

        Example:
            >>> response = await transport.get(f"{base}/v1/batches/{batch}", auth, Timeouts())
            >>> json.loads(response.body)["status"]
            'completed'
        """
        raise NotImplementedError(f"{type(self).__name__} cannot send GET requests")

    def stream(
        self, url: str, headers: Mapping[str, str], body: bytes, timeouts: Timeouts
    ) -> AbstractAsyncContextManager[StreamedResponse]:
        """POST `body` to `url` and hand the response over as it arrives. Leaving the block
        gives the connection back, or closes it if the body was not read to its end.

        This fallback reads the whole response first; a transport that can do better
        overrides it.
        """
        return _buffered(self, url, headers, body, timeouts)

    @abstractmethod
    async def aclose(self) -> None:
        """Close the pool's connections."""


def lower_headers(headers: Any) -> dict[str, str]:
    """A response's headers (a mapping, or a multi-dict whose `items()` repeats names) as a
    dict with lower-cased names, a repeated header's values joined with ", " in the order
    they came, as `Http11Transport` reads them.

    Example:
        >>> lower_headers(CIMultiDict([("Vary", "a"), ("vary", "b")]))
        {'vary': 'a, b'}
    """
    lowered: dict[str, str] = {}
    for name, value in headers.items():
        name = name.lower()
        if name in lowered:
            lowered[name] += ", " + value
        else:
            lowered[name] = value
    return lowered


def deadline(timeouts: Timeouts) -> float:
    """When an attempt starting now must have ended (`timeouts.total`), on anyio's clock."""
    total = timeouts.total
    return anyio.current_time() + total if total is not None else inf


def timed_out(
    url: str, timeouts: Timeouts, what: Literal["connect", "read", "total"], why: str = ""
) -> ProviderTimeout:
    """The error for a wait on `url` that ran out of time: `what` names the limit of
    `timeouts` that ended it, `why` (if given) what the library said."""
    why = f": {why}" if why else ""
    if what == "total":
        return ProviderTimeout(
            f"no complete answer from {url} in time (total timeout of {timeouts.total:g} s "
            f"for the whole attempt{why}): raise Timeouts.total for longer answers"
        )
    if what == "connect":
        return ProviderTimeout(
            f"no connection to {url} in time (connect timeout of {timeouts.connect:g} s{why})"
        )
    return ProviderTimeout(
        f"no answer from {url} in time (read timeout of {timeouts.read:g} s{why})"
    )


def describe(exc: BaseException, depth: int = 0) -> str:
    """What went wrong, with its causes, or else what it was raised while handling (even
    when hidden: the wrappers of anyio, httpx and httpcore often say little themselves)."""
    cause = exc.__cause__ or exc.__context__
    text = str(exc)
    if not text and cause is not None:  # e.g. BrokenResourceError from ConnectionResetError
        return describe(cause, depth)
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    if cause is not None and depth < 2:
        said = str(cause)
        if not said or said not in text:  # not when the wrapper repeats its cause
            text += f" ({describe(cause, depth + 1)})"
    return text


def _refused(exc: BaseException) -> bool:
    """Whether a ConnectionRefusedError lies under `exc` (its causes, the context it was
    raised in, an `os_error`, the members of an exception group)."""
    seen: set[int] = set()
    stack = [exc]
    while stack:
        error = stack.pop()
        if id(error) in seen:
            continue
        seen.add(id(error))
        if isinstance(error, ConnectionRefusedError):
            return True
        if isinstance(error, BaseExceptionGroup):
            stack.extend(error.exceptions)
        for under in (error.__cause__, error.__context__, getattr(error, "os_error", None)):
            if isinstance(under, BaseException):
                stack.append(under)
    return False


def refusal(error: ProviderUnavailable, exc: BaseException) -> ProviderUnavailable:
    """`error` (a failure to connect straight to the server), marked `refused` when `exc`,
    what the connect raised, was a refusal: nothing listens at that address."""
    if _refused(exc):
        error.refused = True
    return error


@asynccontextmanager
async def _buffered(
    transport: Transport, url: str, headers: Mapping[str, str], body: bytes, timeouts: Timeouts
) -> AsyncIterator[StreamedResponse]:
    yield _Whole(await transport.post(url, headers, body, timeouts))


def same_origin_redirect(
    url: str, status: int, headers: Mapping[str, str], method: Literal["POST", "GET"] = "POST"
) -> str | None:
    """Where a redirect answer to a `method` request of `url` points, if that request
    follows it (a POST: 307 and 308, which keep its method and body; a GET: 301, 302, 303,
    307 and 308) and it points to the same scheme, host and port (so the body and the
    credentials may go there too); otherwise None: the answer is handed over as it is and
    the provider names the redirect.

    Example:
        >>> same_origin_redirect("https://h/v1/x", 308, {"location": "/v2/x"})
        'https://h/v2/x'
        >>> same_origin_redirect("https://h/v1/x", 302, {"location": "/v2/x"}, "GET")
        'https://h/v2/x'
    """
    if status not in _FOLLOWED[method]:
        return None
    location = headers.get("location")
    if not location:
        return None
    target = urljoin(url, location)
    return target if _origin(target) == _origin(url) else None


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, parts.hostname, parts.port or {"http": 80, "https": 443}.get(scheme)

"""One connection of our HTTP/1.1 client (`http11.py`): its stream and the bytes read but
not yet parsed, whether it is quiet enough to reuse, each wait for more bytes within the
request's deadlines, and how a failure while it is in use reads as a provider error.

A connection is reused only if nothing is readable on it: a zero-timeout poll of its
socket (and of the TLS layer's decrypted bytes) must find no byte and no EOF
(`Connection.quiet()`).
"""

from __future__ import annotations

import select
import ssl
from typing import Any, Literal

import anyio
import anyio.abc
from anyio.abc import SocketAttribute
from anyio.streams.tls import TLSAttribute

from .._errors import ProviderError, ProviderTimeout, ProviderUnavailable
from .base import Timeouts, describe, timed_out
from .decoding import BodyError, refused_body

__all__ = [
    "RECEIVE",
    "Connection",
    "Deadline",
    "NoAnswer",
    "ProtocolError",
    "SendFailed",
    "Unsent",
    "attempt_timed_out",
    "failure",
    "receive",
]

#: Bytes asked of each receive().
RECEIVE = 65536
_HAS_POLL = hasattr(select, "poll")


class ProtocolError(Exception):
    """The server broke HTTP/1.1, or a limit: the message says how. (A body over the limit or
    that does not decode is a `BodyError`.)"""


class Unsent(Exception):
    """Sending failed on a reused connection: the server never had the whole request."""


class NoAnswer(Exception):
    """The connection ended after the request was sent, before any byte of an answer."""


class SendFailed(Exception):
    """Sending failed on a fresh connection and no answer had come (the cause says how)."""


class Deadline(Exception):
    """A streamed body's wait for more bytes ran out of time (read or total)."""


class Connection:
    """One keep-alive connection: its stream and the bytes read but not yet parsed."""

    __slots__ = ("buffer", "open", "poller", "reused", "sock", "ssl_object", "stream")

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self.open = True
        self.reused = False  # True once it carried a whole response
        self.sock: Any = stream.extra(SocketAttribute.raw_socket, None)
        self.poller: Any = None
        if _HAS_POLL and self.sock is not None:
            self.poller = select.poll()
            self.poller.register(self.sock.fileno(), select.POLLIN)
        self.ssl_object: ssl.SSLObject | None = stream.extra(TLSAttribute.ssl_object, None)

    def quiet(self) -> bool:
        """Whether nothing (no byte, no EOF, no error) is waiting to be read: safe to reuse."""
        if self.poller is not None:
            if self.poller.poll(0):
                return False
        elif self.sock is not None and select.select([self.sock], [], [], 0)[0]:
            return False
        return self.ssl_object is None or not self.ssl_object.pending()


async def receive(
    stream: anyio.abc.ByteStream, scope: anyio.CancelScope, read: float, limit: float
) -> bytes:
    """The next bytes, within `read` seconds from now and before `limit` (`scope` is the
    request's)."""
    deadline = anyio.current_time() + read
    scope.deadline = deadline if deadline < limit else limit
    return await stream.receive(RECEIVE)


def failure(exc: BaseException, url: str) -> ProviderError | None:
    """The provider error for a failure while a connection was in use (None: not ours)."""
    if isinstance(exc, NoAnswer):
        cause = exc.__cause__
        how = (
            "the server closed the connection"
            if cause is None or isinstance(cause, anyio.EndOfStream)
            else f"the connection broke ({describe(cause)})"
        )
        return ProviderUnavailable(
            f"connection to {url} failed: {how} after the request was sent and before any "
            "answer. It was not sent again, since the server may have acted on it; the retry "
            "policy decides whether to try again"
        )
    if isinstance(exc, SendFailed):
        cause = exc.__cause__
        why = describe(cause) if cause is not None else "the connection broke"
        return ProviderUnavailable(f"connection to {url} failed while sending the request: {why}")
    if isinstance(exc, anyio.EndOfStream):
        return ProviderUnavailable(
            f"connection to {url} failed: the server closed the connection before the "
            "response was complete"
        )
    if isinstance(exc, anyio.ClosedResourceError):
        return ProviderUnavailable(f"connection to {url} failed: the transport was closed")
    if isinstance(exc, BodyError):
        return refused_body(url, exc)
    if isinstance(exc, ProtocolError):
        return ProviderUnavailable(f"connection to {url} failed: {exc}")
    if isinstance(exc, (anyio.BrokenResourceError, OSError)):  # OSError: e.g. ssl.SSLError
        return ProviderUnavailable(f"connection to {url} failed: {describe(exc)}")
    return None


def attempt_timed_out(
    url: str, timeouts: Timeouts, limit: float, what: Literal["connect", "read"] = "read"
) -> ProviderTimeout:
    """The timeout that ended a wait: the attempt's total, or `what` (read or connect)."""
    if anyio.current_time() >= limit and timeouts.total is not None:
        return timed_out(url, timeouts, "total")
    return timed_out(url, timeouts, what)

"""Writing a request of our HTTP/1.1 client (`http11.py`): the caller's header lines,
checked; the request's bytes; and sending a large body while the answer is read.

- Header names must be RFC 9110 tokens and values free of CR, LF and NUL, or a
  ValueError is raised before anything is sent; Host, Content-Length,
  Transfer-Encoding, Connection and Accept-Encoding are ours. A POST's body goes as
  given, with its Content-Length; a GET has neither.
- A body over 64 KiB is sent while the answer is read: an answer that arrives before
  the body has all gone (a 413) is returned, even when the server then closes; the rest
  is not sent and the connection is not reused. When sending fails on a fresh
  connection, an answer already received is looked for (briefly) and returned the same
  way (`early_answer()`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import anyio
import anyio.lowlevel

from .base import OWN_HEADERS
from .connection import Connection, NoAnswer, ProtocolError, SendFailed, Unsent
from .decoding import ACCEPT_ENCODING
from .response import read_head

__all__ = ["early_answer", "header_lines", "request_bytes", "send_watching"]

_JOIN_BODY = 65536  # bodies up to this size go out in the same write as the head
_EARLY_ANSWER = 1.0  # seconds to look for an answer already received after a send failed
#: A POST's head, `% (target's prefix, the caller's header lines, body length)`.
_HEAD = b"POST%b%bContent-Length: %d\r\nAccept-Encoding: " + ACCEPT_ENCODING.encode() + b"\r\n\r\n"
#: A GET's head, `% (target's prefix, the caller's header lines)`: no body, no Content-Length.
_GET_HEAD = b"GET%b%bAccept-Encoding: " + ACCEPT_ENCODING.encode() + b"\r\n\r\n"
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 token: a field name
_TOKENS: set[str] = set()  # header names already found to be tokens
_MAX_TOKENS = 4096


def header_lines(headers: Mapping[str, str]) -> bytes:
    """The caller's header lines (ours dropped), refusing what cannot be sent."""
    if not _TOKENS.issuperset(headers):
        _check_names(headers)
    lines = [f"{k}: {v}\r\n" for k, v in headers.items() if k.lower() not in OWN_HEADERS]
    text = "".join(lines)
    if text.count("\n") != len(lines) or text.count("\r") != len(lines) or "\0" in text:
        raise ValueError("a header value holds a line break or NUL")
    return text.encode("latin-1")


def _check_names(headers: Mapping[str, str]) -> None:
    """Refuse a header name that is not a token; remember those that are."""
    for name in headers:
        if name not in _TOKENS:
            if _TOKEN.fullmatch(name) is None:
                raise ValueError(
                    f"the header name {name!r} is not an HTTP field name: an RFC 9110 token "
                    "(letters, digits and !#$%&'*+-.^_`|~), without spaces or colons"
                )
            if len(_TOKENS) >= _MAX_TOKENS:
                _TOKENS.clear()
            _TOKENS.add(name)


def request_bytes(prefix: bytes, fields: bytes, body: bytes | None) -> tuple[bytes, bytes]:
    """The request's bytes: (head and body joined, b"") for a small body, else (head, body);
    a GET's head alone when `body` is None. `prefix`: the request line from after its
    method, with Host (and a proxy's authorization); `fields`: the caller's header lines."""
    if body is None:
        return _GET_HEAD % (prefix, fields), b""
    head = _HEAD % (
        prefix,
        fields,
        len(body),
    )
    return (head + body, b"") if len(body) <= _JOIN_BODY else (head, body)


async def early_answer(
    conn: Connection,
    scope: anyio.CancelScope,
    read: float,
    limit: float,
    failure: BaseException,
) -> tuple[int, dict[str, str], bool]:
    """After a failed send: an answer the server had already sent (a 413 before closing),
    if one can be read at once; otherwise `SendFailed`."""
    with anyio.move_on_after(_EARLY_ANSWER):
        try:
            return await read_head(conn, scope, read, limit)
        except (NoAnswer, ProtocolError, anyio.EndOfStream, anyio.BrokenResourceError):
            pass
    raise SendFailed from failure


async def send_watching(
    conn: Connection,
    head: bytes,
    body: bytes,
    scope: anyio.CancelScope,
    read: float,
    limit: float,
) -> tuple[int, dict[str, str], bool]:
    """Send a large request while reading the answer, which may come before the end (a
    413): then stop sending, and never reuse the connection."""
    stream = conn.stream
    sent = anyio.Event()
    failed: list[BaseException] = []

    async def send() -> None:
        try:
            await stream.send(head)
            await stream.send(body)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            failed.append(exc)
        finally:
            sent.set()

    answer: tuple[int, dict[str, str], bool] | None = None
    error: BaseException | None = None
    early = True
    async with anyio.create_task_group() as tg:
        tg.start_soon(send)
        try:
            answer = await read_head(conn, scope, read, limit)
        except (NoAnswer, anyio.EndOfStream, anyio.BrokenResourceError) as exc:
            await sent.wait()  # did the whole request go out? (the connection is dead: soon)
            if not failed:
                error = exc
            elif conn.reused:
                error = Unsent()
                error.__cause__ = failed[0]
            else:
                error = SendFailed()
                error.__cause__ = failed[0]
        except Exception as exc:  # raised after the task group, never wrapped in a group
            error = exc
        if answer is not None and not sent.is_set():
            # A sender whose last write is done may not have run since to say so (trio, with
            # a quick server): once it has, only a send still under way makes this early.
            await anyio.lowlevel.checkpoint()
        early = bool(failed) or not sent.is_set()  # answered before all of it had gone
        tg.cancel_scope.cancel()  # done sending, or an early answer: stop
    if error is not None:
        raise error
    assert answer is not None
    return (answer[0], answer[1], False) if early else answer

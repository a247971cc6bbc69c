"""Reading a response of our HTTP/1.1 client (`http11.py`): the head (status line and
headers, 1xx skipped), how the body is delimited, and the body itself, whole
(`read_body()`) or piece by piece as it arrives (`BodyReader`, `Streamed`).

- Limits: a header block (and a chunked body's trailers) of at most 64 KiB and a body
  (after decompression, which never inflates past that limit in memory) of at most
  `MAX_BODY_BYTES` (256 MiB); beyond them the request fails.
- Delimiting: `Content-Length` (repeats must agree), `Transfer-Encoding: chunked`
  (trailers are read and dropped) or, with neither, to EOF (that connection is then not
  reused); no body for 204 and 304. `Connection: close` and HTTP/1.0 without keep-alive
  say the connection is not reused.
- gzip and deflate bodies are decompressed (incrementally when streamed) by
  `decoding.py`, as on every transport.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import anyio

from .base import StreamedResponse, Timeouts
from .connection import (
    RECEIVE,
    Connection,
    Deadline,
    NoAnswer,
    ProtocolError,
    attempt_timed_out,
    failure,
    receive,
)
from .decoding import MAX_BODY_BYTES, BodyError, decoder_for, decompress, too_large

__all__ = [
    "CHUNKED",
    "EOF",
    "LENGTH",
    "MAX_BODY_BYTES",
    "MAX_HEADER_BYTES",
    "NONE",
    "NO_BODY",
    "BodyReader",
    "Streamed",
    "body_framing",
    "content_length",
    "parse_head",
    "read_body",
    "read_head",
]

#: The most bytes a response's status line and headers may take.
MAX_HEADER_BYTES = 64 * 1024
#: Statuses whose responses have no body.
NO_BODY = frozenset((204, 304))
_MAX_CHUNK_LINE = 4096  # a chunk-size line, extensions included
_HEX = b"0123456789abcdefABCDEF"


def parse_head(text: str) -> tuple[int, dict[str, str], bool]:
    """Status, headers (lower-case names, repeats joined) and whether to keep the connection."""
    lines = text.split("\r\n")
    status = lines[0]
    code = status[9:12]
    if (
        not status.startswith("HTTP/1.")
        or status[8:9] != " "
        or len(code) != 3
        or not code.isdecimal()
        or status[12:13] not in ("", " ")
    ):
        raise ProtocolError(f"malformed status line {status[:100]!r}")
    headers: dict[str, str] = {}
    previous = ""  # the last header's name, for folded lines
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or line[0] in " \t":
            if previous and line[:1] in (" ", "\t"):  # obsolete line folding continues it
                headers[previous] = headers[previous] + " " + line.strip(" \t")
                continue
            raise ProtocolError(f"malformed header line {line[:100]!r}")
        previous = name = name.lower()
        value = value.strip(" \t")
        if name in headers:
            headers[name] += ", " + value
        else:
            headers[name] = value
    connection = headers.get("connection")
    if connection is None:
        return int(code), headers, status[7] == "1"  # HTTP/1.1 keeps it, HTTP/1.0 closes it
    tokens = connection.lower()
    if status[7] == "1":
        keep = "close" not in tokens
    else:  # HTTP/1.0 closes unless asked to keep the connection
        keep = "keep-alive" in tokens and "close" not in tokens
    return int(code), headers, keep


def content_length(value: str) -> int:
    """The body's length from a Content-Length value (repeats must agree)."""
    if not (value.isdecimal() and value.isascii()):
        lengths = {v.strip(" \t") for v in value.split(",")}
        if len(lengths) != 1:
            raise ProtocolError(f"conflicting Content-Length {value!r}")
        value = lengths.pop()
        if not (value.isdecimal() and value.isascii()):
            raise ProtocolError(f"malformed Content-Length {value!r}")
    n = int(value)
    if n > MAX_BODY_BYTES:
        raise too_large(MAX_BODY_BYTES, n)
    return n


async def read_head(
    conn: Connection, scope: anyio.CancelScope, read: float, limit: float
) -> tuple[int, dict[str, str], bool]:
    """The final (non-1xx) response head: status, headers, and whether keep-alive allows
    reuse. The first wait keeps the deadline set before sending."""
    stream = conn.stream
    buf = conn.buffer
    if not buf:
        try:
            data = await stream.receive(RECEIVE)
        except (anyio.EndOfStream, anyio.BrokenResourceError) as exc:
            raise NoAnswer from exc
        buf += data
    while True:  # until a final (non-1xx) response head
        start = 0
        while (end := buf.find(b"\r\n\r\n", start)) < 0:
            if len(buf) > MAX_HEADER_BYTES:
                break
            start = max(len(buf) - 3, 0)
            buf += await receive(stream, scope, read, limit)
        if end < 0 or end > MAX_HEADER_BYTES:
            raise ProtocolError(
                f"the response headers are larger than the {MAX_HEADER_BYTES >> 10} KiB limit"
            )
        status, headers, keep = parse_head(buf[:end].decode("latin-1"))
        del buf[: end + 4]
        if status >= 200:
            return status, headers, keep
        if status == 101:
            raise ProtocolError("the server switched protocols (101), which we never ask")


NONE, LENGTH, CHUNKED, EOF = range(4)  # how a body is delimited


def body_framing(status: int, headers: Mapping[str, str]) -> tuple[int, int]:
    """How the body of a response is delimited, and its length when it has one."""
    if status in NO_BODY:
        return NONE, 0
    coding = headers.get("transfer-encoding")
    if coding is not None:
        if coding.strip(" \t").lower() != "chunked":
            raise ProtocolError(f"unsupported Transfer-Encoding {coding!r}")
        return CHUNKED, 0
    length = headers.get("content-length")
    if length is not None:
        return LENGTH, content_length(length)
    return EOF, 0


# The phases of a body read piece by piece.
_DATA, _CRLF, _SIZE, _TRAILERS, _END = range(5)


class BodyReader:
    """One response body, handed out in pieces as its bytes arrive: by Content-Length,
    chunked (chunk framing and trailers read and dropped) or up to EOF.

    Each wait for more bytes moves `scope`'s deadline when the whole exchange runs in
    one scope (`post()`), or runs in a scope of its own (a stream, whose pieces are
    handed out between waits); either way within `read` seconds and before `limit`.
    """

    __slots__ = (
        "buf",
        "chunked",
        "done",
        "eof",
        "left",
        "limit",
        "phase",
        "read",
        "scope",
        "stream",
        "total",
    )

    def __init__(
        self,
        conn: Connection,
        framing: int,
        length: int,
        read: float,
        limit: float,
        scope: anyio.CancelScope | None,
    ) -> None:
        self.stream = conn.stream
        self.buf = conn.buffer
        self.read = read
        self.limit = limit
        self.scope = scope
        self.chunked = framing == CHUNKED
        self.eof = framing == EOF
        self.left = length  # bytes left of the body (by length) or of this chunk
        self.total = 0  # body bytes so far (chunked, EOF)
        if framing == NONE or (framing == LENGTH and not length):
            self.phase = _END
        else:
            self.phase = _SIZE if self.chunked else _DATA
        self.done = self.phase == _END and not self.eof

    async def _more(self) -> bytes:
        deadline = anyio.current_time() + self.read
        if deadline > self.limit:
            deadline = self.limit
        scope = self.scope
        if scope is not None:
            scope.deadline = deadline
            return await self.stream.receive(RECEIVE)
        with anyio.CancelScope(deadline=deadline):
            return await self.stream.receive(RECEIVE)
        raise Deadline

    async def next(self) -> bytes:
        """The next piece of the body; b"" once it has ended (then `done` is true)."""
        if self.eof:
            return await self._next_to_eof()
        while True:
            piece = self.step()
            if piece is not None:
                return piece
            self.buf += await self._more()

    async def _next_to_eof(self) -> bytes:
        buf = self.buf
        if not buf:
            try:
                buf += await self._more()
            except anyio.EndOfStream:
                self.done = True
                return b""
        self.total += len(buf)
        if self.total > MAX_BODY_BYTES:
            raise too_large(MAX_BODY_BYTES)
        piece = bytes(buf)
        buf.clear()
        return piece

    def step(self) -> bytes | None:
        """Advance through the bytes already buffered: a piece of the body if there is one,
        b"" at the body's end, None when more bytes are needed."""
        buf = self.buf
        piece: bytes | None = None
        while True:
            phase = self.phase
            if phase == _DATA:  # inline: the hot path, once per piece
                if piece is not None or not buf:
                    return piece  # one piece at a time
                n = self.left
                if len(buf) <= n:
                    piece = bytes(buf)
                    buf.clear()
                else:
                    piece = bytes(buf[:n])
                    del buf[:n]
                self.left = n = n - len(piece)
                if n:
                    return piece
                self.phase = _CRLF if self.chunked else _END
            elif phase == _END:
                self.done = True
                return b"" if piece is None else piece
            elif not buf:  # the chunk framing's phases all need bytes
                return piece
            elif phase == _TRAILERS:
                if not self._trailers():
                    return piece
            elif not self._chunk_head():
                return piece

    def _chunk_head(self) -> bool:
        """Read what comes before a chunk's data: the CRLF ending the chunk before it (in
        phase _CRLF), then its size line; on to its data, or (size 0) to the trailers.
        False when more bytes are needed."""
        buf = self.buf
        if self.phase == _CRLF:
            if len(buf) < 2:
                return False
            if buf[:2] != b"\r\n":
                raise ProtocolError("a chunk does not end with CRLF")
            del buf[:2]
            self.phase = _SIZE
        eol = buf.find(b"\r\n")
        if eol < 0:
            if len(buf) > _MAX_CHUNK_LINE:
                raise ProtocolError("a chunk-size line is too long")
            return False
        size_text = bytes(buf[:eol]).split(b";", 1)[0].strip(b" \t")
        if not size_text or size_text.strip(_HEX) or len(size_text) > 16:
            raise ProtocolError(f"malformed chunk size {bytes(buf[:eol])[:40]!r}")
        size = int(size_text, 16)
        del buf[: eol + 2]
        if size:
            self.total += size
            if self.total > MAX_BODY_BYTES:
                raise too_large(MAX_BODY_BYTES)
            self.left = size
            self.phase = _DATA
        else:
            self.phase = _TRAILERS
        return True

    def _trailers(self) -> bool:
        """Read and drop the trailers: none (a bare CRLF) or header lines up to a blank
        line; False when they are not all buffered yet."""
        buf = self.buf
        if len(buf) < 2:
            return False
        if buf[:2] == b"\r\n":
            del buf[:2]
        else:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEADER_BYTES:
                    raise ProtocolError(
                        f"the trailers are larger than the {MAX_HEADER_BYTES >> 10} KiB limit"
                    )
                return False
            del buf[: end + 4]
        self.phase = _END
        return True

    def settle(self) -> bool:
        """Read past what is left of the body in the buffer, without waiting; whether that
        reached its end (a stream left early may then keep its connection)."""
        if self.eof:
            return False
        while not self.done:
            if self.step() is None:
                return False
        return True


class Streamed(StreamedResponse):
    """A response whose body is read from its connection as the caller asks for it."""

    def __init__(
        self,
        url: str,
        timeouts: Timeouts,
        limit: float,
        status: int,
        headers: Mapping[str, str],
        reader: BodyReader,
    ) -> None:
        self.status = status
        self.headers = headers
        self.broken = False  # a chunk failed: the connection cannot be reused
        encoding = headers.get("content-encoding")
        self._decoder = decoder_for(encoding, MAX_BODY_BYTES) if encoding is not None else None
        self._reader = reader
        self._url = url
        self._timeouts = timeouts
        self._limit = limit

    def reusable(self) -> bool:
        """Whether the body was read to its end, or what is left of it is in the buffer."""
        if self.broken:
            return False
        try:
            return self._reader.settle()
        except (ProtocolError, BodyError):
            return False

    async def chunks(self) -> AsyncIterator[bytes]:
        reader = self._reader
        decoder = self._decoder
        while not reader.done:
            try:
                piece = await reader.next()
                if decoder is not None:
                    piece = decoder.feed(piece)
                    if reader.done:
                        decoder.end()
            except Deadline:
                self.broken = True
                raise attempt_timed_out(self._url, self._timeouts, self._limit) from None
            except Exception as exc:
                self.broken = True
                error = failure(exc, self._url)
                if error is None:
                    raise
                raise error from exc
            if piece:
                yield piece


async def read_body(
    conn: Connection,
    status: int,
    headers: dict[str, str],
    keep: bool,
    scope: anyio.CancelScope,
    read: float,
    limit: float,
) -> tuple[bytes, bool]:
    """The whole body of a response whose head was read; also whether the connection may
    carry another request."""
    buf = conn.buffer
    framing, n = body_framing(status, headers)
    if framing == LENGTH:
        stream = conn.stream
        while len(buf) < n:
            buf += await receive(stream, scope, read, limit)
        if len(buf) == n:
            body = bytes(buf)
            buf.clear()
        else:
            body = bytes(buf[:n])
            del buf[:n]
    elif framing == NONE:
        body = b""
    else:
        reader = BodyReader(conn, framing, n, read, limit, scope)
        parts = bytearray()
        while piece := await reader.next():
            parts += piece
        body = bytes(parts)
        if framing == EOF:
            keep = False
        else:
            keep = keep and "content-length" not in headers
    if buf:  # bytes after the response that no request asked for
        keep = False
        buf.clear()
    encoding = headers.get("content-encoding")
    if encoding is not None and body:
        body = decompress(body, encoding, MAX_BODY_BYTES)
    return body, keep

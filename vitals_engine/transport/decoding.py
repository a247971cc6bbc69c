"""Response bodies: their content codings undone, within a limit on their size.

Every transport asks for `ACCEPT_ENCODING` and undoes those codings itself, here, so that
they all follow one rule: gzip and deflate (zlib-wrapped, as RFC 9110 says, or raw, as
some servers send it) are decoded, stacked codings in the reverse of the order they were
applied; a body with any other coding is handed over as it came, none of it undone. Neither
the raw nor the decoded body may pass the limit (`MAX_BODY_BYTES` unless told), and a
compressed body never inflates past it in memory, whatever its ratio: a gzip bomb is refused
as it grows. A compressed stream cut short is an error at the body's end.

Example:
    >>> decoder = Decoder(response_headers.get("content-encoding"), limit=MAX_BODY_BYTES)
    >>> for data in raw_pieces:
    ...     yield decoder.feed(data)  # BodyError: over the limit, or not decodable
    >>> decoder.end()  # BodyError: a compressed stream cut short
"""

from __future__ import annotations

import zlib
from typing import Any

from .._errors import ProviderError, ProviderUnavailable

__all__ = [
    "ACCEPT_ENCODING",
    "MAX_BODY_BYTES",
    "BodyError",
    "BodyTooLarge",
    "Decoder",
    "decoder_for",
    "decompress",
    "refused_body",
    "too_large",
]

#: The most bytes a response body may take, raw or decoded.
MAX_BODY_BYTES = 256 * 1024 * 1024
#: The content codings we ask for: those `Decoder` undoes.
ACCEPT_ENCODING = "gzip, deflate"


class BodyError(Exception):
    """A response body we refuse (too large, or not decodable): the message says why."""


class BodyTooLarge(BodyError):
    """A body over the limit: the same request would get it again, so it is not retried."""


def too_large(limit: int, length: int | None = None) -> BodyError:
    """The error for a body over `limit` bytes (`length`: the size it declares)."""
    size = "" if length is None else f" ({length} bytes)"
    return BodyTooLarge(f"the response body{size} is larger than the {limit >> 20} MiB limit")


def refused_body(url: str, exc: BodyError) -> ProviderError:
    """The provider error for a body we refuse: one over the limit is not retried (the
    answer would be as large again); one that does not decode may be (a cut stream)."""
    if isinstance(exc, BodyTooLarge):
        return ProviderError(
            f"the answer of {url} was refused: {exc}. Not retried: the same request would "
            "get an answer as large again"
        )
    return ProviderUnavailable(f"connection to {url} failed: {exc}")


class _Layer:
    """One content coding undone as its bytes arrive."""

    __slots__ = ("coding", "head", "limit", "made", "zlib")

    def __init__(self, coding: str, limit: int) -> None:
        self.coding = coding  # "gzip" or "deflate"
        self.limit = limit
        self.zlib: Any = None  # made on the first bytes
        self.head = b""  # deflate's first byte, until the second tells the wrapping
        self.made = 0  # bytes put out so far

    def feed(self, data: bytes) -> bytes:
        stream = self.zlib
        if stream is None:
            if self.coding == "deflate":
                data = self.head + data
                if len(data) < 2:
                    self.head = data
                    return b""
                self.head = b""
                wrapped = data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
                stream = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
            else:
                stream = zlib.decompressobj(16 + zlib.MAX_WBITS)
            self.zlib = stream
        elif stream.eof:
            return b""  # bytes after the end of the compressed stream: dropped
        limit = self.limit
        try:
            out = stream.decompress(data, limit - self.made + 1)  # one byte too many at most
        except zlib.error as exc:
            raise BodyError(f"the {self.coding} body does not decompress ({exc})") from None
        self.made += len(out)
        if self.made > limit or stream.unconsumed_tail:
            raise too_large(limit)
        return out

    def end(self) -> None:
        if self.head or (self.zlib is not None and not self.zlib.eof):
            raise BodyError(f"the {self.coding} body is truncated")


class Decoder:
    """A response body's content codings undone as its bytes arrive; neither the raw bytes
    fed nor the decoded ones may pass `limit`.

    `layers` is empty when there is nothing to undo: an identity body, or one with a coding
    we did not ask for (handed over as it came, still held to the limit)."""

    __slots__ = ("layers", "limit", "raw")

    def __init__(self, encoding: str | None, limit: int = MAX_BODY_BYTES) -> None:
        self.limit = limit
        self.raw = 0  # bytes fed so far
        self.layers: list[_Layer] = []
        for coding in reversed((encoding or "").lower().split(",")):
            coding = coding.strip()
            if coding in ("gzip", "x-gzip", "deflate"):
                self.layers.append(_Layer("deflate" if coding == "deflate" else "gzip", limit))
            elif coding not in ("identity", ""):
                self.layers.clear()  # not ours to decode: all of it is handed over as it came
                break

    def feed(self, data: bytes) -> bytes:
        """The decoded bytes that `data` yields (maybe none yet)."""
        self.raw += len(data)
        if self.raw > self.limit:
            raise too_large(self.limit)
        for layer in self.layers:
            if not data:
                return b""
            data = layer.feed(data)
        return data

    def end(self) -> None:
        """At the body's end: a compressed stream that began and did not end is an error."""
        for layer in self.layers:
            layer.end()


def decoder_for(encoding: str | None, limit: int = MAX_BODY_BYTES) -> Decoder | None:
    """A `Decoder` for a body with this Content-Encoding; None when it has nothing to undo
    (its raw bytes are then the body, for the caller to hold to the limit)."""
    decoder = Decoder(encoding, limit)
    return decoder if decoder.layers else None


def decompress(body: bytes, encoding: str | None, limit: int = MAX_BODY_BYTES) -> bytes:
    """A whole body with its content codings undone, as `Decoder` would."""
    decoder = decoder_for(encoding, limit)
    if decoder is None:
        if len(body) > limit:
            raise too_large(limit)
        return body
    body = decoder.feed(body)
    decoder.end()
    return body

"""The reader of `.json` logs: one `EvalLog` object (ours, vitals' (R), Inspect's).

A header-only read never parses samples: it decodes the bytes before the
top-level `"samples"` key, read in growing chunks until that key is found. The
key is found by one linear scan of the JSON's strings and brackets (a nested
`"samples"` key, however many, is passed over), and the prefix is decoded once.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import BinaryIO

import msgspec

from . import schema as s
from .decoding import HeaderIn, decode_json, has_nans, header_decoder, null_nans
from .journal_format import bulk_objects

__all__ = ["json_header", "json_header_from", "json_log"]


class _LogIn(HeaderIn, kw_only=True):
    samples: list[s.EvalSample] | None = None


_log_decoder = msgspec.json.Decoder(_LogIn)

#: A JSON string (group 1: its closing quote, None if the data ends inside it), or a bracket.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*(")?|[{}\[\]]')
_KEY_COLON = re.compile(rb"\s*:")
_FIRST_CHUNK = 64 * 1024


def _try_prefix(prefix: bytes, path: Path) -> s.EvalLog | None:
    """The header if `prefix + "}"` is the log's top-level object, else None.

    A `"samples"` key inside a string or a nested object leaves braces open,
    so only the top-level one makes valid JSON. A prefix that is valid JSON
    but not a header (keys in an unusual order, a mistyped field) is None
    too: the caller then decodes the whole file, which says what is wrong.
    """
    data = prefix + b"}"
    try:
        return header_decoder.decode(data).header(path)
    except msgspec.ValidationError:
        return None
    except msgspec.DecodeError:
        if not has_nans(data):
            return None
    try:
        return header_decoder.decode(null_nans(data)).header(path)
    except msgspec.DecodeError:  # ValidationError included
        return None


class _TopLevelKey:
    """Finds where the top-level `"samples"` key starts, scanning data as it grows."""

    __slots__ = ("depth", "position")

    def __init__(self) -> None:
        self.depth = 0
        self.position = 0  # where the scan goes on: the start of an unfinished token

    def find(self, data: bytes) -> int | None:
        """The offset of the comma before the top-level `"samples":` in `data`, or None
        when `data` does not reach it yet (or the JSON is not an object of that shape)."""
        depth = self.depth
        for match in _TOKEN.finditer(data, self.position):
            token = match.group()
            first = token[0]
            if first == 0x22:  # '"'
                if match.group(1) is None:  # cut off by the end of the data so far
                    self.depth, self.position = depth, match.start()
                    return None
                if depth == 1 and token == b'"samples"':
                    colon = _KEY_COLON.match(data, match.end())
                    if colon is None and len(data.rstrip()) == match.end():
                        self.depth, self.position = depth, match.start()
                        return None  # the colon has not been read yet
                    if colon is not None:
                        before = data[: match.start()].rstrip()
                        return len(before) - 1 if before.endswith(b",") else None
            elif first == 0x7B or first == 0x5B:  # '{' '['
                depth += 1
            else:
                depth -= 1
        self.depth, self.position = depth, len(data)
        return None


def json_header(path: Path) -> s.EvalLog:
    """The header of a `.json` log, decoded from the bytes before its `"samples"` key."""
    with path.open("rb") as fh:
        return json_header_from(fh, path)


def json_header_from(fh: BinaryIO, path: Path) -> s.EvalLog:
    """`json_header` of an open binary file (a local one, or an object of a store read
    in ranges): only the bytes up to the `"samples"` key are read, when it is found."""
    scan = _TopLevelKey()
    data = b""
    size = _FIRST_CHUNK
    while True:
        chunk = fh.read(size)
        data += chunk
        end = scan.find(data)
        if end is not None:
            header = _try_prefix(data[:end], path)
            if header is not None:
                return header
            break
        if len(chunk) < size:
            break
        size *= 2
    data += fh.read()
    return decode_json(header_decoder, data, path).header(path)


def json_log(path: Path) -> tuple[s.EvalLog, list[s.EvalSample]]:
    """A `.json` log's header and samples, decoded whole."""
    data = path.read_bytes()
    with bulk_objects():
        log = decode_json(_log_decoder, data, path)
    return log.header(path), list(log.samples or [])

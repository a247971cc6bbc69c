"""The reader of `.json` logs: one `EvalLog` object (ours, vitals' (R), Inspect's).

A header-only read never parses samples: it decodes the bytes before the
top-level `"samples"` key, read in growing chunks until such a prefix decodes.
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from . import schema as s
from .decoding import HeaderIn, decode_json, has_nans, header_decoder, null_nans
from .journal_format import bulk_objects

__all__ = ["json_header", "json_log"]


class _LogIn(HeaderIn, kw_only=True):
    samples: list[s.EvalSample] | None = None


_log_decoder = msgspec.json.Decoder(_LogIn)

_SAMPLES_KEY = re.compile(rb',\s*"samples"\s*:')
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


def json_header(path: Path) -> s.EvalLog:
    """The header of a `.json` log, decoded from the bytes before its `"samples"` key."""
    tried: set[int] = set()
    data = b""
    size = _FIRST_CHUNK
    with path.open("rb") as fh:
        while True:
            chunk = fh.read(size)
            data += chunk
            for match in _SAMPLES_KEY.finditer(data):
                if match.start() in tried:
                    continue
                tried.add(match.start())
                header = _try_prefix(data[: match.start()], path)
                if header is not None:
                    return header
            if len(chunk) < size:
                break
            size *= 2
    return decode_json(header_decoder, data, path).header(path)


def json_log(path: Path) -> tuple[s.EvalLog, list[s.EvalSample]]:
    """A `.json` log's header and samples, decoded whole."""
    data = path.read_bytes()
    with bulk_objects():
        log = decode_json(_log_decoder, data, path)
    return log.header(path), list(log.samples or [])

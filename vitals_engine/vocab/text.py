"""Text a log can hold: lone surrogates written as their escapes.

A Python string may hold a lone surrogate (`"bad\\udcff"`, what decoding with
`errors="surrogateescape"` leaves), which UTF-8, so JSON, cannot encode.
`writable_text()` writes each as its backslash escape (`"bad\\\\udcff"`: the six
characters `\\udcff`), `writable()` does so for every string inside a value,
and `WritableEncoder` encodes JSON as msgspec does, falling back to a
`writable()` copy only when the value holds such a string: the common case
costs nothing more.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

__all__ = ["WritableEncoder", "writable", "writable_text"]


def writable_text(text: str) -> str:
    """`text`, with any lone surrogate (what `errors="surrogateescape"` decoding leaves)
    written as its escape, so the log can hold it as UTF-8.

    Example:
        >>> writable_text("bad\\udcff")
        'bad\\\\udcff'
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def writable(value: Any) -> Any:
    """`value` with `writable_text()` applied to every string inside it (dict keys too),
    through dicts, lists, tuples, sets and msgspec Structs; what holds no such
    string is returned as it is (not copied), and nothing is changed in place.

    Example:
        >>> writable({"input": ["bad\\udcff"], "n": 1})
        {'input': ['bad\\\\udcff'], 'n': 1}
    """
    if isinstance(value, str):
        return writable_text(value)
    if isinstance(value, msgspec.Struct):
        changes = {}
        for name in value.__struct_fields__:
            item = getattr(value, name)
            new = writable(item)
            if new is not item:
                changes[name] = new
        return msgspec.structs.replace(value, **changes) if changes else value
    if isinstance(value, dict):
        pairs = [(writable(k), writable(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True)):
            return value
        return dict(pairs)
    if isinstance(value, list | tuple | set | frozenset):
        items = [writable(item) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        if isinstance(value, list):
            return items
        return tuple(items) if isinstance(value, tuple) else type(value)(items)
    return value


class WritableEncoder:
    """A msgspec JSON encoder whose output is always UTF-8: a value holding a lone
    surrogate is encoded again as its `writable()` copy (see the module docstring).

    Example:
        >>> WritableEncoder().encode({"text": "bad\\udcff"})
        b'{"text":"bad\\\\\\\\udcff"}'
    """

    def __init__(self, enc_hook: Callable[[Any], Any] | None = None) -> None:
        self.enc_hook = enc_hook
        self._encoder = msgspec.json.Encoder(enc_hook=enc_hook)
        self._fallback = msgspec.json.Encoder(enc_hook=self._writable_hook if enc_hook else None)

    def _writable_hook(self, value: Any) -> Any:
        assert self.enc_hook is not None
        return writable(self.enc_hook(value))

    def encode(self, value: Any) -> bytes:
        """`value` as JSON (msgspec's encoding; lone surrogates as their escapes)."""
        try:
            return self._encoder.encode(value)
        except UnicodeEncodeError:
            return self._fallback.encode(writable(value))

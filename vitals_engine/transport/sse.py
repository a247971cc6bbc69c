"""Server-sent events: a streamed response body read as the events it carries.

The rules are the WHATWG HTML spec's "event stream" parsing: lines end with
CRLF, LF or a lone CR (also when a CRLF is cut between two chunks); a line
starting with ":" is a comment; `data:` lines accumulate, joined with
newlines; a blank line dispatches the event, unless no data came; one space
after the colon is dropped. Bytes after the last blank line are not an
event, so a stream cut in the middle of one never yields half of it.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncGenerator, AsyncIterable
from dataclasses import dataclass

__all__ = ["EventStreamParser", "ServerSentEvent", "server_sent_events"]

_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One event: its type ("message" unless named), its data, and the last id seen."""

    event: str = "message"
    data: str = ""
    id: str | None = None


class EventStreamParser:
    """Turns text fed in pieces into events.

    Example:
        >>> parser = EventStreamParser()
        >>> parser.feed("data: a\\n")
        []
        >>> parser.feed("\\n")
        [ServerSentEvent(event='message', data='a', id=None)]
    """

    __slots__ = ("_after_cr", "_data", "_event", "_id", "_pending", "_started")

    def __init__(self) -> None:
        self._pending = ""  # text after the last line end
        self._after_cr = False  # the last text ended with CR: a leading LF is its pair
        self._started = False
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None

    def feed(self, text: str) -> list[ServerSentEvent]:
        """The events completed by `text`."""
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")
        if self._after_cr and text.startswith("\n"):
            text = text[1:]
        if not text:
            return []
        self._after_cr = text.endswith("\r")
        lines = _LINE_END.split(self._pending + text)
        self._pending = lines.pop()
        events: list[ServerSentEvent] = []
        for line in lines:
            if not line:
                if self._data:
                    events.append(
                        ServerSentEvent(self._event or "message", "\n".join(self._data), self._id)
                    )
                self._data = []
                self._event = ""
            elif line[0] != ":":
                self._field(line)
        return events

    def _field(self, line: str) -> None:
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value


async def server_sent_events(
    chunks: AsyncIterable[bytes],
) -> AsyncGenerator[ServerSentEvent, None]:
    """The events of a body arriving in `chunks` (UTF-8, cut anywhere).

    Example:
        >>> async with transport.stream(url, headers, body, timeouts) as response:
        ...     async for event in server_sent_events(response.chunks()):
        ...         print(event.event, event.data)
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    parser = EventStreamParser()
    try:
        async for chunk in chunks:
            for event in parser.feed(decoder.decode(chunk)):
                yield event
    finally:  # closed early (a reader stops at its marker): close the body's chunks too
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()

"""Server-sent events as the WHATWG spec reads them, however the bytes are cut into chunks."""

from __future__ import annotations

import pytest

from vitals_engine.transport.sse import ServerSentEvent, server_sent_events

pytestmark = pytest.mark.anyio


async def parse(*chunks: bytes) -> list[ServerSentEvent]:
    async def source():
        for chunk in chunks:
            yield chunk

    return [event async for event in server_sent_events(source())]


async def test_an_event_ends_at_a_blank_line():
    """`data:` lines up to a blank line make one "message" event."""
    assert await parse(b"data: hello\n\n") == [ServerSentEvent("message", "hello")]


async def test_fields_event_id_and_multiline_data():
    """`event:` names the event, `id:` is kept, several `data:` lines join with newlines."""
    events = await parse(b"event: delta\nid: 7\ndata: a\ndata: b\n\n")
    assert events == [ServerSentEvent("delta", "a\nb", "7")]


async def test_comments_retry_and_unknown_fields_are_ignored():
    """A line starting with ':' (a keep-alive ping), `retry:` and unknown fields say nothing."""
    events = await parse(b": ping\nretry: 10\nfoo: bar\ndata: x\n\n: ping\n\n")
    assert events == [ServerSentEvent("message", "x")]


async def test_one_leading_space_is_stripped_and_a_bare_field_is_empty():
    """`data:x` and `data: x` are the same; `data:  x` keeps one space; a bare `data` line
    is an empty data line."""
    events = await parse(b"data:x\n\ndata:  x\n\ndata\ndata: y\n\n")
    assert [e.data for e in events] == ["x", " x", "\ny"]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
async def test_every_line_ending(newline):
    """LF, CRLF and a lone CR all end a line."""
    text = b"event: e" + newline + b"data: 1" + newline + newline + b"data: 2" + newline * 2
    assert await parse(text) == [ServerSentEvent("e", "1"), ServerSentEvent("message", "2")]


async def test_a_crlf_split_across_chunks_is_one_line_break():
    """A CR at the end of one chunk and the LF starting the next are a single line break."""
    events = await parse(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n")
    assert events == [ServerSentEvent("message", "a\nb")]


async def test_chunks_cut_anywhere_give_the_same_events():
    """Cutting the stream at every byte, multi-byte characters included, changes nothing."""
    text = 'event: delta\ndata: {"text": "héllo ✓"}\n\ndata: second\n\n'.encode()
    whole = await parse(text)
    assert await parse(*[text[i : i + 1] for i in range(len(text))]) == whole
    assert [e.data for e in whole] == ['{"text": "héllo ✓"}', "second"]


async def test_an_event_without_data_is_not_dispatched():
    """Per the spec, a blank line after no `data:` dispatches nothing (and forgets the type)."""
    assert await parse(b"event: ping\n\ndata: x\n\n") == [ServerSentEvent("message", "x")]


async def test_an_unfinished_last_event_is_dropped():
    """Bytes after the last blank line are not an event: a stream cut mid-event never yields
    half of one."""
    assert await parse(b"data: whole\n\ndata: half") == [ServerSentEvent("message", "whole")]


async def test_a_byte_order_mark_at_the_start_is_ignored():
    """A UTF-8 BOM before the first field does not become part of its name."""
    assert await parse(b"\xef\xbb\xbfdata: x\n\n") == [ServerSentEvent("message", "x")]

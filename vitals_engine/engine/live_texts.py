"""The text each in-flight sample is streaming, and its transcript so far, for the live
viewer.

A streaming provider hands each piece of a reply's text to the sample stage's text sink
(`CallScope.on_text`); `LiveTexts` keeps, per sample, the last `TEXT_LIMIT` characters
of its current call's attempt, and forgets them when the sample finishes. A sample that
records a transcript (an agent's tool calls, its sandbox's actions) is told of each
record (`CallScope.on_record`): its entry points to its records, so the viewer shows them
while it runs. When nothing streams or records, a stage pays for two small closures and
nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..pacing.scope import TextSink
from ..samples import Sample
from ..vocab.transcript import TranscriptRecord

__all__ = ["TEXT_LIMIT", "LiveText", "LiveTexts"]

#: The characters of streamed text kept per sample: the last ones, the newest.
TEXT_LIMIT = 4000


class LiveText:
    """The text streamed so far by one sample's current model call attempt."""

    __slots__ = ("attempt", "chars", "events", "role", "sample", "text", "updated")

    def __init__(self, sample: Sample, role: str, attempt: object) -> None:
        self.sample = sample
        self.role = role
        self.attempt = attempt
        self.text = ""  # the last `TEXT_LIMIT` characters
        self.chars = 0  # every character of the attempt so far
        self.updated = 0.0  # time.time() of the last piece
        #: The sample's transcript so far (its `SampleRecord.events`; None: none yet).
        self.events: list[TranscriptRecord] | None = None


class LiveTexts:
    """The streamed text of each in-flight sample, by (id, epoch): what the live viewer shows.

    `sink(sample, role)` is the `on_text` of one sample stage. A piece of text with
    the attempt key the sample's entry has is appended (keeping the last `limit`
    characters); a new key (a retry, or the sample's next model call) starts the
    entry afresh. `drop()` removes a sample's entry when it finishes or fails.
    `on_change` is called after every change; sinks are called from the run's
    event loop thread, as providers do.

    Example:
        >>> texts = LiveTexts()
        >>> sink = texts.sink(sample, "solver")
        >>> attempt = object()
        >>> sink(attempt, "Hel"); sink(attempt, "lo")
        >>> texts.entries[(sample.id, sample.epoch)].text
        'Hello'
    """

    __slots__ = ("entries", "limit", "on_change")

    def __init__(
        self, *, limit: int = TEXT_LIMIT, on_change: Callable[[], None] | None = None
    ) -> None:
        self.entries: dict[tuple[int | str, int], LiveText] = {}
        self.limit = limit
        self.on_change = on_change

    def sink(self, sample: Sample, role: str) -> TextSink:
        """The text sink of one stage (`role`) of `sample`."""
        entries, key, limit = self.entries, (sample.id, sample.epoch), self.limit

        def take(attempt: object, delta: str) -> None:
            entry = entries.get(key)
            if entry is None or entry.attempt is not attempt:
                events = entry.events if entry is not None else None
                entry = entries[key] = LiveText(sample, role, attempt)
                entry.events = events
            text = entry.text + delta
            entry.text = text if len(text) <= limit else text[-limit:]
            entry.chars += len(delta)
            entry.updated = time.time()
            if self.on_change is not None:
                self.on_change()

        return take

    def recorder(
        self, sample: Sample, role: str, events: list[TranscriptRecord]
    ) -> Callable[[], None]:
        """The `on_record` of one stage (`role`) of `sample`, whose transcript is `events`:
        told of each record, it shows the sample's transcript so far."""
        entries, key = self.entries, (sample.id, sample.epoch)

        def recorded() -> None:
            entry = entries.get(key)
            if entry is None:
                entry = entries[key] = LiveText(sample, role, None)
            entry.events = events
            entry.role = role
            entry.updated = time.time()
            if self.on_change is not None:
                self.on_change()

        return recorded

    def drop(self, key: tuple[int | str, int]) -> None:
        """Forget a sample's text (it finished or failed)."""
        if self.entries.pop(key, None) is not None and self.on_change is not None:
            self.on_change()

    def clear(self) -> None:
        """Forget every sample's text: the run ended (`on_change` is not called)."""
        self.entries.clear()

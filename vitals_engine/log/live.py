"""The live text of a running eval: a small file beside its journal, for the viewer.

While samples stream their replies (the run keeps them in `engine.run.LiveTexts`),
the run keeps `<log stem>.live` next to its journal `<log stem>.journal`: what the
current model call of each in-flight sample has said so far. The viewer, which may
run in another process (`vitals view DIR`), serves it as `api/logs/<journal>/live.json`.

The file is one JSON object (format version 1):

```
{"live": 1,
 "log": "2026-01-14T16-19-11-06-00_add_Ab3.json",  the final log's file name
 "updated": 1768429151.25,                          when it was written (Unix seconds)
 "samples": [                                       one per sample whose reply streams
   {"id": 3, "epoch": 1,
    "role": "solver",                               the stage: "solver" or "scorer"
    "input": "What's 3+3?",                         the input's first 160 characters
    "text": "3 + 3 = ",                             the attempt's last 4,000 characters
    "chars": 8,                                     characters the attempt streamed in all
    "updated": 1768429151.2,                        when its last piece came (Unix seconds)
    "events": [...]}]}                              its transcript so far, when it has one
```

A sample is listed from its first streamed piece (or transcript record) until it
finishes or fails; a retried call (or the sample's next call) starts its text afresh.
`events` holds the last `LIVE_EVENTS` records of a sample's transcript (an agent's spans,
tool calls, sandbox actions) as the log's events (`log/transcript.py`), so the viewer
shows what an agent is doing while it does it; the sample's log holds them all.

Choices:

- Name: the suffix `.live`, not `.json`. Whatever lists logs (`listing.json`,
  `vitals ls`, `read_logs()`, the viewer's catalog, Inspect's viewer) goes by
  the suffixes `.json`, `.eval` and `.journal`, so the sidecar is never taken
  for a log, and `read_log()` refuses it.
- Format: the whole document, replaced atomically (`atomic.replace_atomically`,
  without fsync: the file is disposable). A reader never sees half of it and
  needs no state; the file is as small as what is in flight (at most 4,000
  characters a sample, `engine.run.TEXT_LIMIT`), however long the run.
- Cadence: an actor of its own (`LiveFile`), started by the first streamed
  text, so a run where nothing streams has no actor and no file. It writes
  only when texts changed since its last write, then rests `WRITE_EVERY`
  (0.25 s): at most four writes a second, none while nothing changes.
- Cost to the run: the snapshot is taken on the event loop (references to
  immutable strings), then encoded and written in a worker thread. The
  journal's writer never waits for it, and a failed write (a full disk) is
  skipped: the sidecar never fails a run.
- Lifetime: `remove()` when the run ends, however it ends (success, error,
  cancellation); it also removes a file a killed run left under the same name.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import msgspec
from anyio.abc import TaskGroup

from ..vocab.text import WritableEncoder
from . import schema as s
from .atomic import replace_atomically

__all__ = [
    "INPUT_CHARS",
    "LIVE_EVENTS",
    "LIVE_SUFFIX",
    "LIVE_VERSION",
    "WRITE_EVERY",
    "LiveDocument",
    "LiveFile",
    "LiveSample",
    "input_excerpt",
    "live_path",
    "read_live",
]

LIVE_SUFFIX = ".live"
LIVE_VERSION = 1
#: The actor rests this long (seconds) after each write: at most 1 / WRITE_EVERY writes a second.
WRITE_EVERY = 0.25
INPUT_CHARS = 160
#: The records of an in-flight sample's transcript the sidecar shows: its last ones.
LIVE_EVENTS = 200


class LiveSample(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One in-flight sample's streamed text and transcript (see the module docstring)."""

    id: int | str
    epoch: int
    role: str
    input: str = ""
    text: str
    chars: int = 0
    updated: float
    events: list[dict[str, Any]] | None = None


class LiveDocument(msgspec.Struct, kw_only=True):
    """The sidecar's document (see the module docstring)."""

    live: int = LIVE_VERSION
    log: str = ""
    updated: float = 0.0
    samples: list[LiveSample] = msgspec.field(default_factory=list)


_decoder = msgspec.json.Decoder(LiveDocument)
_encoder = WritableEncoder()  # streamed text may hold lone surrogates


def live_path(log_path: str | Path) -> Path:
    """The sidecar of a log or journal: same stem, `.live`.

    Example:
        >>> live_path("logs/2026-01-14T16-19-11-06-00_add_Ab3.journal")
        PosixPath('logs/2026-01-14T16-19-11-06-00_add_Ab3.live')
    """
    path = Path(log_path)
    return path.with_name(path.stem + LIVE_SUFFIX)


def input_excerpt(value: Any) -> str:
    """A sample's input as the sidecar shows it: its first `INPUT_CHARS` characters.

    Example:
        >>> input_excerpt("What's 3+3?")
        "What's 3+3?"
    """
    if not isinstance(value, str):
        try:
            value = s.encoder.encode(value).decode()
        except (TypeError, ValueError, msgspec.EncodeError):
            value = type(value).__name__
    return value[:INPUT_CHARS]


def read_live(path: Path) -> LiveDocument | None:
    """The sidecar at `path`; None when there is none or it is not one.

    Example:
        >>> read_live(live_path(journal)).samples[0].text
        '3 + 3 = '
    """
    try:
        return _decoder.decode(path.read_bytes())
    except (OSError, msgspec.DecodeError):
        return None


class LiveFile:
    """The actor that keeps a run's sidecar (see the module docstring).

    Call `changed()` (from the event loop's thread) whenever a text changed; the
    first call starts the actor in `task_group`. `stop()` before the task group
    ends, `remove()` after.

    Example:
        >>> live = LiveFile(live_path(journal), "run.json", snapshot)
        >>> async with anyio.create_task_group() as tg:
        ...     live.task_group = tg
        ...     ...                   # live.changed() as texts arrive
        ...     live.stop()
        >>> live.remove()
    """

    def __init__(
        self,
        path: Path,
        log_name: str,
        snapshot: Callable[[], list[LiveSample]],
        *,
        every: float = WRITE_EVERY,
    ) -> None:
        self.path = path
        self.log_name = log_name
        self.snapshot = snapshot
        self.every = every
        self.task_group: TaskGroup | None = None
        #: How many times the file was written.
        self.writes = 0
        self._dirty = False
        self._closed = False
        self._wake: anyio.Event | None = None
        self._stopping: anyio.Event | None = None

    def changed(self) -> None:
        """A text changed: write the file soon (start the actor on the first change)."""
        if self._dirty or self._closed:
            return
        if self._wake is not None:
            self._dirty = True
            self._wake.set()
        elif self.task_group is not None:
            self._dirty = True
            self._wake, self._stopping = anyio.Event(), anyio.Event()
            self.task_group.start_soon(self._run, name=f"live text {self.path.name}")

    async def _run(self) -> None:
        assert self._wake is not None
        assert self._stopping is not None
        while not self._closed:
            if not self._dirty:
                await self._wake.wait()
                self._wake = anyio.Event()
                continue
            self._dirty = False
            document = LiveDocument(log=self.log_name, updated=time.time(), samples=self.snapshot())
            await anyio.to_thread.run_sync(self._write, document)
            with anyio.move_on_after(self.every):
                await self._stopping.wait()

    def _write(self, document: LiveDocument) -> None:
        data = _encoder.encode(document)
        with contextlib.suppress(OSError):
            replace_atomically(self.path, lambda fh: fh.write(data), LIVE_SUFFIX, sync=False)
            self.writes += 1

    def stop(self) -> None:
        """End the actor (it finishes a write under way); later changes are ignored."""
        self._closed = True
        if self._wake is not None:
            self._wake.set()
        if self._stopping is not None:
            self._stopping.set()

    def remove(self) -> None:
        """Remove the file (after the actor ended): the run is over."""
        self._closed = True
        with contextlib.suppress(OSError):
            self.path.unlink(missing_ok=True)

"""Progress of a run: the events the engine emits, and a one-line bar on stderr.

The engine only emits `Progress` snapshots; whoever runs it decides what to
show. `eval()` draws `ProgressBar` when stderr is a terminal (or when asked
with `progress=True`) and prints nothing otherwise.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import TextIO

__all__ = ["Progress", "ProgressBar"]


@dataclass(frozen=True, slots=True)
class Progress:
    """A snapshot of a run."""

    done: int
    total: int
    failed: int
    retries: int
    tokens: int
    cost: float | None
    elapsed: float
    #: Batch mode: requests queued for a batch, batches submitted and not ended, the
    #: requests waiting in those, and batches ended.
    batch_queued: int = 0
    batch_submitted: int = 0
    batch_waiting: int = 0
    batch_done: int = 0
    #: With a cache: calls it answered, and calls sent because it had no reply
    #: (None: no cache in this run).
    cache_hits: int | None = None
    cache_misses: int | None = None

    @property
    def rate(self) -> float:
        """Samples finished per second so far."""
        return self.done / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def eta(self) -> float | None:
        """Seconds left at the current rate, or None before the first sample."""
        return (self.total - self.done) / self.rate if self.rate > 0 else None


def _short(n: float) -> str:
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n:.0f}"


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _batches(p: Progress) -> str:
    """Batch mode's part of the bar, e.g. "batches: 2 out (1.2k waiting), 3 done, 40 queued"."""
    said = f"batches: {p.batch_submitted} out"
    if p.batch_waiting:
        said += f" ({_short(p.batch_waiting)} waiting)"
    said += f", {p.batch_done} done"
    if p.batch_queued:
        said += f", {_short(p.batch_queued)} queued"
    return said


class ProgressBar:
    """Draws progress on one line of a terminal, at most ten times a second.

    Example:
        >>> bar = ProgressBar("my-task")
        >>> bar.update(progress)   # called by the engine
        >>> bar.close()
    """

    def __init__(self, label: str, stream: TextIO | None = None, width: int = 24) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.width = width
        self._last = 0.0
        self._drawn = False

    def render(self, p: Progress) -> str:
        share = p.done / p.total if p.total else 1.0
        filled = int(share * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        parts = [f"{self.label} [{bar}] {p.done}/{p.total}"]
        if p.failed:
            parts.append(f"failed {p.failed}")
        if p.retries:
            parts.append(f"retries {p.retries}")
        if p.batch_queued or p.batch_submitted or p.batch_done:
            parts.append(_batches(p))
        if p.cache_hits is not None:
            parts.append(f"cache {_short(p.cache_hits)} hit, {_short(p.cache_misses or 0)} sent")
        parts.append(f"tokens {_short(p.tokens)}")
        if p.cost is not None:
            parts.append(f"${p.cost:.2f}")
        parts.append(f"{p.rate:.1f}/s")
        parts.append(f"ETA {_clock(p.eta)}")
        return "  ".join(parts)

    def update(self, p: Progress, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < 0.1 and p.done < p.total:
            return
        self._last = now
        self.stream.write("\r" + self.render(p) + "\x1b[K")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()

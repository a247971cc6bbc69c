"""What a run has done so far, and when: the counts its progress is made of.

A run here counts each sample as it is handed on, and each retry as it happens; a run
on Ray counts through the same methods on its driver, from what its workers send back
(a sample's retries with the sample). Whoever wants to know (the progress bar, the
viewer's sidecar) is told after each change (`emit`), with a snapshot of the whole run
that the run composes (`Progress`: these counts with its spending, cache and batches).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..progress import Progress
from ..samples import SampleRecord
from ..vocab.model_calls import RetryNote

__all__ = ["RunCounts"]


class RunCounts:
    """The counts of one run.

    Args:
        total: how many samples it has, when known (0: not known).
        on_progress: told the run's progress after each change (None: nobody).
        snapshot: the run's progress now (the run composes it).

    Example:
        >>> counts = RunCounts(total=2, on_progress=print, snapshot=run.progress)
        >>> counts.start()
        >>> counts.finished(record)    # one done (failed, when it did); progress told
        >>> counts.done, counts.failed
        (1, 0)
    """

    __slots__ = (
        "completed_at",
        "done",
        "failed",
        "on_progress",
        "retries",
        "snapshot",
        "started_at",
        "total",
    )

    def __init__(
        self,
        *,
        total: int | None,
        on_progress: Callable[[Progress], None] | None,
        snapshot: Callable[[], Progress],
    ) -> None:
        self.total = total or 0
        self.on_progress = on_progress
        self.snapshot = snapshot
        self.done = 0
        self.failed = 0
        self.retries = 0
        #: time.time() when it started and ended (None: not yet).
        self.started_at: float | None = None
        self.completed_at: float | None = None

    def start(self) -> None:
        """The run starts now."""
        self.started_at = time.time()

    def stop(self) -> None:
        """The run ends now."""
        self.completed_at = time.time()

    def elapsed(self) -> float:
        """Seconds since the run started (0 before it does)."""
        return time.time() - (self.started_at or time.time())

    def retried(self, _: RetryNote | None = None) -> None:
        """A model call of the run was retried (a call layer's `on_retry`)."""
        self.retries += 1
        self.emit()

    def finished(self, record: SampleRecord, *, retries: int = 0) -> None:
        """`record`'s sample is done (failed, when it has an error); `retries`: its retries,
        when they were not counted as they happened (a sample back from a Ray worker)."""
        self.done += 1
        self.retries += retries
        if record.error is not None:
            self.failed += 1

    def failed_later(self, count: int) -> None:
        """`count` samples counted done failed at a later stage (a whole-dataset scorer's)."""
        self.failed += count

    def emit(self) -> None:
        """Tell whoever wants to know how the run is going."""
        if self.on_progress is not None:
            self.on_progress(self.snapshot())

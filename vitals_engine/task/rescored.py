"""`RescoredTask`: a run rebuilt from a log to score its samples again. It scores,
measures and logs as any task; it cannot solve, since a log holds no solver."""

from __future__ import annotations

from typing import Any, NoReturn

from .._errors import TaskStateError
from .task import Task

__all__ = ["RescoredTask"]


class RescoredTask(Task):
    """A `Task` rebuilt from the log `source` to re-score it (what `rescore()` returns):
    `score()` scores its samples again; `eval()`, `solve()` and `stream_async()` are a
    `TaskStateError` before anything runs or is logged.

    Example:
        >>> task = ve.read_log("logs/run.json").rescore(ve.detect_exact())
        >>> task.score(); task.measure()   # scoring again is fine
        >>> task.eval()
        Traceback (most recent call last):
        TaskStateError: This task was rebuilt from the log logs/run.json to re-score it ...
    """

    def __init__(self, *args: Any, source: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.source = source

    def _cannot_solve(self) -> NoReturn:
        raise TaskStateError(
            f"This task was rebuilt from the log {self.source} to re-score it; it cannot "
            "solve. Score it again with task.score(), or build a Task with a solver to run "
            "the samples again."
        )

    async def eval_async(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._cannot_solve()

    async def solve_async(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._cannot_solve()

    def stream_async(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._cannot_solve()

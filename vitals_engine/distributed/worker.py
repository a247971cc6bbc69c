"""The Ray actor that runs batches of samples through our engine in its own event loop.

It is built from a payload of cloudpickled bytes (the solver's and scorer's specs,
their keyword arguments, the run's limits and retry policy, its share of the
concurrency) and holds one `Run` for its lifetime: its endpoint limits and retry
policy are shared by every batch it works on. `work(batch)` runs a batch of
records (per-sample stages; the supervisor, limits and retries as in a local
run) and returns them finished, each with its own usage and model calls.
Ray is not imported here: the driver makes this class a Ray actor.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from ..engine.calls import FunctionSpec
from ..engine.run import Run
from ..pacing.limits import Limits
from ..pacing.retry import Retry
from ..samples import SampleRecord
from ..transport.pool import transport_scope

__all__ = ["SampleWorker", "WorkerPlan"]


@dataclass(frozen=True, slots=True)
class WorkerPlan:
    """What every worker of a run needs to build its `Run` (sent cloudpickled)."""

    solver: FunctionSpec | None
    scorer: FunctionSpec | None
    solver_kwargs: dict[str, Any]
    scorer_kwargs: dict[str, Any]
    concurrency: int
    limits: Limits | None
    retry: Retry | None


class SampleWorker:
    """One worker of a distributed run (made a Ray actor by the driver)."""

    def __init__(self, payload: bytes) -> None:
        cloudpickle = importlib.import_module("ray.cloudpickle")
        self.plan: WorkerPlan = cloudpickle.loads(payload)
        self.run: Run | None = None  # made in the actor's event loop, on the first batch

    def _run(self) -> Run:
        if self.run is None:
            plan = self.plan
            self.run = Run(
                solver=plan.solver,
                scorer=plan.scorer,
                solver_kwargs=plan.solver_kwargs,
                scorer_kwargs=plan.scorer_kwargs,
                concurrency=plan.concurrency,
                limits=plan.limits,
                retry=plan.retry,
            )
        return self.run

    async def work(self, batch: list[SampleRecord]) -> list[SampleRecord]:
        """Solve and/or score `batch`; the records, finished, in the order they finished."""
        run = self._run()
        finished: list[SampleRecord] = []

        async def keep(record: SampleRecord) -> None:
            finished.append(record)

        async with transport_scope(pool_size=max(1, min(run.concurrency, len(batch)))):
            await run.execute(batch, keep)
        return finished

    def ready(self) -> bool:
        """True once the actor is up (its constructor ran, the payload loaded)."""
        return True

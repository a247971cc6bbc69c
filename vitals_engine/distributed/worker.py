"""The Ray actor that runs batches of samples through our engine in its own event loop.

It is built from a payload of cloudpickled bytes (the solver's and scorer's specs,
their keyword arguments, the run's limits and retry policy, its share of the
concurrency), the run's limits hub and its own index, and holds one `Run` and
one pool of connections for its lifetime: every batch it works on shares them.
Its endpoint limiters lease their capacity from the run's coordinators
(`leases.py`), which push grants, give-back requests and pauses to `adjust`.
`work(batch)` runs a batch of records (per-sample stages; the supervisor,
limits and retries as in a local run) and streams them back as they finish,
each with its own usage and model calls. Ray is imported here only inside the actor.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from ..engine.calls import FunctionSpec
from ..engine.run import Run
from ..pacing.limits import Limits
from ..pacing.retry import Retry
from ..samples import SampleRecord
from ..transport.pool import TransportPool, using_pool
from .coordinator import Endpoint
from .leases import SharedLimitsRegistry

__all__ = ["SampleWorker", "WorkerPlan"]


@dataclass(frozen=True, slots=True)
class WorkerPlan:
    """What every worker of a run needs to build its `Run` (sent cloudpickled)."""

    solver: FunctionSpec | None
    scorer: FunctionSpec | None
    solver_kwargs: dict[str, Any]
    scorer_kwargs: dict[str, Any]
    concurrency: int
    #: The concurrency of the whole cluster: an endpoint's total when its limits set none.
    cluster_concurrency: int
    limits: Limits | None
    retry: Retry | None


class SampleWorker:
    """One worker of a distributed run (made a Ray actor by the driver)."""

    def __init__(self, payload: bytes, hub: Any = None, index: int = 0) -> None:
        cloudpickle = importlib.import_module("ray.cloudpickle")
        self.plan: WorkerPlan = cloudpickle.loads(payload)
        self.hub = hub
        self.index = index
        self.run: Run | None = None  # made in the actor's event loop, on the first batch
        self.pool = TransportPool(max(1, self.plan.concurrency))

    def _run(self) -> Run:
        if self.run is None:
            plan = self.plan
            run = Run(
                solver=plan.solver,
                scorer=plan.scorer,
                solver_kwargs=plan.solver_kwargs,
                scorer_kwargs=plan.scorer_kwargs,
                concurrency=plan.concurrency,
                limits=plan.limits,
                retry=plan.retry,
            )
            if self.hub is not None:
                me = importlib.import_module("ray").get_runtime_context().current_actor
                run.limits = SharedLimitsRegistry(
                    self.hub, self.index, me, plan.limits, plan.cluster_concurrency, run.clock
                )
            self.run = run
        return self.run

    async def work(self, batch: list[SampleRecord]) -> AsyncIterator[list[SampleRecord]]:
        """Solve and/or score `batch`, yielding the records as they finish: each yield is
        what finished since the last (a Ray streaming generator)."""
        run = self._run()
        finished: list[SampleRecord] = []
        more = asyncio.Event()

        async def keep(record: SampleRecord) -> None:
            finished.append(record)
            more.set()

        async def execute() -> None:
            with using_pool(self.pool):
                await run.execute(batch, keep)

        # Ray runs actors on asyncio: the batch runs as a task beside this generator
        # (never a task group around a yield).
        task = asyncio.ensure_future(execute())
        try:
            while finished or not task.done():
                if finished:
                    out = finished[:]
                    finished.clear()
                    yield out
                    continue
                more.clear()
                waiting = asyncio.ensure_future(more.wait())
                await asyncio.wait((task, waiting), return_when=asyncio.FIRST_COMPLETED)
                waiting.cancel()
            task.result()
        finally:
            if not task.done():
                task.cancel()

    async def adjust(
        self, endpoint: Endpoint, grant: int, shed: int, pause_for: float, trim: bool
    ) -> None:
        """A push from an endpoint's coordinator: slots granted or asked back, a pause."""
        if self.run is not None and isinstance(self.run.limits, SharedLimitsRegistry):
            self.run.limits.adjust(endpoint, grant, shed, pause_for, trim)

    def ready(self) -> bool:
        """True once the actor is up (its constructor ran, the payload loaded)."""
        return True

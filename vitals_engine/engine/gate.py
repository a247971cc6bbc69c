"""Which samples a run starts, and when: its budget, then its endpoints' admission.

- **The budget** (a run with one): a sample is made only while the budget admits one
  more, given what the run spent, what its samples at work may still spend and what a
  finished sample has cost (`within`); while nothing is known yet of what one costs
  (its warm-up), a new sample waits for one at work to finish.
- **Admission**: before a sample is taken, it waits for a place at every endpoint the
  run's solver calls (`pacing/admission.py`); a worker that takes the next sample keeps
  the places of the one it finished when the endpoints let it.

- **The fence** (a run whose journal's lock is in an object store): before all that, a
  sample waits while the lock is in doubt (`RunJournal.fence`).

The gate is told of each sample handed on (`left`): one the budget stopped (a call of
it was refused, not sent) did not finish, and is neither counted nor logged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator

import anyio

from ..pacing.admission import Places
from ..pacing.budget import Budget
from ..pacing.limits import LimitsRegistry
from ..samples import SampleRecord
from ..vocab.usage import UsageLedger
from .counts import RunCounts
from .sample_errors import STOPPED_BY_BUDGET
from .supervisor import Pass

__all__ = ["SampleGate"]


class SampleGate:
    """The gate of one run's samples (see the module docstring).

    Example:
        >>> gate = SampleGate(limits=registry, budget=None, ledger=ledger, counts=counts)
        >>> records = gate.within(records)          # as the budget admits them
        >>> held = await gate.admitted(None)        # the supervisor's gate, per sample
        >>> gate.left(record)                       # True: it finished
        True
    """

    __slots__ = (
        "_finished",
        "_started",
        "budget",
        "counts",
        "fence",
        "ledger",
        "limits",
        "paid",
    )

    def __init__(
        self,
        *,
        limits: LimitsRegistry,
        budget: Budget | None,
        ledger: UsageLedger,
        counts: RunCounts,
        fence: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.limits = limits
        self.fence = fence
        self.budget = budget
        self.ledger = ledger
        self.counts = counts
        #: Finished samples that sent a model call (what a sample costs is learnt from these).
        self.paid = 0
        #: The samples handed out and not finished, by key (kept only with a budget).
        self._started: dict[tuple[int | str, int], SampleRecord] = {}
        self._finished: anyio.Event | None = None

    async def admitted(self, held: Pass | None) -> Pass | None:
        """Before a sample is taken: the budget's warm-up, then a place at every endpoint
        the solver calls. `held`: the places of the sample the worker just finished, kept
        for this one when the endpoints allow it."""
        if self.fence is not None:
            try:
                await self.fence()
            except BaseException:
                if held is not None:
                    held.release()
                raise
        admissions = self.limits.solver_admissions()
        if isinstance(held, Places):
            if held.keep(admissions) and not self._warming():
                return held
            held.release()
        if self.budget is not None:
            await self._warm_up()
        if not admissions:
            return None
        return await Places.enter(self, admissions)

    def within(self, records: Iterable[SampleRecord]) -> Iterable[SampleRecord]:
        """The records, handed out while the budget admits one more (all of them, without
        a budget)."""
        if self.budget is None:
            return records
        return self._within(self.budget, records)

    def _within(self, budget: Budget, records: Iterable[SampleRecord]) -> Iterator[SampleRecord]:
        """Checked before a record is made, so a record made is a record run."""
        source = iter(records)
        started = self._started
        while budget.admits(self.ledger, self.counts.done, started.values(), self.paid):
            record = next(source, None)
            if record is None:
                return
            started[record.key] = record
            yield record

    def left(self, record: SampleRecord) -> bool:
        """`record`'s sample is handed on; False when the budget stopped it (it did not
        finish: its error is taken off, and it is not counted)."""
        if self.budget is None:
            return True
        self._started.pop(record.key, None)
        if self._finished is not None:
            self._finished.set()
            self._finished = None
        if record.error is STOPPED_BY_BUDGET:
            record.error = None  # (a record scored alone stays as it was solved)
            return False
        if any(not cached for *_, cached in record.usage.rows):
            self.paid += 1
        return True

    def _warming(self) -> bool:
        """Whether the next sample must wait for one at work to finish (the budget's
        warm-up: nothing is known yet of what one costs)."""
        budget = self.budget
        return budget is not None and budget.warming(self.paid, len(self._started))

    async def _warm_up(self) -> None:
        while self._warming():
            if self._finished is None:
                self._finished = anyio.Event()
            await self._finished.wait()

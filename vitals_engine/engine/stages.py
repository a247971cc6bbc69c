"""A run's per-sample stages: solve one sample, score one sample.

Each stage opens the sample's call scope (`pacing/scope.py`: its role, its ledgers,
its list of calls, its seat, where its streamed text goes), so that its model calls are
attributed to the role and the sample and pass the run's call stacks; it is observed
(`engine/observing.py`: the sample's fields on what is logged, its span when traced);
and it records the sample's own failure, including running past its `sample_timeout`,
on its record (`engine/sample_errors.py`), letting what would fail every sample alike
end the run.

While a sample is in a stage it counts as at work (`at_work`), which the batch queues
read to know when every sample that may still join a batch is waiting on one.

Given a run's `SampleLimits`, a sample solves under a `LimitWatch` (`pacing/
sample_limits.py`): one that hits a limit stops at once, the limit goes in its
transcript, and it is scored on its last reply. Its scope carries its transcript (its
`events`) and its sandbox (`record.sandbox`, when the task has one) to every call, tool
and scorer.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable

import anyio

from .._errors import SandboxError
from ..pacing.sample_limits import LimitWatch, SampleLimits
from ..pacing.scope import CallScope, Stacks
from ..pacing.seats import current_seat
from ..samples import SampleRecord, ScoreSet, Solution, is_correct
from ..vocab.usage import UsageLedger
from .live_texts import LiveTexts
from .observing import RunObserver
from .sample_errors import FATAL, deadline, raise_if_it_stops_the_run, sample_error
from .sandboxing import RunSandboxes
from .user_functions import call_scorer, call_solver
from .work import RunWork

__all__ = ["AtWork", "SampleStages"]


class AtWork:
    """How many samples are in a per-sample stage now."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


class SampleStages:
    """The per-sample stages of one run, under way.

    Example:
        >>> stages = SampleStages(work=work, stacks=stacks, ledger=ledger, observer=observer,
        ...                       threads=anyio.CapacityLimiter(10))
        >>> await stages.solve(record)      # record.result, or record.error
        >>> await stages.score(record)      # record.score, or record.error
    """

    __slots__ = (
        "at_work",
        "ledger",
        "left",
        "limits",
        "live",
        "observer",
        "sample_timeout",
        "sandboxes",
        "stacks",
        "threads",
        "work",
    )

    def __init__(
        self,
        *,
        work: RunWork,
        stacks: Stacks,
        ledger: UsageLedger,
        observer: RunObserver,
        threads: anyio.CapacityLimiter,
        sample_timeout: float | None = None,
        live: LiveTexts | None = None,
        at_work: AtWork | None = None,
        left: Callable[[], None] | None = None,
        limits: SampleLimits | None = None,
        sandboxes: RunSandboxes | None = None,
    ) -> None:
        self.work = work
        self.stacks = stacks
        self.ledger = ledger
        self.observer = observer
        #: The threads sync solvers and scorers run on (as many as the run's concurrency).
        self.threads = threads
        self.sample_timeout = sample_timeout
        #: The streamed text of in-flight samples, for the live viewer (None: not kept).
        self.live = live
        self.at_work = at_work or AtWork()
        #: Called when a sample leaves a stage (the batch queues look again).
        self.left = left
        #: The limits each sample solves under (None: none).
        self.limits = limits
        #: The run's sandboxes, one a sample (None: the task has none).
        self.sandboxes = sandboxes

    async def solve(self, record: SampleRecord) -> None:
        """Solve `record`'s sample: its result and solver chat, or its error."""
        solver = self.work.solver
        assert solver is not None
        record.solve_started = time.time()
        if (
            self.sandboxes is not None
            and record.sandbox is None
            and not await self._sandbox(record)
        ):
            record.solve_completed = time.time()
            return
        watch = LimitWatch(self.limits) if self.limits is not None else None

        async def solved() -> None:
            call = call_solver(solver, record.sample, self.work.solver_kwargs, self.threads)
            if watch is None:
                solution = await call
            else:
                solution = await _watched(watch, call, record)
                if solution is None:  # stopped by a limit: scored on what it has
                    return
            record.result = solution.result
            record.solver_chat = solution.chat
            record.solver_metadata = solution.metadata

        await self._stage(record, "solver", "solve", solved, watch)
        record.solve_completed = time.time()

    async def score(self, record: SampleRecord) -> None:
        """Score `record`'s solved sample: its score, or its error."""
        scorer = self.work.scorer
        assert scorer is not None
        record.score_started = time.time()

        async def scored() -> None:
            scores = await call_scorer(
                scorer, record.solved_sample(), self.work.scorer_kwargs, self.threads
            )
            record.set_score(scores)

        await self._stage(record, "scorer", "score", scored)
        record.score_completed = time.time()

    async def _stage(
        self,
        record: SampleRecord,
        role: str,
        stage: str,
        work: Callable[[], Awaitable[None]],
        watch: LimitWatch | None = None,
    ) -> None:
        at_work = self.at_work
        at_work.count += 1
        try:
            with self.observer.stage(record), self._scope(role, record, watch):
                try:
                    with deadline(self._time_left(record)):
                        await work()
                except FATAL:
                    raise
                except Exception as exc:
                    raise_if_it_stops_the_run(exc)
                    record.error = sample_error(stage, exc, self.sample_timeout)
        finally:
            at_work.count -= 1
            if self.left is not None:
                self.left()

    async def _sandbox(self, record: SampleRecord) -> bool:
        """Make `record`'s sandbox; False when it could not be (the sample's error)."""
        assert self.sandboxes is not None
        try:
            await self.sandboxes.open(record)
        except SandboxError as exc:
            record.error = sample_error("solve", exc, None)
            return False
        return True

    def _scope(self, role: str, record: SampleRecord, watch: LimitWatch | None) -> CallScope:
        live = self.live
        grade = self._grader(record) if role == "solver" else None
        return CallScope(
            role=role,
            stacks=self.stacks,
            ledgers=(self.ledger, record.usage),
            calls=record.calls,
            sample=record.key,
            seat=current_seat(),
            on_text=live.sink(record.sample, role) if live is not None else None,
            on_record=live.recorder(record.sample, role, record.events)
            if live is not None
            else None,
            limits=watch,
            sandbox=record.sandbox,
            transcript=record.events,
            grade=grade,
        )

    def _grader(self, record: SampleRecord) -> Callable[[str], Awaitable[bool]] | None:
        """Grades an answer to `record`'s sample with the task's scorer, in a scorer's
        scope (its calls are the scorer's): for an agent's attempts."""
        scorer = self.work.scorer
        if scorer is None or scorer.vectorized:
            return None

        async def grade(answer: str) -> bool:
            solved = dataclasses.replace(record.solved_sample(), result=answer)
            with self._scope("scorer", record, None):
                scored = await call_scorer(scorer, solved, self.work.scorer_kwargs, self.threads)
            score = scored.primary if isinstance(scored, ScoreSet) else scored
            return is_correct(score)

        return grade

    def _time_left(self, record: SampleRecord) -> float | None:
        limit = self.sample_timeout
        if limit is None:
            return None
        began = record.solve_started or record.score_started or time.time()
        return limit - (time.time() - began)


async def _watched(
    watch: LimitWatch, call: Awaitable[Solution], record: SampleRecord
) -> Solution | None:
    """The solver's solution, unless a limit stopped it: then None, the limit in the
    sample's transcript and its last reply as its result."""
    with watch.scope() as scope:
        return await call
    if scope.cancelled_caught:
        watch.timed_out()  # a deadline, when no count stopped it
    hit = watch.hit
    if hit is None:  # cancelled from outside: the run is stopping
        return None
    record.events.append(hit)
    reply = watch.last_reply
    record.result = reply.text if reply is not None else ""
    record.solver_chat = watch.chat
    return None

"""The supervisor starts workers as they are needed: a stage reaches its full concurrency
when its samples need it, and keeps few tasks when a gate holds its samples back (an
endpoint's admission, a budget), so a high max_concurrency costs no memory it does not
use."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from vitals_engine.engine.supervisor import Supervisor
from vitals_engine.pacing.seats import current_seat
from vitals_engine.samples import Sample, SampleRecord

pytestmark = pytest.mark.anyio


def records(n: int) -> list[SampleRecord]:
    return [SampleRecord(Sample(id=i, epoch=1, input="a", target="a")) for i in range(n)]


class Barrier:
    """Opens once `parties` tasks wait at it at the same time."""

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.arrived = 0
        self.open = anyio.Event()

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived >= self.parties:
            self.open.set()
        await self.open.wait()


async def test_each_stage_reaches_its_full_concurrency_when_its_samples_need_it():
    """100 solves and then 100 scores must be under way at once for any to finish: both
    stages start all their workers."""
    solving, scoring = Barrier(100), Barrier(100)
    done: list[SampleRecord] = []

    async def solve(record: SampleRecord) -> None:
        await solving.wait()

    async def score(record: SampleRecord) -> None:
        await scoring.wait()

    async def sink(record: SampleRecord) -> None:
        done.append(record)

    with anyio.fail_after(20):
        await Supervisor(solve=solve, score=score, sink=sink, concurrency=100).run(records(300))
    assert len(done) == 300


async def test_a_gate_holding_samples_back_holds_the_workers_back_too():
    """A gate that lets 3 samples through at a time: the stage never has more than 4
    workers (3 at work, 1 at the gate) though its concurrency is 1,000, and what the
    gate returned is called each time, once the sample has left the stage."""
    room = 3
    at_work = peak = 0
    freed = anyio.Event()
    workers: set[int] = set()

    async def gate():
        nonlocal room
        while room == 0:
            await freed.wait()
        room -= 1

        def release() -> None:
            nonlocal room, freed
            room += 1
            freed.set()
            freed = anyio.Event()

        return release

    async def solve(record: SampleRecord) -> None:
        nonlocal at_work, peak
        workers.add(id(current_seat()))
        at_work += 1
        peak = max(peak, at_work)
        await anyio.lowlevel.checkpoint()
        await anyio.lowlevel.checkpoint()
        at_work -= 1

    done: list[SampleRecord] = []

    async def sink(record: SampleRecord) -> None:
        done.append(record)

    supervisor = Supervisor(solve=solve, score=None, sink=sink, concurrency=1000, gate=gate)
    with anyio.fail_after(20):
        await supervisor.run(records(200))
    assert len(done) == 200
    assert peak <= 3
    assert len(workers) <= 4
    assert room == 3  # every pass through the gate was let go again

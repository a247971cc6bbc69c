"""The supervisor starts workers as they are needed: a stage reaches its full concurrency
when its samples need it, and keeps few tasks when a gate holds its samples back (an
endpoint's admission, a budget), so a high max_concurrency costs no memory it does not
use."""

from __future__ import annotations

from typing import Any

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
    workers (3 at work, 1 at the gate) though its concurrency is 1,000, and each pass
    the gate gave is released once, when given back to it or when its worker stops."""
    room = 3
    at_work = peak = 0
    freed = anyio.Event()
    workers: set[int] = set()

    class Ticket:
        released = False

        def release(self) -> None:
            nonlocal room, freed
            assert not self.released
            self.released = True
            room += 1
            freed.set()
            freed = anyio.Event()

    async def gate(held):
        nonlocal room
        if held is not None:
            held.release()
        while room == 0:
            await freed.wait()
        room -= 1
        return Ticket()

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


async def test_a_pass_the_gate_renews_goes_from_sample_to_sample_and_is_released_once():
    """A gate that lets a worker keep its pass for its next sample: each worker asks once
    (its first sample), gives the pass back with each next pull, and releases it when it
    stops; no pass is released twice or left held."""
    made: list[Any] = []
    renewed = 0

    class Ticket:
        released = 0

        def release(self) -> None:
            self.released += 1

    async def gate(held):
        nonlocal renewed
        await anyio.lowlevel.checkpoint()
        if held is not None:
            renewed += 1
            return held
        made.append(Ticket())
        return made[-1]

    async def solve(record: SampleRecord) -> None:
        await anyio.lowlevel.checkpoint()

    done: list[SampleRecord] = []

    async def sink(record: SampleRecord) -> None:
        done.append(record)

    with anyio.fail_after(20):
        await Supervisor(solve=solve, score=None, sink=sink, concurrency=8, gate=gate).run(
            records(100)
        )
    assert len(done) == 100
    assert 1 <= len(made) <= 8
    assert [t.released for t in made] == [1] * len(made)
    assert renewed + len(made) >= 100  # every sample came through the gate

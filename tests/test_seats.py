"""Seats: a sample waiting out a retry lends its place in the run to another sample."""

from __future__ import annotations

import anyio
import pytest

import vitals_engine as ve
from vitals_engine.pacing.seats import Seat, Seats

pytestmark = pytest.mark.anyio


async def test_a_lent_seat_wakes_a_parked_worker_and_the_lender_comes_back_first():
    """A worker parks while every seat is taken; a lent seat wakes it; the lender goes on
    as soon as its wait ends, and the next worker to finish parks to make up for it."""
    seats = Seats(1)
    lender, spare = Seat(seats), Seat(seats)
    await lender.take()
    lender.calls = 1
    order: list[str] = []

    async def spare_worker() -> None:
        await spare.take()
        order.append("spare started")

    async def back_at_once(_: float) -> None:
        await anyio.wait_all_tasks_blocked()  # the spare has run meanwhile
        order.append("lender's wait over")

    async with anyio.create_task_group() as tg:
        tg.start_soon(spare_worker)
        await anyio.wait_all_tasks_blocked()
        assert order == []  # parked: the one seat is taken
        await lender.wait_out(1.0, back_at_once)
    assert order == ["spare started", "lender's wait over"]
    assert seats.active == 2  # for a moment one over
    spare.leave()
    async with anyio.create_task_group() as tg:
        tg.start_soon(spare.take)  # the spare's next sample: it parks
        await anyio.wait_all_tasks_blocked()
        assert not spare.held
        assert seats.active == 1
        tg.cancel_scope.cancel()


async def test_a_cancelled_parked_worker_loses_no_seat():
    """Cancelling a parked worker leaves the count right; closing wakes every parked one."""
    seats = Seats(1)
    await seats.take()
    async with anyio.create_task_group() as tg:
        tg.start_soon(seats.take)
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    assert seats.active == 1
    woken: list[int] = []

    async def parked() -> None:
        await seats.take()
        woken.append(1)

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(parked)
        await anyio.wait_all_tasks_blocked()
        seats.close()
    assert woken == [1, 1, 1]


async def test_a_seat_is_lent_only_by_a_samples_single_call():
    """A sample with two calls in progress keeps its seat while one of them waits."""
    seats = Seats(1)
    seat = Seat(seats)
    await seat.take()
    seat.calls = 2
    await seat.wait_out(0, anyio.sleep)
    assert seats.active == 1
    seat.calls = 1
    lent: list[int] = []

    async def sleep(_: float) -> None:
        lent.append(seats.active)

    await seat.wait_out(1.0, sleep)
    assert lent == [0]  # the seat was free while the call waited
    assert seat.held
    assert seats.active == 1


async def test_other_samples_run_while_one_waits_out_its_retry(server, tmp_path):
    """With one seat, a sample answered 429 + Retry-After lets the next sample through
    meanwhile; requests in flight never exceed the run's concurrency."""
    server.fail("429", times=1, retry_after=1)
    chat = ve.chat_openai("gpt-test", base_url=server.base_url(), api_key="sk-test")
    data = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(3)]
    task = ve.Task(data, solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    await task.eval_async(max_concurrency=1)
    prompts = [(r.request.prompt, r.outcome) for r in server.log]
    assert prompts[0] == ("What's 0+0?", "429")
    retry = prompts.index(("What's 0+0?", "ok"))
    assert ("What's 1+1?", "ok") in prompts[1:retry]
    assert server.peak_in_flight == 1
    assert task.metrics == {"accuracy": 1.0}

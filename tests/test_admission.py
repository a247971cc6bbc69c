"""Admission: a run starts no more samples than the endpoint its solver calls can serve
(its concurrency plus a backlog), whichever runs share that endpoint; the others wait,
a place that comes free goes to the run with the fewest at work, a run at its share
keeps its places from sample to sample, and none is left waiting once there is room."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import pytest

import vitals_engine as ve
from tests.helpers import drive, sums
from vitals_engine.pacing.admission import Admission, Places, backlog
from vitals_engine.pacing.limits import RateLimits
from vitals_engine.testing.clock import VirtualClock

pytestmark = pytest.mark.anyio


# -- the queue ---------------------------------------------------------------------------


async def full(capacity: int, run: str = "busy") -> Admission:
    """An admission of `capacity` with every place taken by `run`."""
    admission = Admission(lambda: capacity)
    for _ in range(capacity + backlog(capacity)):
        await admission.enter(run)
    return admission


def entering(
    admission: Admission, admitted: list, run: str = "waiting"
) -> Callable[[Any], Awaitable[None]]:
    """A sample of `run` that waits to be let in, then notes its name in `admitted`."""

    async def sample(name: Any) -> None:
        await admission.enter(run)
        admitted.append(name)

    return sample


async def test_an_endpoint_admits_its_concurrency_and_backlog_then_in_order():
    """Capacity 4 (backlog 16): 20 samples at work fill it; the next wait, and each
    sample that leaves lets the first of them in."""
    admission = await full(4)
    admitted: list[int] = []
    sample = entering(admission, admitted)
    async with anyio.create_task_group() as tg:
        for k in range(3):
            tg.start_soon(sample, k)
            await anyio.wait_all_tasks_blocked()
        assert admitted == []
        assert admission.waiting == 3
        admission.leave("busy")
        await anyio.wait_all_tasks_blocked()
        assert admitted == [0]
        admission.leave("busy")
        await anyio.wait_all_tasks_blocked()
        assert admitted == [0, 1]
        admission.leave("busy")
    assert admitted == [0, 1, 2]
    assert admission.at_work == 4 + backlog(4)


async def test_a_sample_waiting_cannot_be_overtaken_by_a_newcomer():
    """A sample woken from the queue has its place kept: one arriving meanwhile waits."""
    admission = await full(0)
    order: list[str] = []
    sample = entering(admission, order)
    async with anyio.create_task_group() as tg:
        tg.start_soon(sample, "first")
        await anyio.wait_all_tasks_blocked()
        admission.leave("busy")  # wakes "first"; it has not resumed yet
        tg.start_soon(sample, "newcomer")
        await anyio.wait_all_tasks_blocked()
        assert order == ["first"]
        assert admission.waiting == 1
        admission.leave("busy")
    assert order == ["first", "newcomer"]


async def test_a_cancelled_wait_leaves_the_queue_to_the_next():
    admission = await full(0)
    admitted: list[str] = []
    sample = entering(admission, admitted)
    async with anyio.create_task_group() as tg:
        with anyio.CancelScope() as first:
            tg.start_soon(sample, "never")
            await anyio.wait_all_tasks_blocked()
            first.cancel()
        tg.cancel_scope.cancel()
    async with anyio.create_task_group() as tg:
        tg.start_soon(sample, "next")
        await anyio.wait_all_tasks_blocked()
        assert admission.waiting == 1
        admission.leave("busy")
    assert admitted == ["next"]
    assert admission.waiting == 0
    assert admission.at_work == backlog(0)


async def test_a_sample_cancelled_once_let_in_holds_no_place():
    """Let in, then cancelled before it resumed: either its wait raises and its place goes
    to the next, or (where the backend delivers the cancellation later) it is in and
    leaves; either way the next sample gets in and no place is lost."""
    admission = await full(0)
    admitted: list[str] = []
    scopes: dict[str, anyio.CancelScope] = {}

    async def sample(name: str) -> None:
        with anyio.CancelScope() as scopes[name]:
            await admission.enter(name)
            admitted.append(name)
            admission.leave(name)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(sample, "doomed")
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(sample, "next")
            await anyio.wait_all_tasks_blocked()
            admission.leave("busy")  # "doomed" is let in ...
            scopes["doomed"].cancel()  # ... and cancelled before it resumes
    assert "next" in admitted
    assert admission.at_work == backlog(0) - 1
    assert admission.waiting == 0


async def test_a_place_that_comes_free_goes_to_the_run_with_the_fewest_at_work():
    """Run "a" holds every place and waits for one more; "b", with none, comes later and
    is let in first. Among runs with as many at work, the first to wait goes first."""
    admission = await full(0, run="a")
    admitted: list[str] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(entering(admission, admitted, run="a"), "a")
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(entering(admission, admitted, run="b"), "b")
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(entering(admission, admitted, run="c"), "c")
        await anyio.wait_all_tasks_blocked()
        for _ in range(3):
            admission.leave("a")
            await anyio.wait_all_tasks_blocked()
    assert admitted == ["b", "c", "a"]
    assert admission.at_work_of("a") == backlog(0) - 2


async def test_a_run_keeps_its_place_for_its_next_sample_unless_a_run_waits_with_fewer():
    """A run may hand the place of a sample that left to its next one while no waiting
    run has fewer at work than it would have without it: runs at an even share hand no
    place around; a run above its share gives it up."""
    admission = Admission(lambda: 0)  # 16 places
    for run, count in (("a", 10), ("b", 6)):
        for _ in range(count):
            await admission.enter(run)
    assert admission.keep("a")  # nobody waits
    admitted: list[str] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(entering(admission, admitted, run="b"), "b")
        await anyio.wait_all_tasks_blocked()
        assert not admission.keep("a")  # "b" would have 6 to its 9
        admission.leave("a")
        await anyio.wait_all_tasks_blocked()
    assert admitted == ["b"]
    assert (admission.at_work_of("a"), admission.at_work_of("b")) == (9, 7)
    async with anyio.create_task_group() as tg:
        tg.start_soon(entering(admission, admitted, run="b"), "b again")
        await anyio.wait_all_tasks_blocked()
        assert not admission.keep("a")  # still 7 to its 8
        admission.leave("a")
        await anyio.wait_all_tasks_blocked()
        assert (admission.at_work_of("a"), admission.at_work_of("b")) == (8, 8)
        tg.start_soon(entering(admission, admitted, run="b"), "b once more")
        await anyio.wait_all_tasks_blocked()
        assert admission.keep("a")  # without its place "a" has 7, fewer than "b"
        assert admission.keep("b")  # its own run waiting never takes a place from it
        admission.leave("a")
    assert admitted == ["b", "b again", "b once more"]


async def test_no_place_is_kept_above_a_concurrency_that_went_down():
    size = 8
    admission = Admission(lambda: size)
    for _ in range(size + backlog(size)):
        await admission.enter("a")
    assert admission.keep("a")
    size = 4  # 20 places where 24 are taken
    assert not admission.keep("a")
    for _ in range(4):
        admission.leave("a")
    assert admission.keep("a")  # 20 taken: none over


async def test_places_are_kept_only_at_the_same_endpoints():
    first, second = Admission(lambda: 1), Admission(lambda: 1)
    places = await Places.enter("run", [first, second])
    assert (first.at_work, second.at_work) == (1, 1)
    assert places.keep([first, second])
    assert not places.keep([first])  # its solver calls fewer endpoints now
    assert not places.keep([second, first])
    places.release()
    assert (first.at_work, second.at_work) == (0, 0)


async def test_a_sample_cancelled_waiting_at_its_second_endpoint_leaves_the_first():
    first, second = Admission(lambda: 1), await full(0)
    with anyio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(anyio.get_cancelled_exc_class()):
            await Places.enter("run", [first, second])
    assert first.at_work == 0
    assert second.waiting == 0


# -- whole runs --------------------------------------------------------------------------


async def test_runs_sharing_an_endpoint_start_only_what_it_can_serve(tmp_path):
    """Three runs of 120 samples at max_concurrency 60 on an endpoint of 2 requests at once:
    without admission 180 samples would be at work, 178 of them only waiting for a
    request slot. With it, samples at work across the runs stay within the endpoint's
    concurrency and backlog, every sample finishes, and no run waits for another to end.
    The model answers after 10 ms of a virtual clock: what starts when does not depend on
    how busy the machine is."""
    clock = VirtualClock()
    in_flight = peak_in_flight = 0

    async def answer(prompt: str) -> AsyncIterator[str]:
        nonlocal in_flight, peak_in_flight
        in_flight += 1
        peak_in_flight = max(peak_in_flight, in_flight)
        try:
            await clock.sleep(0.01)
        finally:
            in_flight -= 1
        yield str(2 * int(prompt.rpartition("+")[2].rstrip("?")))

    chat = ve.chat_mock(answer, model="gpt-admit")
    at_work = peak = 0
    order: list[str] = []

    def counted(run: str):
        own = chat.clone()
        generate = ve.generate(own)

        async def solver(inputs, **kwargs):
            nonlocal at_work, peak
            at_work += 1
            peak = max(peak, at_work)
            order.append(run)
            try:
                return await generate(inputs, **kwargs)
            finally:
                at_work -= 1

        solver.solver_chat = own  # the model it calls, known before it runs
        return solver

    tasks = [
        ve.Task(sums(120, f"{run}: "), counted(run), ve.detect_includes(), name=run, dir=tmp_path)
        for run in "abc"
    ]
    options = {
        "max_concurrency": 60,
        "rate_limits": RateLimits(max_concurrency=2),
        "progress": False,
    }
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(drive, clock)
            async with anyio.create_task_group() as runs:
                for task in tasks:
                    runs.start_soon(functools.partial(task.eval_async, **options))
            tg.cancel_scope.cancel()
    assert [t.metrics for t in tasks] == [{"accuracy": 1.0}] * 3
    assert peak_in_flight <= 2
    assert peak <= 2 + backlog(2) + 1
    assert peak < 60
    # The runs take turns: the last run's samples start before the first run's end, and
    # once they all go they share the endpoint evenly (40 starts each in the middle 120).
    assert order.index("c") < max(i for i, run in enumerate(order) if run == "a")
    middle = order[120:240]
    assert all(30 <= middle.count(run) <= 50 for run in "abc"), middle


async def test_a_run_with_more_samples_than_its_endpoint_serves_keeps_few_at_work(server, tmp_path):
    """One run at max_concurrency 100 on a model whose own RateLimits allow 4 requests at once:
    about 4 + backlog samples are at work, not 100; all 150 finish."""
    server.latency = 0.005
    chat = ve.chat_openai(
        "gpt-admit",
        base_url=server.base_url(),
        api_key="sk-test",
        rate_limits=RateLimits(max_concurrency=4),
    )
    at_work = peak = 0
    generate = ve.generate(chat)

    async def solver(inputs, **kwargs):
        nonlocal at_work, peak
        at_work += 1
        peak = max(peak, at_work)
        try:
            return await generate(inputs, **kwargs)
        finally:
            at_work -= 1

    solver.solver_chat = chat
    task = ve.Task(sums(150), solver, ve.detect_includes(), dir=tmp_path)
    with anyio.fail_after(60):
        await task.eval_async(max_concurrency=100, progress=False)
    assert task.metrics == {"accuracy": 1.0}
    assert server.peak_in_flight <= 4
    assert peak <= 4 + backlog(4) + 1

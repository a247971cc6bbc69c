"""Admission: a run starts no more samples than the endpoint its solver calls can serve
(its concurrency plus a backlog), whichever runs share that endpoint; the others wait
in one queue, in order, and none is left waiting once there is room."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

import vitals_engine as ve
from vitals_engine.pacing.admission import Admission, backlog
from vitals_engine.pacing.limits import Limits

pytestmark = pytest.mark.anyio


def sums(n, prefix=""):
    return [{"input": f"{prefix}What's {i}+{i}?", "target": str(2 * i)} for i in range(n)]


# -- the queue ---------------------------------------------------------------------------


async def full(capacity: int) -> Admission:
    """An admission of `capacity` with every place taken."""
    admission = Admission(lambda: capacity)
    for _ in range(capacity + backlog(capacity)):
        await admission.enter()
    return admission


def entering(admission: Admission, admitted: list) -> Callable[[Any], Awaitable[None]]:
    """A sample that waits to be let in, then notes its name in `admitted`."""

    async def sample(name: Any) -> None:
        await admission.enter()
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
        admission.leave()
        await anyio.wait_all_tasks_blocked()
        assert admitted == [0]
        admission.leave()
        await anyio.wait_all_tasks_blocked()
        assert admitted == [0, 1]
        admission.leave()
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
        admission.leave()  # wakes "first"; it has not resumed yet
        tg.start_soon(sample, "newcomer")
        await anyio.wait_all_tasks_blocked()
        assert order == ["first"]
        assert admission.waiting == 1
        admission.leave()
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
        admission.leave()
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
            await admission.enter()
            admitted.append(name)
            admission.leave()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(sample, "doomed")
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(sample, "next")
            await anyio.wait_all_tasks_blocked()
            admission.leave()  # "doomed" is let in ...
            scopes["doomed"].cancel()  # ... and cancelled before it resumes
    assert "next" in admitted
    assert admission.at_work == backlog(0) - 1
    assert admission.waiting == 0


# -- whole runs over HTTP ----------------------------------------------------------------


async def test_runs_sharing_an_endpoint_start_only_what_it_can_serve(server, tmp_path):
    """Three runs of 120 samples at max_concurrency 60 on an endpoint of 2 requests at once:
    without admission 180 samples would be at work, 178 of them only waiting for a
    request slot. With it, samples at work across the runs stay within the endpoint's
    concurrency and backlog, every sample finishes, and no run waits for another to end."""
    server.latency = 0.01
    chat = ve.chat_openai("gpt-admit", base_url=server.base_url(), api_key="sk-test")
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
    options = {"max_concurrency": 60, "limits": Limits(max_concurrency=2), "progress": False}
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for task in tasks:
                tg.start_soon(functools.partial(task.eval_async, **options))
    assert [t.metrics for t in tasks] == [{"accuracy": 1.0}] * 3
    assert server.peak_in_flight <= 2
    assert peak <= 2 + backlog(2) + 1
    assert peak < 60
    # The runs take turns: the last run's samples start before the first run's end.
    assert order.index("c") < max(i for i, run in enumerate(order) if run == "a")


async def test_a_run_with_more_samples_than_its_endpoint_serves_keeps_few_at_work(server, tmp_path):
    """One run at max_concurrency 100 on a model whose own Limits allow 4 requests at once:
    about 4 + backlog samples are at work, not 100; all 150 finish."""
    server.latency = 0.005
    chat = ve.chat_openai(
        "gpt-admit",
        base_url=server.base_url(),
        api_key="sk-test",
        limits=Limits(max_concurrency=4),
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

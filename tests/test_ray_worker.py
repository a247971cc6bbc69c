"""A Ray worker's reports to the driver, with the worker run in this process (no Ray
cluster: the actor class is used as a plain object, on asyncio as in Ray)."""

import asyncio

import pytest

pytest.importorskip("ray")  # an extra: `make setup` installs it, `make demo` does not

from ray import cloudpickle

import vitals_engine as ve
from vitals_engine.distributed.wire import parcel_out
from vitals_engine.distributed.worker import SampleWorker, WorkerPlan
from vitals_engine.engine.options import RunOptions
from vitals_engine.engine.user_functions import spec_of
from vitals_engine.engine.work import RunWork
from vitals_engine.samples import Sample, SampleRecord

pytestmark = pytest.mark.anyio

#: "called": the slow sample has made its call; "open": it may finish (set up by the
#: test, in its event loop).
GATES: dict[str, asyncio.Event] = {}


@pytest.fixture
def anyio_backend():
    return "asyncio"  # a Ray actor's event loop


async def call_then_wait(input):
    """One model call each; the sample "What's 1+1?" then waits to be let go, and the
    other ones finish once it has made its call."""
    chat = ve.chat_mock()
    reply = await chat.chat_async(input)
    if "1+1" in input:
        GATES["called"].set()
        await GATES["open"].wait()
    else:
        await GATES["called"].wait()
    return ve.Solution(reply, chat=chat)


async def test_a_worker_reports_what_its_samples_at_work_have_spent():
    """Two samples on one worker, one model call each: one finishes, the other waits
    after its call. The report that brings the finished one counts the waiting one's
    call as spent at work (the driver counts it if the worker dies); once that one
    finishes too, nothing is at work and its usage comes back with its record."""
    GATES.update(called=asyncio.Event(), open=asyncio.Event())
    plan = WorkerPlan(
        work=RunWork(
            solver=spec_of(call_then_wait, "solver"), scorer=spec_of(ve.detect_includes(), "scorer")
        ),
        options=RunOptions(max_concurrency=4),
        concurrency=4,
        cluster_concurrency=4,
    )
    worker = SampleWorker()
    await worker.begin(cloudpickle.dumps(plan))
    records = [SampleRecord(Sample(i, 1, f"What's {i}+{i}?", str(2 * i))) for i in (1, 2)]
    await worker.feed(parcel_out(records, fresh=True))
    reports = worker.serve()
    finished, _, spent, _ = cloudpickle.loads(await anext(reports))
    assert [done[0] for done in finished] == [2]
    assert spent.to_frame().select("role", "requests").rows() == [("solver", 1)]
    GATES["open"].set()
    await worker.stop()
    rest = [cloudpickle.loads(blob) async for blob in reports]
    assert [done[0] for finished, _, _, _ in rest for done in finished] == [1]
    assert rest[-1][2] is not None
    assert rest[-1][2].rows == {}

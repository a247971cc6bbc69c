"""Endpoint limits per process (per event loop), not per run: runs that call one endpoint
share its concurrency, rpm/tpm, pause and adaptive concurrency; each keeps its own
history; the stricter of their settings holds; nothing outlives the last run using it."""

from __future__ import annotations

import functools
import threading

import anyio
import anyio.from_thread
import pytest

import vitals_engine as ve
from tests.helpers import openai, sums
from vitals_engine.chats.layers.stacks import CallStacks
from vitals_engine.pacing.limits import RateLimits, RunLimits

pytestmark = pytest.mark.anyio

ENDPOINT = ("OpenAI", "http://127.0.0.1:1/v1", "gpt-shared")
MODEL = "gpt-shared"  # the model of the runs on the mock server


async def eval_together(*runs):
    """`task.eval_async(**options)` of each (task, options) at once, in one task group."""
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for task, options in runs:
                tg.start_soon(functools.partial(task.eval_async, progress=False, **options))


# -- how runs' settings combine ----------------------------------------------------------


async def test_runs_in_one_event_loop_share_one_state_per_endpoint():
    """Two runs' limiters of one endpoint share its state; another endpoint has its own."""
    a, b = RunLimits(None, concurrency=4), RunLimits(None, concurrency=4)
    one, two = a.get(ENDPOINT, None), b.get(ENDPOINT, None)
    assert one is not two
    assert one.shared is two.shared
    assert a.get(("OpenAI", "x", "other"), None).shared is not one.shared
    a.close()
    b.close()


async def test_the_stricter_of_two_runs_limits_holds_until_it_leaves():
    """Run A asks max_concurrency 5 and rpm 600, run B (max_concurrency 50) tpm 10,000: while
    both use the endpoint it has the lowest of each; when A leaves, B's own limits hold."""
    a = RunLimits(RateLimits(max_concurrency=5, rpm=600), concurrency=32)
    b = RunLimits(RateLimits(tpm=10_000), concurrency=50)
    limiter_a, limiter_b = a.get(ENDPOINT, None), b.get(ENDPOINT, None)
    assert limiter_b.limits == RateLimits(max_concurrency=5, rpm=600, tpm=10_000)
    assert (limiter_b.max_concurrency, limiter_b.concurrency) == (5, 5)
    assert limiter_a.requests is limiter_b.requests is not None
    a.close()
    assert limiter_b.limits == RateLimits(tpm=10_000)
    assert (limiter_b.max_concurrency, limiter_b.concurrency) == (50, 50)
    assert limiter_b.requests is None
    b.close()


async def test_a_concurrency_no_run_sets_is_the_runs_own_added_up():
    """Without a max_concurrency of the endpoint's, two runs at 8 and 24 samples may have
    32 requests in flight: as many as each would alone."""
    a, b = RunLimits(None, concurrency=8), RunLimits(RateLimits(rpm=6000), concurrency=24)
    limiter = a.get(ENDPOINT, None)
    b.get(ENDPOINT, None)
    assert (limiter.max_concurrency, limiter.concurrency) == (32, 32)
    b.close()
    assert (limiter.max_concurrency, limiter.concurrency) == (8, 8)
    a.close()


async def test_a_models_own_limits_in_one_run_bind_every_run():
    """A model's own RateLimits in run A are A's ask for the endpoint: run B's calls obey
    them too."""
    a, b = RunLimits(None, concurrency=16), RunLimits(None, concurrency=16)
    a.get(ENDPOINT, RateLimits(max_concurrency=3))
    assert b.get(ENDPOINT, None).max_concurrency == 3
    a.close()
    assert b.get(ENDPOINT, None).max_concurrency == 16
    b.close()


async def test_a_rate_limit_halves_the_endpoint_for_every_run_and_each_logs_it():
    """A 429 on an endpoint with an rpm bucket, seen by run A: the pause and the halved
    concurrency hold for B too; both runs' histories record it; a run that joins later
    records only what changes after it joined; retry warnings stay once per run."""
    a, b = RunLimits(RateLimits(rpm=6000, max_concurrency=8)), RunLimits(None, concurrency=8)
    limiter_a, limiter_b = a.get(ENDPOINT, None), b.get(ENDPOINT, None)
    limiter_a.on_rate_limited(30.0)
    assert limiter_b.paused_until == limiter_a.paused_until > limiter_b.clock.now()
    assert limiter_b.concurrency == 4
    assert [why for *_, why in limiter_a.history] == ["rate_limit"]
    assert [why for *_, why in limiter_b.history] == ["rate_limit"]
    late = RunLimits(None, concurrency=8)
    limiter_late = late.get(ENDPOINT, None)
    assert limiter_late.concurrency == 4
    assert limiter_late.history == []
    for _ in range(4):
        limiter_b.on_success()
    assert [why for *_, why in limiter_late.history] == ["steady_state_up"]
    assert len(limiter_a.history) == len(limiter_b.history) == 2
    limiter_a.retries_announced = True
    assert not limiter_b.retries_announced
    for registry in (a, b, late):
        registry.close()


async def test_the_last_run_to_leave_an_endpoint_forgets_it():
    """Once every run using an endpoint has ended, a new run starts afresh: no pause, no
    halved concurrency, no limits of the runs before."""
    first = RunLimits(RateLimits(rpm=6000, max_concurrency=2), concurrency=8)
    limiter = first.get(ENDPOINT, None)
    limiter.on_rate_limited(300.0)
    first.close()
    fresh = RunLimits(None, concurrency=8).get(ENDPOINT, None)
    assert fresh.shared is not limiter.shared
    assert fresh.paused_until < fresh.clock.now()
    assert (fresh.limits, fresh.max_concurrency, fresh.concurrency) == (RateLimits(), 8, 8)
    assert limiter.history  # the ended run keeps what it saw, for its log


async def test_a_run_that_goes_on_after_it_closed_joins_again():
    """A registry used again after close() (a run whose execute() is called again) takes
    its place on the endpoint again, keeping its history."""
    registry = RunLimits(RateLimits(rpm=6000))
    limiter = registry.get(ENDPOINT, None)
    limiter.on_rate_limited(1.0)
    registry.close()
    assert not limiter.joined
    other = RunLimits(None, concurrency=4)
    assert registry.get(ENDPOINT, None) is limiter
    assert limiter.joined
    assert limiter.shared is other.get(ENDPOINT, None).shared
    assert len(limiter.history) == 1
    registry.close()
    other.close()


def test_event_loops_in_other_threads_have_their_own_endpoints():
    """Each event loop (here two, each in a thread of its own, as a notebook's eval runs)
    has its own endpoint states: limits bound to one loop never reach another."""
    found = {}

    async def use(name):
        registry = RunLimits(RateLimits(max_concurrency=2))
        found[name] = (registry.get(ENDPOINT, None).shared, threading.get_ident())
        return registry

    with (
        anyio.from_thread.start_blocking_portal() as one,
        anyio.from_thread.start_blocking_portal("trio") as two,
    ):
        kept = [one.call(use, "one"), two.call(use, "two")]
        one.call(_close, kept[0])
        two.call(_close, kept[1])
    assert found["one"][0] is not found["two"][0]
    assert found["one"][1] != found["two"][1]


async def _close(registry):
    registry.close()


# -- whole runs over HTTP -----------------------------------------------------------------


async def test_two_evals_at_once_share_the_endpoints_max_concurrency(server, tmp_path):
    """Two eval_async() of different tasks at once on one endpoint with
    RateLimits(max_concurrency=5), each with 20 samples at work: the server never has more
    than 5 requests in flight (per run, it would be 10)."""
    server.latency = 0.05
    chat = openai(server, MODEL)
    a = ve.Task(sums(30, "A: "), ve.generate(chat), ve.detect_includes(), name="a", dir=tmp_path)
    b = ve.Task(
        sums(30, "B: "), ve.generate(chat.clone()), ve.detect_includes(), name="b", dir=tmp_path
    )
    options = {"max_concurrency": 20, "rate_limits": RateLimits(max_concurrency=5)}
    await eval_together((a, options), (b, options))
    assert server.peak_in_flight <= 5
    assert a.metrics == b.metrics == {"accuracy": 1.0}
    assert server.requests == 60


async def test_a_rate_limit_seen_by_one_run_pauses_the_other(server, tmp_path):
    """Two runs on one endpoint with an rpm bucket (so one 429 means "too fast") and one
    request in flight at a time: the first request, whichever run sent it, is answered 429
    with Retry-After 0.5 s. No request of either run reaches the server before that
    Retry-After has passed, and both runs go on after it."""
    server.latency = 0.01
    server.fail("429", times=1, retry_after=0.5)
    limits = RateLimits(max_concurrency=1, rpm=60_000)
    a = ve.Task(
        sums(4, "A: "),
        ve.generate(openai(server, MODEL)),
        ve.detect_includes(),
        name="a",
        dir=tmp_path,
    )
    b = ve.Task(
        sums(4, "B: "),
        ve.generate(openai(server, MODEL)),
        ve.detect_includes(),
        name="b",
        dir=tmp_path,
    )
    await eval_together((a, {"rate_limits": limits}), (b, {"rate_limits": limits}))
    assert a.metrics == b.metrics == {"accuracy": 1.0}
    [limited] = [r for r in server.log if r.outcome == "429"]
    after = [r for r in server.log if r is not limited]
    assert all(r.at >= limited.answered + 0.5 for r in after)
    prompts = [r.request.prompt for r in after]
    assert any(p.startswith("A: ") for p in prompts)
    assert any(p.startswith("B: ") for p in prompts)


async def test_a_finished_runs_limits_do_not_reach_a_later_run(server, tmp_path):
    """Run A (its own max_concurrency 1, an rpm bucket) is answered 429 with Retry-After
    30 s and gives up (one attempt). Run B on the same endpoint, right after in the same
    process, is neither paused by A's Retry-After nor held to A's limits."""
    server.fail("429", times=1, retry_after=30)
    a = ve.Task(
        sums(1), ve.generate(openai(server, MODEL)), ve.detect_includes(), name="a", dir=tmp_path
    )
    await a.eval_async(
        rate_limits=RateLimits(max_concurrency=1, rpm=60_000),
        retry=ve.Retry(max_attempts=1),
        fail_on_error=False,
        progress=False,
    )
    [limited] = [r for r in server.log if r.outcome == "429"]
    seen = []

    async def solver(input: str, solver_chat: ve.Chat) -> str:
        from vitals_engine.pacing.scope import current_scope

        scope = current_scope()
        assert scope is not None
        assert isinstance(scope.stacks, CallStacks)
        assert scope.stacks.limits is not None
        limiter = scope.stacks.limits.get(solver_chat.provider.endpoint, None)
        seen.append((limiter.max_concurrency, limiter.paused_until > limiter.clock.now()))
        return await solver_chat.clone().chat_async(input)

    b = ve.Task(sums(3), solver, ve.detect_includes(), name="b", dir=tmp_path)
    with anyio.fail_after(20):
        await b.eval_async(solver_chat=openai(server, MODEL), max_concurrency=8, progress=False)
    assert b.metrics == {"accuracy": 1.0}
    assert seen == [(8, False)] * 3
    assert all(r.at < limited.answered + 30 for r in server.log)

"""The calls a cache answered, seen in the cost: `get_cost()` keeps them in rows of their
own (`cached` True, cost 0), a log gives the same rows back from its samples' model
events (`"cache": "read"`), and the summary marks them and counts the cache's hits and
the calls sent. Runs go against the local mock server (the mock model is not cached)."""

from __future__ import annotations

import msgspec
import pytest
from polars.testing import assert_frame_equal

import vitals_engine as ve
from tests.helpers import openai, sums
from vitals_engine.log import schema as s
from vitals_engine.log.logged_sample import logged_cache
from vitals_engine.log.writer import write_json_log
from vitals_engine.report import format_cost, summary

MODEL = "gpt-4.1-mini"  # a model with a known price
KEY = ["role", "provider", "model", "batch", "cached"]


def graded_task(server, tmp_path, n: int) -> ve.Task:
    """A solver and a judge of the same model, both cacheable."""
    return ve.Task(
        sums(n),
        solver=ve.generate(openai(server, MODEL)),
        scorer=ve.model_graded_qa(scorer_chat=openai(server, MODEL)),
        dir=tmp_path / "logs",
        name="cached-sums",
    )


@pytest.mark.anyio
async def test_a_run_half_answered_by_the_cache_reads_its_cost_back_from_the_log(server, tmp_path):
    """Three of six samples were asked before: their solver and judge calls come from the
    cache, at cost 0, in rows of their own; the log's cost is the same frame."""
    cache = ve.Cache(dir=tmp_path / "cache")
    await graded_task(server, tmp_path, 3).eval_async(cache=cache, progress=False)
    sent_before = len(server.log)
    task = graded_task(server, tmp_path, 6)
    await task.eval_async(cache=cache, progress=False)
    assert task.metrics == {"accuracy": 1.0}
    assert len(server.log) - sent_before == 6  # 3 solver + 3 judge calls went out

    cost = task.get_cost()
    assert cost.select(*KEY, "requests").rows() == [
        ("solver", "OpenAI", MODEL, False, False, 3),
        ("solver", "OpenAI", MODEL, False, True, 3),
        ("scorer", "OpenAI", MODEL, False, False, 3),
        ("scorer", "OpenAI", MODEL, False, True, 3),
    ]
    live_solver, cached_solver, live_judge, cached_judge = cost.iter_rows(named=True)
    assert cached_solver["cost"] == cached_judge["cost"] == 0.0
    assert live_solver["cost"] > 0
    assert live_judge["cost"] > 0
    assert cached_solver["input_tokens"] == live_solver["input_tokens"]  # the same questions

    assert_frame_equal(ve.read_log(task.log_path).get_cost(), cost, check_exact=False)
    header_only = ve.read_log(task.log_path, header_only=True).get_cost()
    assert header_only.select("role", "batch", "cached").rows() == [
        ("solver", None, None),
        ("scorer", None, None),
    ]

    lines = format_cost(task).splitlines()[2:]
    assert [line.split()[1] for line in lines] == [f"OpenAI/{MODEL}"] * 4
    assert ["(cached)" in line for line in lines] == [False, True, False, True]
    assert "Cache: 6 of 12 calls answered from the cache, 6 sent." in summary(task)


@pytest.mark.anyio
async def test_a_run_the_cache_answered_whole_has_one_cached_row_per_role(server, tmp_path):
    cache = ve.Cache(dir=tmp_path / "cache")
    await graded_task(server, tmp_path, 2).eval_async(cache=cache, progress=False)
    task = graded_task(server, tmp_path, 2)
    sent_before = len(server.log)
    await task.eval_async(cache=cache, progress=False)
    assert len(server.log) == sent_before
    cost = task.get_cost()
    assert cost.select("role", "cached", "requests", "cost").rows() == [
        ("solver", True, 2, 0.0),
        ("scorer", True, 2, 0.0),
    ]
    assert_frame_equal(ve.read_log(task.log_path).get_cost(), cost, check_exact=False)
    assert "Cache: 4 of 4 calls answered from the cache, 0 sent." in summary(task)


@pytest.mark.anyio
async def test_a_run_without_a_cache_says_nothing_of_one(server, tmp_path):
    """No cached rows, no "(cached)", no cache line; a later run without a cache on the
    same task drops the earlier run's counts."""
    task = graded_task(server, tmp_path, 2)
    await task.eval_async(progress=False)
    assert task.get_cost()["cached"].to_list() == [False, False]
    assert ve.read_log(task.log_path).get_cost()["cached"].to_list() == [False, False]
    assert "(cached)" not in format_cost(task)
    assert "Cache:" not in summary(task)

    await task.eval_async(cache=ve.Cache(dir=tmp_path / "cache"), progress=False)
    assert "Cache: 0 of 4 calls answered from the cache, 4 sent." in summary(task)
    await task.eval_async(progress=False)
    assert "Cache:" not in summary(task)


def test_the_model_events_say_which_roles_the_cache_answered():
    """All of a role's calls read from the cache: that role is cached; a write or a live
    call among them: it is not. Inspect's own events (spaced JSON) read the same."""

    def read(*events):
        return logged_cache(msgspec.Raw(msgspec.json.encode(list(events))))

    def model(cache=None, role=None):
        event = {"event": "model", "model": "openai/m"}
        return event | ({"cache": cache} if cache else {}) | ({"role": role} if role else {})

    assert read(model("write"), model()) is None  # nothing read: no decode
    assert read(model("read"), model("read", "grader")) == {"solver": True, "scorer": True}
    assert read(model("read"), model("write")) == {"solver": False}
    assert read(model("read"), model(None, "grader")) == {"solver": True, "scorer": False}
    spaced = b'[{"event": "model", "model": "openai/m", "cache": "read"}]'
    assert logged_cache(msgspec.Raw(spaced)) == {"solver": True}


def _inspect_log(tmp_path, caches: list[list[str | None]]):
    """A log as Inspect writes one: usage by model only, one sample per list of its model
    events' `cache`."""
    samples = []
    for i, events in enumerate(caches, start=1):
        raw = [
            {"event": "model", "model": "openai/m"} | ({"cache": c} if c else {}) for c in events
        ]
        samples.append(
            s.EvalSample(
                id=i,
                epoch=1,
                input="hi",
                target="x",
                model_usage={"openai/m": s.ModelUsage(input_tokens=3, output_tokens=1)},
                events=msgspec.Raw(msgspec.json.encode(raw)),
            )
        )
    log = s.EvalLog(
        version=2,
        status="success",
        eval=s.EvalSpec(
            created="2026-01-01T00:00:00+00:00",
            task="inspected",
            dataset=s.EvalDataset(),
            model="openai/m",
            config=s.EvalConfig(),
        ),
        stats=s.EvalStats(model_usage={"openai/m": s.ModelUsage(input_tokens=6, output_tokens=2)}),
        samples=samples,
    )
    return write_json_log(tmp_path / "2026-01-01T00-00-00+00-00_inspected_x.json", log)


@pytest.mark.parametrize(
    ("caches", "cached"),
    [([["read"], ["read", "read"]], True), ([["read"], ["write"]], False), ([[], []], False)],
    ids=["all-read", "one-sent", "no-cache"],
)
def test_a_log_with_usage_by_model_only_is_cached_when_every_call_was(tmp_path, caches, cached):
    path = _inspect_log(tmp_path, caches)
    assert ve.read_log(path).get_cost()["cached"].to_list() == [cached]
    assert ve.read_log(path, header_only=True).get_cost()["cached"].to_list() == [None]

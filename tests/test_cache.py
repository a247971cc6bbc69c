"""The cache of model replies (`eval(cache=)`, `chat_*(cache=)`) against the mock server
over real HTTP: a hit sends nothing and is logged and priced as one; what the key holds;
epochs and repeated calls; expiry; damaged entries and stores; no secrets on disk;
errors never kept; resume, batch mode, and bad options."""

from __future__ import annotations

import contextlib
import itertools
import logging
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

import vitals_engine as ve
from tests import helpers
from tests.helpers import openai
from vitals_engine.caching.keys import repeated, reply_key
from vitals_engine.caching.store import STORE_FILE
from vitals_engine.vocab.model_calls import ChatRequest, ToolDef
from vitals_engine.vocab.turns import ContentImage, ContentText, TokenUsage, Turn

pytestmark = pytest.mark.anyio

MODEL = "gpt-4.1-mini"
DAY = 86_400.0

#: The rows of this module's tasks carry their numbers as ids.
sums = partial(helpers.sums, ids=True)


def sums_task(
    server: Any, tmp_path: Path, ids: Iterable[int] = range(1, 4), **chat_options: Any
) -> ve.Task:
    """A task of sums solved by the mock server's model, logged in tmp_path/logs."""
    chat = openai(server, MODEL, **chat_options)
    return ve.Task(
        sums(ids), solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path / "logs"
    )


def outcome(task: ve.Task) -> list[tuple[Any, ...]]:
    return task.get_samples().select("id", "epoch", "result", "score").sort("id", "epoch").rows()


def model_events(path: Path | None) -> list[tuple[Any, int, dict[str, Any]]]:
    """(sample id, epoch, event) of each model event the log at `path` holds."""
    assert path is not None
    found = []
    for sample in ve.read_log(path).samples:
        for event in msgspec.json.decode(bytes(sample.events)):
            if event["event"] == "model":
                found.append((sample.id, sample.epoch, event))
    return found


def sql(cache: ve.Cache, statement: str, *args: Any) -> list[tuple[Any, ...]]:
    """Run `statement` on the cache's database from a connection of its own."""
    with contextlib.closing(sqlite3.connect(cache.path / STORE_FILE)) as db:
        rows = db.execute(statement, args).fetchall()
        db.commit()
    return rows


def prompts(server: Any) -> Counter[str]:
    return Counter(entry.request.prompt for entry in server.log)


@pytest.fixture
def cache(tmp_path: Path) -> ve.Cache:
    """A store of its own: `open_store` keeps one per directory per process."""
    return ve.Cache(dir=tmp_path / "cache")


@pytest.fixture
def warnings(caplog: pytest.LogCaptureFixture) -> Callable[[str], list[str]]:
    """The library's warnings that say `text`."""
    caplog.set_level(logging.WARNING, logger="vitals_engine")
    return lambda text: [r.getMessage() for r in caplog.records if text in r.getMessage()]


# -- a hit sends nothing --------------------------------------------------------------------------


async def test_a_second_run_is_answered_from_the_cache_and_sends_nothing(server, tmp_path, cache):
    first = await sums_task(server, tmp_path).eval_async(cache=cache)
    assert server.requests == 3
    server.reset()
    second = await sums_task(server, tmp_path).eval_async(cache=cache)
    assert server.requests == 0
    assert outcome(second) == outcome(first)
    assert second.metrics == first.metrics == {"accuracy": 1.0}

    sent, cached = first.get_cost(), second.get_cost()
    assert sent.select("cached", "requests").rows() == [(False, 3)]
    assert sent["cost"][0] > 0
    assert cached.select("batch", "cached", "requests", "cost").rows() == [(False, True, 3, 0.0)]
    assert cached["output_tokens"].to_list() == sent["output_tokens"].to_list()

    assert {event["cache"] for *_, event in model_events(first.log_path)} == {"write"}
    read = model_events(second.log_path)
    assert len(read) == 3
    assert first.log_path is not None
    for sample, epoch, event in read:
        assert event["cache"] == "read"
        origin = event["metadata"]["cached_from"]
        assert origin["log"] == first.log_path.name
        assert (origin["sample"], origin["epoch"], origin["role"]) == (sample, epoch, "solver")


# -- the key ----------------------------------------------------------------------------------

TOOL = ToolDef("add", "Adds two numbers.", {"type": "object", "properties": {"a": {}, "b": {}}})
REQUEST = ChatRequest(
    turns=[Turn.user("What's 2+2?"), Turn("assistant", [ContentText("4")]), Turn.user("And 3+3?")],
    system_prompt="You add.",
    tools=[TOOL],
    output_schema={"type": "object", "properties": {"sum": {"type": "integer"}}},
    params={"max_tokens": 50, "seed": 1},
)
CALL: dict[str, Any] = {
    "provider": "OpenAI",
    "base_url": "https://api.openai.com/v1",
    "model": "gpt-4.1",
    "model_params": {"temperature": 0, "top_p": 1},
    "epoch": 1,
}


def key_of(request: ChatRequest = REQUEST, **change: Any) -> str:
    call = {**CALL, **change}
    return reply_key(
        call["provider"],
        call["base_url"],
        call["model"],
        request,
        model_params=call["model_params"],
        epoch=call["epoch"],
    )


def asking(**change: Any) -> ChatRequest:
    return msgspec.structs.replace(REQUEST, **change)


def with_turn(index: int, turn: Turn) -> ChatRequest:
    turns = list(REQUEST.turns)
    turns[index] = turn
    return asking(turns=turns)


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(lambda: key_of(provider="Azure"), id="provider"),
        pytest.param(lambda: key_of(base_url="https://eu.api.openai.com/v1"), id="base-url"),
        pytest.param(lambda: key_of(model="gpt-4.1-mini"), id="model"),
        pytest.param(lambda: key_of(model_params={"temperature": 1, "top_p": 1}), id="model-param"),
        pytest.param(lambda: key_of(model_params=None), id="no-model-params"),
        pytest.param(lambda: key_of(asking(system_prompt="You multiply.")), id="system-prompt"),
        pytest.param(lambda: key_of(asking(system_prompt=None)), id="no-system-prompt"),
        pytest.param(
            lambda: key_of(with_turn(0, Turn("assistant", [ContentText("What's 2+2?")]))),
            id="turn-role",
        ),
        pytest.param(
            lambda: key_of(with_turn(1, Turn("assistant", [ContentText("5")]))), id="text"
        ),
        pytest.param(
            lambda: key_of(
                with_turn(2, Turn.user("And 3+3?", ContentImage(url="https://x.test/a.png")))
            ),
            id="content",
        ),
        pytest.param(lambda: key_of(asking(turns=REQUEST.turns[2:])), id="fewer-turns"),
        pytest.param(lambda: key_of(asking(tools=[])), id="no-tools"),
        pytest.param(
            lambda: key_of(asking(tools=[msgspec.structs.replace(TOOL, description="Sums.")])),
            id="tool-description",
        ),
        pytest.param(
            lambda: key_of(asking(tools=[msgspec.structs.replace(TOOL, parameters={})])),
            id="tool-parameters",
        ),
        pytest.param(lambda: key_of(asking(output_schema=None)), id="output-schema"),
        pytest.param(lambda: key_of(asking(params={"max_tokens": 51, "seed": 1})), id="params"),
        pytest.param(lambda: key_of(epoch=2), id="epoch"),
    ],
)
def test_each_part_of_a_call_changes_its_key(key: Callable[[], str]):
    assert key() != key_of()


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(lambda: key_of(base_url="https://api.openai.com/v1/"), id="trailing-slash"),
        pytest.param(
            lambda: key_of(model_params={"top_p": 1, "temperature": 0}), id="model-param-order"
        ),
        pytest.param(
            lambda: key_of(asking(params={"seed": 1, "max_tokens": 50})), id="param-order"
        ),
        pytest.param(
            lambda: key_of(
                with_turn(
                    1,
                    Turn(
                        "assistant",
                        [ContentText("4")],
                        tokens=TokenUsage(12, 3),
                        finish_reason="stop",
                        model="gpt-4.1-2025-04-14",
                        cost=0.001,
                        started_at=1.0,
                        duration=0.5,
                        retries=2,
                    ),
                )
            ),
            id="a-turns-own-accounts",
        ),
    ],
)
def test_what_does_not_decide_a_reply_leaves_the_key_alone(key: Callable[[], str]):
    assert key() == key_of()


def test_each_repeat_of_a_call_has_a_key_of_its_own():
    key = key_of()
    keys = [repeated(key, nth) for nth in range(3)]
    assert keys[0] == key
    assert len(set(keys)) == 3
    assert repeated(key_of(epoch=2), 1) not in keys


async def test_new_model_params_or_more_epochs_send_the_calls_again(server, tmp_path, cache):
    await sums_task(server, tmp_path).eval_async(cache=cache)
    await sums_task(server, tmp_path).eval_async(cache=cache)
    assert server.requests == 3
    await sums_task(server, tmp_path, params={"temperature": 0.5}).eval_async(cache=cache)
    assert server.requests == 6
    await sums_task(server, tmp_path).eval_async(cache=cache, epochs=2)
    assert server.requests == 9  # the second epoch only


async def test_each_epoch_is_a_call_of_its_own(server, tmp_path, cache):
    first = await sums_task(server, tmp_path).eval_async(cache=cache, epochs=2, max_concurrency=1)
    assert prompts(server) == {f"What's {i}+{i}?": 2 for i in range(1, 4)}
    server.reset()
    second = await sums_task(server, tmp_path).eval_async(cache=cache, epochs=2)
    assert server.requests == 0
    assert outcome(second) == outcome(first)
    events = model_events(second.log_path)
    origins = sorted(
        (epoch, event["metadata"]["cached_from"]["epoch"]) for _, epoch, event in events
    )
    assert origins == [(1, 1)] * 3 + [(2, 2)] * 3


async def test_identical_calls_in_one_stage_keep_their_own_replies(server, tmp_path, cache):
    """A solver that asks the same question twice gets two replies, as it would live,
    and a second run replays both in order."""
    count = itertools.count(1)
    server.script(lambda _: f"reply {next(count)}")

    async def ask_twice(input: str) -> str:
        return " | ".join([await openai(server, MODEL).chat_async(input) for _ in range(2)])

    def task() -> ve.Task:
        return ve.Task(
            sums(range(1, 4)), solver=ask_twice, scorer=ve.detect_includes(), dir=tmp_path
        )

    first = await task().eval_async(cache=cache)
    assert server.requests == 6
    results = first.get_samples()["result"].to_list()
    assert all(len(set(result.split(" | "))) == 2 for result in results)
    assert sql(cache, "SELECT count(*) FROM replies") == [(6,)]
    server.reset()
    second = await task().eval_async(cache=cache)
    assert server.requests == 0
    assert outcome(second) == outcome(first)


async def test_two_runs_at_once_in_one_process_share_one_store(server, tmp_path, cache):
    async with anyio.create_task_group() as tg:
        for name, ids in (("a", range(1, 21)), ("b", range(11, 31))):
            task = sums_task(server, tmp_path / name, ids)
            tg.start_soon(partial(task.eval_async, cache=cache, max_concurrency=8))
    server.reset()
    union = await sums_task(server, tmp_path / "c", range(1, 31)).eval_async(cache=cache)
    assert server.requests == 0
    assert union.metrics == {"accuracy": 1.0}


async def test_two_runs_at_once_in_two_threads_share_one_store(server, tmp_path, cache):
    async with anyio.create_task_group() as tg:
        for name, ids in (("a", range(1, 21)), ("b", range(11, 31))):
            task = sums_task(server, tmp_path / name, ids)
            run = partial(task.eval, cache=cache, max_concurrency=8, progress=False)
            tg.start_soon(partial(anyio.to_thread.run_sync, run))
    server.reset()
    union = await sums_task(server, tmp_path / "c", range(1, 31)).eval_async(cache=cache)
    assert server.requests == 0
    assert union.metrics == {"accuracy": 1.0}


# -- expiry, damage, secrets, errors ----------------------------------------------------------


@pytest.mark.parametrize(
    ("expiry", "age", "sent"),
    [("1d", 2 * DAY, 3), ("1d", DAY / 2, 0), (3600, 7200, 3), (None, 365 * DAY, 0)],
)
async def test_a_reply_older_than_its_expiry_is_sent_again_and_replaced(
    server, tmp_path, expiry, age, sent
):
    cache = ve.Cache(dir=tmp_path / "cache", expiry=expiry)
    await sums_task(server, tmp_path).eval_async(cache=cache)
    sql(cache, "UPDATE replies SET created = created - ?", age)
    aged = dict(sql(cache, "SELECT key, created FROM replies"))
    server.reset()
    await sums_task(server, tmp_path).eval_async(cache=cache)
    assert server.requests == sent
    now = dict(sql(cache, "SELECT key, created FROM replies"))
    assert now.keys() == aged.keys()
    if sent:
        assert all(now[key] > aged[key] + age / 2 for key in now)  # replaced by the new reply
    else:
        assert now == aged
    server.reset()
    await sums_task(server, tmp_path).eval_async(cache=cache)
    assert server.requests == 0


@pytest.mark.parametrize(
    ("column", "damage"),
    [
        ("reply", b"\x00\xffnot json"),
        ("reply", '{"role": "robot", "contents": []}'),
        ("origin", b"{"),
        ("created", "yesterday"),
    ],
)
async def test_a_damaged_entry_is_sent_again_said_once_and_replaced(
    server, tmp_path, cache, warnings, column, damage
):
    first = await sums_task(server, tmp_path).eval_async(cache=cache)
    damaged = [key for (key,) in sql(cache, "SELECT key FROM replies ORDER BY key LIMIT 2")]
    for key in damaged:
        sql(cache, f"UPDATE replies SET {column} = ? WHERE key = ?", damage, key)
    server.reset()
    second = await sums_task(server, tmp_path).eval_async(cache=cache)
    assert server.requests == 2
    assert outcome(second) == outcome(first)
    assert len(warnings("failed on a reply")) == 1
    server.reset()
    await sums_task(server, tmp_path).eval_async(cache=cache)
    assert server.requests == 0


@pytest.mark.parametrize("broken", ["junk-file", "dir-is-a-file"])
async def test_a_store_that_cannot_be_opened_is_said_once_and_the_run_goes_on(
    server, tmp_path, warnings, broken
):
    junk = b"this is not a database\n" * 64
    if broken == "junk-file":
        cache = ve.Cache(dir=tmp_path / "cache")
        junk_file = cache.path / STORE_FILE
        cache.path.mkdir()
    else:
        cache = ve.Cache(dir=tmp_path / "cache-file")
        junk_file = cache.path
    junk_file.write_bytes(junk)
    for runs in (1, 2):
        task = await sums_task(server, tmp_path).eval_async(cache=cache)
        assert task.metrics == {"accuracy": 1.0}
        assert server.requests == 3 * runs
        assert all("cache" not in event for *_, event in model_events(task.log_path))
    assert len(warnings("cannot be used")) == 1
    assert junk_file.read_bytes() == junk


async def test_no_api_key_or_header_reaches_the_cache(server, tmp_path, cache):
    key, header = "sk-canary-3e9b17c4d2", "canary-header-8a51f0"
    task = sums_task(server, tmp_path, api_key=key, headers={"X-Secret": header})
    await task.eval_async(cache=cache)
    assert task.metrics == {"accuracy": 1.0}
    for entry in server.log:  # both went out
        sent = {name.lower(): value for name, value in entry.headers.items()}
        assert sent["x-secret"] == header
        assert key in sent["authorization"]
    assert sql(cache, "SELECT count(*) FROM replies") == [(3,)]
    files = [path for path in cache.path.iterdir() if path.is_file()]
    assert {STORE_FILE, f"{STORE_FILE}-wal"} <= {path.name for path in files}
    for path in files:
        data = path.read_bytes()
        assert key.encode() not in data, path.name
        assert header.encode() not in data, path.name


async def test_a_failed_call_is_not_cached_and_goes_out_again(server, tmp_path, cache):
    server.fail("400")
    failed = await sums_task(server, tmp_path, [1]).eval_async(cache=cache, fail_on_error=False)
    assert server.requests == 1
    (error,) = failed.get_samples()["error"].to_list()
    assert error is not None
    assert sql(cache, "SELECT count(*) FROM replies") == [(0,)]
    server.reset()
    again = await sums_task(server, tmp_path, [1]).eval_async(cache=cache)
    assert server.requests == 1
    assert again.metrics == {"accuracy": 1.0}


# -- resume --------------------------------------------------------------------------------------


class Solver:
    """Asks the model each input; on sample `hang_on`, once answered, waits for ever."""

    def __init__(self, server: Any, hang_on: int | None = None) -> None:
        self.server = server
        self.hang_on = hang_on
        self.asked: list[int] = []
        self.hanging = anyio.Event()

    async def __call__(self, input: str, sample: ve.Sample) -> str:
        self.asked.append(int(sample.id))
        answer = await openai(self.server, MODEL).chat_async(input)
        if sample.id == self.hang_on:
            self.hanging.set()
            await anyio.sleep_forever()
        return answer


async def test_a_resumed_run_with_the_cache_sends_each_call_once(server, tmp_path, cache):
    """A run cancelled while sample 4 is at work (its call answered and kept) is resumed:
    the finished samples are not run again, the others' calls go out once (sample 4's is
    read from the cache), and a later run of them all sends nothing."""

    def task(solver: Solver) -> ve.Task:
        return ve.Task(
            sums(range(1, 7)), solver=solver, scorer=ve.detect_includes(), dir=tmp_path, name="t"
        )

    first = Solver(server, hang_on=4)
    stopped = task(first)
    async with anyio.create_task_group() as tg:

        async def cancel_once_hanging() -> None:
            await first.hanging.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(cancel_once_hanging)
        await stopped.eval_async(cache=cache, max_concurrency=1)
    assert stopped.log_path is not None
    cancelled = ve.read_log(stopped.log_path)
    assert cancelled.status == "cancelled"
    finished = {int(sample.id) for sample in cancelled.samples}
    assert 4 not in finished

    again = Solver(server)
    resumed = await task(again).eval_async(resume=True, cache=cache)
    assert sorted(again.asked) == sorted(set(range(1, 7)) - finished)
    assert prompts(server) == {f"What's {i}+{i}?": 1 for i in range(1, 7)}
    assert resumed.metrics == {"accuracy": 1.0}
    (read,) = [event for sample, _, event in model_events(resumed.log_path) if sample == 4]
    assert read["cache"] == "read"

    server.reset()
    rerun = await task(Solver(server)).eval_async(cache=cache)
    assert server.requests == 0
    assert rerun.metrics == {"accuracy": 1.0}


# -- a model's own cache= -----------------------------------------------------------------------


async def test_a_model_made_with_cache_false_is_never_cached(server, tmp_path, cache):
    solver_chat = openai(server, "gpt-solver", cache=False)
    judge = openai(server, "gpt-judge")

    def task() -> ve.Task:
        scorer = ve.model_graded_qa(scorer_chat=judge)
        return ve.Task(sums(range(1, 4)), ve.generate(solver_chat), scorer, dir=tmp_path)

    await task().eval_async(cache=cache)
    assert server.requests_by_model == {"gpt-solver": 3, "gpt-judge": 3}
    server.reset()
    second = await task().eval_async(cache=cache)
    assert server.requests_by_model == {"gpt-solver": 3}
    assert second.metrics == {"accuracy": 1.0}
    assert sql(cache, "SELECT DISTINCT model FROM replies") == [("gpt-judge",)]


async def test_a_model_with_its_own_cache_uses_it_in_any_run(server, tmp_path, cache):
    """A model's own Cache caches in a run without one, and wins over the run's."""
    first = await sums_task(server, tmp_path, cache=cache).eval_async()
    server.reset()
    second = await sums_task(server, tmp_path, cache=cache).eval_async()
    assert server.requests == 0
    assert outcome(second) == outcome(first)
    assert {event["cache"] for *_, event in model_events(second.log_path)} == {"read"}

    elsewhere = ve.Cache(dir=tmp_path / "run-cache")
    await sums_task(server, tmp_path, cache=cache).eval_async(cache=elsewhere)
    assert server.requests == 0
    assert not (elsewhere.path / STORE_FILE).exists()


def test_a_chat_with_a_cache_outside_any_run_asks_once(server, tmp_path, cache):
    answers = [openai(server, MODEL, cache=cache).chat("What's 1+1?") for _ in range(2)]
    assert answers == ["1 + 1 = 2"] * 2
    assert server.requests == 1


# -- batch mode ----------------------------------------------------------------------------------


async def test_a_cached_run_in_batch_mode_submits_no_batch(server, tmp_path, cache):
    quick = ve.Batch(size=10, wait=0.05, poll=0.05)
    first = await sums_task(server, tmp_path, range(1, 6)).eval_async(batch=quick, cache=cache)
    assert server.batches
    assert all(entry.batch is not None for entry in server.log)
    server.reset()
    second = await sums_task(server, tmp_path, range(1, 6)).eval_async(batch=quick, cache=cache)
    assert server.requests == 0
    assert not server.batch_submissions
    assert not server.batches
    assert outcome(second) == outcome(first)
    cost = second.get_cost().select("batch", "cached", "requests", "cost").rows()
    assert cost == [(False, True, 5, 0.0)]


# -- options -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expiry", "seconds"),
    [("90s", 90), ("15m", 900), ("12h", 43_200), ("7d", 604_800), ("2w", 1_209_600), (30, 30)],
)
def test_expiry_reads_ages(expiry, seconds):
    assert ve.Cache(expiry=expiry).max_age == seconds
    assert ve.Cache(expiry=None).max_age is None


def openai_with(**options: Any) -> ve.Chat:
    return ve.chat_openai(api_key="k", **options)


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: ve.Cache(expiry="soon"), r"Cache\(expiry=\) must be a number of seconds"),
        (lambda: ve.Cache(expiry="7 days"), r"Cache\(expiry=\) must be"),
        (lambda: ve.Cache(expiry=0), r"Cache\(expiry=\) must be more than 0"),
        (lambda: ve.Cache(expiry=-5), r"Cache\(expiry=\) must be more than 0"),
        (lambda: ve.Cache(expiry=True), r"Cache\(expiry=\) must be"),
        (lambda: ve.Cache(dir=42), r"Cache\(dir=\) must be a path"),  # type: ignore[arg-type]
        (lambda: openai_with(cache="yes"), r"chat: `cache` must be True, False or"),
    ],
)
def test_bad_cache_options_are_config_errors(make, says):
    with pytest.raises(ve.ConfigError, match=says):
        make()


def test_eval_with_a_bad_cache_is_a_config_error_before_any_call(server, tmp_path):
    task = sums_task(server, tmp_path)
    with pytest.raises(ve.ConfigError, match=r"eval\(\): `cache` must be True, False or a"):
        task.eval(cache="yes")  # type: ignore[arg-type]
    assert server.requests == 0

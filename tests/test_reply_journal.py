"""Never paying twice (issue #33): each model reply is journaled as it arrives, keyed like
the reply cache, and a resumed run answers those calls from the journal, so it sends only
the requests that were unanswered when its predecessor was stopped.

A kill is what `killed()` leaves: the journal as it is at that instant (every line the
run wrote had reached the operating system) and no final log. The random kills of whole
processes under load are in `test_kills.py`."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import vitals_engine as ve
from tests.helpers import openai, sums, until
from tests.journals import started_journal
from vitals_engine.caching.keys import reply_key
from vitals_engine.chats.layers.call import Call
from vitals_engine.chats.layers.replies import Replies, ReplyJournal
from vitals_engine.log import schema as s
from vitals_engine.log.journal_format import (
    decode_reply,
    encode_header,
    encode_reply,
    encode_sample,
    encode_start,
    read_journal,
)
from vitals_engine.pacing.scope import CallScope
from vitals_engine.vocab.model_calls import ChatRequest, JournaledReply
from vitals_engine.vocab.turns import Turn

pytestmark = pytest.mark.anyio

QUESTION = ChatRequest([Turn.user("What's 2+2?")])
OTHER = ChatRequest([Turn.user("What's 3+3?")])


def answer(text: str) -> Turn:
    return Turn("assistant", Turn.user(text).contents)


class Sent:
    """A fake `send` answering "n" for its n-th call (from 1), noting each call."""

    def __init__(self) -> None:
        self.calls: list[Call] = []

    async def __call__(self, call: Call) -> Turn:
        self.calls.append(call)
        return answer(str(len(self.calls)))


def journal_lines(journal: Path, kind: bytes) -> list[bytes]:
    return [line for line in journal.read_bytes().splitlines() if line.startswith(kind)]


def replies_in(journal: Path) -> list[JournaledReply]:
    """Every reply record of `journal`, in order."""
    return [decode_reply(line) for line in journal_lines(journal, b'{"kind":"reply"')]


async def killed(
    task: ve.Task, condition: Callable[[Path], object], **options: Any
) -> tuple[Path, bytes]:
    """Run `task` until `condition(journal)` holds and stop it there as a kill -9 would:
    returns the journal and its bytes at that instant, with nothing else of the run left
    in its directory (it is cancelled, and the log it then writes is removed)."""
    directory = task.dir

    def reached() -> Path | None:
        journal = started_journal(directory)
        return journal if journal is not None and condition(journal) else None

    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(task.eval_async, progress=False, **options))
        journal = await until(reached, "the moment of the kill")
        at_the_kill = journal.read_bytes()  # the run writes in this thread: a whole instant
        tg.cancel_scope.cancel()
    for path in directory.iterdir():
        if path.suffix in (".json", ".eval"):
            path.unlink()
    journal.write_bytes(at_the_kill)
    return journal, at_the_kill


# -- the layer alone, over a fake send ---------------------------------------------------------


async def test_the_layer_journals_each_reply_keyed_like_the_reply_cache():
    """Each reply goes to the journal before it goes up: its sample, epoch, role, the cache's
    digest of the call and its place among the stage's identical calls (the same question
    twice is nth 0 then 1; another question is a digest of its own)."""
    journaled: list[JournaledReply] = []
    layer = ReplyJournal(Replies(journaled.append))
    scope = CallScope(role="solver", sample=(7, 2))
    provider = ve.chat_mock().provider
    send = Sent()
    for request in (QUESTION, QUESTION, OTHER):
        await layer(Call(provider, request, scope), send)
    digest = reply_key(
        provider.name,
        provider.base_url,
        provider.model,
        QUESTION,
        model_params=provider.reply_params,
        epoch=2,
    )
    assert [(r.sample, r.epoch, r.role, r.nth, r.turn.text) for r in journaled] == [
        (7, 2, "solver", 0, "1"),
        (7, 2, "solver", 1, "2"),
        (7, 2, "solver", 0, "3"),
    ]
    assert journaled[0].call == journaled[1].call == digest != journaled[2].call


async def test_the_layer_answers_a_journaled_call_without_sending_it():
    """Replies an earlier run journaled answer the same calls, each once, in order, with the
    batch that answered them; a changed prompt, another role or another epoch is sent."""
    provider = ve.chat_mock().provider
    first: list[JournaledReply] = []
    earlier = ReplyJournal(Replies(first.append))
    scope = CallScope(role="solver", sample=("a", 1))
    before = Sent()
    for request in (QUESTION, QUESTION):
        await earlier(Call(provider, request, scope), before)
    first[1].batch = "batch_9"

    again: list[JournaledReply] = []
    layer = ReplyJournal(Replies(again.append, first))
    send = Sent()
    scope = CallScope(role="solver", sample=("a", 1))
    calls = [Call(provider, request, scope) for request in (QUESTION, QUESTION, OTHER)]
    turns = [await layer(call, send) for call in calls]
    assert [turn.text for turn in turns] == ["1", "2", "1"]  # two from the journal, one sent
    assert send.calls == [calls[2]]
    assert [call.batch_id for call in calls] == [None, "batch_9", None]
    assert [reply.turn.text for reply in again] == ["1"]  # only what was sent is journaled
    for other in (
        CallScope(role="scorer", sample=("a", 1)),
        CallScope(role="solver", sample=("a", 2)),
    ):
        await layer(Call(provider, QUESTION, other), send)
    assert len(send.calls) == 3


async def test_a_call_outside_a_sample_stage_is_neither_journaled_nor_answered():
    """No sample (a whole-dataset stage, a scope of one's own, no scope): sent, not journaled."""
    journaled: list[JournaledReply] = []
    layer = ReplyJournal(Replies(journaled.append))
    send = Sent()
    provider = ve.chat_mock().provider
    for scope in (None, CallScope(role="solver")):
        await layer(Call(provider, QUESTION, scope), send)
    assert len(send.calls) == 2
    assert journaled == []


# -- the journal's reply records ----------------------------------------------------------------


async def test_a_journal_keeps_the_replies_of_samples_that_did_not_finish(tmp_path):
    """Reply records before their sample's record are spent (it finished); those of a sample
    with no record, or after its record (a failed sample run again), count; a record of an
    unknown kind is skipped, as every reader skips the kinds it does not know."""
    task = ve.Task(sums(3), ve.generate(ve.chat_mock()), ve.detect_includes(), dir=tmp_path)
    await task.eval_async(progress=False)
    logged = ve.read_log(task.log_path)
    one, two, three = logged.samples

    def reply(sample: s.EvalSample, text: str) -> bytes:
        record = JournaledReply(
            sample=sample.id, epoch=1, role="solver", call="c", turn=answer(text)
        )
        return encode_reply(record)

    journal = tmp_path / "run.journal"
    journal.write_bytes(
        encode_start(logged.header, "run.json")
        + reply(one, "spent")
        + encode_sample(one)
        + reply(two, "kept")
        + b'{"kind":"later-kind","x":1}\n'
        + encode_sample(three)
        + reply(three, "again")
        + encode_header(logged.header)
    )
    contents = read_journal(journal)
    assert [(r.sample, r.turn.text) for r in contents.replies] == [(2, "kept"), (3, "again")]
    assert contents.damage is None
    assert contents.skipped == ()
    assert sorted(sample.id for sample in contents.samples) == [1, 3]
    assert sorted(sample.id for sample in ve.read_log(journal).samples) == [1, 3]


async def test_each_reply_is_journaled_before_its_sample_and_left_out_of_the_log(tmp_path):
    """A run journals one reply per call, each before the record of its sample; the final
    log holds none of them (the golden log test holds it byte for byte)."""
    task = ve.Task(sums(4), ve.generate(ve.chat_mock()), ve.detect_includes(), dir=tmp_path)
    at_the_end = b""
    async with task.stream_async() as samples:
        async for _ in samples:  # each comes once its journal line is written
            at_the_end = next(tmp_path.glob("*.journal")).read_bytes()
    kinds = [line.split(b",")[0] for line in at_the_end.splitlines()[1:]]
    order = [kind.removeprefix(b'{"kind":').strip(b'"') for kind in kinds]
    assert order.count(b"reply") == order.count(b"sample") == 4
    lines = at_the_end.splitlines()
    for n in range(1, 5):
        reply, done = f'"reply":{{"sample":{n},'.encode(), f'"sample":{{"id":{n},'.encode()
        at = [i for i, line in enumerate(lines) if reply in line or done in line]
        assert [lines[i].startswith(b'{"kind":"reply"') for i in at] == [True, False]
    assert b'"kind"' not in task.log_path.read_bytes()


# -- resuming after a kill ------------------------------------------------------------------------


def judged(server: Any, directory: Path, n: int = 10, **chat: Any) -> ve.Task:
    """`n` sums solved by "solver-model" and graded by "judge-model" on the mock server."""
    return ve.Task(
        sums(n, ids=True, start=1),
        solver=ve.generate(openai(server, "solver-model", **chat)),
        scorer=ve.model_graded_qa(scorer_chat=openai(server, "judge-model", **chat)),
        dir=directory,
        name="judged",
    )


def replies_of(role: str, n: int, server: Any, requests: int) -> Callable[[Path], bool]:
    """Once `n` replies of `role` are journaled and the server has had `requests`."""
    return lambda journal: (
        server.requests >= requests and sum(r.role == role for r in replies_in(journal)) >= n
    )


@pytest.mark.parametrize("cache", [False, True], ids=["no-cache", "cache"])
async def test_a_judge_in_flight_does_not_buy_the_solvers_reply_again(server, tmp_path, cache):
    """Killed while every judge call hangs: each solver reply had arrived and is journaled.
    The resumed run sends the ten judge calls and nothing else (with the reply cache or
    without), counts the solver's tokens from the journal, and logs every sample."""
    options: dict[str, Any] = {"max_concurrency": 10}
    if cache:
        options["cache"] = ve.Cache(dir=tmp_path / "cache")
    server.fail("hang", model="judge-model", times=None)
    await killed(judged(server, tmp_path / "logs"), replies_of("solver", 10, server, 11), **options)
    assert server.requests_by_model["solver-model"] == 10  # a judge call or more in flight
    server.reset()

    again = judged(server, tmp_path / "logs")
    await again.eval_async(resume=True, progress=False, **options)
    assert server.requests_by_model == {"judge-model": 10}
    assert again.metrics == {"accuracy": 1.0}
    cost = again.get_cost()
    assert cost.filter(cost["role"] == "solver")["requests"].to_list() == [10]
    final = ve.read_log(again.log_path)
    assert final.status == "success"
    assert sorted(sample.id for sample in final.samples) == list(range(1, 11))


async def test_a_cancelled_run_keeps_its_replies_in_its_log_for_resume(server, tmp_path):
    """A run cancelled (or stopped by Ctrl-C) while its judge calls hang writes its log and
    removes its journal; the log keeps the replies its unfinished samples had (under
    `replies` in the eval's metadata), and resuming it sends only the judge calls."""
    server.fail("hang", model="judge-model", times=None)
    task = judged(server, tmp_path, n=6)
    reached = replies_of("solver", 6, server, 7)
    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(task.eval_async, progress=False, max_concurrency=6))
        await until(lambda: (j := started_journal(tmp_path)) is not None and reached(j))
        tg.cancel_scope.cancel()
    stopped = ve.read_log(task.log_path)
    assert stopped.status == "cancelled"
    assert not list(tmp_path.glob("*.journal"))
    assert len((stopped.header.eval.metadata or {})["replies"]) == 6
    server.reset()
    again = judged(server, tmp_path, n=6)
    await again.eval_async(resume=True, progress=False)
    assert server.requests_by_model == {"judge-model": 6}
    final = ve.read_log(again.log_path)
    assert final.status == "success"
    assert "replies" not in (final.header.eval.metadata or {})


class Agent:
    """A solver of `turns` model calls in one conversation on the mock server; before its
    last call the server is told to hang it (a call in flight at the kill)."""

    def __init__(self, server: Any, turns: int, hang_last: bool) -> None:
        self.server, self.turns, self.hang_last = server, turns, hang_last

    async def __call__(self, input: str) -> ve.Solution:
        chat = openai(self.server, "agent-model")
        reply = ""
        for turn in range(1, self.turns + 1):
            if turn == self.turns and self.hang_last:
                self.server.fail("hang", times=1)
            reply = await chat.chat_async(f"{input} Step {turn}.")
        return ve.Solution(reply, chat=chat)


async def test_an_agent_killed_at_its_last_turn_buys_only_that_turn_again(server, tmp_path):
    """A 40-turn agent killed with its 40th call in flight: the resumed run sends that one
    call; the 39 journaled replies answer the others. The sample's log has all 40 calls,
    and their tokens."""
    data = [{"id": "agent", "input": "What's 2+2?", "target": "4"}]

    def task(hang_last: bool) -> ve.Task:
        solver = Agent(server, 40, hang_last)
        return ve.Task(data, solver, ve.detect_includes(), dir=tmp_path, name="agent")

    await killed(
        task(hang_last=True),
        lambda journal: server.requests >= 40 and len(replies_in(journal)) >= 39,
    )
    assert server.requests == 40
    server.reset()

    again = task(hang_last=False)
    await again.eval_async(resume=True, progress=False)
    assert server.requests == 1
    [sample] = ve.read_log(again.log_path).samples
    assert sample.error is None
    assert sum(isinstance(m, s.ChatMessageAssistant) for m in sample.messages) == 40
    assert again.get_cost()["requests"].to_list() == [40]


async def test_a_second_kill_keeps_the_replies_of_the_first(server, tmp_path):
    """Killed, resumed, killed again: the replies journaled before either kill answer their
    calls; across both resumes no journaled call is sent again."""
    server.fail("hang", model="judge-model", times=None)
    first = replies_of("solver", 6, server, 7)
    await killed(judged(server, tmp_path, n=6), first, max_concurrency=6)
    server.reset()
    server.fail("hang", model="judge-model", times=None)
    await killed(
        judged(server, tmp_path, n=6),
        lambda journal: server.requests >= 1,
        resume=True,
        max_concurrency=6,
    )
    assert set(server.requests_by_model) == {"judge-model"}
    server.reset()
    again = judged(server, tmp_path, n=6)
    await again.eval_async(resume=True, progress=False)
    assert server.requests_by_model == {"judge-model": 6}
    assert again.metrics == {"accuracy": 1.0}


async def test_a_prompt_changed_since_is_sent_again(server, tmp_path):
    """The journal answers a call only when its request is the same: a solver whose prompt
    changed (a system prompt added) sends its calls again."""
    server.fail("hang", model="judge-model", times=None)
    first = replies_of("solver", 4, server, 5)
    await killed(judged(server, tmp_path, n=4), first, max_concurrency=4)
    server.reset()
    again = judged(server, tmp_path, n=4, system_prompt="Answer briefly.")
    await again.eval_async(resume=True, resume_anyway=True, progress=False)
    assert server.requests_by_model == {"solver-model": 4, "judge-model": 4}


async def test_a_failed_sample_runs_again_afresh(server, tmp_path):
    """A sample logged with an error is run again without its old replies (they are spent
    by its record): a resume is its new try."""
    calls = {"n": 0}

    async def flaky(input: str) -> str:
        chat = openai(server, "solver-model")
        reply = await chat.chat_async(input)
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("the solver broke after its call")
        return reply

    task = ve.Task(sums(1), flaky, ve.detect_includes(), dir=tmp_path, name="t")
    with pytest.raises(ve.EvalFailedError):
        await task.eval_async(progress=False)
    again = ve.Task(sums(1), flaky, ve.detect_includes(), dir=tmp_path, name="t")
    await again.eval_async(resume=True, progress=False)
    assert server.requests == 2


# -- batch mode ---------------------------------------------------------------------------------


async def test_batch_mode_sends_nothing_twice_and_answers_from_the_journal(server, tmp_path):
    """Two calls per sample, in batches: killed once the first calls' batch had answered
    (journaled as they came) and the second calls' batch is out. The resumed run submits no
    batch: the first calls come from the journal, the second from the batch it left."""
    n = 6

    async def twice(input: str) -> ve.Solution:
        chat = openai(server, "batch-model")
        await chat.chat_async(input)
        server.batch_delay = 3600  # the next batch stays out until the test ends it
        return ve.Solution(await chat.chat_async("Now say it again."), chat=chat)

    def task() -> ve.Task:
        return ve.Task(sums(n), twice, ve.detect_includes(), dir=tmp_path, name="batched")

    batch = ve.Batch(size=n, wait=0.05, poll=0.02, cancel_batches=False)

    def second_batch_out(journal: Path) -> bool:
        submitted = journal.read_bytes().count(b'"submitted":')
        return len(replies_in(journal)) >= n and submitted >= 2

    await killed(task(), second_batch_out, batch=batch, max_concurrency=n)
    assert len(server.batches) == 2
    server.end_batches()
    again = task()
    await again.eval_async(resume=True, batch=batch, progress=False)
    assert len(server.batches) == 2  # no batch sent by the resumed run
    assert set(server.batch_submissions.values()) == {1}
    assert sum(server.batch_submissions.values()) == 2 * n
    final = ve.read_log(again.log_path)
    assert final.status == "success"
    assert len(final.samples) == n


# -- Ray workers ----------------------------------------------------------------------------


@pytest.mark.usefixtures("local_ray")
async def test_ray_workers_replies_reach_the_drivers_journal_as_they_arrive(server, tmp_path):
    """On Ray, each solver reply a worker receives is in the driver's journal while its
    sample's judge call is still in flight; killed then, the resumed run (here, in this
    process) sends the judge calls and nothing else."""
    pytest.importorskip("ray")
    server.fail("hang", model="judge-model", times=None)
    await killed(
        judged(server, tmp_path, n=8),
        replies_of("solver", 8, server, 9),
        backend=ve.Ray(workers=2, max_concurrency=8),
    )
    assert server.requests_by_model["solver-model"] == 8
    server.reset()
    again = judged(server, tmp_path, n=8)
    await again.eval_async(resume=True, progress=False)
    assert server.requests_by_model == {"judge-model": 8}
    assert again.metrics == {"accuracy": 1.0}


@pytest.mark.usefixtures("local_ray")
def test_a_dead_workers_replies_go_to_the_worker_that_runs_its_sample_next(server, tmp_path):
    """A sample's worker dies after the sample's first reply reached the driver's journal:
    the worker that runs it next answers that call from it; only its second call is sent."""
    pytest.importorskip("ray")
    marker = tmp_path / "died"
    url = server.base_url()

    async def call_twice_then_die_once(input: str, sample: ve.Sample) -> str:
        chat = ve.chat_openai("gpt-test", base_url=url, api_key="k")
        await chat.chat_async(input)
        if sample.id == 4 and not marker.exists():
            mine = b'{"kind":"reply","reply":{"sample":4,'

            def journaled() -> bool:  # by the driver, in another process: polled
                return any(mine in p.read_bytes() for p in tmp_path.glob("*.journal"))

            with anyio.fail_after(60):
                while not journaled():  # noqa: ASYNC110
                    await anyio.sleep(0.02)
            marker.touch()
            os._exit(1)
        return await chat.chat_async(f"Once more: {input}")

    task = ve.Task(sums(8), call_twice_then_die_once, ve.detect_includes(), dir=tmp_path)
    task.eval(backend=ve.Ray(workers=2, max_concurrency=2), progress=False)
    assert marker.exists()
    assert ve.read_log(task.log_path).status == "success"
    assert server.requests == 16  # two calls a sample; the dead one's first not sent again

"""Kills that mean it (issue #33): a 400-sample run (a solver call and a judge call each)
at concurrency 20 against the mock server with latency, killed with SIGKILL ten times at
random moments under load, each time resumed, then let finish.

The server tags each reply with its request's number ("[#n] ..."). A reply had arrived
when the kill came if a later request quotes it (the judge's prompt holds the solver's
reply) or the journal left holds it whole (in its sample's record, or in a reply record of
its own); the server's request log says which requests it had answered. What is held,
kill after kill:

- no request whose reply had arrived is ever sent again (the same body);
- in all, requests sent <= N + those whose reply had not arrived at the kill: unanswered
  by the server, or answered and still on the way (the kill came between the server's
  write and the run's read; no journal can keep those, they are printed apart);
- the final log holds every sample once, status success.
"""

from __future__ import annotations

import collections
import functools
import itertools
import random
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pytest

import vitals_engine as ve
from tests.children import finish, kill, start
from tests.helpers import sums, wait_until
from vitals_engine.testing import MockServer
from vitals_engine.testing.brain import MockReply, MockRequest
from vitals_engine.testing.brain import answer as brain_answer

SAMPLES = 400
CONCURRENCY = 20
CALLS = 2 * SAMPLES  # N: a solver call and a judge call per sample
KILLS = 10
#: Seconds a run goes on, after its first request, before it is killed: drawn at random.
RUNS_FOR = (0.0, 0.15)

_TAGS = re.compile(rb"\[#(\d+)\]")


class Tags:
    """The server's script: the brain's reply, after the number of its request ("[#n] ")."""

    def __init__(self) -> None:
        self.of_request: dict[int, int] = {}  # id(MockRequest) -> n (the log keeps them alive)
        self.numbers = itertools.count(1)

    def __call__(self, request: MockRequest) -> MockReply:
        n = next(self.numbers)
        self.of_request[id(request)] = n
        reply = brain_answer(request)
        reply.text = f"[#{n}] {reply.text}"
        return reply


@pytest.fixture(scope="module")
def tagged() -> Iterator[tuple[MockServer, Tags]]:
    tags = Tags()
    with MockServer(latency=(0.01, 0.03), seed=33) as server:
        server.script(tags)
        yield server, tags


def killed_task(base_url: str, directory: Path, cache: bool) -> tuple[ve.Task, dict[str, Any]]:
    def chat(model: str) -> ve.Chat:
        return ve.chat_openai(model, base_url=base_url, api_key="k")

    task = ve.Task(
        sums(SAMPLES, ids=True),
        solver=ve.generate(chat("solver-model")),
        scorer=ve.model_graded_qa(scorer_chat=chat("judge-model")),
        dir=directory,
        name="killed",
    )
    options: dict[str, Any] = {"max_concurrency": CONCURRENCY, "progress": False}
    if cache:
        options["cache"] = ve.Cache(dir=directory / "cache")
    return task, options


def run(base_url: str, directory: str, cache: bool, resume: bool) -> None:
    """In a child: the run, or its resume."""
    task, options = killed_task(base_url, Path(directory), cache)
    task.eval(resume=resume or None, **options)


def arrived(directory: Path, bodies: list[bytes]) -> set[int]:
    """The request numbers of the replies known to have arrived before a kill, whatever the
    engine makes of them: those a later request quoted (the conversation went on: a judge's
    prompt holds the solver's reply), and those the journal holds whole, in the record of a
    sample that finished or in a record of their own (`{"kind": "reply", ...}`)."""
    found = {int(n) for sent in bodies for n in _TAGS.findall(sent)}
    for journal in directory.glob("*.journal"):
        for line in journal.read_bytes().split(b"\n")[:-1]:  # the last one may be cut
            if line.startswith((b'{"kind":"sample"', b'{"kind":"reply"')):
                found.update(int(n) for n in _TAGS.findall(line))
    return found


def body(entry: Any) -> bytes:
    return msgspec.json.encode(entry.body, order="sorted")


def under_way(server: MockServer, first: int, child: Any) -> bool:
    """Whether the run `child` sent a request (the server's log grew past `first`), or ended."""
    return len(server.log) > first or child.exitcode is not None


@dataclass
class Kill:
    sent: int  # requests of the attempt
    unanswered: int  # not answered by the server at the kill
    on_the_way: int  # answered by the server, not journaled (the kill came first)
    sent_again: list[int] = field(default_factory=list)  # journaled before, sent again


@pytest.mark.parametrize("cache", [False, True], ids=["live", "cache"])
def test_ten_random_kills_under_load_buy_no_reply_twice(tagged, tmp_path, cache):
    """Up to ten SIGKILLs at random moments of a 400-sample run (fewer if it finishes
    first), each resumed: no reply that had arrived is bought again, and requests sent
    <= N + the replies that had not arrived."""
    server, tags = tagged
    server.reset()
    server.script(tags)
    server.latency = (0.01, 0.03)
    draw = random.Random()
    kills: list[Kill] = []
    paid: set[bytes] = set()  # bodies of the requests whose replies had arrived
    started = time.monotonic()
    for attempt in range(KILLS):
        first = len(server.log)
        child = start(run, server.base_url(), str(tmp_path), cache, attempt > 0)
        wait_until(functools.partial(under_way, server, first, child), "its first request")
        time.sleep(draw.uniform(*RUNS_FOR))
        at_the_kill = time.time()
        code = kill(child)
        if code == 0:  # it finished its samples before its kill (the draws ran long): done
            break
        assert code == -9, f"attempt {attempt + 1} ended by itself ({code}) before its kill"
        # A request the dead run had sent is logged once the server has read its body,
        # which may be after the kill: until then it would be counted as the next run's.
        wait_until(lambda: server.in_flight == 0, "the dead run's requests to end at the server")
        with server._lock:  # the server's thread appends to it (and answers the dead run)
            entries = server.log[first:]
            answered = [0 < entry.answered <= at_the_kill for entry in entries]
        came = arrived(tmp_path, [body(entry) for entry in server.log])
        numbers = [tags.of_request.get(id(entry.request)) for entry in entries]
        kills.append(
            Kill(
                sent=len(entries),
                unanswered=answered.count(False),
                on_the_way=sum(
                    done and n not in came for done, n in zip(answered, numbers, strict=True)
                ),
                sent_again=[
                    n or 0 for entry, n in zip(entries, numbers, strict=True) if body(entry) in paid
                ],
            )
        )
        paid.update(
            body(entry) for entry in server.log if tags.of_request.get(id(entry.request)) in came
        )
    else:  # every attempt was killed: a last resume finishes the run
        first = len(server.log)
        assert finish(start(run, server.base_url(), str(tmp_path), cache, True)) == 0
    last = server.log[first:]
    again = [tags.of_request.get(id(entry.request)) for entry in last if body(entry) in paid]
    elapsed = time.monotonic() - started

    total = len(server.log)
    lost = sum(k.unanswered + k.on_the_way for k in kills)
    bodies = collections.Counter(body(entry) for entry in server.log)
    twice = [
        (tags.of_request.get(id(entry.request)), entry.outcome, entry.answered > 0)
        for entry in server.log
        if bodies[body(entry)] > 1
    ]
    print(
        f"\n{len(kills)} kills ({'cache' if cache else 'live'}): {total} requests for N={CALLS}; "
        f"unanswered at the kills {sum(k.unanswered for k in kills)}, answered but not yet "
        f"arrived {sum(k.on_the_way for k in kills)}; bound N + {lost} = {CALLS + lost}; "
        f"per kill (sent, unanswered, on the way): "
        f"{[(k.sent, k.unanswered, k.on_the_way) for k in kills]}; {elapsed:.1f} s"
    )
    assert [k.sent_again for k in kills] == [[]] * len(kills)
    assert again == []
    assert total <= CALLS + lost, f"sent more than once (request, outcome, answered): {twice}"
    [log] = [p for p in tmp_path.glob("*.json") if p.name != "listing.json"]
    logged = ve.read_log(log)
    assert logged.status == "success"
    assert sorted(sample.id for sample in logged.samples) == list(range(SAMPLES))
    assert all(sample.error is None for sample in logged.samples)

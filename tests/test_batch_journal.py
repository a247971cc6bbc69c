"""The batch queues' journal and reattachment, with the provider's batch API played by an
in-process stand-in on a virtual clock: each batch is recorded before it goes, a resumed
run takes the outcomes of the requests an earlier run sent instead of sending them again,
and sends again only what it cannot find. Against the mock server, killed with SIGKILL:
tests/test_batch_resume.py."""

import contextlib
import io
import sys

import anyio
import anyio.lowlevel
import pytest

import vitals_engine as ve
from tests.test_batch_queues import StandIn, provider, request
from vitals_engine.batching.queues import BatchQueues, ask_in_terminal
from vitals_engine.providers.batch_api import BatchState, BatchUnsupported
from vitals_engine.testing.clock import VirtualClock
from vitals_engine.vocab.batch_records import BatchRecord

pytestmark = pytest.mark.anyio

OPTIONS = ve.Batch(size=2, wait=1, poll=1)


def merged(records):
    """The journal's records of each batch, merged in order, as a resumed run reads them."""
    batches = {}
    for record in records:
        known = batches.get(record.key)
        batches[record.key] = record if known is None else known.merged(record)
    return list(batches.values())


async def run(api, prompts, *, journal=None, earlier=(), callers=None):
    """Each prompt's call through one run's queues, made by sample i (epoch 1, solver):
    the reply texts (or errors), in order."""
    clock = api.clock
    model = api.provider
    got = {}

    async def one(index, prompt):
        caller = callers[index] if callers else (index, 1, "solver")
        try:
            turn, _ = await queues.call(model, request(prompt), caller)
            got[index] = turn.text
        except ve.VitalsError as exc:
            got[index] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(clock.drive)
        async with (
            BatchQueues(
                OPTIONS, clock, apis=lambda _: api, journal=journal, earlier=earlier
            ) as queues,
            anyio.create_task_group() as calls,
        ):
            for index, prompt in enumerate(prompts):
                calls.start_soon(one, index, prompt)
        tg.cancel_scope.cancel()
    return [got[i] for i in range(len(prompts))]


class Faithful(StandIn):
    """A stand-in whose batches keep their outcomes once ended, as a provider's do."""

    def __init__(self, *args):
        super().__init__(*args)
        self.ended = {}

    async def outcomes(self, state):
        if state.results not in self.ended:
            self.ended[state.results] = await super().outcomes(state)
        return self.ended[state.results]


def stand_in():
    return Faithful(provider(), VirtualClock())


async def test_each_batch_is_journaled_with_its_requests_before_it_goes_and_its_id_after():
    api = stand_in()
    seen = []

    def journal(record):
        seen.append((record, len(api.batches)))

    await run(api, ["q0", "q1", "q2"], journal=journal)
    batches = merged(record for record, _ in seen)
    assert [b.id for b in batches] == ["b0", "b1"]
    first = {}
    for record, submitted in seen:
        first.setdefault(record.key, submitted)
    assert list(first.values()) == [0, 1]  # recorded before the provider had it
    entries = sorted((e.sample, e.epoch, e.role) for b in batches for e in b.entries)
    assert entries == [(0, 1, "solver"), (1, 1, "solver"), (2, 1, "solver")]
    assert all(b.status == "ended" and b.ended is not None for b in batches)
    ids = {b.id: [e.custom_id for e in b.entries] for b in batches}
    assert ids == {k: [custom_id for custom_id, _ in v] for k, v in api.batches.items()}


async def test_a_resumed_run_takes_the_outcomes_of_the_requests_an_earlier_run_sent():
    api = stand_in()
    records = []
    first = await run(api, ["q0", "q1", "q2"], journal=records.append)
    again = await run(api, ["q0", "q1", "q2"], earlier=merged(records))
    assert again == first == ["re: q0", "re: q1", "re: q2"]
    assert len(api.submitted) == 2  # the resumed run sent nothing


async def test_a_call_whose_request_changed_goes_out_again_and_only_it():
    api = stand_in()
    records = []
    await run(api, ["q0", "q1"], journal=records.append)
    again = await run(api, ["q0", "q1, reworded"], earlier=merged(records))
    assert again == ["re: q0", "re: q1, reworded"]
    assert [sorted(prompts) for _, prompts in api.submitted] == [["q0", "q1"], ["q1, reworded"]]


async def test_a_request_is_found_by_its_sample_epoch_and_role_not_by_its_body_alone():
    api = stand_in()
    records = []
    await run(api, ["same"], journal=records.append)
    await run(api, ["same"], earlier=merged(records), callers=[(0, 2, "solver")])
    await run(api, ["same"], earlier=merged(records), callers=[(0, 1, "scorer")])
    assert len(api.submitted) == 3  # another epoch, another role: other calls


async def test_a_batch_recorded_but_never_known_submitted_is_sent_again(caplog):
    api = stand_in()
    records = []
    await run(api, ["q0"], journal=records.append)
    unknown = [  # the run died between the batch's two records
        BatchRecord(
            key=r.key,
            provider=r.provider,
            base_url=r.base_url,
            model=r.model,
            requests=r.requests,
            entries=r.entries,
        )
        for r in merged(records)
    ]
    assert await run(api, ["q0"], earlier=unknown) == ["re: q0"]
    assert len(api.submitted) == 2


async def test_a_batch_the_provider_no_longer_knows_sends_its_requests_again():
    api = stand_in()
    records = []
    await run(api, ["q0", "q1"], journal=records.append)
    forgotten = api.state

    async def gone(batch_id):
        if batch_id == "b0":
            raise BatchUnsupported("no such batch", status=404)
        return await forgotten(batch_id)

    api.state = gone
    assert await run(api, ["q0", "q1"], earlier=merged(records)) == ["re: q0", "re: q1"]
    assert len(api.submitted) == 2


async def test_each_earlier_request_is_taken_once():
    """A sample that makes the same call twice took two requests of the earlier run: a
    resumed run takes each once, in order, and sends a third anew."""
    api = stand_in()
    records = []
    await run(api, ["same", "same"], journal=records.append, callers=[(0, 1, "solver")] * 2)
    assert len(api.submitted) == 1
    await run(api, ["same"] * 3, earlier=merged(records), callers=[(0, 1, "solver")] * 3)
    assert [len(prompts) for _, prompts in api.submitted] == [2, 1]


async def test_a_journal_that_cannot_take_a_batch_keeps_it_from_going_out():
    api = stand_in()

    def broken(record):
        raise ve.LogWriteError("the disk is full", path="x")

    got = await run(api, ["q0"], journal=broken)
    assert isinstance(got[0], ve.LogWriteError)
    assert api.submitted == []


class Endless(Faithful):
    """A stand-in whose batches never end; it notes the batches asked to cancel."""

    def __init__(self, *args):
        super().__init__(*args)
        self.cancelled = []
        self.out = anyio.Event()

    async def submit(self, entries, key=""):
        batch_id = await super().submit(entries, key)
        self.out.set()
        return batch_id

    async def state(self, batch_id):
        return BatchState(batch_id, "in_progress", False)

    async def cancel(self, batch_id):
        self.cancelled.append(batch_id)


async def stop_with_batches_out(ask, *, error=None, options=OPTIONS):
    """A run with one batch out, stopped (cancelled, or by `error`): the batches the
    provider was asked to cancel, and the questions `ask` was asked."""
    clock = VirtualClock()
    api = Endless(provider(), clock)
    asked = []

    def asking(batches, requests):
        asked.append((batches, requests))
        return ask

    async def waiting_call():
        await queues.call(api.provider, request("q0"), (0, 1, "solver"))

    with pytest.raises(ExceptionGroup) if error else contextlib.nullcontext() as caught:
        async with anyio.create_task_group() as tg:
            tg.start_soon(clock.drive)
            async with BatchQueues(options, clock, apis=lambda _: api, ask=asking) as queues:
                queues_tg = anyio.create_task_group()
                async with queues_tg:
                    queues_tg.start_soon(waiting_call)
                    await api.out.wait()
                    if error:
                        raise error
                    tg.cancel_scope.cancel()
    if error:
        assert caught.group_contains(type(error), depth=None)
    return api.cancelled, asked


async def test_a_run_the_user_stopped_asks_whether_to_cancel_its_batches():
    cancelled, asked = await stop_with_batches_out(ask=False)
    assert asked == [(1, 1)]
    assert cancelled == []
    cancelled, asked = await stop_with_batches_out(ask=True)
    assert asked == [(1, 1)]
    assert cancelled == ["b0"]


async def test_a_run_an_error_stopped_cancels_its_batches_without_asking():
    cancelled, asked = await stop_with_batches_out(ask=False, error=RuntimeError("boom"))
    assert asked == []
    assert cancelled == ["b0"]


async def test_cancel_batches_says_what_to_do_without_asking():
    keep = ve.Batch(size=2, wait=1, poll=1, cancel_batches=False)
    assert await stop_with_batches_out(ask=True, options=keep) == ([], [])


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize(("answer", "cancel"), [("n\n", False), ("no\n", False), ("\n", True)])
def test_the_terminal_question_cancels_unless_told_no(monkeypatch, answer, cancel):
    monkeypatch.setattr(sys, "stdin", Terminal(answer))
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert ask_in_terminal(2, 20) is cancel
    assert "2 batches out (20 requests)" in sys.stderr.getvalue()


def test_without_a_terminal_nothing_is_asked_and_the_batches_are_cancelled(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    assert ask_in_terminal(1, 5) is True


async def test_a_request_the_earlier_batch_failed_is_sent_again():
    """Resuming runs a failed sample again: its call's earlier request failed (an invalid
    request), so it goes out anew rather than taking that failure back."""
    api = stand_in()
    api.script = {"bad": [400]}
    records = []
    first = await run(api, ["ok", "bad"], journal=records.append)
    assert isinstance(first[1], ve.ProviderError)
    assert await run(api, ["ok", "bad"], earlier=merged(records)) == ["re: ok", "re: bad"]
    assert [sorted(prompts) for _, prompts in api.submitted] == [["bad", "ok"], ["bad"]]


async def test_a_request_the_earlier_run_retried_takes_the_retrys_reply():
    """The earlier run's request was rate limited in one batch and answered in the next:
    the resumed run takes that answer, and sends nothing."""
    api = stand_in()
    api.script = {"busy": [429]}
    records = []
    model = api.provider
    clock = api.clock

    async def retried():  # as the run's retry policy does: the same call, again
        for _ in range(2):
            try:
                return (await queues.call(model, request("busy"), (0, 1, "solver")))[0].text
            except ve.RateLimitError:
                continue
        return None

    async with anyio.create_task_group() as tg:
        tg.start_soon(clock.drive)
        async with BatchQueues(
            OPTIONS, clock, apis=lambda _: api, journal=records.append
        ) as queues:
            assert await retried() == "re: busy"
        tg.cancel_scope.cancel()
    assert len(api.submitted) == 2
    assert await run(api, ["busy"], earlier=merged(records)) == ["re: busy"]
    assert len(api.submitted) == 2


@pytest.mark.parametrize("fmt", ["openai", "google"])
async def test_batches_are_found_by_their_label_across_pages(monkeypatch, fmt):
    """`find` reads the provider's list of batches page by page, newest first, for the
    one labelled with the run's name for it; one not there is None."""
    from vitals_engine.batching.apis import batch_api
    from vitals_engine.providers.batch_api import BatchEntry
    from vitals_engine.testing import MockServer

    make = {"openai": ve.chat_openai, "google": ve.chat_google_gemini}[fmt]
    with MockServer() as server:
        model = make("test-model", base_url=server.base_url(fmt), api_key="k")
        api = batch_api(model.provider)
        monkeypatch.setattr(type(api), "page_size", 1)
        body = model.provider.body(request("q"))
        ids = [await api.submit([BatchEntry(f"c{n}", body)], f"vb-{n}") for n in range(3)]
        assert [await api.find(f"vb-{n}", since=0) for n in range(3)] == ids
        assert await api.find("vb-9", since=0) is None

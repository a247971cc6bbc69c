"""The layers a model call passes: the stack a run builds for its options (which layers, in
which order, none for a feature that is off), each layer alone over a fake `send`, and a
new layer slotted in with one line where the stack is built."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest

import vitals_engine as ve
from vitals_engine.caching.lookup import CacheUse
from vitals_engine.chats.dispatch import call_model, default_stacks
from vitals_engine.chats.layers.accounting import Accounting
from vitals_engine.chats.layers.cache import ReplyCache
from vitals_engine.chats.layers.call import Call, Layer, Send, Stack
from vitals_engine.chats.layers.limits import EndpointLimits
from vitals_engine.chats.layers.replies import Replies
from vitals_engine.chats.layers.retries import Retries
from vitals_engine.chats.layers.stacks import CallStacks
from vitals_engine.pacing.budget import Budget
from vitals_engine.pacing.clock import SystemClock
from vitals_engine.pacing.limits import LimitsRegistry, RateLimits
from vitals_engine.pacing.scope import CallScope, current_scope
from vitals_engine.providers.base import Provider
from vitals_engine.testing.clock import VirtualClock
from vitals_engine.vocab.model_calls import ChatRequest
from vitals_engine.vocab.turns import TokenUsage, Turn
from vitals_engine.vocab.usage import UsageLedger

pytestmark = pytest.mark.anyio

SUMS = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(1, 4)]
REQUEST = ChatRequest([Turn.user("What's 2+2?")])
LIVE = ["Accounting", "SeatCount", "Retries", "EndpointLimits", "ProviderSend"]
#: A run's: its journal takes each reply as it arrives (and answers a resumed run's calls).
RUN = ["Accounting", "ReplyJournal", *LIVE[1:]]
BATCHED = ["Accounting", "ReplyJournal", "SeatCount", "Retries", "BatchQueue"]


def reply(text: str = "4", tokens: TokenUsage | None = None) -> Turn:
    return Turn("assistant", Turn.user(text).contents, tokens=tokens)


def offline(model: str = "gpt-4.1-mini", **options: Any) -> Provider:
    """A provider nothing is sent to: its stack is only looked at."""
    return ve.chat_openai(model, base_url="http://127.0.0.1:9", api_key="k", **options).provider


async def stacks_in_a_run(tmp_path, *others: Provider, **options: Any) -> list[list[Stack]]:
    """Run a task whose solver makes no call and notes, in each sample's scope, the stack of
    the task's model and of each of `others`."""
    model = ve.chat_mock().provider
    seen: list[list[Stack]] = []

    async def solver(input: str) -> str:
        scope = current_scope()
        assert scope is not None
        assert scope.stacks is not None
        seen.append([scope.stacks.stack(p) for p in (model, *others)])
        return "4"

    task = ve.Task(SUMS, solver, ve.detect_includes(), dir=tmp_path / "logs")
    await task.eval_async(**options)
    assert task.get_samples().height == len(SUMS)
    return seen


# -- the stack a run builds ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "layers"),
    [
        pytest.param({}, RUN, id="nothing-on"),
        pytest.param({"token_budget": 1_000_000}, [*RUN[:2], "BudgetCheck", *RUN[2:]], id="budget"),
        pytest.param({"cache": "on"}, ["ReplyCache", *RUN], id="cache"),
        pytest.param({"batch": True}, BATCHED, id="batch-mode"),
    ],
)
async def test_a_run_stacks_the_layers_its_options_ask_for_in_order(tmp_path, options, layers):
    """Each option adds its layer where a call meets it; a feature that is off has none. The
    run builds its stack once: every sample's calls pass the same one."""
    if options.get("cache") == "on":
        options["cache"] = ve.Cache(dir=tmp_path / "cache")
    seen = await stacks_in_a_run(tmp_path, **options)
    assert seen[0][0].names() == layers
    assert all(stacks[0] is seen[0][0] for stacks in seen)


async def test_a_model_s_own_options_change_its_stack_only(tmp_path):
    """A model with its own `cache=` passes a cache layer, one with `batch=` ends at the
    batch queue without the live limits, one with a cost cap of its own passes the budget;
    the run's other models pass none of them, and a model's own rate limits alone leave it
    on the run's stack."""
    cached = offline(cache=ve.Cache(dir=tmp_path / "cache"))
    batched = offline("gpt-4.1", batch=True)
    capped = offline("gpt-4.1-nano", cost_budget=1.0)
    paced = offline("gpt-4.1-nano", rate_limits=ve.RateLimits(rpm=60))
    plain, *own = (await stacks_in_a_run(tmp_path, cached, batched, capped, paced))[0]
    assert plain.names() == RUN
    assert [stack.names() for stack in own[:3]] == [
        ["ReplyCache", *RUN],
        BATCHED,
        [*RUN[:2], "BudgetCheck", *RUN[2:]],
    ]
    assert own[3] is plain


async def test_a_model_that_refuses_the_run_s_cache_and_batches_passes_neither(tmp_path):
    """`cache=False` and `batch=False` on a model take it out of a run's cache and batch mode."""
    alone = offline(cache=False, batch=False)
    cache = ve.Cache(dir=tmp_path / "cache")
    run_model, own = (await stacks_in_a_run(tmp_path, alone, cache=cache, batch=True))[0]
    assert run_model.names() == ["ReplyCache", *BATCHED]
    assert own.names() == RUN


class Resumed:
    """Batch queues as the call path sees them, of a run that resumed one with batches
    still to read, not itself in batch mode."""

    resumed = True

    def takes(self, provider: Any) -> bool:
        return False


def drawn_order(text: str) -> tuple[list[str], list[str]]:
    """The layers a drawing of the stack names, in order (`-> Name`), and its batch mode's
    (its note `Retries -> BatchQueue, instead of A, B and C`)."""
    start = text.index("```\ncall_model")
    drawing = text[start : text.index("```", start + 3)]
    live = re.findall(r"^\s+-> (\w+)", drawing, flags=re.MULTILINE)
    note = re.search(r"batch mode: (\w+) -> (\w+), instead of ([^:]+):", drawing)
    assert note is not None
    before, bottom, instead = note.groups()
    left_out = set(re.findall(r"\w+", instead)) - {"and"}
    kept = [name for name in live if name not in left_out]
    assert kept[-1] == before
    return live, [*kept, bottom]


class Batched(Resumed):
    """Batch queues that take every model's calls (in batch mode)."""

    def takes(self, provider: Any) -> bool:
        return True


def test_every_layer_on_meets_a_call_in_the_order_drawn(tmp_path):
    """The stack with every feature on (traced, cache, journal, budget, a resumed run's
    batches, limits) is the drawing of `chats/layers/__init__.py`, layer by layer, and so
    is the batch mode's; the architecture page shows the same drawing."""
    from vitals_engine.chats import layers

    live, batched = drawn_order(layers.__doc__ or "")
    options: dict[str, Any] = {
        "retry": ve.Retry(),
        "clock": SystemClock(),
        "cache": CacheUse(ve.Cache(dir=tmp_path)),
        "budget": Budget(tokens=1_000),
        "limits": LimitsRegistry(),
        "replies": Replies(),
        "trace": object(),
        "sample_limits": True,
    }
    assert CallStacks(batches=Resumed(), **options).stack(offline()).names() == live  # type: ignore[arg-type]
    assert CallStacks(batches=Batched(), **options).stack(offline()).names() == batched  # type: ignore[arg-type]
    page = (Path(__file__).parent.parent / "docs" / "architecture.md").read_text()
    assert drawn_order(page) == (live, batched)
    assert len(live) == 11


def test_a_call_outside_any_run_passes_accounting_retries_and_the_send(tmp_path):
    """No run: no seat to count, no limits, no budget, no batches; the model's own cache if
    it has one."""
    assert default_stacks().stack(offline()).names() == ["Accounting", "Retries", "ProviderSend"]
    cached = offline(cache=ve.Cache(dir=tmp_path))
    assert default_stacks().stack(cached).names() == [
        "ReplyCache",
        "Accounting",
        "Retries",
        "ProviderSend",
    ]


async def test_a_scope_passes_the_stacks_it_is_given():
    """A scope given stacks built with limits: its calls pass those limits, in the stack
    built once for the model."""
    registry = LimitsRegistry(RateLimits(max_concurrency=2))
    stacks = CallStacks(retry=ve.Retry(), clock=SystemClock(), limits=registry)
    chat = ve.chat_mock()
    with CallScope(role="solver", stacks=stacks):
        assert await chat.chat_async("What's 2+2?")
        stack = stacks.stack(chat.provider)
        await chat.chat_async("What's 3+3?")
        assert stacks.stack(chat.provider) is stack
        assert stack.names() == LIVE
    limiter = registry.get(chat.provider.endpoint, None)
    assert limiter.solver_calls
    assert limiter.in_flight == 0


async def test_a_scope_without_stacks_records_its_calls_through_the_default_layers():
    """A scope of one's own, with no run's stacks: its calls are recorded in it and charged
    to its ledger, through accounting, the seat's count, the default retries and the send."""
    ledger = UsageLedger()
    calls: list[Any] = []
    chat = ve.chat_mock()
    with CallScope(role="scorer", ledgers=(ledger,), calls=calls):
        assert await chat.chat_async("What's 2+2?")
    assert [call.role for call in calls] == ["scorer"]
    assert ledger.rows
    assert CallStacks.default(ve.Retry()).stack(chat.provider).names() == [
        "Accounting",
        "SeatCount",
        "Retries",
        "ProviderSend",
    ]


# -- each layer alone, over a fake send ---------------------------------------------------------


class Scripted:
    """A fake `send`: each call takes the next outcome (a Turn, or an exception to raise)."""

    def __init__(self, *outcomes: Turn | BaseException) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[Call] = []

    async def __call__(self, call: Call) -> Turn:
        self.calls.append(call)
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


async def test_retries_alone_wait_out_each_retry_after_and_note_it():
    """Two 429s asking for 2 s, then a reply: three attempts, two notes, at least 4 s waited
    on the layer's clock; nothing given up."""
    clock = VirtualClock()
    given_up: list[Call] = []
    limited = ve.RateLimitError("slow down", status=429, retry_after=2.0)
    send = Scripted(limited, limited, reply())
    retries = Retries(ve.Retry(max_attempts=3), clock, lambda call, exc: given_up.append(call))
    call = Call(ve.chat_mock().provider, REQUEST, None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(clock.drive)
        turn = await retries(call, send)
        tg.cancel_scope.cancel()
    assert turn.text == "4"
    assert len(send.calls) == 3
    assert [note.attempt for note in call.notes] == [1, 2]
    assert clock.now() >= 4.0
    assert given_up == []


async def test_retries_alone_give_up_at_once_on_a_client_error():
    """A 400 is not tried again: one attempt, the call handed to `gave_up`, its error raised."""
    given_up: list[tuple[Call, Exception]] = []
    bad = ve.ProviderError("bad request", status=400)
    retries = Retries(ve.Retry(), SystemClock(), lambda call, exc: given_up.append((call, exc)))
    call = Call(ve.chat_mock().provider, REQUEST, None)
    with pytest.raises(ve.ProviderError, match="bad request"):
        await retries(call, Scripted(bad))
    assert given_up == [(call, bad)]
    assert call.notes == []


async def test_the_cache_alone_answers_a_repeat_without_sending_it(tmp_path):
    """The first call is sent and its reply kept; the same call again is answered from the
    store by `answer`, and `send` is not called."""
    answered: list[Turn] = []

    def answer(call: Call, hit: Any) -> Turn:
        answered.append(hit.turn)
        return hit.turn

    layer = ReplyCache(CacheUse(ve.Cache(dir=tmp_path)), answer)
    provider = ve.chat_mock().provider
    send = Scripted(reply("4"))
    first = Call(provider, REQUEST, None)
    assert (await layer(first, send)).text == "4"
    assert first.cache == "write"
    again = Call(provider, REQUEST, None)
    assert (await layer(again, send)).text == "4"
    assert len(send.calls) == 1
    assert [turn.text for turn in answered] == ["4"]


async def test_the_limits_alone_hold_a_slot_only_while_an_attempt_is_sent():
    """During the send the endpoint has one request in flight; after it, none, and a failed
    attempt's token estimate is given back to the bucket."""
    registry = LimitsRegistry(RateLimits(max_concurrency=1, tpm=100_000))
    layer = EndpointLimits(registry)
    provider = ve.chat_mock().provider
    limiter = registry.get(provider.endpoint, None)
    assert limiter.tokens is not None
    in_flight: list[int] = []

    async def send(call: Call) -> Turn:
        in_flight.append(limiter.in_flight)
        raise ve.ProviderUnavailable("down", status=503)

    with pytest.raises(ve.ProviderUnavailable):
        await layer(Call(provider, REQUEST, None), send)
    assert in_flight == [1]
    assert limiter.in_flight == 0
    assert limiter.tokens.level == pytest.approx(limiter.tokens.capacity, rel=1e-3)


async def test_accounting_alone_prices_the_reply_and_records_the_call():
    """The reply comes back stamped with its cost and retries; the scope's ledger and list of
    calls have it."""
    ledger = UsageLedger()
    scope = CallScope(role="scorer", ledgers=(ledger,), calls=[])
    provider = offline()
    call = Call(provider, REQUEST, scope)
    turn = await Accounting()(call, Scripted(reply(tokens=TokenUsage(input=1000, output=100))))
    assert turn.cost is not None
    assert turn.cost > 0
    assert turn.retries == 0
    assert scope.calls is not None
    [record] = scope.calls
    assert (record.role, record.reply) == ("scorer", turn)
    assert ledger.spent()[0] == pytest.approx(turn.cost)


# -- a new layer, one line -----------------------------------------------------------------------


class Tracing:
    """A layer a later capability could be: a span around each call."""

    def __init__(self, spans: list[tuple[str, str]]) -> None:
        self.spans = spans

    async def __call__(self, call: Call, send: Send) -> Turn:
        self.spans.append(("start", call.provider.model))
        turn = await send(call)
        self.spans.append(("end", turn.text))
        return turn


async def test_a_new_layer_slots_in_with_one_line_where_the_stack_is_built():
    """Adding a layer is one line in `CallStacks.layers`: calls then pass it, first here."""
    spans: list[tuple[str, str]] = []

    class Traced(CallStacks):
        def layers(self, provider: Provider) -> tuple[list[Layer], Send]:
            layers, bottom = super().layers(provider)
            layers.insert(0, Tracing(spans))  # the one line
            return layers, bottom

    chat = ve.chat_mock()
    stacks = Traced(retry=ve.Retry(), clock=SystemClock(), limits=LimitsRegistry())
    with CallScope(role="solver", stacks=stacks):
        assert "4" in await chat.chat_async("What's 2+2?")
        assert (await call_model(chat.provider, REQUEST)).text
    assert stacks.stack(chat.provider).names() == ["Tracing", *LIVE]
    assert [kind for kind, _ in spans] == ["start", "end", "start", "end"]

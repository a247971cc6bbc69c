"""`get_cost()` says which rows were batched: the ledger keeps calls sent in provider
batches apart from live ones of the same role and model, the cost frame has a `batch`
column, and a log gives the same frame back (`LoggedEval.get_cost()`), resumed runs
included. Runs go against the local mock server's batch APIs."""

from __future__ import annotations

import pickle

import msgspec
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import vitals_engine as ve
from tests.helpers import openai, sums
from tests.test_log_read import EXPECTED
from vitals_engine.log.logged_sample import logged_batch
from vitals_engine.pricing.cost import cost_of
from vitals_engine.report import format_cost
from vitals_engine.vocab.turns import TokenUsage
from vitals_engine.vocab.usage import UsageLedger, cost_schema

QUICK = ve.Batch(size=10, wait=0.05, poll=0.02)
MODEL = "gpt-4.1-mini"  # a model with a known price, and a batch share (OpenAI's: a half)
KEY = ["role", "provider", "model", "batch"]


def graded_task(server, tmp_path, n=6):
    """A live solver and a judge of the same model that sends its calls in batches."""
    return ve.Task(
        sums(n),
        solver=ve.generate(openai(server, MODEL, batch=False)),
        scorer=ve.model_graded_qa(scorer_chat=openai(server, MODEL, batch=True)),
        dir=tmp_path,
    )


def sums_task(server, tmp_path, n, name="sums"):
    return ve.Task(
        sums(n),
        solver=ve.generate(openai(server, MODEL)),
        scorer=ve.detect_includes(),
        dir=tmp_path,
        name=name,
    )


def list_price(row):
    """What a row's tokens cost at the model's standard (live) price."""
    tokens = TokenUsage(
        input=row["input_tokens"],
        output=row["output_tokens"],
        cached_input=row["cached_input_tokens"],
        reasoning=row["reasoning_tokens"],
    )
    return cost_of("OpenAI", MODEL, tokens)


# -- the ledger and the frame ----------------------------------------------------------------


def test_the_ledger_keeps_batched_and_live_calls_of_one_model_apart():
    ledger = UsageLedger()
    ledger.record("solver", "OpenAI", MODEL, TokenUsage(10, 2), 1.0)
    ledger.record("solver", "OpenAI", MODEL, TokenUsage(10, 2), 0.5, batch=True)
    ledger.record("solver", "OpenAI", MODEL, TokenUsage(5, 1), 0.25, batch=True)
    ledger.record("scorer", "OpenAI", MODEL, TokenUsage(3, 1), 0.1, batch=True)
    frame = ledger.to_frame()
    assert list(cost_schema()) == frame.columns
    assert frame.columns.index("batch") == frame.columns.index("model") + 1
    assert frame.schema["batch"] == pl.Boolean
    assert frame.select(*KEY, "requests", "input_tokens", "cost").rows() == [
        ("solver", "OpenAI", MODEL, False, 1, 10, 1.0),
        ("solver", "OpenAI", MODEL, True, 2, 15, 0.75),
        ("scorer", "OpenAI", MODEL, True, 1, 3, 0.1),
    ]
    # totals over batch and live alike
    assert ledger.by_model()[("OpenAI", MODEL)].requests == 4
    assert ledger.by_role()["solver"].tokens.input == 25
    # merged, taken apart and shipped (the Ray path pickles ledgers) it stays apart
    twin = UsageLedger()
    twin.merge(ledger, role="solver")
    assert twin.to_frame()["batch"].to_list() == [False, True]
    part = UsageLedger()
    part.record("solver", "OpenAI", MODEL, TokenUsage(10, 2), 0.5, batch=True)
    left = ledger.less(part)
    assert left.rows[("solver", "OpenAI", MODEL, True, False)].tokens.input == 5
    assert left.rows[("solver", "OpenAI", MODEL, False, False)].tokens.input == 10
    assert pickle.loads(pickle.dumps(ledger)).to_frame().equals(frame)
    ledger.drop_role("solver")
    assert ledger.to_frame()["role"].to_list() == ["scorer"]


def test_a_run_without_batches_has_only_live_rows(tmp_path):
    task = ve.Task(
        sums(3),
        solver=ve.generate(ve.chat_mock()),
        scorer=ve.model_graded_qa(scorer_chat=ve.chat_mock()),
        dir=tmp_path,
    )
    task.eval()
    cost = task.get_cost()
    assert cost.select("role", "batch").rows() == [("solver", False), ("scorer", False)]
    assert ve.read_log(task.log_path).get_cost().equals(cost)
    assert "(batch)" not in format_cost(task)


@pytest.mark.parametrize("path", [e[0] for e in EXPECTED], ids=[e[0].name[:40] for e in EXPECTED])
def test_logs_of_other_tools_read_as_live(path):
    """Inspect's and vitals' (R) logs: every row live; a header-only read cannot say (None)."""
    assert not any(ve.read_log(path).get_cost()["batch"].to_list())
    header_only = ve.read_log(path, header_only=True).get_cost()
    assert header_only["batch"].to_list() == [None] * header_only.height


def test_the_model_events_say_which_roles_were_batched():
    """Ours write `config.batch: true` and a judge's role as "grader"; Inspect's batch
    setting may be a size or settings, and false when off."""

    def read(*events):
        return logged_batch(msgspec.Raw(msgspec.json.encode(list(events))))

    def model(batch, role=None):
        event = {"event": "model", "model": "openai/m", "config": {"batch": batch}}
        return event | ({"role": role} if role else {})

    assert read({"event": "model", "config": {}}) is None  # no batch key: no decode
    assert read(model(True), model(False, "grader")) == {"solver": True, "scorer": False}
    assert read(model(True), model(False)) == {"solver": False}  # not all of them
    assert read(model(100), model({"size": 10}, "grader")) == {"solver": True, "scorer": True}
    assert read({"event": "score", "metadata": {"batch": "b1"}}) == {}


# -- runs in batch mode, and their logs ----------------------------------------------------


@pytest.mark.anyio
async def test_a_batched_judge_beside_a_live_solver_has_a_row_of_its_own(server, tmp_path):
    task = graded_task(server, tmp_path)
    await task.eval_async(batch=QUICK)
    assert task.metrics == {"accuracy": 1.0}
    cost = task.get_cost()
    assert cost.select(*KEY, "requests").rows() == [
        ("solver", "OpenAI", MODEL, False, 6),
        ("scorer", "OpenAI", MODEL, True, 6),
    ]
    solver, scorer = cost.iter_rows(named=True)
    assert solver["cost"] == pytest.approx(list_price(solver))
    assert scorer["cost"] == pytest.approx(list_price(scorer) / 2)
    assert ve.read_log(task.log_path).get_cost().equals(cost)
    lines = format_cost(task).splitlines()
    assert f"OpenAI/{MODEL} (batch)" in lines[-1]
    assert "(batch)" not in lines[-2]


@pytest.mark.anyio
async def test_batched_calls_cost_half_what_the_same_calls_cost_live(server, tmp_path):
    live = sums_task(server, tmp_path, 5)
    await live.eval_async()
    batched = sums_task(server, tmp_path, 5)
    await batched.eval_async(batch=QUICK)
    assert all(entry.batch is not None for entry in server.log[5:])  # these went in batches
    was, now = live.get_cost(), batched.get_cost()
    assert was.select(*KEY).rows() == [("solver", "OpenAI", MODEL, False)]
    assert now.select(*KEY).rows() == [("solver", "OpenAI", MODEL, True)]
    tokens = ["requests", "input_tokens", "cached_input_tokens", "output_tokens"]
    assert now.select(tokens).equals(was.select(tokens))
    assert was["cost"][0] > 0
    assert now["cost"][0] == pytest.approx(was["cost"][0] / 2)
    assert ve.read_log(batched.log_path).get_cost().equals(now)
    assert ve.read_log(live.log_path).get_cost().equals(was)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "first_batched", [False, True], ids=["live-then-batched", "batched-then-live"]
)
async def test_a_run_resumed_in_the_other_mode_has_a_live_and_a_batched_row(
    server, tmp_path, first_batched
):
    """The resumed samples' usage is rebuilt from the log (batched as its model events
    say), the rest run in the other mode: two solver rows, read back apart from the
    final log."""
    if first_batched:
        server.fail_in_batch("400", times=2)  # two samples fail: the run is resumable
    else:
        server.fail("400", times=2)
    first = sums_task(server, tmp_path, 6, name="resumed")
    with pytest.raises(ve.EvalFailedError):
        await first.eval_async(batch=QUICK if first_batched else None)
    assert ve.read_log(first.log_path).status == "error"
    again = sums_task(server, tmp_path, 6, name="resumed")
    await again.eval_async(batch=None if first_batched else QUICK, resume=True)
    assert again.metrics == {"accuracy": 1.0}
    cost = again.get_cost()
    assert cost.select(*KEY, "requests").rows() == [
        ("solver", "OpenAI", MODEL, False, 2 if first_batched else 4),
        ("solver", "OpenAI", MODEL, True, 4 if first_batched else 2),
    ]
    live, batched = cost.iter_rows(named=True)
    assert live["cost"] == pytest.approx(list_price(live))
    assert batched["cost"] == pytest.approx(list_price(batched) / 2)
    logged = ve.read_log(again.log_path)
    # the log keeps usage by role: the split is summed back from its samples
    assert_frame_equal(logged.get_cost(), cost, check_exact=False)
    header_only = ve.read_log(again.log_path, header_only=True).get_cost()
    assert header_only.select("role", "batch", "requests").rows() == [("solver", None, None)]


@pytest.mark.anyio
async def test_spilled_samples_read_their_usage_back_as_batched(server, tmp_path, monkeypatch):
    """Past the spill threshold a sample's usage is dropped and rebuilt from the log:
    batched, as it was."""
    import vitals_engine.task.running as running

    monkeypatch.setattr(running, "SPILL_AFTER", 2)
    task = sums_task(server, tmp_path, 5)
    await task.eval_async(batch=QUICK)
    records = task._state.records
    assert sum(r.spilled for r in records) == 3
    task.get_samples()  # reads the spilled samples back
    keys = {key for record in records for key in record.usage.rows}
    assert keys == {("solver", "OpenAI", MODEL, True, False)}

"""Batch mode against the mock server's real batch APIs: `eval(batch=...)` and models
made with `batch=True` send their calls in the providers' batches and get the same
samples, scores and token counts as live calls; failures inside a batch go through the
run's retry policy; a server without batch APIs stops the run with a clear error."""

import functools

import anyio
import pytest

import vitals_engine as ve
from tests.helpers import sums, until

MAKERS = {
    "openai": ve.chat_openai,
    "openai_responses": functools.partial(ve.chat_openai, api="responses"),
    "anthropic": ve.chat_anthropic,
    "google": ve.chat_google_gemini,
}
QUICK = ve.Batch(size=10, wait=0.05, poll=0.02)


def chat(server, provider="openai", **options):
    model = f"{provider}-test-model"
    return MAKERS[provider](model, base_url=server.base_url(provider), api_key="k", **options)


def sums_task(server, tmp_path, n, provider="openai", **chat_options):
    """A task of `n` sums, solved by `provider`'s model on the mock server."""
    solver = ve.generate(chat(server, provider, **chat_options))
    return ve.Task(sums(n), solver=solver, scorer=ve.detect_includes(), dir=tmp_path)


def outcome(task):
    return task.get_samples().select("id", "result", "score").rows()


@pytest.mark.parametrize("provider", list(MAKERS))
def test_a_run_in_batch_mode_gives_what_a_live_run_gives(server, tmp_path, provider):
    server.batch_delay = 0.02
    live = sums_task(server, tmp_path, 25, provider).eval()
    assert all(entry.batch is None for entry in server.log)
    server.reset()
    batched = sums_task(server, tmp_path, 25, provider).eval(batch=QUICK)
    assert outcome(batched) == outcome(live)
    assert batched.metrics == {"accuracy": 1.0}
    assert batched.get_cost()["requests"].to_list() == live.get_cost()["requests"].to_list()
    assert batched.get_cost()["input_tokens"].to_list() == live.get_cost()["input_tokens"].to_list()
    assert len(server.log) == 25
    assert all(entry.batch is not None for entry in server.log)  # no call went live
    assert len(server.batches) == 3  # 10 + 10 + 5
    assert set(server.batch_submissions.values()) == {1}  # nothing sent twice


def test_a_judge_in_batches_beside_a_live_solver(server, tmp_path):
    server.batch_delay = 0.02
    judge = chat(server, "anthropic", batch=QUICK)
    task = ve.Task(
        [{"input": "What's 2+2?", "target": "4"}] * 6,
        solver=ve.generate(chat(server, "openai")),
        scorer=ve.model_graded_qa(scorer_chat=judge),
        dir=tmp_path,
    )
    task.eval()
    by_format = {(entry.format, entry.batch is not None) for entry in server.log}
    assert by_format == {("openai", False), ("anthropic", True)}
    assert task.metrics == {"accuracy": 1.0}


def test_a_model_made_live_stays_live_in_a_run_in_batch_mode(server, tmp_path):
    task = sums_task(server, tmp_path, 4, batch=False)
    task.eval(batch=QUICK)
    assert len(server.log) == 4
    assert all(entry.batch is None for entry in server.log)


def test_samples_waiting_on_a_batch_lend_their_places_so_batches_fill(server, tmp_path):
    """Two samples at work at once, batches of ten: a sample waiting on its batch does
    not hold its place, so the batch fills with ten requests, not two."""
    server.batch_delay = 0.02
    task = sums_task(server, tmp_path, 20)
    task.eval(max_concurrency=2, batch=ve.Batch(size=10, wait=30, poll=0.02))
    assert task.metrics == {"accuracy": 1.0}
    assert sorted(len(b.custom_ids) for b in server.batches.values()) == [10, 10]


@pytest.mark.parametrize("provider", list(MAKERS))
def test_requests_a_batch_failed_for_a_while_go_in_a_later_batch(server, tmp_path, provider):
    server.fail_in_batch("500", times=2)
    task = sums_task(server, tmp_path, 6, provider)
    task.eval(batch=QUICK, retry=ve.Retry(backoff=0.01))
    assert task.metrics == {"accuracy": 1.0}
    assert sorted(entry.outcome for entry in server.log) == ["500", "500"] + ["ok"] * 6
    assert len(server.batches) >= 2


@pytest.mark.parametrize("provider", list(MAKERS))
def test_a_request_a_batch_refused_fails_its_sample(server, tmp_path, provider):
    server.fail_in_batch("400", times=1)
    task = sums_task(server, tmp_path, 4, provider)
    task.eval(batch=QUICK, fail_on_error=False)
    failed = [r for r in ve.read_log(task.log_path).records() if r.error is not None]
    assert len(failed) == 1
    assert len(server.log) == 4  # not retried


@pytest.mark.parametrize("provider", list(MAKERS))
def test_the_unfinished_requests_of_an_expired_batch_run_in_the_next(server, tmp_path, provider):
    server.expire_batches(times=1, finished=2)
    task = sums_task(server, tmp_path, 5, provider)
    task.eval(batch=QUICK)
    assert task.metrics == {"accuracy": 1.0}
    first, *later = sorted(server.batches.values(), key=lambda b: b.created_at)
    assert first.outcome == "expired"
    assert sum(len(b.custom_ids) for b in later) == 3


def test_a_server_without_batch_apis_stops_the_run_saying_so(server, tmp_path):
    server.batches_enabled = False
    task = sums_task(server, tmp_path, 4)
    with pytest.raises(ve.ConfigError, match=r"no batch API.*without batch mode"):
        task.eval(batch=QUICK)
    assert ve.read_log(task.log_path).status == "error"
    assert len(server.log) == 0


def test_batch_options_are_checked():
    with pytest.raises(ve.ConfigError, match=r"Batch\(size="):
        ve.Batch(size=0)
    with pytest.raises(ve.ConfigError, match=r"Batch\(poll="):
        ve.Batch(poll=-1)
    with pytest.raises(ve.ConfigError, match="batch= must be"):
        ve.Task(sums(1), solver=ve.generate(ve.chat_mock())).eval(batch="yes")


def test_a_model_without_a_batch_api_in_a_run_in_batch_mode_is_a_config_error(tmp_path):
    task = ve.Task(
        sums(2), solver=ve.generate(ve.chat_mock()), scorer=ve.detect_includes(), dir=tmp_path
    )
    with pytest.raises(ve.ConfigError, match=r"cannot send batches.*batch=False"):
        task.eval(batch=True)


def test_the_command_line_sends_a_task_files_calls_in_batches(server, tmp_path, capsys):
    from vitals_engine.cli import main

    task_file = tmp_path / "batched.py"
    task_file.write_text(
        "import vitals_engine as ve\n"
        f"chat = ve.chat_openai('gpt-test', base_url={server.base_url()!r}, api_key='k')\n"
        "data = [{'input': f\"What's {i}+{i}?\", 'target': str(2 * i)} for i in range(3)]\n"
        "task = ve.Task(data, solver=ve.generate(chat), scorer=ve.detect_includes())\n"
    )
    code = main(["eval", str(task_file), "--batch", "--log-dir", str(tmp_path), "--no-progress"])
    assert code == 0, capsys.readouterr().err
    assert len(server.log) == 3
    assert all(entry.batch is not None for entry in server.log)


@pytest.mark.anyio
async def test_when_every_sample_waits_on_a_batch_the_queue_goes_without_waiting(server, tmp_path):
    """Batches of up to 100 that wait an hour for more: with 5 samples, all waiting on
    the batch, no request can come, so it goes at once (the guard fails the test after a
    minute)."""
    task = sums_task(server, tmp_path, 5)
    with anyio.fail_after(60):
        await task.eval_async(batch=ve.Batch(size=100, wait=3600, poll=0.02))
    assert task.metrics == {"accuracy": 1.0}
    assert [len(b.custom_ids) for b in server.batches.values()] == [5]


def test_the_progress_bar_counts_the_batches(server, tmp_path, capsys):
    task = sums_task(server, tmp_path, 12)
    task.eval(batch=QUICK, progress=True)
    last = capsys.readouterr().err.strip().split("\r")[-1]
    assert "12/12" in last
    assert "batches: 0 out, 2 done" in last


def test_a_batched_run_costs_the_batch_price(server, tmp_path):
    """Anthropic bills batched tokens at half the standard price: so does the cost table."""

    def run(**options):
        model = "claude-sonnet-4-5"  # a model with a known price
        solver = ve.generate(
            ve.chat_anthropic(model, base_url=server.base_url("anthropic"), api_key="k")
        )
        task = ve.Task(sums(4), solver=solver, scorer=ve.detect_includes(), dir=tmp_path)
        return task.eval(**options).get_cost()["cost"].to_list()

    [live] = run()
    [batched] = run(batch=QUICK)
    assert live > 0
    assert batched == pytest.approx(live / 2)


@pytest.mark.parametrize("cancel", [None, False])
def test_a_run_stopped_by_an_error_cancels_the_batches_it_left_unless_told_not_to(
    server, tmp_path, cancel
):
    """Four samples wait in a batch that takes a minute; the fifth breaks the solver's
    contract once that batch is out, which stops the run: the batch is cancelled with the
    provider (by default), or left running (cancel_batches=False)."""
    server.batch_delay = 60
    model = chat(server)

    async def solve(input):
        if input == "What's 4+4?":
            await until(lambda: server.batches, "the batch of the four others")
            return ["not", "a", "string"]
        own = model.clone()
        return ve.Solution(await own.chat_async(input), chat=own)

    task = ve.Task(sums(5), solver=solve, scorer=ve.detect_includes(), dir=tmp_path)
    options = ve.Batch(size=4, wait=0.05, poll=0.05, cancel_batches=cancel)
    with pytest.raises(ve.SolverError):
        task.eval(batch=options)
    [batch] = server.batches.values()
    if cancel is False:
        assert batch.cancel_requested_at is None
    else:
        assert batch.cancel_requested_at is not None


def test_the_log_says_which_model_calls_were_batched_and_in_which_batch(server, tmp_path):
    import json

    judge = chat(server, "anthropic", batch=QUICK)
    task = ve.Task(
        [{"input": "What's 2+2?", "target": "4"}],
        solver=ve.generate(chat(server, "openai")),
        scorer=ve.model_graded_qa(scorer_chat=judge),
        dir=tmp_path,
    )
    task.eval()
    [sample] = json.loads(task.log_path.read_text())["samples"]
    events = [e for e in sample["events"] if e["event"] == "model"]
    live, batched = sorted(events, key=lambda e: "batch" in e["config"])
    assert "batch" not in live["config"]
    assert "batch" not in (live.get("metadata") or {})
    assert batched["config"]["batch"] is True
    assert batched["metadata"]["batch"] in server.batches

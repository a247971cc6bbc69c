"""Batches survive a run that stops: killed with SIGKILL while its batches are out, or
cancelled with `cancel_batches=False`, a run resumed with `resume=True` reattaches to the
batches it had submitted, takes their outcomes and sends no request twice (the mock
server's counters), and its log holds every sample once."""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

import vitals_engine as ve
from tests.helpers import sums, wait_until
from vitals_engine.log.journal_format import read_journal_batches
from vitals_engine.log.logged_batches import logged_batches

ROOT = Path(__file__).resolve().parent.parent
QUICK = ve.Batch(size=10, wait=0.05, poll=0.02, max_pending=30)
MAKERS = {
    "openai": ve.chat_openai,
    "anthropic": ve.chat_anthropic,
    "google": ve.chat_google_gemini,
}

KILLED_RUN = textwrap.dedent(
    """
    import sys
    import vitals_engine as ve

    provider, base_url, log_dir = sys.argv[1:4]
    maker = {"openai": ve.chat_openai, "anthropic": ve.chat_anthropic,
             "google": ve.chat_google_gemini}[provider]
    data = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(25)]
    chat = maker(f"{provider}-test-model", base_url=base_url, api_key="k")
    task = ve.Task(data, solver=ve.generate(chat), scorer=ve.detect_includes(), dir=log_dir,
                   name="batched")
    task.eval(batch=ve.Batch(size=10, wait=0.05, poll=0.02, max_pending=30), progress=False)
    """
)


def sums_task(server, logs, provider="openai"):
    model = MAKERS[provider](
        f"{provider}-test-model", base_url=server.base_url(provider), api_key="k"
    )
    return ve.Task(
        sums(25), solver=ve.generate(model), scorer=ve.detect_includes(), dir=logs, name="batched"
    )


def journaled(logs):
    """The batches the run's journal records (none before it exists)."""
    return [b for path in logs.glob("*.journal") for b in read_journal_batches(path)]


def wait_for_batches(logs, n):
    wait_until(
        lambda: len([b for b in journaled(logs) if b.id is not None]) == n,
        f"{n} batches submitted and journaled",
    )


async def cancel_once_batches_are_out(task, logs, batch):
    """Run `task` in batch mode and cancel the run once its three batches are out."""
    async with anyio.create_task_group() as tg:

        async def run():
            await task.eval_async(batch=batch, progress=False)

        tg.start_soon(run)
        await anyio.to_thread.run_sync(wait_for_batches, logs, 3)
        tg.cancel_scope.cancel()


def assert_nothing_sent_twice(server, batches, requests):
    assert len(server.batches) == batches  # the resumed run submitted no batch
    assert set(server.batch_submissions.values()) == {1}
    assert sum(server.batch_submissions.values()) == requests
    assert all(entry.batch is not None for entry in server.log)


def assert_whole_log(task, n):
    logged = ve.read_log(task.log_path)
    assert logged.status == "success"
    assert sorted(sample.id for sample in logged.samples) == list(range(1, n + 1))
    assert task.metrics == {"accuracy": 1.0}
    return logged


@pytest.mark.parametrize("provider", list(MAKERS))
def test_kill_9_with_batches_out_then_resume_sends_nothing_twice(server, tmp_path, provider):
    logs = kill_with_batches_out(server, tmp_path, provider)  # out until the test ends them
    assert len(server.batches) == 3
    server.end_batches()

    task = sums_task(server, logs, provider)
    task.eval(resume=True, batch=QUICK, progress=False)

    assert_nothing_sent_twice(server, batches=3, requests=25)
    logged = assert_whole_log(task, 25)
    assert {b.id for b in logged_batches(logged.header)} == set(server.batches)
    assert not list(logs.glob("*.journal"))


def kill_once_batches_are_out(server, tmp_path, script, args, batches):
    """Run `script` (with `args` and the log folder) in a process of its own, with the
    mock server's batches held out, and kill it with SIGKILL once its journal records
    `batches` batches submitted; its log folder."""
    server.batch_delay = 3600
    logs = tmp_path / "logs"
    path = tmp_path / "run.py"
    path.write_text(script)
    proc = subprocess.Popen(
        [sys.executable, str(path), *args, str(logs)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        wait_for_batches(logs, batches)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    return logs


def kill_with_batches_out(server, tmp_path, provider="openai"):
    """A run in batch mode killed with SIGKILL once its three batches are out; its logs."""
    args = [provider, server.base_url(provider)]
    return kill_once_batches_are_out(server, tmp_path, KILLED_RUN, args, 3)


def test_a_run_resumed_live_still_takes_what_its_batches_answered(server, tmp_path):
    """Resumed without batch mode: the calls the killed run had sent in batches take
    their outcomes from them (they are paid for); nothing goes live."""
    logs = kill_with_batches_out(server, tmp_path)
    server.end_batches()
    task = sums_task(server, logs)
    task.eval(resume=True, progress=False)
    assert_nothing_sent_twice(server, batches=3, requests=25)
    assert len(server.log) == 25  # every request the server answered came in a batch
    assert_whole_log(task, 25)


@pytest.mark.anyio
async def test_a_cancelled_run_leaves_its_batches_for_resume_when_asked(server, tmp_path):
    """`cancel_batches=False`: the cancelled run's log names its batches and their requests
    of the unfinished samples; resuming that log takes their outcomes."""
    server.batch_delay = 3600
    logs = tmp_path / "logs"
    keep = ve.Batch(size=10, wait=0.05, poll=0.02, max_pending=30, cancel_batches=False)
    task = sums_task(server, logs)
    await cancel_once_batches_are_out(task, logs, keep)
    logged = ve.read_log(task.log_path)
    assert logged.status == "cancelled"
    left = logged_batches(logged.header)
    assert sorted(len(b.entries) for b in left) == [5, 10, 10]
    assert all(b.ended is None for b in left)
    assert all(batch.cancel_requested_at is None for batch in server.batches.values())
    server.end_batches()

    again = sums_task(server, logs)
    await again.eval_async(resume=True, batch=QUICK, progress=False)
    assert_nothing_sent_twice(server, batches=3, requests=25)
    assert_whole_log(again, 25)


@pytest.mark.anyio
async def test_a_cancelled_run_cancels_its_batches_and_resume_sends_what_did_not_run(
    server, tmp_path
):
    """The default: a cancelled run cancels its batches with the provider; resumed, it
    reattaches, finds the requests cancelled, and sends those (and only those) again."""
    server.batch_delay = 3600
    logs = tmp_path / "logs"
    task = sums_task(server, logs)
    await cancel_once_batches_are_out(task, logs, QUICK)
    assert all(batch.cancel_requested_at is not None for batch in server.batches.values())
    server.batch_delay = 0.02

    again = sums_task(server, logs)
    await again.eval_async(resume=True, batch=QUICK, progress=False)
    assert len(server.batches) == 6  # three cancelled, three sent anew
    assert sum(server.batch_submissions.values()) == 50
    assert_whole_log(again, 25)


def test_a_judge_in_batches_killed_mid_way_keeps_its_batches(server, tmp_path):
    """The solver is live, the judge batched: killed while the judge's batches are out,
    the resumed run solves again (live calls are not kept) but takes the judge's
    outcomes from the batches it had sent."""
    args = [server.base_url("openai"), server.base_url("anthropic")]
    logs = kill_once_batches_are_out(server, tmp_path, JUDGED_RUN, args, 2)
    server.end_batches()
    # Under load the killed run's second batch may have gone out before all its judge
    # calls had come (its wait is 50 ms): the resumed run then sends the rest in a batch
    # of its own, which must not be held for the hour the killed run's were.
    server.batch_delay = 0.02
    sent_before = len(server.batches)
    task = judged_task(server, logs)
    task.eval(resume=True, progress=False)
    assert sent_before == 2
    assert set(server.batch_submissions.values()) == {1}  # nothing sent twice
    assert sum(server.batch_submissions.values()) == 12
    logged = ve.read_log(task.log_path)
    assert logged.status == "success"
    assert len(logged.samples) == 12


JUDGED_RUN = textwrap.dedent(
    """
    import sys
    import vitals_engine as ve

    solver_url, judge_url, log_dir = sys.argv[1:4]
    data = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(12)]
    solver = ve.chat_openai("openai-test-model", base_url=solver_url, api_key="k")
    judge = ve.chat_anthropic("anthropic-test-model", base_url=judge_url, api_key="k",
                              batch=ve.Batch(size=6, wait=0.05, poll=0.02))
    task = ve.Task(data, solver=ve.generate(solver),
                   scorer=ve.model_graded_qa(scorer_chat=judge), dir=log_dir, name="judged")
    task.eval(progress=False)
    """
)


def judged_task(server, logs):
    solver = ve.chat_openai("openai-test-model", base_url=server.base_url("openai"), api_key="k")
    judge = ve.chat_anthropic(
        "anthropic-test-model",
        base_url=server.base_url("anthropic"),
        api_key="k",
        batch=ve.Batch(size=6, wait=0.05, poll=0.02),
    )
    return ve.Task(
        [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(12)],
        solver=ve.generate(solver),
        scorer=ve.model_graded_qa(scorer_chat=judge),
        dir=logs,
        name="judged",
    )


@pytest.mark.parametrize("provider", list(MAKERS))
def test_a_batch_whose_submission_was_cut_short_is_found_where_the_provider_can_say(
    server, tmp_path, provider
):
    """Killed after the provider took a batch and before its answer came (the journal has
    the batch's requests, not its id): OpenAI and Gemini batches carry the run's name for
    them, so the resumed run finds it and sends nothing twice; Anthropic cannot say, so
    its requests go out again."""
    logs = kill_with_batches_out(server, tmp_path, provider)
    journal = next(logs.glob("*.journal"))
    lines = journal.read_bytes().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if b'"submitted":' in line)
    journal.write_bytes(b"".join(lines[:cut] + lines[cut + 1 :]))  # as if it never came
    server.end_batches()
    server.batch_delay = 0.02  # for a batch sent again

    task = sums_task(server, logs, provider)
    task.eval(resume=True, batch=QUICK, progress=False)

    assert_whole_log(task, 25)
    if provider != "anthropic":
        assert_nothing_sent_twice(server, batches=3, requests=25)
    else:
        assert len(server.batches) == 4  # the batch it could not find, sent again
        assert sum(server.batch_submissions.values()) == 25 + 10

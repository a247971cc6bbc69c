"""The log on disk: journal while running, final .json or .eval, listing, secrets, resume."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import anyio
import msgspec
import pytest

import vitals_engine as ve
from tests.helpers import sums, until, wait_until
from tests.inspect_check import assert_inspect_reads, read_eval_log
from tests.journals import started_journal
from vitals_engine.log import writer
from vitals_engine.log.journal_format import encode_sample, encode_start

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[1]


async def test_samples_reach_the_journal_while_the_run_goes_on(tmp_path):
    """A finished sample is in the journal (readable with read_log) before the run ends."""
    release = anyio.Event()
    seen = {}

    async def solver(input, sample):
        if sample.id == 3:
            await release.wait()
        return input

    task = ve.Task(sums(3), solver=solver, scorer=ve.detect_includes(), dir=tmp_path)

    def two_samples_journaled():
        journal = started_journal(tmp_path)
        logged = ve.read_log(journal) if journal is not None else None
        return logged if logged is not None and len(logged.samples) >= 2 else None

    async def watch():
        logged = await until(two_samples_journaled, "two samples in the journal", limit=10)
        seen["status"] = logged.status
        seen["ids"] = sorted(s.id for s in logged.samples)
        release.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        await task.eval_async(max_concurrency=3, fail_on_error=False)
    assert seen == {"status": "started", "ids": [1, 2]}
    assert not list(tmp_path.glob("*.journal")), "the journal is removed once the log is written"
    assert assert_inspect_reads(task.log_path, task).status == "success"


async def test_eval_format_log_reads_in_inspect(tmp_path):
    """log_format="eval" writes a zip with header, samples, summaries and reductions that
    Inspect reads in full and header-only."""
    task = ve.Task(
        sums(3),
        solver=ve.generate(ve.chat_mock()),
        scorer=ve.detect_includes(),
        dir=tmp_path,
        epochs=2,
    )
    await task.eval_async(log_format="eval")
    assert task.log_path.suffix == ".eval"
    names = zipfile.ZipFile(task.log_path).namelist()
    assert {"header.json", "summaries.json", "reductions.json"} <= set(names)
    assert sum(n.startswith("samples/") for n in names) == 6
    full = assert_inspect_reads(task.log_path, task)
    assert full.results.scores[0].metrics["accuracy"].value == 1.0
    logged = ve.read_log(task.log_path)
    assert logged.get_samples()["score"].to_list() == ["C"] * 6


async def test_eval_members_are_unique_and_stay_in_their_folder(tmp_path):
    """Sample ids become member names no two ids share (1 and "1") and that never leave
    `samples/` when unzipped ("../../x"); ours and Inspect's readers read every sample
    back under its own id."""
    ids = [7, "1", "../../x", "a b/é", "x" * 300, "plain-id.2"]
    data = [{"id": i, "input": f"What's {n}+{n}?", "target": str(2 * n)} for n, i in enumerate(ids)]
    task = ve.Task(
        data, solver=ve.generate(ve.chat_mock()), scorer=ve.detect_includes(), dir=tmp_path
    )
    await task.eval_async(log_format="eval")
    names = [n for n in zipfile.ZipFile(task.log_path).namelist() if n.startswith("samples/")]
    assert len(set(names)) == len(ids)
    assert all(n.count("/") == 1 and ".." not in n.split("/") for n in names)
    assert all(len(n.encode()) < 255 for n in names)
    assert "samples/7_epoch_1.json" in names
    assert "samples/plain-id.2_epoch_1.json" in names
    logged = ve.read_log(task.log_path).get_samples()
    assert sorted(map(str, logged["id"].to_list())) == sorted(map(str, ids))
    full = assert_inspect_reads(task.log_path)  # (mixed ids read as text in our frame)
    assert sorted(str(sample.id) for sample in full.samples) == sorted(map(str, ids))
    out = tmp_path / "unzipped"
    zipfile.ZipFile(task.log_path).extractall(out)
    assert {p.parent for p in out.rglob("*.json") if p.parent != out} == {out / "samples"}


def test_int_and_string_ids_that_print_alike_keep_their_own_members():
    """Ids 1 and "1" would be two members of the zip, not one written over the other (a
    Task refuses them together, as one id in the log's frames; a run made elsewhere may
    still hold both)."""
    assert writer.sample_member_name(1, 1) == "samples/1_epoch_1.json"
    assert writer.sample_member_name("1", 1) == "samples/~1_epoch_1.json"


async def test_task_log_format_default(tmp_path):
    """Task(log_format="eval") makes .eval the task's default."""
    task = ve.Task(
        sums(1),
        solver=ve.generate(ve.chat_mock()),
        scorer=ve.detect_includes(),
        dir=tmp_path,
        log_format="eval",
    )
    await task.eval_async()
    assert task.log_path.suffix == ".eval"
    with pytest.raises(ve.ConfigError, match="log_format"):
        ve.Task(sums(1), solver=ve.generate(ve.chat_mock()), log_format="yaml")


async def test_listing_lists_every_log(tmp_path):
    """listing.json names each log with its task, model, status and primary metric."""
    for name in ("first", "second"):
        task = ve.Task(
            sums(2),
            solver=ve.generate(ve.chat_mock()),
            scorer=ve.detect_includes(),
            dir=tmp_path,
            name=name,
        )
        await task.eval_async()
    listing = json.loads((tmp_path / "listing.json").read_text())
    assert len(listing) == 2
    entry = listing[task.log_path.name]
    assert entry["task"] == "second"
    assert entry["status"] == "success"
    assert entry["model"] == "mock/mock-model"
    assert entry["primary_metric"] == {"name": "accuracy", "value": 1.0, "params": {}}


async def test_model_and_score_events_are_logged(server, tmp_path):
    """Each model call is a model event (with its retries); the score is a score event."""
    server.fail("503", times=1)
    chat = ve.chat_openai("gpt-test", base_url=server.base_url(), api_key="sk-test")
    task = ve.Task(
        sums(1),
        solver=ve.generate(chat),
        scorer=ve.model_graded_qa(scorer_chat=ve.chat_mock()),
        dir=tmp_path,
    )
    await task.eval_async(retry=ve.Retry(backoff=0.01))
    full = assert_inspect_reads(task.log_path, task)
    events = full.samples[0].events
    kinds = [e.event for e in events]
    assert kinds == ["model", "model", "score"]
    solver_call, judge_call = (e for e in events if e.event == "model")
    assert solver_call.model == "openai/gpt-test"
    assert solver_call.retries == 1
    assert [m.role for m in solver_call.input] == ["user"]
    assert solver_call.output.usage.output_tokens > 0
    assert judge_call.role == "grader"
    assert "[Submission]" in judge_call.input[0].text


#: provider -> (constructor, model, the request header that carries the key)
KEYED_PROVIDERS = {
    "openai": (ve.chat_openai, "gpt-test", "authorization"),
    "anthropic": (ve.chat_anthropic, "claude-test", "x-api-key"),
    "google": (ve.chat_google_gemini, "gemini-test", "x-goog-api-key"),
}


def _files_now(directory: Path) -> dict[Path, bytes]:
    """Every file under `directory` as it is now (a zip's members decompressed)."""
    files = {}
    for path in directory.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if path.suffix == ".eval":
                with zipfile.ZipFile(path) as zf:
                    data = b"".join(zf.read(name) for name in zf.namelist())
            files[path] = data
    return files


@pytest.mark.parametrize("provider", sorted(KEYED_PROVIDERS))
async def test_api_keys_never_reach_the_disk(server, tmp_path, monkeypatch, provider):
    """A run with a recognisable key, including failed requests, leaves it in no file: not
    in the journal while the run goes on, nor in the whole journal just before the final
    log is made from it, nor in the final log and listing."""
    make_chat, model, header = KEYED_PROVIDERS[provider]
    secret = f"VITALS-CANARY-{provider}-0123456789abcdef"
    server.fail("401", times=1)
    server.fail("503", times=1)
    chat = make_chat(model, base_url=server.base_url(provider), api_key=secret)
    snapshots: list[tuple[str, dict[Path, bytes]]] = []
    generate = ve.generate(chat)

    async def solver(input, sample):
        solution = await generate(input)
        snapshots.append((f"after sample {sample.id}'s model call", _files_now(tmp_path)))
        return solution

    compose_final = writer.compose_final

    def composing(journal, *args, **kwargs):
        snapshots.append(("the whole journal, before the final log", _files_now(tmp_path)))
        return compose_final(journal, *args, **kwargs)

    monkeypatch.setattr(writer, "compose_final", composing)
    task = ve.Task(
        sums(4), solver=solver, scorer=ve.model_graded_qa(scorer_chat=chat), dir=tmp_path
    )
    await task.eval_async(
        fail_on_error=False, log_format="eval", retry=ve.Retry(backoff=0.01), max_concurrency=1
    )
    snapshots.append(("after the run", _files_now(tmp_path)))

    sent = [{k.lower(): v for k, v in r.headers.items()} for r in server.log]
    assert sent
    assert all(h.get(header, "").endswith(secret) for h in sent), "the key was not sent"
    assert task.get_samples()["error"].drop_nulls().len() == 1, "the 401 failed one sample"
    running = [files for when, files in snapshots if when.startswith("after sample")]
    assert len(running) == 3
    assert all(any(p.suffix == ".journal" for p in files) for files in running)
    (whole,) = [files for when, files in snapshots if when.startswith("the whole journal")]
    (journal,) = [data for p, data in whole.items() if p.suffix == ".journal"]
    assert journal.count(b'"kind":"sample"') == 4
    assert b'"kind":"header"' in journal, "the final header is journaled too"
    left = {p.suffix for p in snapshots[-1][1]}
    assert {".eval", ".json"} <= left  # the log and listing.json
    assert ".journal" not in left
    for when, files in snapshots:
        for path, data in files.items():
            assert secret.encode() not in data, f"{path.name} holds the key ({when})"


async def test_resume_after_cancel_runs_only_what_did_not_finish(server, tmp_path):
    """A cancelled run's log resumes: finished samples are not sent again, the final log
    holds every sample once."""
    chat = ve.chat_openai("gpt-test", base_url=server.base_url(), api_key="sk-test")
    task = ve.Task(sums(10), solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    server.latency = 0.01
    async with task.stream_async(max_concurrency=2) as samples:
        seen = 0
        async for _ in samples:
            seen += 1
            if seen == 4:
                break
    first = assert_inspect_reads(task.log_path)
    assert first.status == "cancelled"
    finished = {s.id for s in first.samples if s.scores}
    server.reset()
    twin = ve.Task(sums(10), solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    await twin.eval_async(resume=task.log_path)
    assert server.requests == 10 - len(finished)
    final = assert_inspect_reads(twin.log_path, twin)
    assert final.status == "success"
    assert sorted(s.id for s in final.samples) == list(range(1, 11))
    assert twin.metrics == {"accuracy": 1.0}
    assert twin.get_cost()["requests"].to_list() == [10]


async def test_resume_over_a_damaged_line_keeps_every_record_after_it(server, tmp_path):
    """A journal with one damaged line in the middle resumes without cutting it there: the
    samples after it are kept, and only the damaged one is solved again."""
    chat = ve.chat_openai("gpt-test", base_url=server.base_url(), api_key="sk-test")
    task = ve.Task(sums(6), solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    await task.eval_async()
    logged = ve.read_log(task.log_path)
    started = msgspec.structs.replace(logged.header, status="started", results=msgspec.UNSET)
    lines = [encode_start(started, task.log_path.name)]
    lines += [encode_sample(sample) for sample in logged.samples]
    lines[3] = lines[3][:40] + b"\x00garbage\n"  # the third sample's line
    journal = task.log_path.with_suffix(".journal")
    journal.write_bytes(b"".join(lines))
    task.log_path.unlink()
    server.reset()
    twin = ve.Task(sums(6), solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    await twin.eval_async(resume=journal)
    assert server.requests == 1
    final = assert_inspect_reads(twin.log_path, twin)
    assert final.status == "success"
    assert sorted(s.id for s in final.samples) == list(range(1, 7))


async def test_resume_retries_errored_samples(server, tmp_path):
    """Samples that failed in the first run are run again on resume."""
    server.fail("400", times=2)
    chat = ve.chat_openai("gpt-test", base_url=server.base_url(), api_key="sk-test")
    task = ve.Task(sums(5), solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    with pytest.raises(ve.EvalFailedError):
        await task.eval_async(max_concurrency=1)
    server.reset()
    await task.eval_async(resume=task.log_path)
    assert server.requests == 2
    assert "error" not in task.get_samples().columns


async def test_resume_refuses_a_finished_log(tmp_path):
    """A log whose run finished successfully is not resumed."""
    task = ve.Task(
        sums(1), solver=ve.generate(ve.chat_mock()), scorer=ve.detect_includes(), dir=tmp_path
    )
    await task.eval_async()
    with pytest.raises(ve.ConfigError, match="finished successfully"):
        await task.eval_async(resume=task.log_path)


async def test_resume_without_a_journal_says_so(tmp_path):
    """resume=True with nothing to resume is a clear error."""
    task = ve.Task(
        sums(1), solver=ve.generate(ve.chat_mock()), scorer=ve.detect_includes(), dir=tmp_path
    )
    with pytest.raises(ve.ConfigError, match="Nothing to resume"):
        await task.eval_async(resume=True)


async def test_resume_refuses_another_tasks_log(tmp_path):
    """A log of another task cannot be resumed by this one."""
    other = ve.Task(
        sums(1),
        solver=ve.generate(ve.chat_mock()),
        scorer=ve.detect_includes(),
        dir=tmp_path,
        name="other",
    )
    await other.eval_async()
    task = ve.Task(
        sums(1),
        solver=ve.generate(ve.chat_mock()),
        scorer=ve.detect_includes(),
        dir=tmp_path,
        name="mine",
    )
    with pytest.raises(ve.ConfigError, match="it is a log of task 'other'"):
        await task.eval_async(resume=other.log_path)


KILLED_RUN = textwrap.dedent(
    """
    import sys
    import vitals_engine as ve

    base_url, log_dir = sys.argv[1], sys.argv[2]
    data = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(60)]
    chat = ve.chat_openai("gpt-test", base_url=base_url, api_key="sk-test")
    task = ve.Task(data, solver=ve.generate(chat), scorer=ve.detect_includes(), dir=log_dir,
                   name="killed")
    task.eval(max_concurrency=3)
    """
)


def test_kill_9_then_resume_sends_only_the_samples_in_flight(server, tmp_path):
    """A run killed with SIGKILL mid-way loses none of its finished samples (each reached
    the OS as it finished): the resumed run sends requests only for the samples that were
    in flight at the kill, and the final log has each sample exactly once. While the run
    lives, its journal is locked: a resume from another process is refused and told the
    pid; once the run is dead the lock is gone with it."""
    server.latency = 0.01
    answered = itertools.count(1)

    def hang_from_the_58th(_request):
        # The last 3 requests (one per worker) never get an answer: 57 samples finished.
        if next(answered) == 58:
            server.fail("hang", times=None)

    server.script(hang_from_the_58th)
    script = tmp_path / "run.py"
    script.write_text(KILLED_RUN)
    logs = tmp_path / "logs"
    proc = subprocess.Popen(
        [sys.executable, str(script), server.base_url(), str(logs)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        wait_until(lambda: server.requests >= 60, "the run's last three requests")
        chat = ve.chat_openai("gpt-test", base_url=server.base_url(), api_key="sk-test")
        task = ve.Task(
            sums(60), solver=ve.generate(chat), scorer=ve.detect_includes(), dir=logs, name="killed"
        )
        with pytest.raises(ve.JournalInUseError, match=f"process {proc.pid} "):
            task.eval(resume=True)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    (journal,) = logs.glob("*.journal")
    assert ve.read_log(journal).status == "started"

    server.reset()
    server.latency = 0.0
    task.eval(resume=True)
    assert server.requests <= 3  # the samples in flight at the kill
    final = read_eval_log(str(task.log_path))
    assert sorted(s.id for s in final.samples) == list(range(1, 61))
    assert final.status == "success"
    assert not list(logs.glob("*.journal"))
    assert not list(logs.glob(".*.journal.lock"))


async def test_task_log_format_holds_for_solve_and_stream(tmp_path):
    """Task(log_format="eval") applies to solve()+log() and to stream_async(), not only eval()."""
    task = ve.Task(
        sums(2),
        solver=ve.generate(ve.chat_mock()),
        scorer=ve.detect_includes(),
        dir=tmp_path,
        log_format="eval",
    )
    await task.solve_async()
    await task.score_async()
    task.measure()
    assert task.log().suffix == ".eval"
    async with task.stream_async() as samples:
        async for _ in samples:
            pass
    assert task.log_path.suffix == ".eval"

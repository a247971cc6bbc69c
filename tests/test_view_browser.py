"""The log viewer in a real browser: Playwright driving Debian's chromium.

Screenshots of each page land in `$TMPDIR/vitals-engine-test-artifacts/` for people to look at.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import anyio
import pytest
from msgspec.json import encode

import vitals_engine as ve
from tests.helpers import evaluating
from vitals_engine.log import schema as s
from vitals_engine.log.atomic import replace_atomically
from vitals_engine.log.journal_format import (
    encode_batch,
    encode_header,
    encode_sample,
    encode_start,
)
from vitals_engine.log.live import LiveDocument, LiveSample, live_path
from vitals_engine.log.transcript import live_events
from vitals_engine.log.writer import write_json_log
from vitals_engine.providers.mock import mock_reply
from vitals_engine.viewer.bundle import bundle
from vitals_engine.viewer.launch import view
from vitals_engine.viewer.server import ViewServer
from vitals_engine.vocab.batch_records import BatchRecord
from vitals_engine.vocab.transcript import SandboxRecord, SpanBegin, ToolRecord

from test_view import (  # isort: skip
    VITALS_ADDITION,
    copy_fixtures,
    synthetic_header,
    synthetic_sample,
    write_synthetic_log,
)

playwright_sync = pytest.importorskip("playwright.sync_api")
expect = playwright_sync.expect
expect.set_options(timeout=15_000)  # generous for a loaded CI machine; passing waits are short

ARTIFACTS = Path(tempfile.gettempdir()) / "vitals-engine-test-artifacts"
DASH = "\u2013"  # the en dash of the pager's "Rows 1-100"


@pytest.fixture(scope="module")
def fixture_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_fixtures(tmp_path_factory.mktemp("fixtures") / "logs", "vitals", "inspect")


@pytest.fixture(scope="module")
def viewer(fixture_logs: Path) -> Iterator[ViewServer]:
    server = view(fixture_logs, block=False)
    yield server
    server.stop()


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"view-{name}.png"), full_page=True)


def log_url(server_url: str, file: str, *rest: str) -> str:
    return f"{server_url}/#/log/" + "/".join([quote(file, safe=""), *rest])


# -- pages ---------------------------------------------------------------------------------


def test_list_shows_every_log_and_sorts_by_header(page, viewer: ViewServer) -> None:
    """The list shows the fixtures' tasks, models, statuses and metrics; a header click
    sorts."""
    page.goto(viewer.url)
    rows = page.locator("#logs-table tbody tr.log-row")
    expect(rows).to_have_count(10)
    table = page.locator("#logs-table")
    for text in ["simple-addition", "An-R-Eval", "tiny", "oai_demo", "retry_demo"]:
        expect(table).to_contain_text(text)
    expect(table).to_contain_text("anthropic/claude-sonnet-4-5-20250929")
    expect(table).to_contain_text("accuracy 59.6")
    expect(table).to_contain_text("running")  # the .eval copied mid-run
    page.get_by_role("button", name="Task").click()
    expect(rows.first.locator(".task-link")).to_have_text("An-R-Eval")
    page.get_by_role("button", name="Task").click()
    expect(rows.first.locator(".task-link")).to_have_text("tiny")
    expect(page.locator("th[aria-sort=descending]")).to_contain_text("Task")
    shot(page, "list")
    assert page.problems == []


def test_log_page_shows_metrics_chart_cost_and_samples(page, viewer: ViewServer) -> None:
    """A log's page has its metrics, a score chart, the cost table and a searchable sample
    table."""
    page.goto(log_url(viewer.url, VITALS_ADDITION))
    expect(page.locator("#log-title")).to_have_text("simple-addition")
    expect(page.locator("#log-cards")).to_contain_text("accuracy")
    expect(page.locator("#log-cards .metric .value")).to_have_text("100")
    expect(page.locator("#score-chart svg rect.bar")).to_have_count(1)
    expect(page.locator("#score-chart rect.bar")).to_have_attribute("data-score", "C")
    expect(page.locator("#cost-table")).to_contain_text("solver")
    # Requests: none in the header; the page counts them over the samples, as get_cost() does
    expect(page.locator("#cost-table tbody tr").first.locator("td").nth(2)).to_have_text("2")
    rows = page.locator("#samples-table tbody tr.sample-row")
    expect(rows).to_have_count(2)
    expect(rows.first.locator(".score")).to_have_text("C")
    page.fill("#sample-search", "2+3")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("What's 2+3?")
    page.fill("#sample-search", "")
    expect(rows).to_have_count(2)
    shot(page, "log")
    assert page.problems == []


def test_sample_page_shows_conversation_and_the_judges_grade(page, viewer: ViewServer) -> None:
    """A sample shows the conversation, the judge's explanation, conversation and grade."""
    page.goto(log_url(viewer.url, VITALS_ADDITION))
    page.locator("#samples-table tbody tr.sample-row").first.click()
    expect(page.locator("#sample-title")).to_have_text("Sample 1 · epoch 1")
    messages = page.locator("#conversation .message")
    expect(messages).to_have_count(2)
    expect(messages.nth(0)).to_contain_text("What's 2+2?")
    expect(page.locator("#conversation .role-assistant")).to_contain_text("2+2 = 4")
    scores = page.locator("#scores")
    expect(scores.locator(".grade")).to_have_text("C")
    expect(scores.locator(".explanation")).to_contain_text("GRADE: C")
    expect(scores).to_contain_text("The judge's conversation")
    expect(scores.locator(".message.role-user")).to_contain_text("[Criterion]: 4")
    expect(page.locator("#usage")).to_contain_text("claude-sonnet-4-5-20250929")
    shot(page, "sample")
    page.locator("#sample-next").click()
    expect(page.locator("#sample-title")).to_have_text("Sample 2 · epoch 1")
    expect(page.locator("#conversation")).to_contain_text("What's 2+3?")
    assert page.problems == []


def test_errors_tracebacks_and_retries_are_shown(page, viewer: ViewServer) -> None:
    """Errored samples are flagged and filterable; a sample's traceback and its model retries
    show."""
    page.goto(log_url(viewer.url, "retry_original.eval"))
    rows = page.locator("#samples-table tbody tr.sample-row")
    expect(rows).to_have_count(4)
    page.select_option("#score-filter", label="Errors")
    expect(rows).to_have_count(2)
    rows.first.click()
    expect(page.locator("#sample-error")).to_contain_text("boom on 2")
    expect(page.locator("#sample-error .traceback")).to_contain_text("Traceback")
    shot(page, "sample-error")

    page.goto(log_url(viewer.url, "openai_compat_fake_server.eval", "sample", "1", "1"))
    expect(page.locator("#retries")).to_contain_text("2 retries")
    expect(page.locator("#retries")).to_contain_text("openai/my-local-model")
    assert page.problems == []


R_EVAL = "2025-04-29T14-36-27-05-00_An-R-Eval_e4763d5da8fe03a6cf4a90.json"


def test_partial_credit_filter_and_chart(page, viewer: ViewServer) -> None:
    """vitals' C/P/I grades get one bar each; filtering by a grade keeps only its samples."""
    page.goto(log_url(viewer.url, R_EVAL))
    expect(page.locator("#score-chart rect.bar")).to_have_count(3)
    rows = page.locator("#samples-table tbody tr.sample-row")
    expect(rows).to_have_count(26)
    page.select_option("#score-filter", label="P")
    expect(rows.locator(".score")).not_to_have_count(0)
    for text in rows.locator(".score").all_inner_texts():
        assert text == "P"
    assert page.problems == []


# -- safety ----------------------------------------------------------------------------------

HOSTILE = [
    "<img src=x onerror=\"window.__pwned='img'\">",
    "<script>window.__pwned='script'</script>",
    "<svg onload=\"window.__pwned='svg'\"></svg>",
    "javascript:window.__pwned='href'",
]
PIXEL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQ"
    "DwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def _hostile_log(directory: Path) -> Path:
    text = " ".join(HOSTILE)
    sample = synthetic_sample(1, text=text)
    sample.messages = [
        s.ChatMessageSystem(content=text),
        s.ChatMessageUser(
            content=[
                s.ContentText(text=text),
                s.ContentImage(image=PIXEL),
                s.ContentImage(image="http://example.invalid/tracker.png"),
                s.ContentImage(image="javascript:window.__pwned='image'"),
            ]
        ),
        s.ChatMessageAssistant(
            content=text,
            tool_calls=[s.ToolCall(id=text, function=text, arguments={text: text})],
        ),
        s.ChatMessageTool(content=text, function=text, tool_call_id=text),
    ]
    sample.scores = {
        text: s.LogScore(
            value=text,
            answer=text,
            explanation=text,
            metadata={"grading": [{"role": "user", "content": text}], text: text},
        )
    }
    sample.metadata = {text: text}
    sample.error = s.EvalError(message=text, traceback=text, traceback_ansi=text)
    header = synthetic_header(text, 1)
    log = s.EvalLog(
        version=2,
        status="error",
        eval=header.eval,
        results=header.results,
        stats=header.stats,
        error=s.EvalError(message=text, traceback=text, traceback_ansi=text),
        samples=[sample],
    )
    return write_json_log(directory / "2026-01-01T00-00-00+00-00_hostile_x.json", log)


def test_scripts_in_logs_never_run(page, tmp_path: Path) -> None:
    """Markup in a log (task, messages, scores, metadata, errors) is shown as text and never
    runs; only data: images load and nothing is fetched from elsewhere."""
    log = _hostile_log(tmp_path)
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    with ViewServer(tmp_path).start() as server:
        page.goto(server.url)
        expect(page.locator("#logs-table tbody tr.log-row")).to_have_count(1)
        expect(page.locator("#logs-table")).to_contain_text("<script>")
        page.locator("#logs-table .task-link").click()
        expect(page.locator("#samples-table tbody tr.sample-row")).to_have_count(1)
        expect(page.locator("#sample-count")).to_have_text("1 sample")
        expect(page.locator("#samples-table")).to_contain_text("<img src=x onerror=")
        page.locator("#samples-table tbody tr.sample-row").click()
        conversation = page.locator("#conversation")
        expect(conversation).to_contain_text("<script>window.__pwned='script'</script>")
        expect(conversation.locator("img")).to_have_count(1)
        expect(conversation.locator("img")).to_have_attribute("src", PIXEL)
        expect(page.locator("#sample-error")).to_contain_text("<svg onload=")
        expect(page.locator("#scores .explanation")).to_contain_text("<img src=x")
        shot(page, "hostile")
        assert page.evaluate("window.__pwned") is None
        assert page.locator("#app script, #app iframe, #app object").count() == 0
        assert all(url.startswith(server.url) for url in requests), requests
    assert log.exists()


# -- live ------------------------------------------------------------------------------------


def held_task(logs: Path, solver: Callable[[str], str], name: str, sums: int) -> ve.Task:
    """A task named `name`, writing to `logs`: `sums` questions ("What's 1+1?", ...), then
    "Hold on: what's 9+9?", the sample the test holds back."""
    dataset = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(1, sums + 1)]
    dataset.append({"input": "Hold on: what's 9+9?", "target": "18"})
    return ve.Task(dataset, solver=solver, scorer=ve.detect_includes(), name=name, dir=logs)


def test_live_run_appears_sample_by_sample(page, tmp_path: Path) -> None:
    """While an eval writes to the directory, its log and samples appear without a reload, and
    the page follows the journal to the final log."""
    logs = tmp_path / "live"
    logs.mkdir()
    gate = threading.Event()
    model = ve.chat_mock(latency=0.2)

    def solver(input: str) -> str:
        if input.startswith("Hold on"):
            gate.wait(timeout=60)  # the test lets this sample finish once the others show
        return model.clone().chat(input)

    task = held_task(logs, solver, "live-run", sums=4)
    with ViewServer(logs).start() as server:
        page.goto(server.url)
        expect(page.locator("#logs-table")).to_contain_text("No logs in this directory yet.")
        with evaluating(task, gate) as runner:
            entry = page.locator("#logs-table tbody tr.log-row")
            expect(entry).to_have_count(1)
            expect(entry).to_contain_text("live-run")
            expect(entry).to_contain_text("running")
            entry.click()
            samples = page.locator("#samples-table tbody tr.sample-row")
            expect(samples).to_have_count(4)  # the fifth is held back: these came while running
            expect(page.locator(".head .badge")).to_have_text("running")
            assert runner.is_alive()
            shot(page, "live-running")
        expect(samples).to_have_count(5)
        expect(page.locator(".head .badge")).to_have_text("success")
        expect(page).to_have_url(re.compile(r"live-run_[A-Za-z0-9]+\.json$"))
        expect(page.locator("#log-cards .metric .value")).to_have_text("1")
        shot(page, "live-done")
    assert page.problems == []


def test_live_text_of_a_running_sample_grows_then_it_shows_finished(page, tmp_path: Path) -> None:
    """Samples whose replies stream are listed while they run with their text so far; one that
    finishes gives way to its finished row while the run goes on; a running sample's page
    shows its text growing, then, once the sample is done, the finished sample."""
    logs = tmp_path / "live"
    logs.mkdir()
    two, more, done = threading.Event(), threading.Event(), threading.Event()

    async def held(prompt: str) -> AsyncIterator[str]:
        yield "Thinking about "
        yield "nine and nine"
        await anyio.to_thread.run_sync(more.wait, 60)  # the test says when more comes
        yield ", that makes"
        await anyio.to_thread.run_sync(done.wait, 60)
        yield " 9 + 9 = 18"

    async def held_two(prompt: str) -> AsyncIterator[str]:
        yield "Working on two"
        await anyio.to_thread.run_sync(two.wait, 60)
        yield " ... 2 + 2 = 4"

    def reply(prompt: str) -> object:
        if prompt.startswith("Hold on"):
            return held(prompt)
        return held_two(prompt) if "2+2" in prompt else mock_reply(prompt)

    model = ve.chat_mock(reply, stream=True)

    def solver(input: str) -> str:
        return model.clone().chat(input)

    task = held_task(logs, solver, "streaming", sums=2)
    with ViewServer(logs).start() as server:
        page.goto(server.url)
        with evaluating(task, two, more, done) as runner:
            entry = page.locator("#logs-table tbody tr.log-row")
            expect(entry).to_contain_text("running")
            entry.click()
            running = page.locator("#samples-table tbody tr.live-row")
            finished = page.locator("#samples-table tbody tr.sample-row")
            expect(running).to_have_count(2)
            expect(running.nth(0)).to_contain_text("What's 2+2?")
            expect(running.nth(0)).to_contain_text("Working on two")
            expect(running.nth(1)).to_contain_text("Hold on: what's 9+9?")
            expect(running.nth(1)).to_contain_text("Thinking about nine and nine")
            expect(running.nth(1)).to_contain_text("solving")
            expect(finished).to_have_count(1)
            expect(page.locator("#sample-count")).to_contain_text("2 running")
            shot(page, "live-text-table")
            two.set()  # sample 2 finishes: its finished row replaces its live one
            expect(finished).to_have_count(2)
            expect(finished.nth(1)).to_contain_text("2 + 2 = 4")
            expect(running).to_have_count(1)
            expect(running).to_contain_text("Hold on: what's 9+9?")
            expect(page.locator("#sample-count")).to_contain_text("1 running")

            running.click()
            text = page.locator("#live-text")
            expect(text).to_have_text("Thinking about nine and nine")
            expect(page.locator("#sample-title")).to_have_text("Sample 3 · epoch 1")
            expect(page.locator("#sample-running")).to_have_text("running")
            expect(page.locator("#live-sample .role-user")).to_contain_text("Hold on")
            more.set()
            expect(text).to_have_text("Thinking about nine and nine, that makes")
            shot(page, "live-text-sample")
            assert runner.is_alive()
        conversation = page.locator("#conversation .role-assistant")
        expect(conversation).to_have_text(
            re.compile("Thinking about nine and nine, that makes 9 \\+ 9 = 18$")
        )
        expect(page.locator("#scores .grade")).to_have_text("C")
        expect(page.locator("#live-text")).to_have_count(0)
        page.locator("#sample-title ~ .meta a").click()
        expect(page.locator("#samples-table tbody tr.sample-row")).to_have_count(3)
        expect(page.locator("#samples-table tbody tr.live-row")).to_have_count(0)
        expect(page.locator(".head .badge")).to_have_text("success")
    assert page.problems == []


def test_live_rows_give_way_to_finished_rows(page, tmp_path: Path) -> None:
    """Step by step: a live text that leaves the sidecar shows as finishing until its row comes;
    a row that finished after a live text hides it even while the sidecar still has it; once
    the run is over no live text shows."""
    journal = tmp_path / "2026-01-01T00-00-00+00-00_journaled_x.journal"
    header = synthetic_header("journaled", 3, status="started")
    header.results = None
    journal.write_bytes(encode_start(header, journal.with_suffix(".json").name))

    def sidecar(*ids: int) -> None:
        texts = [(i, f"Streaming answer {i}") for i in ids]
        document = LiveDocument(
            log=journal.with_suffix(".json").name,
            samples=[
                LiveSample(id=i, epoch=1, role="solver", input=f"Q{i}", text=t, updated=100.0 + i)
                for i, t in texts
            ],
        )
        replace_atomically(live_path(journal), lambda fh: fh.write(encode(document)), ".live")

    def finish(i: int) -> None:
        sample = synthetic_sample(i)
        sample.completed_at = "1970-01-01T00:02:00+00:00"  # 120 s: after every live text
        with journal.open("ab") as fh:
            fh.write(encode_sample(sample))

    sidecar(1, 2, 3)
    with ViewServer(tmp_path).start() as server:
        page.goto(log_url(server.url, journal.name))
        running = page.locator("#samples-table tbody tr.live-row")
        finished = page.locator("#samples-table tbody tr.sample-row")
        expect(running).to_have_count(3)
        expect(running.nth(1)).to_contain_text("Streaming answer 2")

        sidecar(1, 3)  # sample 2 finished; the journal does not have it yet
        expect(running.nth(1).locator(".badge")).to_have_text("finishing")
        expect(running.nth(1)).to_contain_text("Streaming answer 2")
        expect(running).to_have_count(3)

        finish(2)
        expect(finished).to_have_count(1)
        expect(running).to_have_count(2)
        expect(running.nth(1)).to_contain_text("Streaming answer 3")

        finish(1)  # the sidecar still lists sample 1: its row is newer
        expect(finished).to_have_count(2)
        expect(running).to_have_count(1)
        expect(running).to_contain_text("Streaming answer 3")

        with journal.open("ab") as fh:  # the run ends (its sidecar not yet removed)
            fh.write(encode_header(synthetic_header("journaled", 3, status="cancelled")))
        expect(page.locator(".head .badge")).to_have_text("cancelled")
        expect(running).to_have_count(0)
    assert page.problems == []


def test_a_running_agents_page_shows_its_transcript_as_it_grows(page, tmp_path: Path) -> None:
    """An agent in flight: its page shows the transcript the sidecar holds (its span, tool
    call and sandbox action), and the next tool call once the sidecar has it."""
    journal = tmp_path / "2026-01-01T00-00-00+00-00_agent_x.journal"
    header = synthetic_header("agent", 1, status="started")
    header.results = None
    journal.write_bytes(encode_start(header, journal.with_suffix(".json").name))
    steps = [
        SpanBegin(id="s1", name="solvers", at=100.0, type="solvers"),
        SandboxRecord(
            action="exec",
            started=101.0,
            completed=101.1,
            cmd="ls notes",
            result=0,
            output="flag.txt",
            span="s1",
        ),
        ToolRecord(
            call_id="call_1",
            function="bash",
            arguments={"cmd": "ls notes"},
            result="flag.txt",
            started=101.0,
            completed=101.2,
            span="s1",
        ),
    ]

    def sidecar(records: list) -> None:
        document = LiveDocument(
            log=journal.with_suffix(".json").name,
            samples=[
                LiveSample(
                    id=1,
                    epoch=1,
                    role="solver",
                    input="Find the flag",
                    text="",
                    updated=100.0 + len(records),
                    events=live_events(records),
                )
            ],
        )
        replace_atomically(live_path(journal), lambda fh: fh.write(encode(document)), ".live")

    sidecar(steps)
    with ViewServer(tmp_path).start() as server:
        page.goto(log_url(server.url, journal.name, "sample", "1", "1"))
        panel = page.locator("#live-transcript #transcript")
        expect(page.locator("#sample-running")).to_have_text("running")
        expect(panel.locator(".event-tool .fn")).to_have_text("bash")
        expect(panel.locator(".sandbox-what")).to_have_text("ls notes")
        sidecar(
            [
                *steps,
                ToolRecord(
                    call_id="call_2",
                    function="bash",
                    arguments={"cmd": "cat notes/flag.txt"},
                    result="flag{x}",
                    started=103.0,
                    completed=103.2,
                    span="s1",
                ),
            ]
        )
        expect(panel.locator(".event-tool")).to_have_count(2)
        expect(panel.locator(".event-tool").nth(1)).to_contain_text("flag{x}")
        shot(page, "live-agent-sample")
    assert page.problems == []


def test_a_running_journals_batches_show_pending_then_ended(page, tmp_path: Path) -> None:
    """Step by step: a log without batches shows no Batches panel; once the journal records
    a submitted batch the panel lists it pending; once it records its end, it is listed
    ended, after the one still pending."""
    journal = tmp_path / "2026-01-01T00-00-00+00-00_batched_x.journal"
    header = synthetic_header("batched", 3, status="started")
    header.results = None
    journal.write_bytes(encode_start(header, journal.with_suffix(".json").name))

    def record(*records: BatchRecord) -> None:
        with journal.open("ab") as fh:
            for batch in records:
                fh.write(encode_batch(batch))

    def created(key: str) -> BatchRecord:
        return BatchRecord(
            key=key, provider="OpenAI", model="gpt-test", requests=2, created=1767225600.0
        )

    with ViewServer(tmp_path).start() as server:
        page.goto(log_url(server.url, journal.name))
        with journal.open("ab") as fh:
            fh.write(encode_sample(synthetic_sample(1)))
        expect(page.locator("#samples-table tbody tr.sample-row")).to_have_count(1)
        panel = page.locator("#batches")
        expect(panel).to_be_hidden()

        record(created("vb-1"), BatchRecord(key="vb-1", id="batch_one", submitted=1767225601.0))
        rows = panel.locator("tr.batch-row")
        expect(panel).to_be_visible()
        expect(rows).to_have_count(1)
        expect(rows.first).to_have_attribute("data-state", "pending")
        expect(rows.first).to_contain_text("OpenAI / gpt-test")
        expect(rows.first).to_contain_text("batch_one")
        expect(rows.first.locator(".batch-status")).to_have_text("pending")
        expect(page.locator("#batch-count")).to_have_text("1 pending · 0 ended")

        record(created("vb-2"), BatchRecord(key="vb-2", id="batch_two", submitted=1767225602.0))
        expect(rows).to_have_count(2)
        expect(page.locator("#batch-count")).to_have_text("2 pending · 0 ended")
        record(
            BatchRecord(key="vb-1", ended=1767225700.0, status="completed", counts={"completed": 2})
        )
        expect(page.locator("#batch-count")).to_have_text("1 pending · 1 ended")
        expect(rows.nth(0)).to_have_attribute("data-key", "vb-2")  # the pending one first
        expect(rows.nth(1)).to_have_attribute("data-state", "ended")
        expect(rows.nth(1).locator(".batch-status")).to_have_text("completed")
        expect(rows.nth(1)).to_contain_text("completed 2")
        shot(page, "batches")
    assert page.problems == []


def test_a_run_in_batch_mode_shows_its_batch_until_it_ends(page, server, tmp_path: Path) -> None:
    """A run in batch mode against the mock server: its page lists its batch pending while
    the run waits on it, then, once the batch ended and the page followed the run to its
    final log, ended."""
    server.batch_delay = 3600  # out until the test ends it
    logs = tmp_path / "logs"
    logs.mkdir()
    chat = ve.chat_openai("gpt-test", base_url=server.base_url("openai"), api_key="k")
    data = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(1, 4)]
    task = ve.Task(data, solver=ve.generate(chat), scorer=ve.detect_includes(), dir=logs)
    failures: list[BaseException] = []

    def run() -> None:
        try:
            task.eval(batch=ve.Batch(size=10, wait=0.05, poll=0.02), progress=False)
        except BaseException as exc:
            failures.append(exc)

    runner = threading.Thread(target=run)
    with ViewServer(logs).start() as viewer:
        page.goto(viewer.url)
        runner.start()
        try:
            entry = page.locator("#logs-table tbody tr.log-row")
            expect(entry).to_contain_text("running")
            entry.click()
            rows = page.locator("#batches tr.batch-row")
            expect(rows).to_have_count(1)
            expect(rows.first).to_have_attribute("data-state", "pending")
            expect(rows.first).to_contain_text("OpenAI / gpt-test")
            expect(page.locator("#batch-count")).to_have_text("1 pending · 0 ended")
            assert runner.is_alive()
        finally:
            server.end_batches()
            runner.join(timeout=60)
        assert failures == []
        expect(page).to_have_url(re.compile(r"\.json$"))
        expect(page.locator(".head .badge")).to_have_text("success")
        expect(rows.first).to_have_attribute("data-state", "ended")
        expect(page.locator("#batch-count")).to_have_text("0 pending · 1 ended")
        expect(page.locator("#samples-table tbody tr.sample-row")).to_have_count(3)
    assert page.problems == []


# -- the cache -------------------------------------------------------------------------------


def test_cached_calls_are_marked_with_where_their_replies_came_from(
    page, server, tmp_path: Path
) -> None:
    """A run half answered by the cache: its cost table has a cached row per role beside the
    live one; a cached sample's replies carry a "cached" badge naming the task, sample and
    epoch they first answered, linked to that sample; a sample whose calls went out has
    none."""
    logs = tmp_path / "logs"
    cache = ve.Cache(dir=tmp_path / "cache")

    def task(n: int) -> ve.Task:
        def chat() -> ve.Chat:
            return ve.chat_openai("gpt-test", base_url=server.base_url("openai"), api_key="k")

        data = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(1, n + 1)]
        return ve.Task(
            data, ve.generate(chat()), ve.model_graded_qa(scorer_chat=chat()), dir=logs, name="sums"
        )

    first = task(2).eval(cache=cache, progress=False)
    second = task(4).eval(cache=cache, progress=False)
    with ViewServer(logs).start() as viewer:
        page.goto(log_url(viewer.url, second.log_path.name))
        rows = page.locator("#cost-table tbody tr.cost-row")
        expect(rows).to_have_count(4)
        cached = page.locator("#cost-table tbody tr.cost-cached")
        expect(cached).to_have_count(2)
        for i, role in enumerate(["solver", "scorer"]):
            expect(cached.nth(i).locator("td").first).to_have_text(role)
            expect(cached.nth(i).locator(".badge.cached")).to_have_text("cached")
            expect(cached.nth(i).locator("td").nth(2)).to_have_text("2")  # requests
            expect(cached.nth(i).locator("td").last).to_have_text("$0")
        expect(page.locator('#cost-table tbody tr[data-cached="false"]')).to_have_count(2)
        shot(page, "log-cached")

        page.goto(log_url(viewer.url, second.log_path.name, "sample", "1", "1"))
        reply = page.locator("#conversation .message.from-cache")
        expect(reply).to_have_count(1)
        expect(reply.locator(".badge.cached")).to_have_text("cached")
        expect(reply).to_contain_text("from task sums · sample 1 · epoch 1")
        expect(page.locator("#scores .message.from-cache .badge.cached")).to_have_count(1)
        calls = page.locator("#model-calls tr.model-call")
        expect(calls).to_have_count(2)
        expect(page.locator('#model-calls tr[data-cache="read"] .badge.cached')).to_have_count(2)
        shot(page, "sample-cached")

        reply.get_by_role("link", name=first.log_path.name).click()  # where it came from
        expect(page.locator("#sample-title")).to_have_text("Sample 1 · epoch 1")
        expect(page).to_have_url(re.compile(re.escape(quote(first.log_path.name, safe=""))))
        expect(page.locator("#model-calls tr.model-call")).to_have_count(2)
        expect(page.locator(".badge.cached")).to_have_count(0)  # it was sent, then kept
        expect(page.locator('#model-calls tr[data-cache="write"]')).to_have_count(2)

        page.goto(log_url(viewer.url, second.log_path.name, "sample", "3", "1"))
        expect(page.locator("#sample-title")).to_have_text("Sample 3 · epoch 1")
        expect(page.locator("#model-calls tr.model-call")).to_have_count(2)
        expect(page.locator(".message.from-cache")).to_have_count(0)
    assert page.problems == []


# -- bundle ----------------------------------------------------------------------------------


@contextmanager
def static_site(directory: Path) -> Iterator[str]:
    """`python -m http.server` serving `directory` while in the block; its URL is yielded."""
    server = subprocess.Popen(
        [
            sys.executable,
            "-u",
            "-m",
            "http.server",
            "0",
            "--bind",
            "127.0.0.1",
            "-d",
            str(directory),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        banner = server.stdout.readline()  # "Serving HTTP on 127.0.0.1 port 40123 ..."
        match = re.search(r"port (\d+)", banner)
        assert match, banner
        yield f"http://127.0.0.1:{match[1]}"
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_bundle_works_from_a_static_web_server(page, fixture_logs: Path, tmp_path: Path) -> None:
    """A bundle served by `python -m http.server` lists the logs, opens a log and a sample."""
    out = bundle(fixture_logs, tmp_path / "site")
    with static_site(out) as url:
        page.goto(url + "/")
        expect(page.locator("#logs-table tbody tr.log-row")).to_have_count(10)
        expect(page.locator("#live")).to_be_hidden()
        page.get_by_role("link", name="simple-addition", exact=True).click()
        rows = page.locator("#samples-table tbody tr.sample-row")
        expect(rows).to_have_count(2)
        shot(page, "bundle-log")
        rows.first.click()
        expect(page.locator("#conversation")).to_contain_text("What's 2+2?")
        expect(page.locator("#scores .grade")).to_have_text("C")
        page.goto(log_url(url, "retry_original.eval", "sample", "2", "1"))
        expect(page.locator("#sample-error")).to_contain_text("boom on 2")
        shot(page, "bundle-sample")
    assert page.problems == []


# -- a large log -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_log(tmp_path_factory.mktemp("big"), 100_000, task="big").parent


def test_100k_samples_render_one_page_at_a_time(page, big_logs: Path) -> None:
    """A 100,000-sample log renders a page of 100 rows; paging, grade filter and search work."""
    with ViewServer(big_logs).start() as server:
        page.goto(server.url)
        page.locator("#logs-table .task-link").click()
        rows = page.locator("#samples-table tbody tr")
        info = page.locator("#page-info")
        expect(info).to_have_text(f"Rows 1{DASH}100 of 100,000", timeout=60_000)
        expect(rows).to_have_count(100)
        page.locator("#page-next").click()
        expect(info).to_have_text(f"Rows 101{DASH}200 of 100,000")
        expect(rows.first).to_contain_text("Question 101:")
        page.select_option("#score-filter", label="I")
        expect(info).to_have_text(f"Rows 1{DASH}100 of 33,333")
        expect(rows).to_have_count(100)
        page.fill("#sample-search", "Question 99999:")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text("99999")
        page.get_by_role("button", name="Tokens").click()
        expect(rows).to_have_count(1)
        shot(page, "big-log")
    assert page.problems == []


def test_log_written_by_us_opens_in_the_browser(page, tmp_path: Path) -> None:
    """A log our engine wrote (system prompt, judge via model_graded_qa) shows in full."""
    task = ve.Task(
        [{"input": "What's 2+2?", "target": "4"}],
        solver=ve.generate(ve.chat_mock(system_prompt="You are a calculator.")),
        scorer=ve.model_graded_qa(scorer_chat=ve.chat_mock()),
        name="ours",
        dir=tmp_path,
    )
    task.eval()
    with ViewServer(tmp_path).start() as server:
        page.goto(log_url(server.url, task.log_path.name, "sample", "1", "1"))
        expect(page.locator("#conversation .role-system")).to_contain_text("You are a calculator.")
        expect(page.locator("#conversation .role-assistant")).to_contain_text("2 + 2 = 4")
        expect(page.locator("#scores .grade")).to_have_text("C")
        expect(page.locator("#usage")).to_contain_text("scorer")
    assert page.problems == []


def test_a_log_page_shows_each_metrics_stderr_and_interval(page, tmp_path: Path) -> None:
    """Beside accuracy: ± its standard error, the 95% interval and how many samples; the
    `.value` itself stays the metric."""
    data = [
        {"input": f"What's {i}+{i}?", "target": str(2 * i if right else 2 * i + 100)}
        for i, right in enumerate([1, 1, 0, 1, 0, 1, 1, 1, 0, 1], start=1)
    ]
    task = ve.Task(data, ve.generate(ve.chat_mock()), ve.detect_includes(), dir=tmp_path)
    task.eval()
    with ViewServer(tmp_path).start() as server:
        page.goto(log_url(server.url, task.log_path.name))
        card = page.locator("#log-cards .metric")
        expect(card.locator(".label")).to_have_text("accuracy")
        expect(card.locator(".value")).to_have_text("0.7")
        expect(card.locator(".stat .stderr")).to_have_text("± 0.153")
        expect(card.locator(".stat .interval")).to_have_text(f"95% CI 0.354{DASH}1 · 10 samples")
        shot(page, "log-metric-stats")
    assert page.problems == []


def test_a_log_clustered_by_a_column_says_so_beside_its_metric(page, tmp_path: Path) -> None:
    """Task(cluster="topic"): the interval's note counts the scores and the clusters, and
    names the column they are of."""
    data = [
        {"input": f"What's {i}+{i}?", "target": str(2 * i), "topic": "ab"[i % 2]}
        for i in range(1, 7)
    ]
    task = ve.Task(
        data, ve.generate(ve.chat_mock()), ve.detect_includes(), dir=tmp_path, cluster="topic"
    )
    task.eval(epochs=2)
    with ViewServer(tmp_path).start() as server:
        page.goto(log_url(server.url, task.log_path.name))
        card = page.locator("#log-cards .metric")
        expect(card.locator(".stat .interval")).to_contain_text("12 scores in 2 clusters by topic")
    assert page.problems == []


def test_the_cost_table_shows_prompt_cache_writes_when_a_run_made_some(
    page, server, tmp_path: Path
) -> None:
    """A run whose calls wrote Anthropic's prompt cache: the log page's cost table has a
    "Cache write" column with the tokens written, beside the cached (read) input."""
    server.min_cacheable_tokens = 1000
    rubric = "Grade the answer against the rubric, point by point. " * 400
    chat = ve.chat_anthropic(
        "claude-sonnet-4-5",
        base_url=server.base_url("anthropic"),
        api_key="k",
        system_prompt=rubric,
    )
    data = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in (1, 2)]
    done = ve.Task(data, ve.generate(chat), ve.detect_includes(), dir=tmp_path).eval(
        max_concurrency=1, progress=False
    )
    with ViewServer(tmp_path).start() as viewer:
        page.goto(log_url(viewer.url, done.log_path.name))
        heads = page.locator("#cost-table thead th")
        expect(heads.nth(5)).to_have_text("Cache write")
        cells = page.locator("#cost-table tbody tr.cost-row").first.locator("td")
        expect(cells.nth(4)).to_have_text(f"{len(rubric.split()):,}")  # read once
        expect(cells.nth(5)).to_have_text(f"{len(rubric.split()):,}")  # written once
    assert page.problems == []


def test_a_task_of_several_scorers_shows_each_ones_metrics_and_scores(page, tmp_path: Path) -> None:
    """Each scorer's metric card is named by its scorer; each sample row shows every
    scorer's score (the others' named in their title); the sample page grades by each."""
    data = [{"input": "What's 2+2?", "target": "4"}, {"input": "Say hi", "target": "hello"}]
    scorers = {"includes": ve.detect_includes(), "exact": ve.detect_exact()}
    task = ve.Task(data, ve.generate(ve.chat_mock()), scorers, dir=tmp_path)
    task.eval()
    with ViewServer(tmp_path).start() as server:
        page.goto(log_url(server.url, task.log_path.name))
        labels = page.locator("#log-cards .metric .label")
        expect(labels).to_have_text(["includes · accuracy", "exact · accuracy"])
        first = page.locator("tr.sample-row").first
        expect(first.locator(".more-score")).to_have_attribute("title", "exact")
        expect(first.locator(".score")).to_have_count(2)
        page.goto(log_url(server.url, task.log_path.name, "sample", "1", "1"))
        expect(page.locator("#scores h3", has_text="includes")).to_have_count(1)
        expect(page.locator("#scores h3", has_text="exact")).to_have_count(1)
    assert page.problems == []


def test_a_mean_corrected_by_human_grades_has_its_card(page, tmp_path: Path) -> None:
    """Beside the judge's accuracy, the mean corrected by the human grades, with its
    interval and how many human grades made it."""
    judged = ["C"] * 8
    graded = ["C", "I", "C", "I", None, None, None, None]
    data = [
        {"input": f"q{i}", "target": "x", "judge": j, "grade": g}
        for i, (j, g) in enumerate(zip(judged, graded, strict=True))
    ]
    task = ve.Task(data, lambda x: "x", lambda s: s.metadata["judge"], dir=tmp_path, human="grade")
    task.eval()
    with ViewServer(tmp_path).start() as server:
        page.goto(log_url(server.url, task.log_path.name))
        card = page.locator("#log-cards .metric.corrected")
        expect(card.locator(".label")).to_have_text("corrected by 4 human grades")
        expect(card.locator(".value")).to_have_text("0.5")
        expect(card.locator(".stat .interval")).to_contain_text("8 samples")
    assert page.problems == []

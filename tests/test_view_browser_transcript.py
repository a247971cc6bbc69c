"""A sample's transcript in the viewer, in a real browser: its spans nested, tool calls
with their arguments, results and errors, sandbox actions, the limit it hit; markup in any
of them shown as text. Screenshots land in `$TMPDIR/vitals-engine-test-artifacts/`."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from tests.transcripts import agent_record, agent_task, record_transcripts
from vitals_engine.log.compose import compose_sample
from vitals_engine.log.writer import write_json_log
from vitals_engine.viewer.server import ViewServer

from test_view import copy_fixtures, synthetic_header, synthetic_sample  # isort: skip
from test_view_browser import HOSTILE, log_url, shot  # isort: skip

playwright_sync = pytest.importorskip("playwright.sync_api")
expect = playwright_sync.expect


def test_a_samples_transcript_shows_its_spans_tool_calls_and_limit(
    page, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A logged agent's sample shows its solver span holding the tool span, the tool call
    (function, arguments, result) and its sandbox command inside, and the limit it hit;
    a sample of a plain run has no transcript panel."""
    records = record_transcripts(monkeypatch)
    task = agent_task(records, tmp_path, "Use add on 2 and 2 until the limit")
    task.eval(progress=False)
    with ViewServer(tmp_path).start() as server:
        page.goto(log_url(server.url, task.log_path.name, "sample", "1", "1"))
        transcript = page.locator("#transcript")
        solver = transcript.locator('details.span[data-type="solver"]')
        expect(solver).to_have_count(1)
        expect(solver.locator("> summary")).to_contain_text("react")
        tool_span = solver.locator('details.span[data-type="tool"]')
        expect(tool_span).to_have_count(1)
        tool = tool_span.locator(".event-tool")
        expect(tool.locator(".fn")).to_have_text("add")
        expect(tool.locator(".tool-arguments")).to_contain_text('"a": 2')
        expect(tool.locator(".tool-result")).to_contain_text("4")
        expect(tool_span.locator(".event-sandbox")).to_contain_text("expr 2 + 2")
        expect(solver.locator(".event-model")).to_have_count(2)
        expect(solver.locator(".event-limit")).to_contain_text("Limit hit: message (4)")
        expect(page.locator("#sample-limit")).to_have_text("message")
        expect(transcript.locator('details.span[data-type="init"]')).not_to_have_attribute(
            "open", ""
        )
        shot(page, "sample-transcript")
    assert page.problems == []


def test_inspects_agent_log_shows_its_tool_calls_in_their_spans(page, tmp_path: Path) -> None:
    """A log Inspect wrote of an agent in its sandbox: each tool call shows inside the tool
    span it opened (Inspect writes it beside it), with its sandbox actions; a tool error
    says its type."""
    logs = copy_fixtures(tmp_path / "logs", "inspect-agent")
    (log,) = logs.glob("*.json")
    with ViewServer(logs).start() as server:
        page.goto(log_url(server.url, log.name, "sample", "1", "1"))
        tool_spans = page.locator('#transcript details.span[data-type="tool"]')
        expect(tool_spans).to_have_count(3)
        expect(tool_spans.nth(1).locator(".event-tool .fn")).to_have_text("write_note")
        expect(tool_spans.nth(1).locator(".event-sandbox .badge")).to_have_text(
            ["write_file", "read_file"]
        )
        expect(page.locator("#transcript .event-limit")).to_contain_text("message (7)")
        page.goto(log_url(server.url, log.name, "sample", "2", "1"))
        expect(page.locator("#transcript .event-tool .tool-error")).to_contain_text(
            "Error (parsing)"
        )
        shot(page, "sample-transcript-inspect")
    assert page.problems == []


@pytest.mark.no_inspect_check  # markup where Inspect wants its own names: not a log we write
def test_markup_in_a_transcript_never_runs(page, tmp_path: Path) -> None:
    """Markup in span names, tool arguments, results, errors, sandbox commands and output,
    limits and errors is shown as text and never runs."""
    text = " ".join(HOSTILE)
    at = "2026-01-01T00:00:00+00:00"
    events = [
        {"event": "span_begin", "id": text, "name": text, "type": "tool", "timestamp": at},
        {
            "event": "tool",
            "span_id": text,
            "id": text,
            "function": text,
            "arguments": {text: text},
            "result": text,
            "error": {"type": text, "message": text},
            "timestamp": at,
        },
        {
            "event": "sandbox",
            "span_id": text,
            "action": text,
            "cmd": text,
            "input": text,
            "output": text,
            "result": 1,
            "timestamp": at,
        },
        {"event": "span_end", "id": text, "timestamp": at},
        {"event": "sample_limit", "type": text, "message": text, "limit": 1, "timestamp": at},
        {"event": "error", "error": {"message": text, "traceback": text}, "timestamp": at},
        {"event": "info", "data": text, "timestamp": at},
    ]
    sample = synthetic_sample(1, text="hostile")
    sample.events = msgspec.Raw(msgspec.json.encode(events))
    header = synthetic_header("hostile", 1)
    path = tmp_path / "2026-01-01T00-00-00+00-00_hostile_x.json"
    write_json_log(path, msgspec.structs.replace(header, samples=[sample]))
    with ViewServer(tmp_path).start() as server:
        page.goto(log_url(server.url, path.name, "sample", "1", "1"))
        transcript = page.locator("#transcript")
        expect(transcript.locator(".event-tool .fn")).to_have_text(text)
        expect(transcript.locator(".event-sandbox")).to_contain_text("<svg onload=")
        expect(transcript.locator(".event-limit")).to_contain_text("<script>")
        transcript.locator("details.event-other > summary").click()
        expect(transcript.locator("details.event-other")).to_contain_text("<img src=x")
        shot(page, "sample-transcript-hostile")
        assert page.evaluate("window.__pwned") is None
        assert page.locator("#app script, #app iframe, #app object, #app svg[onload]").count() == 0
    assert page.problems == []


def test_ten_thousand_events_draw_a_page_at_a_time(page, tmp_path: Path) -> None:
    """A sample of 10,000 transcript records draws its first 200 tool spans, and 200 more
    at each click."""
    sample = compose_sample(agent_record(10_000), "includes")
    header = synthetic_header("agent", 1)
    path = tmp_path / "2026-01-01T00-00-00+00-00_agent_x.json"
    write_json_log(path, msgspec.structs.replace(header, samples=[sample]))
    with ViewServer(tmp_path).start() as server:
        page.goto(log_url(server.url, path.name, "sample", "1", "1"))
        tools = page.locator('#transcript details.span[data-type="tool"]')
        expect(tools).to_have_count(200)
        more = page.locator("#transcript .show-more")
        expect(more).to_have_text("Show 200 more of 2,300")
        more.click()
        expect(tools).to_have_count(400)
        expect(tools.nth(399).locator(".event-tool .fn")).to_have_text("bash")
    assert page.problems == []

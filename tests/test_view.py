"""The log viewer's server, data API, journal following and bundle, over HTTP (no browser)."""

from __future__ import annotations

import asyncio
import importlib
import json
import shutil
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import msgspec
import pytest

import vitals_engine as ve
from vitals_engine.log import schema as s
from vitals_engine.log.journal_format import encode_header, encode_sample, encode_start
from vitals_engine.log.live import LiveDocument, LiveSample, live_path
from vitals_engine.log.writer import write_json_log
from vitals_engine.viewer import sources as sources_module
from vitals_engine.viewer.api import LogRoute, parse_log_route
from vitals_engine.viewer.bundle import bundle
from vitals_engine.viewer.catalog import Catalog
from vitals_engine.viewer.contents import JournalTail, counter
from vitals_engine.viewer.launch import view
from vitals_engine.viewer.paths import LogFile, parse_sample_key, resolve_inside, sample_key
from vitals_engine.viewer.server import ViewServer

FIXTURES = Path(__file__).resolve().parent / "fixtures"
VITALS_ADDITION = "2026-01-14T16-19-11-06-00_simple-addition_add3e3e94f8e2faf092a58.json"


# -- helpers shared with the browser tests -------------------------------------------------


def copy_fixtures(target: Path, *groups: str) -> Path:
    """Copy fixture folders into `target` (writable: the originals are read-only)."""
    target.mkdir(parents=True, exist_ok=True)
    for group in groups:
        for source in (FIXTURES / group).iterdir():
            if source.is_file() and source.suffix in (".json", ".eval"):
                dest = target / source.name
                shutil.copyfile(source, dest)
                dest.chmod(dest.stat().st_mode | stat.S_IWUSR)
    return target


def synthetic_header(task: str, n: int, status: s.Status = "success") -> s.EvalLog:
    """A log header of `n` samples scored by a grade scorer."""
    return s.EvalLog(
        version=2,
        status=status,
        eval=s.EvalSpec(
            created="2026-01-01T00:00:00+00:00",
            task=task,
            dataset=s.EvalDataset(name=task, samples=n),
            model="mock/mock-model",
            config=s.EvalConfig(epochs=1),
            packages={"vitals_engine": "0.1.0"},
        ),
        results=s.EvalResults(
            total_samples=n,
            completed_samples=n,
            scores=[
                s.EvalScore(
                    name="includes",
                    scorer="includes",
                    metrics={"accuracy": s.EvalMetric(name="accuracy", value=2 / 3)},
                )
            ],
        ),
        stats=s.EvalStats(
            started_at="2026-01-01T00:00:00+00:00",
            completed_at="2026-01-01T00:01:00+00:00",
            role_usage={"solver": s.ModelUsage(input_tokens=10 * n, output_tokens=5 * n)},
        ),
    )


def synthetic_sample(i: int | str, text: str | None = None) -> s.EvalSample:
    """One sample: a question, an answer (wrong for every third), its grade and usage."""
    n = i if isinstance(i, int) else 7
    question = text if text is not None else f"Question {i}: what is {n}+1?"
    answer = f"{n}+1 = {n + 1 if n % 3 else n}"
    return s.EvalSample(
        id=i,
        epoch=1,
        input=question,
        target=str(n + 1),
        messages=[s.ChatMessageUser(content=question), s.ChatMessageAssistant(content=answer)],
        output=s.ModelOutput(model="mock/mock-model", completion=answer),
        scores={"includes": s.LogScore(value="C" if n % 3 else "I", answer=answer)},
        model_usage={"mock/mock-model": s.ModelUsage(input_tokens=10, output_tokens=5)},
        total_time=0.25,
    )


def write_synthetic_log(directory: Path, n: int, task: str = "synthetic") -> Path:
    """A `.json` log of `n` samples written with the log writer."""
    header = synthetic_header(task, n)
    log = s.EvalLog(
        version=header.version,
        status=header.status,
        eval=header.eval,
        results=header.results,
        stats=header.stats,
        samples=[synthetic_sample(i) for i in range(1, n + 1)],
    )
    path = directory / f"2026-01-01T00-00-00+00-00_{task}_{n}.json"
    directory.mkdir(parents=True, exist_ok=True)
    return write_json_log(path, log)


def api_path(file: str, *rest: str) -> str:
    """The URL path of a log's API document, each segment encoded as the page does."""
    return "/api/logs/" + "/".join(quote(part, safe="") for part in [*file.split("/"), *rest])


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture
def fixture_dir(tmp_path: Path) -> Path:
    return copy_fixtures(tmp_path / "logs", "vitals", "inspect")


@pytest.fixture
def server(fixture_dir: Path) -> Iterator[ViewServer]:
    with ViewServer(fixture_dir).start() as running:
        yield running


@pytest.fixture
def client(server: ViewServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        yield http


# -- the data API -----------------------------------------------------------------------------


def test_logs_endpoint_lists_every_log_with_its_overview(client: httpx.Client) -> None:
    """`api/logs.json` has one entry per log (vitals', Inspect's .json and .eval), manifests and
    non-log JSON left out."""
    document = client.get("/api/logs.json").json()
    by_file = {entry["file"]: entry for entry in document["logs"]}
    assert document["live"] is True
    assert "listing.json" not in by_file
    assert "logs.json" not in by_file
    assert "eval-log-schema.json" not in by_file
    assert document["errors"] == []
    entry = by_file[VITALS_ADDITION]
    assert entry["task"] == "simple-addition"
    assert entry["model"] == "anthropic/claude-sonnet-4-5-20250929"
    assert entry["status"] == "success"
    assert entry["metrics"] == {"accuracy": 100}
    assert entry["samples"] == 2
    assert entry["created"].startswith("2026-01-14")
    assert entry["cost_table"][0]["role"] == "solver"
    assert {"file", "task", "model", "status", "metrics", "samples", "cost", "created"} <= set(
        entry
    )
    tasks = {e["task"] for e in document["logs"]}
    assert {"An-R-Eval", "tiny", "oai_demo", "retry_demo", "live"} <= tasks
    assert by_file["partial_running.eval"]["running"] is True


def test_summaries_give_one_light_row_per_sample(client: httpx.Client) -> None:
    """Summaries carry id, epoch, excerpts, score, error flag and tokens for each sample."""
    document = client.get(api_path(VITALS_ADDITION, "summaries.json")).json()
    rows = document["rows"]
    assert [(r["id"], r["epoch"]) for r in rows] == [(1, 1), (2, 1)]
    first = rows[0]
    assert first["input"] == "What's 2+2?"
    assert first["target"] == "4"
    assert first["result"] == "2+2 = 4"
    assert first["score"] == "C"
    assert first["error"] is None
    assert first["tokens"] > 0
    assert document["complete"] is True


def test_sample_endpoint_returns_the_sample_as_logged(client: httpx.Client) -> None:
    """A sample's document is the log's own sample: messages, scores with the judge's chat."""
    response = client.get(api_path(VITALS_ADDITION, "samples", "1", "1.json"))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    sample = response.json()
    assert sample["messages"][0]["content"] == "What's 2+2?"
    (score,) = sample["scores"].values()
    assert score["value"] == "C"
    assert score["metadata"]["grading"][1]["content"][0]["text"].endswith("GRADE: C")


def test_eval_samples_and_errors_are_served(client: httpx.Client) -> None:
    """An Inspect .eval's rows flag its errored samples, and the sample holds the traceback."""
    rows = client.get(api_path("retry_original.eval", "summaries.json")).json()["rows"]
    errored = {r["id"] for r in rows if r["error"]}
    assert errored == {2, 3}
    sample = client.get(api_path("retry_original.eval", "samples", "2", "1.json")).json()
    assert "boom on 2" in sample["error"]["message"]
    assert "Traceback" in sample["error"]["traceback"]


def test_unknown_log_or_sample_is_404(client: httpx.Client) -> None:
    """A log that is not in the directory, or a sample it lacks, is a 404 with a JSON error."""
    assert client.get(api_path("nope.json", "summaries.json")).status_code == 404
    missing = client.get(api_path(VITALS_ADDITION, "samples", "99", "1.json"))
    assert missing.status_code == 404
    assert "error" in missing.json()


def test_string_ids_are_safe_path_segments(tmp_path: Path) -> None:
    """Ids with slashes, dots or digits-as-text get keys that round-trip through URLs."""
    for id in [1, -3, "q-1", "../x", "a/b", "1", "", "é ü", "..", "~x"]:
        key = sample_key(id)
        assert "/" not in key
        assert key not in (".", "..", "")
        assert parse_sample_key(key) == id
    assert parse_log_route(["a.json", "samples", sample_key("../x"), "2.json"]) is not None
    assert parse_log_route(["runs", "a.journal", "live.json"]) == LogRoute("runs/a.journal", "live")

    header = synthetic_header("ids", 3)
    log = s.EvalLog(
        version=2,
        status="success",
        eval=header.eval,
        samples=[synthetic_sample("../etc"), synthetic_sample("a/b"), synthetic_sample("1")],
    )
    write_json_log(tmp_path / "2026-01-01T00-00-00+00-00_ids_x.json", log)
    with ViewServer(tmp_path).start() as running, httpx.Client(base_url=running.url) as http:
        file = "2026-01-01T00-00-00+00-00_ids_x.json"
        rows = http.get(api_path(file, "summaries.json")).json()["rows"]
        assert [r["id"] for r in rows] == ["../etc", "a/b", "1"]
        for row in rows:
            sample = http.get(api_path(file, "samples", row["key"], "1.json")).json()
            assert sample["id"] == row["id"]


# -- safety -----------------------------------------------------------------------------------

TRAVERSALS = [
    "/api/logs/..%2F..%2Fetc%2Fpasswd/summaries.json",
    "/api/logs/..%2F..%2Fetc%2Fpasswd/live.json",
    "/api/logs/..%2F..%2Fetc%2Fpasswd.journal/live.json",
    "/api/logs/%2Fetc%2Fpasswd.journal/live.json",
    "/api/logs/..%2F..%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd/samples/1/1.json",
    "/api/logs/%2Fetc%2Fpasswd/summaries.json",
    "/api/logs/%2E%2E/%2E%2E/etc/passwd/summaries.json",
    "/api/logs/..%5C..%5Cetc%5Cpasswd/summaries.json",
    "/logs/..%2F..%2Fetc%2Fpasswd",
    "/logs/%2Fetc%2Fpasswd",
    "/logs/%2E%2E%2Foutside.json",
    "/assets/..%2F__init__.py",
    "/assets/%2E%2E/server.py",
    "/static/app.js",
    "/etc/passwd",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_paths_outside_the_directory_are_refused(client: httpx.Client, path: str) -> None:
    """Encoded `..`, absolute paths and backslashes never reach a file outside the log dir."""
    response = client.get(path)
    assert response.status_code in (403, 404)
    assert b"root:" not in response.content


def test_symlinks_leading_outside_are_neither_listed_nor_served(tmp_path: Path) -> None:
    """A symlink in the log directory that points outside it is ignored."""
    outside = tmp_path / "outside"
    write_synthetic_log(outside, 2, task="secret")
    logs = tmp_path / "logs"
    write_synthetic_log(logs, 2, task="public")
    (logs / "2026-01-01T00-00-00+00-00_link_2.json").symlink_to(next(outside.iterdir()))
    (logs / "sub").symlink_to(outside, target_is_directory=True)
    with ViewServer(logs).start() as running, httpx.Client(base_url=running.url) as http:
        tasks = [e["task"] for e in http.get("/api/logs.json").json()["logs"]]
        assert tasks == ["public"]
        link = "2026-01-01T00-00-00+00-00_link_2.json"
        assert http.get(api_path(link, "summaries.json")).status_code == 404
        assert http.get("/logs/" + link).status_code == 404
        assert http.get("/logs/sub/" + next(outside.iterdir()).name).status_code == 404
    assert resolve_inside(logs.resolve(), link) is None


def test_raw_log_files_are_served_from_the_directory(client: httpx.Client) -> None:
    """`logs/<file>` serves a listed log's own bytes (the page's download link)."""
    response = client.get("/logs/" + quote(VITALS_ADDITION))
    assert response.status_code == 200
    assert response.content == (FIXTURES / "vitals" / VITALS_ADDITION).read_bytes()


def test_security_headers_on_every_response(client: httpx.Client) -> None:
    """Pages, API documents and errors carry the CSP and nosniff headers."""
    for path in ["/", "/assets/app.js", "/api/logs.json", "/nope"]:
        response = client.get(path)
        csp = response.headers["content-security-policy"]
        for directive in [
            "default-src 'self'",
            "img-src 'self' data:",
            "script-src 'self'",
            "style-src 'self'",
        ]:
            assert directive in csp
        assert "unsafe-inline" not in csp
        assert response.headers["x-content-type-options"] == "nosniff"
    index = client.get("/").text
    assert "<script>" not in index  # no inline script: the app is assets/app.js
    assert 'src="assets/app.js"' in index


def test_foreign_host_header_is_refused(client: httpx.Client) -> None:
    """A loopback viewer answers only requests addressed to a loopback name (DNS rebinding)."""
    assert client.get("/api/logs.json", headers={"Host": "evil.example:80"}).status_code == 403
    assert client.get("/api/logs.json", headers={"Host": "localhost"}).status_code == 200


def test_only_get_is_allowed(client: httpx.Client) -> None:
    """Writes are not a thing the viewer does."""
    assert client.post("/api/logs.json").status_code == 405
    assert client.delete("/logs/" + quote(VITALS_ADDITION)).status_code == 405


@pytest.mark.no_inspect_check  # a truncated log on purpose
def test_unreadable_log_is_reported_not_fatal(tmp_path: Path) -> None:
    """A truncated log is listed under errors while the others still list."""
    write_synthetic_log(tmp_path, 2, task="fine")
    (tmp_path / "2026-01-01T00-00-00+00-00_broken_x.json").write_text('{"version": 2, "sta')
    catalog = Catalog(tmp_path)
    catalog.refresh()
    assert [e["task"] for e in catalog.entries()] == ["fine"]
    (error,) = catalog.errors()
    assert error["file"] == "2026-01-01T00-00-00+00-00_broken_x.json"


# -- ve.view -----------------------------------------------------------------------------------


def test_view_on_a_missing_directory_is_a_config_error(tmp_path: Path) -> None:
    """As vitals says it: "Log directory '<dir>' not found."."""
    missing = tmp_path / "nowhere"
    with pytest.raises(ve.ConfigError, match=r"^Log directory '.*nowhere' not found\.$"):
        view(missing, block=False)


def test_view_prints_its_url_and_opens_no_browser_under_pytest(
    fixture_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`view()` defaults to `ve.log_dir()`, prints the URL, and leaves the browser alone in
    tests."""
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", opened.append)
    monkeypatch.setenv("VITALS_LOG_DIR", str(fixture_dir))
    running = view(block=False)
    try:
        assert capsys.readouterr().out == f"Viewer running at {running.url}\n"
        assert running.url.startswith("http://127.0.0.1:")
        assert opened == []
        assert httpx.get(running.url + "/api/logs.json").status_code == 200
    finally:
        running.stop()
    assert not running.running
    with pytest.raises(httpx.ConnectError):
        httpx.get(running.url + "/api/logs.json")


def test_view_opens_the_browser_when_asked(
    fixture_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`open_browser=True` opens the viewer's URL."""
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", opened.append)
    running = view(fixture_dir, open_browser=True, block=False)
    running.stop()
    assert opened == [running.url]


def test_view_blocks_until_the_server_stops(
    fixture_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`view()` with `block=True` serves until the server is stopped, then returns it."""
    viewer = importlib.import_module("vitals_engine.viewer.launch")

    answers: list[int] = []

    def stop_from_another_thread(url: str) -> None:
        try:
            answers.append(httpx.get(url + "/api/logs.json").status_code)
        finally:
            viewer._servers[fixture_dir.resolve()].stop()

    monkeypatch.setattr(
        "webbrowser.open",
        lambda url: threading.Thread(target=stop_from_another_thread, args=(url,)).start(),
    )
    stopped = view(fixture_dir, open_browser=True)
    assert answers == [200]
    assert not stopped.running


def test_view_does_not_block_inside_a_running_event_loop(fixture_dir: Path) -> None:
    """Called from async code (a notebook's loop), a blocking `view()` serves in the
    background."""

    async def main() -> ViewServer:
        return view(fixture_dir)

    running = asyncio.run(main())
    try:
        assert running.running
        assert httpx.get(running.url + "/api/logs.json").status_code == 200
    finally:
        running.stop()


def test_view_replaces_a_viewer_on_the_same_directory(fixture_dir: Path) -> None:
    """Starting a viewer on a directory already served stops the earlier one (as vitals
    does)."""
    first = view(fixture_dir, block=False)
    second = view(fixture_dir, block=False)
    try:
        assert not first.running
        assert second.running
    finally:
        second.stop()


def test_view_binds_the_requested_port(fixture_dir: Path) -> None:
    """An explicit port is used; a port already taken is an OSError."""
    with ViewServer(fixture_dir).start() as first:
        port = first.port
        with pytest.raises(OSError):
            ViewServer(fixture_dir, port=port)
    with ViewServer(fixture_dir, port=port).start() as second:
        assert second.url == f"http://127.0.0.1:{port}"
        assert httpx.get(second.url + "/api/logs.json").status_code == 200


# -- following a running eval ------------------------------------------------------------------


def _start_journal(path: Path, n: int) -> s.EvalLog:
    header = synthetic_header("journaled", n, status="started")
    header.results = None
    header.stats = s.EvalStats(started_at="2026-01-01T00:00:00+00:00")  # no usage until the end
    path.write_bytes(encode_start(header, path.with_suffix(".json").name))
    return header


def test_journal_tail_reads_only_what_was_appended(tmp_path: Path) -> None:
    """Each update parses the new complete lines; a half-written line waits for its end."""
    path = tmp_path / "2026-01-01T00-00-00+00-00_journaled_x.journal"
    _start_journal(path, 3)
    tail = JournalTail(path, counter())
    assert tail.update() is True
    assert tail.rows == {}
    start = tail.offset
    assert start == path.stat().st_size

    line = encode_sample(synthetic_sample(1))
    with path.open("ab") as fh:
        fh.write(line + encode_sample(synthetic_sample(2))[:20])  # the second is half-written
    assert tail.update() is True
    assert tail.offset == start + len(line)
    assert [r["id"] for r in tail.rows_since(None)] == [1]
    version = tail.version()

    with path.open("ab") as fh:
        fh.write(encode_sample(synthetic_sample(2))[20:])
    assert tail.update() is True
    assert [r["id"] for r in tail.rows_since(version)] == [2]
    assert tail.update() is False  # nothing new
    sample = json.loads(tail.sample_json(2, 1) or b"")
    assert sample["input"] == "Question 2: what is 2+1?"


def test_journal_lists_as_running_then_gives_way_to_its_final_log(tmp_path: Path) -> None:
    """A journal is a running log with its samples so far; once the final log exists, only that
    lists."""
    journal = tmp_path / "2026-01-01T00-00-00+00-00_journaled_x.journal"
    header = _start_journal(journal, 2)
    with journal.open("ab") as fh:
        fh.write(encode_sample(synthetic_sample(1)))
    catalog = Catalog(tmp_path)
    assert catalog.refresh() == {journal.name}
    (entry,) = catalog.entries()
    assert entry["running"] is True
    assert entry["samples"] == 1
    assert entry["final"] == journal.with_suffix(".json").name
    assert entry["tokens"] == 15  # usage summed over the samples while the header has none

    with journal.open("ab") as fh:
        fh.write(encode_sample(synthetic_sample(2)))
        fh.write(encode_header(synthetic_header("journaled", 2)))
    assert catalog.refresh() == {journal.name}
    (entry,) = catalog.entries()
    assert entry["status"] == "success"
    assert entry["samples"] == 2

    log = s.EvalLog(
        version=2,
        status="success",
        eval=header.eval,
        samples=[synthetic_sample(1), synthetic_sample(2)],
    )
    write_json_log(journal.with_suffix(".json"), log)
    assert catalog.refresh() == {journal.name, journal.with_suffix(".json").name}
    assert [e["file"] for e in catalog.entries()] == [journal.with_suffix(".json").name]


def test_a_journal_that_gave_way_answers_from_its_final_log(tmp_path: Path) -> None:
    """A page following a run may ask for the journal's documents just as it becomes its final
    log: they come from the final log (no 404 in between); a journal without one is gone."""
    journal = tmp_path / "2026-01-01T00-00-00+00-00_journaled_x.journal"
    header = _start_journal(journal, 2)
    with journal.open("ab") as fh:
        fh.write(encode_sample(synthetic_sample(1)))
    log = s.EvalLog(
        version=2,
        status="success",
        eval=header.eval,
        samples=[synthetic_sample(1), synthetic_sample(2)],
    )
    with ViewServer(tmp_path).start() as running, httpx.Client(base_url=running.url) as http:
        rows = http.get(api_path(journal.name, "summaries.json")).json()["rows"]
        assert [r["id"] for r in rows] == [1]
        write_json_log(journal.with_suffix(".json"), log)
        journal.unlink()
        document = http.get(api_path(journal.name, "summaries.json")).json()
        assert [r["id"] for r in document["rows"]] == [1, 2]
        assert (document["complete"], document["reset"]) == (True, True)
        sample = http.get(api_path(journal.name, "samples", "2", "1.json")).json()
        assert sample["input"] == "Question 2: what is 2+1?"
        live = http.get(api_path(journal.name, "live.json")).json()
        assert (live["running"], live["samples"]) == (False, [])
        other = "2026-01-01T00-00-00+00-00_other_x.journal"
        assert http.get(api_path(other, "summaries.json")).status_code == 404


def test_logs_endpoint_sees_new_logs_without_events(tmp_path: Path) -> None:
    """Each `api/logs.json` re-lists the directory, so a page without events still sees new
    logs."""
    write_synthetic_log(tmp_path, 2, task="first")
    with ViewServer(tmp_path).start() as running, httpx.Client(base_url=running.url) as http:
        assert [e["task"] for e in http.get("/api/logs.json").json()["logs"]] == ["first"]
        write_synthetic_log(tmp_path, 3, task="second")
        tasks = [e["task"] for e in http.get("/api/logs.json").json()["logs"]]
        assert tasks == ["first", "second"]


def test_events_announce_new_samples_and_since_returns_only_them(tmp_path: Path) -> None:
    """A sample appended to a journal is announced on `api/events`; `?since=` fetches just
    it."""
    journal = tmp_path / "2026-01-01T00-00-00+00-00_journaled_x.journal"
    _start_journal(journal, 2)
    with journal.open("ab") as fh:
        fh.write(encode_sample(synthetic_sample(1)))
    with (
        ViewServer(tmp_path).start() as running,
        httpx.Client(base_url=running.url, timeout=10) as http,
    ):
        first = http.get(api_path(journal.name, "summaries.json")).json()
        assert [r["id"] for r in first["rows"]] == [1]
        with http.stream("GET", "/api/events") as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            lines = stream.iter_lines()
            messages = (json.loads(line[6:]) for line in lines if line.startswith("data: "))
            assert next(messages)["hello"] is True
            with journal.open("ab") as fh:
                fh.write(encode_sample(synthetic_sample(2)))
            change = next(messages)
            assert change["files"] == [journal.name]
        later = http.get(
            api_path(journal.name, "summaries.json"), params={"since": first["version"]}
        ).json()
        assert later["reset"] is False
        assert [r["id"] for r in later["rows"]] == [2]


def _journal_of_one_sample(directory: Path) -> tuple[Path, s.EvalLog]:
    """A running journal holding sample 1, and its start header."""
    journal = directory / "2026-01-01T00-00-00+00-00_journaled_x.journal"
    header = _start_journal(journal, 1)
    with journal.open("ab") as fh:
        fh.write(encode_sample(synthetic_sample(1)))
    return journal, header


def test_a_sample_read_as_its_journal_goes_comes_from_the_final_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A journal removed between the catalog's look at it and the read of a sample's line: the
    sample comes from the final log (not an error)."""
    journal, header = _journal_of_one_sample(tmp_path)
    catalog = Catalog(tmp_path)
    catalog.refresh()
    read = JournalTail.sample_json

    def the_run_ends_first(tail: JournalTail, id: int | str, epoch: int) -> bytes | None:
        monkeypatch.setattr(JournalTail, "sample_json", read)
        samples = [synthetic_sample(1)]
        log = s.EvalLog(version=2, status="success", eval=header.eval, samples=samples)
        write_json_log(journal.with_suffix(".json"), log)
        journal.unlink()
        return read(tail, id, epoch)

    monkeypatch.setattr(JournalTail, "sample_json", the_run_ends_first)
    sample = json.loads(catalog.sample(journal.name, 1, 1) or b"")
    assert sample["input"] == "Question 1: what is 1+1?"


def test_an_older_listing_never_undoes_a_newer_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh that listed the directory while the run was on, and is overtaken by one that
    listed it after the run ended, lists again: the final log stays, the journal does not come
    back (a page asking for the journal then got a 404)."""
    journal, header = _journal_of_one_sample(tmp_path)
    catalog = Catalog(tmp_path)
    catalog.refresh()
    listed, go = threading.Event(), threading.Event()
    real = sources_module.log_files
    held: list[bool] = []

    def the_first_listing_is_held(root: Path) -> Iterator[LogFile]:
        files = list(real(root))
        if not held:
            held.append(True)
            listed.set()
            assert go.wait(timeout=30)
        return iter(files)

    monkeypatch.setattr(sources_module, "log_files", the_first_listing_is_held)
    older = threading.Thread(target=catalog.refresh)
    older.start()
    try:
        assert listed.wait(timeout=30)  # it listed the journal, still running
        samples = [synthetic_sample(1)]
        log = s.EvalLog(version=2, status="success", eval=header.eval, samples=samples)
        final = write_json_log(journal.with_suffix(".json"), log)
        journal.unlink()
        catalog.refresh()  # the newer listing: the final log, no journal
    finally:
        go.set()
        older.join(timeout=30)
    assert [e["file"] for e in catalog.entries()] == [final.name]
    assert catalog.errors() == []
    assert catalog.final_of(journal.name) == final.name
    document = catalog.summaries(journal.name)
    assert document is not None
    assert document["complete"] is True


def test_a_finished_runs_journal_urls_answer_from_its_final_log(tmp_path: Path) -> None:
    """A page that followed a run asks for its journal's documents right after the run ended:
    they come from the final log, with every sample."""
    gate, seen = threading.Event(), threading.Event()

    def solver(input: str) -> str:
        if input == "last":
            seen.set()
            assert gate.wait(timeout=30)
        return f"answer to {input}"

    dataset = [{"input": x, "target": "answer"} for x in ("first", "second", "last")]
    task = ve.Task(dataset, solver=solver, scorer=ve.detect_includes(), name="ending", dir=tmp_path)
    runner = threading.Thread(target=task.eval)
    with ViewServer(tmp_path).start() as running, httpx.Client(base_url=running.url) as http:
        runner.start()
        try:
            assert seen.wait(timeout=30)
            [entry] = http.get("/api/logs.json").json()["logs"]
            assert entry["running"] is True
            journal = entry["file"]
            assert journal.endswith(".journal")
            http.get(api_path(journal, "summaries.json")).raise_for_status()
        finally:
            gate.set()
            runner.join(timeout=60)
        assert task.log_path is not None
        assert not task.log_path.with_suffix(".journal").exists()
        document = http.get(api_path(journal, "summaries.json"))
        assert document.status_code == 200
        rows = document.json()["rows"]
        assert sorted(r["input"] for r in rows) == ["first", "last", "second"]
        assert document.json()["complete"] is True
        last = next(r for r in rows if r["input"] == "last")
        sample = http.get(api_path(journal, "samples", last["key"], "1.json"))
        assert sample.status_code == 200
        assert sample.json()["output"]["completion"] == "answer to last"
        live = http.get(api_path(journal, "live.json"))
        assert live.status_code == 200
        assert live.json()["running"] is False
        [entry] = http.get("/api/logs.json").json()["logs"]
        assert entry["file"] == task.log_path.name
        raw = http.get(f"/logs/{journal}", follow_redirects=True)  # the raw file, downloaded
        assert raw.status_code == 200
        assert raw.url.path == f"/logs/{task.log_path.name}"
        assert len(raw.json()["samples"]) == 3


# -- the live text of in-flight samples -----------------------------------------------------------


def _write_live(journal: Path, *texts: tuple[int | str, str]) -> Path:
    """A live-text sidecar beside `journal`, as a run writes it: (id, text) per sample."""
    document = LiveDocument(
        log=journal.with_suffix(".json").name,
        updated=1767225600.5,
        samples=[
            LiveSample(
                id=id,
                epoch=1,
                role="solver",
                input=f"Question {id}",
                text=text,
                chars=len(text),
                updated=1767225600.25,
            )
            for id, text in texts
        ],
    )
    path = live_path(journal)
    path.write_bytes(msgspec.json.encode(document))
    return path


def test_live_text_is_served_and_its_changes_announced(tmp_path: Path) -> None:
    """`api/logs/<journal>/live.json` serves the sidecar with each sample's key; a changed or
    removed sidecar is announced on `api/events` under `live`, apart from `files`."""
    journal = tmp_path / "2026-01-01T00-00-00+00-00_journaled_x.journal"
    _start_journal(journal, 2)
    sidecar = _write_live(journal, ("a/b", "Thinking"))
    with (
        ViewServer(tmp_path).start() as running,
        httpx.Client(base_url=running.url, timeout=10) as http,
    ):
        logs = http.get("/api/logs.json").json()["logs"]
        assert [e["file"] for e in logs] == [journal.name]  # the sidecar is no log
        document = http.get(api_path(journal.name, "live.json")).json()
        assert document["file"] == journal.name
        assert document["running"] is True
        assert document["updated"] == 1767225600.5
        assert document["samples"] == [
            {
                "key": sample_key("a/b"),
                "id": "a/b",
                "epoch": 1,
                "role": "solver",
                "input": "Question a/b",
                "text": "Thinking",
                "chars": 8,
                "updated": 1767225600.25,
            }
        ]
        with http.stream("GET", "/api/events") as stream:
            lines = stream.iter_lines()
            messages = (json.loads(line[6:]) for line in lines if line.startswith("data: "))
            assert next(messages)["hello"] is True
            _write_live(journal, ("a/b", "Thinking about it"))
            change = next(messages)
            assert change["live"] == [journal.name]
            assert change["files"] == []
            sidecar.unlink()
            assert next(messages)["live"] == [journal.name]
        assert http.get(api_path(journal.name, "live.json")).json()["samples"] == []
        assert http.get(api_path("nope.journal", "live.json")).status_code == 404


def test_a_finished_or_final_log_has_no_live_text(tmp_path: Path) -> None:
    """Only a running journal's sidecar is served: once the journal has its final header (or
    for a final log) `live.json` has no samples, whatever file lies beside it."""
    journal = tmp_path / "2026-01-01T00-00-00+00-00_journaled_x.journal"
    _start_journal(journal, 1)
    _write_live(journal, (1, "Thinking"))
    with journal.open("ab") as fh:
        fh.write(encode_sample(synthetic_sample(1)))
        fh.write(encode_header(synthetic_header("journaled", 1)))
    log = write_synthetic_log(tmp_path, 1)
    _write_live(log, (1, "stale"))
    catalog = Catalog(tmp_path)
    catalog.refresh()
    for file in (journal.name, log.name):
        document = catalog.live(file)
        assert document is not None
        assert (document["running"], document["samples"]) == (False, [])
    assert catalog.live("nope.json") is None


def test_rows_say_when_their_sample_finished(tmp_path: Path) -> None:
    """A summary row carries its sample's completion time in Unix seconds (the page hides live
    text older than it)."""
    sample = synthetic_sample(1)
    sample.completed_at = "2026-01-01T00:00:01.500000+00:00"
    header = synthetic_header("done", 1)
    log = s.EvalLog(version=2, status="success", eval=header.eval, samples=[sample])
    write_json_log(tmp_path / "2026-01-01T00-00-00+00-00_done_x.json", log)
    catalog = Catalog(tmp_path)
    (row,) = catalog.summaries("2026-01-01T00-00-00+00-00_done_x.json")["rows"]
    assert row["completed"] == 1767225601.5
    assert synthetic_sample(2).completed_at is None


def test_a_bundle_has_no_live_text(tmp_path: Path) -> None:
    """A bundle of a directory with a running eval copies neither its sidecar nor any
    `live.json`."""
    journal = tmp_path / "logs" / "2026-01-01T00-00-00+00-00_journaled_x.journal"
    journal.parent.mkdir()
    _start_journal(journal, 2)
    _write_live(journal, (1, "Thinking"))
    out = bundle(journal.parent, tmp_path / "site")
    files = [p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()]
    assert f"logs/{journal.name}" in files
    assert not [f for f in files if f.endswith((".live", "live.json"))]


# -- paging a large log ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_log(tmp_path_factory.mktemp("big"), 100_000, task="big")


def test_summaries_of_a_100k_sample_log(big_log: Path) -> None:
    """A 100,000-sample log's summaries come back whole, light, and its samples one by one."""
    with (
        ViewServer(big_log.parent).start() as running,
        httpx.Client(base_url=running.url, timeout=120) as http,
    ):
        (entry,) = http.get("/api/logs.json").json()["logs"]
        assert entry["samples"] == 100_000
        response = http.get(api_path(big_log.name, "summaries.json"))
        rows = response.json()["rows"]
        assert len(rows) == 100_000
        assert rows[-1]["id"] == 100_000
        assert sum(r["score"] == "I" for r in rows) == 33_333
        assert len(response.content) < 250 * 100_000  # light rows: a few hundred bytes each
        sample = http.get(api_path(big_log.name, "samples", "100000", "1.json")).json()
        assert sample["input"] == "Question 100000: what is 100000+1?"


# -- bundle ------------------------------------------------------------------------------------


def test_bundle_writes_a_static_site(fixture_dir: Path, tmp_path: Path) -> None:
    """The bundle has the page, its assets, the logs with listing.json, the API documents and
    robots.txt."""
    out = bundle(fixture_dir, tmp_path / "site")
    assert out == tmp_path / "site"
    assert (out / "index.html").read_text().count("assets/app.js") == 1
    assert (out / "assets" / "app.js").is_file()
    assert (out / "assets" / "app.css").is_file()
    assert (out / "robots.txt").read_text() == "User-agent: *\nDisallow: /\n"
    listing = json.loads((out / "logs" / "listing.json").read_text())
    assert VITALS_ADDITION in listing
    assert "retry_original.eval" in listing
    assert listing[VITALS_ADDITION]["task"] == "simple-addition"
    assert (out / "logs" / VITALS_ADDITION).read_bytes() == (
        fixture_dir / VITALS_ADDITION
    ).read_bytes()
    assert not (out / "logs" / "eval-log-schema.json").exists()
    logs = json.loads((out / "api" / "logs.json").read_text())
    assert logs["live"] is False
    assert {e["file"] for e in logs["logs"]} == set(listing)
    summaries = json.loads((out / "api" / "logs" / VITALS_ADDITION / "summaries.json").read_text())
    assert len(summaries["rows"]) == 2
    sample = json.loads((out / "api" / "logs" / VITALS_ADDITION / "samples/1/1.json").read_text())
    assert sample["messages"][0]["content"] == "What's 2+2?"
    assert not (out / "api" / "events").exists()


def test_bundle_errors_say_what_vitals_says(fixture_dir: Path, tmp_path: Path) -> None:
    """A missing log dir, an empty one, and an existing output without overwrite are errors."""
    missing = tmp_path / "missing"
    with pytest.raises(ve.ConfigError, match=r"^`log_dir` '.*missing' doesn't exist\.$"):
        bundle(missing, tmp_path / "out")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("no logs here")
    with pytest.raises(
        ve.ConfigError, match=r"^The log directory '.*empty' doesn't contain any logs\.$"
    ):
        bundle(empty, tmp_path / "out")
    existing = tmp_path / "existing"
    existing.mkdir()
    with pytest.raises(
        ve.ConfigError,
        match=r"^'.*existing' already exists\. Choose another output directory or use "
        r"overwrite=True\.$",
    ):
        bundle(fixture_dir, existing)
    assert bundle(fixture_dir, existing, overwrite=True) == existing
    assert (existing / "index.html").is_file()


def test_bundle_refuses_to_overwrite_the_log_directory(fixture_dir: Path) -> None:
    """`overwrite=True` on the log directory (or a folder holding it) would delete the logs."""
    with pytest.raises(ve.ConfigError, match="holds the log directory"):
        bundle(fixture_dir, fixture_dir.parent, overwrite=True)
    assert (fixture_dir / VITALS_ADDITION).is_file()


def test_bundle_defaults(
    fixture_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without arguments the bundle reads `ve.log_dir()` and writes `<its name>-bundle` in the
    current directory; a second call replaces that bundle, never a folder of the user's."""
    monkeypatch.setenv("VITALS_LOG_DIR", str(fixture_dir))
    here = tmp_path / "work"
    here.mkdir()
    monkeypatch.chdir(here)
    out = bundle()
    assert out == Path("logs-bundle")
    assert (here / "logs-bundle" / "api" / "logs.json").is_file()
    (here / "logs-bundle" / "stale.txt").write_text("from the first bundle")
    assert bundle() == out
    assert not (here / "logs-bundle" / "stale.txt").exists()
    shutil.rmtree(here / "logs-bundle")
    (here / "logs-bundle").mkdir()
    (here / "logs-bundle" / "notes.txt").write_text("mine")
    with pytest.raises(ve.ConfigError, match="is not a bundle"):
        bundle()
    assert (here / "logs-bundle" / "notes.txt").read_text() == "mine"


def test_bundle_made_inside_its_log_directory_goes_beside_it(
    fixture_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From inside the log directory, the default bundle goes beside it (not among the logs)."""
    monkeypatch.chdir(fixture_dir)
    out = bundle(".")
    assert out == fixture_dir.resolve().parent / "logs-bundle"
    assert (out / "index.html").is_file()


def test_cost_requests_are_counted_over_the_rows_as_get_cost_counts_them(tmp_path: Path) -> None:
    """The header has no request counts (the cost table says None); the rows have each
    sample's requests by role, which add up to `task.get_cost()`'s (the page sums them)."""
    dataset = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(1, 26)]
    judge = ve.chat_mock(lambda prompt: "Fine.\nGRADE: C")
    task = ve.Task(
        dataset,
        solver=ve.generate(ve.chat_mock()),
        scorer=ve.model_graded_qa(scorer_chat=judge),
        dir=tmp_path,
    )
    task.eval()
    expected = {r["role"]: r["requests"] for r in task.get_cost().iter_rows(named=True)}
    assert expected == {"solver": 25, "scorer": 25}
    catalog = Catalog(tmp_path)
    [entry] = catalog.entries()
    assert [r["requests"] for r in entry["cost_table"]] == [None, None]
    document = catalog.summaries(entry["file"])
    assert document is not None
    counted: dict[str, int] = {}
    for row in document["rows"]:
        for role, n in row["requests"].items():
            counted[role] = counted.get(role, 0) + n
    assert counted == expected


def test_requests_of_odd_shaped_samples_are_counted_leniently(tmp_path: Path) -> None:
    """A score's metadata of any shape (a scorer's own `grading` key, a list) lists the log
    as before: a judge's conversation is counted only where there is one."""
    sample = synthetic_sample(1)
    sample.scores = {
        "mine": s.LogScore(value="C", metadata={"grading": "strict"}),
    }
    other = synthetic_sample(2)
    other.scores = {
        "judge": s.LogScore(
            value="C",
            metadata={"grading": [{"role": "user", "content": "?"}, {"role": "assistant"}]},
        )
    }
    header = synthetic_header("odd", 2)
    log = s.EvalLog(version=2, status="success", eval=header.eval, samples=[sample, other])
    path = write_json_log(tmp_path / "2026-01-01T00-00-00+00-00_odd_x.json", log)
    catalog = Catalog(tmp_path)
    catalog.refresh()
    assert catalog.errors() == []
    document = catalog.summaries(path.name)
    assert document is not None
    assert [row["requests"] for row in document["rows"]] == [
        {"solver": 1},
        {"solver": 1, "scorer": 1},
    ]

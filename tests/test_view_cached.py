"""The viewer on a run a cache half answered: the sample rows carry the usage of the calls
the cache answered (what the page splits the header's cost rows with, as
`read_log(...).get_cost()` does), from a final log, a running journal and a bundle; a
sample's document keeps each model event's `cache` and where its reply came from."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

import vitals_engine as ve
from tests.helpers import openai, sums
from vitals_engine.log.journal_format import encode_sample, encode_start
from vitals_engine.viewer.bundle import bundle
from vitals_engine.viewer.catalog import Catalog
from vitals_engine.viewer.contents import JournalTail, counter
from vitals_engine.viewer.server import ViewServer

from test_view import api_path  # isort: skip

MODEL = "gpt-4.1-mini"
TOKENS = ["input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens"]


def graded_task(server, logs: Path, n: int) -> ve.Task:
    return ve.Task(
        sums(n),
        solver=ve.generate(openai(server, MODEL)),
        scorer=ve.model_graded_qa(scorer_chat=openai(server, MODEL)),
        dir=logs,
        name="cached-sums",
    )


@pytest.fixture
def runs(server, tmp_path: Path) -> tuple[ve.Task, ve.Task]:
    """Two samples asked, then four: the second run's samples 1 and 2 come from the cache."""
    logs, cache = tmp_path / "logs", ve.Cache(dir=tmp_path / "cache")
    first = graded_task(server, logs, 2)
    first.eval(cache=cache, progress=False)
    second = graded_task(server, logs, 4)
    second.eval(cache=cache, progress=False)
    return first, second


def cached_parts(rows: list[dict]) -> dict[str, dict]:
    """Per role, the rows' `cached` usage summed, as the page sums it."""
    parts: dict[str, dict] = {}
    for row in rows:
        for role, usage in row.get("cached", {}).items():
            part = parts.setdefault(role, {"requests": 0, "cost": 0.0} | dict.fromkeys(TOKENS, 0))
            for key in ["requests", "cost", *TOKENS]:
                part[key] += usage[key]
    return parts


def test_rows_carry_what_the_page_splits_the_cost_table_with(runs) -> None:
    """The cached samples' rows hold the usage of their cached calls by role; summed, they
    are `get_cost()`'s cached rows, and the header's row less them its live rows."""
    _, second = runs
    catalog = Catalog(second.log_path.parent)
    entry = next(e for e in catalog.entries() if e["name"] == second.log_path.name)
    document = catalog.summaries(entry["file"])
    assert document is not None
    rows = document["rows"]
    assert [("cached" in row) for row in rows] == [True, True, False, False]
    assert set(rows[0]["cached"]) == {"solver", "scorer"}

    parts = cached_parts(rows)
    cost = second.get_cost()
    for header_row in entry["cost_table"]:
        role = header_row["role"]
        assert header_row["cached"] is None  # the header cannot tell: the rows do
        live, cached = cost.filter(cost["role"] == role).iter_rows(named=True)
        assert (live["cached"], cached["cached"]) == (False, True)
        assert parts[role]["requests"] == cached["requests"] == 2
        for key in TOKENS:
            assert parts[role][key] == cached[key]
            assert header_row[key] - parts[role][key] == live[key]
        assert parts[role]["cost"] == cached["cost"] == 0.0
        assert header_row["cost"] - parts[role]["cost"] == pytest.approx(live["cost"])


def test_a_cached_samples_document_says_where_its_replies_came_from(runs) -> None:
    """Served as logged: each model event of a cached sample says `cache: read` and names
    the task, log, sample and epoch its reply first answered; the others `cache: write`."""
    first, second = runs
    with (
        ViewServer(second.log_path.parent).start() as viewer,
        httpx.Client(base_url=viewer.url, timeout=30) as http,
    ):
        cached = http.get(api_path(second.log_path.name, "samples", "1", "1.json")).json()
        sent = http.get(api_path(second.log_path.name, "samples", "3", "1.json")).json()
    calls = [e for e in cached["events"] if e["event"] == "model"]
    assert [e["cache"] for e in calls] == ["read", "read"]
    origins = [e["metadata"]["cached_from"] for e in calls]
    assert [o["role"] for o in origins] == ["solver", "scorer"]
    for origin in origins:
        assert (origin["task"], origin["log"]) == ("cached-sums", first.log_path.name)
        assert (origin["sample"], origin["epoch"]) == (1, 1)
    # the reply in the transcript is the event's reply: the page marks it by its id
    reply = cached["messages"][-1]
    assert reply["id"] == calls[0]["output"]["choices"][0]["message"]["id"]
    assert [e.get("cache") for e in sent["events"] if e["event"] == "model"] == ["write", "write"]


def test_a_running_journals_rows_and_a_bundles_carry_the_cached_usage(runs, tmp_path: Path) -> None:
    """A journal's rows, read as it grows, and a bundle's `summaries.json` have the same
    `cached` usage as the final log's rows."""
    _, second = runs
    logged = ve.read_log(second.log_path)
    journal = tmp_path / "follow" / "2026-01-01T00-00-00+00-00_cached-sums_x.journal"
    journal.parent.mkdir()
    journal.write_bytes(encode_start(logged.header, journal.with_suffix(".json").name))
    tail = JournalTail(journal, counter())
    with journal.open("ab") as fh:
        fh.write(encode_sample(logged.samples[0]))
    assert tail.update()
    (row,) = tail.rows_since(None)
    with journal.open("ab") as fh:
        fh.write(encode_sample(logged.samples[2]))
    assert tail.update()
    assert [("cached" in r) for r in tail.rows_since(None)] == [True, False]

    catalog = Catalog(second.log_path.parent)
    final = catalog.summaries(second.log_path.name)
    assert final is not None
    assert row["cached"] == final["rows"][0]["cached"]

    site = bundle(second.log_path.parent, tmp_path / "site")
    bundled = json.loads(
        (site / "api" / "logs" / second.log_path.name / "summaries.json").read_text()
    )
    assert cached_parts(bundled["rows"]) == cached_parts(final["rows"])

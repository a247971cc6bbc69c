"""The viewer's compare view in a real browser: two or more logs of one task side by side.

Screenshots land in `$TMPDIR/vitals-engine-test-artifacts/`, as for the rest of the viewer.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from urllib.parse import quote

import pytest

import vitals_engine as ve
from tests.helpers import evaluating, sums
from vitals_engine.viewer.bundle import bundle
from vitals_engine.viewer.server import ViewServer

from test_view_browser import DASH, held_task, shot, static_site  # isort: skip

playwright_sync = pytest.importorskip("playwright.sync_api")
expect = playwright_sync.expect

#: Ten sums; the second model gets these wrong (its answer is off by one).
SUMS = sums(10, start=1)
WRONG_IN_B = {3, 6, 9}


def model_b(prompt: str) -> str:
    """Right but for the sums of WRONG_IN_B, and right on 10 where model A is told wrong."""
    n = int(re.search(r"(\d+)\+", prompt)[1])  # type: ignore[index]
    return f"{n}+{n} = {2 * n + 1 if n in WRONG_IN_B else 2 * n}"


def run(
    directory: Path,
    chat: ve.Chat,
    *,
    name: str = "sums",
    data: list[dict[str, str]] = SUMS,
    epochs: int = 1,
) -> Path:
    task = ve.Task(
        data, ve.generate(chat), ve.detect_includes(), name=name, dir=directory, epochs=epochs
    )
    task.eval(progress=False)
    assert task.log_path is not None
    return task.log_path


def compare_url(server_url: str, *files: str) -> str:
    return f"{server_url}/#/compare/" + ",".join(quote(f, safe="") for f in files)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """One task run on two models: B gets 3 of the 10 sums wrong; and a log of another task."""
    logs = tmp_path_factory.mktemp("compare")
    a = run(logs, ve.chat_mock(model="model-a"))
    b = run(logs, ve.chat_mock(model_b, model="model-b"))
    run(logs, ve.chat_mock(model="model-a"), name="other-task", data=SUMS[:2])
    return logs, a.name, b.name


def test_picking_two_logs_in_the_list_opens_them_side_by_side(page, two_runs) -> None:
    """Two logs of one task picked in the list: the Compare button opens their metrics with
    intervals, a column per run, and the samples graded differently first."""
    logs, a, b = two_runs
    with ViewServer(logs).start() as server:
        page.goto(server.url)
        button = page.locator("#compare-picked")
        expect(button).to_be_disabled()
        expect(page.locator("#compare-hint")).to_have_text(
            "Pick two or more logs of one task to compare them."
        )
        page.locator(f'tr.log-row[data-file="{a}"] input.pick-log').check()
        expect(page.locator("#compare-hint")).to_have_text("Pick one more log of sums to compare.")
        page.locator(f'tr.log-row[data-file="{b}"] input.pick-log').check()
        expect(button).to_be_enabled()
        button.click()

        expect(page).to_have_url(compare_url(server.url, a, b))
        expect(page.locator("#compare-title")).to_have_text("sums")
        metrics = page.locator("#compare-metrics")
        expect(metrics.locator("thead .run-head")).to_have_text(
            [re.compile("^mock/model-a"), re.compile("^mock/model-b")]
        )
        accuracy = metrics.locator('tr.metric-row[data-metric="accuracy"] td')
        expect(accuracy.nth(0).locator(".metric-value")).to_have_text("1")
        expect(accuracy.nth(1).locator(".metric-value")).to_have_text("0.7")
        expect(accuracy.nth(1).locator(".stat .stderr")).to_have_text("± 0.153")
        expect(accuracy.nth(1).locator(".stat .interval")).to_have_text(
            f"95% CI 0.354{DASH}1 · 10 samples"
        )
        expect(accuracy.nth(1).locator(".delta")).to_have_text("\u0394 \u22120.3")
        expect(accuracy.nth(1).locator(".delta")).to_have_class(re.compile("down"))
        expect(metrics.locator("tr.total-row").first).to_contain_text("10")

        expect(page.locator("#compare-counts")).to_have_text(
            "10 samples in every run · 3 graded differently"
        )
        expect(page.locator(".change-line")).to_have_text(
            "mock/model-b against mock/model-a: better on 0 samples, worse on 3"
        )
        rows = page.locator("#compare-table tbody tr.compare-row")
        expect(rows).to_have_count(10)
        # the three graded differently come first, in id order; each run's grade in its column
        for i, sample in enumerate(sorted(WRONG_IN_B)):
            expect(rows.nth(i)).to_have_attribute("data-differs", "true")
            expect(rows.nth(i).locator("td").first).to_have_text(str(sample))
            expect(rows.nth(i).locator("td.run-cell .score")).to_have_text(["C", "I"])
        expect(rows.nth(3)).to_have_attribute("data-differs", "false")
        expect(rows.nth(3).locator("td.run-cell .score")).to_have_text(["C", "C"])
        page.locator("#compare-only-differ").check()
        expect(rows).to_have_count(3)
        page.fill("#compare-search", "7")  # an answer of sample 3 in B: "3+3 = 7"
        expect(rows).to_have_count(1)
        expect(page.locator("#compare-count")).to_have_text("1 of 10 samples")
        shot(page, "compare")
    assert page.problems == []


def test_a_sample_shows_each_runs_answer_next_to_the_others(page, two_runs) -> None:
    """A row opens the sample: its input once, then each run's answer and grade side by
    side; Previous and Next walk the compared samples in the table's order."""
    logs, a, b = two_runs
    with ViewServer(logs).start() as server:
        page.goto(compare_url(server.url, a, b))
        rows = page.locator("#compare-table tbody tr.compare-row")
        expect(rows).to_have_count(10)
        rows.first.click()
        expect(page.locator("#sample-title")).to_have_text("Sample 3 · epoch 1")
        expect(page.locator("#compare-input")).to_contain_text("What's 3+3?")
        runs = page.locator("#compare-answers .compare-run")
        expect(runs).to_have_count(2)
        expect(runs.nth(0).locator("h3")).to_have_text("mock/model-a")
        expect(runs.nth(0).locator(".compare-grade .score")).to_have_text("C")
        expect(runs.nth(0).locator(".compare-answer")).to_contain_text("3 + 3 = 6")
        expect(runs.nth(1).locator(".compare-grade .score")).to_have_text("I")
        expect(runs.nth(1).locator(".compare-answer")).to_contain_text("3+3 = 7")
        expect(runs.nth(1).get_by_role("link", name="open in its log")).to_have_attribute(
            "href", f"#/log/{quote(b, safe='')}/sample/3/1"
        )
        shot(page, "compare-sample")
        expect(page.locator("#sample-prev")).to_be_disabled()
        page.keyboard.press("ArrowRight")
        expect(page.locator("#sample-title")).to_have_text("Sample 6 · epoch 1")
        page.locator("#sample-next").click()
        page.locator("#sample-next").click()
        expect(page.locator("#sample-title")).to_have_text("Sample 1 · epoch 1")
        page.get_by_role("link", name="← back to the comparison").click()
        expect(rows).to_have_count(10)
    assert page.problems == []


def test_a_logs_page_offers_to_compare_it_with_the_other_runs_of_its_task(page, two_runs) -> None:
    """From one run's page, "compare with 1 other run" opens it beside the other run of
    its task (and not the log of another task)."""
    logs, a, b = two_runs
    with ViewServer(logs).start() as server:
        page.goto(f"{server.url}/#/log/{quote(a, safe='')}")
        link = page.locator("#compare-with")
        expect(link).to_have_text("compare with 1 other run")
        link.click()
        expect(page).to_have_url(compare_url(server.url, a, b))
        expect(page.locator("#compare-metrics thead .run-head")).to_have_count(2)
    assert page.problems == []


def test_logs_of_different_tasks_are_not_offered_for_comparing(page, two_runs) -> None:
    """Picking logs of two tasks leaves Compare off and says why; a hand-made link to them
    still opens, with a warning."""
    logs, a, _ = two_runs
    other = next(p.name for p in logs.iterdir() if "other-task" in p.name)
    with ViewServer(logs).start() as server:
        page.goto(server.url)
        page.locator(f'tr.log-row[data-file="{a}"] input.pick-log').check()
        page.locator(f'tr.log-row[data-file="{other}"] input.pick-log').check()
        expect(page.locator("#compare-picked")).to_be_disabled()
        expect(page.locator("#compare-hint")).to_contain_text("different tasks")
        page.goto(compare_url(server.url, a, other))
        expect(page.locator("#compare-warning")).to_contain_text("different tasks")
        expect(page.locator("#compare-table tbody tr.compare-row")).to_have_count(10)
        page.goto(compare_url(server.url, a, "no-such-log.json"))
        expect(page.locator(".error-banner")).to_contain_text("No log named 'no-such-log.json'")
    assert page.problems == []


def test_three_runs_and_a_run_without_some_samples(page, tmp_path: Path) -> None:
    """Three runs, one with only some of the samples, and epochs: a column per run, a dash
    where a run has no such sample, and the sample page says so in that run's column."""
    a = run(tmp_path, ve.chat_mock(model="model-a"), data=SUMS[:4], epochs=2)
    b = run(tmp_path, ve.chat_mock(model_b, model="model-b"), data=SUMS[:4], epochs=2)
    c = run(tmp_path, ve.chat_mock(model="model-a"), data=SUMS[:2], epochs=2)
    with ViewServer(tmp_path).start() as server:
        page.goto(compare_url(server.url, a.name, b.name, c.name))
        heads = page.locator("#compare-metrics thead .run-head")
        expect(heads).to_have_text(
            [
                re.compile("^mock/model-a #1"),
                re.compile("^mock/model-b"),
                re.compile("^mock/model-a #2"),
            ]
        )
        rows = page.locator("#compare-table tbody tr.compare-row")
        expect(rows).to_have_count(8)  # 4 samples x 2 epochs
        expect(page.locator("#compare-counts")).to_have_text(
            "4 samples in every run · 2 graded differently"
        )
        expect(rows.nth(0).locator("td").nth(1)).to_have_text("1")  # sample 3, epoch 1
        expect(rows.nth(1).locator("td").nth(1)).to_have_text("2")  # sample 3, epoch 2
        expect(rows.nth(0).locator("td.run-cell").nth(2)).to_have_text("—")
        rows.nth(0).click()
        runs = page.locator("#compare-answers .compare-run")
        expect(runs).to_have_count(3)
        expect(runs.nth(2)).to_have_class(re.compile("missing"))
        expect(runs.nth(2)).to_contain_text("This run has no such sample.")
    assert page.problems == []


def test_a_running_log_compared_fills_in_as_its_samples_finish(page, tmp_path: Path) -> None:
    """A finished run beside one still running: the running one's column fills in without a
    reload, and follows the journal to the final log."""
    gate = threading.Event()
    model = ve.chat_mock(model="model-b")

    def solver(input: str) -> str:
        if input.startswith("Hold on"):
            gate.wait(timeout=60)  # the test lets this sample finish once the others show
        return model.clone().chat(input)

    done = held_task(tmp_path, ve.generate(ve.chat_mock(model="model-a")), "held", sums=4)
    done.eval(progress=False)
    assert done.log_path is not None
    running = held_task(tmp_path, solver, "held", sums=4)
    with ViewServer(tmp_path).start() as server:
        with evaluating(running, gate):
            page.goto(server.url)
            journal = page.locator("tr.log-row", has_text="running")
            expect(journal).to_have_count(1)
            file = journal.get_attribute("data-file")
            assert file is not None
            page.goto(compare_url(server.url, done.log_path.name, file))
            rows = page.locator("#compare-table tbody tr.compare-row")
            expect(rows).to_have_count(5)
            expect(page.locator("#compare-counts")).to_have_text(
                "4 samples in every run · 0 graded differently"
            )
            held = page.locator('#compare-table tr.compare-row[data-key="5"] td.run-cell')
            expect(held.nth(1)).to_have_text("—")
        expect(page.locator("#compare-counts")).to_have_text(
            "5 samples in every run · 0 graded differently"
        )
        expect(held.nth(1).locator(".score")).to_have_text("C")
        expect(page).to_have_url(re.compile(r"held_[A-Za-z0-9]+\.json$"))
    assert page.problems == []


def test_the_compare_view_works_from_a_bundle(page, two_runs, tmp_path: Path) -> None:
    """A static bundle opens the compare view and a compared sample from files alone."""
    logs, a, b = two_runs
    out = bundle(logs, tmp_path / "site")
    with static_site(out) as url:
        page.goto(compare_url(url, a, b))
        expect(page.locator("#compare-counts")).to_have_text(
            "10 samples in every run · 3 graded differently"
        )
        page.locator("#compare-table tbody tr.compare-row").first.click()
        expect(page.locator("#compare-answers .compare-run")).to_have_count(2)
        expect(page.locator("#compare-answers")).to_contain_text("3+3 = 7")
    assert page.problems == []

"""Shared fixtures, and the check that Inspect reads every log a test writes."""

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests import inspect_check

#: The replay server of recorded traffic: its `replay` fixture (tests/test_recorded_*.py);
#: the S3 server of logs in object storage: `s3`, `s3_faults` (tests/test_object_store*.py);
#: the sandbox kinds this machine runs: `kind_name`, `kind`, `sandbox` (tests/test_sandbox*.py).
pytest_plugins = ["tests.replay_server", "tests.object_store", "tests.sandboxes"]

#: The agent CLIs `make agents` installs (tests/test_coding_agents.py), for pytest run alone.
os.environ.setdefault(
    "VITALS_AGENT_CACHE", str(Path(__file__).resolve().parent.parent / ".tools" / "agent-clis")
)


@pytest.fixture(autouse=True)
def _prices_stay_in_their_test(monkeypatch):
    """A price a test sets (`ve.set_price`) is the table's for that test only: each test
    starts from `data/prices.json` alone, whatever ran before it."""
    from vitals_engine.pricing import table

    monkeypatch.setattr(table, "_user_prices", {})
    monkeypatch.setattr(table, "_found", {})


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param


@pytest.fixture
def no_retries(monkeypatch):
    """Model calls outside a run make one attempt: for tests of how a failure is classified."""
    import importlib

    import vitals_engine as ve

    calls = importlib.import_module("vitals_engine.chats.dispatch")
    monkeypatch.setattr(calls, "DEFAULT_RETRY", ve.Retry(max_attempts=1))


@pytest.fixture(scope="module")
def _module_server():
    from vitals_engine.testing import MockServer

    with MockServer() as running:
        yield running


@pytest.fixture
def server(_module_server):
    """The local mock model server, one per test module, reset before each test."""
    _module_server.reset()
    yield _module_server
    _module_server.reset()  # release anything a test left hanging


@pytest.fixture(scope="session")
def local_ray():
    """One local Ray (two CPUs) for the session, for the tests that ask for it: no
    dashboard, no usage stats, workers' output not copied to ours."""
    ray = pytest.importorskip("ray")
    for name, value in {
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "disabled",
        "RAY_DEDUP_LOGS": "0",
    }.items():
        os.environ.setdefault(name, value)
    # "local": always a Ray of its own, even when another runs on this machine
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        ignore_reinit_error=True,
        log_to_driver=False,
    )
    yield
    ray.shutdown()


# -- one headless browser for the viewer's tests -----------------------------

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-dev-shm-usage",
    "--disable-extensions",
    "--disable-sync",
    "--no-first-run",
    "--mute-audio",
]


def pytest_collection_modifyitems(items):
    """The tests that use the browser run last, in their order. Playwright's sync API keeps
    its event loop marked as running in the main thread while the browser is open, which
    the async tests' own loops refuse; so the browser opens once, after all of them."""
    uses_browser = [item for item in items if "browser" in getattr(item, "fixturenames", ())]
    if uses_browser:
        chosen = set(map(id, uses_browser))
        items[:] = [item for item in items if id(item) not in chosen] + uses_browser


@pytest.fixture(scope="session")
def browser():
    """Debian's chromium under Playwright, started once for the run (when a test asks):
    its tests run last (`pytest_collection_modifyitems`)."""
    playwright_sync = pytest.importorskip("playwright.sync_api")
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing: `make setup` installs Debian's chromium."
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    with playwright_sync.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    """A fresh page (its own context) that collects what went wrong in it in
    `page.problems`: uncaught errors and console errors."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    tab = context.new_page()
    tab.set_default_timeout(15_000)
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    tab.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    tab.problems = problems
    yield tab
    context.close()


# -- every log a test writes is read with Inspect's reader --------------------

_TREE = pytest.StashKey["set[str] | None"]()
_CALL_FAILED = pytest.StashKey[bool]()


def pytest_configure(config):
    if not inspect_check.INSPECT and os.environ.get("CI"):
        raise pytest.UsageError("inspect_ai is missing: `make setup` installs it for the suite.")


def pytest_report_header(config):
    if not inspect_check.INSPECT:
        return "inspect_ai is not installed: logs are not read back with Inspect's reader"
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call" and report.failed:
        item.stash[_CALL_FAILED] = True
    return report


def _new_logs(directory: Path, since: float | None = None) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(
        path
        for path in directory.rglob("*")
        if inspect_check.is_log_file(path)
        and path.is_file()
        and (since is None or path.stat().st_mtime >= since)
    )


@pytest.fixture(autouse=True)
def _inspect_reads_every_log(request):
    """After each test, every final log it left (in its tmp_path, VITALS_LOG_DIR or
    ./logs) that vitals-engine wrote is read with Inspect's reader, full and header-only,
    and compared field by field with what we wrote (`tests/inspect_check.py`).

    Opt out with `@pytest.mark.no_inspect_check` (a test that damages logs on purpose).
    Logs of other tools a test copies in are inputs, not output: not checked. Without
    inspect_ai (`make demo`), nothing is checked (`pytest_report_header` says so).
    """
    if request.node.get_closest_marker("no_inspect_check") or not inspect_check.INSPECT:
        yield
        return
    since = time.time() - 1  # mtimes are coarse on some filesystems
    shared = {
        Path(d).resolve() for d in (os.environ.get("VITALS_LOG_DIR"), "logs") if d is not None
    }
    yield
    if request.node.stash.get(_CALL_FAILED, False):
        return  # the test's own failure says more
    paths = []
    tmp_path = request.node.funcargs.get("tmp_path") if request.node.funcargs else None
    if tmp_path is not None:
        paths += _new_logs(Path(tmp_path))
    for directory in shared:
        paths += _new_logs(directory, since)
    problems = []
    for path in dict.fromkeys(paths):
        stat = path.stat()
        if (str(path.resolve()), stat.st_mtime_ns, stat.st_size) in inspect_check.checked:
            continue
        try:
            header = inspect_check.read_raw(path)[0]
        except Exception as exc:
            problems.append(
                f"{path.name}: a log this test left is not readable JSON / zip ({exc!r}); "
                "mark the test no_inspect_check if it damages logs on purpose"
            )
            continue
        if inspect_check.is_ours(header):
            try:
                inspect_check.check_log(path)
            except inspect_check.Mismatch as exc:
                problems.append(str(exc))
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


# -- the tree as the suite found it ----------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
#: Made by `make setup` and `make docs` or by the tools (caches), not by the tests.
_TOOLING = (".venv/", ".tools/", "site/", ".ruff_cache/", ".import_linter_cache/")


def _untracked() -> set[str]:
    """What the checkout holds beyond its tracked files, ignored or not (directories git
    ignores as a whole named once), less the tooling's and bytecode."""
    listed = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "--untracked-files=all"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout
    return {
        line[3:]
        for line in listed.splitlines()
        if line[:2] in ("??", "!!")
        and not line[3:].startswith(_TOOLING)
        and "__pycache__/" not in line
    }


def pytest_sessionstart(session):
    session.config.stash[_TREE] = _untracked() if (ROOT / ".git").exists() else None


def pytest_sessionfinish(session, exitstatus):
    """The suite leaves the checkout as it found it: a file any test left there (a log in
    ./logs, a screenshot) fails the run, named."""
    before = session.config.stash.get(_TREE, None)
    if before is None:
        return
    left = sorted(_untracked() - before)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"The tests left {len(left)} files in the checkout: {left[:10]}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def _no_logs_in_the_checkout():
    """A test that writes a log into the checkout's ./logs fails, named (its logs belong in
    its tmp_path)."""
    logs = ROOT / "logs"
    before = set(logs.iterdir()) if logs.is_dir() else set()
    yield
    after = set(logs.iterdir()) if logs.is_dir() else set()
    assert not after - before, f"this test wrote into the checkout: {sorted(after - before)}"

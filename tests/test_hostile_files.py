"""Odd or hostile files in a log directory: FIFOs, unreadable logs, bundles over folders."""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import vitals_engine as ve
from vitals_engine._errors import ConfigError, LogFormatError
from vitals_engine.analysis import read_logs
from vitals_engine.cli import main
from vitals_engine.log.reader import read_log
from vitals_engine.viewer.bundle import bundle
from vitals_engine.viewer.catalog import Catalog

FIXTURES = Path(__file__).resolve().parent / "fixtures"
REAL_LOG = "2025-01-01T00-00-00+00-00_demo-task_T1.json"

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")


def _release(fifo: Path) -> None:
    """Unblock a reader stuck opening `fifo` (a writer opens and closes it)."""
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def finishes(call: Callable[[], Any], fifo: Path, timeout: float = 10.0) -> Any:
    """`call()`'s result, failing the test if it does not return (it blocked on `fifo`)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # re-raised in the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        _release(fifo)
        thread.join(timeout)
        pytest.fail(f"blocked on the FIFO {fifo.name}")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


@pytest.fixture
def fifo_dir(tmp_path: Path) -> tuple[Path, Path]:
    """A log directory holding a real log and a FIFO named like a log."""
    shutil.copy(FIXTURES / "inspect" / REAL_LOG, tmp_path / REAL_LOG)
    fifo = tmp_path / "x.json"
    os.mkfifo(fifo)
    return tmp_path, fifo


# -- 1. a FIFO named like a log -------------------------------------------------------------


@needs_fifo
def test_read_log_of_a_fifo_is_not_a_regular_file(fifo_dir):
    """read_log() of a FIFO raises LogFormatError rather than waiting for a writer."""
    _, fifo = fifo_dir
    with pytest.raises(LogFormatError, match=r"x\.json.*not a regular file"):
        finishes(lambda: read_log(fifo), fifo)
    with pytest.raises(LogFormatError, match="not a regular file"):
        finishes(lambda: read_log(fifo, header_only=True), fifo)


@needs_fifo
def test_viewer_catalog_skips_a_fifo(fifo_dir):
    """The viewer's listing finishes and lists the real log, not the FIFO."""
    root, fifo = fifo_dir
    catalog = Catalog(root)
    finishes(catalog.refresh, fifo)
    assert [e["file"] for e in catalog.entries()] == [REAL_LOG]


@needs_fifo
def test_read_logs_skips_a_fifo(fifo_dir):
    """read_logs() finishes and reads the real log beside a FIFO."""
    root, fifo = fifo_dir
    frame = finishes(lambda: read_logs(root), fifo)
    assert set(frame["log"].to_list()) == {REAL_LOG}
    full = finishes(lambda: read_logs(root, header_only_where_possible=False), fifo)
    assert set(full["log"].to_list()) == {REAL_LOG}


@needs_fifo
def test_ls_skips_a_fifo(fifo_dir, capsys):
    """`vitals ls` finishes and lists the real log."""
    root, fifo = fifo_dir
    assert finishes(lambda: main(["ls", str(root)]), fifo) == 0
    names = [line.split()[-1] for line in capsys.readouterr().out.splitlines()[1:]]
    assert names == [REAL_LOG]


@needs_fifo
def test_listing_manifest_that_is_a_fifo_is_ignored(tmp_path):
    """A `listing.json` FIFO reads as no listing instead of blocking."""
    from vitals_engine.log.listing import read_listing

    fifo = tmp_path / "listing.json"
    os.mkfifo(fifo)
    assert finishes(lambda: read_listing(tmp_path), fifo) == {}


# -- 3. bundle(overwrite=True) over a directory that is not a bundle -------------------------


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(FIXTURES / "inspect" / REAL_LOG, logs / REAL_LOG)
    return logs


def test_bundle_overwrite_replaces_an_earlier_bundle(log_dir, tmp_path):
    """overwrite=True replaces a directory holding a bundle, its stale files gone."""
    site = tmp_path / "site"
    bundle(log_dir, site)
    (site / "api" / "stale.json").write_text("{}")
    assert bundle(log_dir, site, overwrite=True) == site
    assert (site / "index.html").is_file()
    assert (site / "logs" / REAL_LOG).is_file()
    assert not (site / "api" / "stale.json").exists()


def test_bundle_overwrite_refuses_a_directory_that_is_not_a_bundle(log_dir, tmp_path):
    """overwrite=True never deletes a directory of other things (or a file)."""
    precious = tmp_path / "thesis"
    precious.mkdir()
    (precious / "chapter1.tex").write_text("years of work")
    (precious / "index.html").write_text("<p>my homepage</p>")
    with pytest.raises(ConfigError, match=r"'.*thesis' is not a bundle.*won't be deleted"):
        bundle(log_dir, precious, overwrite=True)
    assert (precious / "chapter1.tex").read_text() == "years of work"
    assert (precious / "index.html").read_text() == "<p>my homepage</p>"
    assert sorted(p.name for p in precious.iterdir()) == ["chapter1.tex", "index.html"]
    notes = tmp_path / "notes.txt"
    notes.write_text("keep me")
    with pytest.raises(ConfigError, match=r"'.*notes\.txt' is not a bundle.*won't be deleted"):
        bundle(log_dir, notes, overwrite=True)
    assert notes.read_text() == "keep me"


def test_bundle_overwrite_fills_an_empty_directory(log_dir, tmp_path):
    """An empty directory holds nothing to lose: overwrite=True writes the bundle there."""
    empty = tmp_path / "empty"
    empty.mkdir()
    assert bundle(log_dir, empty, overwrite=True) == empty
    assert (empty / "index.html").is_file()


# -- 4. the log cannot be written --------------------------------------------------------------


def _blocked_dir(tmp_path: Path) -> Path:
    """A log directory that cannot be made: its parent is a regular file."""
    (tmp_path / "a-file").write_text("not a directory")
    return tmp_path / "a-file" / "logs"


def _task(dir: Path) -> ve.Task:
    return ve.Task(
        [{"input": "What's 2+2?", "target": "4"}],
        solver=ve.generate(ve.chat_mock()),
        scorer=ve.detect_includes(),
        dir=dir,
    )


@pytest.mark.anyio
async def test_eval_into_an_unwritable_log_dir_raises_log_write_error(tmp_path):
    """A log directory that cannot be written is a LogWriteError naming it, not an
    ExceptionGroup of OSErrors."""
    blocked = _blocked_dir(tmp_path)
    with pytest.raises(ve.LogWriteError, match=r"a-file/logs.*cannot write the log") as info:
        await _task(blocked).eval_async()
    assert isinstance(info.value, ve.VitalsError)
    assert not isinstance(info.value, BaseExceptionGroup)
    assert str(blocked) in str(info.value.path)


@pytest.mark.anyio
async def test_task_log_into_an_unwritable_dir_raises_log_write_error(tmp_path):
    """task.log(dir) into a directory that cannot be made is a LogWriteError."""
    task = _task(tmp_path / "logs")
    await task.eval_async()
    with pytest.raises(ve.LogWriteError, match="cannot write the log"):
        task.log(_blocked_dir(tmp_path))

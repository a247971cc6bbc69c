"""`vitals cache ls|stats|clear`: what the cache of model replies holds, whose calls its
replies first answered, and emptying it (all, by age, by model); plain words for a
missing or damaged store and for an age it cannot read."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

import vitals_engine as ve
from vitals_engine.caching.store import STORE_FILE, ReplyStore
from vitals_engine.cli import main
from vitals_engine.vocab.model_calls import ReplyOrigin
from vitals_engine.vocab.turns import ContentText, TokenUsage, Turn

DAY = 86_400.0


def reply(text: str) -> Turn:
    return Turn("assistant", [ContentText(text)], tokens=TokenUsage(5, 2))


def fill(directory: Path, *entries: tuple[str, str, float, int]) -> None:
    """A store holding one reply per (key, model, age in days, sample), stored that long ago."""
    store = ReplyStore(directory)
    try:
        for key, model, _, sample in entries:
            origin = ReplyOrigin(task="sums", log="run.json", sample=sample, epoch=1, role="solver")
            store.put(key, "OpenAI", "https://api.example/v1", model, reply(key), origin)
    finally:
        store.close()
    with sqlite3.connect(directory / STORE_FILE) as db:  # back-date each reply
        now = time.time()
        db.executemany(
            "UPDATE replies SET created = ? WHERE key = ?",
            [(now - days * DAY, key) for key, _, days, _ in entries],
        )


def table(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines()]


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """A store of four replies: three of gpt-a (today, 2 and 10 days old), one of gpt-b."""
    directory = tmp_path / "cache"
    fill(
        directory,
        ("k-new", "gpt-a", 0.0, 1),
        ("k-two", "gpt-a", 2.0, 2),
        ("k-old", "gpt-a", 10.0, 3),
        ("k-b", "gpt-b", 1.0, 4),
    )
    return directory


def remaining(directory: Path) -> list[str]:
    store = ReplyStore(directory)
    try:
        return sorted(entry["key"] for entry in store.entries())
    finally:
        store.close()


# -- a run fills the store, the commands show it ---------------------------------------------


def test_a_runs_replies_are_listed_with_the_calls_they_answered(server, tmp_path, capsys):
    """After a run with a cache, `stats` counts its replies per model and names the store,
    and `ls` shows each with the task, log, sample and epoch it first answered."""
    cache = tmp_path / "cache"
    chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="k")
    data = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in (1, 2, 3)]
    task = ve.Task(data, ve.generate(chat), ve.detect_includes(), dir=tmp_path / "logs")
    task.eval(cache=ve.Cache(dir=cache), progress=False)

    assert main(["cache", "stats", "--dir", str(cache)]) == 0
    out = capsys.readouterr().out
    assert str(cache / STORE_FILE) in out
    (row,) = [line for line in table(out) if line[0] == "OpenAI/gpt-4.1-mini"]
    assert row[1] == "3"

    assert main(["cache", "ls", "--dir", str(cache)]) == 0
    header, *rows = table(capsys.readouterr().out)
    assert header == ["stored", "model", "size", "task", "sample", "epoch", "role", "log"]
    assert len(rows) == 3
    assert {row[-5] for row in rows} == {task.name}
    assert sorted(row[-4] for row in rows) == ["1", "2", "3"]
    assert {(row[-3], row[-2], row[-1]) for row in rows} == {("1", "solver", task.log_path.name)}


# -- ls ----------------------------------------------------------------------------------------


def test_ls_lists_newest_first_up_to_its_limit(store_dir, capsys):
    """Newest first; `--limit` keeps the newest N and says on stderr that there are more;
    `--model` and `--older-than` filter."""
    assert main(["cache", "ls", "--dir", str(store_dir)]) == 0
    _, *rows = table(capsys.readouterr().out)
    assert [row[-4] for row in rows] == ["1", "4", "2", "3"]  # samples, newest reply first

    assert main(["cache", "ls", "--dir", str(store_dir), "--limit", "2"]) == 0
    captured = capsys.readouterr()
    assert [row[-4] for row in table(captured.out)[1:]] == ["1", "4"]
    assert "The newest 2 shown" in captured.err

    argv = ["cache", "ls", "--dir", str(store_dir), "--model", "openai/gpt-a", "--older-than", "1d"]
    assert main(argv) == 0
    _, *rows = table(capsys.readouterr().out)
    assert [(row[2], row[-4]) for row in rows] == [("OpenAI/gpt-a", "2"), ("OpenAI/gpt-a", "3")]

    assert main(["cache", "ls", "--dir", str(store_dir), "--model", "gpt-c"]) == 0
    assert capsys.readouterr().out.startswith("No replies of model gpt-c in the cache at ")


# -- stats -------------------------------------------------------------------------------------


def test_stats_totals_each_model_and_all_of_them(store_dir, capsys):
    """One line per model (replies, size, oldest, newest), a total when there are several."""
    assert main(["cache", "stats", "--dir", str(store_dir)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith(f"Cache: {store_dir / STORE_FILE} (")
    rows = {line[0]: line for line in table(out)[2:]}
    assert set(rows) == {"OpenAI/gpt-a", "OpenAI/gpt-b", "total"}
    assert (rows["OpenAI/gpt-a"][1], rows["OpenAI/gpt-b"][1], rows["total"][1]) == ("3", "1", "4")

    assert main(["cache", "stats", "--dir", str(store_dir), "--model", "gpt-b"]) == 0
    rows = {line[0]: line for line in table(capsys.readouterr().out)[2:]}
    assert set(rows) == {"OpenAI/gpt-b"}


# -- clear -------------------------------------------------------------------------------------


def test_clear_by_age_then_by_model_then_all(store_dir, capsys):
    """`clear --older-than` removes only older replies, `--model` only that model's, and
    plain `clear` the rest; each says how many went."""
    assert main(["cache", "clear", "--dir", str(store_dir), "--older-than", "7d"]) == 0
    assert capsys.readouterr().out == (
        f"Removed 1 reply older than 7d from the cache at {store_dir / STORE_FILE}.\n"
    )
    assert remaining(store_dir) == ["k-b", "k-new", "k-two"]

    assert main(["cache", "clear", "--dir", str(store_dir), "--model", "gpt-b"]) == 0
    assert "Removed 1 reply of model gpt-b from" in capsys.readouterr().out
    assert remaining(store_dir) == ["k-new", "k-two"]

    assert main(["cache", "clear", "--dir", str(store_dir), "--older-than", "3600"]) == 0
    assert "Removed 1 reply older than 3600 from" in capsys.readouterr().out  # seconds

    assert main(["cache", "clear", "--dir", str(store_dir)]) == 0
    assert "Removed 1 reply from" in capsys.readouterr().out
    assert remaining(store_dir) == []
    assert main(["cache", "stats", "--dir", str(store_dir)]) == 0
    assert "No replies." in capsys.readouterr().out


# -- where the store is, and when it cannot be read --------------------------------------------


@pytest.mark.parametrize("action", ["ls", "stats", "clear"])
def test_a_missing_store_is_said_plainly_and_not_made(tmp_path, capsys, action):
    directory = tmp_path / "nowhere"
    assert main(["cache", action, "--dir", str(directory)]) == 0
    captured = capsys.readouterr()
    assert (
        captured.out == f"No cache in {directory} (no {STORE_FILE} there): nothing is cached yet.\n"
    )
    assert captured.err == ""
    assert not directory.exists()


def test_the_store_defaults_to_vitals_cache_dir(store_dir, monkeypatch, capsys):
    monkeypatch.setenv("VITALS_CACHE_DIR", str(store_dir))
    assert main(["cache", "stats"]) == 0
    assert f"Cache: {store_dir / STORE_FILE}" in capsys.readouterr().out


@pytest.mark.parametrize("age", ["7x", "soon", "-1d", "0"])
def test_an_age_it_cannot_read_is_a_usage_error_and_removes_nothing(store_dir, capsys, age):
    assert main(["cache", "clear", "--dir", str(store_dir), f"--older-than={age}"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("vitals cache: error: --older-than must be ")
    assert len(captured.err.splitlines()) == 1
    assert len(remaining(store_dir)) == 4


def test_a_damaged_store_is_a_one_line_error(tmp_path, capsys):
    directory = tmp_path / "cache"
    directory.mkdir()
    (directory / STORE_FILE).write_bytes(b"not a database, only bytes " * 100)
    assert main(["cache", "stats", "--dir", str(directory)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        f"vitals cache: error: the cache in {directory / STORE_FILE} cannot be read"
    )
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1


def test_usage_errors_and_help(capsys):
    """No action, or an option another action has, is a usage error (exit 2); the help of
    `vitals cache` ends with examples."""
    assert main(["cache"]) == 2
    assert "ACTION" in capsys.readouterr().err
    assert main(["cache", "stats", "--older-than", "7d"]) == 2
    assert "--older-than" in capsys.readouterr().err
    assert main(["cache", "--help"]) == 0
    out = capsys.readouterr().out
    assert "vitals cache clear --older-than 7d" in out.split("Examples:")[1]

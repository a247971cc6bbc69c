"""Processes sharing one cache of replies: runs in two processes at once write the same
store (made by both at the same moment), and a store opened while another process is
writing it waits its turn."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import vitals_engine as ve
from vitals_engine.caching import store
from vitals_engine.caching.store import STORE_FILE
from vitals_engine.vocab.turns import Turn

ROOT = Path(__file__).resolve().parents[1]

#: Says "ready" once imported, starts at the line "go" on stdin: runs start together.
RUN = """
import sys

import vitals_engine as ve

base_url, cache, logs, first, last = sys.argv[1:]
print("ready", flush=True)
sys.stdin.readline()
chat = ve.chat_openai("gpt-4.1-mini", base_url=base_url, api_key="k")
ids = range(int(first), int(last) + 1)
sums = [{"id": i, "input": f"What's {i}+{i}?", "target": str(2 * i)} for i in ids]
task = ve.Task(sums, solver=ve.generate(chat), scorer=ve.detect_includes(), dir=logs)
task.eval(cache=ve.Cache(dir=cache), max_concurrency=8, progress=False)
print(task.metrics["accuracy"], flush=True)
"""


def start_together(script: Path, runs: list[list[str]]) -> list[tuple[str, str]]:
    """Run `script` once per argument list, all told to go at the same moment; the
    stdout and stderr of each, once each has ended with status 0."""
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), *args],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for args in runs
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = [proc.communicate(timeout=120) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
    return outputs


def test_runs_in_two_processes_write_one_store_at_once(server, tmp_path):
    """Two runs with overlapping samples start together on a store neither has made:
    both succeed without a word from the cache, and a run of all their samples is
    answered from it entirely."""
    script = tmp_path / "run.py"
    script.write_text(RUN)
    cache = tmp_path / "cache"
    runs = [
        [server.base_url(), str(cache), str(tmp_path / f"logs-{n}"), first, last]
        for n, (first, last) in enumerate([("1", "40"), ("21", "60")])
    ]
    for out, err in start_together(script, runs):
        assert out.strip() == "1.0"
        assert "the cache in" not in err
    server.reset()
    chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="k")
    sums = [{"id": i, "input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(1, 61)]
    task = ve.Task(sums, solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    task.eval(cache=ve.Cache(dir=cache), progress=False)
    assert server.requests == 0
    assert task.metrics == {"accuracy": 1.0}


def test_a_store_opened_while_another_process_writes_it_waits_its_turn(tmp_path, monkeypatch):
    """While another process making the store is writing it (it holds the file's reserved
    lock), SQLite will not wait to make the store WAL (that could deadlock) and says
    "database is locked" at once: the store tries again once the writer is done."""
    tries: list[float] = []
    with contextlib.closing(sqlite3.connect(tmp_path / STORE_FILE, isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")

        def writer_done(seconds: float) -> None:
            tries.append(seconds)
            if other.in_transaction:
                other.execute("COMMIT")

        monkeypatch.setattr(store, "_pause", writer_done)
        opened = store.ReplyStore(tmp_path)
    assert len(tries) == 1
    opened.put("k", "OpenAI", "http://x", "m", Turn.user("hi"))
    found = opened.get("k")
    assert found is not None
    assert found.turn.text == "hi"
    opened.close()

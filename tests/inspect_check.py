"""Read our logs back with Inspect's own reader and compare with what the task holds."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from inspect_ai.log import read_eval_log as _read_eval_log


def read_eval_log(path: str, header_only: bool = False) -> Any:
    """Inspect's reader, run in a thread of its own: it refuses to run inside trio."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(_read_eval_log, path, header_only=header_only).result()


def assert_inspect_reads(path: Path | str, task: Any | None = None) -> Any:
    """Inspect reads the log fully and header-only; samples, scores and metrics match the task."""
    full = read_eval_log(str(path))
    header = read_eval_log(str(path), header_only=True)
    assert header.status == full.status
    assert header.eval.task == full.eval.task
    assert header.samples is None
    if task is not None:
        frame = task.get_samples()
        assert len(full.samples) == frame.height
        ours = {(r["id"], r["epoch"]): r for r in frame.iter_rows(named=True)}
        for sample in full.samples:
            row = ours[(sample.id, sample.epoch)]
            assert sample.input == row["input"] or not isinstance(row["input"], str)
            if "score" in frame.columns and sample.scores:
                (score,) = sample.scores.values()
                expected = "N" if row["score"] is None else str(row["score"])
                assert str(score.value) == expected
                assert score.explanation == row["explanation"]
            if row.get("result") is not None and sample.output.choices:
                assert sample.output.completion == row["result"]
        if task.metrics:
            (scores,) = full.results.scores
            assert {k: m.value for k, m in scores.metrics.items()} == task.metrics
            assert {k: m.value for k, m in header.results.scores[0].metrics.items()} == task.metrics
    return full

"""A fixed run whose log must not change by a byte when the code is reorganised.

`python -m tests.golden.run OUT_DIR` runs it: a frozen clock (every `time.time()` is
the same instant), ids from a counter, the mock model offline, one sample at a time.
The log it writes is compared with `tests/golden/run.json` by `test_golden_log.py`.
Refresh that file only for a deliberate change of the log (say why in the commit):

    TZ=UTC .venv/bin/python -m tests.golden.run /tmp/golden
    cp /tmp/golden/*_golden_*.json tests/golden/run.json
"""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import vitals_engine as ve
import vitals_engine.log.writer as writer
import vitals_engine.pacing.transcript as transcript
import vitals_engine.task.logfile as logfile
import vitals_engine.task.running as running

INSTANT = 1_795_000_000.25


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def solver(input: str, sample: ve.Sample) -> dict:
    if sample.id == 3:
        raise ValueError("sample 3 fails on purpose")
    chat = ve.chat_mock()
    chat.register_tool(add)
    answer = chat.chat(input)
    return {"result": answer, "solver_chat": chat, "solver_metadata": {"topic": "sums"}}


DATASET = [
    {"id": 1, "input": "Use add on 2 and 2", "target": "4", "topic": "a"},
    {"id": 2, "input": "What's 2+3?", "target": "5", "topic": "b"},
    {"id": 3, "input": "What's 3+3?", "target": "6", "topic": "a"},
    {"id": 4, "input": "What's 9+9?", "target": "17", "topic": "b"},
]


def main(out: Path) -> Path:
    counter = itertools.count(1)

    def new_id(length: int = 22) -> str:
        return f"{next(counter):0{length}d}"

    time.time = lambda: INSTANT  # type: ignore[assignment]
    for module in (writer, logfile, running):
        module.new_id = new_id  # type: ignore[attr-defined]
    transcript._PREFIX = "golden"  # span ids counted, not drawn
    task = ve.Task(
        DATASET,
        solver=solver,
        scorer=ve.model_graded_qa(scorer_chat=ve.chat_mock()),
        name="golden",
        dir=out,
        epochs=2,
    )
    task.eval(max_concurrency=1, fail_on_error=False, progress=False)
    assert task.log_path is not None
    return task.log_path


if __name__ == "__main__":
    print(main(Path(sys.argv[1])))

"""Datasets: a list of dicts, a polars DataFrame, or a .jsonl/.csv/.parquet file.

`input` and `target` are required, `id` is optional (kept when present), and
every other column is per-sample metadata.
"""

from pathlib import Path

import polars as pl

import vitals_engine as ve

# A tiny "product": answers capital questions from a lookup table.
CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Kenya": "Nairobi"}


def capital_bot(input: str) -> str:
    country = input.rsplit(" ", 1)[-1].rstrip("?")
    return f"The capital is {CAPITALS.get(country, 'unknown')}."


# 1. A file: ids and the extra column `continent` come along.
from_file = ve.Task(
    Path(__file__).parent / "data" / "capitals.jsonl",
    solver=capital_bot,
    scorer=ve.detect_includes(),
)
from_file.eval()
print(from_file.get_samples().select("id", "continent", "result", "score"))

# 2. A polars DataFrame (a pandas DataFrame works the same way).
frame = pl.DataFrame(
    {"input": ["What is the capital of France?"], "target": ["Paris"], "difficulty": ["easy"]}
)
from_frame = ve.Task(frame, solver=capital_bot, scorer=ve.detect_includes(), name="capitals")
print(from_frame.eval().metrics)

# 3. Bad input gets a clear error.
try:
    ve.Task([{"question": "?", "answer": "!"}], solver=capital_bot, scorer=ve.detect_includes())
except ve.DatasetError as error:
    print("DatasetError:", error)

"""`ape()`: "An Python Eval", a small set of hard Python and data-science questions.

Modelled on the `are` dataset ("An R Eval") of the R package vitals: each
question comes with grading guidance rather than one exact answer, so it is
meant to be scored by a judge model with `model_graded_qa(partial_credit=True)`.
The questions were written for this eval (`source` is None for all of them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl


__all__ = ["ape", "ape_schema"]


def ape_schema() -> dict[str, pl.DataType]:
    """The columns of `ape()` and their types (also `APE_SCHEMA`)."""
    import polars as pl

    return {
        "id": pl.String(),
        "input": pl.String(),
        "target": pl.String(),
        "domain": pl.String(),
        "task": pl.String(),
        "source": pl.String(),
        "knowledge": pl.List(pl.String()),
    }


def __getattr__(name: str) -> Any:
    # `APE_SCHEMA` is built on access: polars is not imported with the package.
    if name == "APE_SCHEMA":
        return ape_schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_DATA_FILE = "data/ape.jsonl"


def ape() -> pl.DataFrame:
    """ "An Python Eval": 31 challenging Python and data-science questions, one row each.

    The columns:

    - `id`: a unique slug naming the question, e.g. "asyncio-gather-orphaned-tasks".
    - `input`: the question, usually with a code snippet (a traceback to debug,
      code to write, pandas to translate into polars, R into Python ...).
    - `target`: grading guidance for a judge: what a full answer contains and
      what earns partial credit.
    - `domain`: "Programming" or "Data analysis".
    - `task`: "Debugging", "New code" or "Translation".
    - `source`: where the question comes from; None for every row (all were
      written for this eval).
    - `knowledge`: tags of what the question draws on, such as "asyncio",
      "pandas", "polars", "numpy", "typing", "stdlib", "testing" or
      "packaging".

    Rows are sorted by `id`. `input` and `target` become the samples' input and
    target in a `Task`; the other columns are per-sample metadata, handy for
    comparing scores by domain, task or knowledge tag.

    Example:
        >>> import vitals_engine as ve
        >>> from vitals_engine.datasets import ape
        >>> ape().shape
        (31, 7)
        >>> task = ve.Task(
        ...     ape(),
        ...     solver=ve.generate(ve.chat("openai/gpt-4.1")),
        ...     scorer=ve.model_graded_qa(partial_credit=True),
        ...     name="An-Python-Eval",
        ... )
        >>> task.eval().metrics
        {'accuracy': ...}
    """
    import importlib.resources
    import json

    import polars as pl

    text = importlib.resources.files("vitals_engine").joinpath(_DATA_FILE).read_text("utf-8")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    return pl.DataFrame(rows, schema=ape_schema())

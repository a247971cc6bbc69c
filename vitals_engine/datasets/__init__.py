"""Datasets that ship with vitals-engine, ready to pass to `Task`.

- `ape()`: "An Python Eval", 31 challenging Python and data-science questions
  with grading guidance for a judge model, in the spirit of vitals' `are`.

Example:
    >>> import vitals_engine as ve
    >>> from vitals_engine.datasets import ape
    >>> task = ve.Task(
    ...     ape(),
    ...     solver=ve.generate(ve.chat("anthropic/claude-sonnet-4-5")),
    ...     scorer=ve.model_graded_qa(partial_credit=True),
    ...     name="An-Python-Eval",
    ... )
"""

from .ape_questions import ape

__all__ = ["ape"]

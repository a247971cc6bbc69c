"""`IN_VITALS_EVAL=true` in the environment while samples are solved and scored.

The R package vitals sets this variable while it solves and scores, so that code
called by a solver or a scorer (a helper, a tool, a subprocess) can tell that it runs
inside an eval. A run sets it when its engine starts (`Run.execute`) and puts back
what was there when it ends, however it ends: the previous value, or no variable at
all. On Ray, each worker's run sets it in the worker's process.

The environment belongs to the process, not to a run: while runs overlap (an eval set,
or two runs in two threads), the first to start saves the previous value and the last
to end restores it, so one run's end never unsets the variable under another that is
still going.

Example:
    >>> with in_vitals_eval():
    ...     config.in_eval_from_env()
    'true'
    >>> config.in_eval_from_env() is None
    True
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .. import config
from .overlapping import Overlapping

__all__ = ["IN_VITALS_EVAL", "in_vitals_eval"]

#: The variable's name; its value is "true" while any run of this process goes on.
IN_VITALS_EVAL = config.IN_EVAL_VARIABLE

_variable: Overlapping[str | None] = Overlapping(
    config.in_eval_from_env, lambda saved: config.in_eval_set(saved)
)


@contextmanager
def in_vitals_eval() -> Iterator[None]:
    """Set `IN_VITALS_EVAL=true` for the duration (shared by overlapping runs: the last
    to end restores what the first found).

    Example:
        >>> with in_vitals_eval():
        ...     await run_the_samples()
    """
    with _variable.held(lambda: config.in_eval_set("true")):
        yield

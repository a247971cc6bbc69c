"""What a run runs: the user's solver and scorer as the engine knows them, and the
keyword arguments each is called with.

A run given no solver only scores (`task.score()`), one given no scorer only solves.
A vectorized solver or scorer (declared with `@vectorized_solver` / `@vectorized_scorer`)
takes every sample at once, in a whole-dataset stage (`engine/whole_dataset.py`); the
others take one sample at a time (`engine/stages.py`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..samples import SampleRecord
from ..sandboxes.base import SandboxSpec
from .user_functions import FunctionSpec

if TYPE_CHECKING:
    import polars as pl

__all__ = ["RunWork"]


@dataclass(frozen=True, slots=True)
class RunWork:
    """The solver and scorer of a run, with their keyword arguments.

    Attributes:
        solver: the solver (None: the run does not solve).
        scorer: the scorer (None: the run does not score).
        solver_kwargs: passed to the solver at each call.
        scorer_kwargs: passed to the scorer at each call.
        samples_frame: the solved samples as the DataFrame a vectorized scorer takes.
        sandbox: what each sample's sandbox is (None: no sandbox).

    Example:
        >>> work = RunWork(solver=spec_of(answer, "solver"), scorer=None)
        >>> work.without("solver").solver is None
        True
    """

    solver: FunctionSpec | None
    scorer: FunctionSpec | None
    solver_kwargs: dict[str, Any] = field(default_factory=dict)
    scorer_kwargs: dict[str, Any] = field(default_factory=dict)
    samples_frame: Callable[[Sequence[SampleRecord]], pl.DataFrame] | None = None
    sandbox: SandboxSpec | None = None

    @property
    def vectorized(self) -> bool:
        """Whether a stage of it takes every sample at once."""
        solver, scorer = self.solver, self.scorer
        return (solver is not None and solver.vectorized) or (
            scorer is not None and scorer.vectorized
        )

    def without(self, role: str) -> RunWork:
        """The same work less its `role`'s stage ("solver" or "scorer")."""
        return dataclasses.replace(self, **{role: None})

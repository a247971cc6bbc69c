"""A run's whole-dataset stages: a vectorized solver or scorer, given every sample at once.

A vectorized solver (`@vectorized_solver`) takes the list of every input and returns a
result for each; a vectorized scorer (`@vectorized_scorer`) takes the solved samples as
one DataFrame and returns a score for each. The stage opens one call scope for all of
them (its calls are the run's, attributed to the role, to no sample). What it returns is
checked: a dict with one column per field, or a list, one entry per sample in order. A
failure of the function fails every sample it was given; a score that is not one fails
its own sample only.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from .._errors import InvalidScore, ScorerError, SolverError
from ..pacing.scope import CallScope, Stacks
from ..samples import SampleRecord
from ..vocab.usage import UsageLedger
from .sample_errors import FATAL, raise_if_it_stops_the_run, sample_error
from .user_functions import FunctionSpec, normalise_score, normalise_solution, vectorized_column
from .work import RunWork

__all__ = ["WholeDatasetStages"]

_SOLUTION_KEYS = ("result", "solver_chat", "solver_metadata")
_SCORE_KEYS = ("score", "answer", "explanation", "scorer_metadata", "scorer_chat")


class WholeDatasetStages:
    """The whole-dataset stages of one run, under way.

    Example:
        >>> stages = WholeDatasetStages(work=work, stacks=stacks, ledger=ledger)
        >>> await stages.solve_all(records)     # each record's result, or its error
    """

    __slots__ = ("ledger", "stacks", "work")

    def __init__(self, *, work: RunWork, stacks: Stacks, ledger: UsageLedger) -> None:
        self.work = work
        self.stacks = stacks
        self.ledger = ledger

    async def solve_all(self, records: Sequence[SampleRecord]) -> None:
        """Solve every record that has not failed, in one call of the vectorized solver."""
        solver = self.work.solver
        assert solver is not None
        todo = [r for r in records if r.error is None]
        if not todo:
            return
        started = time.time()
        inputs = [r.sample.input for r in todo]
        out = await self._call(solver, inputs, self.work.solver_kwargs, todo, "solve")
        if out is _FAILED:
            return
        values = _rows(out, "result", _SOLUTION_KEYS, len(todo), solver, SolverError)
        for record, value in zip(todo, values, strict=True):
            solution = normalise_solution(value, solver)
            record.result, record.solver_chat = solution.result, solution.chat
            record.solver_metadata = solution.metadata
            record.solve_started, record.solve_completed = started, time.time()

    async def score_all(self, records: Sequence[SampleRecord]) -> None:
        """Score every solved record, in one call of the vectorized scorer."""
        scorer, frame = self.work.scorer, self.work.samples_frame
        assert scorer is not None
        assert frame is not None
        todo = [r for r in records if r.error is None]
        if not todo:
            return
        started = time.time()
        out = await self._call(scorer, frame(todo), self.work.scorer_kwargs, todo, "score")
        if out is _FAILED:
            return
        values = _rows(out, "score", _SCORE_KEYS, len(todo), scorer, ScorerError)
        for record, value in zip(todo, values, strict=True):
            try:
                record.set_score(normalise_score(value, scorer))
            except InvalidScore as exc:  # this sample's own failure, as in a per-sample stage
                record.error = sample_error("score", exc, None)
            record.score_started, record.score_completed = started, time.time()

    async def _call(
        self,
        spec: FunctionSpec,
        arg: Any,
        kwargs: dict[str, Any],
        todo: Sequence[SampleRecord],
        stage: str,
    ) -> Any:
        """Call `spec` on `arg` in the role's scope; on its failure, every record in `todo`
        failed (and `_FAILED` is returned)."""
        with CallScope(role=spec.role, stacks=self.stacks, ledgers=(self.ledger,)):
            try:
                if spec.is_async:
                    return await spec.fn(arg, **kwargs)
                return await anyio.to_thread.run_sync(lambda: spec.fn(arg, **kwargs))
            except FATAL:
                raise
            except Exception as exc:
                raise_if_it_stops_the_run(exc)
                for record in todo:
                    record.error = sample_error(stage, exc, None)
                return _FAILED


#: What `_call` returns when the function failed (its records have their error).
_FAILED = object()


def _rows(
    out: Any,
    main: str,
    keys: tuple[str, ...],
    count: int,
    spec: FunctionSpec,
    error: type[Exception],
) -> list[Any]:
    """One value per record from what a vectorized function returned: a dict of columns
    (`main` required, the other `keys` optional) or a list of `main` values."""
    who = f"vectorized {spec.role} {spec.name}"
    if not isinstance(out, Mapping):
        return vectorized_column({main: out}, main, count, who, error)
    if main not in out:
        raise error(f"The {who} must return a dict with '{main}'; got keys {list(out)}.")
    columns = {key: vectorized_column(out, key, count, who, error) for key in keys}
    return [{key: columns[key][i] for key in keys} for i in range(count)]

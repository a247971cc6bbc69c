"""Several scorers of one task: each scores every sample, under a name of its own.

`Task(scorer=[a, b])` makes the list a `ScorerSet`, which the engine calls as it calls
one scorer. It calls each member on the solved sample at once (judges of different
providers wait on their own endpoints' limits, not on each other), hands each keyword
to the members whose signatures take it, and returns a `ScoreSet`: each member's
score by name, in the list's order. The first member's is the sample's primary score.
Members that are quick and wait on nothing (the `detect_*` scorers, marked
`__vitals_quick__`) run in line first: a task each would cost more than they do (a
task group per sample is about 0.1 ms of CPU); the others run as tasks when there are
several of them.

Names are the members' labels (a repeated one numbered: `detect_includes()`,
`detect_includes()_2`), or the keys of a dict of scorers (`{"judge": ..., "includes":
...}`). A member that fails fails the sample's scoring, as one scorer's failure does.
Members are per-sample scorers: a `@vectorized_scorer` scores a whole run at once and cannot
share samples with others.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import anyio
import anyio.abc

from .._errors import ConfigError
from ..samples import Score, ScoreSet, SolvedSample
from .user_functions import FunctionSpec, call_scorer, run_threads, spec_of

__all__ = ["ScorerSet", "as_scorer", "scorer_names"]


class ScorerSet:
    """Several scorers called as one; see the module docstring.

    Example:
        >>> both = ScorerSet([detect_includes(), detect_exact()])
        >>> both.names
        ['detect_includes', 'detect_exact']
    """

    __vitals_label__ = "scorers"

    def __init__(
        self, scorers: Sequence[Callable[..., Any]], names: Sequence[str] | None = None
    ) -> None:
        self.members: list[FunctionSpec] = []
        for position, scorer in enumerate(scorers):
            try:
                spec = spec_of(scorer, "scorer")
            except ConfigError as exc:
                raise ConfigError(f"Scorer {position + 1} of the list: {exc}") from exc
            if isinstance(scorer, ScorerSet):
                raise ConfigError(
                    f"Scorer {position + 1} of the list is itself several scorers: give them "
                    "all in one list."
                )
            if spec.vectorized:
                raise ConfigError(
                    f"Scorer {position + 1} of the list ({spec.name}) is a @vectorized_scorer: it "
                    "scores the whole run at once and cannot be one of several scorers. Give "
                    "it alone, or write it as a per-sample scorer."
                )
            self.members.append(spec)
        self.scorers = list(scorers)
        self.names = list(names) if names is not None else _unique([s.label for s in self.members])
        self.__signature__ = _signature(self.members)
        named = list(zip(self.names, self.members, strict=True))
        quick = [getattr(scorer, "__vitals_quick__", False) for scorer in self.scorers]
        self._in_line = [pair for pair, q in zip(named, quick, strict=True) if q]
        self._as_tasks = [pair for pair, q in zip(named, quick, strict=True) if not q]

    @property
    def judges(self) -> list[Any]:
        """The chats of the members that grade with a model (a panel's, or one judge)."""
        found: list[Any] = []
        for scorer in self.scorers:
            found += getattr(scorer, "judges", None) or [getattr(scorer, "scorer_chat", None)]
        return [chat for chat in found if chat is not None]

    async def __call__(self, solved: SolvedSample, **kwargs: Any) -> ScoreSet:
        scores: dict[str, Score] = {}
        limiter = run_threads()

        async def one(name: str, spec: FunctionSpec) -> None:
            taken = {k: v for k, v in kwargs.items() if spec.takes_var_kwargs or k in spec.params}
            scored = await call_scorer(spec, solved, taken, limiter)
            assert isinstance(scored, Score)  # members are single scorers (see __init__)
            scores[name] = scored

        for name, spec in self._in_line:
            await one(name, spec)
        if len(self._as_tasks) == 1:
            await one(*self._as_tasks[0])
        elif self._as_tasks:
            await _at_once(one, self._as_tasks)
        return ScoreSet({name: scores[name] for name in self.names})

    def __repr__(self) -> str:
        return f"ScorerSet({', '.join(self.names)})"


async def _at_once(
    one: Callable[[str, FunctionSpec], Awaitable[None]], members: list[tuple[str, FunctionSpec]]
) -> None:
    """`one(name, spec)` for every member at once; the first failure is raised as it was
    (not in an exception group), the others cancelled."""
    failures: list[Exception] = []

    async def guarded(name: str, spec: FunctionSpec, group: anyio.abc.TaskGroup) -> None:
        try:
            await one(name, spec)
        except Exception as exc:
            failures.append(exc)
            group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        for name, spec in members:
            group.start_soon(guarded, name, spec, group)
    if failures:
        raise failures[0]


def as_scorer(scorer: Any) -> Any:
    """The scorer a task runs: a list or tuple of several becomes a `ScorerSet`, and so
    does a dict of them by name; a list of one is its only member; anything else is
    returned as is (and checked later)."""
    if isinstance(scorer, Mapping):
        bad = [repr(name) for name in scorer if not isinstance(name, str) or not name]
        if bad or not scorer:
            raise ConfigError(
                "scorer= as a dict maps names (non-empty strings) to scorers, e.g. "
                "{'includes': ve.detect_includes(), 'judge': ve.model_graded_qa()}"
                + (f"; not {', '.join(bad)}." if bad else "; this one is empty.")
            )
        return ScorerSet(list(scorer.values()), names=list(scorer))
    if not isinstance(scorer, list | tuple):
        return scorer
    if not scorer:
        raise ConfigError("scorer= is an empty list: give a scorer, or several in a list.")
    members = list(scorer)
    return ScorerSet(members) if len(members) > 1 else members[0]


def scorer_names(scorer: Any, label: str | None) -> list[str]:
    """The names a task's scores are kept and logged under: its scorers', in order."""
    if isinstance(scorer, ScorerSet):
        return list(scorer.names)
    return [label] if label else []


def _unique(labels: list[str]) -> list[str]:
    names: list[str] = []
    for label in labels:
        name, count = label, 1
        while name in names:
            count += 1
            name = f"{label}_{count}"
        names.append(name)
    return names


def _signature(members: list[FunctionSpec]) -> inspect.Signature:
    """`(solved, *, <every member's keywords>)`, with `**kwargs` when a member takes any:
    what routes a task's keywords to its scorers (`engine/user_functions.route_kwargs`)."""
    params = [inspect.Parameter("solved", inspect.Parameter.POSITIONAL_ONLY)]
    names = sorted({name for spec in members for name in spec.params})
    params += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None) for n in names]
    if any(spec.takes_var_kwargs for spec in members):
        params.append(inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD))
    return inspect.Signature(params)

"""Calling the user's solvers and scorers: signatures, keyword routing, return shapes.

A solver is called as `solver(input, **kwargs)`, plus `sample=<Sample>` when
it declares a `sample` parameter; a scorer as `scorer(solved_sample, **kwargs)`.
Either may be sync (run in a worker thread) or async. Vectorized functions, which
take every sample at once, are declared with `@vectorized_solver` / `@vectorized_scorer`,
never guessed. `spec_of()` reads what the engine needs of a function from its
signature (a `FunctionSpec`).
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import anyio.to_thread

from .._errors import ConfigError, InvalidScore, ScorerError, SolverError, keyword_hint
from .._words import plural
from ..chats.chat import Chat
from ..samples import Sample, Score, ScoreSet, Solution, SolvedSample
from ..vocab.text import writable_text

__all__ = [
    "FunctionSpec",
    "VectorizedFunction",
    "call_scorer",
    "call_solver",
    "normalise_score",
    "normalise_solution",
    "route_kwargs",
    "run_threads",
    "spec_of",
    "vectorized_column",
    "vectorized_scorer",
    "vectorized_solver",
    "writable_text",
]

Role = Literal["solver", "scorer"]


class VectorizedFunction:
    """A solver or scorer that takes every sample at once (declared with a decorator).

    Example:
        >>> @ve.vectorized_solver
        ... def shout(inputs: list[str]) -> dict:
        ...     return {"result": [text.upper() for text in inputs]}
        >>> isinstance(shout, ve.VectorizedFunction), shout.role
        (True, 'solver')
        >>> shout(["hello"])  # still the function
        {'result': ['HELLO']}
    """

    def __init__(self, fn: Callable[..., Any], role: Role) -> None:
        if not callable(fn):
            raise ConfigError(f"@vectorized_{role} needs a function, not {type(fn).__name__}.")
        self.fn = fn
        self.role = role
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


def vectorized_solver(fn: Callable[..., Any]) -> VectorizedFunction:
    """Declare a solver that takes the list of all inputs and returns results for all.

    It returns `{"result": [...], "solver_chat": [...], "solver_metadata": [...]}`
    (chats and metadata optional), or a list of results, in input order.

    Example:
        >>> @vectorized_solver
        ... def shout(inputs):
        ...     return {"result": [i.upper() for i in inputs]}
    """
    return VectorizedFunction(fn, "solver")


def vectorized_scorer(fn: Callable[..., Any]) -> VectorizedFunction:
    """Declare a scorer that takes a DataFrame of all solved samples at once.

    It returns `{"score": [...], "explanation": [...], "answer": [...],
    "scorer_metadata": [...], "scorer_chat": [...]}` (all but score optional),
    or a list of scores, in row order.

    Example:
        >>> @vectorized_scorer
        ... def exact(samples):
        ...     return {"score": ["C" if r == t else "I"
        ...                       for r, t in zip(samples["result"], samples["target"])]}
    """
    return VectorizedFunction(fn, "scorer")


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    """What the engine knows of a solver or scorer from its signature."""

    fn: Callable[..., Any]
    role: Role
    name: str
    label: str
    vectorized: bool
    is_async: bool
    accepts_sample: bool
    params: frozenset[str]
    takes_var_kwargs: bool


def _name_of(fn: Any) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def spec_of(fn: Any, role: Role) -> FunctionSpec:
    """What the engine needs to know of a solver or scorer, read from its signature.

    Example:
        >>> spec_of(ve.detect_includes(), "scorer").label
        'detect_includes(case_sensitive=False)'
    """
    _check_is_a_function(fn, role)
    vectorized = isinstance(fn, VectorizedFunction)
    if vectorized and fn.role != role:
        raise ConfigError(f"A @vectorized_{fn.role} was given as the {role}.")
    target = fn.fn if vectorized else fn
    params = _parameters(target, role, _name_of(fn))
    keyword_names = _keyword_names(params)
    accepts_sample = role == "solver" and not vectorized and "sample" in keyword_names
    call = getattr(target, "__call__", None)  # noqa: B004 - objects with an async __call__
    is_async = inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(call)
    name = _name_of(fn)
    return FunctionSpec(
        fn=target,
        role=role,
        name=name,
        label=getattr(fn, "__vitals_label__", None) or name,
        vectorized=vectorized,
        is_async=is_async,
        accepts_sample=accepts_sample,
        params=frozenset(keyword_names - {"sample"} if accepts_sample else keyword_names),
        takes_var_kwargs=any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params),
    )


def _check_is_a_function(fn: Any, role: Role) -> None:
    """Refuse what is not a solver or scorer, saying what to write instead: a chat, the
    function that makes one (`ve.generate`, not `ve.generate(chat)`), anything else."""
    if isinstance(fn, Chat):
        fix = "ve.generate(chat)" if role == "solver" else "ve.model_graded_qa(scorer_chat=chat)"
        raise ConfigError(
            f"The {role} is a Chat ({fn.provider.model_id}), not a {role}: a {role} is a "
            f"function. To {'answer' if role == 'solver' else 'grade'} with this chat, write "
            f"{role}={fix}."
        )
    made = getattr(fn, "__vitals_factory__", None)
    if made is not None:
        kind, usage = made
        raise ConfigError(
            f"{role}=ve.{_name_of(fn)} passes the function that makes a {kind}, not a {kind}: "
            f"call it, e.g. {role}={usage}."
        )
    if not callable(fn):
        raise ConfigError(f"The {role} must be a function, not {type(fn).__name__}.")


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_BY_KEYWORD = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _parameters(target: Any, role: Role, name: str) -> list[inspect.Parameter]:
    """`target`'s parameters, checked to take the input (or solved sample) first."""
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"Cannot read the signature of the {role} {name}: {exc}") from exc
    params = list(signature.parameters.values())
    takes_one = any(
        p.kind in _POSITIONAL or p.kind is inspect.Parameter.VAR_POSITIONAL for p in params
    )
    if not takes_one:
        what = "its input" if role == "solver" else "the solved sample"
        raise ConfigError(
            f"The {role} {name} takes no positional argument; it must take {what} first."
        )
    return params


def _keyword_names(params: list[inspect.Parameter]) -> set[str]:
    """The parameters after the first positional one that can be given by keyword."""
    positional = [p for p in params if p.kind in _POSITIONAL]
    first = positional[0].name if positional else None
    return {p.name for p in params if p.name != first and p.kind in _BY_KEYWORD}


def route_kwargs(
    kwargs: Mapping[str, Any],
    solver: FunctionSpec | None,
    scorer: FunctionSpec | None,
    options: tuple[str, ...] = (),
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split keyword arguments between solver and scorer by their signatures.

    A name one of them declares goes to it (to both if both declare it); any
    other name goes to whichever takes `**kwargs`; otherwise it is an error,
    which suggests the nearest of their parameters and of the caller's own
    `options` (`max_concurency` -> `max_concurrency`), or `params=` on the chat
    for a request parameter such as `temperature`.
    """
    to_solver: dict[str, Any] = {}
    to_scorer: dict[str, Any] = {}
    for key, value in kwargs.items():
        in_solver = solver is not None and key in solver.params
        in_scorer = scorer is not None and key in scorer.params
        if not (in_solver or in_scorer):
            in_solver = solver is not None and solver.takes_var_kwargs
            in_scorer = scorer is not None and scorer.takes_var_kwargs
        if not (in_solver or in_scorer):
            names = " or ".join(f"{s.role} {s.name}" for s in (solver, scorer) if s is not None)
            known = [*options, *(n for s in (solver, scorer) if s is not None for n in s.params)]
            raise ConfigError(
                f"Argument `{key}` does not match any parameter of the {names}."
                + (
                    keyword_hint(key, known)
                    or " Check its spelling, or give the function a parameter of that name."
                )
            )
        if in_solver:
            to_solver[key] = value
        if in_scorer:
            to_scorer[key] = value
    return to_solver, to_scorer


#: The threads of the run calling a user's function: an async one that calls sync ones in
#: turn (several scorers called as one) lends them the run's threads, not anyio's 40.
_THREADS: ContextVar[anyio.CapacityLimiter | None] = ContextVar("vitals_threads", default=None)


def run_threads() -> anyio.CapacityLimiter:
    """The thread limiter of the run whose solver or scorer is being called (anyio's
    default one outside a run).

    Example:
        >>> await anyio.to_thread.run_sync(blocking_work, limiter=run_threads())
    """
    return _THREADS.get() or anyio.to_thread.current_default_thread_limiter()


async def _invoke(
    spec: FunctionSpec,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    limiter: anyio.CapacityLimiter,
) -> Any:
    if spec.is_async:
        token = _THREADS.set(limiter)
        try:
            return await spec.fn(*args, **kwargs)
        finally:
            _THREADS.reset(token)
    # A thread cannot be stopped: past its sample_timeout (or when the run is cancelled)
    # the sample stops waiting for it, and the thread finishes on its own.
    value = await anyio.to_thread.run_sync(
        functools.partial(spec.fn, *args, **kwargs), limiter=limiter, abandon_on_cancel=True
    )
    if inspect.isawaitable(value):
        value = await value
    return value


def _expect_chat(value: Any, who: str, slot: str, error: type[Exception]) -> Chat | None:
    if value is None or isinstance(value, Chat):
        return value
    raise error(f"The {who} returned a {slot} that is a {type(value).__name__}; it must be a Chat.")


def normalise_solution(value: Any, spec: FunctionSpec) -> Solution:
    """Turn whatever a solver returned into a `Solution`, or say what is wrong."""
    who = f"solver {spec.name}"
    if isinstance(value, Solution):
        solution = value
    elif isinstance(value, str):
        return Solution(writable_text(value))
    elif isinstance(value, int | float) and not isinstance(value, bool):
        return Solution(str(value))
    elif isinstance(value, Mapping) and "result" in value:
        solution = Solution(value["result"], value.get("solver_chat"), value.get("solver_metadata"))
    else:
        shown = (
            f"a dict without 'result' (keys: {', '.join(map(str, value))})"
            if isinstance(value, Mapping)
            else f"a {type(value).__name__}"
        )
        raise SolverError(
            f"The {who} returned {shown}; it must return a string (a number is taken as its "
            "text, str(value)), a Solution(result, chat, metadata), or a dict with 'result' and "
            "optionally 'solver_chat' and 'solver_metadata'."
        )
    if isinstance(solution.result, int | float) and not isinstance(solution.result, bool):
        solution.result = str(solution.result)
    if not isinstance(solution.result, str):
        raise SolverError(
            f"The {who} returned a result of type {type(solution.result).__name__}; "
            "the result must be a string (or a number, taken as its text)."
        )
    _expect_chat(solution.chat, who, "solver_chat", SolverError)
    solution.result = writable_text(solution.result)
    return solution


_SCORE_TYPES = (str, int, float, bool)


def _check_finite(value: float, who: str) -> None:
    if not math.isfinite(value):
        raise InvalidScore(
            f"The {who} scored this sample {value}: a score is a grade, a finite number, a "
            "bool or None (no grade). The sample is recorded with this error."
        )


def normalise_score(value: Any, spec: FunctionSpec) -> Score | ScoreSet:
    """Turn whatever a scorer returned into a `Score`, or say what is wrong."""
    who = f"scorer {spec.name}"
    if isinstance(value, ScoreSet):  # several scorers': each normalised as it was made
        return value
    if isinstance(value, Score):
        score = value
    elif isinstance(value, _SCORE_TYPES):
        if isinstance(value, float):
            _check_finite(value, who)
        return Score(writable_text(value) if isinstance(value, str) else value)
    elif isinstance(value, Mapping) and "score" in value:
        score = Score(
            value["score"],
            answer=value.get("answer"),
            explanation=value.get("explanation"),
            metadata=value.get("scorer_metadata"),
            chat=value.get("scorer_chat"),
        )
    else:
        shown = (
            f"a dict without 'score' (keys: {', '.join(map(str, value))})"
            if isinstance(value, Mapping)
            else ("None" if value is None else f"a {type(value).__name__}")
        )
        raise ScorerError(
            f"The {who} returned {shown}; it must return a grade ('C', 'P', 'I'), a number, a "
            "bool, a string, a Score(value, ...), or a dict with 'score' and optionally "
            "'answer', 'explanation', 'scorer_metadata' and 'scorer_chat'."
        )
    if score.value is not None and not isinstance(score.value, _SCORE_TYPES):
        raise ScorerError(
            f"The {who} returned a score value of type {type(score.value).__name__}; "
            "it must be a string, a number, a bool, or None (no grade)."
        )
    _expect_chat(score.chat, who, "scorer_chat", ScorerError)
    if isinstance(score.value, float):
        _check_finite(score.value, who)
    if isinstance(score.value, str):
        score.value = writable_text(score.value)
    if isinstance(score.answer, str):
        score.answer = writable_text(score.answer)
    if isinstance(score.explanation, str):
        score.explanation = writable_text(score.explanation)
    return score


async def call_solver(
    spec: FunctionSpec, sample: Sample, kwargs: dict[str, Any], limiter: anyio.CapacityLimiter
) -> Solution:
    """Run a per-sample solver on one sample."""
    if spec.accepts_sample:
        kwargs = {**kwargs, "sample": sample}
    return normalise_solution(await _invoke(spec, (sample.input,), kwargs, limiter), spec)


async def call_scorer(
    spec: FunctionSpec,
    solved: SolvedSample,
    kwargs: dict[str, Any],
    limiter: anyio.CapacityLimiter,
) -> Score | ScoreSet:
    """Run a per-sample scorer on one solved sample."""
    return normalise_score(await _invoke(spec, (solved,), kwargs, limiter), spec)


def vectorized_column(
    out: Mapping[str, Any], key: str, n: int, who: str, error: type[Exception]
) -> list[Any]:
    """One column of a vectorized function's output, checked to have one entry per sample."""
    value = out.get(key)
    if value is None:
        return [None] * n
    if isinstance(value, str | bytes | Mapping) or not hasattr(value, "__iter__"):
        raise error(f"The {who} returned '{key}' as a {type(value).__name__}; expected a list.")
    items = list(value)
    if len(items) != n:
        raise error(
            f"The {who} returned {plural(len(items), 'value')} for '{key}'; "
            f"expected {n}, one per sample."
        )
    return items

"""The options of one run, parsed and checked once, then handed down whole: to the
run (`engine/run.py`'s `Run`), to each of its Ray workers (`WorkerPlan`) and to every
run of an eval set.

Every option is declared once, in the table of `engine/option_table.py`; its typed
keywords (`EvalOptions`, `SolveOptions`, `ScoreOptions`) and the fields a run reads
(`RunOptionFields`) are made from it (`engine/option_types.py`). `RunOptions` is those
fields with the way to them: `RunOptions.check` runs each option's check (a
`ConfigError` names the first wrong one) and those between options;
`RunOptions.parse` takes a call's keywords apart: the run options, checked, and the
rest, for the solver and scorer (`engine/user_functions.route_kwargs`, whose "did you
mean" knows `OPTION_NAMES`). An option's old name (`limits=`, `max_cost=`,
`max_tokens=`) still works for a release, with a warning naming the new one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Unpack

from .._deprecated import renamed_keyword
from .._errors import ConfigError
from ..pacing.limits import cost_budget_of
from ..pacing.sample_limits import SampleLimits
from .option_table import (
    DEFAULT_CONCURRENCY,
    DEPRECATED,
    OPTIONS,
    Backend,
    Call,
    check_epochs,
    drawn_seed,
)
from .option_types import EvalOptions, RunOptionFields, ScoreOptions, SolveOptions

__all__ = [
    "DEFAULT_CONCURRENCY",
    "OPTION_NAMES",
    "Backend",
    "EvalKeywords",
    "EvalOptions",
    "RunOptions",
    "ScoreKeywords",
    "ScoreOptions",
    "SolveKeywords",
    "SolveOptions",
    "allowed_failures",
    "check_epochs",
    "options_of",
]


if TYPE_CHECKING:

    class EvalKeywords(EvalOptions, total=False, extra_items=Any):  # PEP 728
        """`EvalOptions`, and any other keyword: it goes to the solver and/or scorer by
        their signatures (`task.eval(solver_chat=other_chat)`)."""

    class SolveKeywords(SolveOptions, total=False, extra_items=Any):
        """`SolveOptions`, and any other keyword, for the solver."""

    class ScoreKeywords(ScoreOptions, total=False, extra_items=Any):
        """`ScoreOptions`, and any other keyword, for the scorer."""

else:  # Python 3.15's TypedDict takes extra_items; ours are only read
    EvalKeywords, SolveKeywords, ScoreKeywords = EvalOptions, SolveOptions, ScoreOptions


def options_of(call: Call) -> tuple[str, ...]:
    """The names of the run options `call` ("eval", "solve", "score") takes, in the
    table's order.

    Example:
        >>> options_of("score")
        ('max_concurrency', 'rate_limits', 'retry', 'progress')
    """
    return tuple(option.name for option in OPTIONS if call in option.calls)


def allowed_failures(fail_on_error: bool | int | float | None, total: int) -> float:
    """How many failed samples a run of `total` may have and still succeed.

    Example:
        >>> allowed_failures(0.1, 50), allowed_failures(None, 50)
        (5, 0)
    """
    if fail_on_error is None or fail_on_error is True:
        return 0
    if fail_on_error is False:
        return math.inf
    if isinstance(fail_on_error, float):
        return math.floor(fail_on_error * total)
    return fail_on_error


@dataclass(frozen=True, slots=True)
class RunOptions(RunOptionFields):
    """The run options (`EvalOptions`), checked, defaults filled in: what a run reads.
    None of them is routed to the solver or scorer.

    Example:
        >>> options, routed = RunOptions.parse({"max_concurrency": 8, "solver_chat": chat})
        >>> options.max_concurrency, list(routed)
        (8, ['solver_chat'])
    """

    @property
    def sample_limits(self) -> SampleLimits | None:
        """The limits each sample solves under (None: none is set)."""
        limits = SampleLimits(
            message_limit=self.message_limit,
            token_limit=self.token_limit,
            time_limit=self.time_limit,
            working_limit=self.working_limit,
            cost_limit=self.cost_limit,
        )
        return limits if limits.any else None

    @classmethod
    def parse(
        cls, given: Mapping[str, Any], call: Call = "eval"
    ) -> tuple[RunOptions, dict[str, Any]]:
        """A call's keywords taken apart: the run options `call` takes, checked, and the
        others (for the solver and scorer), as given."""
        names = options_of(call)
        known = {*names, *(old for old, new in DEPRECATED.items() if new in names)}
        ours = {name: value for name, value in given.items() if name in known}
        others = {name: value for name, value in given.items() if name not in known}
        return cls.check(**ours), others

    @classmethod
    def check(cls, **given: Unpack[EvalOptions]) -> RunOptions:
        """The options given, checked (a `ConfigError` names the first wrong one), with
        the defaults of those not given."""
        named: dict[str, Any] = dict(given)
        for old, new in DEPRECATED.items():
            renamed_keyword(named, old, new, where="eval", stacklevel=5)
        unknown = sorted(set(named) - set(OPTION_NAMES))
        if unknown:
            raise ConfigError(f"Unknown run option(s): {', '.join(unknown)}.")
        checked = {option.name: option.check(named.get(option.name)) for option in OPTIONS}
        if checked["model_cost_budget"] is None:  # a deprecated Limits(max_cost=)'s
            checked["model_cost_budget"] = cost_budget_of(checked["rate_limits"])
        if checked["shuffle"] and checked["seed"] is None:
            checked["seed"] = drawn_seed()  # so the log can say which order it was
        _check_together(checked)
        return cls(**checked)


#: The names of the run options, in `RunOptions`' order.
OPTION_NAMES: tuple[str, ...] = tuple(field.name for field in fields(RunOptions))


def _check_together(checked: Mapping[str, Any]) -> None:
    """What does not go with a backend yet: batch mode, a budget."""
    if checked["backend"] is None:
        return
    if checked["batch"] is not None:
        raise ConfigError(
            "batch= and backend=ve.Ray() do not go together yet: batches wait hours, "
            "so one process is enough to hold them. Run in batch mode without a backend."
        )
    budgets = ("cost_budget", "token_budget", "model_cost_budget")
    given = [name for name in budgets if checked[name] is not None]
    if given:
        raise ConfigError(
            f"{'= and '.join(given)}= do not go with backend=ve.Ray() yet: the budget is "
            "checked as each sample starts, in this process. Run without a backend, or "
            "without a budget."
        )

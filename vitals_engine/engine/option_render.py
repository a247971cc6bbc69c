"""The run options' types, written from their table (`engine/option_table.py`): the
source of `engine/option_types.py`, which `python -m vitals_engine.engine.option_render`
(`make options`) writes and a test checks is current.
"""

from __future__ import annotations

import sys

from .option_table import OPTIONS, Call

__all__ = ["render"]

_HEADER = '''"""The run options' types: made from the table in `engine/option_table.py` by
`python -m vitals_engine.engine.option_render` (`make options`). Edit the table, not
this file: a test fails when this file is not what the table makes.

`EvalOptions` is what `Task.eval()`, `eval_async()`, `stream_async()` and
`ve.eval_set()` take as keywords; `SolveOptions` and `ScoreOptions` what `solve()` and
`score()` take; `RunOptionFields` what a run reads, once checked (`RunOptions`,
`engine/options.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from .option_table import DEFAULT_CONCURRENCY

if TYPE_CHECKING:
    from ..caching.options import Cache
    from ..pacing.batch_mode import Batch
    from ..pacing.limits import RateLimits
    from ..pacing.retry import Retry
    from .option_table import Backend

__all__ = ["EvalOptions", "RunOptionFields", "ScoreOptions", "SolveOptions"]
'''

_EXAMPLES: dict[Call, str] = {
    "eval": ">>> options: EvalOptions = "
    '{"max_concurrency": 50, "retry": ve.Retry(max_attempts=8)}\n'
    "        >>> task.eval(**options)",
    "solve": ">>> task.solve(epochs=2, max_concurrency=8)",
    "score": ">>> task.score(max_concurrency=8, rate_limits=ve.RateLimits(rpm=600))",
}
_TITLES: dict[Call, tuple[str, str]] = {
    "eval": (
        "EvalOptions",
        "The run options `Task.eval()`, `eval_async()`, `stream_async()` and `ve.eval_set()`\n"
        "    take as keywords (each optional).",
    ),
    "solve": ("SolveOptions", "The run options `Task.solve()` and `solve_async()` take."),
    "score": ("ScoreOptions", "The run options `Task.score()` and `score_async()` take."),
}


def _wrapped(text: str, indent: str, width: int = 92) -> list[str]:
    """`text` in lines of at most `width` characters, the first after `indent`, the others
    indented four more."""
    lines, line = [], ""
    for word in text.split():
        if line and len(indent) + len(line) + 1 + len(word) > width:
            lines.append(line)
            line = "    " + word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return [indent + line for line in lines]


def _typed_dict(call: Call) -> list[str]:
    name, title = _TITLES[call]
    options = [option for option in OPTIONS if call in option.calls]
    lines = ["", "", f"class {name}(TypedDict, total=False):", f'    """{title}', ""]
    lines.append("    Attributes:")
    for option in options:
        lines += _wrapped(f"{option.name}: {option.doc}", "        ")
    lines += ["", "    Example:", f"        {_EXAMPLES[call]}", '    """', ""]
    lines += [f"    {option.name}: {option.given}" for option in options]
    return lines


def render() -> str:
    """The source of `engine/option_types.py`, as the table makes it.

    Example:
        >>> "class EvalOptions(TypedDict, total=False):" in render()
        True
    """
    lines = _HEADER.rstrip("\n").split("\n")
    for call in ("eval", "solve", "score"):
        lines += _typed_dict(call)
    lines += [
        "",
        "",
        "@dataclass(frozen=True, slots=True)",
        "class RunOptionFields:",
        '    """What a run reads of its options, once checked, and their defaults."""',
        "",
    ]
    lines += [f"    {option.name}: {option.kept} = {option.default}" for option in OPTIONS]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # python -m vitals_engine.engine.option_render [--check]
    from pathlib import Path

    target = Path(__file__).with_name("option_types.py")
    made = render()
    if "--check" in sys.argv[1:]:
        sys.exit(0 if target.read_text() == made else 1)
    target.write_text(made)

"""Scorers that compare the result with the target as strings.

Each returns the grade C or I, the answer it looked at, and an explanation
("Target '4' was found in the answer."). A sample with a list of targets is
correct when any of them matches (for `detect_pattern`, when the captured
groups are among the targets).
"""

from __future__ import annotations

import builtins
import re
import string
from collections.abc import Callable
from typing import Literal

from .._errors import ConfigError, factory
from ..samples import Score, SolvedSample

__all__ = ["detect_answer", "detect_exact", "detect_includes", "detect_match", "detect_pattern"]


def _named(fn: Callable[..., object], name: str, args: str) -> None:
    fn.__name__ = name
    fn.__qualname__ = name
    fn.__vitals_label__ = f"{name}({args})"  # type: ignore[attr-defined]
    # Quick and waits on nothing: one of several scorers runs it in line, not as a task.
    fn.__vitals_quick__ = True  # type: ignore[attr-defined]


def _quote_targets(targets: list[str]) -> str:
    return ", ".join(f"'{t}'" for t in targets)


def _grade(ok: bool) -> str:
    return "C" if ok else "I"


@factory("scorer", "ve.detect_includes()")
def detect_includes(case_sensitive: bool = False) -> Callable[[SolvedSample], object]:
    """Correct when the target is a substring of the result (no trimming).

    Example:
        >>> Task(dataset, solver, scorer=detect_includes())
    """

    async def detect_includes_scorer(sample: SolvedSample) -> Score:
        result = sample.result if case_sensitive else sample.result.lower()
        for target in sample.targets:
            if (target if case_sensitive else target.lower()) in result:
                return Score("C", sample.result, f"Target '{target}' was found in the answer.")
        return Score(
            "I",
            sample.result,
            f"Target {_quote_targets(sample.targets)} was not found in the answer.",
        )

    _named(detect_includes_scorer, "detect_includes", f"case_sensitive={case_sensitive}")
    return detect_includes_scorer


_LOCATIONS = {
    "begin": ("at the beginning of", str.startswith),
    "end": ("at the end of", str.endswith),
    "any": ("anywhere in", lambda a, t: t in a),
    "exact": ("exactly matching", lambda a, t: a == t),
}


@factory("scorer", "ve.detect_match()")
def detect_match(
    location: Literal["end", "begin", "any", "exact"] = "end", case_sensitive: bool = False
) -> Callable[[SolvedSample], object]:
    """Correct when the trimmed target is found at `location` in the trimmed result.

    Example:
        >>> detect_match(location="begin")
    """
    if location not in _LOCATIONS:
        raise ConfigError(
            f"detect_match(location={location!r}): location must be one of "
            "'end', 'begin', 'any', 'exact'."
        )
    where, test = _LOCATIONS[location]

    async def detect_match_scorer(sample: SolvedSample) -> Score:
        answer = sample.result.strip()
        seen = answer if case_sensitive else answer.lower()
        for target in sample.targets:
            wanted = target.strip() if case_sensitive else target.strip().lower()
            if test(seen, wanted):
                return Score("C", answer, f"Target '{target}' was found {where} the answer.")
        return Score(
            "I",
            answer,
            f"Target {_quote_targets(sample.targets)} was not found {where} the answer.",
        )

    _named(
        detect_match_scorer,
        "detect_match",
        f"location='{location}', case_sensitive={case_sensitive}",
    )
    return detect_match_scorer


@factory("scorer", "ve.detect_pattern(pattern)")
def detect_pattern(
    pattern: str, case_sensitive: bool = False, all: bool = False
) -> Callable[[SolvedSample], object]:
    """Apply the regex `pattern` to the result and compare its capture groups with the target(s).

    With `all=False` one group among the targets is enough; with `all=True`
    every group must be. Without capture groups the whole match is compared.

    Example:
        >>> detect_pattern(r"colors\\s+(\\w+)\\s+and\\s+(\\w+)")
    """
    try:
        regex = re.compile(pattern, 0 if case_sensitive else re.IGNORECASE)
    except re.error as exc:
        raise ConfigError(f"detect_pattern: '{pattern}' is not a valid regex ({exc}).") from exc

    async def detect_pattern_scorer(sample: SolvedSample) -> Score:
        match = regex.search(sample.result)
        if match is None:
            return Score("I", None, f"Pattern '{pattern}' did not match any text in the answer.")
        groups = [g for g in (match.groups() or (match.group(0),)) if g is not None]
        fold = (lambda s: s) if case_sensitive else str.lower
        targets = {fold(t) for t in sample.targets}
        hits = [fold(g) in targets for g in groups]
        ok = bool(groups) and (builtins.all(hits) if all else any(hits))
        which = "All matches" if all else "At least one match"
        verdict = "matched" if ok else "did not match"
        return Score(
            _grade(ok), ", ".join(groups), f"{which} from pattern '{pattern}' {verdict} the target."
        )

    _named(
        detect_pattern_scorer,
        "detect_pattern",
        f"pattern={pattern!r}, case_sensitive={case_sensitive}, all={all}",
    )
    return detect_pattern_scorer


_PUNCTUATION = str.maketrans("", "", string.punctuation)


@factory("scorer", "ve.detect_exact()")
def detect_exact(case_sensitive: bool = False) -> Callable[[SolvedSample], object]:
    """Correct when the result equals the target after removing punctuation and trimming.

    Example:
        >>> detect_exact(case_sensitive=True)
    """

    def normalise(text: str) -> str:
        text = text.translate(_PUNCTUATION).strip()
        return text if case_sensitive else text.lower()

    async def detect_exact_scorer(sample: SolvedSample) -> Score:
        answer = normalise(sample.result)
        for target in sample.targets:
            if answer == normalise(target):
                return Score("C", answer, f"Normalized answer exactly matched target '{target}'.")
        return Score(
            "I",
            answer,
            f"Normalized answer did not exactly match target {_quote_targets(sample.targets)}.",
        )

    _named(detect_exact_scorer, "detect_exact", f"case_sensitive={case_sensitive}")
    return detect_exact_scorer


_ANSWER_PATTERNS = {
    "letter": re.compile(r"ANSWER:\s*([A-Za-z])"),
    "word": re.compile(r"ANSWER:\s*(\w+)"),
    # No MULTILINE: the line form only matches an ANSWER on the last line.
    "line": re.compile(r"ANSWER:\s*(.+)$"),
}


@factory("scorer", "ve.detect_answer()")
def detect_answer(
    format: Literal["line", "word", "letter"] = "line",
) -> Callable[[SolvedSample], object]:
    """Extract the answer after `ANSWER:` and compare it, trimmed and case-insensitively.

    `format` picks what is extracted: a letter, a word, or the rest of the
    line (only when the ANSWER is on the last line).

    Example:
        >>> detect_answer(format="letter")
    """
    if format not in _ANSWER_PATTERNS:
        raise ConfigError(
            f"detect_answer(format={format!r}): format must be one of 'line', 'word', 'letter'."
        )
    regex = _ANSWER_PATTERNS[format]

    async def detect_answer_scorer(sample: SolvedSample) -> Score:
        match = regex.search(sample.result)
        if match is None:
            if "ANSWER:" in sample.result:
                shown = {"line": "answer on the last line", "word": "word", "letter": "letter"}
                why = f"No {shown[format]} found after 'ANSWER:' in the response."
            else:
                why = "No 'ANSWER:' prefix found in the response."
            return Score("I", None, why)
        answer = match.group(1).strip()
        for target in sample.targets:
            if answer.lower() == target.strip().lower():
                return Score("C", answer, f"Extracted answer '{answer}' matched target '{target}'.")
        return Score(
            "I",
            answer,
            f"Extracted answer '{answer}' did not match target {_quote_targets(sample.targets)}.",
        )

    _named(detect_answer_scorer, "detect_answer", f"format='{format}'")
    return detect_answer_scorer

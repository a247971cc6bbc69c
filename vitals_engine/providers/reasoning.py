"""The `reasoning=` setting of a chat: how hard a model thinks, said one way for every
provider.

A setting is an effort (`"none"`, `"minimal"`, `"low"`, `"medium"`, `"high"`,
`"xhigh"`) or a budget of thinking tokens (an int). Each provider maps it to its own
fields: OpenAI `reasoning.effort` / `reasoning_effort`, Anthropic `thinking` (a token
budget, or adaptive thinking with an effort on the models that take it), Gemini
`thinkingConfig` (`thinkingBudget` or `thinkingLevel`). Where a provider wants a budget
and is given an effort, `EFFORT_BUDGETS` says how many tokens each effort is.

Example:
    >>> reasoning_setting("high")
    'high'
    >>> reasoning_setting(8000)
    8000
    >>> log_config("low")
    {'reasoning_effort': 'low'}
"""

from __future__ import annotations

from typing import Any

from .._errors import ConfigError

__all__ = ["EFFORTS", "EFFORT_BUDGETS", "Reasoning", "log_config", "reasoning_setting"]

#: The efforts, from none to the most.
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")

#: Thinking tokens an effort stands for where a provider takes a budget (Anthropic's
#: models before adaptive thinking, Gemini 2.5). Anthropic's least budget is 1,024.
EFFORT_BUDGETS = {
    "none": 0,
    "minimal": 1024,
    "low": 4096,
    "medium": 10_000,
    "high": 24_000,
    "xhigh": 32_000,
}

#: An effort, a budget of thinking tokens, or None (the provider's default).
Reasoning = str | int | None


def reasoning_setting(value: Any, who: str = "The chat") -> Reasoning:
    """`value` checked as a `reasoning=` setting: an effort or a budget (int >= 0)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ConfigError(
            f"{who} got reasoning={value!r}: give an effort ({', '.join(map(repr, EFFORTS))}) "
            "or a number of thinking tokens."
        )
    if isinstance(value, int):
        if value < 0:
            raise ConfigError(f"{who} got reasoning={value}: a budget of thinking tokens is >= 0.")
        return value
    if value not in EFFORTS:
        raise ConfigError(
            f"{who} got reasoning={value!r}: the efforts are {', '.join(map(repr, EFFORTS))}, "
            "or give a number of thinking tokens."
        )
    return value


def budget_of(setting: Reasoning) -> int | None:
    """The thinking tokens a setting stands for (an effort through `EFFORT_BUDGETS`)."""
    if setting is None:
        return None
    return setting if isinstance(setting, int) else EFFORT_BUDGETS[setting]


def log_config(setting: Reasoning) -> dict[str, Any]:
    """The setting as Inspect's generate config records it: `reasoning_effort` for an
    effort, `reasoning_tokens` for a budget."""
    if setting is None:
        return {}
    if isinstance(setting, int):
        return {"reasoning_tokens": setting}
    return {"reasoning_effort": setting}

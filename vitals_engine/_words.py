"""Counted nouns in messages: "1 sample", "2 samples"."""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int | float, noun: str, nouns: str | None = None) -> str:
    """`count` and `noun`, made plural (`nouns`, default `noun + "s"`) unless count is 1.

    Example:
        >>> plural(1, "sample"), plural(1_200, "sample"), plural(2, "retry", "retries")
        ('1 sample', '1,200 samples', '2 retries')
    """
    word = noun if count == 1 else nouns or noun + "s"
    return f"{count:,} {word}"

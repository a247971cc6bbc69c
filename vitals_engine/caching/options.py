"""What `cache=` says: where replies are kept and for how long.

`Cache` is the option of `task.eval(cache=...)` and of a chat's `cache=`;
`cache_option` checks a user's value; `parse_age` reads "7d"-style ages, used
by `Cache(expiry=)` and by `vitals cache clear --older-than`.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .._errors import ConfigError
from ..config import cache_dir_from_env

__all__ = ["Cache", "cache_dir", "cache_option", "parse_age"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)


def parse_age(value: str | float | int, what: str = "an age") -> float:
    """Seconds in an age such as "90s", "15m", "12h", "7d" or "2w" (a number: seconds).

    Example:
        >>> parse_age("7d")
        604800.0
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (match := _AGE.match(value)):
        seconds = float(match.group(1)) * _UNITS[match.group(2).lower()]
    else:
        raise ConfigError(
            f"{what} must be a number of seconds or a text such as '90s', '15m', '12h', '7d' "
            f"or '2w', not {value!r}."
        )
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(f"{what} must be more than 0 seconds, not {value!r}.")
    return seconds


@dataclass(frozen=True, slots=True)
class Cache:
    """Model replies kept on disk, so an identical call later is answered from there.

    Args:
        dir: the store's directory (default: `VITALS_CACHE_DIR`, else the user's cache
            directory, e.g. `~/.cache/vitals-engine` on Linux).
        expiry: how long a reply is used, e.g. "12h", "7d", "2w", a number of seconds,
            or None for ever (default "7d").

    Example:
        >>> task.eval(cache=Cache(dir="./cache", expiry="1d"))
    """

    dir: str | os.PathLike[str] | None = None
    expiry: str | float | None = "7d"

    def __post_init__(self) -> None:
        if self.dir is not None and not isinstance(self.dir, str | os.PathLike):
            raise ConfigError(f"Cache(dir=) must be a path (a str or a Path), not {self.dir!r}.")
        if self.expiry is not None:
            parse_age(self.expiry, "Cache(expiry=)")

    @property
    def max_age(self) -> float | None:
        """Seconds a stored reply is used for (None: for ever)."""
        return None if self.expiry is None else parse_age(self.expiry, "Cache(expiry=)")

    @property
    def path(self) -> Path:
        """The store's directory."""
        return Path(self.dir) if self.dir is not None else cache_dir()


def cache_dir() -> Path:
    """Where the store lives when `Cache(dir=)` does not say: `VITALS_CACHE_DIR`, else
    the user's cache directory."""
    given = cache_dir_from_env()
    if given:
        return Path(given)
    import platformdirs

    return Path(platformdirs.user_cache_dir("vitals-engine", appauthor=False))


def cache_option(value: object, who: str) -> Cache | None:
    """`value` as cache options: True a default `Cache()`, False or None none.

    Example:
        >>> cache_option(True, "eval()")
        Cache(dir=None, expiry='7d')
    """
    if value is None or value is False:
        return None
    if value is True:
        return Cache()
    if isinstance(value, Cache):
        return value
    raise ConfigError(
        f"{who}: `cache` must be True, False or a ve.Cache(dir=, expiry=), not {value!r}."
    )

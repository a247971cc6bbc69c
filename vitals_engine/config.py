"""Process-wide settings read from the environment: every `VITALS_*` variable the
package reads is read here, and the docs list them (guide/command-line.md,
"Environment variables").

- `VITALS_LOG_DIR`: where logs go when `Task(dir=)` does not say (else `./logs`);
- `VITALS_CACHE_DIR`: the cache of model replies' home when `Cache(dir=)` does not say
  (else the user's cache directory);
- `VITALS_TRANSPORT`: the HTTP client, `aiohttp` (on asyncio) or `httpx` (else our own);
- `VITALS_GC_TUNING`: `0` leaves the garbage collector's thresholds alone while runs go
  (else they are raised);
- `VITALS_SHIP_INTERVAL`: seconds between two shipments of a journal to an object store
  (else 5);
- `VITALS_STAGING_DIR`: where journals of runs logging to an object store are written
  locally (else the user's cache directory);
- `VITALS_STORE_TIMEOUT`: seconds a run spends on an object store that does not answer
  before it gives up on it (else 60);
- `VITALS_STORE_LEASE`: seconds the lock of a journal in an object store stays good
  without a heartbeat, after which another machine may take it over (else 30);
- `VITALS_AGENT_CACHE`: where the agent CLIs of the coding-agent solvers are installed
  (else the user's cache directory).

One variable is set here rather than read: `IN_VITALS_EVAL`, "true" while runs go
(`engine/eval_env.py`).
"""

from __future__ import annotations

import os

__all__ = [
    "DEFAULT_LOG_DIR",
    "ENV_AGENT_CACHE",
    "ENV_CACHE_DIR",
    "ENV_GC_TUNING",
    "ENV_LOG_DIR",
    "ENV_SHIP_INTERVAL",
    "ENV_STAGING_DIR",
    "ENV_STORE_LEASE",
    "ENV_STORE_TIMEOUT",
    "ENV_TRANSPORT",
    "IN_EVAL_VARIABLE",
    "agent_cache_from_env",
    "cache_dir_from_env",
    "gc_tuning_from_env",
    "in_eval_from_env",
    "in_eval_set",
    "log_dir",
    "log_dir_set",
    "ship_interval_from_env",
    "staging_dir_from_env",
    "store_lease_from_env",
    "store_timeout_from_env",
    "transport_from_env",
]

ENV_LOG_DIR = "VITALS_LOG_DIR"
#: Overrides the user's cache directory as the home of the cache of model replies.
ENV_CACHE_DIR = "VITALS_CACHE_DIR"
#: Names the HTTP client of every run: "aiohttp" or "httpx" (else our own).
ENV_TRANSPORT = "VITALS_TRANSPORT"
#: "0" leaves the garbage collector's thresholds alone while runs are going.
ENV_GC_TUNING = "VITALS_GC_TUNING"
#: Seconds between two shipments of a journal to an object store.
ENV_SHIP_INTERVAL = "VITALS_SHIP_INTERVAL"
#: Where the journals of runs that log to an object store are staged on this machine.
ENV_STAGING_DIR = "VITALS_STAGING_DIR"
#: Seconds a run spends on an object store that does not answer before giving up on it.
ENV_STORE_TIMEOUT = "VITALS_STORE_TIMEOUT"
#: Seconds the lock of a journal in an object store stays good without a heartbeat.
ENV_STORE_LEASE = "VITALS_STORE_LEASE"
#: Where the agent CLIs are installed (`vitals install-agent`), else the user's cache.
ENV_AGENT_CACHE = "VITALS_AGENT_CACHE"
#: "true" while runs of this process solve and score (set by them, for the user's code;
#: not an `ENV_` name: the package never reads it to decide anything).
IN_EVAL_VARIABLE = "IN_VITALS_EVAL"
#: Where logs go when neither `Task(dir=...)` nor VITALS_LOG_DIR says.
DEFAULT_LOG_DIR = "logs"


def log_dir() -> str | None:
    """The log directory from the `VITALS_LOG_DIR` environment variable, or None.

    Example:
        >>> log_dir_set("./logs")
        >>> log_dir()
        './logs'
    """
    return os.environ.get(ENV_LOG_DIR) or None


def log_dir_set(dir: str | os.PathLike[str] | None) -> str | None:
    """Set `VITALS_LOG_DIR` (None unsets it) and return its previous value.

    Example:
        >>> previous = ve.log_dir_set("evals")
        >>> ve.log_dir()
        'evals'
        >>> ve.log_dir_set(previous)  # as it was
        'evals'
    """
    previous = log_dir()
    if dir is None:
        os.environ.pop(ENV_LOG_DIR, None)
    else:
        os.environ[ENV_LOG_DIR] = os.fspath(dir)
    return previous


def in_eval_from_env() -> str | None:
    """`IN_VITALS_EVAL`'s value, or None when it is unset."""
    return os.environ.get(IN_EVAL_VARIABLE)


def in_eval_set(value: str | None) -> str | None:
    """Set `IN_VITALS_EVAL` (None unsets it) and return its previous value (None: unset).

    Example:
        >>> previous = in_eval_set("true")
        >>> in_eval_set(previous)
        'true'
    """
    previous = in_eval_from_env()
    if value is None:
        os.environ.pop(IN_EVAL_VARIABLE, None)
    else:
        os.environ[IN_EVAL_VARIABLE] = value
    return previous


def cache_dir_from_env() -> str | None:
    """The cache's directory from `VITALS_CACHE_DIR`, or None (unset or empty)."""
    return os.environ.get(ENV_CACHE_DIR) or None


def agent_cache_from_env() -> str | None:
    """The agent CLIs' cache from `VITALS_AGENT_CACHE`, or None (unset or empty)."""
    return os.environ.get(ENV_AGENT_CACHE) or None


def transport_from_env() -> str | None:
    """The HTTP client `VITALS_TRANSPORT` names ("aiohttp", "httpx"), or None."""
    return os.environ.get(ENV_TRANSPORT) or None


def gc_tuning_from_env() -> bool:
    """Whether runs may raise the garbage collector's thresholds: not when
    `VITALS_GC_TUNING` is "0"."""
    return os.environ.get(ENV_GC_TUNING, "1") != "0"


def _seconds(name: str, default: float) -> float:
    """The positive number of seconds the variable `name` holds, else `default`."""
    try:
        value = float(os.environ.get(name) or default)
    except ValueError:
        return default
    return value if value > 0 else default


def ship_interval_from_env(default: float = 5.0) -> float:
    """Seconds between shipments of a journal to an object store: `VITALS_SHIP_INTERVAL`,
    else `default`; a value that is not a positive number is the default.

    Example:
        >>> ship_interval_from_env()
        5.0
    """
    return _seconds(ENV_SHIP_INTERVAL, default)


def store_timeout_from_env(default: float = 60.0) -> float:
    """Seconds a run spends on an object store that does not answer before it gives up on
    it (at its start, mid-run, and putting its final log): `VITALS_STORE_TIMEOUT`, else
    `default`; a value that is not a positive number is the default.

    Example:
        >>> store_timeout_from_env()
        60.0
    """
    return _seconds(ENV_STORE_TIMEOUT, default)


def store_lease_from_env(default: float = 30.0) -> float:
    """Seconds the lock of a journal in an object store stays good without a heartbeat:
    `VITALS_STORE_LEASE`, else `default`; a value that is not a positive number is the
    default.

    Example:
        >>> store_lease_from_env()
        30.0
    """
    return _seconds(ENV_STORE_LEASE, default)


def staging_dir_from_env() -> str | None:
    """The staging directory from `VITALS_STAGING_DIR`, or None (unset or empty)."""
    return os.environ.get(ENV_STAGING_DIR) or None

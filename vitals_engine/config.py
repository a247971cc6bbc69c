"""Process-wide settings read from the environment."""

from __future__ import annotations

import os

__all__ = ["DEFAULT_LOG_DIR", "log_dir", "log_dir_set"]

ENV_LOG_DIR = "VITALS_LOG_DIR"
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
    """Set `VITALS_LOG_DIR` (None unsets it) and return its previous value."""
    previous = log_dir()
    if dir is None:
        os.environ.pop(ENV_LOG_DIR, None)
    else:
        os.environ[ENV_LOG_DIR] = os.fspath(dir)
    return previous

"""`Ray(...)`: where and how wide a run spreads over a Ray cluster (the run's `backend`,
`engine/options.py`). Importing it loads no Ray."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from .._errors import ConfigError
from ..engine.options import Backend

__all__ = ["INSTALL_HINT", "Ray", "import_ray"]

INSTALL_HINT = "pip install 'vitals-engine[ray]'"


def _positive_int(name: str, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(
            f"Ray({name}={value!r}) must be a whole number of at least 1, or None for the default."
        )


@dataclass(frozen=True, slots=True)
class Ray(Backend):
    """Run a task's samples on Ray workers: `task.eval(backend=ve.Ray())`.

    Args:
        address: the Ray cluster to join ("auto", "ray://host:10001", ...); None
            joins the Ray already initialised in this process, else starts a local one.
        workers: Ray actors running samples (default: one per CPU Ray sees).
        max_concurrency: samples at work across the cluster, shared among the
            workers (default: the run's `max_concurrency`).
        keep_alive: seconds the workers (and the run's limits hub) are kept, idle,
            after a run that ended well, for the next run in this process to start
            at once; 0 stops them at the end of each run.

    Example:
        >>> task.eval(backend=ve.Ray(address="auto", workers=8, max_concurrency=500))
    """

    address: str | None = None
    workers: int | None = None
    max_concurrency: int | None = None
    keep_alive: float = 300.0

    def __post_init__(self) -> None:
        if self.address is not None and (not isinstance(self.address, str) or not self.address):
            raise ConfigError(
                f"Ray(address={self.address!r}) must be a non-empty string such as 'auto' or "
                "'ray://host:10001', or None for a local Ray."
            )
        _positive_int("workers", self.workers)
        _positive_int("max_concurrency", self.max_concurrency)
        keep = self.keep_alive
        if isinstance(keep, bool) or not isinstance(keep, int | float) or not keep >= 0:
            raise ConfigError(
                f"Ray(keep_alive={keep!r}) must be a number of seconds, at least 0 (0: stop "
                "the workers at the end of each run)."
            )


def import_ray() -> Any:
    """The `ray` module, or a ConfigError saying how to install it."""
    try:  # by name: Ray is optional, and type checkers without it should not stumble
        ray = importlib.import_module("ray")
    except ImportError as exc:
        raise ConfigError(
            f"backend=ve.Ray() needs Ray, which is not installed: {INSTALL_HINT}"
        ) from exc
    return ray

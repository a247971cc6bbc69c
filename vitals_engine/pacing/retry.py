"""Retrying failed model calls: which errors, how often, how long to wait.

A retryable failure (429, 5xx, 529, 408/409, timeouts, dropped connections,
malformed bodies) is tried again up to `max_attempts` times in all. The wait
honours the provider's Retry-After when it gave one; otherwise it grows
exponentially with jitter. A non-retryable error (400, 401, 403, 404) fails
at once.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from .._errors import ConfigError, ProviderError

__all__ = ["Retry", "backoff_delay", "is_retryable"]


@dataclass(frozen=True, slots=True)
class Retry:
    """How model calls are retried.

    Args:
        max_attempts: tries in all, the first included (1 = never retry).
        timeout: seconds one attempt may take before it counts as a timeout.
        sample_timeout: seconds a whole sample (all its calls and waits) may take; a
            run setting only (`eval(retry=...)`), an error on a model's `Retry`.
        backoff: the first wait without a Retry-After, doubled each attempt.
        max_backoff: the longest wait between attempts.

    Example:
        >>> task.eval(retry=Retry(max_attempts=8, timeout=120))
    """

    max_attempts: int = 6
    timeout: float | None = None
    sample_timeout: float | None = None
    backoff: float = 1.0
    max_backoff: float = 60.0

    def __post_init__(self) -> None:
        attempts = self.max_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ConfigError(
                f"Retry(max_attempts={attempts!r}) must be a whole number of at least 1."
            )
        for name in ("timeout", "sample_timeout"):
            value = getattr(self, name)
            if value is not None and (not _is_number(value) or not 0 < value < math.inf):
                raise ConfigError(
                    f"Retry({name}={value!r}) must be a positive finite number of seconds, "
                    "or None for no limit."
                )
        for name in ("backoff", "max_backoff"):
            value = getattr(self, name)
            if not _is_number(value) or not 0 <= value < math.inf:
                raise ConfigError(
                    f"Retry({name}={value!r}) must be a finite number of seconds, 0 or more."
                )


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_retryable(error: BaseException) -> bool:
    return isinstance(error, ProviderError) and error.retryable


_RANDOM = random.Random()


def backoff_delay(
    attempt: int, error: BaseException, policy: Retry, rng: random.Random | None = None
) -> float:
    """Seconds to wait before attempt `attempt + 1`.

    A Retry-After, on any retryable answer (429, 503, 529 ...), is honoured
    (plus up to 10% jitter so waiters do not all return at once); otherwise
    `backoff * 2**(attempt-1)`, capped, with "equal jitter" (between half and
    all of it).
    """
    draw = (rng or _RANDOM).random
    retry_after = error.retry_after if isinstance(error, ProviderError) else None
    if retry_after is not None:
        return retry_after * (1 + 0.1 * draw())
    base = min(policy.max_backoff, policy.backoff * 2 ** (attempt - 1))
    return base / 2 + draw() * base / 2

"""The mock server's failures: the kinds it answers with, a planned `Failure`, and
`FailurePlans`, which picks the failure (if any) each request gets.

A request meets, in this order: the failures planned with `MockServer.fail()` (the
first that applies, used up after its `times`), a random share (`failure_rate()`), and a
per-minute request limit (`rpm()`), answered with 429 and the seconds until the oldest
request of the minute leaves it.
"""

from __future__ import annotations

import collections
import random
import threading
import time
from dataclasses import dataclass

__all__ = [
    "KINDS",
    "STATUSES",
    "STREAM_KINDS",
    "Failure",
    "FailurePlans",
    "announced_wait",
    "error_message",
]

#: The failure kinds that are an HTTP status, and that status.
STATUSES = {"429": 429, "500": 500, "503": 503, "529": 529, "400": 400, "401": 401, "404": 404}
#: Failures that only a streamed request can have.
STREAM_KINDS = frozenset({"cut", "stream-error"})
KINDS = frozenset(STATUSES) | {"quota", "malformed", "incomplete", "hang", "drop"} | STREAM_KINDS
_MESSAGES = {
    429: "Rate limit reached for requests",
    401: "Incorrect API key provided",
    404: "The model does not exist",
    400: "Invalid request",
    529: "Overloaded",
    503: "The model is overloaded. Please try again later.",
}


def error_message(status: int) -> str:
    """The message of the mock's error body for an HTTP `status`.

    Example:
        >>> error_message(429)
        'Rate limit reached for requests'
    """
    return _MESSAGES.get(status, "The server had an error while processing your request")


def announced_wait(kind: str, retry_after: float | None) -> float | None:
    """The Retry-After a failure announces: as asked, else 1 s for a 429 and none otherwise.

    Example:
        >>> announced_wait("429", None), announced_wait("500", None), announced_wait("500", 2)
        (1.0, None, 2)
    """
    return 1.0 if retry_after is None and kind == "429" else retry_after


@dataclass(slots=True)
class Failure:
    """A planned failure: what kind, for which model, how many more times.

    `MockServer.fail()` and `failure_rate()` plan them.

    Example:
        >>> from vitals_engine.testing import Failure
        >>> Failure("429", times=2, retry_after=0.5).applies("gpt-4.1-mini", streaming=False)
        True
        >>> Failure("cut").applies("gpt-4.1-mini", streaming=False)  # streamed replies only
        False
    """

    kind: str
    times: int | None = 1  # None: every time
    model: str | None = None
    retry_after: float | None = None
    header: str = "retry-after"  # or "retry-after-ms", or "reset" (provider reset headers)
    after: int | None = None  # streamed: events sent before the failure (None: half)
    status: int | None = None  # "stream-error": the HTTP status it stands for

    def applies(self, model: str, streaming: bool) -> bool:
        """Whether this failure is for a request to `model`, streamed or not."""
        return (self.model is None or self.model == model) and (
            streaming or self.kind not in STREAM_KINDS
        )


class FailurePlans:
    """The failures to come: planned ones, a random share, a per-minute limit.

    It shares the server's `lock` (`clear()` is called holding it) and its random draws
    (`rng`), so that a seed gives the same failures.

    Example:
        >>> plans = FailurePlans(threading.Lock(), random.Random(0))
        >>> plans.add(Failure("500", times=1))
        >>> plans.pick("gpt-4.1-mini", streaming=False).kind, plans.pick("gpt-4.1-mini", False)
        ('500', None)
    """

    def __init__(self, lock: threading.Lock, rng: random.Random) -> None:
        self._lock = lock
        self._random = rng
        self.planned: list[Failure] = []
        self.rate: tuple[float, Failure] | None = None
        self.rpm_limit: int | None = None
        self._minute: collections.deque[float] = collections.deque()

    def add(self, plan: Failure) -> None:
        """Plan `plan` after those planned before it."""
        with self._lock:
            self.planned.append(plan)

    def limit_rpm(self, limit: int | None) -> None:
        """Allow `limit` requests in any 60 s window (None: no limit), counting afresh."""
        self.rpm_limit = limit
        self._minute.clear()

    def clear(self) -> None:
        """No failure planned, no random share, no limit (call it holding the lock)."""
        self.planned.clear()
        self.rate = None
        self.rpm_limit = None
        self._minute.clear()

    def pick(self, model: str, streaming: bool) -> Failure | None:
        """The failure a request to `model` gets, or None: it is answered."""
        with self._lock:
            return (
                self._planned(model, streaming)
                or self._drawn(model, streaming)
                or self._over_rpm(model)
            )

    def _planned(self, model: str, streaming: bool) -> Failure | None:
        for plan in self.planned:
            if plan.applies(model, streaming):
                if plan.times is not None:
                    plan.times -= 1
                    if plan.times <= 0:
                        self.planned.remove(plan)
                return plan
        return None

    def _drawn(self, model: str, streaming: bool) -> Failure | None:
        rate = self.rate
        if (
            rate is not None
            and rate[1].applies(model, streaming)
            and self._random.random() < rate[0]
        ):
            return rate[1]
        return None

    def _over_rpm(self, model: str) -> Failure | None:
        """A 429 when the last minute already holds `rpm_limit` requests; else this request
        counts in the minute."""
        limit = self.rpm_limit
        if limit is None:
            return None
        now = time.monotonic()
        minute = self._minute
        while minute and now - minute[0] >= 60:
            minute.popleft()
        if len(minute) >= limit:
            wait = 60 - (now - minute[0])
            return Failure("429", None, model, round(wait, 3))
        minute.append(now)
        return None

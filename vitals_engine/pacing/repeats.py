"""One failure that every sample would meet: the same client error, call after call.

A request the API refuses as such (an unknown model, a parameter the model does not
take, a wrong key) fails alike for every sample. Left alone, a run of 10,000 samples
sends 10,000 requests to be told so. An endpoint of a run whose calls have all failed
with the same client error (same status, same words), `STOP_AFTER` times and not one
success, stops the run instead: the error gets `stops_run`, and says so.

Errors that depend on the sample (a prompt too long for the context, a refusal) differ
in their words or come after calls that succeeded, so they fail only their samples.

Example:
    >>> repeats = RepeatedFailures()
    >>> for _ in range(3):
    ...     repeats.judge(error)          # the third identical one stops the run
    >>> error.stops_run
    True
"""

from __future__ import annotations

from .._errors import ProviderError

__all__ = ["CLIENT_ERRORS", "STOP_AFTER", "RepeatedFailures"]

#: Identical failures, with no success before them, after which a run stops.
STOP_AFTER = 3
#: Statuses that say the request itself is wrong, whatever the sample.
CLIENT_ERRORS = frozenset((400, 401, 403, 404, 422))


class RepeatedFailures:
    """The client errors that ended an endpoint's calls in one run, until one succeeded."""

    __slots__ = ("_seen", "succeeded")

    def __init__(self) -> None:
        #: A call to the endpoint succeeded in this run: its requests are sound.
        self.succeeded = False
        self._seen: dict[tuple[int, str], int] = {}

    def judge(self, error: ProviderError) -> None:
        """Count a final failure; the `STOP_AFTER`th identical one stops the run."""
        if self.succeeded or error.retryable or error.status not in CLIENT_ERRORS:
            return
        key = (error.status, error.message)
        seen = self._seen[key] = self._seen.get(key, 0) + 1
        if seen >= STOP_AFTER and not error.stops_run:
            error.stops_run = True
            error.message = (
                f"{error.message}. The run stops: this same error ended its first {seen} "
                "calls to the model and none succeeded, so every sample would fail alike. "
                "Fix the model name, parameters or key, then resume the run (resume=True)"
            )
            error.args = (error.message,)

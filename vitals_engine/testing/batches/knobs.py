"""The mock server's batch knobs and counters, over its `BatchStore` (a base of
`MockServer`, which holds the store as `_batches`)."""

from __future__ import annotations

import collections

from .store import BatchStore, MockBatch

__all__ = ["BatchKnobs"]


class BatchKnobs:
    """`MockServer`'s face of its batches: delay, switches, planned failures, expiries and
    spoiled results, and what was submitted and polled."""

    _batches: BatchStore

    @property
    def batch_delay(self) -> float:
        """Seconds from a batch's submission until it has ended."""
        return self._batches.delay

    @batch_delay.setter
    def batch_delay(self, value: float) -> None:
        self._batches.delay = value

    @property
    def batches_enabled(self) -> bool:
        """False: every batch route answers 404, as from a server without batch APIs."""
        return self._batches.enabled

    @batches_enabled.setter
    def batches_enabled(self, value: bool) -> None:
        self._batches.enabled = value

    @property
    def max_batch_requests(self) -> int | None:
        """The most requests a batch may hold (None: no cap); more is refused with 400."""
        return self._batches.max_requests

    @max_batch_requests.setter
    def max_batch_requests(self, value: int | None) -> None:
        self._batches.max_requests = value

    @property
    def batches(self) -> dict[str, MockBatch]:
        """The batches submitted, by id ("batch_…", "msgbatch_…", "batches/…")."""
        return self._batches.batches

    @property
    def batch_submissions(self) -> collections.Counter[str]:
        """How many times each custom id came in an accepted batch."""
        return self._batches.submissions

    @property
    def batch_polls(self) -> collections.Counter[str]:
        """Status requests (`GET` of a batch), by batch id."""
        return self._batches.polls

    def fail_in_batch(self, kind: str, *, times: int | None = 1, model: str | None = None) -> None:
        """Fail the next `times` batched requests (for `model`, or any) with `kind`: one of
        "400", "429", "500" (answered with that error inside the batch's results) or
        "expired" (reported expired while the batch completes).

        Example:
            >>> server.fail_in_batch("429", times=2, model="gpt-4.1-mini")
        """
        self._batches.fail_in_batch(kind, times=times, model=model)

    def expire_batches(self, times: int = 1, *, finished: int = 0) -> None:
        """Let the next `times` batches expire after `batch_delay`, their first `finished`
        requests answered and the rest expired.

        Example:
            >>> server.expire_batches(finished=2)    # the next batch: 2 results, the rest expired
        """
        self._batches.expire_batches(times, finished=finished)

    def spoil_batch_results(
        self, *flaws: str, lost: int = 0, times: int = 1, reads: int | None = None
    ) -> None:
        """Serve the results of the next `times` batches spoiled: with a bad line for each
        of `flaws` ("junk": a line that is no result; "truncated": the last line cut
        short; "no-id", "null-id", "numeric-id": a line without its custom id, with a null
        one, with a number; "duplicate": a second line for a request, with another's
        answer), and without the first `lost` requests that succeeded, which the batch's
        counts still count. The first `reads` reads of the results are spoiled (None:
        every read; then the whole results).

        Example:
            >>> server.spoil_batch_results("junk", "truncated")
            >>> server.spoil_batch_results(lost=2, reads=1)   # the first read lacks two
        """
        self._batches.spoil_results(flaws, lost=lost, times=times, reads=reads)

    def end_batches(self) -> None:
        """End every batch in progress now (its next poll finds it ended, every request
        answered), whatever `batch_delay` was when it came in.

        Example:
            >>> server.batch_delay = 3600    # batches that wait ...
            >>> server.end_batches()         # ... until the test lets them end
        """
        self._batches.end_soon()

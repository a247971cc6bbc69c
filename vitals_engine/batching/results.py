"""What a provider's results say of each request of one batch, once it has ended.

The results are read line by line (`providers/batch_api.py`): good lines are outcomes,
bad ones "unreadable" outcomes. Here they meet the batch's requests and the provider's
own count of the requests it ended (`BatchState.answered`):

- a request with a good line takes its outcome; a second line for it (a duplicate) is
  reported and dropped: the first is kept;
- a request whose line could not be read (the line names it, or it has no line and
  some line named no request) fails with a retryable `MalformedResponse`: the run's
  retry policy sends it again, in a later batch;
- a request with no line, where the provider counts more requests ended than the
  results hold (good lines and bad), was lost by the provider: the queue asks for the
  results again (`REFETCHES` more times, waiting longer each time), and if it is still
  missing, it fails with a `ProviderError` that says so and is not retried: it ran, and
  was paid for (when the counts cover only some of the missing, which ones ran cannot
  be told: all fail so, and none is paid for twice);
- a request with no line that the provider does not count as ended never ran: it
  counts as expired (the queue sends it again, within its limit).

Everything not taken is reported: one warning per batch, and the same in the batch's
record (`BatchRecord.notes`), in the journal and the log.

Invariant: whatever the results hold, reading them never raises; each request of the
batch gets exactly one verdict.

Example:
    >>> results = BatchResults.read(provider, "batch_1", ["a", "b"], outcomes, answered=2)
    >>> results.of("a")        # BatchOutcome('a', 'succeeded', ...)
    >>> results.short          # True: the provider ended more than its results hold
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._errors import MalformedResponse, ProviderError
from .._logging import log
from ..providers.batch_api import BatchOutcome

__all__ = ["REFETCHES", "BatchResults"]

#: Times the results of a batch that lack requests the provider ended are asked for again.
REFETCHES = 3
#: Problems a batch's record and its warning name, at most (the rest are counted).
_NAMED = 20


@dataclass(slots=True)
class BatchResults:
    """The verdict of a batch's results on each of its requests (see the module's
    docstring): made by `read`, asked with `of`."""

    provider: Any
    batch_id: str
    #: The first good outcome of each request of the batch, by custom id.
    taken: dict[str, BatchOutcome] = field(default_factory=dict)
    #: Requests of the batch whose line could not be read: why.
    unreadable: dict[str, str] = field(default_factory=dict)
    #: Bad lines that name no request of the batch: why.
    loose: list[str] = field(default_factory=list)
    #: Every line not taken, in the order read: what it was.
    bad: list[str] = field(default_factory=list)
    #: Requests with no line at all.
    missing: list[str] = field(default_factory=list)
    #: Requests the provider ended, by its counts (None: it does not say).
    answered: int | None = None
    #: Requests the results name that are not the batch's (readable lines).
    others: int = 0
    #: How many times the results were read.
    reads: int = 1

    @classmethod
    def read(
        cls,
        provider: Any,
        batch_id: str,
        ids: Sequence[str],
        outcomes: Sequence[BatchOutcome],
        answered: int | None,
        reads: int = 1,
    ) -> BatchResults:
        """The verdict of `outcomes` (as the batch API read them) on requests `ids`."""
        results = cls(provider, batch_id, answered=answered, reads=reads)
        ours = set(ids)
        others: set[str] = set()
        for outcome in outcomes:
            custom_id = outcome.custom_id
            if outcome.kind == "unreadable":
                why = str(outcome.body)
                results.bad.append(why)
                if custom_id in ours and custom_id not in results.taken:
                    results.unreadable.setdefault(custom_id, why)
                else:
                    results.loose.append(why)
            elif custom_id not in ours:
                others.add(custom_id)
            elif custom_id in results.taken:
                results.bad.append(f"a duplicate line for request {custom_id} (the first kept)")
            else:
                results.taken[custom_id] = outcome
                cut = results.unreadable.pop(custom_id, None)  # a good line after a bad one
                if cut is not None:
                    results.loose.append(cut)
        results.others = len(others)
        results.missing = [i for i in ids if i not in results.taken and i not in results.unreadable]
        return results

    @property
    def short(self) -> bool:
        """Whether the results lack requests the provider counts as ended: some are
        missing, and there are fewer lines, good and bad, than the provider ended."""
        if not self.missing or self.answered is None:
            return False
        held = len(self.taken) + self.others + len(self.unreadable) + len(self.loose)
        return self.answered > held

    def of(self, custom_id: str) -> BatchOutcome | ProviderError:
        """Request `custom_id`'s outcome, or the error it fails with."""
        found = self.taken.get(custom_id)
        if found is not None:
            return found
        provider = self.provider
        why = self.unreadable.get(custom_id)
        if why is None and self.short:
            return ProviderError(
                f"batch {self.batch_id}: the provider counts request {custom_id} as done "
                f"but lost its result (not in its results, read {self.reads} times); "
                "not sent again: it ran and was paid for",
                provider=provider.name,
                model=provider.model,
            )
        if why is None and not self.loose:
            return BatchOutcome(custom_id, "expired", 0, None)  # never ran: sent again
        if why is None:
            why = f"no line names it, and {len(self.loose)} could not be read"
        return MalformedResponse(
            f"batch {self.batch_id}: the result of request {custom_id} could not be read "
            f"({why}); it goes in a later batch",
            provider=provider.name,
            model=provider.model,
        )

    @property
    def notes(self) -> list[str]:
        """What was not taken, for the batch's record: each bad line, each duplicate,
        the requests lost (at most `_NAMED`, then how many more)."""
        found = list(self.bad)
        if self.short:
            found += [
                f"request {i}: counted done by the provider, lost from its results"
                for i in self.missing
            ]
        if len(found) > _NAMED:
            found = [*found[:_NAMED], f"... and {len(found) - _NAMED} more"]
        return found

    def report(self) -> None:
        """Warn, once for the batch, of what was not taken."""
        bad = len(self.bad)
        lost = len(self.missing) if self.short else 0
        if not bad and not lost:
            return
        said: list[str] = []
        if bad:
            said.append(
                f"{bad} line{'s' if bad != 1 else ''} could not be taken (the requests of "
                "lines that could not be read go in a later batch; a duplicate's first line "
                "is kept)"
            )
        if lost:
            said.append(
                f"{lost} request{'s' if lost != 1 else ''} the provider counts as done "
                f"{'are' if lost != 1 else 'is'} lost from them after {self.reads} reads "
                "(failed, not sent again)"
            )
        provider = self.provider
        log.warning(
            f"vitals-engine: the results of batch {self.batch_id} ({provider.model_id}): "
            f"{'; '.join(said)}: {'; '.join(self.notes)}"
        )

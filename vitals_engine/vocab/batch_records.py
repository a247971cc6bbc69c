"""What a run records of each provider batch it sends: in its journal, so a run that
stopped can reattach to the batches it left out, and in its log, so a reader sees them.

A batch is known by a `key` of the run's own from before it is submitted (the provider
gives its `id` only once it took the batch). Records of one batch are written as it
goes and merged in order (`merged`): the first names its endpoint and its requests, a
later one its provider id, the last how it ended.

Each request (`BatchRequest`) says which call it was: the sample, epoch and role that
made it and a digest of its body. A resumed run making the same call (same sample,
epoch, role, endpoint and body) takes that request's outcome from the batch instead of
sending it again.

Example:
    >>> first = BatchRecord(key="vb-1", provider="OpenAI", requests=1,
    ...                     entries=[BatchRequest("ve-1", 7, 1, "solver", "ab12")])
    >>> first.merged(BatchRecord(key="vb-1", id="batch_9")).id
    'batch_9'
"""

from __future__ import annotations

import hashlib
from typing import Any, Self

import msgspec

__all__ = ["BatchRecord", "BatchRequest", "BatchSummary", "body_digest"]

_encoder = msgspec.json.Encoder()


class BatchRequest(msgspec.Struct, array_like=True, frozen=True):
    """One request of a batch: its id in the batch and the call it was."""

    custom_id: str
    sample: int | str | None
    epoch: int
    role: str
    digest: str


class BatchSummary(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What is known of one batch but its requests (fields not yet known are None): what
    a log lists and the viewer shows."""

    key: str
    provider: str | None = None
    base_url: str | None = None
    model: str | None = None
    #: The provider's id for the batch, once it was submitted.
    id: str | None = None
    requests: int | None = None
    created: float | None = None
    submitted: float | None = None
    ended: float | None = None
    #: The provider's last word on it ("completed", "ended", ...), or "not submitted".
    status: str | None = None
    counts: dict[str, int] | None = None
    #: What its results held that was not taken: lines that could not be read,
    #: duplicates, requests the provider counted as done but lost (`batching/results.py`).
    notes: list[str] | None = None

    def merged(self, later: BatchSummary) -> Self:
        """This record with the fields `later` sets."""
        changes = {
            name: value
            for name in self.__struct_fields__
            if name != "key" and (value := getattr(later, name, None)) is not None
        }
        return msgspec.structs.replace(self, **changes) if changes else self

    @property
    def endpoint(self) -> tuple[str, str, str]:
        """(provider, base URL, model), as a provider names its endpoint."""
        return (self.provider or "", self.base_url or "", self.model or "")

    @property
    def pending(self) -> bool:
        """Submitted and not known to have ended."""
        return self.id is not None and self.ended is None


class BatchRecord(BatchSummary, kw_only=True, omit_defaults=True):
    """What is known of one batch, with its requests (in the journal; in a log only those
    of samples the run did not finish).

    `LoggedEval.batches` lists a run's batches (without their requests).

    Example:
        >>> from vitals_engine.testing import MockServer
        >>> rows = [{"input": f"What's 2+{n}?", "target": str(2 + n)} for n in (2, 3)]
        >>> with MockServer() as server:  # it speaks the providers' batch APIs
        ...     chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="x")
        ...     task = ve.Task(rows, ve.generate(chat), ve.detect_includes())
        ...     _ = task.eval(batch=ve.Batch(poll=0.05), progress=False)
        >>> batches = ve.read_log(task.log_path).batches
        >>> [(b.provider, b.model, b.requests, b.status) for b in batches]
        [('OpenAI', 'gpt-4.1-mini', 2, 'completed')]
    """

    entries: list[BatchRequest] | None = None


def body_digest(body: Any) -> str:
    """A digest of a request body: equal bodies, equal digests, across runs.

    Example:
        >>> body = {"model": "m", "messages": []}
        >>> body_digest(body) == body_digest(dict(body))
        True
    """
    return hashlib.blake2b(_encoder.encode(body), digest_size=12).hexdigest()

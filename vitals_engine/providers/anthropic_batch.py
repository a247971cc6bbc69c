"""Anthropic's Message Batches API: `/messages/batches` takes the requests in one JSON
body, says how the batch is doing (`processing_status`: in_progress, canceling,
ended), and once it has ended serves every request's result as JSON Lines at its
`results_url`: `{"custom_id", "result": {"type": "succeeded", "message"} | {"type":
"errored", "error"} | {"type": "expired"} | {"type": "canceled"}}`.

Example:
    >>> api = AnthropicBatchApi(provider)
    >>> batch_id = await api.submit(entries)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import msgspec

from .anthropic import ERROR_STATUS
from .batch_api import BatchApi, BatchEntry, BatchOutcome, BatchState, read_lines

__all__ = ["AnthropicBatchApi"]

_encoder = msgspec.json.Encoder()
#: The request counts of requests that ended (the rest are "processing").
_ENDED = frozenset({"succeeded", "errored", "canceled", "expired"})


class AnthropicBatchApi(BatchApi):
    """`/v1/messages/batches`."""

    max_requests: ClassVar[int] = 100_000
    max_bytes: ClassVar[int] = 250_000_000  # the cap is 256 MB
    endpoint: ClassVar[str] = "/messages/batches"

    def encode(self, entry: BatchEntry) -> bytes:
        return _encoder.encode({"custom_id": entry.custom_id, "params": entry.body})

    async def submit(self, entries: Sequence[BatchEntry], key: str = "") -> str:
        requests = b",".join(self.take_encoded(entry) for entry in entries)
        made = await self.post("/messages/batches", b'{"requests":[' + requests + b"]}")
        return str(made["id"])

    async def state(self, batch_id: str) -> BatchState:
        batch: dict[str, Any] = msgspec.json.decode(
            (await self.get(f"/messages/batches/{batch_id}")).body
        )
        status = str(batch.get("processing_status"))
        counts = {k: int(v) for k, v in (batch.get("request_counts") or {}).items()}
        given = batch.get("results_url")
        results = (
            self.resolve(str(given)) if given else self.url(f"/messages/batches/{batch_id}/results")
        )
        answered = sum(counts.get(k, 0) for k in _ENDED) if counts.keys() & _ENDED else None
        return BatchState(batch_id, status, status == "ended", counts, None, results, answered)

    async def outcomes(self, state: BatchState) -> list[BatchOutcome]:
        data = (await self.get(str(state.results))).body
        return read_lines(data, f"results of {state.id}", _outcome)

    async def cancel(self, batch_id: str) -> None:
        await self.post(f"/messages/batches/{batch_id}/cancel", b"")


def _outcome(custom_id: str, line: dict[str, Any]) -> BatchOutcome:
    """A line's outcome (a KeyError, TypeError ... for a line without a result:
    `read_lines` reports it)."""
    result = line["result"]
    kind = result["type"]
    if kind == "succeeded":
        return BatchOutcome(custom_id, "succeeded", 200, result.get("message"))
    if kind == "expired":
        return BatchOutcome(custom_id, "expired", 0, result)
    if kind == "canceled":
        return BatchOutcome(custom_id, "cancelled", 0, result)
    error = result.get("error") or {}
    inner: dict[str, Any] = error["error"] if isinstance(error.get("error"), dict) else error
    status = ERROR_STATUS.get(str(inner.get("type")), 500)
    return BatchOutcome(custom_id, "errored", status, {"type": "error", "error": inner})

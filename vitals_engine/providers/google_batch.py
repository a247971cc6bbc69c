"""Gemini's Batch API, with the requests inline: `models/{model}:batchGenerateContent`
takes them in one JSON body, each with its key in `metadata`, and answers with a
long-running operation named `batches/{id}`. `GET batches/{id}` says how the batch is
doing (`metadata.state`: BATCH_STATE_PENDING, _RUNNING, _SUCCEEDED, _FAILED,
_CANCELLED, _EXPIRED) and, once `done`, holds each request's `response` (a
generateContent reply) or `error` (`{code, message, status}`), in the order sent, with
its `metadata` echoed, under `response.inlinedResponses.inlinedResponses` (also under
`metadata.output`, which is read when the first is missing). A request's error carries
a gRPC code, mapped to the HTTP status a live call would have had; DEADLINE_EXCEEDED
and CANCELLED mean it did not run before the batch expired or was cancelled.

Example:
    >>> api = GeminiBatchApi(provider)
    >>> batch_id = await api.submit(entries)      # "batches/123"
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar, Literal

import msgspec

from .batch_api import BatchApi, BatchEntry, BatchOutcome, BatchState, unreadable

__all__ = ["GeminiBatchApi"]

_encoder = msgspec.json.Encoder()
#: A request's error is a google.rpc.Status: its `code` is a gRPC code, here the HTTP
#: status a live call would have had (as the live API maps them).
_HTTP = {3: 400, 5: 404, 7: 403, 8: 429, 9: 400, 11: 400, 13: 500, 14: 503, 16: 401}
_GONE: dict[int, Literal["expired", "cancelled"]] = {4: "expired", 1: "cancelled"}
_ENDED = {
    "BATCH_STATE_SUCCEEDED": "succeeded",
    "BATCH_STATE_FAILED": "failed",
    "BATCH_STATE_CANCELLED": "cancelled",
    "BATCH_STATE_EXPIRED": "expired",
}


#: Seconds a provider's clock may be behind ours when `find` looks back.
_SLACK = 600.0


def _seconds(stamp: Any) -> float | None:
    """An RFC 3339 time as Unix seconds (None for anything else)."""
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class GeminiBatchApi(BatchApi):
    """`models/{model}:batchGenerateContent` and `batches/{id}`, requests inline."""

    max_requests: ClassVar[int] = 50_000
    max_bytes: ClassVar[int] = 19_000_000  # inline requests: 20 MB in all
    endpoint: ClassVar[str] = ":batchGenerateContent"
    #: Batches per page when `find` reads the provider's list.
    page_size: ClassVar[int] = 100

    def __init__(self, provider: Any) -> None:
        super().__init__(provider)
        self._orders: dict[str, list[str]] = {}

    def encode(self, entry: BatchEntry) -> bytes:
        return _encoder.encode({"request": entry.body, "metadata": {"key": entry.custom_id}})

    async def submit(self, entries: Sequence[BatchEntry], key: str = "") -> str:
        name = key or (f"vitals-{entries[0].custom_id}" if entries else "vitals")
        requests = b",".join(self.take_encoded(entry) for entry in entries)
        body = (
            b'{"batch":{"display_name":'
            + _encoder.encode(name)
            + b',"input_config":{"requests":{"requests":['
            + requests
            + b"]}}}}"
        )
        provider: Any = self.provider
        made = await self.post(f"{provider._model_url()}:batchGenerateContent", body)
        name = str(made["name"])
        self._orders[name] = [e.custom_id for e in entries]  # for responses without keys
        return name

    async def find(self, key: str, since: float) -> str | None:
        token = ""
        while True:  # newest first, a page at a time, back to `since` (with a clock's slack)
            query = f"/batches?pageSize={self.page_size}" + (f"&pageToken={token}" if token else "")
            page = msgspec.json.decode((await self.get(query)).body)
            operations = page.get("operations") or []
            for operation in operations:
                if (operation.get("metadata") or {}).get("displayName") == key:
                    return str(operation["name"])
            token = str(page.get("nextPageToken") or "")
            oldest = (
                _seconds((operations[-1].get("metadata") or {}).get("createTime"))
                if operations
                else None
            )
            if not token or (oldest is not None and oldest < since - _SLACK):
                return None

    async def state(self, batch_id: str) -> BatchState:
        operation: dict[str, Any] = msgspec.json.decode((await self.get(f"/{batch_id}")).body)
        metadata = operation.get("metadata") or {}
        done = bool(operation.get("done"))
        status = str(metadata.get("state") or ("BATCH_STATE_SUCCEEDED" if done else ""))
        ended = done or status in _ENDED
        failed = None
        if status == "BATCH_STATE_FAILED" or operation.get("error"):
            error = operation.get("error") or {}
            failed = str(error.get("message") or "the batch failed")
        stats = metadata.get("batchStats")
        counts = {k: int(v) for k, v in (stats or {}).items() if str(v).isdigit()}
        answered = None  # proto3 JSON leaves zero counts out: present stats, zero unless said
        if isinstance(stats, dict):
            answered = counts.get("successfulRequestCount", 0) + counts.get("failedRequestCount", 0)
        return BatchState(batch_id, status, ended, counts, failed, operation, answered)

    async def outcomes(self, state: BatchState) -> list[BatchOutcome]:
        """Each inlined response's outcome, a response that cannot be read "unreadable". A
        response without its key takes the key sent in its place, when every response is
        there (the order this process sent; a resumed run has none)."""
        items = _inlined(state.results)
        if not isinstance(items, list):
            return [unreadable("", f"the inlined responses of {state.id}: not a list")]
        order = self._orders.get(state.id, [])
        if len(items) == len(order):  # whole: a later read cannot do better
            self._orders.pop(state.id, None)
        else:
            order = []  # a response short or extra: places no longer say which request
        found: list[BatchOutcome] = []
        for index, item in enumerate(items):
            where = f"response {index + 1} of the inlined responses of {state.id}"
            try:
                found.append(_outcome(item, order[index] if order else None, where))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                key = _key(item) or (order[index] if order else "")
                found.append(unreadable(key, f"{where}: not a result ({type(exc).__name__})"))
        return found

    async def cancel(self, batch_id: str) -> None:
        await self.post(f"/{batch_id}:cancel", b"")


def _outcome(item: Any, sent: str | None, where: str) -> BatchOutcome:
    """An inlined response's outcome (`sent`: the key sent in its place, if known): its
    reply, its error (a gRPC code), or "unreadable" for one without a key or cut short."""
    if not isinstance(item, dict):
        return unreadable("", f"{where}: not an object")
    metadata = item.get("metadata")
    key = metadata.get("key") if isinstance(metadata, dict) else None
    if key is None:
        key = sent
    if not isinstance(key, str) or not key:
        why = "no metadata.key" if key is None else f"metadata.key {_encoder.encode(key).decode()}"
        return unreadable("", f"{where}: {why}")
    if "response" in item:
        return BatchOutcome(key, "succeeded", 200, item["response"])
    if "error" not in item:
        return unreadable(key, f"{where}: neither a response nor an error (cut short?)")
    error = item["error"]
    code = int(error.get("code") or 13)
    if code in _GONE:  # ran out of time, or the batch was cancelled, before it ran
        return BatchOutcome(key, _GONE[code], 0, error)
    return BatchOutcome(key, "errored", _HTTP.get(code, 500), {"error": error})


def _key(item: Any) -> str:
    """The key an inlined response names in its `metadata` ("" for none that is a string)."""
    metadata = item.get("metadata") if isinstance(item, dict) else None
    key = metadata.get("key") if isinstance(metadata, dict) else None
    return key if isinstance(key, str) else ""


def _inlined(operation: Any) -> Any:
    """The inlined responses of a batch's operation: under `response`, else under
    `metadata.output` ([] when neither holds any)."""

    def field(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, dict) else None

    for output in (field(operation, "response"), field(field(operation, "metadata"), "output")):
        found = field(field(output, "inlinedResponses"), "inlinedResponses")
        if found:
            return found
    return []

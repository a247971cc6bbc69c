"""OpenAI's Batch API, for Chat Completions and the Responses API alike: a JSONL file
of requests uploaded to `/files`, a batch made of it at `/batches`, and the outcomes
read from the batch's output and error files.

Each input line is `{"custom_id", "method": "POST", "url", "body"}`, its `url` the
provider's endpoint (`/v1/chat/completions` or `/v1/responses`, the batch's too). An
output line holds `{"custom_id", "response": {"status_code", "body"}}`; the error file
holds the requests that failed, with an error response or, for those
that expired or were cancelled before they ran, `{"error": {"code": "batch_expired" |
"batch_cancelled"}}` and no response. A batch that did not validate ends "failed" with
its errors.

Example:
    >>> api = OpenAIBatchApi(provider)
    >>> batch_id = await api.submit(entries)
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any, ClassVar

import msgspec

from .batch_api import BatchApi, BatchEntry, BatchOutcome, BatchState, read_lines

__all__ = ["OpenAIBatchApi"]

_encoder = msgspec.json.Encoder()

#: Statuses after which a batch's files are final.
_ENDED = frozenset({"completed", "expired", "cancelled", "failed"})
_GONE = {"batch_expired": "expired", "batch_cancelled": "cancelled"}
#: The metadata key that labels a batch with the run's name for it (`find`).
LABEL = "vitals_batch"
#: Seconds a provider's clock may be behind ours when `find` looks back.
_SLACK = 600.0


class OpenAIBatchApi(BatchApi):
    """`/v1/files` and `/v1/batches`, for the provider's endpoint's requests."""

    max_requests: ClassVar[int] = 50_000
    max_bytes: ClassVar[int] = 190_000_000  # the file cap is 200 MB
    endpoint: ClassVar[str] = "/batches"
    #: Batches per page when `find` reads the provider's list.
    page_size: ClassVar[int] = 100

    @property
    def _url(self) -> str:
        """The endpoint the batch's requests go to, as OpenAI's batch API names it."""
        return getattr(self.provider, "batch_url", "/v1/chat/completions")

    def encode(self, entry: BatchEntry) -> bytes:
        line = {
            "custom_id": entry.custom_id,
            "method": "POST",
            "url": self._url,
            "body": entry.body,
        }
        return _encoder.encode(line) + b"\n"

    async def submit(self, entries: Sequence[BatchEntry], key: str = "") -> str:
        content = b"".join(self.take_encoded(entry) for entry in entries)
        boundary = f"vitals-{secrets.token_hex(12)}"
        form = _multipart(boundary, {"purpose": "batch"}, ("file", "batch.jsonl", content))
        uploaded = await self.post(
            "/files", form, **{"content-type": f"multipart/form-data; boundary={boundary}"}
        )
        body = {
            "input_file_id": uploaded["id"],
            "endpoint": self._url,
            "completion_window": "24h",
        }
        if key:
            body["metadata"] = {LABEL: key}
        made = await self.post("/batches", _encoder.encode(body))
        return str(made["id"])

    async def find(self, key: str, since: float) -> str | None:
        after: str | None = None
        while True:  # newest first, a page at a time, back to `since` (with a clock's slack)
            query = f"/batches?limit={self.page_size}" + (f"&after={after}" if after else "")
            page = msgspec.json.decode((await self.get(query)).body)
            batches = page.get("data") or []
            for batch in batches:
                if (batch.get("metadata") or {}).get(LABEL) == key:
                    return str(batch["id"])
            oldest = batches[-1].get("created_at") if batches else None
            if not page.get("has_more") or not batches or (oldest or 0) < since - _SLACK:
                return None
            after = str(batches[-1]["id"])

    async def state(self, batch_id: str) -> BatchState:
        data = (await self.get(f"/batches/{batch_id}")).body
        batch: dict[str, Any] = msgspec.json.decode(data)
        status = str(batch.get("status"))
        failed = None
        if status == "failed":
            errors = (batch.get("errors") or {}).get("data") or []
            failed = "; ".join(str(e.get("message")) for e in errors) or "the batch failed"
        counts = {k: int(v) for k, v in (batch.get("request_counts") or {}).items()}
        files = (batch.get("output_file_id"), batch.get("error_file_id"))
        answered = _answered(counts)
        return BatchState(batch_id, status, status in _ENDED, counts, failed, files, answered)

    async def outcomes(self, state: BatchState) -> list[BatchOutcome]:
        found: list[BatchOutcome] = []
        names = ("output file", "error file")
        for file_id, name in zip(state.results or (), names, strict=False):
            if not file_id:
                continue
            data = (await self.get(f"/files/{file_id}/content")).body
            found.extend(read_lines(data, f"{name} {file_id}", _outcome))
        return found

    async def cancel(self, batch_id: str) -> None:
        await self.post(f"/batches/{batch_id}/cancel", b"")


def _answered(counts: dict[str, int]) -> int | None:
    """Requests the batch's counts say ended (expired and cancelled ones count as failed)."""
    if "completed" not in counts and "failed" not in counts:
        return None
    return counts.get("completed", 0) + counts.get("failed", 0)


def _outcome(custom_id: str, line: dict[str, Any]) -> BatchOutcome:
    """A line's outcome (a KeyError, TypeError ... for a line that is neither a response
    nor an error: `read_lines` reports it)."""
    response = line.get("response")
    if response:
        status = int(response.get("status_code") or 200)
        kind = "succeeded" if status < 400 else "errored"
        return BatchOutcome(custom_id, kind, status, response.get("body"))
    error = line["error"]
    if not isinstance(error, dict):
        raise TypeError(f"error is {type(error).__name__}")
    gone = _GONE.get(str(error.get("code")))
    if gone == "expired":
        return BatchOutcome(custom_id, "expired", 0, error)
    if gone == "cancelled":
        return BatchOutcome(custom_id, "cancelled", 0, error)
    return BatchOutcome(custom_id, "errored", 500, {"error": error})


def _multipart(boundary: str, fields: dict[str, str], file: tuple[str, str, bytes]) -> bytes:
    """A multipart/form-data body of text `fields` and one file (name, filename, bytes)."""
    parts: list[bytes] = []
    for name, value in fields.items():
        parts.append(
            f'--{boundary}\r\ncontent-disposition: form-data; name="{name}"\r\n\r\n'
            f"{value}\r\n".encode()
        )
    name, filename, content = file
    parts.append(
        f'--{boundary}\r\ncontent-disposition: form-data; name="{name}"; '
        f'filename="{filename}"\r\ncontent-type: application/jsonl\r\n\r\n'.encode()
        + content
        + b"\r\n"
    )
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts)

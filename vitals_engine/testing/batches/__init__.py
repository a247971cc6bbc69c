"""The providers' batch APIs on the mock server: many requests sent at once, results later.

Each request of a batch is answered by the same brain and the format's own
`render()` as a live request (so a batched reply equals a live one, usage
block included), is recorded in `server.log` (with its batch and custom id)
and counted in `server.requests`. A batch ends `batch_delay` seconds after
its submission; until then it is in progress, its requests finishing one by
one over that time (a poll sees them done so far). Routes, relative to the
server's root:

OpenAI (`/v1`), a JSONL file of requests uploaded first:

- `POST /v1/files` (multipart: `purpose=batch`, `file` a `.jsonl`, each line
  `{"custom_id", "method": "POST", "url": "/v1/chat/completions" | "/v1/responses", "body"}`)
  → file object `{"id": "file-…", "object": "file", "bytes", "created_at",
  "filename", "purpose", "status": "processed", "expires_at", "status_details"}`;
  `GET /v1/files/{id}`, `GET /v1/files/{id}/content` (the bytes), `DELETE /v1/files/{id}`;
- `POST /v1/batches` (`input_file_id`, `endpoint` "/v1/chat/completions" or
  "/v1/responses", `completion_window` "24h", optional `metadata`) → batch object,
  `"status": "validating"`; each line is read as a request to the batch's endpoint (the
  Responses format's for "/v1/responses", refusals included);
  `GET /v1/batches/{id}`; `GET /v1/batches?limit=&after=` (newest first: `{"object":
  "list", "data", "first_id", "last_id", "has_more"}`); `POST /v1/batches/{id}/cancel` →
  `"cancelling"`, then `"cancelled"`.
  Batch object: `id` "batch_…", `object` "batch", `endpoint`, `errors`, `input_file_id`,
  `completion_window`, `status` (validating, in_progress, cancelling, completed, failed,
  expired, cancelled), `output_file_id`, `error_file_id` (null until there is one),
  `created_at`, `in_progress_at`, `expires_at`, `finalizing_at`, `completed_at`, `failed_at`,
  `expired_at`, `cancelling_at`, `cancelled_at` (unix seconds or null), `request_counts`
  `{total, completed, failed}`, `metadata`. A file the API would refuse (a line not JSON,
  a duplicate or missing `custom_id`, another `url` or `method`, two models, no lines)
  makes a `failed` batch whose `errors` is `{"object": "list", "data": [{"code", "message",
  "param", "line"}]}` (codes `invalid_json_line`, `duplicate_custom_id`, `url_mismatch`,
  `model_mismatch`, `empty_file`, `invalid_request`).
  Output file lines: `{"id": "batch_req_…", "custom_id", "response": {"status_code": 200,
  "request_id", "body": <chat.completion> | <response>}, "error": null}`; the error file
  holds a failed request as a non-200 `response` whose body is the format's error body (a
  refused request's: the body and status the live endpoint answers), or (expired,
  cancelled) `"response": null, "error": {"code": "batch_expired" | "batch_cancelled",
  "message"}`. Expired and cancelled requests count as `failed`.

Anthropic (`/v1`):

- `POST /v1/messages/batches` with `{"requests": [{"custom_id", "params"}]}` → message batch
  `{"id": "msgbatch_…", "type": "message_batch", "processing_status": "in_progress" |
  "canceling" | "ended", "request_counts": {processing, succeeded, errored, canceled,
  expired}, "ended_at", "created_at", "expires_at", "archived_at", "cancel_initiated_at",
  "results_url"}` (RFC 3339 times; `results_url` once ended);
- `GET /v1/messages/batches/{id}`, `POST /v1/messages/batches/{id}/cancel`;
- `GET /v1/messages/batches/{id}/results` (once ended; 400 before) → JSONL lines
  `{"custom_id", "result": {"type": "succeeded", "message"} | {"type": "errored",
  "error": {"type": "error", "error": {"type", "message"}}} | {"type": "canceled"} |
  {"type": "expired"}}`.

Gemini (`/v1beta`), inlined requests only:

- `POST /v1beta/models/{model}:batchGenerateContent` with `{"batch": {"display_name",
  "input_config": {"requests": {"requests": [{"request": {GenerateContentRequest},
  "metadata": {"key": …}}]}}}}` (camelCase keys as well) → the long-running operation
  `{"name": "batches/…", "metadata": {"@type": "…GenerateContentBatch", "model":
  "models/{model}", "displayName", "createTime", "updateTime", "batchStats", "state",
  "name"}}`, `state` BATCH_STATE_PENDING;
- `GET /v1beta/batches/{id}` → the operation, `state` BATCH_STATE_RUNNING, then
  SUCCEEDED, EXPIRED or CANCELLED with `"done": true`, `metadata.endTime`, and the
  responses in both `response` (`{"@type": "…GenerateContentBatchOutput",
  "inlinedResponses": {"inlinedResponses": [...]}}`) and `metadata.output`
  (`{"inlinedResponses": {"inlinedResponses": [...]}}`);
- `GET /v1beta/batches?pageSize=&pageToken=` → `{"operations": [...], "nextPageToken"}`,
  newest first;
- `POST /v1beta/batches/{id}:cancel` → `{}`; the batch is CANCELLED at once (Gemini has
  no cancelling state).

This is the shape `GET batches/{id}` has on the wire: an `Operation` whose
`metadata` is the `GenerateContentBatch` (camelCase, as every Gemini REST
response), the output nested twice (`inlinedResponses.inlinedResponses`,
`InlinedResponses` being a message of its own) and mirrored under `response`
once done, which is where Google's REST guide reads it; the SDKs read
`metadata.output`. Like proto3 JSON, `done` is left out until true and
`batchStats` counts are strings, zeros left out (`requestCount`,
`successfulRequestCount`, `failedRequestCount`, `pendingRequestCount`). An
inlined response is `{"response": {GenerateContentResponse}, "metadata"}` or
`{"error": {"code", "message"}, "metadata"}`, the error a `google.rpc.Status`:
its `code` is the gRPC code (3 INVALID_ARGUMENT for a 400, 8 RESOURCE_EXHAUSTED
for a 429, 13 INTERNAL for a 500, 4 DEADLINE_EXCEEDED when expired, 1
CANCELLED), not the HTTP status. `metadata` is echoed as sent; `metadata.key`
is the custom id the counters use (else `batches/…#index`). An expired or
cancelled batch also carries its finished responses (the real API may not).

Every batch route answers 404 with the format's error body when batches are
turned off, a batch of another format is not found (404), and a batch over
`max_batch_requests` is refused with 400. Cancelling an ended batch returns it
unchanged.

A test may have a batch's results served spoiled, as providers' have been seen:
bad lines (junk, a truncated last line, a custom id missing, null or a number, a
duplicate) and requests left out while still counted (`spoil_batch_results`; how
each flaw is made is in `spoiled.py`). OpenAI's spoiled file is the output file (or
the error file when there is no output); Anthropic's, the results; Gemini's, the
inlined responses (in `response` and `metadata.output` alike).
"""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web

from ..formats import WireFormat
from .anthropic import AnthropicBatches
from .api import BatchApi
from .gemini import GeminiBatches
from .knobs import BatchKnobs
from .openai import OpenAIBatches
from .store import (
    BATCH_KINDS,
    FLAWS,
    BatchCounts,
    BatchItem,
    BatchStore,
    MockBatch,
    ResultsPlan,
    StoredFile,
)

__all__ = [
    "BATCH_KINDS",
    "FLAWS",
    "BatchCounts",
    "BatchItem",
    "BatchKnobs",
    "BatchStore",
    "MockBatch",
    "ResultsPlan",
    "StoredFile",
    "add_routes",
]

_APIS: dict[str, type[BatchApi]] = {
    "openai": OpenAIBatches,
    "anthropic": AnthropicBatches,
    "google": GeminiBatches,
}


def add_routes(
    router: web.UrlDispatcher, store: BatchStore, formats: Mapping[str, WireFormat]
) -> None:
    """Add the batch routes of each format in `formats` to `router`.

    Add them before the formats' live routes: Gemini's `models/{model}:batchGenerateContent`
    would otherwise be taken by `models/{model_action}`.

    Example:
        >>> add_routes(app.router, store, {"openai": OpenAIFormat()})
    """
    for name, fmt in formats.items():
        api = _APIS.get(name)
        if api is not None:
            api(store, fmt, formats).add_routes(router)

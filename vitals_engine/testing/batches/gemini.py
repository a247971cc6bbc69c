"""Gemini's batch mode (`batchGenerateContent` and the batch operations) on the mock
server (the shapes are in the package's docstring)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from .api import BadRequest, BatchApi, parse_request
from .spoiled import inlined, spoiled
from .store import BatchItem, MockBatch, new_id, rfc3339

__all__ = ["GeminiBatches"]

#: The gRPC code (google.rpc.Code) of a per-request error, by HTTP status or outcome.
_GRPC: dict[int | str, int] = {400: 3, 429: 8, 500: 13, "expired": 4, "cancelled": 1}
_GEMINI_STATE = {
    "completed": "BATCH_STATE_SUCCEEDED",
    "expired": "BATCH_STATE_EXPIRED",
    "cancelled": "BATCH_STATE_CANCELLED",
    "failed": "BATCH_STATE_FAILED",
}
_TYPES = "type.googleapis.com/google.ai.generativelanguage.v1main."


def _either(obj: Mapping[str, Any], camel: str, snake: str) -> Any:
    """A field of a Gemini request, sent in camelCase or snake_case (proto JSON takes both)."""
    return obj.get(camel, obj.get(snake))


class GeminiBatches(BatchApi):
    def add_routes(self, router: web.UrlDispatcher) -> None:
        models, batches = "/v1beta/models/{model:[^/:]+}", "/v1beta/batches/{batch_id:[^/:]+}"
        self.route(router, "POST", models + ":batchGenerateContent", self.create)
        self.route(router, "GET", "/v1beta/batches", self.list_batches)
        self.route(router, "GET", batches, self.retrieve)
        self.route(router, "POST", batches + ":cancel", self.cancel)

    async def create(self, http: web.Request) -> web.StreamResponse:
        model = http.match_info["model"]
        spec = (await self.json(http)).get("batch")
        if not isinstance(spec, dict):
            raise BadRequest("* BatchGenerateContentRequest.batch: batch is not specified")
        name = _either(spec, "displayName", "display_name")
        if not isinstance(name, str) or not name:
            raise BadRequest("* GenerateContentBatch.display_name: display_name is required")
        source = _either(spec, "inputConfig", "input_config") or {}
        if not isinstance(source, dict):
            raise BadRequest("* GenerateContentBatch.input_config: must be an object")
        if _either(source, "fileName", "file_name"):
            raise BadRequest("this mock takes inlined requests only, not input_config.file_name")
        requests = (source.get("requests") or {}).get("requests")
        if not isinstance(requests, list) or not requests:
            raise BadRequest("* GenerateContentBatch.input_config: requests are required")
        self.check_size(len(requests))
        batch_id = f"batches/{new_id()}"
        items: list[BatchItem] = []
        for index, entry in enumerate(requests):
            if not isinstance(entry, dict) or not isinstance(entry.get("request"), dict):
                raise BadRequest(f"* InlinedRequest[{index}].request: request is required")
            body = {k: v for k, v in entry["request"].items() if k != "model"}
            metadata = entry.get("metadata")
            key = metadata.get("key") if isinstance(metadata, dict) else None
            custom_id = key if isinstance(key, str) else f"{batch_id}#{index}"
            path = {"model_action": f"{model}:generateContent"}
            item = parse_request(self.fmt, custom_id, body, path)
            item.metadata = metadata
            items.append(item)
        extra = {"model": model, "display_name": name}
        batch = self.store.submit(self.fmt, batch_id, items, http.headers, extra)
        return web.json_response(self._operation(batch, fresh=True))

    async def list_batches(self, http: web.Request) -> web.StreamResponse:
        """`GET /v1beta/batches?pageSize=&pageToken=`: the batch operations, newest first."""
        try:
            size = max(1, min(1000, int(http.query.get("pageSize", "50"))))
            start = int(http.query.get("pageToken") or 0)
        except ValueError:
            raise BadRequest("pageSize and pageToken must be whole numbers") from None
        newest = [b for b in reversed(self.store.batches.values()) if b.format == self.fmt.name]
        page = newest[start : start + size]
        listed: dict[str, Any] = {"operations": [self._operation(b) for b in page]}
        if start + size < len(newest):
            listed["nextPageToken"] = str(start + size)
        return web.json_response(listed)

    def _find(self, http: web.Request) -> MockBatch | None:
        return self.store.get(f"batches/{http.match_info['batch_id']}", self.fmt)

    async def retrieve(self, http: web.Request) -> web.StreamResponse:
        batch = self._find(http)
        if batch is None:
            return self.not_found(f"batches/{http.match_info['batch_id']}")
        self.store.poll(batch)
        return web.json_response(self._operation(batch))

    async def cancel(self, http: web.Request) -> web.StreamResponse:
        batch = self._find(http)
        if batch is None:
            return self.not_found(f"batches/{http.match_info['batch_id']}")
        self.store.cancel(batch, at_once=True)
        return web.json_response({})

    def _operation(self, batch: MockBatch, *, fresh: bool = False) -> dict[str, Any]:
        """The long-running operation `GET batches/{id}` answers (`fresh`: just created)."""
        counts = batch.counts
        stats = {
            "requestCount": len(batch.items),
            "successfulRequestCount": counts.succeeded,
            "failedRequestCount": counts.failed,
            "pendingRequestCount": counts.processing,
        }
        if batch.ended and batch.outcome is not None:
            state = _GEMINI_STATE[batch.outcome]
        else:
            state = "BATCH_STATE_PENDING" if fresh else "BATCH_STATE_RUNNING"
        changes = [batch.created_at, batch.cancel_requested_at or 0.0, batch.ended_at or 0.0]
        metadata: dict[str, Any] = {
            "@type": _TYPES + "GenerateContentBatch",
            "model": f"models/{batch.extra['model']}",
            "displayName": batch.extra["display_name"],
            "createTime": rfc3339(batch.created_at),
            "updateTime": rfc3339(max(changes)),
            "batchStats": {key: str(value) for key, value in stats.items() if value},
            "state": state,
            "name": batch.id,
        }
        operation: dict[str, Any] = {"name": batch.id, "metadata": metadata}
        if batch.ended:
            responses: list[Any] = [self._inlined(item) for item in batch.items]
            plan = batch.spoiled
            if plan is not None and plan.take():
                ok = spoiled(responses, plan, ("metadata", "key"), lambda item: "response" in item)
                responses = inlined(ok)
            output = {"inlinedResponses": {"inlinedResponses": responses}}
            metadata["endTime"] = rfc3339(batch.ended_at)
            metadata["output"] = output
            operation["done"] = True
            operation["response"] = {"@type": _TYPES + "GenerateContentBatchOutput", **output}
        return operation

    def _inlined(self, item: BatchItem) -> dict[str, Any]:
        entry: dict[str, Any]
        if item.outcome == "succeeded":
            entry = {"response": item.response}
        else:
            code = _GRPC.get(item.status if item.outcome == "errored" else str(item.outcome), 2)
            entry = {"error": {"code": code, "message": item.message}}
        if item.metadata is not None:
            entry["metadata"] = item.metadata
        return entry

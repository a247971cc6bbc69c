"""Anthropic's Message Batches API on the mock server (the shapes are in the package's
docstring)."""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from .api import BadRequest, BatchApi, jsonl, parse_request
from .spoiled import encode_jsonl, spoiled
from .store import DAY, BatchItem, MockBatch, new_id, rfc3339

__all__ = ["AnthropicBatches"]

_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


_PROCESSING = {"in_progress": "in_progress", "cancelling": "canceling", "ended": "ended"}


class AnthropicBatches(BatchApi):
    def add_routes(self, router: web.UrlDispatcher) -> None:
        base = f"{self.fmt.route}/batches"
        self.route(router, "POST", base, self.create)
        self.route(router, "GET", base + "/{batch_id}", self.retrieve)
        self.route(router, "POST", base + "/{batch_id}/cancel", self.cancel)
        self.route(router, "GET", base + "/{batch_id}/results", self.results)

    async def create(self, http: web.Request) -> web.StreamResponse:
        requests = (await self.json(http)).get("requests")
        if not isinstance(requests, list) or not requests:
            raise BadRequest("requests: Field required (a non-empty list)")
        self.check_size(len(requests))
        items: list[BatchItem] = []
        seen: set[str] = set()
        for index, entry in enumerate(requests):
            custom_id = entry.get("custom_id") if isinstance(entry, dict) else None
            params = entry.get("params") if isinstance(entry, dict) else None
            if not isinstance(custom_id, str) or not _CUSTOM_ID.match(custom_id):
                raise BadRequest(f"requests.{index}.custom_id: must match ^[a-zA-Z0-9_-]{{1,64}}$")
            if custom_id in seen:
                raise BadRequest(f"requests.{index}: duplicate custom_id {custom_id!r}")
            if not isinstance(params, dict):
                raise BadRequest(f"requests.{index}.params: Field required")
            seen.add(custom_id)
            items.append(parse_request(self.fmt, custom_id, params, {}))
        batch = self.store.submit(self.fmt, f"msgbatch_{new_id()}", items, http.headers)
        return web.json_response(self._describe(batch, http))

    async def retrieve(self, http: web.Request) -> web.StreamResponse:
        batch = self.store.get(http.match_info["batch_id"], self.fmt)
        if batch is None:
            return self.not_found(http.match_info["batch_id"])
        self.store.poll(batch)
        return web.json_response(self._describe(batch, http))

    async def cancel(self, http: web.Request) -> web.StreamResponse:
        batch = self.store.get(http.match_info["batch_id"], self.fmt)
        if batch is None:
            return self.not_found(http.match_info["batch_id"])
        self.store.cancel(batch)
        return web.json_response(self._describe(batch, http))

    async def results(self, http: web.Request) -> web.StreamResponse:
        batch = self.store.get(http.match_info["batch_id"], self.fmt)
        if batch is None:
            return self.not_found(http.match_info["batch_id"])
        if not batch.ended:
            raise BadRequest(f"Message Batch {batch.id} has not yet ended: no results yet")
        lines = [{"custom_id": i.custom_id, "result": self._result(i)} for i in batch.items]
        body = jsonl(lines)
        plan = batch.spoiled
        if plan is not None and plan.take():
            ok = spoiled(
                lines, plan, ("custom_id",), lambda line: line["result"]["type"] == "succeeded"
            )
            body = encode_jsonl(ok)
        return web.Response(body=body, content_type="application/x-jsonl")

    def _result(self, item: BatchItem) -> dict[str, Any]:
        if item.outcome == "succeeded":
            return {"type": "succeeded", "message": item.response}
        if item.outcome == "errored":
            return {"type": "errored", "error": self.error_of(item)}
        return {"type": "canceled" if item.outcome == "cancelled" else "expired"}

    def _describe(self, batch: MockBatch, http: web.Request) -> dict[str, Any]:
        counts = batch.counts
        results = f"{http.url.origin()}{self.fmt.route}/batches/{batch.id}/results"
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": _PROCESSING[batch.state],
            "request_counts": {
                "processing": counts.processing,
                "succeeded": counts.succeeded,
                "errored": counts.errored,
                "canceled": counts.cancelled,
                "expired": counts.expired,
            },
            "ended_at": rfc3339(batch.ended_at),
            "created_at": rfc3339(batch.created_at),
            "expires_at": rfc3339(batch.created_at + DAY),
            "archived_at": None,
            "cancel_initiated_at": rfc3339(batch.cancel_requested_at),
            "results_url": results if batch.ended else None,
        }

"""OpenAI's Files and Batch APIs on the mock server (the shapes are in the package's
docstring): batches of `/v1/chat/completions` or `/v1/responses` requests."""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from ..formats import WireFormat
from .api import BadRequest, BatchApi, jsonl, parse_request
from .spoiled import encode_jsonl, spoiled
from .store import DAY, BatchItem, MockBatch, StoredFile, new_id, unix_time

__all__ = ["OpenAIBatches"]

#: The formats whose requests an OpenAI batch may hold.
_BATCHED = ("openai", "openai_responses")


class OpenAIBatches(BatchApi):
    @property
    def endpoints(self) -> dict[str, WireFormat]:
        """The formats a batch may hold, by the endpoint its lines name."""
        return {f.route: f for name, f in self.formats.items() if name in _BATCHED}

    def _find(self, http: web.Request) -> MockBatch | None:
        return self.store.get(http.match_info["batch_id"], *self.endpoints.values())

    def add_routes(self, router: web.UrlDispatcher) -> None:
        self.route(router, "POST", "/v1/files", self.upload)
        self.route(router, "GET", "/v1/files/{file_id}", self.file)
        self.route(router, "DELETE", "/v1/files/{file_id}", self.delete_file)
        self.route(router, "GET", "/v1/files/{file_id}/content", self.content)
        self.route(router, "POST", "/v1/batches", self.create)
        self.route(router, "GET", "/v1/batches", self.list_batches)
        self.route(router, "GET", "/v1/batches/{batch_id}", self.retrieve)
        self.route(router, "POST", "/v1/batches/{batch_id}/cancel", self.cancel)

    async def upload(self, http: web.Request) -> web.StreamResponse:
        form = await http.post()
        upload, purpose = form.get("file"), form.get("purpose")
        if not isinstance(upload, web.FileField) or not isinstance(purpose, str):
            raise BadRequest("'file' and 'purpose' are required")
        if purpose == "batch" and not upload.filename.endswith(".jsonl"):
            raise BadRequest("Invalid file format for Batch API. Must be .jsonl")
        stored = self.store.store_file(upload.filename, purpose, upload.file.read())
        return web.json_response(stored.describe())

    def _file(self, http: web.Request) -> StoredFile | None:
        return self.store.files.get(http.match_info["file_id"])

    async def file(self, http: web.Request) -> web.StreamResponse:
        stored = self._file(http)
        if stored is None:
            return self.error(404, f"No such File object: {http.match_info['file_id']}")
        return web.json_response(stored.describe())

    async def delete_file(self, http: web.Request) -> web.StreamResponse:
        file_id = http.match_info["file_id"]
        if not self.store.delete_file(file_id):
            return self.error(404, f"No such File object: {file_id}")
        return web.json_response({"id": file_id, "object": "file", "deleted": True})

    async def content(self, http: web.Request) -> web.StreamResponse:
        stored = self._file(http)
        if stored is None:
            return self.error(404, f"No such File object: {http.match_info['file_id']}")
        return web.Response(body=self._served(stored), content_type="application/octet-stream")

    def _served(self, stored: StoredFile) -> bytes:
        """The content of a file as this read serves it: a batch's results spoiled as the
        test planned (in its output file, or its error file when it has no output)."""
        batch = self.store.batches.get(stored.batch) if stored.batch is not None else None
        plan = batch.spoiled if batch is not None else None
        if batch is None or plan is None or stored.id != batch.extra.get("spoiled_file_id"):
            return stored.content
        if not plan.take():
            return stored.content
        lines = [msgspec.json.decode(line) for line in stored.content.splitlines()]
        ok = spoiled(lines, plan, ("custom_id",), lambda line: line["error"] is None)
        return encode_jsonl(ok)

    async def create(self, http: web.Request) -> web.StreamResponse:
        body = await self.json(http)
        file_id, endpoint = body.get("input_file_id"), body.get("endpoint")
        if not isinstance(file_id, str) or not isinstance(endpoint, str):
            raise BadRequest("'input_file_id', 'endpoint' and 'completion_window' are required")
        fmt = self.endpoints.get(endpoint)
        if fmt is None:
            served = ", ".join(sorted(self.endpoints))
            raise BadRequest(f"this mock batches {served} only, not {endpoint!r}")
        if body.get("completion_window") != "24h":
            raise BadRequest("completion_window: only '24h' is supported")
        metadata = body.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise BadRequest("metadata must be an object of strings")
        source = self.store.files.get(file_id)
        if source is None:
            return self.error(404, f"No such File object: {file_id}")
        items, errors = self._items(source.content.decode("utf-8", "replace"), fmt)
        self.check_size(len(items))
        extra = {
            "endpoint": endpoint,
            "input_file_id": file_id,
            "metadata": metadata,
            "errors": None,
        }
        batch_id = f"batch_{new_id()}"
        if errors:
            extra["errors"] = {"object": "list", "data": errors}
            batch = self.store.refuse(fmt, batch_id, extra)
        else:
            batch = self.store.submit(fmt, batch_id, items, http.headers, extra)
        return web.json_response(self._describe(batch, fresh=True))

    async def list_batches(self, http: web.Request) -> web.StreamResponse:
        """`GET /v1/batches?limit=&after=`: the batches, newest first, a page at a time."""
        try:
            limit = max(1, min(100, int(http.query.get("limit", "20"))))
        except ValueError:
            raise BadRequest("limit must be a whole number") from None
        batched = {f.name for f in self.endpoints.values()}
        newest = [b for b in reversed(self.store.batches.values()) if b.format in batched]
        after = http.query.get("after")
        if after is not None:
            ids = [b.id for b in newest]
            newest = newest[ids.index(after) + 1 :] if after in ids else []
        page = newest[:limit]
        return web.json_response(
            {
                "object": "list",
                "data": [self._describe(batch) for batch in page],
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
                "has_more": len(newest) > limit,
            }
        )

    def _items(self, text: str, fmt: WireFormat) -> tuple[list[BatchItem], list[dict[str, Any]]]:
        """The requests of an input file, and what the API's validation would say of it."""
        items: list[BatchItem] = []
        errors: list[dict[str, Any]] = []
        seen: set[str] = set()
        models: set[str] = set()

        def fail(code: str, message: str, line: int, param: str | None = None) -> None:
            errors.append({"code": code, "message": message, "param": param, "line": line})

        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = msgspec.json.decode(line)
            except msgspec.DecodeError:
                fail("invalid_json_line", "This line is not parseable as valid JSON.", number)
                continue
            if not isinstance(entry, dict):
                fail("invalid_json_line", "This line is not a JSON object.", number)
                continue
            custom_id, body = entry.get("custom_id"), entry.get("body")
            if not isinstance(custom_id, str) or not custom_id:
                fail("invalid_request", "Missing required parameter 'custom_id'.", number)
                continue
            if custom_id in seen:
                fail("duplicate_custom_id", f"The custom_id {custom_id!r} is a duplicate.", number)
                continue
            seen.add(custom_id)
            if entry.get("method") != "POST":
                fail("invalid_request", "The method must be 'POST'.", number, "method")
            if entry.get("url") != fmt.route:
                fail("url_mismatch", f"The url must be the batch's endpoint {fmt.route}.", number)
            if not isinstance(body, dict):
                fail("invalid_request", "Missing required parameter 'body'.", number, "body")
                continue
            if isinstance(body.get("model"), str):
                models.add(body["model"])
                if len(models) > 1:
                    fail("model_mismatch", "A batch's requests must all use one model.", number)
            items.append(parse_request(fmt, custom_id, body, {}))
        if not items and not errors:
            fail("empty_file", "The input file is empty.", 1)
        return items, errors

    async def retrieve(self, http: web.Request) -> web.StreamResponse:
        batch = self._find(http)
        if batch is None:
            return self.not_found(http.match_info["batch_id"])
        self.store.poll(batch)
        return web.json_response(self._describe(batch))

    async def cancel(self, http: web.Request) -> web.StreamResponse:
        batch = self._find(http)
        if batch is None:
            return self.not_found(http.match_info["batch_id"])
        self.store.cancel(batch)
        return web.json_response(self._describe(batch))

    def _describe(self, batch: MockBatch, *, fresh: bool = False) -> dict[str, Any]:
        """The batch object; `fresh`: as `POST /v1/batches` answers it, still validating."""
        if batch.ended and batch.outcome != "failed" and "output_file_id" not in batch.extra:
            self._write_outputs(batch)
        counts = batch.counts
        outcome = batch.outcome if batch.ended else None
        status = "validating" if fresh else (outcome or batch.state)
        cancelling = batch.cancel_requested_at

        def at(when: str) -> int | None:
            return unix_time(batch.ended_at) if outcome == when and not fresh else None

        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": batch.extra["endpoint"],
            "errors": batch.extra["errors"] if not fresh else None,
            "input_file_id": batch.extra["input_file_id"],
            "completion_window": "24h",
            "status": status,
            "output_file_id": batch.extra.get("output_file_id"),
            "error_file_id": batch.extra.get("error_file_id"),
            "created_at": int(batch.created_at),
            "in_progress_at": None if fresh or outcome == "failed" else int(batch.created_at),
            "expires_at": int(batch.created_at + DAY),
            "finalizing_at": at("completed"),
            "completed_at": at("completed"),
            "failed_at": at("failed"),
            "expired_at": at("expired"),
            "cancelling_at": unix_time(cancelling),
            "cancelled_at": at("cancelled"),
            "request_counts": {
                "total": len(batch.items),
                "completed": counts.succeeded,
                "failed": counts.failed,
            },
            "metadata": batch.extra["metadata"],
        }

    def _write_outputs(self, batch: MockBatch) -> None:
        """The output and error files of an ended batch (each only if it has lines)."""
        output: list[dict[str, Any]] = []
        failed: list[dict[str, Any]] = []
        for item in batch.items:
            line: dict[str, Any] = {"id": f"batch_req_{new_id()}", "custom_id": item.custom_id}
            if item.outcome in ("succeeded", "errored"):
                ok = item.outcome == "succeeded"
                body = item.response if ok else self.error_of(item)
                line["response"] = {
                    "status_code": item.status,
                    "request_id": f"req_{new_id()}",
                    "body": body,
                }
                line["error"] = None
                (output if ok else failed).append(line)
            else:
                code = "batch_cancelled" if item.outcome == "cancelled" else "batch_expired"
                line["response"] = None
                line["error"] = {"code": code, "message": item.message}
                failed.append(line)
        for key, lines, name in (
            ("output_file_id", output, "output"),
            ("error_file_id", failed, "error"),
        ):
            stored = None
            if lines:
                filename = f"{batch.id}_{name}.jsonl"
                stored = self.store.store_file(filename, "batch_output", jsonl(lines), batch.id)
            batch.extra[key] = None if stored is None else stored.id
        spoiled_file = batch.extra["output_file_id"] or batch.extra["error_file_id"]
        batch.extra["spoiled_file_id"] = spoiled_file

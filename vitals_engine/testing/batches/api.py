"""What the batch APIs share: one format's routes over the store, refusing a submission
with the format's 400, and reading each request of a batch as the format's request."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec
from aiohttp import web

from ..formats import Refused, WireFormat
from .store import BatchItem, BatchStore

__all__ = ["BadRequest", "BatchApi", "Handler", "jsonl", "parse_request"]


def parse_request(fmt: WireFormat, custom_id: str, body: Any, path: Mapping[str, str]) -> BatchItem:
    """Request `custom_id` of a batch: `body` as the format's request, or (None) why the
    API would refuse it."""
    try:
        request = fmt.parse(body, path, {})
    except Refused as refused:
        return BatchItem(custom_id, body, None, refused.message, refused=refused)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return BatchItem(custom_id, body, None, f"invalid request: {exc}")
    request.stream = False  # a batch answers whole replies
    return BatchItem(custom_id, body, request)


class BadRequest(Exception):
    """A submission the API refuses with 400."""


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class BatchApi:
    """The batch routes of one format, over the store."""

    def __init__(
        self, store: BatchStore, fmt: WireFormat, formats: Mapping[str, WireFormat] | None = None
    ) -> None:
        self.store = store
        self.fmt = fmt
        #: Every format the server speaks (an API may batch more than one).
        self.formats = dict(formats or {fmt.name: fmt})

    def add_routes(self, router: web.UrlDispatcher) -> None:
        raise NotImplementedError

    def route(self, router: web.UrlDispatcher, method: str, path: str, handler: Handler) -> None:
        async def guarded(http: web.Request) -> web.StreamResponse:
            if not self.store.enabled:
                return self.error(404, f"Not found: {http.method} {http.path}")
            try:
                return await handler(http)
            except BadRequest as exc:
                return self.error(400, str(exc))

        router.add_route(method, path, guarded)

    def error(self, status: int, message: str) -> web.Response:
        return web.json_response(self.fmt.error_body(status, message), status=status)

    def error_of(self, item: BatchItem) -> dict[str, Any]:
        """The error body of a request that failed in a batch, as the API writes it."""
        if item.refused is not None:
            return self.fmt.refusal_body(item.refused)
        return self.fmt.error_body(item.status, item.message)

    def not_found(self, batch_id: str) -> web.Response:
        return self.error(404, f"No batch found with id '{batch_id}'")

    async def json(self, http: web.Request) -> dict[str, Any]:
        try:
            body = msgspec.json.decode(await http.read())
        except msgspec.DecodeError as exc:
            raise BadRequest(f"invalid JSON: {exc}") from exc
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        return body

    def check_size(self, count: int) -> None:
        cap = self.store.max_requests
        if cap is not None and count > cap:
            raise BadRequest(f"a batch may hold at most {cap} requests, not {count}")


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(msgspec.json.encode(line) + b"\n" for line in lines)

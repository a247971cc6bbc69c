"""Azure OpenAI, as the mock server speaks it: OpenAI's two wire formats at Azure's routes,
behind Azure's key or Microsoft Entra ID token, with Azure's content filter.

Routes (under `base_url("azure")`, the resource's endpoint):

- `POST /openai/v1/chat/completions` and `/openai/deployments/{deployment}/chat/completions
  ?api-version=...` (Chat Completions, `AzureChatFormat`);
- `POST /openai/v1/responses` and `/openai/responses?api-version=...` (the Responses API,
  `AzureResponsesFormat`);
- `GET /msi/token`: a managed-identity endpoint as App Service serves it, which the real
  azure-identity `ManagedIdentityCredential` (and `DefaultAzureCredential`) reaches with
  `IDENTITY_ENDPOINT={root}/msi/token` and `IDENTITY_HEADER={IDENTITY_HEADER}`.

Authentication: the `api-key` header holding `API_KEY`, or `Authorization: Bearer` with a
token the token endpoint issued that has not expired on the server's clock
(`AZURE.clock`, which a test moves; tokens last `AZURE.lifetime` seconds). Anything else is
a 401 in Azure's words. The state (`AZURE`) is the process's: `AZURE.reset()` between tests.

The content filter: a prompt holding `FILTERED_PROMPT` is answered 400 `content_filter`
with the categories in `innererror.content_filter_result`; a reply with
`finish="content_filter"` ends with `finish_reason: "content_filter"` and the choice's
`content_filter_results` (Chat Completions; the Responses API: `status: "incomplete"`,
`incomplete_details.reason: "content_filter"`). Streams open with a chunk holding
`prompt_filter_results` and no choices, as Azure's do. A 429 says Azure's words; with
`server.fail("rate-limit", header="retry-after-ms")` it carries `retry-after-ms`.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from ..brain import MockReply, MockRequest
from . import Refused, StreamEvent
from .openai import OpenAIFormat
from .openai_responses import ResponsesFormat

__all__ = [
    "API_KEY",
    "AZURE",
    "FILTERED_PROMPT",
    "IDENTITY_HEADER",
    "TOKEN_ROUTE",
    "AzureChatFormat",
    "AzureResponsesFormat",
]

#: The api-key the mock takes.
API_KEY = "azure-test-key"
#: The secret App Service gives the app (the `X-IDENTITY-HEADER` the endpoint wants).
IDENTITY_HEADER = "mock-identity-header"
#: The managed-identity endpoint's path.
TOKEN_ROUTE = "/msi/token"
#: A prompt holding this is refused by the content filter (400 content_filter).
FILTERED_PROMPT = "[azure content filter]"
_RESOURCE = "https://cognitiveservices.azure.com"
_KEY_401 = (
    "Access denied due to invalid subscription key or wrong API endpoint. Make sure to "
    "provide a valid key for an active subscription and use a correct regional API "
    "endpoint for your resource."
)
_TOKEN_401 = (
    "Unauthorized. Access token is missing, invalid, audience is incorrect "
    "(https://cognitiveservices.azure.com), or have expired."
)
_FILTER_MESSAGE = (
    "The response was filtered due to the prompt triggering Azure OpenAI's content "
    "management policy. Please modify your prompt and retry."
)
_SAFE = {"filtered": False, "severity": "safe"}


def _results(flagged: str | None = None) -> dict[str, Any]:
    """A content filter's results: every category safe, or `flagged` filtered."""
    results: dict[str, Any] = {
        name: dict(_SAFE) for name in ("hate", "self_harm", "sexual", "violence")
    }
    results["jailbreak"] = {"filtered": False, "detected": False}
    if flagged == "jailbreak":
        results["jailbreak"] = {"filtered": True, "detected": True}
    elif flagged is not None:
        results[flagged] = {"filtered": True, "severity": "high"}
    return results


class AzureMock:
    """The mock's Azure state: its clock, the tokens it issued, the deployments' models."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Back to the start: the real clock, no tokens issued, default models."""
        #: Seconds the server's clock is ahead of the real one (a test moves it).
        self.offset = 0.0
        #: How long an issued token lasts, in seconds.
        self.lifetime = 3600.0
        #: Tokens issued (the value is its expiry, epoch seconds on the server's clock).
        self.issued: dict[str, float] = {}
        #: Requests refused as unauthenticated, and by the content filter.
        self.refused = 0
        self.filtered = 0
        #: The model a deployment answers with (its reply's `model`); default: its name.
        self.models: dict[str, str] = {}
        self._secret = os.urandom(16)

    def clock(self) -> float:
        """The server's time, epoch seconds."""
        return time.time() + self.offset

    def issue(self) -> tuple[str, float]:
        """A new token and its expiry."""
        expires = self.clock() + self.lifetime
        nonce = f"{len(self.issued)}.{expires:.0f}"
        mac = hmac.new(self._secret, nonce.encode(), hashlib.sha256).hexdigest()[:24]
        token = f"mock-entra.{nonce}.{mac}"
        self.issued[token] = expires
        return token, expires

    def check(self, headers: Mapping[str, str]) -> None:
        """Refuse a request without the key or a token issued here and still valid."""
        lower = {k.lower(): v for k, v in headers.items()}
        if "api-key" in lower:
            if lower["api-key"] == API_KEY:
                return
            self._refuse(_KEY_401)
        scheme, _, token = lower.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and token:
            expires = self.issued.get(token)
            if expires is not None and self.clock() < expires:
                return
            self._refuse(_TOKEN_401)
        self._refuse(_KEY_401)

    def _refuse(self, message: str) -> None:
        self.refused += 1
        raise Refused(message, status=401, code="401")

    async def token_endpoint(self, request: web.Request) -> web.Response:
        """App Service's managed-identity endpoint (api-version 2019-08-01)."""
        if request.headers.get("X-IDENTITY-HEADER") != IDENTITY_HEADER:
            return web.json_response(
                {"statusCode": 401, "message": "X-IDENTITY-HEADER is missing or wrong"},
                status=401,
            )
        resource = request.query.get("resource", "")
        if resource.rstrip("/").removesuffix("/.default") != _RESOURCE:
            return web.json_response(
                {"error": "invalid_resource", "error_description": f"unknown {resource}"},
                status=400,
            )
        token, expires = self.issue()
        return web.json_response(
            {
                "access_token": token,
                "expires_on": str(int(expires)),
                "resource": _RESOURCE,
                "token_type": "Bearer",
                "client_id": "00000000-0000-0000-0000-000000000000",
            }
        )


#: The process's Azure mock state, shared by both formats.
AZURE = AzureMock()


def _prompt_filtered(request: MockRequest) -> None:
    text = "\n".join(m.text for m in request.messages if m.role == "user")
    if FILTERED_PROMPT in text or FILTERED_PROMPT in (request.system or ""):
        AZURE.filtered += 1
        raise Refused(_FILTER_MESSAGE, status=400, code="content_filter", param="prompt")


def _deployment(path: Mapping[str, str], query: Mapping[str, str] | None) -> str | None:
    """The deployment a dated path names (None on the v1 API); refuses a dated path
    without its api-version."""
    where = path.get("where", "v1")
    if where == "v1":
        return None
    if not (query or {}).get("api-version"):
        raise Refused(
            "Missing required query parameter 'api-version'.",
            status=400,
            code="MissingApiVersionParameter",
        )
    return where.removeprefix("deployments/") or None


def _as_deployment(
    parse: Any, body: Any, path: Mapping[str, str], query: Mapping[str, str] | None
) -> MockRequest:
    """The request `parse` reads, held to the rules of the model behind its deployment
    (`AZURE.models`), named by its deployment, after the content filter's look."""
    deployment = body.get("model") if isinstance(body, dict) else None
    if isinstance(deployment, str) and deployment in AZURE.models:
        body = {**body, "model": AZURE.models[deployment]}
    request = parse(body, path, query)
    if isinstance(deployment, str):
        request.model = deployment
    _prompt_filtered(request)
    return request


class _AzureErrors:
    """Azure's error bodies: the content filter's, and its 401 and 429."""

    def refusal_body(self, refused: Refused) -> dict[str, Any]:
        if refused.code == "content_filter":
            return {
                "error": {
                    "message": refused.message,
                    "type": None,
                    "param": "prompt",
                    "code": "content_filter",
                    "status": 400,
                    "innererror": {
                        "code": "ResponsibleAIPolicyViolation",
                        "content_filter_result": _results("violence"),
                    },
                }
            }
        if refused.status == 401:
            return {"error": {"code": "401", "message": refused.message}}
        return OpenAIFormat.refusal_body(self, refused)  # type: ignore[arg-type]

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        if status == 429:
            message = (
                "Requests to the ChatCompletions_Create Operation under Azure OpenAI API "
                "have exceeded token rate limit of your current OpenAI S0 pricing tier. "
                f"{message}"
            )
            return {"error": {"code": "429", "message": message}}
        return OpenAIFormat.error_body(self, status, message)  # type: ignore[arg-type]

    def check_auth(self, method: str, target: str, headers: Mapping[str, str], body: bytes) -> None:
        AZURE.check(headers)


class AzureChatFormat(_AzureErrors, OpenAIFormat):
    """Chat Completions at Azure's v1 and dated deployment routes."""

    name = "azure_openai"
    route = "/openai/{where:v1|deployments/[^/]+}/chat/completions"

    def more_routes(self) -> list[tuple[str, str, Any]]:
        return [("GET", TOKEN_ROUTE, AZURE.token_endpoint)]

    def parse(
        self, body: Any, path: Mapping[str, str], query: Mapping[str, str] | None = None
    ) -> MockRequest:
        deployment = _deployment(path, query)
        if deployment is not None and isinstance(body, dict):
            body = {**body, "model": deployment}  # the path names it; the body's is ignored
        return _as_deployment(super().parse, body, path, query)

    def render(self, request: MockRequest, reply: MockReply) -> dict[str, Any]:
        data = super().render(request, reply)
        data["model"] = AZURE.models.get(request.model, request.model)
        data["prompt_filter_results"] = [{"prompt_index": 0, "content_filter_results": _results()}]
        flagged = "violence" if reply.finish == "content_filter" else None
        data["choices"][0]["content_filter_results"] = _results(flagged)
        return data

    def render_stream(self, request: MockRequest, reply: MockReply) -> list[StreamEvent]:
        model = AZURE.models.get(request.model, request.model)
        events = super().render_stream(request, reply)
        for event in events:
            if isinstance(event.data, dict):
                event.data["model"] = model
                for choice in event.data.get("choices") or []:
                    if choice.get("finish_reason"):
                        flagged = "violence" if reply.finish == "content_filter" else None
                        choice["content_filter_results"] = _results(flagged)
        opening = {
            "choices": [],
            "created": 0,
            "id": "",
            "model": "",
            "object": "",
            "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": _results()}],
        }
        return [StreamEvent(opening), *events]


class AzureResponsesFormat(_AzureErrors, ResponsesFormat):
    """The Responses API at Azure's v1 and dated routes."""

    name = "azure_openai_responses"
    route = "/openai{where:/v1|}/responses"

    def parse(
        self, body: Any, path: Mapping[str, str], query: Mapping[str, str] | None = None
    ) -> MockRequest:
        where = "v1" if path.get("where") == "/v1" else "dated"
        _deployment({"where": where}, query)
        return _as_deployment(super().parse, body, path, query)

    def render(self, request: MockRequest, reply: MockReply) -> dict[str, Any]:
        data = super().render(request, reply)
        data["model"] = AZURE.models.get(request.model, request.model)
        return data

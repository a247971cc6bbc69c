"""Google Vertex AI, as the mock server speaks it: Gemini and Claude at Vertex's addresses,
a bearer token checked on each request, and the token endpoints that issue them.

Routes, under `base_url("vertex")` (the server's root):

- `POST /v1/projects/{project}/locations/{location}/publishers/google/models/{model}:
  generateContent` and `:streamGenerateContent?alt=sse`: Gemini, answered as
  `formats/google.py` answers;
- `POST .../publishers/anthropic/models/{model}:rawPredict` and `:streamRawPredict`:
  Claude, answered as `formats/anthropic.py` answers. Like Vertex it refuses (400) a body
  with `model` (the URL names it) or without `"anthropic_version": "vertex-2023-10-16"`;
- `POST /google/token`: the OAuth token endpoint a service-account file's `token_uri`
  points to (the JWT-bearer grant: its assertion's claims are checked, not its
  signature) and authorized-user credentials refresh at (the refresh_token grant; a
  refresh token starting "revoked" is refused with `invalid_grant`);
- the metadata server google-auth asks on Google Cloud's machines (reached through
  `GCE_METADATA_HOST` and, for its probe of `/`, `GCE_METADATA_IP`):
  `GET /computeMetadata/v1/instance/service-accounts/default/token` and the account's
  info, `project/project-id`, `universe/universe-domain`, each only with
  `Metadata-Flavor: Google`.

A model call needs `Authorization: Bearer <token>` with a token one of those issued and
not expired on the server's clock (`now()`, moved by `advance(seconds)`), else 401
`UNAUTHENTICATED` in Google's error shape. Tokens last `token_lifetime` seconds (3600).
Errors are Google's `{"error": {"code", "message", "status"}}` for both publishers (a
platform error, as Vertex answers: 429 `RESOURCE_EXHAUSTED` is its busy shared quota).
"""

from __future__ import annotations

import base64
import binascii
import secrets
import threading
import time
from collections.abc import Mapping
from typing import Any

import msgspec
from aiohttp import web

from ..brain import MockReply, MockRequest
from . import Refused, StreamEvent, WireFormat
from .anthropic import AnthropicFormat
from .google import GoogleFormat

__all__ = ["TOKEN_PATH", "VertexFormat"]

#: The mock's OAuth token endpoint (a service-account file's `token_uri`).
TOKEN_PATH = "/google/token"
_METADATA = "/computeMetadata/v1"
_JWT_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
_ANTHROPIC_VERSION = "vertex-2023-10-16"
_UNAUTHENTICATED = (
    "Request had invalid authentication credentials. Expected OAuth 2 access token, login "
    "cookie or other valid authentication credential. See "
    "https://developers.google.com/identity/sign-in/web/devconsole-project."
)
_BUSY = (
    "Resource exhausted. Please try again later. Please refer to "
    "https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429 for more details."
)
#: What the metadata server says of its machine.
PROJECT = "mock-project"
ACCOUNT = "vitals-mock@mock-project.iam.gserviceaccount.com"


def _claims(assertion: str) -> dict[str, Any]:
    """The claims of a JWT (its signature is not checked: the mock knows no key)."""
    parts = assertion.split(".")
    if len(parts) != 3:
        raise ValueError("the assertion is not a JWT (three dot-separated parts)")
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = msgspec.json.decode(base64.urlsafe_b64decode(payload))
    except (binascii.Error, msgspec.DecodeError) as exc:
        raise ValueError(f"the assertion's claims are not base64url JSON ({exc})") from None
    if not isinstance(claims, dict):
        raise ValueError("the assertion's claims are not a JSON object")
    return claims


def _oauth_error(error: str, description: str, status: int = 400) -> web.Response:
    body = {"error": error, "error_description": description}
    return web.json_response(body, status=status)


class VertexFormat(WireFormat):
    name = "vertex"
    route = (
        "/v1/projects/{project}/locations/{location}/publishers/{publisher}/models/{model_action}"
    )

    def __init__(self) -> None:
        self._gemini = GoogleFormat()
        self._claude = AnthropicFormat()
        self._lock = threading.Lock()
        self._tokens: dict[str, float] = {}  # token -> when it expires on the server's clock
        self._offset = 0.0
        #: Seconds a token lasts.
        self.token_lifetime = 3600
        #: Tokens issued, by grant ("jwt-bearer", "refresh_token", "metadata").
        self.issued: dict[str, int] = {}

    # -- the server's clock and its tokens ---------------------------------------------

    def now(self) -> float:
        """The server's clock (epoch seconds), which tokens expire on."""
        return time.time() + self._offset

    def advance(self, seconds: float) -> None:
        """Move the server's clock `seconds` ahead (tokens issued before may expire)."""
        self._offset += seconds

    def issue(self, grant: str) -> dict[str, Any]:
        """A new access token's answer (`access_token`, `expires_in`, `token_type`)."""
        token = "ya29.mock-" + secrets.token_urlsafe(24)
        with self._lock:
            self._tokens[token] = self.now() + self.token_lifetime
            self.issued[grant] = self.issued.get(grant, 0) + 1
        return {"access_token": token, "expires_in": self.token_lifetime, "token_type": "Bearer"}

    def check_auth(self, method: str, target: str, headers: Mapping[str, str], body: bytes) -> None:
        given = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
        scheme, _, token = given.partition(" ")
        expires = self._tokens.get(token) if scheme.lower() == "bearer" else None
        if expires is None or self.now() >= expires:
            raise Refused(_UNAUTHENTICATED, status=401)

    # -- the model routes ------------------------------------------------------------

    def parse(
        self, body: Any, path: Mapping[str, str], query: Mapping[str, str] | None = None
    ) -> MockRequest:
        publisher = path["publisher"]
        if publisher == "google":
            request = self._gemini.parse(body, {"model_action": path["model_action"]}, query)
        elif publisher == "anthropic":
            request = self._parse_claude(body, path["model_action"])
        else:
            raise Refused(f"Publisher Model `{publisher}` was not found.", status=404)
        request.format = f"vertex/{publisher}"
        return request

    def _parse_claude(self, body: Any, model_action: str) -> MockRequest:
        model, _, action = model_action.partition(":")
        if action not in ("rawPredict", "streamRawPredict"):
            raise ValueError(f"unknown method '{action}': Claude takes (stream)rawPredict")
        if not isinstance(body, dict):
            raise ValueError("the body is not a JSON object")
        if "model" in body:
            raise Refused("model: Extra inputs are not permitted")
        if body.get("anthropic_version") != _ANTHROPIC_VERSION:
            raise Refused(f"anthropic_version: Input should be '{_ANTHROPIC_VERSION}'")
        given = {k: v for k, v in body.items() if k != "anthropic_version"}
        request = self._claude.parse({**given, "model": model}, {}, None)
        request.stream = action == "streamRawPredict"
        return request

    def _vendor(self, request: MockRequest | None) -> WireFormat:
        claude = request is not None and request.format == "vertex/anthropic"
        return self._claude if claude else self._gemini

    def render(self, request: MockRequest, reply: MockReply) -> dict[str, Any]:
        return self._vendor(request).render(request, reply)

    def render_stream(self, request: MockRequest, reply: MockReply) -> list[StreamEvent]:
        return self._vendor(request).render_stream(request, reply)

    def stream_error(
        self, status: int, message: str, *, sequence: int = 0, request: MockRequest | None = None
    ) -> StreamEvent:
        vendor = self._vendor(request)
        return vendor.stream_error(status, message, sequence=sequence, request=request)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return self._gemini.error_body(status, message)

    def quota_error(
        self, model: str, retry_after: float | None
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        headers = {} if retry_after is None else {"retry-after": f"{retry_after:g}"}
        return 429, self.error_body(429, _BUSY), headers

    def incomplete_body(self) -> dict[str, Any]:
        return self._gemini.incomplete_body()

    # -- the token endpoints ---------------------------------------------------------

    def more_routes(self) -> list[tuple[str, str, Any]]:
        return [
            ("POST", TOKEN_PATH, self._token),
            ("GET", "/", self._probe),
            ("GET", f"{_METADATA}/instance/service-accounts/default/token", self._metadata_token),
            ("GET", f"{_METADATA}/instance/service-accounts/default/", self._metadata_account),
            ("GET", f"{_METADATA}/project/project-id", self._metadata_text(PROJECT)),
            ("GET", f"{_METADATA}/universe/universe-domain", self._metadata_text("googleapis.com")),
        ]

    async def _token(self, http: web.Request) -> web.Response:
        form = await http.post()
        grant = form.get("grant_type")
        if grant == _JWT_GRANT:
            try:
                claims = _claims(str(form.get("assertion") or ""))
            except ValueError as exc:
                return _oauth_error("invalid_grant", f"Invalid JWT: {exc}")
            if _SCOPE not in str(claims.get("scope", "")).split():
                return _oauth_error("invalid_scope", "The assertion asks no cloud-platform scope.")
            if not claims.get("iss") or not isinstance(claims.get("exp"), int):
                return _oauth_error("invalid_grant", "Invalid JWT: iss and exp are required.")
            return web.json_response(self.issue("jwt-bearer"))
        if grant == "refresh_token":
            refresh = str(form.get("refresh_token") or "")
            if not refresh or not form.get("client_id") or not form.get("client_secret"):
                return _oauth_error("invalid_request", "Missing refresh_token or client.")
            if refresh.startswith("revoked"):
                return _oauth_error("invalid_grant", "Token has been expired or revoked.")
            answer = self.issue("refresh_token")
            if form.get("scope"):
                answer["scope"] = str(form["scope"])
            return web.json_response(answer)
        return _oauth_error("unsupported_grant_type", f"Invalid grant_type: {grant}")

    @staticmethod
    def _flavored(http: web.Request) -> web.Response | None:
        if http.headers.get("Metadata-Flavor") != "Google":
            return web.Response(status=403, text="Missing Metadata-Flavor: Google header.")
        return None

    async def _probe(self, http: web.Request) -> web.Response:
        return web.Response(text="", headers={"Metadata-Flavor": "Google"})

    async def _metadata_token(self, http: web.Request) -> web.Response:
        refused = self._flavored(http)
        if refused is not None:
            return refused
        return web.json_response(self.issue("metadata"), headers={"Metadata-Flavor": "Google"})

    async def _metadata_account(self, http: web.Request) -> web.Response:
        refused = self._flavored(http)
        if refused is not None:
            return refused
        info = {"aliases": ["default"], "email": ACCOUNT, "scopes": [_SCOPE]}
        return web.json_response(info, headers={"Metadata-Flavor": "Google"})

    def _metadata_text(self, text: str) -> Any:
        async def answer(http: web.Request) -> web.Response:
            refused = self._flavored(http)
            if refused is not None:
                return refused
            return web.Response(text=text, headers={"Metadata-Flavor": "Google"})

        return answer

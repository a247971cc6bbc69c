"""Google Vertex AI: Gemini and Claude through a Google Cloud project, with the credentials
every Google client finds (Application Default Credentials, `cloud/google.py`).

Both speak their vendor's wire format at Vertex's addresses:

- Gemini (`VertexGemini`, the Gemini provider's body, replies, stream, tools, thinking
  and structured output): `POST {root}/v1/projects/{project}/locations/{location}/
  publishers/google/models/{model}:generateContent`, and `:streamGenerateContent?alt=sse`
  (the same server-sent events as the Gemini API's);
- Claude (`VertexClaude`, the Anthropic provider's messages, tools, thinking and prompt
  cache): `.../publishers/anthropic/models/{model}:rawPredict` and `:streamRawPredict`,
  the body without `model` (the URL names it) and with `"anthropic_version":
  "vertex-2023-10-16"`; model ids carry their version after an `@`
  (`claude-sonnet-4-5@20250929`).

`{root}` is `https://{location}-aiplatform.googleapis.com`, or
`https://aiplatform.googleapis.com` for the location "global" (`base_url=`, else
`GOOGLE_VERTEX_BASE_URL`, replaces it). Every attempt carries
`Authorization: Bearer <token>`, the token refreshed before it expires, and
`x-goog-user-project` when the credentials name a quota project.

Errors, as Vertex means them: a 429 `RESOURCE_EXHAUSTED` is the shared (dynamic) quota of
the region being busy, not a spent daily quota, so it is always retried; a 403
`PERMISSION_DENIED` names the role and APIs to enable; a 404 says the model may not be
served in that location.
"""

from __future__ import annotations

import os
import re
from typing import Any, ClassVar

import anyio.to_thread
import msgspec

from .._errors import AuthenticationError, ConfigError, ProviderError
from ..cloud.google import GoogleAuth
from ..transport.base import HttpResponse
from ..vocab.model_calls import ChatRequest
from ..vocab.turns import Turn
from .answered import origin
from .anthropic import AnthropicProvider
from .google import GeminiProvider

__all__ = [
    "ANTHROPIC_VERSION",
    "BASE_URL_VARIABLE",
    "DEFAULT_LOCATION",
    "REGIONAL",
    "VertexClaude",
    "VertexGemini",
    "vertex_root",
]

#: The variable that, when set, replaces Vertex's host (a proxy, a private endpoint, the
#: mock server), as Google's own SDK reads it.
BASE_URL_VARIABLE = "GOOGLE_VERTEX_BASE_URL"
#: The `anthropic_version` Claude on Vertex takes in the body.
ANTHROPIC_VERSION = "vertex-2023-10-16"
#: The location when neither `location=` nor `GOOGLE_CLOUD_LOCATION` says: the global
#: endpoint serves current Gemini and Claude models (Gemini 3 only there), with the
#: most capacity, and Claude 4.5 and later cost 10% less there than in a region.
DEFAULT_LOCATION = "global"
_LOCATION = re.compile(r"^[a-z][a-z0-9-]*[a-z0-9]$")
_ROLE = (
    "Give the account (a user, or the service account the credentials are) the Vertex AI "
    "User role (roles/aiplatform.user) in the project, and enable the Vertex AI API "
    "(`gcloud services enable aiplatform.googleapis.com`)"
)


#: The prefix of the price table's entries for Claude at a location other than "global".
REGIONAL = "regional/"


def vertex_root(location: str) -> str:
    """The Vertex AI host of `location`.

    Example:
        >>> vertex_root("us-east5"), vertex_root("global")
        ('https://us-east5-aiplatform.googleapis.com', 'https://aiplatform.googleapis.com')
    """
    if location == "global":
        return "https://aiplatform.googleapis.com"
    return f"https://{location}-aiplatform.googleapis.com"


def _google_error(data: Any) -> dict[str, Any]:
    """Google's `{"error": {"code", "message", "status"}}` (a list of one when streamed),
    or {} for another shape (Anthropic's own errors from Claude)."""
    if isinstance(data, list) and data:
        data = data[0]
    error = data.get("error") if isinstance(data, dict) else None
    return error if isinstance(error, dict) and "status" in error else {}


class _Vertex:
    """What both Vertex providers share: the place (project, location), the token, the
    URL of a model, and Vertex's errors. A mixin before the vendor's provider."""

    name = "Vertex AI"
    id_prefix = "vertex"
    sends_batches = False
    env_key: ClassVar[str | None] = None
    key_required: ClassVar[bool] = False
    billing_hint = "the Google Cloud console's Vertex AI quotas and billing pages"
    start_hint = "check base_url, the location, and that the server there is running"
    #: The publisher of the models in Vertex's paths ("google", "anthropic").
    publisher: ClassVar[str]

    # set by place() (__init__ calls it)
    location: str
    auth: GoogleAuth
    _given_base_url: str | None
    _project_key: str
    base_url: str
    model: str
    _origin: str

    def __init__(
        self,
        model: str,
        *,
        project: str | None = None,
        location: str | None = None,
        credentials: Any = None,
        base_url: str | None = None,
        **options: Any,
    ) -> None:
        base_url = base_url or os.environ.get(BASE_URL_VARIABLE) or None
        self._given_base_url = base_url
        root = base_url or vertex_root(DEFAULT_LOCATION)
        # the vendor's provider, next in the method order, takes the rest
        super().__init__(model, base_url=root, **options)  # pyright: ignore[reportCallIssue]
        self.place(project=project, location=location, credentials=credentials)

    def place(
        self,
        *,
        project: str | None = None,
        location: str | None = None,
        credentials: Any = None,
    ) -> None:
        """Where the model is reached: `project` (None: `GOOGLE_CLOUD_PROJECT`, else the
        credentials'), `location` (None: `GOOGLE_CLOUD_LOCATION`, else "global"), and the
        google-auth `credentials` to use (None: Application Default Credentials)."""
        where = location or os.environ.get("GOOGLE_CLOUD_LOCATION") or DEFAULT_LOCATION
        if not isinstance(where, str) or not _LOCATION.match(where):
            raise ConfigError(
                f"location={where!r} is not a Google Cloud location: pass one like "
                "'us-central1', 'europe-west4' or 'global'."
            )
        if project is not None and (not isinstance(project, str) or not project.strip()):
            raise ConfigError(f"project={project!r}: pass the Google Cloud project id, a string.")
        self.location = where
        if self._given_base_url is None:
            self.base_url = vertex_root(where)
            self._origin = origin(self.base_url)
        self.auth = GoogleAuth(project, credentials=credentials)
        self._project_key = project or os.environ.get("GOOGLE_CLOUD_PROJECT") or "(from ADC)"

    @property
    def endpoint(self) -> tuple[str, str, str]:
        """(platform, project and location, model): a model's own rate limits on Vertex
        are per project, location and model."""
        where = f"{self.base_url}/projects/{self._project_key}/locations/{self.location}"
        return (self.name, where, self.model)

    def model_url(self) -> str:
        """The model's address, before its `:method`."""
        return (
            f"{self.base_url}/v1/projects/{self.auth.project}/locations/{self.location}"
            f"/publishers/{self.publisher}/models/{self.model}"
        )

    def headers(self, api_key: str) -> dict[str, str]:
        return {}  # the bearer is added per attempt (authorize)

    def check_key(self) -> None:
        """Find the credentials and the project (blocking, once): AuthenticationError
        naming what to set when there are none, ConfigError for a missing extra or
        project, before any request."""
        try:
            self.auth.resolve()
        except ProviderError as exc:
            exc.model = self.model
            raise

    async def generate(self, request: ChatRequest) -> Turn:
        if not self.auth.resolved:  # the first call finds the credentials off the loop
            await anyio.to_thread.run_sync(self.check_key)
        return await super().generate(request)  # type: ignore[misc]

    async def authorize(self, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        token = await self.auth.token()
        out = {**headers, "authorization": f"Bearer {token}"}
        quota = self.auth.quota_project
        if quota and "x-goog-user-project" not in out:
            out["x-goog-user-project"] = quota
        return out

    def live_secrets(self) -> tuple[str, ...]:
        token = self.auth.current_token()
        return (token,) if token else ()

    def quota_exhausted(self, status: int, data: Any) -> bool:
        """Never: Vertex's 429 `RESOURCE_EXHAUSTED` is the shared capacity of the region
        (dynamic shared quota) or a per-minute quota, both cured by waiting."""
        return False

    @property
    def key_variables(self) -> str:
        return (
            "the Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, or "
            "`gcloud auth application-default login`)"
        )

    def _vertex_error(self, response: HttpResponse, error: ProviderError) -> ProviderError:
        """`error` (the vendor provider's reading of `response`) in Vertex's words."""
        if response.status not in (401, 403, 404):
            return error
        try:
            data = msgspec.json.decode(response.body)
        except msgspec.DecodeError:
            data = None
        found = _google_error(data).get("message")
        said = found if isinstance(found, str) else self.error_message(data)  # type: ignore[attr-defined]
        said = (said or "no details").rstrip(".")
        if response.status == 401:
            self.auth.token_credential.invalidate()  # the next attempt loads a fresh one
            text = (
                f"Vertex AI refused the access token (UNAUTHENTICATED): {said}. A fresh token "
                "is loaded for the next call; if this persists, run `gcloud auth "
                "application-default login` again or check the service account's key"
            )
            return _like(error, AuthenticationError, text)
        if response.status == 403:
            more = (
                ", and enable the model for the project in Model Garden (the model's page "
                "in the Cloud console, 'Enable')"
                if self.publisher == "anthropic"
                else ""
            )
            text = f"permission denied (PERMISSION_DENIED): {said}. {_ROLE}{more}"
            return _like(error, AuthenticationError, text)
        text = (
            f"not found: {said}. The model '{self.model}' may not be served in location "
            f"'{self.location}' (Vertex serves each model in some locations only; 'global' "
            "serves current models), or its id is wrong (Claude's carry a version: "
            "claude-sonnet-4-5@20250929): see the model's page in Model Garden"
        )
        return _like(error, ProviderError, text)


def _like(error: ProviderError, cls: type[ProviderError], message: str) -> ProviderError:
    """An error of `cls` saying `message`, with `error`'s status, ids and body."""
    return cls(
        message,
        provider=error.provider,
        model=error.model,
        status=error.status,
        request_id=error.request_id,
        body=error.body,
        retry_after=error.retry_after,
    )


class VertexGemini(_Vertex, GeminiProvider):
    """Gemini on Vertex AI (`publishers/google/models/{model}:generateContent`).

    Example:
        >>> provider = VertexGemini("gemini-2.5-flash", project="my-project", location="global")
        >>> provider.url()   # once the credentials are found
        'https://aiplatform.googleapis.com/v1/projects/my-project/locations/global/publishers/google/models/gemini-2.5-flash:generateContent'
    """

    publisher = "google"

    def url(self) -> str:
        return f"{self.model_url()}:generateContent"

    def stream_url(self) -> str:
        return f"{self.model_url()}:streamGenerateContent?alt=sse"

    def _error(self, response: HttpResponse) -> ProviderError:
        return self._vertex_error(response, super()._error(response))


class VertexClaude(_Vertex, AnthropicProvider):
    """Claude on Vertex AI (`publishers/anthropic/models/{model}:rawPredict`).

    Example:
        >>> provider = VertexClaude("claude-sonnet-4-5@20250929", project="p", location="us-east5")
        >>> provider.body(request)["anthropic_version"]
        'vertex-2023-10-16'
    """

    publisher = "anthropic"

    def price_model(self, replied: str | None = None) -> str:
        """Claude costs more at a regional or multi-region location than at "global" (10%
        from Claude Sonnet 4.5 on): the table's `regional/<model>` entries hold those.

        Example:
            >>> claude = VertexClaude("claude-sonnet-4-5", project="p", location="us-east5")
            >>> claude.price_model()
            'regional/claude-sonnet-4-5'
        """
        name = super().price_model(replied)
        return name if self.location == "global" else f"{REGIONAL}{name}"

    def url(self) -> str:
        return f"{self.model_url()}:rawPredict"

    def stream_url(self) -> str:
        return f"{self.model_url()}:streamRawPredict"

    def body(self, request: ChatRequest) -> dict[str, Any]:
        body = super().body(request)
        body.pop("model", None)  # the URL names it; Vertex refuses it in the body
        return {"anthropic_version": ANTHROPIC_VERSION, **body}

    def error_message(self, data: Any) -> str | None:
        """Vertex's own errors are Google's shape (`status: message`), Claude's are
        Anthropic's (`type: message`)."""
        found = _google_error(data)
        if found and isinstance(found.get("message"), str):
            return f"{found['status']}: {found['message']}"
        return super().error_message(data)

    def _error(self, response: HttpResponse) -> ProviderError:
        return self._vertex_error(response, super()._error(response))

"""Azure OpenAI: OpenAI's models deployed in an Azure resource, over OpenAI's own wire
formats (Chat Completions, `AzureOpenAIProvider`; the Responses API,
`AzureOpenAIResponsesProvider`).

The endpoint is the resource's (`https://<resource>.openai.azure.com`, or
`https://<resource>.cognitiveservices.azure.com`; `AZURE_OPENAI_ENDPOINT` when not given)
and the model is the user's own deployment name (the body's `model`). Two URL shapes:

- the v1 API (the default): `{endpoint}/openai/v1/chat/completions` and
  `{endpoint}/openai/v1/responses`, no api-version;
- the dated API, when an `api_version` is given:
  `{endpoint}/openai/deployments/{deployment}/chat/completions?api-version=...` and
  `{endpoint}/openai/responses?api-version=...` (the deployment in the body).

Authentication: an API key (the `api-key` header; `AZURE_OPENAI_API_KEY`), or a Microsoft
Entra ID bearer token (`cloud/azure.py`), added to each attempt by `authorize()`.

Azure's content filter: a prompt it filters is answered 400 with `error.code ==
"content_filter"` and the categories in `error.innererror.content_filter_result`; a
completion it filters ends with `finish_reason: "content_filter"` and the choice's
`content_filter_results`. Both are the sample's outcome, never an error: an assistant turn
whose finish reason is "content_filter", the filtered categories in its `metadata`
(`{"content_filter": {"prompt": {...}, "completion": {...}}}`), and the 400's message as
its text (as Inspect records it). Never retried.

Prices: `model_name` (the chat's `model=`) names the model behind the deployment; without
it, the reply's own `model` (Azure names the model and version behind the deployment,
`gpt-5-mini-2025-08-07`) is priced, and without that the deployment name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar
from urllib.parse import quote, urlsplit

import msgspec

from .._errors import AuthenticationError, ConfigError, ProviderError
from ..cloud.azure import EntraToken, azure_identity_installed
from ..cloud.extras import install_command
from ..transport.base import HttpResponse
from ..transport.sse import ServerSentEvent
from ..vocab.turns import ContentText, TokenUsage, Turn
from .http import HttpProvider, StreamReader
from .openai import OpenAIProvider, _OpenAIStream
from .openai_base import is_reasoning_model
from .openai_responses import OpenAIResponsesProvider

__all__ = ["AzureOpenAIProvider", "AzureOpenAIResponsesProvider", "filtered_categories"]

_ENV_ENDPOINT = "AZURE_OPENAI_ENDPOINT"
_ENV_KEY = "AZURE_OPENAI_API_KEY"
#: A decoded 400 of the content filter, as `_whole_data()` hands it to `parse()`.
_FILTERED = "__azure_content_filter__"


def filtered_categories(results: Any) -> dict[str, Any]:
    """The categories of a content filter's results that it filtered (or, for the
    detectors such as jailbreak, detected), each with what Azure said of it.

    Example:
        >>> filtered_categories({"hate": {"filtered": True, "severity": "high"},
        ...                      "violence": {"filtered": False, "severity": "safe"}})
        {'hate': {'filtered': True, 'severity': 'high'}}
    """
    if not isinstance(results, dict):
        return {}
    return {
        name: value
        for name, value in results.items()
        if isinstance(value, dict) and (value.get("filtered") or value.get("detected"))
    }


def _prompt_results(data: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for item in data.get("prompt_filter_results") or []:
        if isinstance(item, dict):
            found.update(filtered_categories(item.get("content_filter_results")))
    return found


def _endpoint(url: str) -> str:
    """The resource's root: what the user gave, less a trailing `/openai` or `/openai/v1`."""
    url = url.rstrip("/")
    for tail in ("/openai/v1", "/openai"):
        if url.endswith(tail):
            return url[: -len(tail)]
    return url


class _AzureStream(_OpenAIStream):
    """Chat completion chunks, with Azure's filter results kept: the first chunk's
    `prompt_filter_results` (it has no choices) and each choice's `content_filter_results`."""

    def __init__(self) -> None:
        super().__init__()
        self._prompt: list[Any] = []
        self._completion: dict[str, Any] = {}

    def feed(self, event: ServerSentEvent) -> str | None:
        if "prompt_filter_results" in event.data:  # the first chunk only: decoded twice
            chunk = msgspec.json.decode(event.data)
            if isinstance(chunk, dict):
                self._prompt.extend(chunk.get("prompt_filter_results") or [])
        return super().feed(event)

    def _choice(self, choice: dict[str, Any], text: list[str]) -> None:
        self._completion.update(filtered_categories(choice.get("content_filter_results")))
        super()._choice(choice, text)

    def body(self) -> dict[str, Any]:
        body = super().body()
        if self._prompt:
            body["prompt_filter_results"] = self._prompt
        if self._completion:
            body["choices"][0]["content_filter_results"] = self._completion
        return body


class _Azure:
    """What Azure OpenAI adds to both of OpenAI's wire formats: the endpoint and its URL
    shapes, the key or Entra ID token, the content filter, the deployment's model."""

    name = "Azure OpenAI"
    id_prefix = "azure"
    sends_batches = False
    env_key: ClassVar[str | None] = _ENV_KEY
    env_base_url: ClassVar[str | None] = _ENV_ENDPOINT
    default_base_url = ""
    billing_hint = (
        "the Azure portal: the subscription's billing, and the deployment's quota under "
        "Azure AI Foundry > Quotas"
    )
    start_hint = "check the endpoint (https://<resource>.openai.azure.com) for a typo"
    reasoning_rules: ClassVar[bool] = True
    batch_url: ClassVar[str] = ""

    # set by __init__ (declared for the type checker: the mixin sits before the provider)
    base_url: str
    model: str
    reasoning_model: bool | None
    _api_key: str
    _given_key: str | None
    _all_headers: dict[str, str] | None
    _secret_values: tuple[str, ...] | None

    def __init__(
        self,
        model: str,
        *,
        api_version: str | None = None,
        credential: Any = None,
        token_provider: Any = None,
        model_name: str | None = None,
        **kw: Any,
    ) -> None:
        #: The dated API's version (None: the v1 API).
        self.api_version = api_version
        #: The model behind the deployment, for prices and OpenAI's model rules.
        self.model_name = model_name
        #: The Entra ID token (None: an API key authenticates; decided at `check_key()`
        #: when neither a key nor a credential was given).
        self.entra: EntraToken | None = None
        super().__init__(model, **kw)  # type: ignore[call-arg]
        self.base_url = _endpoint(self.base_url)
        if credential is not None or token_provider is not None:
            self.use_entra(credential, token_provider)

    def use_entra(
        self, credential: Any = None, token_provider: Callable[[], str] | None = None
    ) -> None:
        """Authenticate with a Microsoft Entra ID token from `credential` (an object with
        `get_token(scope)`) or `token_provider` (a callable returning the token), not a key."""
        if credential is not None and token_provider is not None:
            raise ConfigError(
                "Azure OpenAI takes one Entra ID source: credential= or token_provider=, not both."
            )
        if self._given_key is not None:
            raise ConfigError(
                "Azure OpenAI takes an API key or a Microsoft Entra ID credential, not both: "
                "pass api_key=... or credential=/token_provider=..."
            )
        if credential is not None and not callable(getattr(credential, "get_token", None)):
            raise ConfigError(
                f"credential= takes an azure-identity credential (an object with "
                f"get_token(scope)), not {type(credential).__name__}; pass a callable "
                "returning a token as token_provider=."
            )
        if token_provider is not None and not callable(token_provider):
            raise ConfigError("token_provider= takes a callable that returns a token string.")
        self.entra = EntraToken(credential=credential, token_provider=token_provider)
        self._api_key = ""  # a key in the environment is not sent with the token
        self._all_headers = self._secret_values = None

    def _find_key(self) -> str | None:
        entra = getattr(self, "entra", None)
        if entra is not None and not entra.uses_default:
            return None
        return super()._find_key()  # type: ignore[misc]

    @property
    def priced_model(self) -> str:
        """The model behind the deployment (`model=`), else the deployment's name."""
        return self.model_name or self.model

    @property
    def is_reasoning(self) -> bool:
        if self.reasoning_model is not None:
            return self.reasoning_model
        return is_reasoning_model(self.priced_model)

    @property
    def key_variables(self) -> str:
        if self.entra is not None:
            return (
                "the Microsoft Entra ID credential (its identity needs the role 'Cognitive "
                "Services OpenAI User' on the resource)"
            )
        return f"the {_ENV_KEY} environment variable"

    def headers(self, api_key: str) -> dict[str, str]:
        return {"api-key": api_key} if api_key else {}

    def check_key(self) -> None:
        """A ConfigError without an endpoint; an AuthenticationError without a key or
        Entra ID (no credential given and azure-identity not installed)."""
        if not self.base_url:
            raise ConfigError(
                f"Azure OpenAI needs the resource's endpoint: set {_ENV_ENDPOINT} "
                "(https://<resource>.openai.azure.com) or pass it to chat_azure_openai()."
            )
        if urlsplit(self.base_url).scheme not in ("http", "https"):
            raise ConfigError(
                f"The Azure OpenAI endpoint {self.base_url!r} is not a URL: "
                "https://<resource>.openai.azure.com"
            )
        if self.entra is not None and not self.entra.uses_default:
            return
        if self._api_key:
            self.entra = None
            return
        key = self._find_key()
        if key:
            self._api_key, self.entra = key, None
            self._all_headers = self._secret_values = None
            return
        if not azure_identity_installed():
            raise AuthenticationError(
                f"No credentials for Azure OpenAI: set {_ENV_KEY} (or pass api_key=...), or "
                f"use Microsoft Entra ID, which needs azure-identity: {install_command('azure')}",
                provider=self.name,
                model=self.model,
            )
        if self.entra is None:
            self.entra = EntraToken()

    # -- the URLs ------------------------------------------------------------------------

    def _url(self, path: str, *, deployment_path: bool) -> str:
        if self.api_version is None:
            return f"{self.base_url}/openai/v1/{path}"
        version = quote(self.api_version, safe="")
        if deployment_path:
            where = f"deployments/{quote(self.model, safe='')}/"
            return f"{self.base_url}/openai/{where}{path}?api-version={version}"
        return f"{self.base_url}/openai/{path}?api-version={version}"

    # -- the token -----------------------------------------------------------------------

    async def authorize(self, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        if self.entra is None:
            return headers
        token = await self.entra.get()
        return {**headers, "authorization": f"Bearer {token}"}

    def live_secrets(self) -> tuple[str, ...]:
        return self.entra.current() if self.entra is not None else ()

    def _refused(self, response: HttpResponse) -> None:
        """A token Azure refused is not sent again: the next call loads a new one."""
        if response.status == 401 and self.entra is not None:
            self.entra.invalidate()

    # -- the content filter ----------------------------------------------------------------

    def _whole_data(self, url: str, response: HttpResponse) -> Any:
        if response.status == 400:
            error = _filter_error(response.body)
            if error is not None:
                return {_FILTERED: error}
        return super()._whole_data(url, response)  # type: ignore[misc]

    def _filtered_turn(self, error: dict[str, Any]) -> Turn:
        inner = error.get("innererror") or {}
        categories = filtered_categories(inner.get("content_filter_result"))
        message = error.get("message") or "The prompt was filtered by Azure's content filter."
        return Turn(
            "assistant",
            [ContentText(str(message))],
            tokens=TokenUsage(),
            finish_reason="content_filter",
            model=self.priced_model,
            metadata={"content_filter": {"prompt": categories}},
        )

    def _priced(self, turn: Turn, data: dict[str, Any], completion: dict[str, Any]) -> Turn:
        """`turn` with the deployment's model (for prices) and the filter's categories."""
        prompt = _prompt_results(data)
        changes: dict[str, Any] = {}
        if self.model_name:
            changes["model"] = self.model_name
        if prompt or completion or turn.finish_reason == "content_filter":
            found = {"prompt": prompt} if prompt else {}
            if completion or turn.finish_reason == "content_filter":
                found["completion"] = completion
            changes["metadata"] = {"content_filter": found}
        return msgspec.structs.replace(turn, **changes) if changes else turn


def _filter_error(raw: bytes) -> dict[str, Any] | None:
    """The error of a content filter's 400, or None for another 400."""
    if b"content_filter" not in raw:
        return None
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and "content_filter" in (error.get("code"), error.get("type")):
        return error
    return None


class AzureOpenAIProvider(_Azure, OpenAIProvider):
    """Azure OpenAI's Chat Completions: `{endpoint}/openai/v1/chat/completions`, or
    `{endpoint}/openai/deployments/{deployment}/chat/completions?api-version=...`."""

    def _error(self, response: HttpResponse) -> ProviderError:
        self._refused(response)
        return super()._error(response)

    def url(self) -> str:
        return self._url("chat/completions", deployment_path=True)

    def stream_reader(self) -> StreamReader:
        return _AzureStream()

    def parse(self, data: Any) -> Turn:
        if _FILTERED in data:
            return self._filtered_turn(data[_FILTERED])
        turn = super().parse(data)
        choice = data["choices"][0]
        return self._priced(turn, data, filtered_categories(choice.get("content_filter_results")))


class AzureOpenAIResponsesProvider(_Azure, OpenAIResponsesProvider):
    """Azure OpenAI's Responses API: `{endpoint}/openai/v1/responses`, or
    `{endpoint}/openai/responses?api-version=...`."""

    def url(self) -> str:
        return self._url("responses", deployment_path=False)

    def parse(self, data: Any) -> Turn:
        if _FILTERED in data:
            return self._filtered_turn(data[_FILTERED])
        turn = super().parse(data)
        completion: dict[str, Any] = {}
        prompt: dict[str, Any] = {}
        for item in data.get("content_filters") or []:  # [{source_type, blocked, results}]
            if isinstance(item, dict):
                found = filtered_categories(item.get("content_filter_results"))
                (prompt if item.get("source_type") == "prompt" else completion).update(found)
        if prompt:
            data = {**data, "prompt_filter_results": [{"content_filter_results": prompt}]}
        return self._priced(turn, data, completion)

    def _error(self, response: HttpResponse) -> ProviderError:
        self._refused(response)
        # A 404 here is a deployment or api-version Azure does not know, not a server
        # without the Responses API (the OpenAI provider's reading of a 404).
        return HttpProvider._error(self, response)

"""Amazon Bedrock's Converse API (`POST {base_url}/model/{modelId}/converse`), each
request signed with Signature Version 4.

The base URL is the region's runtime endpoint, `https://bedrock-runtime.{region}.
amazonaws.com` (or `base_url=`, or `AWS_ENDPOINT_URL_BEDROCK_RUNTIME` as the AWS SDKs
read it), so the region is part of the endpoint the rate limits key on. A model
is named as Bedrock names it and passed as given (quoted into the path): a model id
(`anthropic.claude-sonnet-4-5-20250929-v1:0`), a cross-region inference profile (`us.`,
`eu.`, `apac.`, `global.` before it) or an ARN. The request and reply bodies are
`converse.py`'s.

Streaming goes to `/converse-stream`, whose body is AWS's binary event stream
(`application/vnd.amazon.eventstream`): frames of a prelude, headers and a payload,
their CRCs checked by botocore's decoder. Each frame is an event named by its
`:event-type` (`messageStart`, `contentBlockStart`, `contentBlockDelta`,
`contentBlockStop`, `messageStop`, `metadata` with the usage); a frame of
`:message-type: exception` is the error of the status its `:exception-type` stands for.

Errors are named by the `x-amzn-ErrorType` header: throttling and a model not ready
(429), a service unavailable (503) are retried; access denied (a model not enabled in
the account, an IAM policy without `bedrock:InvokeModel`) says which access to request;
an expired token drops the credentials, which the retry loads afresh.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Mapping
from typing import Any, ClassVar
from urllib.parse import quote

import msgspec

from .._errors import (
    AuthenticationError,
    ConfigError,
    MalformedResponse,
    ProviderError,
    ProviderUnavailable,
    QuotaExhausted,
    RateLimitError,
)
from ..cloud.aws import AwsAuth, check_installed, find_region, region_error
from ..pricing.table import find_price
from ..transport.base import HttpResponse, StreamedResponse, Timeouts
from ..transport.sse import ServerSentEvent
from ..vocab.model_calls import ChatRequest
from ..vocab.turns import Turn
from .anthropic import DEFAULT_MAX_TOKENS, thinking_fields
from .converse import converse_body, converse_turn, mark_cache
from .http import HttpProvider, StreamErrorEvent, StreamReader
from .prompt_cache import PromptCache, cache_plan

__all__ = ["EXCEPTION_STATUS", "BedrockProvider", "claude_name"]

#: The HTTP status of each exception a stream may end with (`:exception-type`).
EXCEPTION_STATUS = {
    "throttlingException": 429,
    "serviceUnavailableException": 503,
    "modelStreamErrorException": 500,
    "internalServerException": 500,
    "validationException": 400,
    "modelTimeoutException": 408,
}
_PREFIXES = ("us.", "eu.", "apac.", "global.", "us-gov.", "jp.", "au.", "ca.")
_ACCESS = (
    "request access to the model in the Bedrock console (Model access) for this account "
    "and region, and allow bedrock:InvokeModel and bedrock:InvokeModelWithResponseStream "
    "on the model's ARN (and the inference profile's, for a us./eu./global. model id) in "
    "the IAM policy of the credentials in use"
)
_FIELDS = msgspec.json.Decoder()


def _base_model(model: str) -> str:
    """The model id without its inference profile's prefix or ARN path."""
    name = model.rpartition("/")[2]
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def claude_name(model: str) -> str | None:
    """Anthropic's name of a Claude model on Bedrock (None for other models).

    Example:
        >>> claude_name("us.anthropic.claude-sonnet-4-5-20250929-v1:0")
        'claude-sonnet-4-5-20250929-v1:0'
    """
    base = _base_model(model)
    return base.removeprefix("anthropic.") if base.startswith("anthropic.claude") else None


def _caches(model: str) -> bool:
    """Whether the model takes cache points (Claude and Amazon Nova)."""
    base = _base_model(model)
    return base.startswith(("anthropic.claude", "amazon.nova"))


def _error_type(headers: Mapping[str, str], data: Any) -> str:
    """The error's name: `x-amzn-ErrorType` ("ThrottlingException:http://..."), or the
    body's `__type` ("com.amazon...#ThrottlingException")."""
    kind = headers.get("x-amzn-errortype") or ""
    if not kind and isinstance(data, dict):
        kind = str(data.get("__type") or data.get("code") or "")
    return kind.partition(":")[0].rpartition("#")[2]


class _ConverseStream(StreamReader):
    """The events of ConverseStream put together into the body Converse would answer."""

    marker = "messageStop"
    stops_at_marker = False  # the usage (`metadata`) comes after it

    def __init__(self) -> None:
        super().__init__()
        self._blocks: dict[int, dict[str, Any]] = {}
        self._inputs: dict[int, list[str]] = {}
        self._data: dict[str, Any] = {"output": {"message": {"role": "assistant"}}}

    def feed(self, event: ServerSentEvent) -> str | None:
        kind = event.event
        if kind in EXCEPTION_STATUS or kind.endswith("Exception"):
            data = _FIELDS.decode(event.data) if event.data else {}
            data = {"__type": kind[:1].upper() + kind[1:], **data}
            raise StreamErrorEvent(
                EXCEPTION_STATUS.get(kind, 500), msgspec.json.encode(data).decode()
            )
        data = _FIELDS.decode(event.data)
        if not isinstance(data, dict):
            raise TypeError(f"an event is a JSON object, not {type(data).__name__}")
        if kind == "contentBlockStart":
            start = data["start"]
            if "toolUse" in start:
                self._blocks[data["contentBlockIndex"]] = {"toolUse": dict(start["toolUse"])}
                self._inputs[data["contentBlockIndex"]] = []
        elif kind == "contentBlockDelta":
            return self._delta(data["contentBlockIndex"], data["delta"])
        elif kind == "messageStop":
            self._data["stopReason"] = data["stopReason"]
            self.complete = True
        elif kind == "metadata":
            self._data["usage"] = data.get("usage") or {}
        return None  # messageStart, contentBlockStop, and events added later

    def _delta(self, index: int, delta: dict[str, Any]) -> str | None:
        if "text" in delta:
            block = self._blocks.setdefault(index, {"text": ""})
            block["text"] += delta["text"]
            return delta["text"]
        if "toolUse" in delta:
            self._inputs.setdefault(index, []).append(delta["toolUse"]["input"])
        elif "reasoningContent" in delta:
            part = delta["reasoningContent"]
            block = self._blocks.setdefault(index, {"reasoningContent": {}})["reasoningContent"]
            if "redactedContent" in part:
                block["redactedContent"] = part["redactedContent"]
            else:
                text = block.setdefault("reasoningText", {"text": ""})
                text["text"] += part.get("text", "")
                if "signature" in part:
                    text["signature"] = part["signature"]
        return None

    def body(self) -> dict[str, Any]:
        for index, pieces in self._inputs.items():
            raw = "".join(pieces)
            self._blocks[index]["toolUse"]["input"] = _FIELDS.decode(raw) if raw else {}
        content = [self._blocks[i] for i in sorted(self._blocks)]
        self._data["output"]["message"]["content"] = content
        return self._data


#: The efforts of the models that take one (Nova 2, gpt-oss): low, medium or high.
_THREE_EFFORTS = {
    "minimal": "low",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",
}


def effort_fields(model: str, setting: str | int, model_id: str) -> dict[str, Any] | None:
    """`additionalModelRequestFields` for `reasoning=` on a model that takes an effort:
    Amazon Nova 2 (`reasoningConfig`) and OpenAI's gpt-oss (`reasoning_effort`). "none"
    leaves reasoning off; another model is a ConfigError saying what to pass.

    Example:
        >>> effort_fields("amazon.nova-2-lite-v1:0", "high", "bedrock/amazon.nova-2-lite-v1:0")
        {'reasoningConfig': {'type': 'enabled', 'maxReasoningEffort': 'high'}}
    """
    nova, oss = "amazon.nova-2" in model, "openai.gpt-oss" in model
    if not (nova or oss):
        raise ConfigError(
            f"{model_id}: reasoning= is mapped on Bedrock for Claude, Amazon Nova 2 and "
            "gpt-oss; for another model, pass its own fields in params="
            "{'additionalModelRequestFields': {...}}."
        )
    if isinstance(setting, int):
        raise ConfigError(
            f"{model_id} takes a reasoning effort, not a budget of tokens: reasoning='low', "
            "'medium' or 'high'."
        )
    if setting == "none":
        return None
    effort = _THREE_EFFORTS[setting]
    if nova:
        return {"reasoningConfig": {"type": "enabled", "maxReasoningEffort": effort}}
    return {"reasoning_effort": effort}


class BedrockProvider(HttpProvider):
    """Amazon Bedrock's Converse and ConverseStream APIs, signed with SigV4."""

    name = "Bedrock"
    id_prefix = "bedrock"
    sends_batches = False
    key_required: ClassVar[bool] = False
    start_hint = "check base_url (or region) for a typo, and that the server there is running"
    billing_hint = "the AWS account's Billing console and Bedrock's service quotas"

    #: Where requests put cache points (Claude and Nova; `prompt_cache.py`'s settings).
    prompt_cache: PromptCache = "auto"

    def __init__(
        self,
        model: str,
        *,
        region: str | None = None,
        profile: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        params: dict[str, Any] | None = None,
        client: Any = None,
        timeouts: Timeouts | None = None,
        headers: Mapping[str, str] | None = None,
        stream: bool | None = None,
    ) -> None:
        if api_key is not None:
            raise ConfigError(
                "Amazon Bedrock signs each request with AWS credentials and takes no "
                "api_key: set AWS_PROFILE (or profile=), or AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY."
            )
        self.region = find_region(region, profile)
        where = self.region or "REGION"
        # The AWS SDKs' own variables for another endpoint (a VPC endpoint, a proxy, a mock)
        base_url = base_url or os.environ.get("AWS_ENDPOINT_URL_BEDROCK_RUNTIME")
        super().__init__(
            model,
            base_url=base_url or f"https://bedrock-runtime.{where}.amazonaws.com",
            params=params,
            client=client,
            timeouts=timeouts,
            headers=headers,
            stream=stream,
        )
        self.profile = profile
        self.auth = AwsAuth(self.region or "us-east-1", profile=profile)
        self._path = f"{self.base_url}/model/{quote(model, safe='')}"

    def check_key(self) -> None:
        """The extra installed and a region known (the credentials are loaded, in a worker
        thread, before the first request is signed: none is an AuthenticationError then)."""
        check_installed()
        if self.region is None:
            raise region_error(self.model)

    # -- the request ------------------------------------------------------------------

    def url(self) -> str:
        return f"{self._path}/converse"

    def stream_url(self) -> str:
        return f"{self._path}/converse-stream"

    def stream_body(self, body: dict[str, Any]) -> dict[str, Any]:
        return body  # the endpoint says it

    def headers(self, api_key: str) -> dict[str, str]:
        return {"accept": "application/json"}

    def price_model(self, replied: str | None = None) -> str:
        """`<region>/<model id>` where the price table has that region's own price for the
        model (some regions cost more than us-east-1), else the model id.

        Example:
            >>> BedrockProvider("meta.llama3-70b-instruct-v1:0", region="ap-south-1").price_model()
            'ap-south-1/meta.llama3-70b-instruct-v1:0'
        """
        name = super().price_model(replied)
        here = f"{self.region}/{name}"
        return here if self.region and find_price(self.name, here) is not None else name

    def reasoning_fields(self) -> dict[str, Any] | None:
        """`additionalModelRequestFields` for the chat's `reasoning`: Claude's `thinking`
        (and `output_config.effort` on the models that think adaptively), Nova 2's
        `reasoningConfig`, gpt-oss's `reasoning_effort`."""
        if self.reasoning is None:
            return None
        claude = claude_name(self.model)
        if claude is None:
            return effort_fields(self.model, self.reasoning, self.model_id)
        thinking, effort = thinking_fields(claude, self.reasoning, self.model_id)
        fields: dict[str, Any] = {}
        if thinking is not None:
            fields["thinking"] = thinking
        if effort is not None:
            fields["output_config"] = {"effort": effort}
        return fields or None

    def body(self, request: ChatRequest) -> dict[str, Any]:
        fields = self.reasoning_fields()
        thinking = (fields or {}).get("thinking")
        params = {k: v for k, v in {**self.params, **request.params}.items() if k != "stream"}
        body = converse_body(request, params=params, fields=fields, forced_ok=thinking is None)
        if isinstance(thinking, dict) and "maxTokens" not in body.get("inferenceConfig", {}):
            budget = thinking.get("budget_tokens")
            # maxTokens includes the thinking budget, and must exceed it.
            most = DEFAULT_MAX_TOKENS + (budget if isinstance(budget, int) else 0)
            body["inferenceConfig"] = {**body.get("inferenceConfig", {}), "maxTokens": most}
        if _caches(self.model):
            mark_cache(body, self._plan(request))
        return body

    def _plan(self, request: ChatRequest) -> Any:
        return cache_plan(request, self.prompt_cache, claude_name(self.model) or self.model)

    def call_config(self, request: ChatRequest) -> dict[str, Any]:
        config = super().call_config(request)
        if self.prompt_cache is not None and _caches(self.model):
            config = {**config, "cache_prompt": self._plan(request).any}
        return config

    async def authorize(self, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        """`headers` with this attempt's SigV4 signature (a retry is signed afresh, with
        credentials loaded again when they near their expiry)."""
        signed = await self.auth.sign_headers("POST", url, body)
        return {**headers, **signed}

    def live_secrets(self) -> tuple[str, ...]:
        return self.auth.live_secrets()

    # -- the reply ----------------------------------------------------------------------

    def stream_reader(self) -> StreamReader:
        return _ConverseStream()

    async def stream_events(
        self, response: StreamedResponse
    ) -> AsyncGenerator[ServerSentEvent, None]:
        """The frames of AWS's event stream, each as an event named by its `:event-type`
        (or its `:exception-type`), its payload as data; a frame whose CRC does not match
        is `MalformedResponse`."""
        eventstream = _eventstream()
        buffer = eventstream.EventStreamBuffer()
        async for chunk in response.chunks():
            buffer.add_data(chunk)
            try:
                for message in buffer:
                    yield self._event(message, response)
            except eventstream.ParserError as exc:
                raise MalformedResponse(
                    f"malformed response: a frame of the event stream is corrupt ({exc})",
                    provider=self.name,
                    model=self.model,
                    status=response.status,
                    request_id=self._request_id(response.headers),
                ) from None

    def _event(self, message: Any, response: StreamedResponse) -> ServerSentEvent:
        headers = message.headers
        data = bytes(message.payload).decode("utf-8", "replace")
        kind = headers.get(":message-type", "event")
        if kind == "exception":
            return ServerSentEvent(
                event=str(headers.get(":exception-type", "exception")), data=data
            )
        if kind == "error":
            said = {
                "message": headers.get(":error-message", ""),
                "code": headers.get(":error-code"),
            }
            return ServerSentEvent(
                event="internalServerException", data=msgspec.json.encode(said).decode()
            )
        return ServerSentEvent(event=str(headers.get(":event-type", "")), data=data)

    def parse(self, data: Any) -> Turn:
        return converse_turn(data, model=self.model)

    # -- errors -------------------------------------------------------------------------

    @staticmethod
    def _request_id(headers: Mapping[str, str]) -> str | None:
        return headers.get("x-amzn-requestid") or HttpProvider._request_id(headers)

    def _error(self, response: HttpResponse) -> ProviderError:
        try:
            data = msgspec.json.decode(response.body)
        except msgspec.DecodeError:
            data = None
        kind = _error_type(response.headers, data)
        error = super()._error(response)
        said = self.error_message(data) or error.message
        better = self._explained(kind, said, response.status, error)
        if better is not error:
            better.request_id, better.body = error.request_id, error.body
        return better

    def _explained(self, kind: str, said: str, status: int, error: ProviderError) -> ProviderError:
        """The error a Bedrock exception stands for, saying what to do."""
        kw: dict[str, Any] = {"provider": self.name, "model": self.model, "status": status}
        lowered = said.lower()
        if (
            kind == "ExpiredTokenException"
            or "security token included in the request is expired" in lowered
        ):
            self.auth.credential.invalidate()  # the retry loads them afresh
            return ProviderUnavailable(
                f"{kind or 'ExpiredToken'}: {said}. The AWS credentials are loaded again for "
                "the retry",
                **kw,
            )
        if kind == "AccessDeniedException" or "don't have access to the model" in lowered:
            return AuthenticationError(
                f"AccessDeniedException: {said}. To use {self.model} in {self.region}: {_ACCESS}",
                **kw,
            )
        if kind in ("UnrecognizedClientException", "InvalidSignatureException"):
            return AuthenticationError(
                f"{kind}: {said}. The AWS credentials in use are not valid here: check "
                "AWS_PROFILE / profile=, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
                **kw,
            )
        if kind == "ServiceQuotaExceededException":
            return QuotaExhausted(
                f"{kind}: {said}. Not retried: the account's Bedrock quota for this model and "
                "region is spent; raise it in the Service Quotas console (Amazon Bedrock), "
                "then resume the run (resume=True), which keeps the finished samples",
                **kw,
            )
        if kind in ("ThrottlingException", "ModelNotReadyException"):
            wait = error.retry_after
            return RateLimitError(f"{kind}: {said}", retry_after=wait, **kw)
        if "model identifier is invalid" in lowered or (
            kind == "ValidationException" and "model id" in lowered
        ):
            return ProviderError(
                f"ValidationException: {said}. Bedrock does not know the model id "
                f"'{self.model}' in {self.region}: check its spelling (e.g. "
                "'anthropic.claude-sonnet-4-5-20250929-v1:0'), whether the model needs an "
                "inference profile ('us.' / 'eu.' / 'global.' before it), and the region",
                **kw,
            )
        if kind == "ResourceNotFoundException":
            return ProviderError(f"{kind}: {said}. Check the model id and the region", **kw)
        if kind and kind not in error.message:
            error.message = f"{kind}: {error.message}"
            error.args = (error.message,)
        return error

    def __repr__(self) -> str:
        return f"<BedrockProvider model={self.model!r} region={self.region!r}>"


def _eventstream() -> Any:
    from ..cloud.extras import require

    return require("botocore.eventstream", extra="bedrock", platform="Amazon Bedrock")

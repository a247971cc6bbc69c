"""What OpenAI's two wire formats share: the account, the key, the errors, and the rules
the API holds its reasoning models to.

`OpenAIBase` is the root of the Chat Completions provider (`openai.py`, and every
OpenAI-compatible server through it) and of the Responses API provider
(`openai_responses.py`).

OpenAI's reasoning models (the o-series and the gpt-5 family and later, by name; a chat's
`reasoning_model=` says otherwise) refuse the sampling parameters (`temperature`,
`top_p` ...) unless their reasoning effort is `"none"`, and take their output limit as
`max_completion_tokens` (Chat Completions) or `max_output_tokens` (Responses). A request
that holds a refused parameter is a `ConfigError` naming it, before anything is sent:
every sample would fail alike. `max_tokens` is renamed, for these models and on
OpenAI's own endpoint for every model.

Example:
    >>> is_reasoning_model("o4-mini"), is_reasoning_model("gpt-5.4"), is_reasoning_model("gpt-4.1")
    (True, True, False)
"""

from __future__ import annotations

import re
from typing import Any, ClassVar
from urllib.parse import urlsplit

from .._errors import ConfigError
from .http import HttpProvider

__all__ = [
    "ERROR_STATUS",
    "OPENAI_HOST",
    "SAMPLING_PARAMS",
    "OpenAIBase",
    "error_status",
    "is_reasoning_model",
    "openai_hosted",
    "service_tier",
]

OPENAI_HOST = "api.openai.com"
_REASONING = re.compile(r"^(o\d|gpt-(5|[6-9]|\d\d))")
_CHAT_MODEL = re.compile(r"-chat(-|$)")
_STANDARD_TIERS = frozenset(("default", "auto", "standard"))
#: Parameters OpenAI's reasoning models refuse (unless their effort is "none").
SAMPLING_PARAMS = (
    "temperature",
    "top_p",
    "presence_penalty",
    "frequency_penalty",
    "logprobs",
    "top_logprobs",
    "logit_bias",
)

#: The HTTP status an error event's `code` or `type` stands for (OpenAI's and compatible
#: servers' names); a mid-stream failure of another kind counts as a 500.
ERROR_STATUS = {
    "invalid_request_error": 400,
    "context_length_exceeded": 400,
    "invalid_api_key": 401,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "model_not_found": 404,
    "rate_limit_exceeded": 429,
    "rate_limit_error": 429,
    "requests": 429,
    "tokens": 429,
    "insufficient_quota": 429,
    "server_error": 500,
    "internal_error": 500,
    "api_error": 500,
    "service_unavailable": 503,
    "overloaded": 503,
    "overloaded_error": 503,
    "timeout": 504,
}


def is_reasoning_model(model: str) -> bool:
    """Whether OpenAI's `model` is a reasoning model: the o-series, the gpt-5 family and
    later, but not their `-chat` models."""
    return bool(_REASONING.match(model)) and not _CHAT_MODEL.search(model)


def openai_hosted(base_url: str) -> bool:
    """Whether `base_url` is OpenAI's own API."""
    return (urlsplit(base_url).hostname or "").lower() == OPENAI_HOST


def service_tier(data: dict[str, Any]) -> str | None:
    """The tier that served a reply, None for the standard one."""
    tier = data.get("service_tier")
    return tier if isinstance(tier, str) and tier not in _STANDARD_TIERS else None


def error_status(error: Any) -> int:
    """The HTTP status an error object (an error event's, or a failed response's) stands
    for, by its status, `code` or `type`."""
    if isinstance(error, dict):
        for key in ("code", "status", "status_code"):
            value = error.get(key)
            if isinstance(value, str) and value.isdecimal():
                value = int(value)
            if isinstance(value, int) and 400 <= value < 600:
                return value
        for key in ("code", "type"):
            value = error.get(key)
            if isinstance(value, str) and value in ERROR_STATUS:
                return ERROR_STATUS[value]
    return 500


class OpenAIBase(HttpProvider):
    """OpenAI's account, key, errors and reasoning-model rules, for both wire formats."""

    name = "OpenAI"
    id_prefix = "openai"
    env_key: ClassVar[str | None] = "OPENAI_API_KEY"
    default_base_url = "https://api.openai.com/v1"
    #: As the OpenAI SDK reads it: a gateway, proxy or compatible server for every chat.
    env_base_url: ClassVar[str | None] = "OPENAI_BASE_URL"
    billing_hint = "https://platform.openai.com/settings/organization/billing"
    #: Whether OpenAI's rules for reasoning models apply to models named like them
    #: (OpenAI-compatible servers' models are their own: no).
    reasoning_rules: ClassVar[bool] = True
    #: The endpoint a batch's requests name (OpenAI's batch API).
    batch_url: ClassVar[str] = "/v1/chat/completions"

    #: Whether the model is a reasoning model: None decides by its name.
    reasoning_model: bool | None = None

    @property
    def is_reasoning(self) -> bool:
        """Whether the API's rules for reasoning models apply to this model."""
        if self.reasoning_model is not None:
            return self.reasoning_model
        return self.reasoning_rules and is_reasoning_model(self.model)

    def headers(self, api_key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def effort(self) -> str | None:
        """The reasoning effort to send (OpenAI's efforts are words, not budgets)."""
        setting = self.reasoning
        if setting is None:
            return None
        if isinstance(setting, int):
            raise ConfigError(
                f"{self.model_id} takes a reasoning effort ('minimal', 'low', 'medium', "
                f"'high' ...), not a budget of {setting} thinking tokens: pass reasoning='high'."
            )
        return setting

    def check_request(self, body: dict[str, Any], effort: str | None) -> None:
        """Refuse, before anything is sent, parameters the API refuses for this model."""
        if not self.is_reasoning or effort == "none":
            return
        refused = [name for name in SAMPLING_PARAMS if name in body]
        if refused:
            names = ", ".join(f"`{name}`" for name in refused)
            raise ConfigError(
                f"{self.model_id} is a reasoning model: OpenAI refuses {names} for it. Remove "
                f"{'it' if len(refused) == 1 else 'them'} from the chat's params (or the "
                "call's), set reasoning='none' on a model that takes sampling parameters "
                "then, or pass reasoning_model=False if this model is not one."
            )

    def quota_exhausted(self, status: int, data: Any) -> bool:
        """OpenAI's `insufficient_quota` (a 429 that no wait cures), in an error body or an
        error event."""
        if not isinstance(data, dict):
            return False
        nested = data.get("error")
        error: dict[str, Any] = nested if isinstance(nested, dict) else data
        return "insufficient_quota" in (error.get("code"), error.get("type"))

    def output_limit(self, body: dict[str, Any], name: str) -> None:
        """Move `max_tokens` (and `max_completion_tokens`, when `name` is another) to
        `name`, the output limit the API takes here; a limit given by its own name wins."""
        for other in ("max_tokens", "max_completion_tokens"):
            if other != name and other in body:
                value = body.pop(other)
                body.setdefault(name, value)

"""The provider of chats rebuilt from a log: it names the logged model but cannot call it."""

from __future__ import annotations

from .._errors import ConfigError
from ..vocab.model_calls import ChatRequest
from ..vocab.turns import Turn
from .base import Provider

__all__ = ["ReplayProvider", "provider_display_name", "split_model_id"]

#: Log prefixes (`openai/...`) -> the display names our providers use in cost tables.
_DISPLAY_NAMES = {
    "anthropic": "Anthropic",
    "deepseek": "DeepSeek",
    "google": "Google",
    "groq": "Groq",
    "mock": "Mock",
    "ollama": "Ollama",
    "openai": "OpenAI",
    "openrouter": "OpenRouter",
    "vllm": "vLLM",
}

#: Model-name prefixes that identify a provider when a log names a bare model
#: (logs written by the R package vitals say "claude-3-7-sonnet-latest").
_MODEL_PREFIXES = (
    ("claude", "anthropic"),
    ("gemini", "google"),
    ("gpt-", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("deepseek", "deepseek"),
)


def split_model_id(model_id: str) -> tuple[str, str]:
    """`"provider/model"` -> (provider prefix, model); a bare model gets its provider guessed.

    Example:
        >>> split_model_id("openai/gpt-4.1")
        ('openai', 'gpt-4.1')
        >>> split_model_id("claude-3-7-sonnet-latest")
        ('anthropic', 'claude-3-7-sonnet-latest')
    """
    prefix, sep, model = model_id.partition("/")
    if sep and prefix and model:
        return prefix, model
    for start, provider in _MODEL_PREFIXES:
        if model_id.lower().startswith(start):
            return provider, model_id
    return "unknown", model_id


def provider_display_name(prefix: str) -> str:
    """The name a live provider of this log prefix reports ("openai" -> "OpenAI")."""
    return _DISPLAY_NAMES.get(prefix.lower(), prefix)


class ReplayProvider(Provider):
    """Stands for the model of a chat read from a log; calling it raises `ConfigError`.

    Example:
        >>> provider = ReplayProvider("openai/gpt-4.1")
        >>> provider.name, provider.model, provider.model_id
        ('OpenAI', 'gpt-4.1', 'openai/gpt-4.1')
    """

    def __init__(self, model_id: str) -> None:
        prefix, model = split_model_id(model_id)
        super().__init__(model=model, base_url="replay://")
        self.id_prefix = prefix
        self.name = provider_display_name(prefix)

    async def generate(self, request: ChatRequest) -> Turn:
        if self.id_prefix in _DISPLAY_NAMES:
            constructor = f"chat('{self.id_prefix}/{self.model}')"
        else:
            constructor = f"chat_openai(model='{self.model}', base_url=...)"
        raise ConfigError(
            f"This chat was read from a log of {self.model_id}; it cannot call the model. "
            f"To continue it, make a live chat and give it the logged turns: "
            f"`live = {constructor}` then `live.set_turns(logged_chat.turns)`."
        )

"""Which batch API a provider speaks.

Example:
    >>> batch_api(chat_openai("gpt-4.1-mini").provider)
    <vitals_engine.providers.openai_batch.OpenAIBatchApi object at ...>
"""

from __future__ import annotations

from typing import Any

from .._errors import ConfigError
from ..providers.anthropic import AnthropicProvider
from ..providers.anthropic_batch import AnthropicBatchApi
from ..providers.batch_api import BatchApi
from ..providers.google import GeminiProvider
from ..providers.google_batch import GeminiBatchApi
from ..providers.openai_base import OpenAIBase
from ..providers.openai_batch import OpenAIBatchApi

__all__ = ["batch_api"]


def batch_api(provider: Any) -> BatchApi:
    """The batch API of `provider`'s wire format, or a ConfigError for one that has none."""
    if not getattr(provider, "sends_batches", True):
        raise ConfigError(
            f"{provider.model_id} cannot send batches: the batch API of {provider.name} is not "
            "built. Run it without batch mode (batch=False on the model)."
        )
    if isinstance(provider, OpenAIBase):
        return OpenAIBatchApi(provider)
    if isinstance(provider, AnthropicProvider):
        return AnthropicBatchApi(provider)
    if isinstance(provider, GeminiProvider):
        return GeminiBatchApi(provider)
    raise ConfigError(
        f"{getattr(provider, 'model_id', provider)} cannot send batches: batch mode is for "
        "OpenAI, Anthropic and Gemini models (and servers that speak their batch APIs). "
        "Run it without batch mode (batch=False on the model)."
    )

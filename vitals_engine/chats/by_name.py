"""`chat("provider/model")`: a chat from a string, by the constructor its provider names."""

from __future__ import annotations

from typing import Any, Unpack

from .._errors import ConfigError
from .chat import Chat
from .cloud import chat_aws_bedrock, chat_azure_openai, chat_google_vertex
from .constructors import (
    AnyChatOptions,
    chat_anthropic,
    chat_deepseek,
    chat_google_gemini,
    chat_groq,
    chat_mock,
    chat_ollama,
    chat_openai,
    chat_openrouter,
    chat_vllm,
)

__all__ = ["chat"]

_CONSTRUCTORS: dict[str, Any] = {
    "openai": chat_openai,
    "anthropic": chat_anthropic,
    "bedrock": chat_aws_bedrock,
    "google": chat_google_gemini,
    "gemini": chat_google_gemini,
    "ollama": chat_ollama,
    "vllm": chat_vllm,
    "openrouter": chat_openrouter,
    "groq": chat_groq,
    "deepseek": chat_deepseek,
    "azure": lambda deployment, **kw: chat_azure_openai(deployment=deployment, **kw),
    "vertex": chat_google_vertex,
    "mock": lambda model, **kw: chat_mock(model=model, **kw),
}


def chat(provider_model: str, **options: Unpack[AnyChatOptions]) -> Chat:
    """A chat from a `"provider/model"` string, with the named constructor's options.

    Providers: openai, anthropic, bedrock (Amazon Bedrock), google (or gemini), ollama,
    vllm, openrouter, groq, deepseek, azure (Azure OpenAI; the model is the deployment),
    vertex (Gemini or Claude on Vertex AI), mock. The options are `ChatOptions`, and `api`
    and `reasoning_model` for openai, `prompt_cache` for anthropic, bedrock and vertex,
    `region` and `profile` for bedrock, `api_version`, `credential`, `token_provider` and
    `model` for azure, `project`, `location` and `credentials` for vertex (`AnyChatOptions`).

    Example:
        >>> chat("openai/gpt-4.1-mini", system_prompt="Be brief.")
        >>> chat("anthropic/claude-sonnet-4-5")
        >>> chat("bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0", region="us-east-1")
        >>> chat("ollama/llama3.2")
        >>> chat("azure/prod-gpt5", model="gpt-5")  # the endpoint: AZURE_OPENAI_ENDPOINT
        >>> chat("vertex/claude-sonnet-4-5@20250929", location="us-east5")
    """
    provider, sep, model = provider_model.partition("/")
    if not sep or not model:
        raise ConfigError(
            f"'{provider_model}' is not 'provider/model', e.g. 'openai/gpt-4.1-mini'."
        )
    make = _CONSTRUCTORS.get(provider.lower())
    if make is None:
        raise ConfigError(
            f"Unknown provider '{provider}' in '{provider_model}'. "
            f"Known: {', '.join(sorted(_CONSTRUCTORS))}."
        )
    return make(model, **options)  # positional: an option may be named `model` (azure)

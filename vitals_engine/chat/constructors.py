"""Named constructors, one per provider, and `chat("provider/model")`.

Every constructor takes `model=`, `base_url=`, `api_key=` (default: the
provider's usual environment variable) and `system_prompt=`, plus
`params=` (request parameters such as temperature or max_tokens),
`client=` (your own `httpx.AsyncClient`: proxies, custom auth) and
`timeouts=` (a `Timeouts(connect=, read=)` per attempt).
"""

from __future__ import annotations

from typing import Any

from .._errors import ConfigError
from ..providers.http import HttpProvider
from ..providers.mock import MockProvider, ReplyScript
from ..providers.openai import (
    DeepSeekProvider,
    GroqProvider,
    OllamaProvider,
    OpenAIProvider,
    OpenRouterProvider,
    VLLMProvider,
)
from ..providers.transport import Timeouts
from .chat import Chat

__all__ = [
    "chat",
    "chat_deepseek",
    "chat_groq",
    "chat_mock",
    "chat_ollama",
    "chat_openai",
    "chat_openrouter",
    "chat_vllm",
]


def chat_mock(
    replies: ReplyScript | None = None,
    *,
    model: str = "mock-model",
    system_prompt: str | None = None,
    latency: float = 0.0,
) -> Chat:
    """A deterministic offline chat: the embedded default for examples and tests.

    It answers "What's A+B?" with the sum, grades model-graded prompts, and
    echoes anything else. `replies` scripts it: a function of the prompt text
    returning the reply (a string or a `Turn`), or a list of replies taken in
    call order. `latency` (seconds) simulates a slow model.

    Example:
        >>> chat_mock().chat("What's 2+3?")
        '2 + 3 = 5'
        >>> chat_mock(lambda prompt: "42").chat("Anything")
        '42'
    """
    return Chat(
        MockProvider(model=model, replies=replies, latency=latency), system_prompt=system_prompt
    )


def _http_chat(
    cls: type[HttpProvider],
    model: str,
    base_url: str | None,
    api_key: str | None,
    system_prompt: str | None,
    params: dict[str, Any] | None,
    client: Any,
    timeouts: Timeouts | None,
    headers: dict[str, str] | None = None,
) -> Chat:
    provider = cls(
        model,
        base_url=base_url,
        api_key=api_key,
        params=params,
        client=client,
        timeouts=timeouts,
        headers=headers,
    )
    return Chat(provider, system_prompt=system_prompt)


def chat_openai(
    model: str = "gpt-4.1-mini",
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    system_prompt: str | None = None,
    params: dict[str, Any] | None = None,
    client: Any = None,
    timeouts: Timeouts | None = None,
    headers: dict[str, str] | None = None,
) -> Chat:
    """A chat with an OpenAI model, or any OpenAI-compatible server via `base_url`.

    The key defaults to `OPENAI_API_KEY`.

    Example:
        >>> chat = chat_openai(model="gpt-4.1-mini", params={"temperature": 0})
        >>> local = chat_openai(model="qwen3", base_url="http://localhost:8000/v1", api_key="x")
    """
    return _http_chat(
        OpenAIProvider, model, base_url, api_key, system_prompt, params, client, timeouts, headers
    )


def chat_ollama(
    model: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    system_prompt: str | None = None,
    params: dict[str, Any] | None = None,
    client: Any = None,
    timeouts: Timeouts | None = None,
) -> Chat:
    """A model served by Ollama (default http://localhost:11434/v1; no key needed).

    Example:
        >>> chat = chat_ollama(model="llama3.2")
    """
    return _http_chat(
        OllamaProvider, model, base_url, api_key, system_prompt, params, client, timeouts
    )


def chat_vllm(
    model: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    system_prompt: str | None = None,
    params: dict[str, Any] | None = None,
    client: Any = None,
    timeouts: Timeouts | None = None,
) -> Chat:
    """A model served by vLLM (default http://localhost:8000/v1; key `VLLM_API_KEY` if set).

    Example:
        >>> chat = chat_vllm(model="Qwen/Qwen3-8B", base_url="http://gpu-box:8000/v1")
    """
    return _http_chat(
        VLLMProvider, model, base_url, api_key, system_prompt, params, client, timeouts
    )


def chat_openrouter(
    model: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    system_prompt: str | None = None,
    params: dict[str, Any] | None = None,
    client: Any = None,
    timeouts: Timeouts | None = None,
) -> Chat:
    """A model through OpenRouter (key `OPENROUTER_API_KEY`).

    Example:
        >>> chat = chat_openrouter(model="meta-llama/llama-3.3-70b-instruct")
    """
    return _http_chat(
        OpenRouterProvider, model, base_url, api_key, system_prompt, params, client, timeouts
    )


def chat_groq(
    model: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    system_prompt: str | None = None,
    params: dict[str, Any] | None = None,
    client: Any = None,
    timeouts: Timeouts | None = None,
) -> Chat:
    """A model on Groq (key `GROQ_API_KEY`).

    Example:
        >>> chat = chat_groq(model="llama-3.3-70b-versatile")
    """
    return _http_chat(
        GroqProvider, model, base_url, api_key, system_prompt, params, client, timeouts
    )


def chat_deepseek(
    model: str = "deepseek-chat",
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    system_prompt: str | None = None,
    params: dict[str, Any] | None = None,
    client: Any = None,
    timeouts: Timeouts | None = None,
) -> Chat:
    """A DeepSeek model (key `DEEPSEEK_API_KEY`).

    Example:
        >>> chat = chat_deepseek()
    """
    return _http_chat(
        DeepSeekProvider, model, base_url, api_key, system_prompt, params, client, timeouts
    )


def _constructors() -> dict[str, Any]:
    from . import constructors as c

    table: dict[str, Any] = {
        "openai": c.chat_openai,
        "ollama": c.chat_ollama,
        "vllm": c.chat_vllm,
        "openrouter": c.chat_openrouter,
        "groq": c.chat_groq,
        "deepseek": c.chat_deepseek,
        "mock": lambda model, **kw: chat_mock(model=model, system_prompt=kw.get("system_prompt")),
    }
    for name, attr in (
        ("anthropic", "chat_anthropic"),
        ("google", "chat_google_gemini"),
        ("gemini", "chat_google_gemini"),
    ):
        if hasattr(c, attr):
            table[name] = getattr(c, attr)
    return table


def chat(provider_model: str, **kwargs: Any) -> Chat:
    """A chat from a `"provider/model"` string, with the named constructor's options.

    Example:
        >>> chat("openai/gpt-4.1-mini", system_prompt="Be brief.")
        >>> chat("anthropic/claude-sonnet-4-5")
        >>> chat("ollama/llama3.2")
    """
    provider, sep, model = provider_model.partition("/")
    table = _constructors()
    if not sep or not model:
        raise ConfigError(
            f"'{provider_model}' is not 'provider/model', e.g. 'openai/gpt-4.1-mini'."
        )
    make = table.get(provider.lower())
    if make is None:
        raise ConfigError(
            f"Unknown provider '{provider}' in '{provider_model}'. "
            f"Known: {', '.join(sorted(table))}."
        )
    return make(model=model, **kwargs)

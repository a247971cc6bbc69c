"""`chat_google_gemini()`: a chat with a Google Gemini model, over our own HTTP code."""

from __future__ import annotations

from typing import Any

from ..providers.google import GeminiProvider
from ..providers.transport import Timeouts
from .chat import Chat
from .constructors import _http_chat

__all__ = ["chat_google_gemini"]


def chat_google_gemini(
    model: str = "gemini-2.5-flash",
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    system_prompt: str | None = None,
    params: dict[str, Any] | None = None,
    client: Any = None,
    timeouts: Timeouts | None = None,
) -> Chat:
    """A chat with a Google Gemini model through the `generateContent` API.

    The key defaults to `GEMINI_API_KEY`, then `GOOGLE_API_KEY`. `params` go into
    Gemini's `generationConfig`: `max_tokens`, `temperature`, `top_p`, `top_k`,
    `stop` and `thinking_budget` are translated, other keys (e.g. `thinkingConfig`)
    pass through as given; `safety_settings` and `tool_config` go to the request's top.

    Example:
        >>> chat = chat_google_gemini(model="gemini-2.5-flash", params={"temperature": 0})
        >>> chat.chat("What's 2+2?")
        '2 + 2 = 4'
    """
    return _http_chat(
        GeminiProvider, model, base_url, api_key, system_prompt, params, client, timeouts
    )

"""`chat_anthropic()`: a chat with a Claude model over Anthropic's Messages API."""

from __future__ import annotations

from typing import Any

from ..providers.anthropic import AnthropicProvider
from ..providers.transport import Timeouts
from .chat import Chat

__all__ = ["chat_anthropic"]


def chat_anthropic(
    model: str = "claude-sonnet-4-5",
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    system_prompt: str | None = None,
    params: dict[str, Any] | None = None,
    client: Any = None,
    timeouts: Timeouts | None = None,
    headers: dict[str, str] | None = None,
) -> Chat:
    """A chat with an Anthropic (Claude) model.

    The key defaults to `ANTHROPIC_API_KEY`. `max_tokens` defaults to 4096
    (the API requires one); set it, `temperature`, `thinking` and the like
    in `params`. `headers` adds request headers, such as `anthropic-beta`.

    Example:
        >>> chat = chat_anthropic(model="claude-sonnet-4-5", params={"temperature": 0})
        >>> chat.chat("What's 2+2?")
        '4'
        >>> thinking = {"type": "enabled", "budget_tokens": 2048}
        >>> thinker = chat_anthropic(params={"thinking": thinking})
    """
    # Imported here: constructors.py re-exports this function, so a module-level
    # import of it would be circular.
    from .constructors import _http_chat

    return _http_chat(
        AnthropicProvider,
        model,
        base_url,
        api_key,
        system_prompt,
        params,
        client,
        timeouts,
        headers,
    )

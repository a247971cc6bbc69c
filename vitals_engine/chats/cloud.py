"""Constructors of the chats that reach models through a cloud platform's account: Amazon
Bedrock, Azure OpenAI and Vertex AI. Each takes the options every HTTP chat takes
(`ChatOptions`), less the API key where the platform signs or uses tokens, and the
platform's own (region, deployment, project ...)."""

from __future__ import annotations

from typing import Any, Unpack

from .._errors import ConfigError
from ..providers.prompt_cache import PromptCache, prompt_cache_setting
from ..providers.vertex import VertexClaude, VertexGemini
from .chat import Chat
from .constructors import ChatOptions, _http_chat

__all__: list[str] = ["chat_google_vertex"]


# -- Amazon Bedrock -------------------------------------------------------------------

# (chat_aws_bedrock)


# -- Azure OpenAI ---------------------------------------------------------------------

# (chat_azure_openai)


# -- Vertex AI ------------------------------------------------------------------------


def chat_google_vertex(
    model: str = "gemini-2.5-flash",
    *,
    project: str | None = None,
    location: str | None = None,
    credentials: Any = None,
    prompt_cache: PromptCache = "auto",
    **options: Unpack[ChatOptions],
) -> Chat:
    """A chat with a model on Google Cloud's Vertex AI: Gemini, or Claude for a model id
    starting "claude" (with its version after an `@`: `claude-sonnet-4-5@20250929`).

    Credentials are Application Default Credentials (google-auth, the `vertex` extra):
    the file `GOOGLE_APPLICATION_CREDENTIALS` names, else gcloud's user credentials
    (`gcloud auth application-default login`), else the metadata server on Google Cloud;
    or `credentials=` (google-auth credentials of your own). No API key. Their token is
    refreshed before it expires. `project` defaults to `GOOGLE_CLOUD_PROJECT`, then the
    credentials' project; `location` to `GOOGLE_CLOUD_LOCATION`, then "global" (current
    Gemini and Claude models; pass a region such as "us-east5" for data residency or for
    models served only in regions). Gemini takes what `chat_google_gemini` takes, Claude
    what `chat_anthropic` takes (`prompt_cache`, thinking through `reasoning`). Vertex
    has no batch mode here: a run in batch mode refuses these chats.

    Example:
        >>> gemini = chat_google_vertex("gemini-2.5-pro", project="my-project")
        >>> claude = chat_google_vertex("claude-sonnet-4-5@20250929", location="us-east5")
    """
    if options.get("api_key") is not None:
        raise ConfigError(
            "chat_google_vertex() takes no api_key: Vertex AI uses Google Cloud credentials "
            "(GOOGLE_APPLICATION_CREDENTIALS, `gcloud auth application-default login`, or "
            "credentials=...)."
        )
    claude = model.startswith("claude")
    if not claude and prompt_cache != "auto":
        raise ConfigError(
            f"prompt_cache is Claude's option; Gemini on Vertex ({model}) caches by itself."
        )
    own = ("project", "location", "credentials", "prompt_cache")
    chat = _http_chat(VertexClaude if claude else VertexGemini, model, options, own=own)
    provider = chat.provider
    assert isinstance(provider, VertexClaude | VertexGemini)
    provider.place(project=project, location=location, credentials=credentials)
    if isinstance(provider, VertexClaude):
        provider.prompt_cache = prompt_cache_setting(prompt_cache)
        provider.thinking_setting()  # a setting the model cannot take is refused now
    return chat

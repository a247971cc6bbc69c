"""Constructors of the chats that reach models through a cloud platform's account: Amazon
Bedrock, Azure OpenAI and Vertex AI. Each takes the options every HTTP chat takes
(`ChatOptions`), less the API key where the platform signs or uses tokens, and the
platform's own (region, deployment, project ...)."""

from __future__ import annotations

from typing import Unpack

from ..providers.bedrock import BedrockProvider
from ..providers.prompt_cache import PromptCache, prompt_cache_setting
from .chat import Chat
from .constructors import ChatOptions, _http_chat

__all__: list[str] = ["chat_aws_bedrock"]


# -- Amazon Bedrock -------------------------------------------------------------------


def chat_aws_bedrock(
    model: str,
    *,
    region: str | None = None,
    profile: str | None = None,
    prompt_cache: PromptCache = "auto",
    **options: Unpack[ChatOptions],
) -> Chat:
    """A chat with a model on Amazon Bedrock, through the Converse API, each request
    signed with your AWS credentials (SigV4).

    `model`: a Bedrock model id (`anthropic.claude-sonnet-4-5-20250929-v1:0`), a
    cross-region inference profile (`us.`, `eu.`, `apac.`, `global.` before one) or an
    ARN, passed as given. `region`: else `AWS_REGION`, `AWS_DEFAULT_REGION`, the
    profile's. Credentials: botocore's chain (the environment, `profile` or
    `AWS_PROFILE` in the shared config files, SSO, web identity, the container and
    instance metadata), loaded again before temporary ones expire; no `api_key`.
    `params`: `max_tokens`, `temperature`, `top_p`, `stop` go into `inferenceConfig`,
    Converse's own keys (`guardrailConfig` ...) as given, anything else into
    `additionalModelRequestFields`. `reasoning` sets Claude's `thinking`;
    `prompt_cache` puts cache points (Claude and Nova) as `chat_anthropic`'s does.
    `stream=True` uses ConverseStream. `base_url` (or `AWS_ENDPOINT_URL_BEDROCK_RUNTIME`)
    replaces the region's endpoint.

    Example:
        >>> chat = chat_aws_bedrock("us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        ...                         region="us-east-1")
        >>> thinker = chat_aws_bedrock("anthropic.claude-sonnet-4-5-20250929-v1:0",
        ...                            profile="research", reasoning=4000)
    """
    own = ("region", "profile", "prompt_cache")
    chat = _http_chat(BedrockProvider, model, options, own=own, region=region, profile=profile)
    provider = chat.provider
    assert isinstance(provider, BedrockProvider)
    provider.prompt_cache = prompt_cache_setting(prompt_cache)
    provider.reasoning_fields()  # a setting the model cannot take is refused now
    return chat


# -- Azure OpenAI ---------------------------------------------------------------------

# (chat_azure_openai)


# -- Vertex AI ------------------------------------------------------------------------

# (chat_google_vertex)

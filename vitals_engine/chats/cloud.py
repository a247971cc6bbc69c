"""Constructors of the chats that reach models through a cloud platform's account: Amazon
Bedrock, Azure OpenAI and Vertex AI. Each takes the options every HTTP chat takes
(`ChatOptions`), less the API key where the platform signs or uses tokens, and the
platform's own (region, deployment, project ...)."""

from __future__ import annotations

from typing import Any, Literal, Unpack

from .._errors import ConfigError
from ..providers.azure_openai import AzureOpenAIProvider, AzureOpenAIResponsesProvider
from ..providers.bedrock import BedrockProvider
from ..providers.prompt_cache import PromptCache, prompt_cache_setting
from ..providers.vertex import VertexClaude, VertexGemini
from .chat import Chat
from .constructors import ChatOptions, _http_chat

__all__: list[str] = ["chat_aws_bedrock", "chat_azure_openai", "chat_google_vertex"]


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
    `additionalModelRequestFields`. `reasoning` sets Claude's `thinking`, Nova 2's
    `reasoningConfig` and gpt-oss's `reasoning_effort`;
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

#: Which of Azure OpenAI's endpoints a chat uses.
AzureApi = Literal["chat_completions", "responses"]
_AZURE_APIS = {
    "chat_completions": AzureOpenAIProvider,
    "responses": AzureOpenAIResponsesProvider,
}


def chat_azure_openai(
    endpoint: str | None = None,
    *,
    deployment: str,
    api_version: str | None = None,
    api: AzureApi = "chat_completions",
    credential: Any = None,
    token_provider: Any = None,
    model: str | None = None,
    reasoning_model: bool | None = None,
    **options: Unpack[ChatOptions],
) -> Chat:
    """A chat with a model deployed in an Azure OpenAI (or Azure AI Foundry) resource.

    `endpoint`: the resource's, `https://<resource>.openai.azure.com` (or
    `.cognitiveservices.azure.com`); default `AZURE_OPENAI_ENDPOINT`. `deployment`: the
    deployment's name (yours, e.g. "prod-gpt5"). Without `api_version` the v1 API is used
    (`/openai/v1/...`); with one, the dated paths
    (`/openai/deployments/{deployment}/chat/completions?api-version=...`).

    `api`: "chat_completions" (the default: every deployment and api-version serves it)
    or "responses" (the Responses API, for the models and regions that have it).
    Authentication: `api_key=` (default `AZURE_OPENAI_API_KEY`), else Microsoft Entra ID:
    `credential` (an azure-identity credential), `token_provider` (a callable returning
    a token), or, with neither, `DefaultAzureCredential` (needs
    `pip install "vitals-engine[azure]"`); the token is refreshed before it expires.

    `model`: the model behind the deployment, for prices and OpenAI's rules for reasoning
    models. Without it the reply's own model (Azure names it, "gpt-5-mini-2025-08-07")
    is priced, else the deployment's name; a model with no price costs None (unknown),
    never 0. The other options are `chat_openai`'s (`reasoning`, `params`, `stream` ...).

    Example:
        >>> chat = chat_azure_openai("https://my-resource.openai.azure.com",
        ...                          deployment="prod-gpt5", model="gpt-5")
        >>> dated = chat_azure_openai(deployment="gpt-4o", api_version="2024-10-21")
        >>> entra = chat_azure_openai(deployment="gpt-5-mini", credential=my_credential)
    """
    cls = _AZURE_APIS.get(api)
    if cls is None:
        raise ConfigError(
            f"chat_azure_openai(api={api!r}): one of {', '.join(map(repr, _AZURE_APIS))}."
        )
    if not deployment:
        raise ConfigError("chat_azure_openai() needs deployment=: the deployment's name.")
    if endpoint is not None and options.get("base_url") is not None:
        raise ConfigError("chat_azure_openai(): pass the endpoint once (not base_url= too).")
    given = ChatOptions(**options)
    given["base_url"] = endpoint or options.get("base_url")
    chat = _http_chat(cls, deployment, given, own=("deployment", "api_version", "api", "model"))
    provider = chat.provider
    assert isinstance(provider, (AzureOpenAIProvider, AzureOpenAIResponsesProvider))
    provider.api_version = api_version
    provider.model_name = model
    provider.reasoning_model = reasoning_model
    if credential is not None or token_provider is not None:
        provider.use_entra(credential, token_provider)
    provider.effort()  # a budget of tokens is refused now, not at the first call
    return chat


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

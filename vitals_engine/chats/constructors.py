"""Named constructors, one per provider, and `chat("provider/model")`.

Every constructor takes the model and these keyword options (`ChatOptions`):

- `base_url`: another server speaking the same API (a proxy, a local vLLM ...);
- `api_key`: default the provider's usual environment variable;
- `system_prompt`;
- `params`: request parameters such as `temperature` or `max_tokens`;
- `client`: your own `httpx.AsyncClient` (custom auth, its own TLS settings);
  proxies need none: every transport follows HTTP_PROXY, HTTPS_PROXY, ALL_PROXY
  and NO_PROXY;
- `timeouts`: `Timeouts(connect=, read=, total=)` per attempt (streamed, `read`
  bounds each wait between two events, not the whole reply; `total`, 1800 s
  unless told, bounds the whole attempt);
- `headers`: extra request headers;
- `stream`: receive the reply as server-sent events (see `ChatOptions`);
- `rate_limits`: `RateLimits(max_concurrency=, rpm=, tpm=)` for this model;
- `cost_budget`: the most this model may cost in one run, in dollars (the run starts
  no sample that could take the model's spending past it: `eval(cost_budget=)`);
- `retry`: `Retry(max_attempts=, timeout=, ...)` for this model;
- `batch`: this model's calls in the provider's batch API, at half the price and
  answered later (True, or `Batch(size=, wait=, poll=)`), even when the run's are
  live; False keeps them live even in a run in batch mode;
- `cache`: this model's replies kept on disk and reused for an identical call
  (True, or `Cache(dir=, expiry=)`), even when the run has no cache; False never
  caches them, even in a run with `cache=True`;
- `reasoning`: how hard the model thinks, an effort ("none", "minimal", "low",
  "medium", "high", "xhigh") or a budget of thinking tokens (an int), mapped to each
  provider's own fields (`providers/reasoning.py`); raw `params` still win.

`chat_openai` also takes `api` (which of OpenAI's endpoints) and `reasoning_model`;
`chat_anthropic` takes `prompt_cache`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal, TypedDict, Unpack

from .._deprecated import renamed_keyword
from .._errors import ConfigError, keyword_hint
from ..caching.options import Cache, cache_option
from ..pacing.batch_mode import Batch, batch_option
from ..pacing.budget import check_budget
from ..pacing.limits import RateLimits, cost_budget_of
from ..pacing.retry import Retry
from ..providers.anthropic import AnthropicProvider
from ..providers.google import GeminiProvider
from ..providers.http import HttpProvider
from ..providers.mock import STREAM_PAUSE, MockProvider, ReplyScript
from ..providers.openai import (
    DeepSeekProvider,
    GroqProvider,
    OllamaProvider,
    OpenAIProvider,
    OpenRouterProvider,
    VLLMProvider,
)
from ..providers.openai_base import OpenAIBase, openai_hosted
from ..providers.openai_responses import OpenAIResponsesProvider
from ..providers.prompt_cache import PromptCache, prompt_cache_setting
from ..providers.reasoning import reasoning_setting
from ..transport.base import Timeouts
from .chat import Chat

__all__ = [
    "AnyChatOptions",
    "ChatOptions",
    "OpenAIApi",
    "chat_anthropic",
    "chat_deepseek",
    "chat_google_gemini",
    "chat_groq",
    "chat_mock",
    "chat_ollama",
    "chat_openai",
    "chat_openrouter",
    "chat_vllm",
]


class ChatOptions(TypedDict, total=False):
    """Keyword options every HTTP chat constructor takes.

    `stream`: True receives every reply as server-sent events, as it is made: a long
    generation keeps the connection busy instead of silent (so `Timeouts(read=)` is
    the longest pause between two pieces, not the time for the whole reply), and the
    text shows in the live viewer as it arrives. The reply is the same `Turn` either
    way; a stream cut short is retried, never taken as the answer. False never
    streams. None (the default) streams only where the API requires it: Anthropic
    requests with `max_tokens` above 21,333, which the API refuses whole. A
    `"stream": true` in `params` counts as asking, unless `stream=False`.
    """

    base_url: str | None
    api_key: str | None
    system_prompt: str | None
    params: dict[str, Any] | None
    client: Any
    timeouts: Timeouts | None
    headers: dict[str, str] | None
    stream: bool | None
    rate_limits: RateLimits | None
    cost_budget: float | None
    retry: Retry | None
    batch: Batch | bool | None
    cache: Cache | bool | None
    reasoning: str | int | None


#: Which of OpenAI's endpoints a chat uses: "auto" is the Responses API on OpenAI's own
#: base URL and Chat Completions on any other (vLLM, Ollama, gateways ...).
OpenAIApi = Literal["auto", "responses", "chat_completions"]
_APIS = ("auto", "responses", "chat_completions")


class AnyChatOptions(ChatOptions, total=False):
    """What `chat("provider/model", ...)` takes: `ChatOptions` and the options of one
    provider's own constructor, all passed on to the constructor the provider names,
    which refuses what it does not take."""

    #: `chat_openai`'s: which of OpenAI's endpoints.
    api: OpenAIApi
    #: `chat_openai`'s: whether the model is one of OpenAI's reasoning models (None: by name).
    reasoning_model: bool | None
    #: `chat_anthropic`'s: Anthropic's prompt cache ("auto", "5m", "1h", or None).
    prompt_cache: PromptCache
    #: `chat_azure_openai`'s: the dated API's version (None: the v1 API).
    api_version: str | None
    #: `chat_azure_openai`'s: an azure-identity credential (Microsoft Entra ID).
    credential: Any
    #: `chat_azure_openai`'s: a callable returning an Entra ID token.
    token_provider: Any
    #: `chat_azure_openai`'s: the model behind the deployment (for prices).
    model: str | None
    #: `chat_google_vertex`'s: the Google Cloud project, location and google-auth
    #: credentials (None: Application Default Credentials).
    project: str | None
    location: str | None
    credentials: Any
    #: `chat_aws_bedrock`'s: the AWS region and the profile of the shared config files.
    region: str | None
    profile: str | None


def chat_mock(
    replies: ReplyScript | None = None,
    *,
    model: str = "mock-model",
    system_prompt: str | None = None,
    latency: float = 0.0,
    rate_limits: RateLimits | None = None,
    cost_budget: float | None = None,
    retry: Retry | None = None,
    stream: bool | float = False,
    **deprecated: Any,
) -> Chat:
    """A deterministic offline chat: the embedded default for examples and tests.

    It answers "What's A+B?" with the sum, grades model-graded prompts, fills
    structured-output requests, and echoes anything else. Given tools
    (`register_tool`), it calls those the prompt names, their number parameters
    filled with the prompt's numbers, then says what they returned, as the mock
    server's model does. `replies` scripts it: a function of the prompt text
    returning the reply (a string or a `Turn`), or a list of replies taken in
    call order. `latency` (seconds) simulates a slow model.

    `stream` makes it stream as a streaming provider does, so the live viewer
    shows replies as they arrive, offline: True, or the pause between pieces
    in seconds (True: `STREAM_PAUSE`, 0.01 s). After `latency`, each reply's
    text goes to the running sample's text sink in pieces of about a word,
    with that pause between them and a fresh key per attempt; then the whole
    turn is returned, as without streaming. A scripted reply may also be an
    async iterable of text pieces (an async generator), streamed as it yields
    them: a test can hold a reply mid-stream. Without `stream`, the pieces
    are joined and nothing is streamed. Outside a run nobody listens, and only
    the pauses remain.

    Example:
        >>> chat_mock().chat("What's 2+3?")
        '2 + 3 = 5'
        >>> chat_mock(lambda prompt: "42").chat("Anything")
        '42'
        >>> async def slowly(prompt):
        ...     yield "Thinking"
        ...     await gate.wait()        # the test lets the rest come
        ...     yield " ... 42"
        >>> streaming = chat_mock(slowly, stream=True)
    """
    if isinstance(stream, bool):
        pause = STREAM_PAUSE if stream else None
    elif isinstance(stream, int | float) and stream >= 0:
        pause = float(stream)
    else:
        raise ConfigError(
            f"chat_mock(stream=...) takes True/False or a pause in seconds >= 0, not {stream!r}."
        )
    provider = MockProvider(model=model, replies=replies, latency=latency, stream=pause)
    given = {"rate_limits": rate_limits, "cost_budget": cost_budget}
    given = {key: value for key, value in given.items() if value is not None} | deprecated
    _own_limits(provider, given, "chat_mock")
    provider.retry = retry
    return Chat(provider, system_prompt=system_prompt)


#: The options of a model's own limits and budget (`limits`: deprecated).
_OWN_LIMITS = ("rate_limits", "cost_budget", "limits")


def _own_limits(provider: Any, options: Mapping[str, Any], who: str, depth: int = 4) -> None:
    """The model's own rate limits and cost budget (`limits=`, and `Limits(max_cost=)`,
    under their deprecated names, taken as those)."""
    given = dict(options)
    renamed_keyword(given, "limits", "rate_limits", where=who, stacklevel=depth)
    unknown = sorted(set(given) - {"rate_limits", "cost_budget"})
    if unknown:
        raise ConfigError(f"{who}() got unexpected keyword argument(s): {', '.join(unknown)}.")
    limits = given.get("rate_limits")
    if limits is not None and not isinstance(limits, RateLimits):
        raise ConfigError(
            f"{who}(rate_limits=...) takes a ve.RateLimits(...), not {type(limits).__name__}."
        )
    provider.rate_limits = limits
    provider.cost_budget = check_budget(
        given.get("cost_budget") or cost_budget_of(limits), "cost_budget", who
    )


def _http_chat(
    cls: type[HttpProvider],
    model: str,
    options: ChatOptions,
    own: tuple[str, ...] = (),
    **settings: Any,
) -> Chat:
    """A chat of `cls` with the common options; `own`: the constructor's own keywords,
    named among the known ones when an option is unknown; `settings`: the provider's own
    arguments (a platform's region ...)."""
    unknown = sorted(set(options) - {*ChatOptions.__annotations__, "limits"})
    if unknown:
        known = [*ChatOptions.__annotations__, *own]
        hints = "".join(keyword_hint(name, known) for name in unknown)
        raise ConfigError(
            f"Unknown option(s) {', '.join(unknown)} for a {cls.name} chat; "
            f"known: {', '.join(known)}.{hints}"
        )
    provider = cls(
        model,
        base_url=options.get("base_url"),
        api_key=options.get("api_key"),
        params=options.get("params"),
        client=options.get("client"),
        timeouts=options.get("timeouts"),
        headers=options.get("headers"),
        stream=options.get("stream"),
        **settings,
    )
    limits = {key: value for key, value in options.items() if key in _OWN_LIMITS}
    _own_limits(provider, limits, "chat_*", depth=5)
    provider.retry = options.get("retry")
    given = options.get("batch")
    provider.batch = False if given is False else batch_option(given, f"The {cls.name} chat")
    cached = options.get("cache")
    provider.cache = False if cached is False else cache_option(cached, f"The {cls.name} chat")
    provider.reasoning = reasoning_setting(options.get("reasoning"), f"The {cls.name} chat")
    return Chat(provider, system_prompt=options.get("system_prompt"))


def _openai_wire(api: str, base_url: str | None) -> type[OpenAIBase]:
    """The provider of the OpenAI endpoint `api` names, for a chat at `base_url`."""
    if api not in _APIS:
        raise ConfigError(
            f"chat_openai(api={api!r}): one of {', '.join(map(repr, _APIS))}. "
            '"auto" uses the Responses API at OpenAI itself and Chat Completions elsewhere.'
        )
    if api == "auto":
        url = base_url or os.environ.get("OPENAI_BASE_URL") or OpenAIBase.default_base_url
        api = "responses" if openai_hosted(url) else "chat_completions"
    return OpenAIResponsesProvider if api == "responses" else OpenAIProvider


def chat_openai(
    model: str = "gpt-4.1-mini",
    *,
    api: OpenAIApi = "auto",
    reasoning_model: bool | None = None,
    **options: Unpack[ChatOptions],
) -> Chat:
    """A chat with an OpenAI model, or any OpenAI-compatible server via `base_url`.

    The key defaults to `OPENAI_API_KEY`. `api` picks the endpoint: "auto" (the default)
    uses the Responses API (`/responses`) at OpenAI's own base URL and Chat Completions
    (`/chat/completions`) at any other (vLLM, Ollama, LM Studio, gateways); "responses"
    or "chat_completions" say which. `reasoning` sets the reasoning effort
    ("minimal" ... "high"). OpenAI's reasoning models (the o-series, the gpt-5 family and
    later) refuse `temperature`, `top_p` and the other sampling parameters: a request
    holding one is a `ConfigError` before anything is sent; `max_tokens` goes as the
    endpoint's own output limit. `reasoning_model` says whether the model is one, where
    its name does not tell (None: by name).

    `stream=True` streams the reply.

    Example:
        >>> chat = chat_openai(model="gpt-4.1-mini", params={"temperature": 0})
        >>> thinker = chat_openai(model="o4-mini", reasoning="high")
        >>> older = chat_openai(model="gpt-5.4", api="chat_completions")
        >>> local = chat_openai(model="qwen3", base_url="http://localhost:8000/v1", api_key="x")
    """
    wire = _openai_wire(api, options.get("base_url"))
    chat = _http_chat(wire, model, options, own=("api", "reasoning_model"))
    provider = chat.provider
    assert isinstance(provider, OpenAIBase)
    provider.reasoning_model = reasoning_model
    provider.effort()  # a budget of tokens is refused now, not at the first call
    return chat


def chat_anthropic(
    model: str = "claude-sonnet-4-5",
    *,
    prompt_cache: PromptCache = "auto",
    **options: Unpack[ChatOptions],
) -> Chat:
    """A chat with an Anthropic (Claude) model over the Messages API.

    The key defaults to `ANTHROPIC_API_KEY`. `max_tokens` defaults to 4096
    (the API requires one); set it, `temperature` and the like in `params`.
    `headers` adds request headers such as `anthropic-beta`.
    A request with `max_tokens` above 21,333 (thinking budget included) streams
    unless `stream=False`: the API refuses it whole, expecting it to take over ten
    minutes. `stream=True` streams every request.

    `reasoning`: a budget of thinking tokens (`thinking.budget_tokens`, with
    `max_tokens` raised above it), or an effort: adaptive thinking with that effort on
    the models that take it (Claude Opus and Sonnet 4.6 and later), else the effort's
    budget. `prompt_cache`: "auto" (the default) marks the prompt's shared prefix
    (tools and system prompt) for Anthropic's prompt cache when it is long enough to be
    cached, and the conversation so far in a multi-turn solver; "5m" or "1h" always
    do, with that lifetime; None never does.

    Example:
        >>> chat = chat_anthropic(model="claude-sonnet-4-5", params={"temperature": 0})
        >>> thinker = chat_anthropic(reasoning=8000)
        >>> cached = chat_anthropic(system_prompt=long_rubric, prompt_cache="1h")
        >>> long = chat_anthropic(params={"max_tokens": 64_000})  # streams by itself
    """
    chat = _http_chat(AnthropicProvider, model, options, own=("prompt_cache",))
    provider = chat.provider
    assert isinstance(provider, AnthropicProvider)
    provider.prompt_cache = prompt_cache_setting(prompt_cache)
    provider.thinking_setting()  # a setting the model cannot take is refused now
    return chat


def chat_google_gemini(model: str = "gemini-2.5-flash", **options: Unpack[ChatOptions]) -> Chat:
    """A chat with a Google Gemini model through the `generateContent` API.

    The key defaults to `GEMINI_API_KEY`, then `GOOGLE_API_KEY`. `params` go
    into Gemini's `generationConfig`: `max_tokens`, `temperature`, `top_p`,
    `top_k`, `stop` and `thinking_budget` are translated, other keys pass
    through as given; `safety_settings` and `tool_config` go to the top.
    `stream=True` calls `streamGenerateContent` (server-sent events) instead.
    `reasoning` sets `thinkingConfig`: a budget of thinking tokens as `thinkingBudget`,
    an effort as `thinkingLevel` on Gemini 3 and later, else as the effort's budget.

    Example:
        >>> chat = chat_google_gemini(model="gemini-2.5-flash", params={"temperature": 0})
        >>> thinker = chat_google_gemini(model="gemini-2.5-pro", reasoning="low")
        >>> streamed = chat_google_gemini(model="gemini-2.5-flash", stream=True)
    """
    return _http_chat(GeminiProvider, model, options)


def chat_ollama(model: str, **options: Unpack[ChatOptions]) -> Chat:
    """A model served by Ollama (default http://localhost:11434/v1; no key needed).

    Example:
        >>> chat = chat_ollama(model="llama3.2")
    """
    return _http_chat(OllamaProvider, model, options)


def chat_vllm(model: str, **options: Unpack[ChatOptions]) -> Chat:
    """A model served by vLLM (default http://localhost:8000/v1; key `VLLM_API_KEY` if set).

    Example:
        >>> chat = chat_vllm(model="Qwen/Qwen3-8B", base_url="http://gpu-box:8000/v1")
    """
    return _http_chat(VLLMProvider, model, options)


def chat_openrouter(model: str, **options: Unpack[ChatOptions]) -> Chat:
    """A model through OpenRouter (key `OPENROUTER_API_KEY`).

    Example:
        >>> chat = chat_openrouter(model="meta-llama/llama-3.3-70b-instruct")
    """
    return _http_chat(OpenRouterProvider, model, options)


def chat_groq(model: str, **options: Unpack[ChatOptions]) -> Chat:
    """A model on Groq (key `GROQ_API_KEY`).

    Example:
        >>> chat = chat_groq(model="llama-3.3-70b-versatile")
    """
    return _http_chat(GroqProvider, model, options)


def chat_deepseek(model: str = "deepseek-chat", **options: Unpack[ChatOptions]) -> Chat:
    """A DeepSeek model (key `DEEPSEEK_API_KEY`).

    Example:
        >>> chat = chat_deepseek()
    """
    return _http_chat(DeepSeekProvider, model, options)

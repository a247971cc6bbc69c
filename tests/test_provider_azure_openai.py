"""chat_azure_openai() against the mock server's Azure OpenAI over real HTTP: both URL
shapes of both APIs, an api-key or a Microsoft Entra ID token (the real azure-identity
against the mock's managed-identity endpoint, refreshed before it expires), the content
filter as the sample's outcome, Azure's waits, and the errors before any request."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import vitals_engine as ve
from tests.inspect_check import assert_inspect_reads, read_raw
from vitals_engine.pricing import table as pricing
from vitals_engine.providers import azure_openai as provider_module
from vitals_engine.providers.azure_openai import AzureOpenAIProvider, AzureOpenAIResponsesProvider
from vitals_engine.providers.http import retry_after_seconds
from vitals_engine.testing import MockReply
from vitals_engine.testing.formats import Refused
from vitals_engine.testing.formats.azure_openai import (
    API_KEY,
    AZURE,
    FILTERED_PROMPT,
    IDENTITY_HEADER,
    TOKEN_ROUTE,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_retries")]

APIS = ["chat_completions", "responses"]
VERSIONS = [None, "2025-04-01-preview"]


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    """No Azure settings from the environment, the mock's Azure state fresh, no user
    prices."""
    for name in ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT", "IDENTITY_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(pricing, "_user_prices", {})
    monkeypatch.setattr(pricing, "_found", {})
    AZURE.reset()
    yield
    AZURE.reset()


@pytest.fixture
def identity(server, monkeypatch):
    """App Service's managed identity, served by the mock."""
    monkeypatch.setenv("IDENTITY_ENDPOINT", server.base_url("azure") + TOKEN_ROUTE)
    monkeypatch.setenv("IDENTITY_HEADER", IDENTITY_HEADER)


def azure(server, deployment="gpt-4.1-mini", **options):
    if not any(k in options for k in ("credential", "token_provider", "api_key")):
        options["api_key"] = API_KEY
    return ve.chat_azure_openai(server.base_url("azure"), deployment=deployment, **options)


def lower(headers):
    return {k.lower(): v for k, v in headers.items()}


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


# -- the URL shapes --------------------------------------------------------------------


def test_the_v1_api_has_no_api_version_and_the_dated_one_names_the_deployment():
    root = "https://my-resource.openai.azure.com"
    v1 = AzureOpenAIProvider("prod-gpt5", base_url=root + "/openai/v1/", api_key="k")
    assert v1.url() == f"{root}/openai/v1/chat/completions"
    dated = AzureOpenAIProvider("prod gpt5", base_url=root, api_key="k", api_version="2024-10-21")
    assert (
        dated.url()
        == f"{root}/openai/deployments/prod%20gpt5/chat/completions?api-version=2024-10-21"
    )
    responses = AzureOpenAIResponsesProvider("d", base_url=root, api_version="2025-04-01-preview")
    assert responses.url() == f"{root}/openai/responses?api-version=2025-04-01-preview"
    assert AzureOpenAIResponsesProvider("d", base_url=root).url() == f"{root}/openai/v1/responses"
    assert v1.endpoint == ("Azure OpenAI", root, "prod-gpt5")  # the rate-limit key
    assert v1.model_id == "azure/prod-gpt5"


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("stream", [False, True])
async def test_each_api_at_each_url_shape_answers_whole_and_streamed(server, api, version, stream):
    chat = azure(server, api=api, api_version=version, stream=stream)
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    (entry,) = server.log
    headers = lower(entry.headers)
    assert headers["api-key"] == API_KEY
    assert "authorization" not in headers
    assert entry.body["model"] == "gpt-4.1-mini"
    assert entry.format == (
        "azure_openai" if api == "chat_completions" else "azure_openai_responses"
    )
    turn = chat.last_turn()
    assert turn.finish_reason == "stop"
    assert turn.tokens is not None
    assert turn.tokens.output > 0


async def test_the_dated_path_without_its_api_version_is_refused_by_the_mock(server):
    chat = azure(server, api_version="2024-10-21")
    chat.provider.api_version = ""  # type: ignore[attr-defined]
    with pytest.raises(ve.ProviderError):
        await chat.chat_async("hi")


@pytest.mark.parametrize("api", APIS)
async def test_tools_reasoning_and_params_go_as_openai_sends_them(server, api):
    AZURE.models["prod-gpt5"] = "gpt-5-2025-08-07"
    chat = azure(server, deployment="prod-gpt5", model="gpt-5", api=api, reasoning="low")
    chat.register_tool(add)
    assert "7" in await chat.chat_async("Use add to add 3 and 4")
    first = server.log[0].body
    assert first["model"] == "prod-gpt5"
    if api == "chat_completions":
        assert first["reasoning_effort"] == "low"
        assert first["tools"][0]["function"]["name"] == "add"
    else:
        assert first["reasoning"] == {"effort": "low"}
        assert first["tools"][0]["name"] == "add"
    with pytest.raises(ve.ConfigError, match="reasoning model"):  # gpt-5's rules, by model=
        await azure(
            server, deployment="prod-gpt5", model="gpt-5", params={"temperature": 0}
        ).chat_async("hi")


async def test_structured_output_goes_as_a_json_schema(server):
    chat = azure(server)
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
    }
    data = await chat.extract_data_async("What's 2+2?", type=schema)
    assert set(data) == {"answer"}
    assert server.log[0].body["response_format"]["type"] == "json_schema"


# -- Microsoft Entra ID ----------------------------------------------------------------


async def test_a_managed_identity_token_from_azure_identity_is_sent_as_a_bearer(server, identity):
    from azure.identity import ManagedIdentityCredential

    chat = azure(server, credential=ManagedIdentityCredential())
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    headers = lower(server.log[0].headers)
    assert headers["authorization"].startswith("Bearer mock-entra.")
    assert "api-key" not in headers
    assert len(AZURE.issued) == 1


async def test_without_a_key_the_default_azure_credential_is_used(server, identity):
    chat = ve.chat("azure/gpt-4.1-mini", base_url=server.base_url("azure"))
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    assert lower(server.log[0].headers)["authorization"].startswith("Bearer mock-entra.")


async def test_a_token_that_expires_during_the_run_is_refreshed_without_a_failed_call(
    server, identity
):
    from azure.identity import ManagedIdentityCredential

    AZURE.lifetime = 240  # under MSAL's 5 minutes: azure-identity asks the endpoint again
    chat = azure(server, credential=ManagedIdentityCredential())
    held = chat.provider.entra.held  # type: ignore[attr-defined]
    held.margin = 60
    await chat.chat_async("What's 2+2?")
    first = lower(server.log[0].headers)["authorization"].removeprefix("Bearer ")
    AZURE.offset = 250  # the first token has expired on the server ...
    held.clock = lambda: time.time() + 250  # ... and on ours
    with pytest.raises(Refused):
        AZURE.check({"authorization": f"Bearer {first}"})
    AZURE.refused = 0
    await chat.chat_async("What's 3+3?")
    second = lower(server.log[1].headers)["authorization"].removeprefix("Bearer ")
    assert second != first
    assert held.loads == 2
    assert AZURE.refused == 0
    assert len(server.log) == 2


async def test_a_credential_of_our_own_and_a_token_provider(server):
    class Credential:
        def __init__(self):
            self.scopes = []

        def get_token(self, scope):
            self.scopes.append(scope)
            token, expires = AZURE.issue()
            return type("AccessToken", (), {"token": token, "expires_on": int(expires)})()

    credential = Credential()
    chat = azure(server, credential=credential)
    await chat.chat_async("hi")
    await chat.chat_async("again")
    assert credential.scopes == ["https://cognitiveservices.azure.com/.default"]  # held
    calls = []

    def provider():
        calls.append(1)
        return AZURE.issue()[0]

    chat = azure(server, token_provider=provider)
    await chat.chat_async("hi")
    await chat.chat_async("again")
    assert len(calls) == 2  # asked at each attempt: the provider keeps its own token


async def test_a_refused_token_is_an_authentication_error_without_the_token(server):
    chat = azure(server, token_provider=lambda: "not-a-token-the-server-issued")
    with pytest.raises(ve.AuthenticationError) as caught:
        await chat.chat_async("hi")
    assert "not-a-token-the-server-issued" not in str(caught.value)
    assert "Cognitive Services OpenAI User" in str(caught.value)


async def test_a_refused_token_is_loaded_anew_for_the_next_call(server):
    class Credential:
        def get_token(self, scope):
            token, expires = AZURE.issue()
            return type("AccessToken", (), {"token": token, "expires_on": int(expires)})()

    chat = azure(server, credential=Credential())
    await chat.chat_async("hi")
    AZURE.issued.clear()  # the server forgets it (revoked)
    with pytest.raises(ve.AuthenticationError):
        await chat.chat_async("again")
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    assert chat.provider.entra.held.loads == 2  # type: ignore[attr-defined]


# -- the content filter ----------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_filtered_prompt_is_the_outcome_never_retried(server, api, stream):
    chat = azure(server, api=api, stream=stream, retry=ve.Retry(max_attempts=4))
    text = await chat.chat_async(f"Tell me something {FILTERED_PROMPT}")
    turn = chat.last_turn()
    assert turn.finish_reason == "content_filter"
    assert "content management policy" in text
    assert turn.metadata == {
        "content_filter": {"prompt": {"violence": {"filtered": True, "severity": "high"}}}
    }
    assert AZURE.filtered == 1  # one attempt


@pytest.mark.parametrize("stream", [False, True])
async def test_a_filtered_completion_keeps_its_categories(server, stream):
    server.script(lambda request: MockReply(text="Here is how", finish="content_filter"))
    chat = azure(server, stream=stream)
    assert await chat.chat_async("hi") == "Here is how"
    turn = chat.last_turn()
    assert turn.finish_reason == "content_filter"
    assert turn.metadata == {
        "content_filter": {"completion": {"violence": {"filtered": True, "severity": "high"}}}
    }
    assert len(server.log) == 1


def test_a_run_keeps_the_filtered_sample_with_its_outcome(server, tmp_path):
    dataset = [
        {"input": "What's 2+2?", "target": "4"},
        {"input": f"Something {FILTERED_PROMPT}", "target": "4"},
    ]
    chat = azure(server, retry=ve.Retry(max_attempts=3))
    task = ve.Task(dataset, solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    task.eval()
    frame = task.get_samples()
    assert frame.height == 2
    assert "content management policy" in frame["result"][1]
    assert AZURE.filtered == 1
    _, samples, _ = read_raw(Path(task.log_path))
    (filtered,) = [s for s in samples if FILTERED_PROMPT in str(s["input"])]
    assert filtered.get("error") is None
    assert filtered["output"]["choices"][0]["stop_reason"] == "content_filter"
    reply = filtered["messages"][-1]
    assert reply["metadata"]["content_filter"]["prompt"]["violence"]["filtered"] is True
    assert_inspect_reads(task.log_path, task)


# -- waits and errors ------------------------------------------------------------------


def test_retry_after_ms_is_read_before_retry_after():
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_seconds({"Retry-After-Ms": "20"}) == 0.02


async def test_a_429_with_retry_after_ms_says_its_wait(server):
    server.fail("429", retry_after=0.25, header="retry-after-ms")
    with pytest.raises(ve.RateLimitError) as caught:
        await azure(server).chat_async("hi")
    assert caught.value.retry_after == 0.25
    assert "exceeded token rate limit" in str(caught.value)


async def test_a_429_is_retried_after_its_wait(server):
    server.fail("429", retry_after=0.01, header="retry-after-ms")
    chat = azure(server, retry=ve.Retry(max_attempts=3))
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    assert [entry.outcome for entry in server.log] == ["429", "ok"]


async def test_without_a_key_or_the_extra_the_error_says_what_to_set(server, monkeypatch):
    monkeypatch.setattr(provider_module, "azure_identity_installed", lambda: False)
    chat = ve.chat_azure_openai(server.base_url("azure"), deployment="gpt-4.1-mini")
    with pytest.raises(ve.AuthenticationError) as caught:
        await chat.chat_async("hi")
    assert "AZURE_OPENAI_API_KEY" in str(caught.value)
    assert 'pip install "vitals-engine[azure]"' in str(caught.value)
    assert server.requests == 0
    assert not AZURE.issued


async def test_a_key_set_after_the_chat_was_made_counts(server, monkeypatch):
    chat = ve.chat_azure_openai(server.base_url("azure"), deployment="gpt-4.1-mini")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", API_KEY)
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    assert lower(server.log[0].headers)["api-key"] == API_KEY


async def test_the_endpoint_comes_from_the_environment_or_is_a_config_error(server, monkeypatch):
    chat = ve.chat_azure_openai(deployment="gpt-4.1-mini", api_key=API_KEY)
    with pytest.raises(ve.ConfigError, match="AZURE_OPENAI_ENDPOINT"):
        await chat.chat_async("hi")
    assert server.requests == 0
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", server.base_url("azure"))
    chat = ve.chat_azure_openai(deployment="gpt-4.1-mini", api_key=API_KEY)
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"


def test_conflicting_options_are_config_errors():
    with pytest.raises(ve.ConfigError, match="not both"):
        ve.chat_azure_openai(
            "https://r.openai.azure.com", deployment="d", api_key="k", credential=object()
        )
    with pytest.raises(ve.ConfigError, match="get_token"):
        ve.chat_azure_openai("https://r.openai.azure.com", deployment="d", credential=object())
    with pytest.raises(ve.ConfigError, match="api="):
        ve.chat_azure_openai("https://r.openai.azure.com", deployment="d", api="batch")  # type: ignore[arg-type]


async def test_a_bad_key_is_refused_and_never_shown(server):
    secret = "a-wrong-key-0123456789"
    chat = azure(server, api_key=secret)
    with pytest.raises(ve.AuthenticationError) as caught:
        await chat.chat_async("hi")
    assert secret not in str(caught.value)
    assert secret not in repr(chat.provider)
    assert "AZURE_OPENAI_API_KEY" in str(caught.value)


def test_batch_mode_is_refused(server, tmp_path):
    task = ve.Task(
        [{"input": "What's 2+2?", "target": "4"}],
        solver=ve.generate(azure(server)),
        scorer=ve.detect_includes(),
        dir=tmp_path,
    )
    with pytest.raises(ve.ConfigError, match="cannot send batches"):
        task.eval(batch=ve.Batch(size=10, wait=0.05, poll=0.02))
    assert server.requests == 0


def test_importing_vitals_engine_imports_no_azure_library():
    code = (
        "import sys, vitals_engine as ve; ve.chat_azure_openai; "
        "import vitals_engine.providers.azure_openai; "
        "print('azure.identity' in sys.modules, 'msal' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


# -- prices ----------------------------------------------------------------------------


async def test_prices_by_model_then_the_replys_model_else_unknown(server):
    ve.set_price("Azure OpenAI", "gpt-5", input=1.25, output=10)
    AZURE.models["prod-gpt5"] = "gpt-5-2025-08-07"  # what Azure's reply names
    named = azure(server, deployment="prod-gpt5", model="gpt-5")
    await named.chat_async("What's 2+2?")
    assert named.last_turn().model == "gpt-5"
    assert named.get_cost() > 0
    by_reply = azure(server, deployment="prod-gpt5")
    await by_reply.chat_async("What's 2+2?")
    assert by_reply.last_turn().model == "gpt-5-2025-08-07"
    assert by_reply.get_cost() == pytest.approx(named.get_cost())
    unknown = azure(server, deployment="my-own-name")
    await unknown.chat_async("What's 2+2?")
    assert unknown.last_turn().cost is None


def test_traces_name_the_platform_as_the_genai_conventions_do():
    from vitals_engine.tracing.genai import provider_name

    assert provider_name("Azure OpenAI") == "azure.ai.openai"


def test_a_credential_that_gives_no_token_is_an_authentication_error_naming_the_ways(server):
    """A credential refusing (DefaultAzureCredential finding nothing, say) is our
    AuthenticationError saying how to authenticate, before any request; a network failure
    on the way to the identity endpoint is retryable."""
    from azure.core.exceptions import ClientAuthenticationError, ServiceRequestError

    class Refusing:
        def __init__(self, error: Exception) -> None:
            self.error = error

        def get_token(self, *scopes, **kwargs):
            raise self.error

    refused = ClientAuthenticationError("DefaultAzureCredential failed to retrieve a token")
    with pytest.raises(ve.AuthenticationError) as caught:
        azure(server, credential=Refusing(refused)).chat("Hi")
    message = str(caught.value)
    assert "AZURE_OPENAI_API_KEY" in message
    assert "az login" in message
    assert "failed to retrieve a token" in message
    assert not caught.value.retryable
    with pytest.raises(ve.ProviderUnavailable) as unreachable:
        azure(server, credential=Refusing(ServiceRequestError("connection reset"))).chat("Hi")
    assert unreachable.value.retryable
    assert server.requests == 0


def test_a_token_provider_that_returns_no_string_is_a_config_error(server):
    with pytest.raises(ve.ConfigError, match="token_provider must return the token"):
        azure(server, token_provider=lambda: None).chat("Hi")
    assert server.requests == 0

"""Amazon Bedrock's Converse API, both sides: our provider against the mock server over
real HTTP, every request signed with SigV4 and the signature checked by the server."""

from __future__ import annotations

import datetime
import sys

import msgspec
import pytest

import vitals_engine as ve
from tests.cloud import use_aws_test_keys
from tests.helpers import sums
from vitals_engine.providers.bedrock import BedrockProvider
from vitals_engine.testing import MockReply, MockToolCall
from vitals_engine.testing.formats.aws import TEST_ACCESS_KEY, TEST_SECRET_KEY
from vitals_engine.testing.formats.bedrock import BedrockFormat

MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


@pytest.fixture
def bedrock(server):
    """The server's Bedrock format, its keys and denied models reset after the test."""
    fmt = server.wire_format("bedrock")
    assert isinstance(fmt, BedrockFormat)
    yield fmt
    fmt.denied.clear()
    fmt.keys.offset = 0.0
    fmt.keys.lifetime = 3600.0


@pytest.fixture
def aws_env(monkeypatch, tmp_path):
    """An environment with the mock's test key pair and no AWS files of the machine."""
    use_aws_test_keys(monkeypatch, tmp_path)


@pytest.fixture(autouse=True)
def priced():
    ve.set_price("Bedrock", MODEL, input=3, output=15, cached_input=0.3, cache_write=3.75)


def claude(server, model=MODEL, **kwargs):
    return ve.chat_aws_bedrock(
        model, region="us-east-1", base_url=server.base_url("bedrock"), **kwargs
    )


def sent(server):
    return server.log[-1].body


# -- text, tools, streaming --------------------------------------------------------------


@pytest.mark.usefixtures("aws_env", "no_retries")
def test_a_text_reply_comes_back_signed_and_counted(server):
    """A Converse request, signed with the test key, is answered; its tokens are counted
    and priced."""
    chat = claude(server, system_prompt="Be brief.", params={"temperature": 0, "max_tokens": 50})
    assert chat.chat("What's 2+2?") == "2 + 2 = 4"
    body = sent(server)
    assert body["system"] == [{"text": "Be brief."}]
    assert body["inferenceConfig"] == {"temperature": 0, "maxTokens": 50}
    assert body["messages"] == [{"role": "user", "content": [{"text": "What's 2+2?"}]}]
    turn = chat.last_turn()
    assert turn.tokens == ve.TokenUsage(input=2 + 2, output=5) or turn.tokens.output == 5
    assert turn.finish_reason == "stop"
    headers = {k.lower(): v for k, v in server.log[-1].headers.items()}
    assert headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={TEST_ACCESS_KEY}/")
    assert chat.get_cost() == pytest.approx((turn.tokens.input * 3 + turn.tokens.output * 15) / 1e6)


@pytest.mark.usefixtures("aws_env", "no_retries")
def test_the_model_id_goes_quoted_into_the_path(server):
    """An inference profile id with its colon, and an ARN, reach the server as given."""
    arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.amazon.nova-pro-v1:0"
    for model in (MODEL, arn):
        claude(server, model).chat("Hello")
        assert server.log[-1].model == model


@pytest.mark.usefixtures("aws_env", "no_retries")
def test_a_tool_round_trip(server):
    """A toolUse comes back as a tool request; its toolResult goes back and is answered."""

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    chat = claude(server)
    chat.register_tool(add)
    assert chat.chat("Use add for 3+4") == "The tool returned 7."
    body = sent(server)
    spec = body["toolConfig"]["tools"][0]["toolSpec"]
    assert spec["name"] == "add"
    assert spec["inputSchema"]["json"]["type"] == "object"
    uses = [b for m in body["messages"] for b in m["content"] if "toolUse" in b]
    results = [b for m in body["messages"] for b in m["content"] if "toolResult" in b]
    assert uses[0]["toolUse"]["input"] == {"a": 3, "b": 4}
    assert results[0]["toolResult"]["toolUseId"] == uses[0]["toolUse"]["toolUseId"]


@pytest.mark.usefixtures("aws_env", "no_retries")
def test_a_streamed_reply_is_the_same_turn(server):
    """ConverseStream's event-stream frames are put together into the reply: text, a tool
    call, and the usage from the metadata event."""
    server.script(
        lambda request: (
            MockReply(text="Adding now", tool_calls=[MockToolCall("t1", "add", {"a": 1, "b": 2})])
            if request.messages[-1].role == "user"
            else None
        )
    )

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    chat = claude(server, stream=True)
    chat.register_tool(add)
    assert chat.chat("add 1 and 2") == "The tool returned 3."
    first = server.log[0]
    assert first.request.stream
    turn = chat.turns[1]
    assert turn.text == "Adding now"
    assert turn.tokens is not None
    assert turn.tokens.output > 0


@pytest.mark.usefixtures("aws_env", "no_retries")
def test_structured_output_forces_a_tool(server):
    """An output schema is a forced tool, whose input comes back as the reply's JSON."""
    chat = claude(server)
    data = chat.extract_data(
        "Name a city", type={"type": "object", "properties": {"city": {"type": "string"}}}
    )
    assert isinstance(data, dict)
    assert "city" in data
    assert sent(server)["toolConfig"]["toolChoice"] == {"tool": {"name": "_structured_output"}}


# -- reasoning and the prompt cache ------------------------------------------------------------


@pytest.mark.usefixtures("aws_env", "no_retries")
@pytest.mark.parametrize("stream", [False, True])
def test_reasoning_comes_back_signed_and_goes_back(server, stream):
    """reasoning= is Claude's thinking in additionalModelRequestFields; the reasoning text
    and its signature come back, and go back with the next turn."""
    server.script(lambda request: MockReply(text="4", reasoning="Two and two."))
    chat = claude(server, reasoning=2048, stream=stream)
    assert chat.chat("What's 2+2?") == "4"
    body = sent(server)
    assert body["additionalModelRequestFields"]["thinking"] == {
        "type": "enabled",
        "budget_tokens": 2048,
    }
    assert body["inferenceConfig"]["maxTokens"] > 2048
    thinking = chat.last_turn().contents[0]
    assert isinstance(thinking, ve.ContentThinking)
    assert thinking.thinking == "Two and two."
    chat.chat("And 3+3?")  # the server refuses reasoning whose signature does not match
    back = sent(server)["messages"][1]["content"][0]["reasoningContent"]["reasoningText"]
    assert back["text"] == "Two and two."
    assert back["signature"] == thinking.signature


def test_reasoning_on_a_model_bedrock_maps_no_setting_for_is_refused():
    """reasoning= on a model that takes no setting Bedrock maps is a ConfigError saying
    what to pass; a budget of tokens on a model that takes an effort is one too."""
    with pytest.raises(ve.ConfigError, match="additionalModelRequestFields"):
        ve.chat_aws_bedrock("meta.llama3-70b-instruct-v1:0", region="us-east-1", reasoning=2000)
    with pytest.raises(ve.ConfigError, match="takes a reasoning effort"):
        ve.chat_aws_bedrock("us.amazon.nova-2-lite-v1:0", region="us-east-1", reasoning=2000)


@pytest.mark.usefixtures("aws_env", "no_retries")
@pytest.mark.parametrize(
    ("model", "reasoning", "fields"),
    [
        (
            "us.amazon.nova-2-lite-v1:0",
            "medium",
            {"reasoningConfig": {"type": "enabled", "maxReasoningEffort": "medium"}},
        ),
        (
            "amazon.nova-2-lite-v1:0",
            "xhigh",
            {"reasoningConfig": {"type": "enabled", "maxReasoningEffort": "high"}},
        ),
        ("openai.gpt-oss-120b-1:0", "minimal", {"reasoning_effort": "low"}),
        ("openai.gpt-oss-20b-1:0", "none", None),
    ],
)
def test_an_effort_reaches_nova_2_and_gpt_oss_in_their_own_fields(server, model, reasoning, fields):
    chat = ve.chat_aws_bedrock(
        model, region="us-east-1", base_url=server.base_url("bedrock"), reasoning=reasoning
    )
    chat.chat("What's 2+2?")
    assert sent(server).get("additionalModelRequestFields") == fields


@pytest.mark.usefixtures("aws_env", "no_retries")
def test_cache_points_are_written_then_read_and_priced(server):
    """prompt_cache="5m" puts a cachePoint after the system prompt: the first call writes
    the prefix, the second reads it; both are counted and priced as cache tokens."""
    server.min_cacheable_tokens = 10
    rubric = " ".join(["word"] * 40)
    chat = claude(server, system_prompt=rubric, prompt_cache="5m")
    chat.chat("Hello")
    first = chat.last_turn().tokens
    assert sent(server)["system"][-1] == {"cachePoint": {"type": "default"}}
    assert first is not None
    assert first.cache_write == 40
    assert first.cached_input == 0
    chat2 = claude(server, system_prompt=rubric, prompt_cache="5m")
    chat2.chat("Hello again")
    second = chat2.last_turn().tokens
    assert second is not None
    assert second.cached_input == 40
    assert second.cache_write == 0
    price = (second.input * 3 + second.output * 15 + 40 * 0.3) / 1e6
    assert chat2.get_cost() == pytest.approx(price)
    written = (first.input * 3 + first.output * 15 + 40 * 3.75) / 1e6
    assert chat.get_cost() == pytest.approx(written)


def test_models_without_cache_points_get_none():
    """A model that takes no cache points (Llama) is sent none."""
    chat = ve.chat_aws_bedrock(
        "meta.llama3-70b-instruct-v1:0", region="us-east-1", prompt_cache="5m"
    )
    from vitals_engine.vocab.model_calls import ChatRequest

    request = ChatRequest([ve.Turn("user", [ve.ContentText("hi")])], system_prompt="x")
    assert "cachePoint" not in msgspec.json.encode(chat.provider.body(request)).decode()


# -- errors ---------------------------------------------------------------------------------


@pytest.mark.usefixtures("aws_env")
def test_throttling_is_retried(server):
    """A ThrottlingException (429, x-amzn-ErrorType) is retried by the retry policy."""
    server.fail("429", times=1, retry_after=0)
    chat = claude(server, retry=ve.Retry(max_attempts=3, backoff=0))
    assert chat.chat("What's 2+2?") == "2 + 2 = 4"
    assert [entry.outcome for entry in server.log] == ["429", "ok"]


@pytest.mark.usefixtures("aws_env", "no_retries")
def test_throttling_says_so(server):
    """The error names Bedrock's exception and is a RateLimitError."""
    server.fail("429")
    with pytest.raises(ve.RateLimitError, match="ThrottlingException: Too many requests") as info:
        claude(server).chat("Hi")
    assert info.value.retryable


@pytest.mark.usefixtures("aws_env", "no_retries")
def test_a_model_not_enabled_says_which_access_to_request(server, bedrock):
    """AccessDeniedException is an AuthenticationError, not retried, naming the console's
    Model access and the IAM actions."""
    bedrock.denied.add(MODEL)
    with pytest.raises(ve.AuthenticationError) as info:
        claude(server).chat("Hi")
    message = str(info.value)
    assert "You don't have access to the model" in message
    assert "Model access" in message
    assert "bedrock:InvokeModelWithResponseStream" in message
    assert not info.value.retryable
    assert info.value.status == 403


@pytest.mark.usefixtures("aws_env", "no_retries")
def test_an_unknown_model_id_says_so(server):
    """A ValidationException for an unknown model id says Bedrock does not know it."""
    with pytest.raises(ve.ProviderError, match=r"does not know the model id 'unknown\.model-v1'"):
        claude(server, "unknown.model-v1").chat("Hi")


@pytest.mark.usefixtures("aws_env", "no_retries")
@pytest.mark.parametrize(
    ("status", "kind"), [(429, ve.RateLimitError), (503, ve.ProviderUnavailable)]
)
def test_an_exception_frame_mid_stream_is_its_status(server, status, kind):
    """An exception frame in the stream is classified as the status its type stands for."""
    server.fail("stream-error", status=status)
    with pytest.raises(kind, match="in the stream"):
        claude(server, stream=True).chat("What's 2+2?")


@pytest.mark.usefixtures("aws_env", "no_retries")
def test_a_frame_whose_crc_does_not_match_is_malformed(server):
    """A corrupt frame is a MalformedResponse, not text."""
    server.fail("malformed")
    with pytest.raises(ve.MalformedResponse, match="corrupt"):
        claude(server, stream=True).chat("What's 2+2?")


@pytest.mark.usefixtures("aws_env", "no_retries")
def test_a_wrong_secret_is_refused_as_aws_says(server, monkeypatch):
    """A signature made with the wrong secret is InvalidSignatureException, and the secret
    never shows in the error."""
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-0123456789")
    with pytest.raises(ve.AuthenticationError, match="InvalidSignatureException") as info:
        claude(server).chat("Hi")
    assert "wrong-secret-0123456789" not in str(info.value)


# -- before any request ------------------------------------------------------------------------


def test_no_credentials_is_an_error_before_any_request(server, monkeypatch, tmp_path, aws_env):
    """With nothing in the chain, the call fails before it is sent, naming the variables,
    the profile and the commands."""
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(ve.AuthenticationError) as info:
        claude(server).chat("Hi")
    message = str(info.value)
    for words in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_PROFILE",
        "aws configure",
        "aws sso login",
    ):
        assert words in message
    assert server.log == []


def test_a_missing_extra_names_the_install_command(server, monkeypatch, aws_env):
    """Without botocore, the call fails before any request, naming the extra."""
    monkeypatch.setitem(sys.modules, "botocore", None)
    chat = claude(server)
    with pytest.raises(ve.ConfigError, match=r'pip install "vitals-engine\[bedrock\]"'):
        chat.chat("Hi")
    assert server.log == []


def test_no_region_says_what_to_set(monkeypatch, tmp_path, aws_env):
    """No region anywhere is a ConfigError naming region=, AWS_REGION and the profile."""
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    chat = ve.chat_aws_bedrock(MODEL)
    with pytest.raises(ve.ConfigError, match="AWS_REGION"):
        chat.provider.check_key()


def test_an_api_key_is_refused():
    """Bedrock signs requests: api_key= is a ConfigError saying what to set instead."""
    with pytest.raises(ve.ConfigError, match="AWS_PROFILE"):
        ve.chat_aws_bedrock(MODEL, region="us-east-1", api_key="x")


def test_importing_the_package_imports_no_botocore():
    """`import vitals_engine` and a Bedrock chat's construction never import botocore's
    signer (it loads with the first request)."""
    import subprocess

    code = (
        "import sys, vitals_engine as ve; ve.chat_aws_bedrock('m', region='us-east-1'); "
        "print(any(m.startswith('botocore.auth') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- the endpoint, runs and batches ----------------------------------------------------------------


def test_the_region_is_part_of_the_endpoint(monkeypatch):
    """Rate limits key on the endpoint: the region's URL, and the model."""
    monkeypatch.delenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", raising=False)
    east = ve.chat_aws_bedrock(MODEL, region="us-east-1").provider
    west = ve.chat_aws_bedrock(MODEL, region="us-west-2").provider
    assert east.endpoint != west.endpoint
    assert east.endpoint == ("Bedrock", "https://bedrock-runtime.us-east-1.amazonaws.com", MODEL)
    assert ve.chat(f"bedrock/{MODEL}", region="us-east-1").provider.endpoint == east.endpoint


@pytest.mark.usefixtures("aws_env")
def test_a_run_with_the_chat(server, tmp_path):
    """A task solved by a Bedrock model runs, and its cost names the platform."""
    task = ve.Task(
        sums(4), solver=ve.generate(claude(server)), scorer=ve.detect_includes(), dir=tmp_path
    )
    task.eval()
    assert task.metrics["accuracy"] == 1.0
    costs = task.get_cost()
    assert costs["provider"].to_list() == ["Bedrock"]
    assert costs["model"].to_list() == [MODEL]


@pytest.mark.usefixtures("aws_env")
def test_batch_mode_is_refused(server, tmp_path):
    """Batch mode is a clear ConfigError: Bedrock's batch API is not built."""
    task = ve.Task(
        sums(2), solver=ve.generate(claude(server)), scorer=ve.detect_includes(), dir=tmp_path
    )
    with pytest.raises(ve.ConfigError, match="cannot send batches"):
        task.eval(batch=ve.Batch(size=2, wait=0.05, poll=0.02))


@pytest.mark.usefixtures("aws_env")
def test_a_retry_is_signed_afresh(server, monkeypatch):
    """Each attempt carries its own date and signature (the signer's clock moves a second
    per signature)."""
    import botocore.auth

    ticks = iter(range(100))
    start = datetime.datetime(2026, 1, 2, 3, 4, 5)
    monkeypatch.setattr(
        botocore.auth,
        "get_current_datetime",
        lambda: start + datetime.timedelta(seconds=next(ticks)),
    )
    server.fail("503", times=1, retry_after=0)
    chat = claude(server, retry=ve.Retry(max_attempts=3, backoff=0))
    assert chat.chat("What's 2+2?") == "2 + 2 = 4"
    dates = [{k.lower(): v for k, v in e.headers.items()}["x-amz-date"] for e in server.log]
    auths = [{k.lower(): v for k, v in e.headers.items()}["authorization"] for e in server.log]
    assert [e.outcome for e in server.log] == ["503", "ok"]
    assert len(set(dates)) == 2
    assert len(set(auths)) == 2


def test_the_provider_repr_shows_no_secret(aws_env):
    """The provider's repr names the model and region, nothing of the keys."""
    provider = ve.chat_aws_bedrock(MODEL, region="eu-west-1").provider
    assert isinstance(provider, BedrockProvider)
    assert TEST_SECRET_KEY not in repr(provider)
    assert "eu-west-1" in repr(provider)


@pytest.mark.usefixtures("aws_env", "no_retries")
def test_a_spent_quota_stops_the_run(server):
    """ServiceQuotaExceededException is QuotaExhausted: not retried, saying where to raise
    the quota."""
    server.fail("quota")
    with pytest.raises(ve.QuotaExhausted, match="Service Quotas"):
        claude(server).chat("Hi")


@pytest.mark.usefixtures("aws_env", "no_retries")
def test_the_sdks_endpoint_variable_is_read(server, monkeypatch):
    """AWS_ENDPOINT_URL_BEDROCK_RUNTIME replaces the region's endpoint, as in the AWS SDKs."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.base_url("bedrock"))
    chat = ve.chat_aws_bedrock(MODEL, region="us-east-1")
    assert chat.chat("What's 2+2?") == "2 + 2 = 4"

"""What every HTTP provider sends, over the local mock server: who it says it is, the
credentials of its base URL, and headers it refuses to send."""

from __future__ import annotations

import base64
import importlib.metadata

import httpx
import pytest

import vitals_engine as ve
from tests.netservers import OPENAI_COMPLETION

pytestmark = pytest.mark.anyio


def sent_headers(server) -> dict[str, str]:
    (record,) = server.log
    return {k.lower(): v for k, v in record.headers.items()}


def with_credentials(url: str, user: str = "alice", password: str = "s3cr%40t") -> str:
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{user}:{password}@{rest}"


CONSTRUCTORS = {
    "openai": lambda server, **kw: ve.chat_openai(
        "gpt-test", base_url=server.base_url(), api_key="sk-test", **kw
    ),
    "anthropic": lambda server, **kw: ve.chat_anthropic(
        "claude-test", base_url=server.base_url("anthropic"), api_key="sk-ant", **kw
    ),
    "google": lambda server, **kw: ve.chat_google_gemini(
        "gemini-test", base_url=server.base_url("google"), api_key="g-key", **kw
    ),
}


@pytest.mark.parametrize("provider", sorted(CONSTRUCTORS))
async def test_every_request_says_who_sends_it(server, provider):
    """Each provider sends `User-Agent: vitals-engine/<version>`."""
    await CONSTRUCTORS[provider](server).chat_async("What's 1+1?")
    version = importlib.metadata.version("vitals-engine")
    assert sent_headers(server)["user-agent"] == f"vitals-engine/{version}"


async def test_a_users_own_user_agent_wins(server):
    """`headers={"User-Agent": ...}` replaces ours."""
    await CONSTRUCTORS["openai"](server, headers={"User-Agent": "my-app/2"}).chat_async("hi")
    assert sent_headers(server)["user-agent"] == "my-app/2"


async def test_credentials_in_the_base_url_are_basic_auth(server):
    """`http://user:pass@host/v1` sends Basic auth (the password percent-decoded), and the
    chat's base_url and repr no longer hold the credentials."""
    chat = ve.chat_vllm("local-model", base_url=with_credentials(server.base_url()))
    assert await chat.chat_async("What's 1+1?") == "1 + 1 = 2"
    expected = base64.b64encode(b"alice:s3cr@t").decode()
    assert sent_headers(server)["authorization"] == f"Basic {expected}"
    assert "s3cr" not in chat.provider.base_url
    assert "alice" not in chat.provider.base_url
    assert "s3cr" not in repr(chat.provider)


async def test_credentials_go_beside_a_key_in_another_header(server):
    """Anthropic's key travels in x-api-key, so Basic auth from the URL goes along with it."""
    chat = ve.chat_anthropic(
        "claude-test", base_url=with_credentials(server.base_url("anthropic")), api_key="sk-ant"
    )
    await chat.chat_async("hi")
    headers = sent_headers(server)
    assert headers["authorization"].startswith("Basic ")
    assert headers["x-api-key"] == "sk-ant"


def test_credentials_that_would_replace_the_key_are_refused_without_the_password():
    """An OpenAI key and URL credentials both want the Authorization header: a ConfigError
    that names the user and never the password."""
    with pytest.raises(ve.ConfigError, match=r"user 'alice'.*Authorization") as info:
        ve.chat_openai(
            "gpt-test", base_url="https://alice:hunter2@proxy.example/v1", api_key="sk-test"
        )
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize(
    "headers",
    [{"X Bad": "1"}, {"x-bad:": "1"}, {"": "1"}, {"x-ok": "a\r\nInjected: yes"}, {"x-ok": "\0"}],
    ids=["space", "colon", "empty", "crlf-in-value", "nul-in-value"],
)
def test_a_header_that_cannot_be_sent_is_a_config_error(headers):
    """A header name that is not an HTTP token, or a value with a line break or NUL, is
    refused when the chat is made, naming the header but not its value."""
    with pytest.raises(ve.ConfigError, match="header") as info:
        ve.chat_openai("gpt-test", api_key="sk-test", headers=headers)
    assert "Injected" not in str(info.value)


async def test_a_redirect_that_was_not_followed_is_named():
    """A 301 (or a redirect to another origin) is an error that says where the server
    points, not a malformed body, and is not retried."""

    def moved(request: httpx.Request) -> httpx.Response:
        return httpx.Response(301, headers={"location": "https://new.example/v1/chat/completions"})

    client = httpx.AsyncClient(transport=httpx.MockTransport(moved))
    chat = ve.chat_openai("gpt-test", base_url="https://old.example/v1", api_key="k", client=client)
    with pytest.raises(ve.ProviderError, match=r"redirect.*https://new\.example/v1") as info:
        await chat.chat_async("hi")
    assert not isinstance(info.value, ve.MalformedResponse)
    assert not info.value.retryable
    assert info.value.status == 301


async def test_a_redirect_loop_is_named_as_one():
    """A server that keeps answering 307 to itself ends in an error that says it looped,
    after the transport followed MAX_REDIRECTS hops."""
    hops = []

    def again(request: httpx.Request) -> httpx.Response:
        hops.append(request.url.path)
        return httpx.Response(307, headers={"location": "/v1/chat/completions"})

    client = httpx.AsyncClient(transport=httpx.MockTransport(again))
    chat = ve.chat_openai(
        "gpt-test", base_url="https://loop.example/v1", api_key="k", client=client
    )
    with pytest.raises(ve.ProviderError, match=r"redirected 5 times in a row") as info:
        await chat.chat_async("hi")
    assert not info.value.retryable
    assert len(hops) == 6


async def test_secrets_echoed_by_a_gateway_are_never_stored_or_raised(tmp_path):
    """A gateway that echoes the request's headers in its error bodies: the API key, a
    custom auth header and base-URL credentials appear in no error, retry note or log."""
    secrets = ("sk-secret-123456", "tok-custom-987654")
    calls = []

    def gateway(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        echoed = {"error": {"message": f"bad gateway, you sent {dict(request.headers)}"}}
        if len(calls) == 1:  # the first sample: one 502, then its retry succeeds
            return httpx.Response(502, json=echoed)
        if b"What's 2+2?" in request.content:  # the second sample: refused outright
            return httpx.Response(400, json=echoed)
        return httpx.Response(200, json=OPENAI_COMPLETION)

    chat = ve.chat_openai(
        "gpt-test",
        base_url="https://gateway.example/v1",
        api_key="sk-secret-123456",
        headers={"X-Custom-Auth": "tok-custom-987654"},
        client=httpx.AsyncClient(transport=httpx.MockTransport(gateway)),
        retry=ve.Retry(max_attempts=2, backoff=0.001),
    )
    data = [{"input": "What's 1+1?", "target": "2"}, {"input": "What's 2+2?", "target": "4"}]
    task = ve.Task(data, solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    await task.eval_async(fail_on_error=False, max_concurrency=1)
    records = task._state.records
    said = [str(note.reason) for r in records for note in r.retry_notes]
    said += [f"{r.error.message} {r.error.traceback}" for r in records if r.error is not None]
    assert [r.error is None for r in records] == [True, False]
    assert [r.retries for r in records] == [1, 0]
    assert any("[redacted]" in text for text in said)
    stored = [p.read_text(errors="replace") for p in tmp_path.iterdir() if p.is_file()]
    for secret in secrets:
        assert not any(secret in text for text in said)
        assert not any(secret in text for text in stored)
    with pytest.raises(ve.ProviderError) as info:
        await chat.chat_async("What's 2+2?")
    assert "sk-secret-123456" not in str(info.value)
    assert "sk-secret-123456" not in str(info.value.body)
    keyless = ve.chat_vllm(
        "m",
        base_url="https://alice:hunter2-pw@gateway.example/v1",
        client=httpx.AsyncClient(transport=httpx.MockTransport(gateway)),
        retry=ve.Retry(max_attempts=1),
    )
    with pytest.raises(ve.ProviderError) as info:
        await keyless.chat_async("What's 2+2?")
    token = base64.b64encode(b"alice:hunter2-pw").decode()
    assert "[redacted]" in str(info.value)
    assert "hunter2-pw" not in str(info.value)
    assert token not in str(info.value)

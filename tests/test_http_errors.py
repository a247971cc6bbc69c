"""Edge cases of the HTTP layer the mock server cannot produce, through httpx.MockTransport."""

from __future__ import annotations

import email.utils
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

import vitals_engine as ve
from vitals_engine.providers.http import retry_after_seconds

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_retries")]

BASE_URL = "http://provider.test/v1"


def completion(message: dict, finish: str = "stop") -> dict:
    return {
        "id": "chatcmpl-1",
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }


def chat_with(handler, **kw):
    """A chat whose requests go to `handler` instead of the network."""
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return ve.chat_openai("gpt-test", base_url=BASE_URL, api_key="sk-test", client=client, **kw)


def answer_with(status: int, **response):
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, **response)

    return handler


# -- retry_after_seconds ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "2.5"}, 2.5),
        ({"retry-after": " 3 "}, 3.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"x-ratelimit-reset-requests": "6m0s"}, 360.0),
        ({"x-ratelimit-reset-requests": "1s"}, 1.0),
        ({"x-ratelimit-reset-requests": "20ms"}, 0.02),
        ({"x-ratelimit-reset-requests": "1h2m3s"}, 3723.0),
        ({"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s"}, 360.0),
        ({}, None),
        ({"content-type": "application/json"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": ""}, None),
        ({"x-ratelimit-reset-requests": "whenever"}, None),
        ({"anthropic-ratelimit-requests-reset": "not a date"}, None),
    ],
)
def test_retry_after_from_headers(headers, seconds):
    """retry_after_seconds reads seconds, milliseconds and durations, and None when nothing says."""
    assert retry_after_seconds(headers) == seconds


@pytest.mark.parametrize(
    "headers",
    [{"retry-after": "nan"}, {"retry-after": "inf"}, {"retry-after-ms": "infinity"}],
)
def test_retry_after_rejects_non_finite_numbers(headers):
    """Non-numbers that float() happens to accept (nan, inf) are garbage: no wait is known."""
    assert retry_after_seconds(headers) is None


def test_retry_after_http_date():
    """A Retry-After HTTP date becomes the seconds from now until then."""
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    wait = retry_after_seconds({"retry-after": when})
    assert wait is not None
    assert 25 < wait <= 30


def test_retry_after_date_in_the_past_is_zero():
    """A Retry-After date already past means no wait, never a negative one."""
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0


def test_anthropic_reset_rfc3339():
    """anthropic-ratelimit-*-reset RFC 3339 stamps become the seconds until then."""
    stamp = (datetime.now(UTC) + timedelta(seconds=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    wait = retry_after_seconds({"anthropic-ratelimit-requests-reset": stamp})
    assert wait is not None
    assert 15 < wait <= 20


def test_retry_after_wins_over_reset_headers():
    """An explicit retry-after is preferred to the rate-limit reset headers."""
    headers = {"retry-after": "4", "x-ratelimit-reset-requests": "6m0s"}
    assert retry_after_seconds(headers) == 4.0


async def test_rate_limit_reads_headers_through_the_client():
    """A 429 through the transport carries retry_after from the response headers."""
    chat = chat_with(
        answer_with(
            429,
            json={"error": {"message": "slow down"}},
            headers={"x-ratelimit-reset-requests": "20ms", "x-request-id": "req_abc"},
        )
    )
    with pytest.raises(
        ve.RateLimitError, match=r"rate limited: slow down \(retry after 0.02s\)"
    ) as info:
        await chat.chat_async("hi")
    assert info.value.retry_after == 0.02
    assert info.value.request_id == "req_abc"


# -- error bodies -------------------------------------------------------------------------------


async def test_error_message_from_a_json_error_body():
    """The provider's message is taken from an {"error": {"message": ...}} body."""
    chat = chat_with(answer_with(400, json={"error": {"message": "max_tokens is too large"}}))
    with pytest.raises(ve.ProviderError, match="max_tokens is too large") as info:
        await chat.chat_async("hi")
    assert info.value.message == "max_tokens is too large"
    assert info.value.status == 400


async def test_error_message_from_a_string_error_body():
    """An {"error": "..."} body gives its string as the message."""
    chat = chat_with(answer_with(400, json={"error": "bad model"}))
    with pytest.raises(ve.ProviderError, match="bad model"):
        await chat.chat_async("hi")


async def test_error_message_from_a_plain_text_body():
    """A plain-text error body is quoted as the message."""
    chat = chat_with(answer_with(502, text="upstream exploded"))
    with pytest.raises(ve.ProviderUnavailable, match="upstream exploded") as info:
        await chat.chat_async("hi")
    assert info.value.body == "upstream exploded"
    assert info.value.status == 502


async def test_empty_error_body_says_no_details():
    """An error with an empty body still says something."""
    chat = chat_with(answer_with(500, content=b""))
    with pytest.raises(ve.ProviderUnavailable, match="no details"):
        await chat.chat_async("hi")


async def test_long_error_body_is_cut():
    """An error body longer than the excerpt is cut and marked with an ellipsis."""
    chat = chat_with(answer_with(500, text="x" * 2000))
    with pytest.raises(ve.ProviderUnavailable) as info:
        await chat.chat_async("hi")
    assert info.value.body == "x" * 500 + "..."


@pytest.mark.parametrize("status", [408, 409])
async def test_timeout_and_conflict_statuses_are_unavailable(status):
    """408 and 409 raise ProviderUnavailable, which is retryable."""
    chat = chat_with(answer_with(status, json={"error": {"message": "try again"}}))
    with pytest.raises(ve.ProviderUnavailable, match="try again") as info:
        await chat.chat_async("hi")
    assert info.value.status == status
    assert info.value.retryable is True


async def test_forbidden_is_an_authentication_error():
    """A 403 raises AuthenticationError pointing at the key variable."""
    chat = chat_with(answer_with(403, json={"error": {"message": "no access"}}))
    with pytest.raises(ve.AuthenticationError, match=r"no access.*OPENAI_API_KEY"):
        await chat.chat_async("hi")


# -- bodies that are not what the API promises -----------------------------------------------


async def test_empty_choices_is_malformed():
    """A 200 with an empty choices list raises MalformedResponse."""
    chat = chat_with(answer_with(200, json={"id": "x", "choices": []}))
    with pytest.raises(ve.MalformedResponse, match="missing or wrong field") as info:
        await chat.chat_async("hi")
    assert info.value.status == 200
    assert '"choices":[]' in info.value.body.replace(" ", "")


async def test_choice_without_message_is_malformed():
    """A choice lacking its message raises MalformedResponse, not KeyError."""
    chat = chat_with(answer_with(200, json={"choices": [{"finish_reason": "stop"}]}))
    with pytest.raises(ve.MalformedResponse, match="missing or wrong field"):
        await chat.chat_async("hi")


async def test_unparseable_tool_arguments_are_kept():
    """Tool-call arguments that are not valid JSON are kept under _unparsed instead of crashing."""
    bodies = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(request.read())
        if len(bodies) == 1:
            call = {
                "id": "call_1",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 1, "b":'},
            }
            return httpx.Response(
                200, json=completion({"role": "assistant", "tool_calls": [call]}, "tool_calls")
            )
        return httpx.Response(200, json=completion({"role": "assistant", "content": "done"}))

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    chat = chat_with(handler)
    chat.register_tool(add)
    assert await chat.chat_async("Use add") == "done"
    (request,) = chat.turns[1].tool_requests
    assert request.arguments == {"_unparsed": '{"a": 1, "b":'}
    assert chat.turns[1].finish_reason == "tool_calls"
    (result,) = chat.turns[2].contents
    assert result.error is not None
    assert len(bodies) == 2


async def test_reasoning_and_refusal_are_kept():
    """reasoning_content becomes a thinking part; a refusal is kept as text."""
    message = {"role": "assistant", "content": None, "reasoning_content": "hmm", "refusal": "No."}
    chat = chat_with(answer_with(200, json=completion(message, "content_filter")))
    assert await chat.chat_async("hi") == "No."
    turn = chat.last_turn()
    assert turn.contents[0] == ve.ContentThinking("hmm")
    assert turn.finish_reason == "content_filter"


async def test_unknown_finish_reason_is_unknown():
    """A finish reason the library does not know is recorded as "unknown"."""
    chat = chat_with(answer_with(200, json=completion({"content": "ok"}, "weird")))
    await chat.chat_async("hi")
    assert chat.last_turn().finish_reason == "unknown"


async def test_missing_usage_block_counts_zero_tokens():
    """A body without usage gives zero tokens rather than failing."""
    body = {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}
    chat = chat_with(answer_with(200, json=body))
    assert await chat.chat_async("hi") == "ok"
    assert chat.last_turn().tokens == ve.TokenUsage()
    assert chat.last_turn().model == "gpt-test"


async def test_transport_error_is_provider_unavailable():
    """A connection error raised by the client becomes ProviderUnavailable."""

    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("no route to host", request=request)

    with pytest.raises(ve.ProviderUnavailable, match="no route to host"):
        await chat_with(handler).chat_async("hi")


async def test_client_timeout_is_provider_timeout():
    """A read timeout raised by the client becomes ProviderTimeout."""

    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("too slow", request=request)

    with pytest.raises(ve.ProviderTimeout, match="ReadTimeout"):
        await chat_with(handler).chat_async("hi")


async def test_extra_headers_are_sent():
    """headers= of chat_openai() are added to each request."""
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers)
        return httpx.Response(200, json=completion({"content": "ok"}))

    await chat_with(handler, headers={"x-team": "evals"}).chat_async("hi")
    assert seen[0]["x-team"] == "evals"
    assert seen[0]["authorization"] == "Bearer sk-test"
    assert seen[0]["content-type"] == "application/json"


@pytest.mark.parametrize("status", [503, 529])
async def test_unavailable_carries_the_retry_after_it_was_given(status):
    """A 503 or 529 with Retry-After carries that wait, and its message says it."""
    chat = chat_with(
        answer_with(status, json={"error": {"message": "overloaded"}}, headers={"retry-after": "7"})
    )
    with pytest.raises(ve.ProviderUnavailable, match=r"overloaded \(retry after 7s\)") as info:
        await chat.chat_async("hi")
    assert info.value.retry_after == 7.0


async def test_unavailable_ignores_the_rate_limit_reset_headers():
    """The rate-limit reset headers some providers send on every answer say when a rate
    window resets, not when an overloaded server recovers: a 503 does not wait for them."""
    headers = {"x-ratelimit-reset-requests": "6m0s", "anthropic-ratelimit-tokens-reset": "x"}
    chat = chat_with(answer_with(503, json={"error": {"message": "busy"}}, headers=headers))
    with pytest.raises(ve.ProviderUnavailable) as info:
        await chat.chat_async("hi")
    assert info.value.retry_after is None

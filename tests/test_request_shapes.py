"""Request bodies as each API documents them: `reasoning=` per provider, OpenAI's rules for
its reasoning models, which OpenAI endpoint a chat uses, and Anthropic's prompt-cache
breakpoints. These are the bodies our providers POST (`provider.body(request)`), so no
server is needed; the replays of recorded traffic (`test_recorded_*.py`) and the mock server
tests check the other side."""

from __future__ import annotations

import pytest

import vitals_engine as ve
from vitals_engine.providers.openai import OpenAIProvider
from vitals_engine.providers.openai_responses import OpenAIResponsesProvider
from vitals_engine.vocab.model_calls import ChatRequest, ToolDef
from vitals_engine.vocab.turns import (
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ContentToolResult,
    Turn,
)

HI = ChatRequest([Turn.user("Hi")])
ADD = ToolDef(
    "add", "Add two numbers.", {"type": "object", "properties": {"a": {"type": "number"}}}
)


def body(chat: ve.Chat, request: ChatRequest = HI) -> dict:
    return chat.provider.body(request)  # type: ignore[attr-defined]


# -- which OpenAI endpoint -----------------------------------------------------------------------


def test_openai_itself_is_spoken_to_through_the_responses_api(monkeypatch):
    """api="auto": the Responses API at OpenAI's own base URL; Chat Completions at any other
    server (a local vLLM, a gateway set by OPENAI_BASE_URL); `api=` says otherwise."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert type(ve.chat_openai("gpt-5.4").provider) is OpenAIResponsesProvider
    local = ve.chat_openai("qwen3", base_url="http://localhost:8000/v1")
    assert type(local.provider) is OpenAIProvider
    older = ve.chat_openai("gpt-5.4", api="chat_completions")
    assert type(older.provider) is OpenAIProvider
    gateway = ve.chat_openai("gpt-5.4", base_url="https://gw.example/v1", api="responses")
    assert type(gateway.provider) is OpenAIResponsesProvider
    monkeypatch.setenv("OPENAI_BASE_URL", "https://gw.example/v1")
    assert type(ve.chat_openai("gpt-5.4").provider) is OpenAIProvider
    assert ve.chat("openai/gpt-5.4", api="responses").provider.url() == (
        "https://gw.example/v1/responses"
    )


def test_an_unknown_api_is_refused_saying_the_choices():
    with pytest.raises(ve.ConfigError, match="'auto', 'responses', 'chat_completions'"):
        ve.chat_openai("gpt-5.4", api="completions")  # type: ignore[arg-type]


# -- OpenAI's reasoning models ----------------------------------------------------------------


@pytest.mark.parametrize("api", ["responses", "chat_completions"])
@pytest.mark.parametrize("model", ["o3", "o4-mini", "gpt-5", "gpt-5.4-mini", "gpt-5.5-pro"])
def test_sampling_parameters_are_refused_for_a_reasoning_model_before_a_request(model, api):
    """The README's `params={"temperature": 0, "max_tokens": 512}` on a reasoning model is a
    ConfigError naming what the API would refuse, not N failed requests."""
    chat = ve.chat_openai(model, api=api, params={"temperature": 0, "max_tokens": 512})
    with pytest.raises(ve.ConfigError, match="reasoning model: OpenAI refuses `temperature`"):
        body(chat)


def test_the_refusal_names_every_refused_parameter_and_a_call_s_own_too():
    chat = ve.chat_openai("o4-mini", api="chat_completions", params={"top_p": 0.9})
    request = ChatRequest([Turn.user("Hi")], params={"temperature": 0.2})
    with pytest.raises(ve.ConfigError, match=r"`temperature`, `top_p` for it\. Remove them"):
        body(chat, request)


@pytest.mark.parametrize("model", ["gpt-4.1-mini", "gpt-4o", "gpt-5-chat-latest"])
def test_other_models_keep_their_sampling_parameters(model):
    chat = ve.chat_openai(model, api="chat_completions", params={"temperature": 0})
    assert body(chat)["temperature"] == 0


def test_reasoning_model_false_and_effort_none_let_sampling_parameters_through():
    tuned = ve.chat_openai("o3-my-tune", reasoning_model=False, params={"temperature": 0})
    assert body(tuned)["temperature"] == 0
    plain = ve.chat_openai("gpt-5.4", reasoning="none", params={"temperature": 0})
    assert body(plain)["reasoning"] == {"effort": "none"}
    assert body(plain)["temperature"] == 0


def test_max_tokens_goes_as_each_endpoint_s_own_output_limit():
    """Chat Completions: `max_completion_tokens` for a reasoning model and for any model at
    OpenAI itself; a compatible server keeps `max_tokens`. Responses: `max_output_tokens`."""
    params = {"max_tokens": 512}
    reasoning = ve.chat_openai("o4-mini", api="chat_completions", params=params)
    assert body(reasoning)["max_completion_tokens"] == 512
    assert "max_tokens" not in body(reasoning)
    at_openai = ve.chat_openai("gpt-4.1-mini", api="chat_completions", params=params)
    assert body(at_openai)["max_completion_tokens"] == 512
    local = ve.chat_openai("qwen3", base_url="http://localhost:8000/v1", params=params)
    assert body(local)["max_tokens"] == 512
    responses = ve.chat_openai("gpt-5.4", params=params)
    assert body(responses)["max_output_tokens"] == 512
    assert "max_tokens" not in body(responses)
    both = ve.chat_openai("gpt-5.4", params={"max_tokens": 1, "max_output_tokens": 2})
    assert body(both)["max_output_tokens"] == 2  # a limit given by its own name wins


def test_an_o_series_system_prompt_goes_as_the_developer_s():
    request = ChatRequest([Turn.user("Hi")], system_prompt="Be brief.")
    o_series = ve.chat_openai("o3", api="chat_completions")
    assert body(o_series, request)["messages"][0] == {"role": "developer", "content": "Be brief."}
    gpt = ve.chat_openai("gpt-5.4", api="chat_completions")
    assert body(gpt, request)["messages"][0]["role"] == "system"
    responses = ve.chat_openai("o3")
    assert body(responses, request)["instructions"] == "Be brief."


def test_compatible_servers_models_are_their_own():
    """vLLM, Ollama and the others keep what they are given, whatever a model is named."""
    chat = ve.chat_vllm("o3-like", params={"temperature": 0, "max_tokens": 5})
    assert body(chat)["temperature"] == 0
    assert body(chat)["max_tokens"] == 5


# -- reasoning= ---------------------------------------------------------------------------------


def test_reasoning_on_openai_is_its_effort():
    responses = ve.chat_openai("o4-mini", reasoning="high")
    assert body(responses)["reasoning"] == {"effort": "high"}
    assert body(responses)["include"] == ["reasoning.encrypted_content"]
    assert body(responses)["store"] is False
    chat = ve.chat_openai("o4-mini", reasoning="low", api="chat_completions")
    assert body(chat)["reasoning_effort"] == "low"
    local = ve.chat_vllm("qwen3", reasoning="medium")
    assert body(local)["reasoning_effort"] == "medium"


def test_raw_params_win_over_reasoning():
    chat = ve.chat_openai("o4-mini", reasoning="high", params={"reasoning": {"effort": "low"}})
    assert body(chat)["reasoning"] == {"effort": "low"}


def test_a_budget_of_tokens_on_openai_is_refused_when_the_chat_is_made():
    with pytest.raises(ve.ConfigError, match="takes a reasoning effort"):
        ve.chat_openai("o4-mini", reasoning=8000)


@pytest.mark.parametrize("bad", ["extreme", -1, 2.5, True])
def test_a_reasoning_setting_that_is_neither_effort_nor_budget_is_refused(bad):
    with pytest.raises(ve.ConfigError, match="reasoning="):
        ve.chat_anthropic(reasoning=bad)


def test_reasoning_on_anthropic_is_a_thinking_budget_with_room_above_it():
    chat = ve.chat_anthropic("claude-sonnet-4-5", reasoning=8000)
    sent = body(chat)
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 8000}
    assert sent["max_tokens"] == 4096 + 8000
    effort = body(ve.chat_anthropic("claude-sonnet-4-5", reasoning="medium"))
    assert effort["thinking"] == {"type": "enabled", "budget_tokens": 10_000}
    assert "thinking" not in body(ve.chat_anthropic("claude-sonnet-4-5", reasoning="none"))


def test_reasoning_on_claude_4_6_and_later_is_adaptive_thinking_with_an_effort():
    sent = body(ve.chat_anthropic("claude-opus-4-6", reasoning="high"))
    assert sent["thinking"] == {"type": "adaptive"}
    assert sent["output_config"] == {"effort": "high"}
    assert body(ve.chat_anthropic("claude-opus-4-7", reasoning="xhigh"))["output_config"] == {
        "effort": "max"
    }
    budgeted = body(ve.chat_anthropic("claude-sonnet-4-6", reasoning=4000))  # still allowed
    assert budgeted["thinking"] == {"type": "enabled", "budget_tokens": 4000}
    with pytest.raises(ve.ConfigError, match="thinks adaptively and takes an effort"):
        ve.chat_anthropic("claude-opus-4-7", reasoning=4000)


def test_an_anthropic_budget_below_the_least_is_refused():
    with pytest.raises(ve.ConfigError, match="least thinking budget of 1024"):
        ve.chat_anthropic("claude-sonnet-4-5", reasoning=500)


def test_reasoning_on_gemini_is_its_thinking_config():
    assert body(ve.chat_google_gemini("gemini-2.5-pro", reasoning=2048))["generationConfig"] == {
        "thinkingConfig": {"thinkingBudget": 2048}
    }
    low = body(ve.chat_google_gemini("gemini-2.5-flash", reasoning="low"))
    assert low["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 4096}
    level = body(ve.chat_google_gemini("gemini-3-pro-preview", reasoning="high"))
    assert level["generationConfig"]["thinkingConfig"] == {"thinkingLevel": "high"}
    raw = ve.chat_google_gemini("gemini-2.5-pro", reasoning="high", params={"thinking_budget": 9})
    assert body(raw)["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 9}


def test_the_log_records_the_reasoning_setting_as_inspect_names_it():
    chat = ve.chat_openai("o4-mini", reasoning="high")
    assert chat.provider.call_config(HI) == {"reasoning_effort": "high"}
    budget = ve.chat_anthropic("claude-sonnet-4-5", reasoning=8000, prompt_cache=None)
    assert budget.provider.call_config(HI) == {"reasoning_tokens": 8000}
    assert ve.chat_openai("gpt-4.1").provider.call_config(HI) == {}


# -- the Responses API's input ------------------------------------------------------------------


def test_a_tool_loop_goes_as_input_items_with_reasoning_carried_back():
    """The assistant's reasoning item (id and encrypted content), its function call, and the
    tool's output by call_id go back as they came; tools are flat and not strict."""
    turns = [
        Turn.user("What's 2+3?"),
        Turn(
            "assistant",
            [
                ContentThinking("Adding.", "gAAAA-encrypted", id="rs_1"),
                ContentToolRequest("call_1", "add", {"a": 2, "b": 3}),
            ],
        ),
        Turn("user", [ContentToolResult("call_1", "add", 5)]),
    ]
    request = ChatRequest(turns, system_prompt="Use tools.", tools=[ADD])
    sent = body(ve.chat_openai("o4-mini"), request)
    assert sent["instructions"] == "Use tools."
    assert sent["input"] == [
        {"role": "user", "content": [{"type": "input_text", "text": "What's 2+3?"}]},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Adding."}],
            "encrypted_content": "gAAAA-encrypted",
        },
        {"type": "function_call", "call_id": "call_1", "name": "add", "arguments": '{"a":2,"b":3}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "5"},
    ]
    assert sent["tools"] == [
        {
            "type": "function",
            "name": "add",
            "description": "Add two numbers.",
            "parameters": ADD.parameters,
            "strict": False,
        }
    ]


def test_another_provider_s_thinking_is_not_sent_as_a_reasoning_item():
    turns = [
        Turn.user("Hi"),
        Turn("assistant", [ContentThinking("hmm", "claude-signature"), ContentText("Hello")]),
        Turn.user("Again"),
    ]
    sent = body(ve.chat_openai("o4-mini"), ChatRequest(turns))
    assert [item.get("type", item.get("role")) for item in sent["input"]] == [
        "user",
        "assistant",
        "user",
    ]


def test_a_responses_reasoning_item_is_not_sent_to_anthropic():
    turns = [
        Turn.user("Hi"),
        Turn("assistant", [ContentThinking("", "gAAAA", id="rs_1"), ContentText("Hello")]),
        Turn.user("Again"),
    ]
    sent = body(ve.chat_anthropic(prompt_cache=None), ChatRequest(turns))
    assert sent["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Hello"}],
    }


def test_structured_output_is_text_format():
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    sent = body(ve.chat_openai("gpt-5.4"), ChatRequest([Turn.user("n?")], output_schema=schema))
    assert sent["text"] == {"format": {"type": "json_schema", "name": "output", "schema": schema}}


# -- Anthropic's prompt cache ----------------------------------------------------------------


LONG = "Grade the answer against the rubric. " * 600  # about 5,000 tokens


def _controls(sent: dict) -> list[tuple[str, dict]]:
    """Where the breakpoints are: ("system" | "tool" | "message"), and their cache_control."""
    found = []
    system = sent.get("system")
    if isinstance(system, list):
        found += [("system", b["cache_control"]) for b in system if "cache_control" in b]
    found += [("tool", t["cache_control"]) for t in sent.get("tools", []) if "cache_control" in t]
    for message in sent["messages"]:
        if isinstance(message["content"], list):
            found += [
                ("message", b["cache_control"]) for b in message["content"] if "cache_control" in b
            ]
    return found


def test_auto_caches_a_shared_prefix_long_enough_and_leaves_a_short_one():
    chat = ve.chat_anthropic("claude-sonnet-4-5")
    long = body(chat, ChatRequest([Turn.user("Answer: 4")], system_prompt=LONG))
    assert _controls(long) == [("system", {"type": "ephemeral"})]
    assert long["system"][0]["text"] == LONG
    short = body(chat, ChatRequest([Turn.user("Answer: 4")], system_prompt="Be brief."))
    assert _controls(short) == []
    assert short["system"] == "Be brief."
    assert chat.provider.call_config(ChatRequest([Turn.user("x")], system_prompt=LONG)) == {
        "cache_prompt": True
    }
    assert chat.provider.call_config(HI) == {"cache_prompt": False}


def test_the_minimum_is_the_model_s():
    """Opus 4.5 and Haiku 4.5 cache nothing under 4,096 tokens: about 3,000 is too short."""
    request = ChatRequest([Turn.user("x")], system_prompt="word " * 2500)
    assert _controls(body(ve.chat_anthropic("claude-sonnet-4-5"), request))
    assert not _controls(body(ve.chat_anthropic("claude-haiku-4-5"), request))


def test_tools_without_a_system_prompt_get_the_breakpoint_on_the_last_tool():
    big = ToolDef("lookup", LONG, {"type": "object", "properties": {}})
    sent = body(ve.chat_anthropic(), ChatRequest([Turn.user("x")], tools=[ADD, big]))
    assert _controls(sent) == [("tool", {"type": "ephemeral"})]
    assert "cache_control" in sent["tools"][-1]


def test_a_conversation_so_far_is_cached_in_a_multi_turn_solver():
    turns = [
        Turn.user(LONG),
        Turn("assistant", [ContentToolRequest("t1", "add", {"a": 1})]),
        Turn("user", [ContentToolResult("t1", "add", 2)]),
    ]
    sent = body(ve.chat_anthropic(), ChatRequest(turns))
    assert _controls(sent) == [("message", {"type": "ephemeral"})]
    assert sent["messages"][-1]["content"][-1]["type"] == "tool_result"


def test_an_hour_always_marks_with_its_lifetime_and_none_never_marks():
    request = ChatRequest([Turn.user("Hi")], system_prompt="Be brief.")
    hour = body(ve.chat_anthropic(prompt_cache="1h"), request)
    assert _controls(hour) == [("system", {"type": "ephemeral", "ttl": "1h"})]
    five = body(ve.chat_anthropic(prompt_cache="5m"), request)
    assert _controls(five) == [("system", {"type": "ephemeral"})]
    never = body(
        ve.chat_anthropic(prompt_cache=None), ChatRequest([Turn.user("x")], system_prompt=LONG)
    )
    assert _controls(never) == []


def test_breakpoints_written_by_hand_are_left_alone():
    system = [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    chat = ve.chat_anthropic(params={"system": system})
    sent = body(chat, ChatRequest([Turn.user("x")], system_prompt="ignored"))
    assert _controls(sent) == [("system", {"type": "ephemeral", "ttl": "1h"})]


def test_an_unknown_prompt_cache_setting_is_refused():
    with pytest.raises(ve.ConfigError, match="prompt_cache='2h'"):
        ve.chat_anthropic(prompt_cache="2h")  # type: ignore[arg-type]
    with pytest.raises(ve.ConfigError, match="Did you mean `prompt_cache`"):
        ve.chat_anthropic(prompt_caching="1h")  # type: ignore[call-arg]

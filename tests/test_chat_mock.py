"""chat_mock(): the deterministic offline model behind examples and tests."""

from __future__ import annotations

import pytest

import vitals_engine as ve
from vitals_engine.providers.mock import mock_reply

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("prompt", "reply"),
    [
        ("What's 2+2?", "2 + 2 = 4"),
        ("what is 10 - 3?", "10 - 3 = 7"),
        ("What's 6*7?", "6 * 7 = 42"),
        ("What's 1.5+1?", "1.5 + 1 = 2.5"),
        ("What's 1/0?", "1 / 0 = undefined"),
        ("Tell me a joke", "Tell me a joke"),
    ],
)
def test_mock_answers_sums_and_echoes_the_rest(prompt, reply):
    """The default mock answers "What's A+B?" with the sum and echoes anything else."""
    assert mock_reply(prompt) == reply


def test_mock_grades_model_graded_prompts():
    """Asked to grade, the mock says C when the criterion is in the submission, else I."""
    prompt = "[Submission]: 2 + 2 = 4\n***\n[Criterion]: 4\n***\nreply with GRADE: $LETTER"
    assert mock_reply(prompt).endswith("GRADE: C")
    assert mock_reply(prompt.replace("Criterion]: 4", "Criterion]: 5")).endswith("GRADE: I")


async def test_chat_keeps_turns_tokens_and_cost():
    """A chat records user and assistant turns with token counts; the mock costs $0."""
    chat = ve.chat_mock(system_prompt="Be brief.")
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    assert [t.role for t in chat.turns] == ["user", "assistant"]
    last = chat.last_turn()
    assert last.text == "2 + 2 = 4"
    assert last.tokens == ve.TokenUsage(input=4, output=5)
    assert last.finish_reason == "stop"
    assert chat.get_tokens()["input"].to_list() == [4]
    assert chat.get_cost() == 0.0


async def test_clone_is_independent():
    """A clone shares the model and system prompt but not the turns."""
    chat = ve.chat_mock(system_prompt="Hi")
    await chat.chat_async("one")
    twin = chat.clone()
    await twin.chat_async("two")
    assert len(chat.turns) == 2
    assert len(twin.turns) == 4
    assert twin.system_prompt == "Hi"


async def test_scripted_replies_by_function_and_list():
    """replies= scripts the mock: a function of the prompt, or a list taken in order."""
    assert await ve.chat_mock(lambda p: p.upper()).chat_async("hey") == "HEY"
    chat = ve.chat_mock(["first", "second"])
    assert await chat.chat_async("a") == "first"
    assert await chat.chat_async("b") == "second"
    with pytest.raises(ve.ConfigError, match="ran out of scripted replies: 2 given"):
        await chat.chat_async("c")


def test_bad_replies_are_rejected():
    """replies must be a function or a list."""
    with pytest.raises(ve.ConfigError, match="function of the prompt or a list"):
        ve.chat_mock(replies=42)


def test_empty_prompt_is_an_error():
    """chat() needs a prompt."""
    with pytest.raises(ve.ConfigError, match="needs a prompt"):
        ve.chat_mock().chat()


async def test_model_name_is_settable():
    """chat_mock(model=...) names the model in turns and in the chat."""
    chat = ve.chat_mock(model="m-1")
    await chat.chat_async("x")
    assert chat.model == "m-1"
    assert chat.last_turn().model == "m-1"
    assert chat.provider.model_id == "mock/m-1"

"""An in-process, deterministic model: the embedded default for examples and tests.

It answers "What's A+B?" with the sum, grades model-graded prompts by
checking whether the criterion appears in the submission, fills structured
output requests with a value of the right shape, and echoes anything else.
Replies can be scripted with a function or a list.
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Callable, Sequence

import anyio
import msgspec

from .._errors import ConfigError
from ..vocab.calls import ChatRequest
from ..vocab.structured import example_value
from ..vocab.turns import ContentText, TokenUsage, Turn
from .base import Provider

__all__ = ["MockProvider", "mock_reply"]

Reply = str | Turn
ReplyScript = Callable[[str], Reply] | Sequence[Reply]

_SUM = re.compile(
    r"what(?:'s| is)\s+(-?\d+(?:\.\d+)?)\s*([-+*/x\u00d7])\s*(-?\d+(?:\.\d+)?)\s*\??", re.IGNORECASE
)
_GRADING = re.compile(
    r"\[(?:Submission)\]:\s*(?P<answer>.*?)\s*\*{3}.*?\[(?:Criterion|Expert)\]:\s*(?P<crit>.*?)\s*\*{3}",
    re.DOTALL,
)
_GRADING_EXPERT_FIRST = re.compile(
    r"\[Expert\]:\s*(?P<crit>.*?)\s*\*{3}.*?\[Submission\]:\s*(?P<answer>.*?)\s*\*{3}", re.DOTALL
)


def _number(text: str) -> str:
    value = float(text)
    return str(int(value)) if value.is_integer() else f"{value:g}"


def mock_reply(prompt: str) -> str:
    """The default mock's answer to `prompt`.

    Example:
        >>> mock_reply("What's 2+2?")
        '2 + 2 = 4'
    """
    grading = _GRADING_EXPERT_FIRST.search(prompt) or _GRADING.search(prompt)
    if grading and "GRADE" in prompt:
        answer, criterion = grading["answer"], grading["crit"]
        found = criterion.strip().lower() in answer.strip().lower()
        verdict = "meets" if found else "does not meet"
        return f"The submission {verdict} the criterion.\n\nGRADE: {'C' if found else 'I'}"
    match = _SUM.search(prompt)
    if match:
        a, op, b = float(match[1]), match[2], float(match[3])
        ops: dict[str, Callable[[float, float], float]] = {
            "+": lambda x, y: x + y,
            "-": lambda x, y: x - y,
            "*": lambda x, y: x * y,
            "x": lambda x, y: x * y,
            "\u00d7": lambda x, y: x * y,
            "/": lambda x, y: x / y if y else float("nan"),
        }
        result = ops[op](a, b)
        shown = "undefined" if result != result else _number(str(result))
        return f"{_number(match[1])} {op} {_number(match[3])} = {shown}"
    return prompt


def count_tokens(text: str) -> int:
    """A deterministic stand-in for a tokenizer: whitespace-separated words."""
    return len(text.split())


class MockProvider(Provider):
    """The provider behind `chat_mock()`: no network, no key, deterministic."""

    name = "Mock"

    def __init__(
        self,
        model: str = "mock-model",
        replies: ReplyScript | None = None,
        latency: float = 0.0,
    ) -> None:
        super().__init__(model=model, base_url="mock://")
        self.latency = latency
        self._script: Callable[[str], Reply]
        if replies is None:
            self._script = mock_reply
        elif callable(replies):
            self._script = replies
        elif isinstance(replies, Sequence) and not isinstance(replies, str):
            self._script = self._from_list(list(replies))
        else:
            raise ConfigError(
                "chat_mock(replies=...) takes a function of the prompt or a list of replies, "
                f"not {type(replies).__name__}."
            )

    @staticmethod
    def _from_list(replies: list[Reply]) -> Callable[[str], Reply]:
        counter = itertools.count()
        lock = threading.Lock()

        def next_reply(_: str) -> Reply:
            with lock:
                i = next(counter)
            if i >= len(replies):
                raise ConfigError(
                    f"chat_mock ran out of scripted replies: {len(replies)} given, "
                    f"call {i + 1} asked for another."
                )
            return replies[i]

        return next_reply

    async def generate(self, request: ChatRequest) -> Turn:
        started = time.time()
        if self.latency:
            await anyio.sleep(self.latency)
        prompt = request.turns[-1].text if request.turns else ""
        if request.output_schema is not None and self._script is mock_reply:
            reply: Reply = msgspec.json.encode(example_value(request.output_schema)).decode()
        else:
            reply = self._script(prompt)
        turn = reply if isinstance(reply, Turn) else Turn("assistant", [ContentText(str(reply))])
        seen = " ".join([request.system_prompt or ""] + [t.text for t in request.turns])
        tokens = turn.tokens or TokenUsage(
            input=max(1, count_tokens(seen)), output=max(1, count_tokens(turn.text))
        )
        finish = turn.finish_reason or ("tool_calls" if turn.tool_requests else "stop")
        return Turn(
            "assistant",
            turn.contents,
            tokens=tokens,
            finish_reason=finish,
            model=self.model,
            started_at=started,
            duration=time.time() - started,
        )

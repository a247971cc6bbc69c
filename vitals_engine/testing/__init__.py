"""The local mock model server for tests, examples and benchmarks.

It serves OpenAI's `/v1/chat/completions` and `/v1/responses`, Anthropic's
`/v1/messages` and Gemini's `/v1beta/models/{model}:generateContent` over real HTTP on
127.0.0.1, with deterministic answers, usage blocks, tool calls, structured
output, latency, failure injection and request counters. Each streams when
asked (OpenAI and Anthropic `"stream": true`, Gemini `:streamGenerateContent?alt=sse`),
in the provider's own server-sent events, with a delay between events and
failures mid-stream. See `MockServer`.

`VirtualClock` is a clock for tests of rate limits and backoff: its time moves only
when every task waits on it.

Run it on its own with `python -m vitals_engine.testing --port 8765`.
"""

from .brain import MockMessage, MockReply, MockRequest, MockToolCall
from .clock import VirtualClock
from .server import Failure, MockServer, RecordedRequest, StreamHold, mock_server, reply
from .trajectories import last_tool_text, trajectory

__all__ = [
    "Failure",
    "MockMessage",
    "MockReply",
    "MockRequest",
    "MockServer",
    "MockToolCall",
    "RecordedRequest",
    "StreamHold",
    "VirtualClock",
    "last_tool_text",
    "mock_server",
    "reply",
    "trajectory",
]

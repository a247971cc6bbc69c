"""A sample's limits, at each of its solver's model calls (in the stacks of a run with
limits per sample only: `eval(message_limit=, token_limit=, cost_limit= ...)`).

Before the call goes, the conversation it sends is counted against the message limit
(a tool's results made it longer since the last call); after it comes back, priced by
the accounting below, its reply's tokens and cost are added to the sample's, and the
conversation with the reply counted again (`pacing/sample_limits.py`'s `LimitWatch`).
A sample past a limit is stopped where it is: the watch cancels the solver's scope, and
the cancellation lands here, at once, not at the solver's next await. Calls made
outside a solve stage (the scorer's, a whole-dataset stage's) pass untouched.
"""

from __future__ import annotations

import anyio.lowlevel

from ...vocab.model_calls import ChatRequest
from ...vocab.turns import ContentToolResult, TokenUsage, Turn
from .call import Call, Send

__all__ = ["SampleLimitCheck", "messages_of"]


def messages_of(request: ChatRequest) -> int:
    """The conversation's messages a request holds, as Inspect counts them: the system
    prompt, each turn, and each tool result of a turn of results.

    Example:
        >>> messages_of(ChatRequest([Turn.user("Hi")], system_prompt="Be brief."))
        2
    """
    count = 1 if request.system_prompt else 0
    for turn in request.turns:
        results = sum(1 for content in turn.contents if isinstance(content, ContentToolResult))
        count += results or 1
    return count


class SampleLimitCheck:
    """Count each solver call against its sample's limits; stop the sample past one."""

    __slots__ = ()

    async def __call__(self, call: Call, send: Send) -> Turn:
        scope = call.scope
        watch = scope.limits if scope is not None else None
        if watch is None:
            return await send(call)
        messages = messages_of(call.request)
        watch.counted_messages(messages)
        if watch.hit is not None:
            await anyio.lowlevel.checkpoint()  # the cancellation lands here: nothing is sent
        turn = await send(call)
        tokens = turn.tokens or TokenUsage()
        watch.charged(turn, tokens, turn.cost, messages + 1, call.provider.model_id)
        if watch.hit is not None:
            await anyio.lowlevel.checkpoint()
        return turn

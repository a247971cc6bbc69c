"""A sample's transcript as Inspect events: one model event per model call, the score.

```
span_begin solvers   model (solver call) ...   span_end
span_begin scorers   model (judge call) ...    score   span_end
```

Inputs are not repeated per event: each model event's `input_refs` points
into `events_data.messages` (the solver's conversation, then the judge's),
as Inspect's own condensed format does, so a long tool loop costs its
length, not its square. A call whose input is not a prefix of those
conversations (a solver juggling several chats) carries its input in full.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from ..chat.chat import Chat
from ..engine.scope import ModelCall
from ..samples import SampleRecord
from . import schema as s
from .messages import chat_messages, model_usage, stop_reason, turn_message

__all__ = ["sample_events"]

_LOCAL = datetime.now().astimezone().tzinfo


def _iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, _LOCAL).isoformat()


def _boundaries(chat: Chat, offset: int, prefix: str) -> tuple[list[s.ChatMessage], list[int]]:
    """The chat's messages, and after how many messages each turn ends (plus the start)."""
    messages = chat_messages(chat.system_prompt, [], prefix)
    ends = [offset + len(messages)]
    for i, turn in enumerate(chat.turns):
        messages.extend(turn_message(turn, f"{prefix}-{i}", chat.provider.model_id))
        ends.append(offset + len(messages))
    return messages, ends


class _Pool:
    """`events_data.messages` and where each call's input lies in it."""

    def __init__(self) -> None:
        self.messages: list[s.ChatMessage] = []
        self._chats: list[tuple[Chat, list[int]]] = []

    def add(self, chat: Chat | None, prefix: str) -> None:
        if chat is None:
            return
        messages, ends = _boundaries(chat, len(self.messages), prefix)
        self.messages.extend(messages)
        self._chats.append((chat, ends))

    def refs(self, call: ModelCall) -> list[tuple[int, int]] | None:
        turns = call.request.turns
        for chat, ends in self._chats:
            own = chat.turns
            if len(turns) <= len(own) and all(a is b for a, b in zip(turns, own, strict=False)):
                return [(ends[0] - (1 if chat.system_prompt else 0), ends[len(turns)])]
        return None


def _model_event(call: ModelCall, pool: _Pool, sample_start: float) -> dict[str, Any]:
    reply = call.reply
    output = s.ModelOutput(model=call.model_id)
    if reply is not None:
        message = turn_message(reply, f"out-{call.started}", call.model_id)[0]
        output = s.ModelOutput(
            model=call.model_id,
            choices=[s.ChatCompletionChoice(message, stop_reason(reply))],  # type: ignore[arg-type]
            completion=reply.text,
            usage=model_usage(reply.tokens) if reply.tokens else None,
            time=reply.duration,
        )
    refs = pool.refs(call)
    event: dict[str, Any] = {
        "event": "model",
        "timestamp": _iso(call.started),
        "working_start": round(call.started - sample_start, 6),
        "model": call.model_id,
        "input": [],
        "tools": [
            {"name": t.name, "description": t.description, "parameters": t.parameters}
            for t in call.request.tools
        ],
        "tool_choice": "auto" if call.request.tools else "none",
        "config": dict(call.request.params),
        "output": output,
        "completed": _iso(call.completed),
        "working_time": round(call.completed - call.started, 6),
    }
    if call.role == "scorer":
        event["role"] = "grader"
    if refs is not None:
        event["input_refs"] = refs
    else:
        event["input"] = chat_messages(
            call.request.system_prompt, list(call.request.turns), f"in-{call.started}"
        )
    if call.retries:
        event["retries"] = len(call.retries)
    if call.error is not None:
        event["error"] = call.error
    return event


def _span(kind: str, begin: bool, when: float, sample_start: float) -> dict[str, Any]:
    event: dict[str, Any] = {
        "event": "span_begin" if begin else "span_end",
        "timestamp": _iso(when),
        "working_start": round(when - sample_start, 6),
        "id": kind,
    }
    if begin:
        event["name"] = kind
        event["type"] = kind
    return event


def sample_events(
    record: SampleRecord, score: s.LogScore | None
) -> tuple[msgspec.Raw, dict[str, Any] | None]:
    """The sample's events (raw JSON) and its `events_data` (None when there are no calls)."""
    start = record.solve_started or record.score_started
    if start is None:
        return s.EMPTY_EVENTS, None
    pool = _Pool()
    pool.add(record.solver_chat, f"{record.sample.id}-{record.sample.epoch}")
    judge = record.score.chat if record.score is not None else None
    pool.add(judge, f"{record.sample.id}-{record.sample.epoch}-g")
    events: list[dict[str, Any]] = []
    solver_calls = [c for c in record.calls if c.role == "solver"]
    scorer_calls = [c for c in record.calls if c.role != "solver"]
    if record.solve_started is not None:
        events.append(_span("solvers", True, record.solve_started, start))
        events += [_model_event(c, pool, start) for c in solver_calls]
        events.append(_span("solvers", False, record.solve_completed or start, start))
    if record.score_started is not None:
        events.append(_span("scorers", True, record.score_started, start))
        events += [_model_event(c, pool, start) for c in scorer_calls]
        if score is not None:
            events.append(
                {
                    "event": "score",
                    "timestamp": _iso(record.score_completed or record.score_started),
                    "working_start": round((record.score_completed or start) - start, 6),
                    "score": score,
                    "target": record.sample.target,
                    "intermediate": False,
                }
            )
        events.append(_span("scorers", False, record.score_completed or start, start))
    data = {"messages": pool.messages, "calls": []} if pool.messages else None
    return msgspec.Raw(s.encoder.encode(events)), data

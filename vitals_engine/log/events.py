"""A sample's transcript as Inspect events: one model event per model call, the score.

```
model (solver call) ...  model (judge call, role "grader") ...  score
```

A sample with transcript records (tool calls, sandbox actions, spans, a limit, an error:
`SampleRecord.events`) gets them too, interleaved by time with these, under an init span
holding `sample_init` (`log/transcript.py`); a sample without is logged as above.

Inputs are not repeated per event: each model event's `input_refs` points
into `events_data.messages` (the solver's conversation, then the judge's),
as Inspect's own condensed format does, so a long tool loop costs its
length, not its square. A call whose input is not a prefix of those
conversations (a solver juggling several chats) carries its input in full.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from datetime import datetime
from typing import Any

import msgspec

from ..chats.chat import Chat
from ..samples import SampleRecord
from ..vocab.model_calls import ModelCall, RetryNote
from ..vocab.turns import Turn
from . import schema as s
from .messages import chat_messages, model_usage, stop_reason, turn_message
from .transcript import Event, transcript_events, transcript_start

__all__ = ["ChatLog", "sample_events"]

_LOCAL = datetime.now().astimezone().tzinfo


#: The keywords of a JSON schema that Inspect's tool parameters hold (`ToolParams`,
#: `JSONSchema`); a tool's schema is logged with these alone, as Inspect reads it.
_SCHEMA_KEYS = frozenset(
    (
        "type",
        "format",
        "description",
        "default",
        "enum",
        "items",
        "properties",
        "additionalProperties",
        "anyOf",
        "required",
    )
)


def tool_params(schema: Any) -> Any:
    """A tool's JSON schema as Inspect's log holds it: the keywords it knows, at every
    level (an agent harness's tools carry `$schema`, `maxItems` ... which it drops).

    Example:
        >>> tool_params({"$schema": "x", "type": "object", "properties": {
        ...     "n": {"type": "integer", "exclusiveMinimum": 0}}})
        {'type': 'object', 'properties': {'n': {'type': 'integer'}}}
    """
    if not isinstance(schema, dict):
        return schema
    kept: dict[str, Any] = {}
    for key, value in schema.items():
        if key not in _SCHEMA_KEYS:
            continue
        if key == "properties" and isinstance(value, dict):
            kept[key] = {name: tool_params(field) for name, field in value.items()}
        elif key in ("items", "additionalProperties"):
            kept[key] = tool_params(value)
        elif key == "anyOf" and isinstance(value, list):
            kept[key] = [tool_params(option) for option in value]
        else:
            kept[key] = value
    return kept


def _iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, _LOCAL).isoformat()


class ChatLog:
    """One chat as log messages, converted once per sample and shared by the sample's
    messages, its score's grading, the events' message pool and their outputs."""

    def __init__(self, chat: Chat, prefix: str) -> None:
        self.chat = chat
        self.turns = chat.turns  # a copy: taken once
        self.model_id = chat.provider.model_id
        self.messages: list[s.ChatMessage] = []
        if chat.system_prompt:
            self.messages.append(s.ChatMessageSystem(chat.system_prompt, id=f"{prefix}-s"))
        self.ends = [len(self.messages)]  # messages before turn i
        self.replies: dict[int, s.ChatMessageAssistant] = {}
        for i, turn in enumerate(self.turns):
            converted = turn_message(turn, f"{prefix}-{i}", self.model_id)
            if turn.role == "assistant":
                self.replies[id(turn)] = converted[0]  # type: ignore[assignment]
            self.messages.extend(converted)
            self.ends.append(len(self.messages))

    def reply(self, turn: Turn) -> s.ChatMessageAssistant | None:
        """The message of one of this chat's assistant turns."""
        return self.replies.get(id(turn))


class _Pool:
    """`events_data.messages` and where each call's input lies in it."""

    def __init__(self, chats: list[ChatLog]) -> None:
        self.messages: list[s.ChatMessage] = []
        self._chats: list[tuple[ChatLog, int]] = []
        for log in chats:
            self._chats.append((log, len(self.messages)))
            self.messages.extend(log.messages)

    def refs(self, call: ModelCall) -> list[tuple[int, int]] | None:
        turns = call.request.turns
        for log, offset in self._chats:
            own = log.turns
            if len(turns) <= len(own) and all(map(operator.is_, turns, own)):
                return [(offset, offset + log.ends[len(turns)])]
        return None

    def reply(self, turn: Turn) -> s.ChatMessageAssistant | None:
        for log, _ in self._chats:
            message = log.reply(turn)
            if message is not None:
                return message
        return None


def _model_event(
    call: ModelCall,
    pool: _Pool,
    sample_start: float,
    iso: Callable[[float], str],
    final: tuple[Turn | None, s.ModelOutput | None],
) -> dict[str, Any]:
    reply = call.reply
    if reply is not None and reply is final[0] and final[1] is not None:
        output = final[1]  # the sample's own output: the same reply
    elif reply is None:
        output = s.ModelOutput(model=call.model_id)
    else:
        message = pool.reply(reply) or turn_message(reply, f"out-{call.started}", call.model_id)[0]
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
        "timestamp": iso(call.started),
        "working_start": round(call.started - sample_start, 6),
        "model": call.model_id,
        "input": [],
        "tools": [
            {"name": t.name, "description": t.description, "parameters": tool_params(t.parameters)}
            for t in call.request.tools
        ]
        if call.request.tools
        else [],
        "tool_choice": "auto" if call.request.tools else "none",
        "config": _config(call),
        "output": output,
        "completed": iso(call.completed),
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
        event["metadata"] = {"retries": [_retry(note, iso) for note in call.retries]}
    if call.batch:
        event.setdefault("metadata", {})["batch"] = call.batch
    if call.cache is not None:
        event["cache"] = call.cache
        if call.cached_from is not None:
            event.setdefault("metadata", {})["cached_from"] = msgspec.to_builtins(call.cached_from)
    if call.error is not None:
        event["error"] = call.error
    return event


def _config(call: ModelCall) -> dict[str, Any]:
    """The generate config a model event records: the call's settings (reasoning, prompt
    caching), its request's parameters, and whether it went in a provider's batch."""
    params = call.request.params
    if not call.config and not call.batch:
        return params
    config = {**(call.config or {}), **params}
    if call.batch:
        config["batch"] = True
    return config


def _retry(note: RetryNote, iso: Callable[[float], str]) -> dict[str, Any]:
    """One retried attempt as the model event's metadata records it."""
    return {
        "attempt": note.attempt,
        "at": iso(note.at),
        "reason": note.reason,
        "wait": round(note.wait, 3),
    }


def sample_events(
    record: SampleRecord,
    scores: dict[str, s.LogScore],
    chats: list[ChatLog],
    iso: Callable[[float], str] = _iso,
    output: s.ModelOutput | None = None,
    init: Event | None = None,
) -> tuple[msgspec.Raw, msgspec.Raw]:
    """The sample's events (raw JSON) and its `events_data` (None when there are no calls).

    `chats` are the sample's conversations already converted (solver's, then the
    judges'); `scores` its scores by scorer, one score event each (a task's scorers in
    order); `init` the body of its `sample_init` event (`transcript.sample_init`), written
    when the sample has transcript records.
    """
    start = record.solve_started or record.score_started
    if record.events:
        start = transcript_start(record.events, start)
    if start is None:
        return s.EMPTY_EVENTS, s.NO_EVENTS_DATA
    pool = _Pool(chats)
    last = record.solver_chat.last_turn() if record.solver_chat is not None else None
    final = (last, output)
    events = [_model_event(c, pool, start, iso, final) for c in record.calls]
    when = record.score_completed or record.score_started or start
    for score in scores.values():
        events.append(
            {
                "event": "score",
                "timestamp": iso(when),
                "working_start": round(when - start, 6),
                "score": score,
                "target": record.sample.target,
                "intermediate": False,
            }
        )
    if record.events:
        calls = record.calls
        models = [(c.started, c.completed, e) for c, e in zip(calls, events, strict=False)]
        scored = [(n, (when, when, e)) for n, e in zip(scores, events[len(calls) :], strict=True)]
        events = transcript_events(record.events, models, scored, init or {}, start, iso)
    data = (
        msgspec.Raw(s.encoder.encode({"messages": pool.messages, "calls": []}))
        if pool.messages
        else s.NO_EVENTS_DATA
    )
    return msgspec.Raw(s.encoder.encode(events)), data

"""A logged sample back into the engine's record: its chats, score, error and retries.

Chats are rebuilt on replay providers (one per model, shared), the solver's
lazily. A log's model, whoever wrote it, is read as `provider/model`
(`normalize_model`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

import msgspec

from ..chats.chat import Chat
from ..providers.replay import ReplayProvider, split_model_id
from ..samples import Sample, SampleError, SampleRecord, Score, ScoreSet
from ..vocab.model_calls import RetryNote
from ..vocab.turns import Turn
from ..vocab.usage import UsageLedger
from . import schema as s
from .logged_chat import LoggedChat
from .logged_transcript import logged_transcript
from .logged_turns import message_contents, message_text, message_turns, model_name, usage_tokens

__all__ = [
    "LoggedSampleError",
    "add_chat_usage",
    "first_score",
    "is_batched",
    "logged_batch",
    "logged_cache",
    "normalize_model",
    "sample_record",
    "sample_result",
    "score_value",
]


_PROVIDERS: dict[str, ReplayProvider] = {}
_STOP = {"stop", "max_tokens", "tool_calls", "content_filter", "unknown"}
_BARE_MODEL = re.compile(r"\(([^()]+)\)\s*$")


def _provider(model_id: str) -> ReplayProvider:
    provider = _PROVIDERS.get(model_id)
    if provider is None:
        provider = _PROVIDERS[model_id] = ReplayProvider(model_id)
    return provider


@functools.lru_cache(maxsize=256)
def normalize_model(model: str) -> str:
    """A log's model as `provider/model`; vitals (R) names a bare model or a solver label.

    Example:
        >>> normalize_model("generate(chat_claude()) (claude-sonnet-4-5)")
        'anthropic/claude-sonnet-4-5'
    """
    if "/" in model and "(" not in model:
        return model
    match = _BARE_MODEL.search(model)
    bare = match[1].strip() if match else model
    if "/" in bare:
        return bare
    prefix, name = split_model_id(bare)
    return f"{prefix}/{name}" if prefix != "unknown" else name


def _solver_chat(sample: s.EvalSample, default_model: str, ours: bool) -> Chat | None:
    messages = sample.messages
    if not messages:
        return None
    if ours and all(m.id is None for m in messages):
        return None  # our writer's stand-in transcript of a solver that used no chat
    named = next((m.model for m in messages if type(m) is s.ChatMessageAssistant and m.model), None)
    model_id = normalize_model(named or sample.output.model or default_model)
    return LoggedChat(_provider(model_id), _solver_transcript, sample)


def _solver_transcript(sample: s.EvalSample, model_id: str) -> tuple[str | None, list[Turn]]:
    """The solver's conversation, its last reply carrying the sample's usage and output."""
    transcript = message_turns(sample.messages)
    output = sample.output
    replies = transcript.replies
    if replies:
        last = replies[-1]
        role = sample.role_usage.get("solver")
        if role is not None and len(replies) == 1:
            last.tokens, last.cost = usage_tokens(role), role.total_cost
        elif output.usage is not None:
            last.tokens = usage_tokens(output.usage)
        if output.choices:
            reason = output.choices[0].stop_reason
            last.finish_reason = reason if reason in _STOP else "unknown"  # type: ignore[assignment]
        last.duration = output.time
        if last.model is None:
            last.model = model_name(model_id)
    return transcript.system, transcript.turns


_messages_type = list[s.ChatMessage]


def _scorer_chat(
    score: s.LogScore, sample: s.EvalSample, default_model: str, alone: bool = True
) -> tuple[Chat | None, Any]:
    """The judge's chat (from `metadata["grading"]`) and the rest of the score's metadata.
    The sample's scorer usage is its reply's when it is the sample's only judge (`alone`);
    judges of several scorers get theirs afterwards (`_judges_usage`)."""
    metadata = dict(score.metadata or {})
    grading = metadata.pop("grading", None)
    rest: Any = metadata or None
    if isinstance(rest, dict) and list(rest) == ["scorer_metadata"]:
        rest = rest["scorer_metadata"]
    if not isinstance(grading, list) or not grading:
        return None, rest
    try:
        messages = msgspec.convert(grading, _messages_type)
    except msgspec.ValidationError:
        return None, score.metadata
    transcript = message_turns(messages)
    judge = metadata.get("judge_model")
    model_id = normalize_model(str(judge or transcript.model or default_model))
    replies = transcript.replies
    role = sample.role_usage.get("scorer") if alone else None
    if replies and role is not None and len(replies) == 1:
        replies[0].tokens, replies[0].cost = usage_tokens(role), role.total_cost
    for reply in replies:
        if reply.model is None:
            reply.model = model_name(model_id)
    chat = Chat(_provider(model_id), system_prompt=transcript.system, turns=transcript.turns)
    return chat, rest


def sample_result(sample: s.EvalSample, score: s.LogScore | None) -> str | None:
    """What the solver returned: the completion, else the score's answer, else the last reply."""
    output = sample.output
    if output.choices:
        return output.completion or message_text(output.choices[0].message.content)
    if output.completion:
        return output.completion
    if score is not None and score.answer is not None:
        return score.answer
    for message in reversed(sample.messages):
        if isinstance(message, s.ChatMessageAssistant):
            return message_text(message.content)
    return None


def _input(value: str | list[s.ChatMessage]) -> Any:
    if isinstance(value, str):
        return value
    if all(isinstance(m, s.ChatMessageUser) for m in value):
        return [c for m in value for c in message_contents(m.content)]
    return list(value)


def score_value(score: s.LogScore) -> Any:
    """A logged score's value; our no-grade marker ("N", reason grader_failed) is None."""
    if score.value == s.NO_GRADE and score.reason == s.NO_GRADE_REASON:
        return None
    return score.value


def first_score(scores: dict[str, s.LogScore] | None) -> tuple[str | None, s.LogScore | None]:
    if not scores:
        return None, None
    name, score = next(iter(scores.items()))
    return name, score


class LoggedSampleError(SampleError):
    """A sample's error as a log records it: `str()` is the logged message."""

    __slots__ = ()

    def __str__(self) -> str:
        return self.message


_ERROR_TYPE = re.compile(r"^([A-Za-z_][\w.]*)(?:\(|:| while )")
_ERROR_STAGE = re.compile(r" while (solving|scoring):")


def _error(error: s.EvalError | None) -> SampleError | None:
    if error is None:
        return None
    kind = _ERROR_TYPE.match(error.message)
    stage = _ERROR_STAGE.search(error.message)
    return LoggedSampleError(
        stage={"solving": "solve", "scoring": "score"}[stage[1]] if stage else "",
        type=kind[1] if kind else "",
        message=error.message,
        traceback=error.traceback,
    )


class _RetriedCall(msgspec.Struct):
    event: str
    model: str = ""
    retries: int | None = None
    metadata: dict[str, Any] | None = None


_retried_calls = msgspec.json.Decoder(list[_RetriedCall])


def _unix(stamp: Any) -> float:
    try:
        return datetime.fromisoformat(str(stamp)).timestamp()
    except ValueError:
        return 0.0


_RETRIES_KEY = re.compile(rb'"retries":')


def _logged_retries(events: msgspec.Raw) -> list[RetryNote] | None:
    """The retries the sample's model events record: ours with their reasons
    (`metadata.retries`), Inspect's as a bare count."""
    if _RETRIES_KEY.search(memoryview(events)) is None:  # most samples: no copy, no decode
        return None
    notes: list[RetryNote] = []
    for event in _retried_calls.decode(events):
        if event.event != "model" or not event.retries:
            continue
        logged = (event.metadata or {}).get("retries")
        if not isinstance(logged, list):
            logged = [{"attempt": i + 1} for i in range(event.retries)]
        for entry in logged:
            notes.append(
                RetryNote(
                    at=_unix(entry.get("at")),
                    model=event.model,
                    attempt=int(entry.get("attempt") or 0),
                    reason=str(entry.get("reason") or "not recorded"),
                    wait=float(entry.get("wait") or 0.0),
                )
            )
    return notes or None


class _ModelCallEvent(msgspec.Struct):
    """What the per-role readings below need of a logged event."""

    event: str
    role: str | None = None
    config: dict[str, Any] | None = None
    cache: str | None = None


_model_call_events = msgspec.json.Decoder(list[_ModelCallEvent])
_BATCH_KEY = re.compile(rb'"batch"\s*:')
_CACHE_READ = re.compile(rb'"cache"\s*:\s*"read"')
#: A model event's role (ours write "grader" for the scorer's calls, as Inspect names a
#: judge) as the role of a cost row; a model event without one is the solver's.
_EVENT_ROLES = {"grader": "scorer", "scorer": "scorer"}


def _per_role(
    events: msgspec.Raw, mentioned: re.Pattern[bytes], says: Callable[[_ModelCallEvent], bool]
) -> dict[str, bool] | None:
    """Per role with model events, whether `says` holds for every one of its calls. None
    when the events never match `mentioned` (most samples: no copy, no decode) or are of
    a shape we do not know."""
    if mentioned.search(memoryview(events)) is None:
        return None
    try:
        decoded = _model_call_events.decode(events)
    except msgspec.ValidationError:
        return None
    out: dict[str, bool] = {}
    for event in decoded:
        if event.event != "model":
            continue
        role = _EVENT_ROLES.get(event.role or "", "solver")
        out[role] = out.get(role, True) and says(event)
    return out


def logged_batch(events: msgspec.Raw) -> dict[str, bool] | None:
    """Per role with model events, whether its calls were all sent in provider batches:
    their `config.batch` (ours write `true`; Inspect's may be a batch size or settings).
    None when no event mentions batches."""
    return _per_role(
        events, _BATCH_KEY, lambda e: (e.config or {}).get("batch") not in (None, False)
    )


def logged_cache(events: msgspec.Raw) -> dict[str, bool] | None:
    """Per role with model events, whether the cache answered all its calls (their
    `"cache": "read"`, as ours and Inspect's record a reply read from a cache). None
    when no event says so.

    Example:
        >>> logged_cache(msgspec.Raw(b'[{"event": "model", "cache": "read"}]'))
        {'solver': True}
    """
    return _per_role(events, _CACHE_READ, lambda e: e.cache == "read")


def is_batched(record: SampleRecord, role: str) -> bool:
    """Whether `record`'s (read back from a log) calls of `role` went in provider batches."""
    return bool(record.logged_batch and record.logged_batch.get(role))


def sample_record(sample: s.EvalSample, default_model: str, ours: bool) -> SampleRecord:
    """One logged sample as the engine's record (chats rebuilt on replay providers)."""
    metadata = sample.metadata
    solver_metadata = None
    if "solver_metadata" in metadata:
        metadata = dict(metadata)
        solver_metadata = metadata.pop("solver_metadata")
    _, logged = first_score(sample.scores)
    judged = sum(1 for one in (sample.scores or {}).values() if "grading" in (one.metadata or {}))
    scores = {
        name: _logged_score(one, sample, default_model, alone=judged <= 1)
        for name, one in (sample.scores or {}).items()
    }
    if judged > 1:
        _judges_usage(
            sample, [s.chat for s in scores.values() if s.chat is not None], default_model
        )
    record = SampleRecord(
        Sample(sample.id, sample.epoch, _input(sample.input), sample.target, metadata),
        result=sample_result(sample, logged),
        solver_chat=_solver_chat(sample, default_model, ours),
        solver_metadata=solver_metadata,
        error=_error(sample.error),
        logged_retries=_logged_retries(sample.events),
        logged_batch=logged_batch(sample.events),
        logged_cache=logged_cache(sample.events),
        events=logged_transcript(sample.events, sample.attachments),
    )
    if scores:
        record.set_score(ScoreSet(scores) if len(scores) > 1 else next(iter(scores.values())))
    return record


def _logged_score(
    logged: s.LogScore, sample: s.EvalSample, default_model: str, alone: bool = True
) -> Score:
    chat, rest = _scorer_chat(logged, sample, default_model, alone)
    return Score(score_value(logged), logged.answer, logged.explanation, rest, chat)


def _judges_usage(sample: s.EvalSample, judges: list[Chat], default_model: str) -> None:
    """The judges' replies' usage when several scorers of a sample graded with a model:
    a log keeps a sample's usage by role and by model, not both, so a judge's is its
    model's when no other chat of the sample (the solver's, another judge's) used that
    model and it replied once; the others' stay unknown rather than counted twice."""
    by_model: dict[str, list[Chat]] = {}
    for chat in judges:
        by_model.setdefault(chat.provider.model_id, []).append(chat)
    logged = {normalize_model(key): usage for key, usage in sample.model_usage.items()}
    solver = normalize_model(default_model)
    for model_id, chats in by_model.items():
        replies = [t for chat in chats for t in chat.turns if t.role == "assistant"]
        usage = logged.get(model_id)
        if usage is not None and model_id != solver and len(replies) == 1:
            replies[0].tokens, replies[0].cost = usage_tokens(usage), usage.total_cost


def add_chat_usage(record: SampleRecord, *ledgers: UsageLedger) -> None:
    """Add the tokens and cost of each reply in `record`'s chats to `ledgers`, by role,
    as batched when the log says the role's calls went in provider batches, and as
    cached when it says the cache answered them."""
    judged = (("scorer", chat) for chat in record.judge_chats)
    for role, chat in (("solver", record.solver_chat), *judged):
        if chat is None:
            continue
        batch = is_batched(record, role)
        cached = bool(record.logged_cache and record.logged_cache.get(role))
        for turn in chat.turns:
            if turn.role == "assistant" and turn.tokens is not None:
                for ledger in ledgers:
                    ledger.record(
                        role,
                        chat.provider.name,
                        chat.model,
                        turn.tokens,
                        0.0 if cached else turn.cost,
                        batch=batch,
                        cached=cached,
                    )

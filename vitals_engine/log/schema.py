"""Inspect's EvalLog (version 2) as msgspec Structs: the log's public contract.

Field order is the JSON key order, and it matters: `version, status, eval,
plan, results, stats` come before `samples`, or Inspect's fast header read
gives up. New fields get defaults; a field's type never changes. Unknown
keys in logs written by other tools are ignored on read.

Sample `events` are kept as raw JSON (`msgspec.Raw`): the writer encodes
them once, and a reader that only wants scores never pays to decode them.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType, field

from ..vocab.text import WritableEncoder

__all__ = [
    "ChatCompletionChoice",
    "ChatMessage",
    "ChatMessageAssistant",
    "ChatMessageSystem",
    "ChatMessageTool",
    "ChatMessageUser",
    "ConnectionLimitChange",
    "EvalConfig",
    "EvalDataset",
    "EvalError",
    "EvalLog",
    "EvalMetric",
    "EvalPlan",
    "EvalPlanStep",
    "EvalResults",
    "EvalSample",
    "EvalSampleLimit",
    "EvalSampleSummary",
    "EvalScore",
    "EvalScorer",
    "EvalSpec",
    "EvalStats",
    "LogContent",
    "LogScore",
    "ModelOutput",
    "ModelUsage",
    "ToolCall",
    "ToolCallError",
]

LOG_VERSION = 2
EMPTY_EVENTS = Raw(b"[]")
NO_EVENTS_DATA = Raw(b"null")


class _Loose(Struct, omit_defaults=True, gc=False):
    """Base for nested records: None and default values are left out of the JSON."""


# -- message contents ---------------------------------------------------------


class ContentText(_Loose, tag="text", tag_field="type"):
    text: str


class ContentReasoning(_Loose, tag="reasoning", tag_field="type"):
    reasoning: str
    signature: str | None = None
    redacted: bool = False


class ContentImage(_Loose, tag="image", tag_field="type"):
    image: str
    detail: str = "auto"


class ContentAudio(_Loose, tag="audio", tag_field="type"):
    audio: str = ""
    format: str = ""


class ContentVideo(_Loose, tag="video", tag_field="type"):
    video: str = ""
    format: str = ""


class ContentDocument(_Loose, tag="document", tag_field="type"):
    document: str = ""
    filename: str | None = None
    mime_type: str | None = None


class ContentData(_Loose, tag="data", tag_field="type"):
    data: Any = None


class ContentToolUse(_Loose, tag="tool_use", tag_field="type"):
    tool_type: str = ""
    id: str = ""
    name: str = ""
    arguments: Any = None
    result: Any = None


LogContent = (
    ContentText
    | ContentReasoning
    | ContentImage
    | ContentAudio
    | ContentVideo
    | ContentDocument
    | ContentData
    | ContentToolUse
)

# -- messages -------------------------------------------------------------------


class ToolCall(_Loose):
    id: str
    function: str
    arguments: dict[str, Any] = field(default_factory=dict)
    type: str = "function"
    parse_error: str | None = None


class ToolCallError(_Loose):
    type: str
    message: str


class ChatMessageSystem(_Loose, tag="system", tag_field="role"):
    content: str | list[LogContent]
    id: str | None = None
    source: str | None = None
    metadata: dict[str, Any] | None = None


class ChatMessageUser(_Loose, tag="user", tag_field="role"):
    content: str | list[LogContent]
    id: str | None = None
    source: str | None = None
    metadata: dict[str, Any] | None = None
    tool_call_id: list[str] | None = None


class ChatMessageAssistant(_Loose, tag="assistant", tag_field="role"):
    content: str | list[LogContent]
    id: str | None = None
    source: str | None = None
    metadata: dict[str, Any] | None = None
    tool_calls: list[ToolCall] | None = None
    model: str | None = None


class ChatMessageTool(_Loose, tag="tool", tag_field="role"):
    content: str | list[LogContent]
    id: str | None = None
    source: str | None = None
    metadata: dict[str, Any] | None = None
    tool_call_id: str | None = None
    function: str | None = None
    error: ToolCallError | None = None


ChatMessage = ChatMessageSystem | ChatMessageUser | ChatMessageAssistant | ChatMessageTool

# -- model output and usage -------------------------------------------------------


class ModelUsage(_Loose):
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    input_tokens_cache_write: int | None = None
    input_tokens_cache_read: int | None = None
    reasoning_tokens: int | None = None
    total_cost: float | None = None


class ChatCompletionChoice(_Loose):
    message: ChatMessageAssistant
    stop_reason: str = "unknown"


class ModelOutput(_Loose):
    model: str = ""
    choices: list[ChatCompletionChoice] = field(default_factory=list)
    completion: str = ""
    usage: ModelUsage | None = None
    time: float | None = None
    error: str | None = None


# -- scores and errors ------------------------------------------------------------


#: What an unscored sample (a judge that gave no grade) is written as: Inspect
#: requires a value, and "N" is its letter for "no answer"; `reason` says why.
NO_GRADE = "N"
NO_GRADE_REASON = "grader_failed"


class LogScore(_Loose):
    value: Any
    answer: str | None = None
    explanation: str | None = None
    reason: str | None = None
    metadata: dict[str, Any] | None = None
    history: list[Any] = field(default_factory=list)


class EvalError(Struct, gc=False):
    message: str
    traceback: str
    traceback_ansi: str


# -- the sample --------------------------------------------------------------------


class EvalSampleLimit(_Loose):
    """The limit that stopped a sample: its type ("message", "token", "time", "working",
    "cost" ...), its value, and why (`reason`, the limit event's message)."""

    type: str
    limit: float
    reason: str | None = None


class EvalSample(_Loose):
    id: int | str
    epoch: int
    input: str | list[ChatMessage]
    target: str | list[str]
    messages: list[ChatMessage] = field(default_factory=list)
    output: ModelOutput = field(default_factory=ModelOutput)
    scores: dict[str, LogScore] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    store: dict[str, Any] = field(default_factory=dict)
    events: Raw = EMPTY_EVENTS
    model_usage: dict[str, ModelUsage] = field(default_factory=dict)
    role_usage: dict[str, ModelUsage] = field(default_factory=dict)
    started_at: str | None = None
    completed_at: str | None = None
    total_time: float | None = None
    working_time: float | None = None
    uuid: str | None = None
    error: EvalError | None = None
    error_retries: list[Any] | None = None
    attachments: dict[str, str] = field(default_factory=dict)
    events_data: Raw = NO_EVENTS_DATA  # kept raw, like events: decoded only by who needs it
    limit: EvalSampleLimit | None = None


class EvalSampleSummary(_Loose):
    """One line of a `.eval`'s summaries: what a viewer lists without opening samples."""

    id: int | str
    epoch: int
    input: str | list[ChatMessage]
    target: str | list[str]
    metadata: dict[str, Any] = field(default_factory=dict)
    scores: dict[str, LogScore] | None = None
    model_usage: dict[str, ModelUsage] = field(default_factory=dict)
    role_usage: dict[str, ModelUsage] = field(default_factory=dict)
    started_at: str | None = None
    completed_at: str | None = None
    total_time: float | None = None
    working_time: float | None = None
    uuid: str | None = None
    error: str | None = None
    #: The type of the limit that stopped the sample, and why (its `limit.reason`).
    limit: str | None = None
    limit_reason: str | None = None
    retries: int | None = None
    # Always written: Inspect's reader takes a missing `completed` as false (its viewer as
    # true); a factory default is one msgspec's omit_defaults never leaves out.
    completed: bool = field(default_factory=lambda: True)
    message_count: int | None = None


# -- the header ----------------------------------------------------------------------


class EvalDataset(_Loose):
    name: str | None = None
    location: str | None = None
    samples: int | None = None
    sample_ids: list[int | str] | None = None
    shuffled: bool | None = None


class EvalConfig(_Loose):
    #: The run's selection of samples, as Inspect records it: the first `limit`, the ids
    #: asked for, and the shuffle's seed.
    limit: int | None = None
    sample_id: list[int | str] | None = None
    sample_shuffle: bool | int | None = None
    epochs: int | None = None
    epochs_reducer: list[str] | None = None
    fail_on_error: bool | float | None = None
    max_samples: int | None = None
    log_samples: bool | None = None


class EvalMetricDecl(_Loose):
    name: str
    options: dict[str, Any] = field(default_factory=dict)


class EvalScorer(_Loose):
    name: str
    options: dict[str, Any] = field(default_factory=dict)
    metrics: list[EvalMetricDecl] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


class EvalSpec(_Loose):
    created: str
    task: str
    dataset: EvalDataset
    model: str
    config: EvalConfig
    eval_id: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    task_version: int | str = 0
    task_file: str | None = None
    task_display_name: str | None = None
    task_attribs: dict[str, Any] = field(default_factory=dict)
    task_args: dict[str, Any] = field(default_factory=dict)
    solver: str | None = None
    solver_args: dict[str, Any] | None = None
    tags: list[str] | None = None
    model_args: dict[str, Any] = field(default_factory=dict)
    model_roles: dict[str, Any] | None = None
    packages: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, Any] | None = None
    scorers: list[EvalScorer] | None = None


class EvalPlanStep(_Loose):
    solver: str
    params: dict[str, Any] = field(default_factory=dict)


class EvalPlan(Struct):
    name: str = "plan"
    steps: list[EvalPlanStep] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)


#: On a `stderr` entry we write beside a metric (Inspect's metric shape), the name of
#: the metric it is the standard error of; our reader leaves such entries out of the
#: metrics.
STDERR_OF = "stderr_of"
#: The metadata key of the metric we add beside a mean corrected by human grades
#: (`accuracy_corrected`): the metric it corrects.
CORRECTED_OF = "corrected_of"


class EvalMetric(_Loose):
    """A metric of a scorer. Ours carry their statistics in `metadata`: `stderr`,
    `ci_low`, `ci_high` (the interval at `ci_level`), `n` (scores) and `clusters`."""

    name: str
    value: float | int | None
    params: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] | None = None


class EvalScore(_Loose):
    name: str
    scorer: str
    reducer: str | None = None
    scored_samples: int | None = None
    unscored_samples: int | None = None
    params: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, EvalMetric] = field(default_factory=dict)
    #: What the scorer tells of the run besides its metrics (a judge panel's agreement).
    metadata: dict[str, Any] | None = None


class EvalResults(_Loose):
    total_samples: int = 0
    completed_samples: int = 0
    scores: list[EvalScore] = field(default_factory=list)
    #: What the scores tell together (the agreement of a task's several scorers).
    metadata: dict[str, Any] | None = None


class ConnectionLimitChange(_Loose):
    """An endpoint's concurrency raised or lowered by the adaptive limiter."""

    timestamp: float
    model: str
    old_limit: int
    new_limit: int
    reason: str


class EvalStats(Struct):
    started_at: str = ""
    completed_at: str = ""
    model_usage: dict[str, ModelUsage] = field(default_factory=dict)
    role_usage: dict[str, ModelUsage] = field(default_factory=dict)
    connection_limit_history: list[ConnectionLimitChange] = field(default_factory=list)


Status = Literal["started", "success", "error", "cancelled"]


class EvalLog(Struct):
    """The whole log. `version, status, eval, plan, stats` are always written, in
    this order; `results`, `error` and `samples` only when set (Inspect's
    streaming header read rejects a null `error`)."""

    version: int
    status: Status
    eval: EvalSpec
    plan: EvalPlan = field(default_factory=EvalPlan)
    results: EvalResults | UnsetType | None = UNSET
    stats: EvalStats = field(default_factory=EvalStats)
    error: EvalError | UnsetType | None = UNSET
    samples: list[EvalSample] | UnsetType | None = UNSET


def enc_hook(value: Any) -> Any:
    """Values msgspec cannot encode natively become their `repr` (metadata can hold anything)."""
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    if hasattr(value, "to_dicts"):  # polars DataFrames
        return value.to_dicts()
    return repr(value)


#: The log's JSON encoder: a lone surrogate in any string (a dataset's input, a chat's
#: text, metadata) is written as its escape rather than failing the write.
encoder = WritableEncoder(enc_hook=enc_hook)
log_decoder = msgspec.json.Decoder(EvalLog)
sample_decoder = msgspec.json.Decoder(EvalSample)

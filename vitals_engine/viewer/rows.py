"""What the viewer lists: one light row per sample, one entry per log, one row per batch.

A summary row is what the sample table needs and nothing more (excerpts of
input, target and result, the first score, an error flag, tokens, time, and
when it finished; for a sample whose calls a cache answered, their usage), so
that 100,000 of them stay a few megabytes. Samples are
decoded leniently (`LiteSample`): a log written by a newer tool, with message
parts this reader does not know, still lists. A provider batch's row
(`batch_row`) is what is known of it without its requests; a journal's batch
records are read as `BatchSummary`s, which leave their requests unread.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from ..log import schema as s
from ..log.logged_batches import BatchSummary, logged_batches
from ..log.logged_eval import LoggedEval, metric_stats_of, metric_values_of
from ..log.logged_sample import logged_cache, normalize_model

__all__ = [
    "LiteSample",
    "batch_row",
    "lite_decoder",
    "log_entry",
    "summary_row",
]

INPUT_CHARS = 160
TARGET_CHARS = 80
RESULT_CHARS = 160
ERROR_CHARS = 200


class _Block(msgspec.Struct):
    type: str = ""
    text: str | None = None


class _Message(msgspec.Struct):
    role: str = ""
    content: str | list[_Block] = ""


class _Choice(msgspec.Struct):
    message: _Message = msgspec.field(default_factory=_Message)


class _Output(msgspec.Struct):
    completion: str = ""
    choices: list[_Choice] = msgspec.field(default_factory=list)


class _Said(msgspec.Struct):
    """A message's role only (to count a conversation's replies)."""

    role: Any = None


class _ScoreMetadata(msgspec.Struct):
    grading: msgspec.Raw = msgspec.Raw(b"")  # the judge's conversation (model-graded scorers)


_said_decoder = msgspec.json.Decoder(list[_Said])
_score_metadata_decoder = msgspec.json.Decoder(_ScoreMetadata)


class _Score(msgspec.Struct):
    value: Any = None
    answer: str | None = None
    reason: str | None = None
    metadata: msgspec.Raw = msgspec.Raw(b"")  # any JSON: read only to count the judge's replies


class _Usage(msgspec.Struct):
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    input_tokens_cache_write: int | None = None
    input_tokens_cache_read: int | None = None
    reasoning_tokens: int | None = None
    total_cost: float | None = None


class _Error(msgspec.Struct):
    message: str = ""


class LiteSample(msgspec.Struct):
    """The fields of a logged sample that its summary row needs.

    Example:
        >>> lite_decoder.decode(b'{"id": "q1", "epoch": 2, "input": "hi"}').epoch
        2
    """

    id: int | str
    epoch: int = 1
    input: str | list[_Message] = ""
    target: str | list[str] | None = ""
    output: _Output = msgspec.field(default_factory=_Output)
    messages: msgspec.Raw = msgspec.Raw(b"")  # read only to count the replies
    scores: dict[str, _Score] | None = None
    model_usage: dict[str, _Usage] | None = None
    role_usage: dict[str, _Usage] | None = None
    total_time: float | None = None
    completed_at: str | None = None
    error: _Error | str | None = None
    events: msgspec.Raw = msgspec.Raw(b"")  # read only when a cache answered a call


lite_decoder = msgspec.json.Decoder(LiteSample)


def _excerpt(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _text(content: str | list[_Block]) -> str:
    if isinstance(content, str):
        return content
    return " ".join(b.text for b in content if b.type == "text" and b.text)


def _input_text(value: str | list[_Message]) -> str:
    if isinstance(value, str):
        return value
    return " ".join(_text(m.content) for m in value if m.role == "user")


def _result_text(sample: LiteSample, score: _Score | None) -> str:
    output = sample.output
    if output.completion:
        return output.completion
    if output.choices:
        return _text(output.choices[0].message.content)
    if score is not None and score.answer is not None:
        return score.answer
    return ""


def _score_value(score: _Score | None) -> Any:
    """A score as the table shows it: a string, number or bool; None when unscored."""
    if score is None:
        return None
    value = score.value
    if value == s.NO_GRADE and score.reason == s.NO_GRADE_REASON:
        return None
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return _excerpt(msgspec.json.encode(value).decode(), TARGET_CHARS)


def _tokens(sample: LiteSample) -> int:
    usage = sample.model_usage or sample.role_usage or {}
    return sum(u.total_tokens or (u.input_tokens + u.output_tokens) for u in usage.values())


def _replies(raw: msgspec.Raw) -> int:
    """How many assistant messages a raw JSON list of messages holds (0 if it is none)."""
    if not raw:
        return 0
    try:
        return sum(m.role == "assistant" for m in _said_decoder.decode(raw))
    except (msgspec.DecodeError, msgspec.ValidationError):
        return 0


def _grading(score: _Score | None) -> msgspec.Raw:
    """The judge's conversation in a score's metadata, raw (empty if there is none)."""
    if score is None or not score.metadata:
        return msgspec.Raw(b"")
    try:
        return _score_metadata_decoder.decode(score.metadata).grading
    except (msgspec.DecodeError, msgspec.ValidationError):
        return msgspec.Raw(b"")


def _requests(sample: LiteSample, score: _Score | None) -> dict[str, int]:
    """The model requests of a sample by role (its replies), as `get_cost()` counts them."""
    counts = {"solver": _replies(sample.messages), "scorer": _replies(_grading(score))}
    return {role: n for role, n in counts.items() if n}


def _cached(sample: LiteSample, requests: dict[str, int]) -> dict[str, dict[str, Any]]:
    """The usage of each role whose calls the cache answered, all of them (as the model
    events say: `"cache": "read"`), with `get_cost()`'s names; {} for most samples."""
    flags = logged_cache(sample.events) if sample.events else None
    if not flags:
        return {}
    usage = sample.role_usage or {}
    if not usage and sample.model_usage and len(sample.model_usage) == 1:
        usage = {"solver": next(iter(sample.model_usage.values()))}  # by model only: one
    out: dict[str, dict[str, Any]] = {}
    for role, all_cached in flags.items():
        u = usage.get(role)
        if all_cached and u is not None:
            out[role] = {
                "requests": requests.get(role, 0),
                "input_tokens": u.input_tokens,
                "cached_input_tokens": u.input_tokens_cache_read or 0,
                "cache_write_tokens": u.input_tokens_cache_write or 0,
                "output_tokens": u.output_tokens,
                "reasoning_tokens": u.reasoning_tokens or 0,
                "cost": u.total_cost,
            }
    return out


def _error_text(error: _Error | str | None) -> str | None:
    if error is None:
        return None
    message = error if isinstance(error, str) else error.message
    return _excerpt(message, ERROR_CHARS) or "error"


def _unix(stamp: str | None) -> float | None:
    """An ISO time as Unix seconds (None when absent or unreadable)."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def summary_row(sample: LiteSample, key: str) -> dict[str, Any]:
    """One sample's row in `summaries.json`.

    Example:
        >>> summary_row(lite_decoder.decode(b'{"id": 1, "epoch": 1, "input": "hi"}'), "1")["input"]
        'hi'
    """
    score = next(iter(sample.scores.values())) if sample.scores else None
    target = sample.target
    if isinstance(target, list):
        target = " | ".join(target)
    requests = _requests(sample, score)
    row: dict[str, Any] = {
        "key": key,
        "id": sample.id,
        "epoch": sample.epoch,
        "input": _excerpt(_input_text(sample.input), INPUT_CHARS),
        "target": _excerpt(target or "", TARGET_CHARS),
        "result": _excerpt(_result_text(sample, score), RESULT_CHARS),
        "score": _score_value(score),
        "error": _error_text(sample.error),
        "tokens": _tokens(sample),
        # Model requests by role (roles with none left out): the cost table's Requests.
        "requests": requests,
        "time": sample.total_time,
        # When the sample finished (Unix seconds): the page hides live text older than this.
        "completed": _unix(sample.completed_at),
    }
    cached = _cached(sample, requests)
    if cached:  # the cost table's cached rows; absent from most rows, which stay light
        row["cached"] = cached
    if sample.scores and len(sample.scores) > 1:  # the other scorers' (a task of several)
        others = list(sample.scores.items())[1:]
        row["more_scores"] = {name: _score_value(other) for name, other in others}
    return row


def add_usage(total: dict[str, s.ModelUsage], usage: dict[str, _Usage] | None) -> None:
    """Add a sample's usage (per model or per role) into running totals.

    Example:
        >>> totals = {}
        >>> add_usage(totals, sample.role_usage)
        >>> totals["solver"].total_tokens
        11
    """
    for name, u in (usage or {}).items():
        sum_ = total.get(name) or s.ModelUsage()
        sum_.input_tokens += u.input_tokens
        sum_.output_tokens += u.output_tokens
        sum_.total_tokens += u.total_tokens or (u.input_tokens + u.output_tokens)
        if u.total_cost is not None:
            sum_.total_cost = (sum_.total_cost or 0.0) + u.total_cost
        total[name] = sum_


def _cost_table(path: Path, header: s.EvalLog) -> list[dict[str, Any]]:
    try:
        frame = LoggedEval(path, header, [], header_only=True).get_cost()
    except Exception:  # a header of an unusual shape: no cost table rather than no log
        return []
    return frame.to_dicts()


def batch_row(batch: BatchSummary) -> dict[str, Any]:
    """One provider batch's row in `batches.json`: all that is known of it but its requests.

    Example:
        >>> batch_row(BatchSummary(key="vb-1", id="batch_9", submitted=1.0))["pending"]
        True
    """
    return {
        "key": batch.key,
        "id": batch.id,
        "provider": batch.provider,
        "model": batch.model,
        "requests": batch.requests,
        "created": batch.created,
        "submitted": batch.submitted,
        "ended": batch.ended,
        "status": batch.status,
        "counts": batch.counts,
        "pending": batch.pending,
    }


def log_entry(
    relative: str,
    path: Path,
    header: s.EvalLog,
    *,
    samples: int | None,
    version: int,
    final: str | None = None,
    batches: Iterable[BatchSummary] | None = None,
) -> dict[str, Any]:
    """One log's entry in `logs.json`: what the list and the log page's header show.

    `batches` are the run's provider batches (a journal's, as read so far), by default
    those its header records; the entry counts them (`batches`) and the pending ones
    (`pending_batches`), and `batches.json` lists them.

    Example:
        >>> log_entry("a.json", Path("logs/a.json"), header, samples=2, version=1)["task"]
        'simple-addition'
    """
    spec = header.eval
    results = header.results if isinstance(header.results, s.EvalResults) else None
    scores = _score_cards(results)
    if samples is None and results is not None and results.completed_samples:
        samples = results.completed_samples
    known: list[BatchSummary] = list(batches if batches is not None else logged_batches(header))
    return {
        "file": relative,
        "name": path.name,
        "format": path.suffix.lstrip(".").lower(),
        "task": spec.task_display_name or spec.task,
        "model": normalize_model(spec.model) if spec.model else "",
        "status": header.status,
        "running": header.status == "started",
        "metrics": scores[0]["metrics"] if scores else {},
        "metric_stats": scores[0]["stats"] if scores else {},
        "scores": scores,
        "samples": samples,
        "total_samples": results.total_samples if results is not None else spec.dataset.samples,
        "epochs": spec.config.epochs,
        "dataset": spec.dataset.name,
        **_spending(path, header),
        "created": spec.created,
        "started": header.stats.started_at or None,
        "completed": header.stats.completed_at or None,
        "run_id": spec.run_id,
        "error": header.error.message if isinstance(header.error, s.EvalError) else None,
        "final": final,
        "batches": len(known),
        "pending_batches": sum(batch.pending for batch in known),
        **_file_facts(path),
        "version": version,
    }


def _score_cards(results: s.EvalResults | None) -> list[dict[str, Any]]:
    """Each scorer's card: its name, metrics with their statistics, and its mean
    corrected by human grades when there is one."""
    return [
        {
            "name": score.name,
            "scorer": score.scorer,
            "metrics": metric_values_of(score),
            "stats": _stats(score),
            **_corrected(score),
        }
        for score in (results.scores if results is not None else [])
    ]


def _spending(path: Path, header: s.EvalLog) -> dict[str, Any]:
    """A log's `cost` (None: no cost known), `tokens` and `cost_table`."""
    cost_table = _cost_table(path, header)
    costs = [row["cost"] for row in cost_table if row.get("cost") is not None]
    usage = header.stats.role_usage or header.stats.model_usage
    return {
        "cost": sum(costs) if costs else None,
        "tokens": sum(u.total_tokens or (u.input_tokens + u.output_tokens) for u in usage.values()),
        "cost_table": cost_table,
    }


def _file_facts(path: Path) -> dict[str, Any]:
    """A log file's `size` and `mtime` (None: it is not there)."""
    stat = path.stat() if path.exists() else None
    return {"size": stat.st_size if stat else None, "mtime": stat.st_mtime if stat else None}


def _corrected(score: s.EvalScore) -> dict[str, Any]:
    """A scorer's mean corrected by human grades, for its card (`{}`: none): the value,
    its statistics as `_stats` gives them, and how many human grades made it."""
    for metric in score.metrics.values():
        ours = metric.metadata or {}
        if s.CORRECTED_OF in ours and isinstance(metric.value, int | float):
            fields = {k: ours.get(k) for k in ("stderr", "n", "clusters", "human_grades")}
            fields |= {"low": ours.get("ci_low"), "high": ours.get("ci_high")}
            kept = {k: v for k, v in fields.items() if isinstance(v, int | float)}
            return {"corrected": {"value": metric.value, **kept}}
    return {}


def _stats(score: s.EvalScore) -> dict[str, dict[str, Any]]:
    """A scorer's metrics' statistics for the page: stderr, 95% interval, n, clusters
    and the column they are of, when not samples (those known; JSON has no NaN, so a
    value that is not finite is left out)."""
    shown: dict[str, dict[str, Any]] = {}
    for name, stat in metric_stats_of(score).items():
        fields = {
            "stderr": stat.stderr,
            "low": stat.low,
            "high": stat.high,
            "n": stat.n,
            "clusters": stat.clusters,
        }
        kept: dict[str, Any] = {
            k: v for k, v in fields.items() if v is not None and math.isfinite(v)
        }
        metric = score.metrics.get(name)
        column = (metric.metadata or {}).get("cluster") if metric is not None else None
        if isinstance(column, str) and "clusters" in kept:
            kept["cluster"] = column
        if kept:
            shown[name] = kept
    return shown

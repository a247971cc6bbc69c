"""Compose Inspect log records from a run: one `EvalSample` per record, and the header."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from ..chats.chat import Chat
from ..samples import SampleRecord, Score
from ..statistics.corrected import CorrectedMean
from ..statistics.intervals import LEVEL, MetricStat
from ..vocab.batch_records import BatchRecord
from ..vocab.turns import Turn
from ..vocab.usage import UsageLedger
from . import schema as s
from .events import ChatLog, sample_events
from .logged_batches import with_batches
from .messages import chat_messages, model_usage, stop_reason, to_builtins
from .transcript import sample_init, sample_limit

__all__ = [
    "RunHeader",
    "SampleSelection",
    "ScorerResults",
    "compose_corrected",
    "compose_header",
    "compose_metrics",
    "compose_sample",
    "iso_time",
    "logged_input",
]


_LOCAL = datetime.now().astimezone().tzinfo


def iso_time(unix: float | None) -> str | None:
    """Local time with its UTC offset, as Inspect writes it."""
    if unix is None:
        return None
    return datetime.fromtimestamp(unix, _LOCAL).isoformat()


def _model_id(chat: Chat | None) -> str | None:
    return chat.provider.model_id if chat is not None else None


def logged_input(value: Any) -> str | list[s.ChatMessage]:
    """A dataset row's input as a log records it."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, s.ChatMessage) for v in value):
        return list(value)  # messages read back from a log (re-scored): as they were
    if isinstance(value, list) and _is_prompt(value):
        return chat_messages(None, [Turn.user(*value)], "in")
    return s.encoder.encode(value).decode()


def _is_prompt(value: list[Any]) -> bool:
    """Whether a list input is a prompt of contents: content objects, with strings among
    them (`["Summarise this.", ve.ContentDocument.from_file("a.pdf")]`)."""
    if not value:
        return True
    if not any(hasattr(v, "__struct_fields__") for v in value):
        return False
    return all(isinstance(v, str) or hasattr(v, "__struct_fields__") for v in value)


def _usage(ledger: UsageLedger) -> tuple[dict[str, s.ModelUsage], dict[str, s.ModelUsage]]:
    """A sample's usage by model and by role (one row each, the common case, costs one)."""
    rows = ledger.rows
    if len(rows) == 1:
        (role, provider, model, _, _), row = next(iter(rows.items()))
        usage = model_usage(row.tokens, row.cost)
        return {f"{provider.lower()}/{model}": usage}, {role: usage}
    return _by_model(ledger), _by_role(ledger)


def _with_timed_out(metadata: dict[str, Any] | None, ledger: UsageLedger) -> dict[str, Any] | None:
    """The eval's metadata with the attempts that timed out after their request went out
    under `timed_out`, by role and model (`{"solver": {"openai/gpt-4.1": 3}}`; their
    estimated input is in the usage beside them), or as it was when none did."""
    counts: dict[str, dict[str, int]] = {}
    for (role, provider, model, _, _), row in ledger.rows.items():
        if row.timed_out:
            by_model = counts.setdefault(role, {})
            key = f"{provider.lower()}/{model}"
            by_model[key] = by_model.get(key, 0) + row.timed_out
    if not counts:
        return metadata
    return {**(metadata or {}), "timed_out": counts}


def _by_model(ledger: UsageLedger) -> dict[str, s.ModelUsage]:
    return {
        f"{provider.lower()}/{model}": model_usage(row.tokens, row.cost)
        for (provider, model), row in ledger.by_model().items()
    }


def _by_role(ledger: UsageLedger) -> dict[str, s.ModelUsage]:
    return {role: model_usage(row.tokens, row.cost) for role, row in ledger.by_role().items()}


def _scores(
    record: SampleRecord, scorer_name: str | None, prefix: str
) -> tuple[dict[str, s.LogScore], list[ChatLog]]:
    """The sample's scores by scorer name (each one's when the task has several) and
    the judges' conversations, each under its own id prefix."""
    if record.scores is not None:
        by_name = record.scores
    elif record.score is not None and scorer_name:
        by_name = {scorer_name: record.score}
    else:
        return {}, []
    scores: dict[str, s.LogScore] = {}
    judges: list[ChatLog] = []
    for position, (name, score) in enumerate(by_name.items()):
        suffix = "-g" if position == 0 else f"-g{position + 1}"
        judge = ChatLog(score.chat, prefix + suffix) if score.chat is not None else None
        scores[name] = _score(record, score, judge)
        if judge is not None:
            judges.append(judge)
    return scores, judges


def _score(record: SampleRecord, score: Score, judge: ChatLog | None) -> s.LogScore:
    metadata: dict[str, Any] = {}
    if score.metadata is not None:
        meta = to_builtins(score.metadata)
        metadata.update(meta if isinstance(meta, dict) else {"scorer_metadata": meta})
    if judge is not None:
        metadata["grading"] = judge.messages
    return s.LogScore(
        value=score.value if score.value is not None else s.NO_GRADE,
        reason=None if score.value is not None else s.NO_GRADE_REASON,
        answer=score.answer if score.answer is not None else record.result,
        explanation=score.explanation,
        metadata=metadata or None,
    )


#: Per second: (its time up to the dot, its offset, the whole time at .000000).
_SECONDS: dict[int, tuple[str, str, str]] = {}
#: The last (time, text): a call read from the cache starts and completes at once, and a
#: sample completes when its score does.
_last: tuple[float | None, str] = (None, "")


def _times(unix: float) -> str:
    """Local ISO time with microseconds, as `datetime.isoformat` writes it, built from a
    per-second (date, offset) pair: a run's samples share their seconds, and this runs
    several times a sample."""
    global _last
    last = _last
    if last[0] == unix:
        return last[1]
    second = int(unix)
    head = _SECONDS.get(second)
    if head is None:
        if len(_SECONDS) > 4096:
            _SECONDS.clear()
        stamp = datetime.fromtimestamp(second, _LOCAL).isoformat()
        head = _SECONDS[second] = (stamp[:19] + ".", stamp[19:], stamp)
    micros = round((unix - second) * 1_000_000)
    if micros >= 1_000_000:
        return _times(second + 1)
    # str(1_000_000 + micros)[1:] is micros on 6 digits, cheaper than a format spec
    text = head[0] + str(1_000_000 + micros)[1:] + head[1] if micros else head[2]
    _last = (unix, text)
    return text


def compose_sample(record: SampleRecord, scorer_name: str | None) -> s.EvalSample:
    """The log record of one finished (sample, epoch)."""
    sample = record.sample
    chat = record.solver_chat
    prefix = f"{sample.id}-{sample.epoch}"
    solver = ChatLog(chat, prefix) if chat is not None else None
    scores, judges = _scores(record, scorer_name, prefix)
    messages, output = _conversation(record, chat, solver)
    metadata = _metadata(record)
    times = _times
    chats = [solver, *judges] if solver is not None else judges
    logged = logged_input(sample.input)
    init = _sample_init(record, logged)
    events, events_data = sample_events(record, scores, chats, times, output, init)
    started = record.solve_started or record.score_started
    completed = record.score_completed or record.solve_completed
    # completed first: it is the score event's timestamp, just made (see `_times`)
    completed_at = times(completed) if completed is not None else None
    started_at = times(started) if started is not None else None
    by_model, by_role = _usage(record.usage)
    return s.EvalSample(
        id=sample.id,
        epoch=sample.epoch,
        input=logged,
        target=sample.target,
        messages=messages,
        output=output,
        scores=scores or None,
        metadata=metadata,
        model_usage=by_model,
        role_usage=by_role,
        started_at=started_at,
        completed_at=completed_at,
        total_time=round(completed - started, 6) if started and completed else None,
        working_time=_working_time(chats),
        uuid=f"{prefix}",
        error=_error(record),
        events=events,
        events_data=events_data,
        limit=sample_limit(record.events),
    )


def _sample_init(record: SampleRecord, logged: Any) -> dict[str, Any] | None:
    """The body of the sample's `sample_init` event (its logged input `logged`): only a
    sample with transcript records has one (`log/transcript.py`)."""
    if not record.events:
        return None
    sample = record.sample
    metadata = dict(to_builtins(sample.metadata)) if sample.metadata else {}
    return sample_init(sample.id, logged, sample.target, metadata)


def _conversation(
    record: SampleRecord, chat: Chat | None, solver: ChatLog | None
) -> tuple[list[s.ChatMessage], s.ModelOutput]:
    """The sample's messages and output: the solver's chat and its last turn; without
    one, the solver's result as the reply to the input; else no output."""
    messages: list[s.ChatMessage] = solver.messages if solver is not None else []
    last = chat.last_turn() if chat else None
    if solver is not None and last is not None:
        reply = solver.reply(last)
        assert reply is not None
        output = s.ModelOutput(
            model=solver.model_id,
            choices=[s.ChatCompletionChoice(reply, stop_reason(last))],
            completion=record.result if record.result is not None else last.text,
            usage=model_usage(last.tokens) if last.tokens else None,
            time=last.duration,
        )
        return messages, output
    if record.result is not None:
        reply = s.ChatMessageAssistant(record.result, source="generate")
        messages = [s.ChatMessageUser(_input_text(record.sample.input), source="input"), reply]
        output = s.ModelOutput(
            choices=[s.ChatCompletionChoice(reply, "stop")], completion=record.result
        )
        return messages, output
    return messages, s.ModelOutput()


def _metadata(record: SampleRecord) -> dict[str, Any]:
    """The sample's metadata, with what the solver returned as `solver_metadata`."""
    metadata = record.sample.metadata
    logged: dict[str, Any] = dict(to_builtins(metadata)) if metadata else {}
    if record.solver_metadata is not None:
        logged["solver_metadata"] = to_builtins(record.solver_metadata)
    return logged


def _error(record: SampleRecord) -> s.EvalError | None:
    error = record.error
    if error is None:
        return None
    return s.EvalError(str(error), error.traceback, error.traceback)


def _input_text(value: Any) -> str:
    return value if isinstance(value, str) else s.encoder.encode(value).decode()


def _working_time(chats: list[ChatLog]) -> float | None:
    total = 0.0
    for chat in chats:
        for turn in chat.turns:
            if turn.duration:
                total += turn.duration
    return round(total, 6) if total else None


@dataclass(frozen=True)
class SampleSelection:
    """How a run chose its samples from the dataset: `limit=`, `sample_ids=`, and the
    seed of `shuffle=` (None: not shuffled)."""

    limit: int | None = None
    sample_ids: list[int | str] | None = None
    seed: int | None = None


@dataclass
class ScorerResults:
    """A scorer's results beside the primary's (a task of several scorers): its name,
    metrics with their statistics, how many samples it scored, and what else it tells
    (a judge panel's agreement)."""

    name: str
    metrics: dict[str, float]
    metric_stats: dict[str, MetricStat]
    scored_samples: int
    metadata: dict[str, Any] | None = None
    #: Its mean corrected by human grades (None: no human grades, or too few).
    corrected: CorrectedMean | None = None


@dataclass
class RunHeader:
    """What the header of a log says about its run."""

    task: str
    task_id: str
    run_id: str
    eval_id: str
    created: float
    model: str
    solver: str
    scorer: str | None
    epochs: int
    dataset_name: str | None
    sample_ids: list[int | str]
    metrics: dict[str, float]
    started_at: float | None
    completed_at: float | None
    status: s.Status
    total_samples: int
    completed_samples: int
    scored_samples: int
    ledger: UsageLedger
    error: s.EvalError | None = None
    limit_history: list[s.ConnectionLimitChange] = field(default_factory=list)
    max_samples: int | None = None
    packages: dict[str, str] = field(default_factory=dict)
    batches: list[BatchRecord] = field(default_factory=list)
    #: The metrics' standard errors and intervals, by name (those known).
    metric_stats: dict[str, MetricStat] = field(default_factory=dict)
    #: The epoch reducer the metrics were computed after (None: none).
    reducer: str | None = None
    #: The metadata column whose values clustered the metrics' scores (None: by sample).
    cluster: str | None = None
    #: How the run chose its samples (None: every row, in the dataset's order).
    selection: SampleSelection | None = None
    #: The results score's metadata (a judge panel's agreement; None: nothing to add).
    score_metadata: dict[str, Any] | None = None
    #: The other scorers' results, in the task's order (a task of several scorers).
    more_scorers: list[ScorerResults] = field(default_factory=list)
    #: The results' metadata (the scorers' agreement; None: nothing to add).
    results_metadata: dict[str, Any] | None = None
    #: The primary scorer's mean corrected by human grades (None: none), and the
    #: metadata column the human grades are in.
    corrected: CorrectedMean | None = None
    human: str | None = None
    #: What the eval's metadata holds besides batches and timeouts (None: nothing).
    metadata: dict[str, Any] | None = None


def compose_header(run: RunHeader) -> s.EvalLog:
    """The log without samples: everything a listing or a header-only read needs."""
    selection = run.selection or SampleSelection()
    scores = _eval_scores(run)
    scorers = [
        s.EvalScorer(score.name, metrics=[s.EvalMetricDecl(m) for m in score.metrics])
        for score in scores
    ]
    results = s.EvalResults(
        total_samples=run.total_samples,
        completed_samples=run.completed_samples,
        scores=scores,
        metadata=run.results_metadata if scores else None,
    )
    return s.EvalLog(
        version=s.LOG_VERSION,
        status=run.status,
        eval=s.EvalSpec(
            created=iso_time(run.created) or "",
            task=run.task,
            dataset=s.EvalDataset(
                name=run.dataset_name,
                samples=len(run.sample_ids),
                sample_ids=run.sample_ids,
                shuffled=selection.seed is not None,
            ),
            model=run.model,
            config=s.EvalConfig(
                limit=selection.limit,
                sample_id=selection.sample_ids,
                sample_shuffle=selection.seed,
                epochs=run.epochs,
                epochs_reducer=[run.reducer] if run.reducer else None,
                max_samples=run.max_samples,
            ),
            eval_id=run.eval_id,
            run_id=run.run_id,
            task_id=run.task_id,
            task_display_name=run.task,
            solver=run.solver,
            packages=run.packages,
            scorers=scorers or None,
            metadata=_with_timed_out(with_batches(run.metadata, run.batches), run.ledger),
        ),
        plan=s.EvalPlan(steps=[s.EvalPlanStep(run.solver)]),
        results=results,
        stats=s.EvalStats(
            started_at=iso_time(run.started_at) or "",
            completed_at=iso_time(run.completed_at) or "",
            model_usage=_by_model(run.ledger),
            role_usage=_by_role(run.ledger),
            connection_limit_history=run.limit_history,
        ),
        error=run.error if run.error is not None else msgspec.UNSET,
    )


def _eval_scores(run: RunHeader) -> list[s.EvalScore]:
    """The results' scores: the primary scorer's, then each other's (none unscored)."""
    if not run.scorer:
        return []
    primary = ScorerResults(
        run.scorer,
        run.metrics,
        run.metric_stats,
        run.scored_samples,
        run.score_metadata,
        run.corrected,
    )
    scores = []
    for scorer in (primary, *run.more_scorers):
        metrics = compose_metrics(scorer.metrics, scorer.metric_stats, cluster=run.cluster)
        if scorer.corrected is not None:
            metrics[CORRECTED] = compose_corrected(scorer.corrected, run.human)
        scores.append(
            s.EvalScore(
                name=scorer.name,
                scorer=scorer.name,
                scored_samples=scorer.scored_samples,
                unscored_samples=run.total_samples - scorer.scored_samples,
                metrics=metrics,
                reducer=run.reducer,
                metadata=scorer.metadata,
            )
        )
    return scores


#: The name of the metric a mean corrected by human grades is logged as.
CORRECTED = "accuracy_corrected"


def compose_corrected(result: CorrectedMean, human: str | None) -> s.EvalMetric:
    """A scorer's mean corrected by human grades as a metric beside its own, marked as
    ours (`corrected_of`), with its interval and what it was made of in its metadata.

    Example:
        >>> compose_corrected(corrected_mean(judge, human), "grade").name
        'accuracy_corrected'
    """
    stat = result.corrected
    found = {
        s.CORRECTED_OF: "accuracy",
        "stderr": stat.stderr,
        "ci_low": stat.low,
        "ci_high": stat.high,
        "ci_level": result.level if stat.low is not None else None,
        "n": stat.n,
        "clusters": stat.clusters,
        "human_column": human,
        "human_grades": result.human.n,
        "human_mean": result.human.value,
        "judge_mean": result.judge.value,
        "judge_bias": result.judge_bias,
        "agreement": _finite(result.agreement.agreement),
        "kappa": _finite(result.agreement.kappa),
        "power": result.power,
    }
    metadata = {k: v for k, v in found.items() if v is not None}
    return s.EvalMetric(CORRECTED, stat.value, metadata=metadata)


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else value


def compose_metrics(
    values: dict[str, float], stats: dict[str, MetricStat], *, cluster: str | None = None
) -> dict[str, s.EvalMetric]:
    """A scorer's metrics as Inspect writes them: each metric, its statistics in its
    metadata (with `cluster`, the metadata column its scores were clustered by, when
    not by sample), and beside it Inspect's `stderr` metric (`<name>_stderr` for all
    but the first), marked as ours with `stderr_of`.

    Example:
        >>> list(compose_metrics({"accuracy": 0.7}, {"accuracy": stat}))
        ['accuracy', 'stderr']
    """
    metrics: dict[str, s.EvalMetric] = {}
    for position, (name, value) in enumerate(values.items()):
        stat = stats.get(name)
        metrics[name] = s.EvalMetric(name, value, metadata=_stat_metadata(stat, cluster))
        if stat is None or stat.stderr is None:
            continue
        key = "stderr" if position == 0 else f"{name}_stderr"
        if key not in values and key not in metrics:
            metrics[key] = s.EvalMetric(key, stat.stderr, metadata={s.STDERR_OF: name})
    return metrics


def _stat_metadata(stat: MetricStat | None, cluster: str | None) -> dict[str, Any] | None:
    if stat is None:
        return None
    found = {
        "stderr": stat.stderr,
        "ci_low": stat.low,
        "ci_high": stat.high,
        "ci_level": LEVEL if stat.low is not None else None,
        "n": stat.n,
        "clusters": stat.clusters,
        "cluster": cluster,
    }
    return {k: v for k, v in found.items() if v is not None} or None

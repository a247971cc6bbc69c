"""Evals side by side: every sample of a log directory, and tasks bound into one frame.

- `read_logs(dir)`: one row per (sample, epoch) of every log under `dir`
  (ours, vitals', Inspect's `.json` / `.eval`, and journals of runs that have
  no final log yet), with the log's task, model, run and status.
- `bind(task_a, task_b)` or `bind(old=..., new=...)`: the samples of several
  tasks (or logs read back) stacked, like vitals' `vitals_bind()`, ready for
  a comparison of scores.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ._errors import ConfigError, LogFormatError
from ._logging import log
from .frames import id_series
from .log import schema as s
from .log.decoding import NotALogError, decode_json
from .log.eval_reader import eval_summaries
from .log.formats import LOG_SUFFIXES
from .log.journal_format import JOURNAL_SUFFIX, read_journal
from .log.logged_eval import LoggedEval
from .log.logged_sample import first_score, normalize_model, sample_result, score_value
from .log.reader import read_log
from .metrics import score_series
from .storage.location import is_url
from .task.task import Task

if TYPE_CHECKING:
    import polars as pl

__all__ = ["bind", "read_logs"]

#: JSON files a log directory may hold that are not logs: viewer manifests.
_MANIFESTS = {"listing.json", "logs.json", "eval-set.json"}

_LOG_COLUMNS = ["log", "task", "model", "run_id", "status"]
_ROW_COLUMNS = ["id", "epoch", "score", "scorer", "input", "target", "result", "error"]


# -- a light read of .json logs: what a row needs, nothing of chats or events -------------


class _LiteSample(msgspec.Struct):
    id: int | str
    epoch: int
    input: str | list[s.ChatMessage]
    target: str | list[str]
    output: s.ModelOutput = msgspec.field(default_factory=s.ModelOutput)
    scores: dict[str, s.LogScore] | None = None


class _LiteLog(msgspec.Struct, kw_only=True):
    status: s.Status = "started"
    eval: s.EvalSpec
    samples: list[_LiteSample] | None = None


_lite_decoder = msgspec.json.Decoder(_LiteLog)


def _input_text(value: str | list[s.ChatMessage]) -> str:
    if isinstance(value, str):
        return value
    texts = []
    for message in value:
        if isinstance(message, s.ChatMessageUser):
            content = message.content
            texts.append(
                content
                if isinstance(content, str)
                else "".join(b.text for b in content if isinstance(b, s.ContentText))
            )
    return "\n\n".join(texts)


class _Rows:
    """Column lists, filled log by log."""

    def __init__(self) -> None:
        self.columns: dict[str, list[Any]] = {c: [] for c in _LOG_COLUMNS + _ROW_COLUMNS}

    def add(
        self,
        path: Path,
        header: tuple[str, str, str | None, str],
        sample: Any,
        result: str | None,
    ) -> None:
        cols = self.columns
        task, model, run_id, status = header
        name, score = first_score(sample.scores)
        for key, value in (
            ("log", path.name),
            ("task", task),
            ("model", model),
            ("run_id", run_id),
            ("status", status),
            ("id", sample.id),
            ("epoch", sample.epoch),
            ("score", score_value(score) if score is not None else None),
            ("scorer", name),
            ("input", _input_text(sample.input)),
            ("target", sample.target),
            ("result", result),
            ("error", None),
        ):
            cols[key].append(value)

    def skipped(self, path: Path, error: str) -> None:
        """A row for a log that could not be read: its name and why, nothing else."""
        for key, column in self.columns.items():
            column.append(path.name if key == "log" else error if key == "error" else None)

    def height(self) -> int:
        return len(self.columns["log"])

    def truncate(self, height: int) -> None:
        """Drop the rows added after `height` (those of a log that failed halfway)."""
        for column in self.columns.values():
            del column[height:]

    def frame(self) -> pl.DataFrame:
        import polars as pl

        cols = self.columns
        ids = cols["id"]
        targets = cols["target"]
        if all(isinstance(t, str | None) for t in targets):
            target = pl.Series("target", targets, dtype=pl.String)
        else:
            target = pl.Series(
                "target",
                [t if isinstance(t, list | None) else [t] for t in targets],
                dtype=pl.List(pl.String),
            )
        series = [
            pl.Series(c, cols[c], dtype=pl.String) for c in ("log", "task", "model", "run_id")
        ]
        return pl.DataFrame(
            [
                *series,
                pl.Series("status", cols["status"], dtype=pl.String),
                id_series(ids),
                pl.Series("epoch", cols["epoch"], dtype=pl.Int64),
                score_series(cols["score"]),
                pl.Series("scorer", cols["scorer"], dtype=pl.String),
                pl.Series("input", cols["input"], dtype=pl.String),
                target,
                pl.Series("result", cols["result"], dtype=pl.String),
                pl.Series("error", cols["error"], dtype=pl.String),
            ]
        )


def _lite_result(sample: _LiteSample, score: s.LogScore | None) -> str | None:
    output = sample.output
    if output.choices:
        content = output.choices[0].message.content
        text = (
            content
            if isinstance(content, str)
            else "".join(b.text for b in content if isinstance(b, s.ContentText))
        )
        return output.completion or text
    if output.completion:
        return output.completion
    return score.answer if score is not None else None


def _log_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if any(part.startswith(".") for part in relative.parts):
            continue  # temp files of atomic writes, Inspect's .buffer/
        if path.suffix.lower() not in LOG_SUFFIXES or path.name in _MANIFESTS:
            continue
        if not path.is_file():
            continue
        if path.suffix == JOURNAL_SUFFIX and any(
            path.with_suffix(ext).exists() for ext in (".json", ".eval")
        ):
            continue  # the run finished: its final log holds the same samples
        yield path


def _header_fields(header: s.EvalLog | _LiteLog) -> tuple[str, str, str | None, str]:
    return (header.eval.task, normalize_model(header.eval.model), header.eval.run_id, header.status)


def _add_log(rows: _Rows, path: Path, light: bool) -> None:
    suffix = path.suffix.lower()
    if light and suffix == ".json":
        log = decode_json(_lite_decoder, path.read_bytes(), path)
        fields = _header_fields(log)
        for lite in log.samples or []:
            rows.add(path, fields, lite, _lite_result(lite, first_score(lite.scores)[1]))
        return
    if light and suffix == ".eval":
        header, summaries = eval_summaries(path)
        if summaries is not None:
            fields = _header_fields(header)
            for summary in summaries:
                _, score = first_score(summary.scores)
                rows.add(path, fields, summary, score.answer if score is not None else None)
            return
    if suffix == JOURNAL_SUFFIX:
        contents = read_journal(path)
        header, samples = contents.header, contents.samples
    else:
        logged = read_log(path)
        header, samples = logged.header, logged.samples
    fields = _header_fields(header)
    for sample in samples:
        rows.add(path, fields, sample, sample_result(sample, first_score(sample.scores)[1]))


def read_logs(dir: str | Path, header_only_where_possible: bool = True) -> pl.DataFrame:
    """One row per (sample, epoch) of every eval log under `dir`, searched recursively.
    `dir` may be an object store's URL (`s3://bucket/prefix`): its logs are copied to
    this machine once (again only when they change) and read here.

    Reads our `.json` logs and journals, vitals' logs and Inspect's `.json` and
    `.eval` logs; skips viewer manifests (`listing.json`, `logs.json`) and JSON
    files that are not logs. Columns: `log` (file name), `task`, `model`,
    `run_id`, `status`, `id`, `epoch`, `score`, `scorer`, `input`, `target`,
    `result`, `error`.

    A log that cannot be read (corrupt, truncated, not permitted) does not
    stop the others: it is skipped with a warning on the `vitals_engine`
    logger and stands in the frame as one row with only `log` and `error`
    (why it was skipped) set; `error` is null on every sample's row, so
    `df.filter(pl.col("error").is_null())` keeps the samples alone.

    With `header_only_where_possible` (the default) `.eval` logs are read
    from their sample summaries and `.json` logs without their chats, which
    is much faster; `result` then comes from the score's answer for `.eval`
    logs.

    Example:
        >>> df = read_logs("logs")
        >>> df.group_by("task", "model").agg(pl.col("score").eq("C").mean())
    """
    root = Path(dir) if not is_url(dir) else _pulled(str(dir))
    if not root.exists():
        raise LogFormatError(f"{root}: the log directory does not exist.")
    if not root.is_dir():
        raise LogFormatError(f"{root} is a file, not a directory; read_log() reads one log.")
    rows = _Rows()
    for path in _log_files(root):
        height = rows.height()
        try:
            _add_log(rows, path, header_only_where_possible)
        except NotALogError:
            rows.truncate(height)
            continue  # some other JSON file
        except (LogFormatError, OSError) as exc:
            rows.truncate(height)
            error = (
                str(exc)
                if isinstance(exc, LogFormatError)
                else f"{path}: cannot read the log: {exc}."
            )
            log.warning("skipped a log that cannot be read", path=str(path), error=error)
            rows.skipped(path, error)
    return rows.frame()


# -- bind ---------------------------------------------------------------------------------------

_TASK = "\x00task"  # the task column's name until the end (a metadata column may be "task")
_KEYS = ("id", "epoch", "score")


def _plain_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """`get_samples()` without Python-object columns (chats, solver/scorer metadata)."""
    import polars as pl

    frame = frame.select([c for c, t in frame.schema.items() if t != pl.Object])
    missing = {"epoch": pl.Int64, "score": pl.Null}
    return frame.with_columns(
        pl.lit(None, dtype=dtype).alias(c) for c, dtype in missing.items() if c not in frame.columns
    )


def _unify(frames: list[pl.DataFrame], column: str) -> list[pl.DataFrame]:
    """Cast `column` to String in every frame if the frames disagree on its type."""
    import polars as pl

    dtypes = {f.schema[column] for f in frames if f.schema[column] != pl.Null}
    if len(dtypes) <= 1:
        return frames
    return [f.with_columns(pl.col(column).cast(pl.String)) for f in frames]


def _labels(tasks: tuple[Task | LoggedEval, ...], named: dict[str, Any]) -> list[str]:
    """The labels of positional tasks: their names, numbered `_1`, `_2`... where they clash
    (with each other or with a keyword), skipping labels already taken."""
    names = [t.name if isinstance(t, Task) else t.task for t in tasks]
    clashing = {n for n in names if names.count(n) > 1 or n in named}
    taken = set(named) | {n for n in names if n not in clashing}
    labels = []
    numbers: dict[str, int] = {}
    for name in names:
        label = name
        while name in clashing and label in taken | {name}:
            numbers[name] = numbers.get(name, 0) + 1
            label = f"{name}_{numbers[name]}"
        taken.add(label)
        labels.append(label)
    return labels


def bind(*tasks: Task | LoggedEval, **named_tasks: Task | LoggedEval) -> pl.DataFrame:
    """The samples of several tasks in one frame: `task, id, epoch, score, metadata`.

    Positional tasks are labelled with their names (a log's task name), suffixed
    `_1`, `_2`, ... where names clash (with each other or a keyword); keyword
    ones by their keyword. `metadata` is a struct of every other (non-object) column of
    each task's `get_samples()`: input, target, result, scorer, explanation,
    dataset columns; chats are left out. Scores of different types across
    tasks (grades and numbers) become strings. Logs read back with
    `read_log()` bind like tasks.

    Example:
        >>> both = bind(old=task_old, new=task_new)
        >>> both.pivot(on="task", index=["id", "epoch"], values="score")
        >>> bind(addition, addition_hard)["task"].unique().to_list()
        ['addition', 'addition-hard']
    """
    import polars as pl

    checked = [(f"task_{i}", t) for i, t in enumerate(tasks, 1)] + list(named_tasks.items())
    if not checked:
        raise ConfigError("bind() needs tasks: bind(task_a, task_b) or bind(old=a, new=b).")
    for name, task in checked:
        if not isinstance(task, Task | LoggedEval):
            raise ConfigError(
                f"`{name}` must be a Task (or a log read with read_log()), "
                f"not {type(task).__name__}."
            )
    items = list(zip(_labels(tasks, named_tasks), tasks, strict=True))
    items += list(named_tasks.items())
    frames = [_plain_columns(task.get_samples()) for _, task in items]
    for column in _KEYS:
        frames = _unify(frames, column)
    frames = [
        f.with_columns(pl.lit(name).alias(_TASK))
        for (name, _), f in zip(items, frames, strict=True)
    ]
    try:
        combined = pl.concat(frames, how="diagonal_relaxed")
    except (
        pl.exceptions.SchemaError,
        pl.exceptions.ComputeError,
        pl.exceptions.InvalidOperationError,
    ):
        # metadata columns whose types no supertype reconciles: compare them as text
        frames = [
            f.with_columns(pl.exclude(_TASK, *_KEYS).cast(pl.String, strict=False)) for f in frames
        ]
        combined = pl.concat(frames, how="diagonal_relaxed")
    others = [c for c in combined.columns if c != _TASK and c not in _KEYS]
    metadata = pl.struct(others) if others else pl.lit(None, dtype=pl.Struct({}))
    return combined.select(
        pl.col(_TASK).alias("task"), "id", "epoch", "score", metadata.alias("metadata")
    )


def _pulled(url: str) -> Path:
    from .log.stored import pulled

    return pulled(url)

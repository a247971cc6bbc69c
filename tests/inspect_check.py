"""Read our logs back with Inspect's own reader and compare them, field by field, with
the bytes we wrote.

`check_log(path)` reads a log with `inspect_ai.log.read_eval_log` (full and
header-only; for `.eval` also its sample summaries) and walks the raw JSON we
wrote beside Inspect's parsed `EvalLog`: every key we wrote must be a field of
Inspect's model (a key Inspect does not know is silently dropped by its reader,
so a misspelt key would be lost) and must read back equal. Fields Inspect adds
with defaults are not our concern. `assert_inspect_reads(path, task)` does the
same and also compares the log with what the task holds in memory.

`tests/conftest.py` runs `check_log` on every log a test leaves behind.

Without inspect_ai (a dev dependency: `make demo` installs the runtime ones alone) this
module still imports, `INSPECT` is False, the conftest check is off (the run's header
says so) and a test that asks for Inspect's reader is skipped.

Where the two legitimately differ (the only exceptions, all in `_Check`):

- Samples: Inspect's `.json` reader keeps file order and its `.eval` reader
  sorts by (epoch, id); they are matched by (id, epoch), not by position.
- Times: Inspect normalises ISO timestamps to UTC (and parses event times to
  datetimes); we write local time with an offset. Compared as instants; a time
  without an offset is a mismatch.
- `events_data` and a model event's `input_refs`: Inspect resolves each ref
  range against `events_data.messages` into the event's `input` and drops both.
  Checked by comparing the resolved `input` with the pool slices we wrote.
- NaN equals NaN (a metric over no scores).
- `.eval` summaries: Inspect thins them on read (long strings cut, whitespace
  collapsed), so each is compared with Inspect's own summary of the sample
  (`EvalSample.summary()`) rather than with our bytes.
- Fields Inspect adds with defaults (uuid, span_id, ...) are not compared: only
  what we wrote is.
- Our no-grade marker ("N" with reason "grader_failed") is an ordinary score to
  Inspect; the raw JSON holds the same "N", so it compares equal here (our own
  reader maps it to None: `assert_inspect_reads` expects "N" for a None score).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import json
import math
import re
import zipfile
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

try:
    from inspect_ai.log import read_eval_log as _read_eval_log
    from inspect_ai.log import read_eval_log_sample_summaries as _read_summaries
    from pydantic import BaseModel
except ImportError:
    INSPECT = False
else:
    INSPECT = True

__all__ = [
    "INSPECT",
    "LOG_FILE",
    "Mismatch",
    "assert_inspect_reads",
    "check_log",
    "is_log_file",
    "is_ours",
    "read_eval_log",
    "read_raw",
]

#: `<YYYY-MM-DDTHH-MM-SS±HH-MM>_<task>_<id>.json`: the names our writer (and Inspect) give logs.
LOG_FILE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}[+-]\d{2}-\d{2}_.+_[A-Za-z0-9]+\.json$")
_ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}")
_HEADER_KEYS = ("version", "status", "eval", "plan", "results", "stats", "error")

#: Logs already checked, by (path, mtime_ns, size): the conftest check skips them.
checked: set[tuple[str, int, int]] = set()


def is_log_file(path: Path) -> bool:
    """A final log: a `.eval`, or a `.json` named like one (not listing.json, not a temp file)."""
    if path.name.startswith("."):
        return False
    return path.suffix == ".eval" or (path.suffix == ".json" and bool(LOG_FILE.match(path.name)))


def _in_thread(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run `fn` in a thread of its own: Inspect's reader refuses to run inside trio."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args, **kwargs).result()


def _need_inspect() -> None:
    """Skip the running test where inspect_ai is not installed."""
    if not INSPECT:
        pytest.skip("inspect_ai is not installed (a dev dependency: `make setup`)")


def read_eval_log(path: str, header_only: bool = False) -> Any:
    """Inspect's reader, run in a thread of its own."""
    _need_inspect()
    return _in_thread(_read_eval_log, path, header_only=header_only)


# -- the raw JSON we wrote ------------------------------------------------------------------


def read_raw(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]] | None, list | None]:
    """(header, samples, summaries) as written: plain JSON, no schema applied.

    `.json`: the one object (samples None if it has none). `.eval`: header.json,
    (or, in a run's partial zip, `_journal/start.json`), every `samples/*.json`
    (the last member of a name wins, as in Inspect) and summaries.json (None for a
    `.json` or a partial `.eval`).
    """
    if path.suffix == ".json":
        data = json.loads(path.read_bytes())
        samples = data.pop("samples", None)
        return data, samples, None
    with zipfile.ZipFile(path) as zf:
        members = {info.filename: info for info in zf.infolist()}
        start = members.get("header.json") or members["_journal/start.json"]
        header = json.loads(zf.read(start))
        samples = [
            json.loads(zf.read(info))
            for name, info in members.items()
            if name.startswith("samples/") and name.endswith(".json")
        ]
        listed = members.get("summaries.json")
        summaries = json.loads(zf.read(listed)) if listed is not None else None
    return header, samples, summaries


def is_ours(header: dict[str, Any]) -> bool:
    """Whether vitals-engine wrote the log (other tools' logs are test inputs, not output)."""
    return "vitals_engine" in ((header.get("eval") or {}).get("packages") or {})


# -- the comparison -------------------------------------------------------------------------


class Mismatch(AssertionError):
    """What Inspect reads differs from what we wrote (or Inspect cannot read it)."""


class _Branch(Exception):
    """Stops comparing one field; the mismatch is already recorded."""


class _Check:
    """One log's comparison: every mismatch is recorded (not only the first)."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def fail(self, where: str, why: str) -> None:
        self.errors.append(f"{where}: {why}")
        raise _Branch

    def each(self, raw: Any, parsed: Any, where: str) -> None:
        """`compare`, recording a mismatch and going on with the next field."""
        with contextlib.suppress(_Branch):
            self.compare(raw, parsed, where)

    def scalar(self, raw: Any, parsed: Any, where: str) -> None:
        if isinstance(parsed, enum.Enum):
            parsed = parsed.value
        if isinstance(raw, float) and isinstance(parsed, float) and math.isnan(raw):
            if not math.isnan(parsed):
                self.fail(where, f"we wrote NaN, Inspect read {parsed!r}")
            return
        if raw == parsed and isinstance(raw, bool) == isinstance(parsed, bool):
            return
        ours, theirs = _instant(raw), _instant(parsed)
        if ours is not None and theirs is not None:
            if ours.tzinfo is None or theirs.tzinfo is None:
                self.fail(where, f"a time without an offset: wrote {raw!r}, read {parsed!r}")
            if ours == theirs:
                return
        self.fail(where, f"we wrote {raw!r}, Inspect read {parsed!r}")

    def compare(self, raw: Any, parsed: Any, where: str) -> None:
        """Every value in `raw` (our JSON) is in `parsed` (Inspect's object) and equal."""
        if isinstance(parsed, BaseModel) or dataclasses.is_dataclass(parsed):
            if not isinstance(raw, dict):
                self.fail(where, f"we wrote {raw!r}, Inspect read a {type(parsed).__name__}")
            self.model(raw, parsed, where)
        elif isinstance(raw, dict):
            if not isinstance(parsed, dict):
                self.fail(where, f"we wrote an object, Inspect read {parsed!r}")
            if set(raw) != set(parsed):
                self.fail(where, f"keys: we wrote {sorted(raw)}, Inspect read {sorted(parsed)}")
            for key, value in raw.items():
                self.each(value, parsed[key], f"{where}.{key}")
        elif isinstance(raw, list):
            if not isinstance(parsed, list | tuple):
                self.fail(where, f"we wrote a list, Inspect read {parsed!r}")
            if len(raw) != len(parsed):
                self.fail(where, f"we wrote {len(raw)} items, Inspect read {len(parsed)}")
            for i, (mine, theirs) in enumerate(zip(raw, parsed, strict=True)):
                self.each(mine, theirs, f"{where}[{i}]")
        else:
            self.scalar(raw, parsed, where)

    def model(self, raw: dict[str, Any], parsed: Any, where: str) -> None:
        """A pydantic model (or dataclass, e.g. ToolCall) against the object we wrote."""
        if isinstance(parsed, BaseModel):
            fields = set(type(parsed).model_fields)
        else:
            fields = {f.name for f in dataclasses.fields(parsed)}
        resolved = getattr(parsed, "event", None) == "model" and "input_refs" in raw
        for key, value in raw.items():
            at = f"{where}.{key}"
            if resolved and key in ("input", "input_refs"):
                continue  # compared by sample() against the pool
            if key not in fields:
                self.errors.append(
                    f"{at}: Inspect's {type(parsed).__name__} has no field {key!r}: it drops it"
                )
                continue
            self.each(value, getattr(parsed, key), at)

    def sample(self, raw: dict[str, Any], parsed: Any, where: str) -> None:
        pool = (raw.get("events_data") or {}).get("messages") or []
        self.model({k: v for k, v in raw.items() if k != "events_data"}, parsed, where)
        if parsed.events_data is not None:
            self.errors.append(f"{where}.events_data: Inspect left the pool unresolved")
        events = raw.get("events", [])
        if len(events) != len(parsed.events):
            return  # recorded by model()
        for i, (event, read) in enumerate(zip(events, parsed.events, strict=True)):
            if event.get("event") != "model" or "input_refs" not in event:
                continue
            at = f"{where}.events[{i}]"
            if event.get("input"):
                self.errors.append(f"{at}.input: both input and input_refs written")
            expected = [m for start, end in event["input_refs"] for m in pool[start:end]]
            if not expected and event["input_refs"]:
                self.errors.append(f"{at}.input_refs: {event['input_refs']} are outside the pool")
            if read.input_refs is not None:
                self.errors.append(f"{at}.input_refs: Inspect did not resolve them")
            self.each(expected, read.input, f"{at}.input (resolved from input_refs)")

    def header(self, raw: dict[str, Any], log: Any, where: str) -> None:
        """The header we wrote against an EvalLog Inspect read (full or header-only)."""
        for key in _HEADER_KEYS:
            if key in raw:
                self.each(raw[key], getattr(log, key), f"{where}.{key}")
        unknown = set(raw) - {*_HEADER_KEYS, "samples", "reductions"}
        if unknown:
            self.errors.append(f"{where}: top-level keys Inspect does not read: {sorted(unknown)}")

    def samples(self, raw: list[dict[str, Any]], parsed: list[Any], where: str) -> None:
        ours, theirs = self.keyed(raw, f"{where} (ours)"), self.keyed(parsed, f"{where} (read)")
        if set(ours) != set(theirs):
            self.fail(where, f"(id, epoch): we wrote {sorted(ours)}, Inspect read {sorted(theirs)}")
        for key, sample in ours.items():
            self.sample(sample, theirs[key], f"{where}[id={key[0]}, epoch={key[1]}]")

    def summaries(self, raw: list[Any], read: list[Any], samples: list[Any], where: str) -> None:
        """A `.eval`'s summaries.json against the summaries Inspect reads from it and the
        ones Inspect makes from the samples (`EvalSample.summary()`). Inspect thins
        summaries on read (long strings cut, whitespace collapsed); its own summary of the
        sample is thinned alike."""
        ours, theirs = self.keyed(raw, where), self.keyed(read, where)
        full = self.keyed(samples, where)
        if not set(ours) == set(theirs) == set(full):
            self.fail(where, f"{sorted(ours)} written, {sorted(theirs)} read, {sorted(full)} kept")
        for key, summary in ours.items():
            at = f"{where}[id={key[0]}, epoch={key[1]}]"
            expected = full[key].summary()
            for field in type(expected).model_fields:
                mine, made = getattr(theirs[key], field), getattr(expected, field)
                if field not in summary and made in (None, [], {}):
                    continue
                if field not in summary:
                    self.errors.append(f"{at}.{field}: not written; Inspect's own: {made!r}")
                elif mine != made:
                    self.errors.append(f"{at}.{field}: reads {mine!r}; Inspect's own: {made!r}")

    def keyed(self, samples: list[Any], where: str) -> dict[tuple[str, int], Any]:
        keyed = {_key(x): x for x in samples}
        if len(keyed) != len(samples):
            self.fail(where, "a (sample, epoch) appears twice")
        return keyed


def _instant(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and _ISO_TIME.match(value):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


def _key(sample: Any) -> tuple[str, int]:
    if isinstance(sample, dict):
        return (repr(sample["id"]), sample["epoch"])
    return (repr(sample.id), sample.epoch)


def _read(what: str, name: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return _in_thread(fn, *args, **kwargs)
    except Exception as exc:
        raise Mismatch(f"{name}: Inspect cannot read the {what}: {exc}") from exc


def check_log(path: Path | str) -> Any:
    """Inspect reads `path` (full, header-only, and a `.eval`'s summaries) and what it
    reads equals what we wrote. Returns the full EvalLog; raises `Mismatch` naming the
    file and every differing field (or Inspect's own error)."""
    _need_inspect()
    path = Path(path)
    stat = path.stat()
    name = path.name
    header, samples, summaries = read_raw(path)
    full = _read("log", name, _read_eval_log, str(path))
    only = _read("header", name, _read_eval_log, str(path), header_only=True)
    check = _Check()
    with contextlib.suppress(_Branch):
        check.header(header, full, name)
        check.header(header, only, f"{name} (header-only)")
        if only.samples is not None:
            check.fail(f"{name} (header-only)", "samples were read")
        check.samples(samples or [], full.samples or [], f"{name}.samples")
        if summaries is not None:
            read = _read("sample summaries", name, _read_summaries, str(path))
            check.summaries(summaries, read, full.samples or [], f"{name}.summaries")

    if check.errors:
        shown = "\n  ".join(check.errors[:25])
        more = f"\n  ... and {len(check.errors) - 25} more" if len(check.errors) > 25 else ""
        raise Mismatch(f"Inspect reads {name} differently from what we wrote:\n  {shown}{more}")
    checked.add((str(path.resolve()), stat.st_mtime_ns, stat.st_size))
    return full


# -- against the task -----------------------------------------------------------------------


def assert_inspect_reads(path: Path | str, task: Any | None = None) -> Any:
    """`check_log(path)`, then the samples, scores and metrics Inspect reads match `task`
    (a Task after its run; each scorer's, when it has several). Returns Inspect's full
    EvalLog."""
    full = check_log(path)
    if task is not None:
        frame = task.get_samples()
        assert len(full.samples) == frame.height
        ours = {(r["id"], r["epoch"]): r for r in frame.iter_rows(named=True)}
        for sample in full.samples:
            row = ours[(sample.id, sample.epoch)]
            assert sample.input == row["input"] or not isinstance(row["input"], str)
            if "score" in frame.columns and sample.scores:
                _check_scores(sample.scores, row)
            if row.get("result") is not None and sample.output.choices:
                assert sample.output.completion == row["result"]
        if task.metrics:
            by_scorer = task.metrics_by_scorer
            assert [s.name for s in full.results.scores] == list(by_scorer)
            for scores in full.results.scores:
                stats = (task._state.scorer_stats or {}).get(scores.name) or task.metric_stats
                _check_metrics(scores, by_scorer[scores.name], stats)
    return full


def _check_scores(scores: dict[str, Any], row: dict[str, Any]) -> None:
    """A sample's scores as Inspect reads them: the one scorer's, or each of several's."""
    several = len(scores) > 1
    for position, (name, score) in enumerate(scores.items()):
        value = row[f"score_{name}"] if several else row["score"]
        assert str(score.value) == ("N" if value is None else str(value))
        if position == 0:
            assert score.explanation == row["explanation"]


def _check_metrics(scores: Any, expected: dict[str, Any], stats: dict[str, Any]) -> None:
    stderrs = {k: m for k, m in scores.metrics.items() if "stderr_of" in (m.metadata or {})}
    metrics = {k: m.value for k, m in scores.metrics.items() if k not in stderrs}
    assert metrics == expected
    for entry in stderrs.values():  # Inspect's `stderr` beside each metric
        assert entry.value == stats[entry.metadata["stderr_of"]].stderr

"""`vitals eval --junit FILE`: the runs as JUnit XML, the test report CI systems show.

One `<testsuites>`; one `<testsuite>` per run (a task, or a task on a model), holding:

- a `run` test case, with an `<error>` when the run did not succeed (its status and
  error);
- a test case per threshold (`--fail-under`), with a `<failure>` when the metric is
  below it (its message the line `vitals eval` prints);
- a test case per sample that failed with an error (its solver or scorer raised, timed
  out ...), with an `<error>` holding the message and traceback. Samples scored
  incorrect are not test cases: how many may be is what a threshold says.

Each suite and the whole carry `tests`, `failures`, `errors`, `skipped` and `time`
(seconds), as GitHub Actions' test reporters, GitLab and Jenkins read them.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from .._words import plural
from ..log import schema as s
from ..log.logged_eval import LoggedEval
from ..thresholds import ThresholdCheck

__all__ = ["JUnitRun", "junit_tree", "write_junit"]


@dataclass
class JUnitRun:
    """One run as the report shows it: its label, its log (None: it wrote none), its
    threshold checks and, when it failed without a log to say why, the reason."""

    label: str
    #: read whole: the failed samples come from it (`read_log(path)`)
    log: LoggedEval | None
    checks: Sequence[ThresholdCheck] = field(default_factory=list)
    error: str | None = None


def write_junit(path: str | Path, runs: Sequence[JUnitRun]) -> None:
    """Write the report of `runs` to `path` (UTF-8, with an XML declaration).

    Example:
        >>> write_junit("report.xml", [JUnitRun("sums", read_log(path), checks)])
    """
    tree = ET.ElementTree(junit_tree(runs))
    ET.indent(tree)
    target = Path(path)
    if target.parent != Path():
        target.parent.mkdir(parents=True, exist_ok=True)
    tree.write(target, encoding="utf-8", xml_declaration=True)


def junit_tree(runs: Sequence[JUnitRun]) -> ET.Element:
    """The `<testsuites>` element of `runs`.

    Example:
        >>> junit_tree([JUnitRun("sums", logged, checks)]).get("tests")
        '3'
    """
    root = ET.Element("testsuites", name="vitals eval")
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    seconds = 0.0
    for run in runs:
        suite = _suite(run)
        root.append(suite)
        for key in totals:
            totals[key] += int(suite.get(key, "0"))
        seconds += float(suite.get("time", "0"))
    for key, count in totals.items():
        root.set(key, str(count))
    root.set("time", _seconds(seconds))
    for element in root.iter():  # an error's text may hold what XML cannot (ANSI colours)
        element.text = _xml_text(element.text) if element.text else element.text
        for key, value in element.attrib.items():
            element.set(key, _xml_text(value))
    return root


def _suite(run: JUnitRun) -> ET.Element:
    header = run.log.header if run.log is not None else None
    suite = ET.Element("testsuite", name=run.label)
    cases = [_run_case(run, header)]
    cases += [_threshold_case(run.label, check) for check in run.checks]
    if run.log is not None:
        cases += [_sample_case(run.label, sample) for sample in _failed(run.log)]
    if header is not None:
        started = header.stats.started_at
        if started:
            suite.set("timestamp", started)
        properties = ET.SubElement(suite, "properties")
        for name, value in (
            ("task", header.eval.task),
            ("model", header.eval.model),
            ("status", header.status),
            ("log", str(run.log.path) if run.log is not None else ""),
        ):
            ET.SubElement(properties, "property", name=name, value=value)
    suite.extend(cases)
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
    suite.set("errors", str(sum(1 for c in cases if c.find("error") is not None)))
    suite.set("skipped", "0")
    suite.set("time", _seconds(_duration(header)))
    return suite


def _run_case(run: JUnitRun, header: s.EvalLog | None) -> ET.Element:
    case = ET.Element("testcase", name="run", classname=run.label, time=_seconds(_duration(header)))
    if header is None:
        message = run.error or "the run wrote no log"
        ET.SubElement(case, "error", message=message, type="RunFailed").text = message
    elif header.status != "success":
        error = header.error if isinstance(header.error, s.EvalError) else None
        message = f"the run ended with status {header.status}"
        if error is not None:
            message += f": {error.message}"
        elif run.log is not None and run.log.samples:  # too many samples failed
            failed = len(_failed(run.log))
            message += f": {failed} of {plural(len(run.log.samples), 'sample')} failed"
        node = ET.SubElement(case, "error", message=message, type=f"Run{header.status.title()}")
        node.text = error.traceback if error is not None and error.traceback else message
    return case


def _threshold_case(label: str, check: ThresholdCheck) -> ET.Element:
    case = ET.Element(
        "testcase",
        name=f"{check.name} >= {check.threshold:g}",
        classname=f"{label}.thresholds",
        time="0",
    )
    if not check.passed:
        message = check.line(label)
        ET.SubElement(case, "failure", message=message, type="BelowThreshold").text = message
    return case


def _sample_case(label: str, sample: s.EvalSample) -> ET.Element:
    case = ET.Element(
        "testcase",
        name=f"sample {sample.id} (epoch {sample.epoch})",
        classname=f"{label}.samples",
        time=_seconds(sample.total_time or 0.0),
    )
    error = sample.error
    assert error is not None
    kind = error.message.partition(" while ")[0]  # "RuntimeError while solving: ..."
    kind = kind if kind.isidentifier() else "SampleError"
    node = ET.SubElement(case, "error", message=error.message, type=kind)
    node.text = error.traceback or error.message
    return case


def _failed(log: LoggedEval) -> list[s.EvalSample]:
    """The samples that failed with an error (none in a log read header-only)."""
    return [sample for sample in log.samples if sample.error is not None]


def _duration(header: s.EvalLog | None) -> float:
    """The run's time in seconds, from its log's start and end (0 when it does not say)."""
    if header is None or not header.stats.started_at or not header.stats.completed_at:
        return 0.0
    try:
        started = datetime.fromisoformat(header.stats.started_at)
        ended = datetime.fromisoformat(header.stats.completed_at)
    except ValueError:
        return 0.0
    return max((ended - started).total_seconds(), 0.0)


#: What XML 1.0 cannot hold, even escaped: control characters but tab and newlines, lone
#: surrogates, U+FFFE and U+FFFF.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(text: str) -> str:
    """`text` with what XML cannot hold replaced by U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)


def _seconds(value: float) -> str:
    return f"{value:.3f}"

"""A batch's results as the mock serves them when a test spoiled them
(`MockServer.spoil_batch_results`): lines with flaws a real results file has been seen
with, and finished requests left out while the batch's counts still count them.

The results are a list of lines, each naming its request by an id (`custom_id` in
OpenAI's and Anthropic's JSON Lines, `metadata.key` in Gemini's inlined responses). A
flaw that names a line takes the next line not yet taken, from the first:

- "no-id", "null-id", "numeric-id": that line without its id, with a null one, with a
  number (12345);
- "duplicate": another line with that line's id (and the body of the line after it: a
  reader that keeps the later of two lines gives the request another request's answer);
- "junk": a line that is not a result (not JSON in a file, a string among Gemini's
  responses), added;
- "truncated": the last line cut short, as a download that broke off leaves it (half its
  bytes and no newline in a file; in Gemini's list, its `metadata` alone).

`lost` leaves out the first that many lines of requests that succeeded.

Example:
    >>> plan = ResultsPlan(("junk", "null-id"), lost=1)
    >>> encode_jsonl(spoiled(lines, plan, ("custom_id",), succeeded))
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from .store import ResultsPlan

__all__ = ["Cut", "Junk", "encode_jsonl", "inlined", "spoiled"]

#: Where a line names its request: keys, outermost first.
IdPath = Sequence[str]
#: An id taken out of its line (`_set_id`).
_DROP = object()


@dataclass(frozen=True, slots=True)
class Junk:
    """A line that is no result at all."""


@dataclass(frozen=True, slots=True)
class Cut:
    """`line`, cut short."""

    line: dict[str, Any]


def spoiled(
    lines: list[dict[str, Any]],
    plan: ResultsPlan,
    id_path: IdPath,
    succeeded: Callable[[dict[str, Any]], bool],
) -> list[dict[str, Any] | Junk | Cut]:
    """`lines` as `plan` spoils them (see the module's docstring)."""
    kept = copy.deepcopy(lines)
    for _ in range(plan.lost):
        gone = next((index for index, line in enumerate(kept) if succeeded(line)), None)
        if gone is not None:
            del kept[gone]
    out: list[dict[str, Any] | Junk | Cut] = list(kept)
    taken = 0
    for flaw in plan.flaws:
        if flaw == "junk":
            out.append(Junk())
        elif flaw in ("no-id", "null-id", "numeric-id", "duplicate") and taken < len(kept):
            line = kept[taken]
            taken += 1
            if flaw == "duplicate":
                other = copy.deepcopy(kept[taken] if taken < len(kept) else kept[0])
                _set_id(other, id_path, _get_id(line, id_path))
                out.append(other)
            else:
                _set_id(line, id_path, {"null-id": None, "numeric-id": 12345}.get(flaw, _DROP))
    if "truncated" in plan.flaws and kept:
        last = kept[-1]
        out = [line for line in out if line is not last] + [Cut(last)]
    return out


def encode_jsonl(lines: Sequence[dict[str, Any] | Junk | Cut]) -> bytes:
    """`lines` as a JSON Lines file: junk as a line that is not JSON, a cut line as its
    first half without a newline."""
    parts: list[bytes] = []
    for line in lines:
        if isinstance(line, Junk):
            parts.append(b"<html><body>502 Bad Gateway</body></html>\n")
        elif isinstance(line, Cut):
            whole = msgspec.json.encode(line.line)
            parts.append(whole[: len(whole) // 2])
        else:
            parts.append(msgspec.json.encode(line) + b"\n")
    return b"".join(parts)


def inlined(lines: Sequence[dict[str, Any] | Junk | Cut]) -> list[Any]:
    """`lines` as Gemini's inlined responses: junk as a string, a cut line as its
    `metadata` alone."""
    out: list[Any] = []
    for line in lines:
        if isinstance(line, Junk):
            out.append("<html><body>502 Bad Gateway</body></html>")
        elif isinstance(line, Cut):
            out.append({"metadata": line.line["metadata"]} if "metadata" in line.line else {})
        else:
            out.append(line)
    return out


def _get_id(line: dict[str, Any], path: IdPath) -> Any:
    found: Any = line
    for key in path:
        found = found.get(key) if isinstance(found, dict) else None
    return found


def _set_id(line: dict[str, Any], path: IdPath, value: Any) -> None:
    """Set the id at `path` in `line` to `value` (`_DROP`: take it out)."""
    *outer, last = path
    holder: Any = line
    for key in outer:
        holder = holder.setdefault(key, {})
    if value is _DROP:
        holder.pop(last, None)
    else:
        holder[last] = value

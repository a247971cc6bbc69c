"""The viewer's data API: the same documents whether served live or written into a bundle.

```
api/logs.json                                   every log: task, model, status, metrics, cost ...
api/logs/<file>/summaries.json                  one light row per sample of <file>
api/logs/<file>/samples/<key>/<epoch>.json      one whole sample, as the log holds it
api/logs/<file>/live.json                       (live only) the text in-flight samples stream
api/logs/<file>/batches.json                    the provider batches of the run of <file>
api/events                                      (live only) server-sent events: what changed
```

`<file>` is the log's path relative to the log directory (its `/`s kept,
each segment percent-encoded in URLs); `<key>` is `paths.sample_key(id)`.
The live server also answers `summaries.json?since=<version>` with only the
rows changed after that version.

A row of `summaries.json` whose sample had every call of a role answered from a
cache (its model events' `"cache": "read"`) has `cached`: `{role: {"requests",
"input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens",
"cost"}}`; the page splits the header's cost row of that role into its live and
cached parts with it, as `read_log(...).get_cost()` does. Other rows have none.

`live.json` (`Catalog.live()`) is the sidecar a running eval keeps beside its
journal (`log/live.py`), each sample with its `key`: `{"file", "running",
"updated", "samples": [{"key", "id", "epoch", "role", "input", "text", "chars",
"updated", "events"?}]}` (`events`: an agent's transcript so far, its last events as the
log has them). An event names the logs whose live text changed under `live`,
apart from those whose rows or header changed (`files`). A bundle has neither.

`batches.json` (`Catalog.batches()`) lists the provider batches the run sent
(batch mode), a running journal's as it records them, a final log's from its
header: `{"file", "running", "pending", "ended", "batches": [{"key", "id",
"provider", "model", "requests", "created", "submitted", "ended", "status",
"counts", "pending"}]}` (times in Unix seconds; never the batches' requests).
A batch recorded in a journal changes its file, so its event names it under
`files`; a log's entry in `logs.json` counts its `batches` and `pending_batches`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from ..log import schema as s
from .catalog import Catalog
from .paths import parse_sample_key, sample_key

__all__ = [
    "LogRoute",
    "batches_path",
    "encode",
    "logs_document",
    "parse_log_route",
    "sample_path",
    "summaries_path",
]

_EPOCH_FILE = re.compile(r"([0-9]{1,9})\.json")
_encoder = msgspec.json.Encoder(enc_hook=s.enc_hook)


def encode(document: Any) -> bytes:
    """A document as compact JSON (NaN and infinities as null).

    Example:
        >>> encode({"live": False, "logs": []})
        b'{"live":false,"logs":[]}'
    """
    return _encoder.encode(document)


def logs_document(catalog: Catalog, *, live: bool) -> dict[str, Any]:
    """The document `api/logs.json`: one entry per log, and the logs that could not be read.

    Example:
        >>> logs_document(Catalog(Path("logs")), live=False)["logs"][0]["task"]
        'simple-addition'
    """
    entries = catalog.entries()
    return {
        "live": live,
        "version": catalog.version,
        "logs": entries,
        "errors": catalog.errors(),
    }


@dataclass(frozen=True)
class LogRoute:
    """A request under `api/logs/`: a log's summaries, its live text, its batches, or one of
    its samples."""

    file: str
    kind: Literal["summaries", "sample", "live", "batches"]
    id: int | str | None = None
    epoch: int | None = None


def parse_log_route(segments: list[str]) -> LogRoute | None:
    """The route of the decoded path segments after `api/logs/` (None if it is no route).

    Example:
        >>> parse_log_route(["a.json", "samples", "3", "1.json"])
        LogRoute(file='a.json', kind='sample', id=3, epoch=1)
    """
    if len(segments) >= 2 and segments[-1] == "summaries.json":
        return LogRoute("/".join(segments[:-1]), "summaries")
    if len(segments) >= 2 and segments[-1] == "live.json":
        return LogRoute("/".join(segments[:-1]), "live")
    if len(segments) >= 2 and segments[-1] == "batches.json":
        return LogRoute("/".join(segments[:-1]), "batches")
    if len(segments) >= 4 and segments[-3] == "samples":
        match = _EPOCH_FILE.fullmatch(segments[-1])
        id = parse_sample_key(segments[-2])
        if match and id is not None:
            return LogRoute("/".join(segments[:-3]), "sample", id, int(match[1]))
    return None


def summaries_path(file: str) -> str:
    """Where a log's summaries lie, relative to the site's root (unencoded).

    Example:
        >>> summaries_path("runs/a.json")
        'api/logs/runs/a.json/summaries.json'
    """
    return f"api/logs/{file}/summaries.json"


def batches_path(file: str) -> str:
    """Where a log's batches lie, relative to the site's root (unencoded).

    Example:
        >>> batches_path("runs/a.json")
        'api/logs/runs/a.json/batches.json'
    """
    return f"api/logs/{file}/batches.json"


def sample_path(file: str, id: int | str, epoch: int) -> str:
    """Where one sample lies, relative to the site's root (unencoded).

    Example:
        >>> sample_path("a.json", "../x", 2)
        'api/logs/a.json/samples/~Li4veA/2.json'
    """
    return f"api/logs/{file}/samples/{sample_key(id)}/{epoch}.json"

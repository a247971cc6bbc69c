"""Where the log of a run that stopped keeps the model replies its unfinished samples had
received: under `replies` in the eval's metadata, beside its provider batches
(`logged_batches.py`). A run stopped by Ctrl-C or a cancellation writes its log and
removes its journal; a resume of that log answers those calls from them instead of
buying them again. The composer writes them there (`with_replies`) only for a run that
did not succeed; the readers take them back (`logged_replies`).

Example:
    >>> header.eval.metadata = with_replies(header.eval.metadata, replies)
    >>> [(reply.sample, reply.role) for reply in logged_replies(header)]
    [(7, 'solver')]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ..vocab.model_calls import JournaledReply
from . import schema as s

__all__ = ["logged_replies", "with_replies"]


def with_replies(
    metadata: dict[str, Any] | None, replies: Sequence[JournaledReply]
) -> dict[str, Any] | None:
    """The eval's metadata with the replies of unfinished samples under `replies`, or as it
    was when there are none."""
    if not replies:
        return metadata
    return {**(metadata or {}), "replies": list(replies)}


def logged_replies(header: s.EvalLog) -> list[JournaledReply]:
    """The replies a log's header keeps (`with_replies`); [] for none, or for a value that
    is not a list of journaled replies."""
    found = (header.eval.metadata or {}).get("replies")
    if not found:
        return []
    try:
        return msgspec.convert(found, list[JournaledReply])
    except msgspec.ValidationError:
        return []

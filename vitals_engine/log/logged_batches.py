"""Where a log keeps the provider batches of its run: under `batches` in the eval's
metadata, which Inspect's reader keeps and its viewer shows. The composer writes them
there (`with_batches`), the readers take them back (`logged_batches`).

Example:
    >>> header.eval.metadata = with_batches(header.eval.metadata, records)
    >>> [batch.id for batch in logged_batches(header)]
    ['batch_abc', 'batch_def']
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..vocab.batch_records import BatchRecord, BatchSummary
from . import schema as s

__all__ = ["BatchRecord", "BatchSummary", "logged_batches", "with_batches"]


def with_batches(
    metadata: dict[str, Any] | None, batches: list[BatchRecord]
) -> dict[str, Any] | None:
    """The eval's metadata with the run's provider batches under `batches` (where Inspect's
    reader and viewer keep and show them), or as it was when there are none."""
    if not batches:
        return metadata
    return {**(metadata or {}), "batches": batches}


def logged_batches(header: s.EvalLog) -> list[BatchRecord]:
    """The provider batches a log's header records (`with_batches`); [] for none, or for
    a value that is not a list of batch records."""
    found = (header.eval.metadata or {}).get("batches")
    if not found:
        return []
    try:
        return msgspec.convert(found, list[BatchRecord])
    except msgspec.ValidationError:
        return []

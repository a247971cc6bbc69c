"""Keeping big runs small in memory: finished samples past a threshold keep only
their results in memory; their chats are read back from the log when asked.

Every finished sample is in the run's journal anyway. Up to `SPILL_AFTER`
samples a run keeps everything in memory (chats included), so most evals
never notice; past it, a sample's chats, model calls and per-sample usage
are dropped once it has been handed to the log writer. `get_samples()` and
`score()` read the chats of such samples back from the journal or the final
log (`rehydrate`), attached to the live model where the model matches.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..chats.chat import Chat
from ..log.logged_sample import normalize_model, sample_record
from ..log.reader import read_log
from ..samples import SampleRecord
from ..vocab.usage import UsageLedger

__all__ = ["SPILL_AFTER", "is_spilled", "rehydrate", "spill"]

#: Samples per run kept whole in memory before the rest are spilled.
SPILL_AFTER = 10_000

_EMPTY_LEDGER = UsageLedger()


def spill(record: SampleRecord) -> None:
    """Drop what the log holds and the results do not need: chats, calls, sample usage.
    The calls' retry notes stay (few, and counted by `get_samples()`)."""
    notes = [note for call in record.calls for note in call.retries]
    if notes:
        record.logged_retries = [*(record.logged_retries or ()), *notes]
    record.solver_chat = None
    record.calls = []
    record.usage = _EMPTY_LEDGER
    if record.score is not None:
        record.score.chat = None
    record.spilled = True


def is_spilled(records: Sequence[SampleRecord]) -> bool:
    return any(r.spilled for r in records)


def rehydrate(records: Sequence[SampleRecord], path: Path, live: Sequence[Chat]) -> None:
    """Read the chats of spilled records back from the log or journal at `path`."""
    wanted = {r.key: r for r in records if r.spilled}
    if not wanted:
        return
    logged = read_log(path)
    default = normalize_model(logged.header.eval.model)
    by_model = {chat.provider.model_id: chat for chat in live}
    for sample in logged.samples:
        record = wanted.get((sample.id, sample.epoch))
        if record is None:
            continue
        back = sample_record(sample, default, ours=True)
        for chat in (back.solver_chat, back.score.chat if back.score else None):
            if chat is not None and chat.provider.model_id in by_model:
                chat._provider = by_model[chat.provider.model_id].provider
        record.solver_chat = back.solver_chat
        if record.score is not None and back.score is not None:
            record.score.chat = back.score.chat
        record.spilled = False

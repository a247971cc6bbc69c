"""Keeping big runs small in memory: finished samples past a threshold keep only
their results in memory; their chats are read back from the log when asked.

Every finished sample is in the run's journal anyway. Up to `SPILL_AFTER`
samples a run keeps everything in memory (chats included), so most evals
never notice; past it, a sample's chats, model calls and per-sample usage
are dropped (`SampleRecord.spill`) once it has been handed to the log writer.
Samples that ran on Ray workers come back spilled already: their chats went
to the journal as lines the workers composed. `get_samples()` and
`score()` read the chats of such samples back from the journal or the final
log (`rehydrate`), attached to the live model where the model matches, and
rebuild each one's usage from its chats' turns, in a ledger of its own (a
spilled record's is a shared empty one, which a later stage must not write to).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..chats.chat import Chat
from ..log.logged_sample import add_chat_usage, normalize_model, sample_record
from ..log.reader import read_log
from ..samples import SampleRecord
from ..vocab.usage import UsageLedger

__all__ = ["SPILL_AFTER", "is_spilled", "rehydrate"]

#: Samples per run kept whole in memory before the rest are spilled.
SPILL_AFTER = 10_000


def is_spilled(records: Sequence[SampleRecord]) -> bool:
    return any(r.spilled for r in records)


def rehydrate(records: Sequence[SampleRecord], path: Path, live: Sequence[Chat]) -> None:
    """Read the chats of spilled records back from the log or journal at `path`, and
    their usage from the chats."""
    wanted = {r.key: r for r in records if r.spilled}
    if not wanted:
        return
    for record in wanted.values():  # found in the log or not, each its own from now on
        record.usage = UsageLedger()
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
        add_chat_usage(record, record.usage)
        record.spilled = False

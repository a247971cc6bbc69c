"""Keeping big runs small in memory: finished samples past a threshold keep only
their scores in memory; the rest is read back from the log when asked.

Every finished sample is in the run's journal anyway. Up to `SPILL_AFTER`
samples a run keeps everything in memory (chats included), so most evals
never notice; past it, a sample's result, its score's answer and explanation,
its chats, model calls and per-sample usage are dropped (`SampleRecord.spill`)
once it has been handed to the log writer and to the caller's stream (which gets
its own whole copy).
The runs of an eval set share one allowance (`sharing_whole_samples`): six runs
of 5,000 keep 10,000 samples whole between them, as one run of 30,000 does, not
30,000.
Samples that ran on Ray workers come back spilled already: their chats went
to the journal as lines the workers composed. `get_samples()` and
`score()` read such samples back from the journal or the final log
(`rehydrate`), attached to the live model where the model matches, and
rebuild each one's usage from its chats' turns, in a ledger of its own (a
spilled record's is a shared empty one, which a later stage must not write to).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from ..chats.chat import Chat
from ..log.logged_sample import add_chat_usage, normalize_model, sample_record
from ..log.reader import read_log
from ..samples import SampleRecord
from ..vocab.usage import UsageLedger

__all__ = [
    "SPILL_AFTER",
    "WholeSamples",
    "is_spilled",
    "rehydrate",
    "shared_whole_samples",
    "sharing_whole_samples",
]

#: Samples per run (or per eval set) kept whole in memory before the rest are spilled.
SPILL_AFTER = 10_000


class WholeSamples:
    """How many finished samples may stay whole in memory, and how many do.

    Example:
        >>> whole = WholeSamples(2)
        >>> whole.keep(1), whole.keep(1), whole.keep(1)
        (True, True, False)
    """

    __slots__ = ("kept", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = 0

    def keep(self, count: int) -> bool:
        """Count `count` samples that just finished; whether they may stay whole."""
        self.kept += count
        return self.kept <= self.limit


_shared: ContextVar[WholeSamples | None] = ContextVar("vitals_whole_samples", default=None)


def shared_whole_samples() -> WholeSamples | None:
    """The allowance the runs started here share, if they share one."""
    return _shared.get()


@contextmanager
def sharing_whole_samples(limit: int | None = None) -> Iterator[WholeSamples]:
    """Runs started inside share one allowance of whole samples (an eval set's runs)."""
    whole = WholeSamples(SPILL_AFTER if limit is None else limit)
    token = _shared.set(whole)
    try:
        yield whole
    finally:
        _shared.reset(token)


def is_spilled(records: Sequence[SampleRecord]) -> bool:
    return any(r.spilled for r in records)


def rehydrate(records: Sequence[SampleRecord], path: Path, live: Sequence[Chat]) -> None:
    """Read what spilled records dropped back from the log or journal at `path`, and
    their usage from their chats. A score reset for rescoring stays reset."""
    wanted = {r.key: r for r in records if r.spilled}
    if not wanted:
        return
    for record in wanted.values():  # found in the log or not, each its own from now on
        record.usage, record.calls = UsageLedger(), []
    logged = read_log(path)
    default = normalize_model(logged.header.eval.model)
    by_model = {chat.provider.model_id: chat for chat in live}
    for sample in logged.samples:
        record = wanted.get((sample.id, sample.epoch))
        if record is None:
            continue
        back = sample_record(sample, default, ours=True)
        for chat in (back.solver_chat, *back.judge_chats):
            if chat is not None and chat.provider.model_id in by_model:
                chat._provider = by_model[chat.provider.model_id].provider
        record.result, record.solver_metadata = back.result, back.solver_metadata
        record.solver_chat = back.solver_chat
        record.events = back.events
        record.logged_batch = back.logged_batch
        record.logged_cache = back.logged_cache
        if record.score is not None and back.score is not None:  # not reset for rescoring
            record.score, record.scores = back.score, back.scores
        add_chat_usage(record, record.usage)
        record.spilled = False

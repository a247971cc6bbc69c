"""The reply journal: each reply written to the run's journal the moment it arrives, and
the calls of a resumed run answered from the replies its journal holds.

Below the accounting (which prices and records what comes back, either way) and above
the budget, the batches, the seats, the retries and the limits: a call the journal
answers was paid for by the run that was stopped, so it is not sent, waits for no seat
and takes no slot; it is priced and recorded as the call it was (at the batch price
when a batch answered it).

A call is known as the reply cache knows it (`caching/keys.py`): the sample and its
epoch, the role of the stage, the digest of its request (provider, base URL, model,
the model's parameters, the whole request, the epoch) and its place among the
identical calls of its sample stage (`nth`). A prompt changed since is not answered
from the journal, and a solver that asks the same thing twice gets both of its
replies back, in order.

Invariants: a reply is handed to its run's journal before it goes up the stack, so
before its sample can finish (a process killed at any moment loses no reply it had
received; the journal writes each one to the operating system at once, without an
fsync). A reply answers at most one call. A call made outside a sample stage (a batch
stage, a call outside any run) is neither journaled nor answered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ...caching.keys import reply_key
from ...vocab.model_calls import JournaledReply
from ...vocab.text import writable_text
from ...vocab.turns import Turn
from .call import Call, Send

__all__ = ["Replies", "ReplyJournal"]

#: A sample as the journal writes its key: (id, epoch), a lone surrogate in the id escaped.
_Sample = tuple[Any, int]
#: A call of one sample: (role, call digest, nth).
_Call = tuple[str, str, int]


def _as_written(sample_id: Any) -> Any:
    """A sample id as the journal holds it (lone surrogates escaped: `vocab/text.py`), so
    that a reply read back finds the call of the sample made live."""
    return writable_text(sample_id) if isinstance(sample_id, str) else sample_id


class Replies:
    """A run's journaled replies: where each new one goes as it arrives (`journal`; None:
    nowhere), and those an earlier run of its samples journaled (`earlier`), which answer
    the same calls once each.

    Example:
        >>> replies = Replies(writer.add_reply, resumed.replies)
        >>> replies.take((7, 1), "solver", digest, 0).turn.text
        '14'
    """

    __slots__ = ("_earlier", "journal")

    def __init__(
        self,
        journal: Callable[[JournaledReply], None] | None = None,
        earlier: Iterable[JournaledReply] = (),
    ) -> None:
        self.journal = journal
        self._earlier: dict[_Sample, dict[_Call, JournaledReply]] = {}
        self.add(earlier)

    def add(self, earlier: Iterable[JournaledReply]) -> None:
        """Replies an earlier run journaled, to answer the same calls with."""
        known = self._earlier
        for reply in earlier:
            sample = (_as_written(reply.sample), reply.epoch)
            known.setdefault(sample, {})[(reply.role, reply.call, reply.nth)] = reply

    def take(self, sample: _Sample, role: str, call: str, nth: int) -> JournaledReply | None:
        """The earlier reply to this call, if there is one (it answers no other call)."""
        known = self._earlier
        if not known:
            return None
        key = (_as_written(sample[0]), sample[1])
        calls = known.get(key)
        if calls is None:
            return None
        reply = calls.pop((role, call, nth), None)
        if not calls:
            del known[key]
        return reply

    def left_over(self, sample: _Sample) -> int:
        """How many of `sample`'s earlier replies answered no call of this run (its
        calls went otherwise: a tool gave another result, and the agent went on live);
        they are forgotten now.

        Example:
            >>> replies.left_over((7, 1))
            2
        """
        calls = self._earlier.pop((_as_written(sample[0]), sample[1]), None)
        return len(calls) if calls else 0

    def of(self, samples: Iterable[_Sample]) -> list[JournaledReply]:
        """The earlier replies of `samples` (kept here too): what a Ray worker running
        them needs."""
        known = self._earlier
        if not known:
            return []
        found: list[JournaledReply] = []
        for sample_id, epoch in samples:
            calls = known.get((_as_written(sample_id), epoch))
            if calls:
                found.extend(calls.values())
        return found

    def __len__(self) -> int:
        return sum(len(calls) for calls in self._earlier.values())


class ReplyJournal:
    """Answer a call from the replies an earlier run journaled, or send it on and journal
    its reply."""

    __slots__ = ("replies",)

    def __init__(self, replies: Replies) -> None:
        self.replies = replies

    async def __call__(self, call: Call, send: Send) -> Turn:
        scope = call.scope
        if scope is None or scope.sample is None:
            return await send(call)
        sample, role, provider = scope.sample, scope.role, call.provider
        digest = reply_key(
            provider.name,
            provider.base_url,
            provider.model,
            call.request,
            model_params=provider.reply_params,
            epoch=sample[1],
        )
        seen = scope.replies_seen
        if seen is None:
            seen = scope.replies_seen = {}
        nth = seen.get(digest, 0)
        seen[digest] = nth + 1
        replies = self.replies
        earlier = replies.take(sample, role, digest, nth)
        if earlier is not None:  # paid for by the run this one resumes
            call.batch_id = earlier.batch
            return earlier.turn
        turn = await send(call)
        journal = replies.journal
        if journal is not None:
            journal(
                JournaledReply(
                    sample=sample[0],
                    epoch=sample[1],
                    role=role,
                    call=digest,
                    nth=nth,
                    turn=turn,
                    batch=call.batch_id,
                )
            )
        return turn

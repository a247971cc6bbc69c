"""Limits per sample: messages, tokens, clock time, working time and dollars.

`SampleLimits` is what a run sets (`eval(message_limit=, token_limit=, time_limit=,
working_limit=, cost_limit=)`); a `LimitWatch` watches one sample's solving against
them. Each limit is checked where what it counts happens:

- messages, tokens and dollars at each model call's accounting (`charged`): the
  conversation's messages after the reply (its request's turns, the system prompt, the
  reply), and the tokens and cost of every call of the solver so far (tokens as
  `TokenUsage.total` counts them: input, cached input, cache writes and output);
- clock time by a deadline on the solver's cancel scope, from the sample's start;
- working time (clock time less the time spent waiting for rate limits, retries,
  seats and sandboxes, told by `waited`) by the same deadline, pushed on by each wait.

A sample that hits a limit stops at once: the watch cancels the solver's scope (the
call or tool in flight included), never by an exception a solver could catch, and
keeps what it hit (`hit`, a `LimitRecord` for the transcript) and the last reply the
solver had (`last_reply`), which the sample is scored on.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import anyio

from .._errors import ConfigError
from ..vocab.transcript import LimitRecord
from ..vocab.turns import TokenUsage, Turn

__all__ = ["LimitWatch", "SampleLimits"]


@dataclass(frozen=True, slots=True)
class SampleLimits:
    """The limits each sample of a run solves under (None: no such limit).

    Args:
        message_limit: messages in the conversation (system, user, assistant, tool results).
        token_limit: tokens of the sample's model calls (input, cached, cache writes, output).
        time_limit: seconds of clock time from the sample's start.
        working_limit: seconds of working time: clock time less the waits for rate limits,
            retries, seats and sandboxes.
        cost_limit: dollars the sample's model calls may cost.

    Example:
        >>> SampleLimits(message_limit=40, cost_limit=2.0).any
        True
    """

    message_limit: int | None = None
    token_limit: int | None = None
    time_limit: float | None = None
    working_limit: float | None = None
    cost_limit: float | None = None

    def __post_init__(self) -> None:
        for name in ("message_limit", "token_limit"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigError(f"`{name}` must be a whole number above 0, not {value!r}.")
        for name in ("message_limit", "token_limit", "time_limit", "working_limit", "cost_limit"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not 0 < value < math.inf
            ):
                raise ConfigError(f"`{name}` must be a number above 0, not {value!r}.")

    @property
    def any(self) -> bool:
        """Whether any limit is set."""
        return any(
            value is not None
            for value in (
                self.message_limit,
                self.token_limit,
                self.time_limit,
                self.working_limit,
                self.cost_limit,
            )
        )


class LimitWatch:
    """One sample's solving watched against its limits (see the module docstring).

    Example:
        >>> watch = LimitWatch(SampleLimits(token_limit=1000))
        >>> with watch.scope() as scope:
        ...     await solver(input)            # its calls' accounting calls watch.charged()
        >>> watch.hit                          # a LimitRecord when it stopped the sample
    """

    __slots__ = (
        "_cancel",
        "chat",
        "cost",
        "hit",
        "last_reply",
        "limits",
        "messages",
        "started",
        "tokens",
        "waited_s",
    )

    def __init__(self, limits: SampleLimits) -> None:
        self.limits = limits
        self.started = time.monotonic()
        self.tokens = 0
        self.cost = 0.0
        self.messages = 0
        self.waited_s = 0.0
        #: The limit that stopped the sample (None: none did).
        self.hit: LimitRecord | None = None
        #: The solver's last reply (what the sample is scored on when a limit stops it).
        self.last_reply: Turn | None = None
        #: The conversation an agent solver keeps, for the log of a sample a limit stopped
        #: (an agent tells it: `ve.react()` does).
        self.chat: Any = None
        self._cancel: anyio.CancelScope | None = None

    def scope(self) -> anyio.CancelScope:
        """The cancel scope the solver runs in: cancelled when a limit is hit, with a
        deadline at the clock or working time limit."""
        self.started = time.monotonic()
        self._cancel = anyio.CancelScope(deadline=self._deadline())
        return self._cancel

    def _deadline(self) -> float:
        limits, now = self.limits, anyio.current_time()
        elapsed = time.monotonic() - self.started
        ends = [math.inf]
        if limits.time_limit is not None:
            ends.append(now + limits.time_limit - elapsed)
        if limits.working_limit is not None:
            ends.append(now + limits.working_limit - (elapsed - self.waited_s))
        return min(ends)

    # -- what is counted ---------------------------------------------------------------

    def charged(
        self, turn: Turn, tokens: TokenUsage, cost: float | None, messages: int, model: str
    ) -> None:
        """A model call of the solver came back: its reply, tokens, cost, and the
        conversation's messages with it. Stops the sample past a limit. A call of a model
        of unknown price under a cost limit is a `ConfigError`."""
        if cost is None and self.limits.cost_limit is not None:
            raise ConfigError(
                f"{model} has no known price, so the samples' cost_limit cannot count its "
                "calls. Give it one with ve.set_price(...), or limit tokens (token_limit=)."
            )
        self.last_reply = turn
        self.tokens += tokens.total
        self.cost += cost or 0.0
        self.messages = max(self.messages, messages)
        limits = self.limits
        if limits.token_limit is not None and self.tokens > limits.token_limit:
            self._stop("token", limits.token_limit, f"token limit of {limits.token_limit:,}")
        elif limits.cost_limit is not None and self.cost > limits.cost_limit:
            self._stop("cost", limits.cost_limit, f"cost limit of ${limits.cost_limit:g}")
        else:
            self.counted_messages(self.messages)

    def counted_messages(self, messages: int) -> None:
        """The conversation now has `messages` messages (a tool's results added some)."""
        self.messages = max(self.messages, messages)
        limit = self.limits.message_limit
        if limit is not None and self.messages > limit:
            self._stop("message", limit, f"message limit of {limit:,}")

    def waited(self, seconds: float) -> None:
        """The sample waited `seconds` for rate limits, a retry, a seat or a sandbox: not
        working time."""
        if seconds <= 0:
            return
        self.waited_s += seconds
        if self._cancel is not None and self.limits.working_limit is not None:
            self._cancel.deadline = self._deadline()

    def timed_out(self) -> None:
        """The scope's deadline passed: say which time limit it was."""
        if self.hit is not None:
            return
        limits = self.limits
        elapsed = time.monotonic() - self.started
        if limits.time_limit is not None and elapsed >= limits.time_limit - 1e-3:
            self._stop("time", limits.time_limit, f"time limit of {limits.time_limit:g}s")
        elif limits.working_limit is not None:
            limit = limits.working_limit
            self._stop("working", limit, f"working time limit of {limit:g}s")

    def _stop(self, kind: str, limit: float, said: str) -> None:
        if self.hit is None:
            message = f"The sample hit its {said}."
            self.hit = LimitRecord(type=kind, limit=limit, message=message, at=time.time())
        if self._cancel is not None:
            self._cancel.cancel()

    def __repr__(self) -> str:
        return f"<LimitWatch {self.limits} hit={self.hit}>"

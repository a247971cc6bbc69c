"""The records a sample passes through: asked, solved, scored.

- `Sample` is what a solver is asked: one dataset row in one epoch.
- `Solution` is what a solver may return (a bare string is fine too).
- `SolvedSample` is what a scorer gets: the sample plus the solver's result.
- `Score` is what a scorer may return (a bare value is fine too).
- `ScoreSet` is what several scorers of one task give a sample: a `Score` by scorer.
- `SampleRecord` is the engine's working record of one (sample, epoch).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .vocab.text import writable_text
from .vocab.usage import UsageLedger

if TYPE_CHECKING:
    from .chats.chat import Chat
    from .vocab.model_calls import ModelCall, RetryNote
    from .vocab.transcript import TranscriptRecord

__all__ = [
    "GRADES",
    "Sample",
    "SampleError",
    "SampleRecord",
    "Score",
    "ScoreSet",
    "Solution",
    "SolvedSample",
    "id_text",
    "is_correct",
]

# A spilled record's usage and model calls: shared, and nothing is ever added to them
# (reading a record back gives it its own; see task/spill.py).
_EMPTY_LEDGER = UsageLedger()
_NO_CALLS: list[ModelCall] = []
_NO_EVENTS: list[TranscriptRecord] = []


def id_text(sample_id: int | str) -> str:
    """A sample id as the log and its frames show it: its text, a lone surrogate written
    as its escape. Two ids of one text are one sample to every reader of the log (its
    frames, `compare`, `sample_ids=`), so a dataset's ids must differ in this text.

    Example:
        >>> id_text(1) == id_text("1"), id_text("bad\\udcff") == id_text("bad\\\\udcff")
        (True, True)
    """
    return writable_text(str(sample_id))


#: The ordered grades: incorrect < partially correct < correct.
GRADES = ("I", "P", "C")


def is_correct(score: Score | None) -> bool:
    """Whether `score` says correct: "C", True, or a number of 1 (or more).

    Example:
        >>> is_correct(Score("C")), is_correct(Score(0.5)), is_correct(None)
        (True, False, False)
    """
    value = score.value if score is not None else None
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value >= 1
    return value == "C"


@dataclass(frozen=True, slots=True)
class Sample:
    """One dataset row in one epoch.

    `metadata` holds every dataset column other than id, input and target. A solver
    with a `sample` parameter receives it.

    Example:
        >>> def solver(input: str, sample: ve.Sample) -> str:
        ...     return f"{sample.id}/{sample.epoch}: {sample.metadata['level']}"
        >>> task = ve.Task([{"input": "What's 2+2?", "target": "4", "level": "easy"}],
        ...                solver, ve.detect_includes(), epochs=2)
        >>> task.eval(progress=False).get_samples()["result"].to_list()
        ['1/1: easy', '1/2: easy']
    """

    id: int | str
    epoch: int
    input: Any
    target: str | list[str]
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Solution:
    """What a solver returns: the result text, optionally the chat and metadata.

    Example:
        >>> async def solver(input):
        ...     chat = chat_mock()
        ...     return Solution(await chat.chat_async(input), chat=chat)
    """

    result: str
    chat: Chat | None = None
    metadata: Any = None


@dataclass(frozen=True, slots=True)
class SolvedSample:
    """A sample and its solution: what a scorer is given.

    Example:
        >>> def ends_with_target(sample: ve.SolvedSample) -> bool:
        ...     return sample.result.endswith(sample.target)
        >>> task = ve.Task([{"input": "What's 2+2?", "target": "4"}],
        ...                ve.generate(ve.chat_mock()), ends_with_target)
        >>> task.eval(progress=False).metrics
        {'accuracy': 1.0}
    """

    id: int | str
    epoch: int
    input: Any
    target: str | list[str]
    metadata: dict[str, Any]
    result: str
    solver_chat: Chat | None = None
    solver_metadata: Any = None

    @property
    def targets(self) -> list[str]:
        """The target(s) as a list."""
        return list(self.target) if isinstance(self.target, list) else [self.target]


@dataclass(slots=True)
class Score:
    """What a scorer returns.

    `value` is a grade ("C", "P", "I"), a number, a bool, or any other string
    (a custom grade scheme). `answer` is what was extracted from the result,
    `explanation` why the value was given, `chat` the judge's conversation.

    Example:
        >>> Score("C", answer="4", explanation="Target '4' was found in the answer.")
    """

    value: str | int | float | bool | None
    answer: str | None = None
    explanation: str | None = None
    metadata: Any = None
    chat: Chat | None = None


@dataclass(frozen=True, slots=True)
class ScoreSet:
    """The scores several scorers of one task gave a sample, by scorer name, in the
    task's order: the first is the sample's primary score (`SampleRecord.score`).

    Example:
        >>> ScoreSet({"includes": Score("C"), "judge": Score("I")}).primary.value
        'C'
    """

    scores: dict[str, Score]

    @property
    def primary(self) -> Score:
        return next(iter(self.scores.values()))


@dataclass(slots=True)
class SampleError:
    """Why a sample failed: at which stage, the exception's type, message and traceback."""

    stage: str
    type: str
    message: str
    traceback: str = ""

    def __str__(self) -> str:
        doing = {"solve": "solving", "score": "scoring"}.get(self.stage, self.stage)
        return f"{self.type} while {doing}: {self.message}"


@dataclass(slots=True)
class SampleRecord:
    """The engine's working record of one (sample, epoch).

    `task.stream_async()` hands each one over as it finishes.

    Example:
        >>> import asyncio
        >>> task = ve.Task([{"input": "What's 2+2?", "target": "4"}],
        ...                ve.generate(ve.chat_mock()), ve.detect_includes())
        >>> async def records(task):
        ...     async with task.stream_async(progress=False) as samples:
        ...         return [record async for record in samples]
        >>> record = asyncio.run(records(task))[0]
        >>> record.sample.id, record.result, record.score.value, record.retries
        (1, '2 + 2 = 4', 'C', 0)
    """

    sample: Sample
    result: str | None = None
    solver_chat: Chat | None = None
    solver_metadata: Any = None
    score: Score | None = None
    #: With several scorers, each one's score by name (`score` is the first's); else None.
    scores: dict[str, Score] | None = None
    error: SampleError | None = None
    solve_started: float | None = None
    solve_completed: float | None = None
    score_started: float | None = None
    score_completed: float | None = None
    usage: UsageLedger = field(default_factory=UsageLedger)
    calls: list[ModelCall] = field(default_factory=list)
    #: What it did besides its model calls, in order: spans, tool calls, sandbox actions,
    #: a limit it hit (`vocab/transcript.py`).
    events: list[TranscriptRecord] = field(default_factory=list)
    #: Its sandbox while it is at work (`Task(sandbox=)`; never logged, None after).
    sandbox: Any = None
    #: Its chats were dropped from memory; the log holds them (see task/spill.py).
    spilled: bool = False
    #: Retries read back from a log, whose model calls are not in memory.
    logged_retries: list[RetryNote] | None = None
    #: Read back from a log: per role ("solver", "scorer") with model calls, whether
    #: they were all sent in provider batches (the log's model events, `config.batch`).
    logged_batch: dict[str, bool] | None = None
    #: Read back from a log: per role with model calls, whether the cache answered them
    #: all (the log's model events, `cache: "read"`).
    logged_cache: dict[str, bool] | None = None

    @property
    def retries(self) -> int:
        """How many times this sample's model calls were retried, in all."""
        return sum(len(call.retries) for call in self.calls) + len(self.logged_retries or ())

    @property
    def retry_notes(self) -> list[RetryNote]:
        """Every retried attempt of this sample's model calls: when, which model, why, and
        how long it waited, oldest first."""
        return [*(self.logged_retries or ()), *(n for call in self.calls for n in call.retries)]

    def set_score(self, scored: Score | ScoreSet) -> None:
        """Keep what the task's scorer (or scorers) gave this sample."""
        if isinstance(scored, ScoreSet):
            self.score, self.scores = scored.primary, scored.scores
        else:
            self.score, self.scores = scored, None

    def score_by(self, name: str | None) -> Score | None:
        """The score of the scorer `name` (None: the primary), None where it has none."""
        if name is None or self.scores is None:
            return self.score
        return self.scores.get(name)

    @property
    def judge_chats(self) -> list[Chat]:
        """The chats its scores were graded in (each scorer's that graded with a model)."""
        scores = self.scores.values() if self.scores is not None else (self.score,)
        return [score.chat for score in scores if score is not None and score.chat is not None]

    def clear_score(self) -> None:
        self.score = self.scores = None

    @property
    def key(self) -> tuple[int | str, int]:
        return (self.sample.id, self.sample.epoch)

    @property
    def solved(self) -> bool:
        return self.result is not None and self.error is None

    def spill(self) -> None:
        """Keep only what the run's metrics and counts need: the score's value, the error,
        the times and retry notes. The result, the score's answer and explanation, the
        chats, model calls, transcript and per-sample usage are in the log, and read back from it
        when asked (see task/spill.py). Objects that others may hold (the score) are
        replaced, never changed."""
        notes = [note for call in self.calls for note in call.retries]
        if notes:
            self.logged_retries = [*(self.logged_retries or ()), *notes]
        self.result = None
        self.solver_chat = None
        self.solver_metadata = None
        self.calls = _NO_CALLS
        self.events = _NO_EVENTS
        self.usage = _EMPTY_LEDGER
        if self.scores is not None:
            self.scores = {name: Score(score.value) for name, score in self.scores.items()}
            self.score = next(iter(self.scores.values()))
        elif self.score is not None:
            self.score = Score(self.score.value)
        self.spilled = True

    def solved_sample(self) -> SolvedSample:
        s = self.sample
        return SolvedSample(
            s.id,
            s.epoch,
            s.input,
            s.target,
            s.metadata,
            self.result or "",
            self.solver_chat,
            self.solver_metadata,
        )

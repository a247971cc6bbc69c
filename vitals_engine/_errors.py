"""Every error vitals-engine raises, under one root.

```
VitalsError
 ├── ConfigError            a wrong argument: unknown keyword, bad epochs, bad option
 │    └── JournalInUseError     resuming a journal another run still writes (names the pid)
 ├── DatasetError           a dataset that cannot be read or lacks input/target
 ├── TaskStateError         a step run out of order (score() before solve() ...)
 ├── SolverError            a solver broke its contract (wrong return shape ...)
 ├── ScorerError            a scorer broke its contract
 ├── InvalidScore           one sample's score is no number (NaN, infinite): that sample fails
 ├── MetricError            a metric function returned something other than a finite number
 ├── ProviderError          a model provider failed a request (`stops_run`: every sample would)
 │    ├── RateLimitError        429: carries `retry_after` seconds
 │    ├── QuotaExhausted        the account's quota or credit is spent: not retried, stops the run
 │    ├── AuthenticationError   401/403: missing or wrong API key
 │    ├── ProviderUnavailable   5xx, 529, 408, 409, dropped connections (may carry `retry_after`),
 │    │                         refused ones (`refused`; not retried where nothing ever answered)
 │    ├── ProviderTimeout       connect or read timeout
 │    ├── MalformedResponse     a body that is not the JSON the provider promised
 │    └── BatchUnsupported      a server without a batch API (404 at its batch endpoint)
 ├── ExtractionError        a structured reply that does not validate against its type
 ├── EvalFailedError        more samples failed than `fail_on_error` allows
 │    └── EvalSetFailedError    runs of an eval set failed (carries `errors`, `eval_set`)
 ├── BudgetExceeded         the run reached its budget (carries `reason`, `spent`, `log_path`)
 ├── LogFormatError         a log or journal that cannot be read
 │    └── NotALogError          valid JSON that is not an eval log (a manifest, a schema ...)
 ├── LogWriteError          a log or journal that cannot be written (carries `path`)
 ├── StoreError             an object store holding logs failed (carries `url`)
 │    ├── StoreNotFound         the bucket (or container) does not exist
 │    ├── StoreAccessDenied     the credentials may not read or write there
 │    ├── StoreUnreachable      the store's endpoint does not answer
 │    └── StoreThrottled        the store asks to slow down (503 SlowDown) and kept asking
 └── WorkerLostError        every Ray worker of a run died (carries `left`: samples not run)
```

Every error is defined here, and `vitals_engine` exports them all.

Each error carries what a user needs to act on it (the provider, the model,
the sample id, the request id) as attributes, and says it in its message.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

__all__ = [
    "AuthenticationError",
    "BatchUnsupported",
    "BudgetExceeded",
    "ConfigError",
    "DatasetError",
    "EvalFailedError",
    "EvalSetFailedError",
    "ExtractionError",
    "InvalidScore",
    "JournalInUseError",
    "LogFormatError",
    "LogWriteError",
    "MalformedResponse",
    "MetricError",
    "NotALogError",
    "ProviderError",
    "ProviderTimeout",
    "ProviderUnavailable",
    "QuotaExhausted",
    "RateLimitError",
    "ScorerError",
    "SolverError",
    "StoreAccessDenied",
    "StoreError",
    "StoreNotFound",
    "StoreThrottled",
    "StoreUnreachable",
    "TaskStateError",
    "VitalsError",
    "WorkerLostError",
]


class VitalsError(Exception):
    """The root of every error raised by vitals-engine."""


class ConfigError(VitalsError):
    """An argument or option is wrong; the message says which and how to fix it."""


class DatasetError(VitalsError):
    """A dataset cannot be read, or lacks the columns a task needs."""


class TaskStateError(VitalsError):
    """A task step was run before the step it depends on."""


class SolverError(VitalsError):
    """A solver broke its contract, e.g. returned a value of the wrong shape."""


class ScorerError(VitalsError):
    """A scorer broke its contract, e.g. returned a value of the wrong shape."""


class InvalidScore(VitalsError):
    """A scorer gave one sample a score that is no number (NaN, or infinite): that sample
    is recorded with this error, as a scorer that raised would be, and the run goes on;
    a metric never sees it, and a log never holds it."""


class MetricError(VitalsError):
    """A metric function returned something other than a single finite number."""


class ProviderError(VitalsError):
    """A model provider failed a request.

    Attributes name the provider, the model, the HTTP status (when there was
    a response), the provider's request id, whether a retry may succeed, and
    `retry_after`: the seconds the provider asked to wait before one (RFC 9110
    gives Retry-After to 429 and 503; providers send it on 529 too).
    """

    retryable: bool = False
    #: The connection was refused: nothing listens at the address (set by the transports).
    refused: bool = False
    #: Every sample of the run would fail alike (the account's quota is spent, or the same
    #: client error ended every call so far): the run stops instead of failing them one
    #: by one, keeping the samples that finished.
    stops_run: bool = False

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        model: str | None = None,
        status: int | None = None,
        request_id: str | None = None,
        body: Any = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.model = model
        self.status = status
        self.request_id = request_id
        self.body = body
        self.retry_after = retry_after

    def __str__(self) -> str:
        where = "/".join(p for p in (self.provider, self.model) if p)
        parts = [f"{where}: {self.message}" if where else self.message]
        if self.status is not None:
            parts.append(f"(HTTP {self.status})")
        if self.request_id:
            parts.append(f"[request id {self.request_id}]")
        return " ".join(parts)


class RateLimitError(ProviderError):
    """The provider answered 429; `retry_after` is the wait it asked for, in seconds."""

    retryable = True


class QuotaExhausted(ProviderError):
    """The account behind the API key has no quota or credit left (OpenAI's
    `insufficient_quota`, Gemini's per-day quota, Anthropic's credit balance): waiting will
    not help, so it is not retried, and the run stops with its finished samples kept."""

    stops_run = True


class AuthenticationError(ProviderError):
    """The API key is missing, wrong, or not allowed to use this model."""


class ProviderUnavailable(ProviderError):
    """A server-side or transient failure (5xx, 529, 408, 409, a dropped connection).

    A refused connection (`refused` is True) is retried only at an address that answered
    before in this process; where nothing ever answered (a typo in `base_url`, a local
    server not started) it fails at once (`retryable` False), saying nothing listens there.
    """

    retryable = True


class ProviderTimeout(ProviderError):
    """Connecting to the provider or reading its answer took too long."""

    retryable = True


class MalformedResponse(ProviderError):
    """The provider's body is not valid JSON, or lacks fields its API promises."""

    retryable = True


class BatchUnsupported(ProviderError):
    """The server has no batch API (it answered the batch endpoint with 404)."""

    retryable = False


class ExtractionError(VitalsError):
    """A structured-output reply did not validate against the requested type.

    `raw` holds the model's reply as received.
    """

    def __init__(self, message: str, *, raw: str) -> None:
        super().__init__(message)
        self.raw = raw


class EvalFailedError(VitalsError):
    """More samples failed than `fail_on_error` allows; the log was written anyway.

    `failed` is the number of failed samples, `total` the number run,
    `log_path` where the log with every finished sample lies.
    """

    def __init__(
        self, message: str, *, failed: int, total: int, log_path: str | None = None
    ) -> None:
        super().__init__(message)
        self.failed = failed
        self.total = total
        self.log_path = log_path


class EvalSetFailedError(EvalFailedError):
    """Some runs of an eval set failed; the others ran to the end and every log was
    written. `errors` maps each failed run ("task on model") to its error, `eval_set`
    is the whole set; `failed` and `total` count runs."""

    def __init__(self, message: str, *, eval_set: Any, errors: dict[str, Exception]) -> None:
        super().__init__(message, failed=len(errors), total=len(eval_set.tasks))
        self.eval_set = eval_set
        self.errors = errors


class BudgetExceeded(VitalsError):
    """The run reached its budget (`max_cost`, `max_tokens`, or a model's
    `Limits(max_cost=)`): it started no more samples, finished those at work as far as
    their calls fit, and wrote its log with status "cancelled"; `resume=True` continues
    it. Inside the run, a model call that does not fit (and is not sent) raises it too:
    its sample stops unfinished, and a resumed run runs it again.

    `reason` says which budget ("budget reached: $4.98 of $5.00"), `spent` the dollars
    (or tokens) spent against it, `log_path` where the log lies.
    """

    def __init__(
        self, message: str, *, reason: str, spent: float | None, log_path: str | None = None
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.spent = spent
        self.log_path = log_path


class LogFormatError(VitalsError):
    """A log or journal cannot be read: the message names the file and the position."""


class NotALogError(LogFormatError):
    """A JSON file that is valid JSON but not an eval log (a manifest, a schema ...)."""


class LogWriteError(VitalsError):
    """A log, journal or listing cannot be written: the message names the file and why.

    `path` is the file that could not be written; the OS error is the `__cause__`.
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class StoreError(VitalsError):
    """An object store holding logs (an fsspec URL such as `s3://bucket/prefix`) failed.

    `url` is the log directory's URL; the message says what was being done and what to
    do about it. The backend's own error is the `__cause__`.
    """

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url


class StoreNotFound(StoreError):
    """The bucket (or container) of a log directory's URL does not exist."""


class StoreAccessDenied(StoreError):
    """The store refused the credentials found (environment, profile): access denied."""


class StoreUnreachable(StoreError):
    """The store's endpoint could not be reached (DNS, refused or dropped connections)."""


class StoreThrottled(StoreError):
    """The store kept answering 503 SlowDown (or another throttling reply) after retries."""


class JournalInUseError(ConfigError):
    """A run's journal is locked by another run still writing it: the message says which
    process (pid, host, since when). `path` is the journal."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


#: Request parameters people pass where a keyword of ours goes: they belong in `params=`.
REQUEST_PARAMS = frozenset(
    (
        "temperature",
        "max_tokens",
        "max_completion_tokens",
        "top_p",
        "top_k",
        "seed",
        "stop",
        "frequency_penalty",
        "presence_penalty",
        "reasoning_effort",
    )
)


def keyword_hint(name: str, known: Iterable[str]) -> str:
    """What to write instead of the unknown keyword `name` (with a leading space), or "":
    a request parameter goes in the chat's `params=`; a near miss of a `known` name gets a
    "did you mean"."""
    if name in REQUEST_PARAMS:
        return (
            f" `{name}` is a request parameter of the model: give it to the chat, e.g. "
            f've.chat_openai(..., params={{"{name}": ...}}).'
        )
    close = difflib.get_close_matches(name, sorted(set(known)), n=1, cutoff=0.75)
    return f" Did you mean `{close[0]}`?" if close else ""


_F = TypeVar("_F", bound=Callable[..., Any])


def factory(kind: str, usage: str) -> Callable[[_F], _F]:
    """Mark a function that makes a solver or scorer (`kind`), so passing it uncalled is a
    ConfigError saying to write `usage` instead (e.g. "ve.generate(chat)")."""

    def mark(fn: _F) -> _F:
        setattr(fn, "__vitals_factory__", (kind, usage))  # noqa: B010 - functions have no slot
        return fn

    return mark


class WorkerLostError(VitalsError):
    """Every Ray worker of a distributed run died before its samples were done.

    `left` is the number of samples not finished. The finished ones were journaled:
    running the task again with `resume=True` runs only those left.
    """

    def __init__(self, message: str, *, left: int) -> None:
        super().__init__(message)
        self.left = left

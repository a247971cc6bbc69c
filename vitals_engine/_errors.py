"""Every error vitals-engine raises, under one root.

```
VitalsError
 ├── ConfigError            a wrong argument: unknown keyword, bad epochs, bad option
 │    └── JournalInUseError     resuming a journal another run still writes (names the pid)
 ├── DatasetError           a dataset that cannot be read or lacks input/target
 ├── TaskStateError         a step run out of order (score() before solve() ...)
 ├── SolverError            a solver broke its contract (wrong return shape ...)
 ├── AgentCliError          an agent CLI failed on a sample (exit code, what it printed last)
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
 ├── ToolError              a tool's failure the model is shown (carries `kind`: "timeout" ...)
 ├── SandboxError           a sample's sandbox could not be made, or died (carries `output`)
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
    "AgentCliError",
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
    "SandboxError",
    "ScorerError",
    "SolverError",
    "StoreAccessDenied",
    "StoreError",
    "StoreNotFound",
    "StoreThrottled",
    "StoreUnreachable",
    "TaskStateError",
    "ToolError",
    "VitalsError",
    "WorkerLostError",
]


class VitalsError(Exception):
    """The root of every error raised by vitals-engine.

    Example:
        >>> try:
        ...     ve.Task([{"input": "What's 2+2?", "target": "4"}], lambda x: "4",
        ...             ve.detect_includes(), epochs=0)
        ... except ve.VitalsError as error:  # every error of the package is one
        ...     print(type(error).__name__)
        ConfigError
    """


class ConfigError(VitalsError):
    """An argument or option is wrong; the message says which and how to fix it.

    Example:
        >>> try:
        ...     ve.Retry(max_attempts=0)
        ... except ve.ConfigError as error:
        ...     print(error)
        Retry(max_attempts=0) must be a whole number of at least 1.
    """


class DatasetError(VitalsError):
    """A dataset cannot be read, or lacks the columns a task needs.

    Example:
        >>> try:
        ...     ve.read_dataset([{"question": "What's 2+2?", "target": "4"}])
        ... except ve.DatasetError as error:
        ...     print(error)
        Dataset has no column 'input' (for input=). Its columns: question, target.
    """


class TaskStateError(VitalsError):
    """A task step was run before the step it depends on.

    Example:
        >>> task = ve.Task([{"input": "What's 2+2?", "target": "4"}], lambda x: "4",
        ...                ve.detect_includes())
        >>> try:
        ...     task.score()
        ... except ve.TaskStateError as error:
        ...     print(error)
        Task has not been solved yet. Run task.solve() first.
    """


class SolverError(VitalsError):
    """A solver broke its contract, e.g. returned a value of the wrong shape.

    Example:
        >>> task = ve.Task([{"input": "What's 2+2?", "target": "4"}], lambda x: ["4"],
        ...                ve.detect_includes())
        >>> try:
        ...     task.eval(progress=False)
        ... except ve.SolverError as error:
        ...     print(str(error).split(";")[0])
        The solver <lambda> returned a list
    """


class AgentCliError(VitalsError):
    """An agent CLI (`claude_code()`, `codex()`, `agent_cli()`) failed on a sample: it
    exited non-zero, or ended without an answer. The sample's error, not the run's: its
    message has the exit code and what the CLI printed last.

    Example:
        >>> str(AgentCliError("codex exited with 1: stream disconnected"))
        'codex exited with 1: stream disconnected'
    """


class ScorerError(VitalsError):
    """A scorer broke its contract, e.g. returned a value of the wrong shape.

    Example:
        >>> task = ve.Task([{"input": "What's 2+2?", "target": "4"}], lambda x: "4",
        ...                lambda sample: ["C"])
        >>> try:
        ...     task.eval(progress=False)
        ... except ve.ScorerError as error:
        ...     print(str(error).split(";")[0])
        The scorer <lambda> returned a list
    """


class InvalidScore(VitalsError):
    """A scorer gave one sample a score that is no number (NaN, or infinite): that sample
    is recorded with this error, as a scorer that raised would be, and the run goes on;
    a metric never sees it, and a log never holds it.

    Example:
        >>> task = ve.Task([{"input": "What's 2+2?", "target": "4"}], lambda x: "4",
        ...                lambda sample: float("nan"))
        >>> task.eval(progress=False, fail_on_error=False).get_samples()["error"].to_list()
        ['InvalidScore while scoring: The scorer <lambda> scored this sample nan: ...']
    """


class MetricError(VitalsError):
    """A metric function returned something other than a single finite number.

    Example:
        >>> task = ve.Task([{"input": "What's 2+2?", "target": "4"}], lambda x: "4",
        ...                ve.detect_includes(), metrics={"share": lambda scores: "all"})
        >>> try:
        ...     task.eval(progress=False)
        ... except ve.MetricError as error:
        ...     print(error)
        Each metric function must return a single number; metric 'share' returned a str ('all').
    """


class ProviderError(VitalsError):
    """A model provider failed a request.

    Attributes name the provider, the model, the HTTP status (when there was
    a response), the provider's request id, whether a retry may succeed, and
    `retry_after`: the seconds the provider asked to wait before one (RFC 9110
    gives Retry-After to 429 and 503; providers send it on 529 too).

    Example:
        >>> from vitals_engine.testing import MockServer
        >>> with MockServer() as server:
        ...     server.fail("404")
        ...     chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="x")
        ...     try:
        ...         chat.chat("What's 2+2?")
        ...     except ve.ProviderError as error:
        ...         print(error.provider, error.model, error.status, error.retryable)
        OpenAI gpt-4.1-mini 404 False
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
    """The provider answered 429; `retry_after` is the wait it asked for, in seconds.

    Calls are retried on it (`Retry`); it reaches the caller once the attempts are spent.

    Example:
        >>> from vitals_engine.testing import MockServer
        >>> with MockServer() as server:
        ...     server.fail("429", retry_after=2)
        ...     chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="x",
        ...                           retry=ve.Retry(max_attempts=1))
        ...     try:
        ...         chat.chat("What's 2+2?")
        ...     except ve.RateLimitError as error:
        ...         print(error.status, error.retry_after)
        429 2.0
    """

    retryable = True


class QuotaExhausted(ProviderError):
    """The account behind the API key has no quota or credit left (OpenAI's
    `insufficient_quota`, Gemini's per-day quota, Anthropic's credit balance): waiting will
    not help, so it is not retried, and the run stops with its finished samples kept.

    Example:
        >>> from vitals_engine.testing import MockServer
        >>> with MockServer() as server:
        ...     server.fail("quota")
        ...     chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="x")
        ...     try:
        ...         chat.chat("What's 2+2?")
        ...     except ve.QuotaExhausted as error:
        ...         print(error.status, error.retryable, error.stops_run)
        429 False True
    """

    stops_run = True


class AuthenticationError(ProviderError):
    """The API key is missing, wrong, or not allowed to use this model.

    Example:
        >>> from vitals_engine.testing import MockServer
        >>> with MockServer() as server:
        ...     server.fail("401")
        ...     chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="x")
        ...     try:
        ...         chat.chat("What's 2+2?")
        ...     except ve.AuthenticationError as error:
        ...         print(error.status)
        401
    """


class ProviderUnavailable(ProviderError):
    """A server-side or transient failure (5xx, 529, 408, 409, a dropped connection).

    A refused connection (`refused` is True) is retried only at an address that answered
    before in this process; where nothing ever answered (a typo in `base_url`, a local
    server not started) it fails at once (`retryable` False), saying nothing listens there.

    Example:
        >>> from vitals_engine.testing import MockServer
        >>> with MockServer() as server:
        ...     server.fail("529")
        ...     chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="x",
        ...                           retry=ve.Retry(max_attempts=1))
        ...     try:
        ...         chat.chat("What's 2+2?")
        ...     except ve.ProviderUnavailable as error:
        ...         print(error.status, error.retryable)
        529 True
    """

    retryable = True


class ProviderTimeout(ProviderError):
    """Connecting to the provider or reading its answer took too long.

    The limits are the chat's `timeouts=` (`Timeouts`).

    Example:
        >>> from vitals_engine.testing import MockServer
        >>> with MockServer() as server:
        ...     server.fail("hang")  # never answers
        ...     chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="x",
        ...                           timeouts=ve.Timeouts(read=0.2),
        ...                           retry=ve.Retry(max_attempts=1))
        ...     try:
        ...         chat.chat("What's 2+2?")
        ...     except ve.ProviderTimeout as error:
        ...         print(error.retryable)
        True
    """

    retryable = True


class MalformedResponse(ProviderError):
    """The provider's body is not valid JSON, or lacks fields its API promises.

    Example:
        >>> from vitals_engine.testing import MockServer
        >>> with MockServer() as server:
        ...     server.fail("malformed")
        ...     chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="x",
        ...                           retry=ve.Retry(max_attempts=1))
        ...     try:
        ...         chat.chat("What's 2+2?")
        ...     except ve.MalformedResponse as error:
        ...         print(error.message)
        malformed response: the body is not valid JSON. Body: '{"choices": [oops'
    """

    retryable = True


class BatchUnsupported(ProviderError):
    """The server has no batch API (it answered the batch endpoint with 404).

    It is never retried. A run in batch mode turns it into a `ConfigError` that names the
    endpoint and says to run without batch mode (docs: guide/batch-mode.md).

    Example:
        >>> issubclass(ve.BatchUnsupported, ve.ProviderError), ve.BatchUnsupported.retryable
        (True, False)
    """

    retryable = False


class ExtractionError(VitalsError):
    """A structured-output reply did not validate against the requested type.

    `raw` holds the model's reply as received.

    Example:
        >>> import msgspec
        >>> class Answer(msgspec.Struct):
        ...     answer: int
        >>> try:
        ...     ve.chat_mock(replies=["forty-two"]).extract_data("What's 6*7?", type=Answer)
        ... except ve.ExtractionError as error:
        ...     print(error.raw)
        forty-two
    """

    def __init__(self, message: str, *, raw: str) -> None:
        super().__init__(message)
        self.raw = raw


class ToolError(VitalsError):
    """A tool could not do what the model asked: raised inside a tool, it goes back to the
    model as the call's error (its message as it is), never as the sample's.

    `kind` says what went wrong, for the transcript: "timeout", "exit" (a command that
    failed), "output" (too much of it), "file", "parsing", or "unknown".

    Example:
        >>> def lookup(key: str) -> str:
        ...     "Look a key up."
        ...     raise ve.ToolError(f"no entry for {key!r}", kind="file")
    """

    def __init__(self, message: str, *, kind: str = "unknown") -> None:
        super().__init__(message)
        self.kind = kind


class SandboxError(VitalsError):
    """A sample's sandbox failed: it could not be made (its setup script failed, the
    container would not start), or it died under the sample (out of memory, its daemon
    gone). That sample ends as an error, never as a success on what was left. `kind` is
    the sandbox's kind, `output` its last output, also at the end of the message.

    Example:
        >>> from vitals_engine.sandboxes import sandbox_kind
        >>> local = sandbox_kind(ve.SandboxSpec("local"))
        >>> try:
        ...     await local.create(run_id="r1", sample_id="1", epoch=1, setup="echo no; exit 2")
        ... except ve.SandboxError as error:
        ...     print(error.kind, error.output)
        local no
    """

    def __init__(self, message: str, *, kind: str, output: str = "") -> None:
        output = output.strip()
        super().__init__(f"{message}. Its last output:\n{output}" if output else message)
        self.kind = kind
        self.output = output


class EvalFailedError(VitalsError):
    """More samples failed than `fail_on_error` allows; the log was written anyway.

    `failed` is the number of failed samples, `total` the number run,
    `log_path` where the log with every finished sample lies.

    Example:
        >>> def solver(input):
        ...     raise RuntimeError("the service is down")
        >>> task = ve.Task([{"input": "What's 2+2?", "target": "4"}], solver,
        ...                ve.detect_includes())
        >>> try:
        ...     task.eval(progress=False)
        ... except ve.EvalFailedError as error:
        ...     print(error.failed, error.total, error.log_path is not None)
        1 1 True
        >>> task.eval(progress=False, fail_on_error=False).get_samples()["error"].to_list()
        ['RuntimeError while solving: the service is down']
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
    is the whole set; `failed` and `total` count runs.

    Example:
        >>> rows = [{"input": "What's 2+2?", "target": "4"}]
        >>> def down(input):
        ...     raise RuntimeError("the service is down")
        >>> tasks = [ve.Task(rows, down, ve.detect_includes(), name="broken"),
        ...          ve.Task(rows, ve.generate(ve.chat_mock()), ve.detect_includes(), name="fine")]
        >>> try:
        ...     ve.eval_set(tasks)
        ... except ve.EvalSetFailedError as error:
        ...     print(list(error.errors), error.failed, error.total)
        ['broken'] 1 2
    """

    def __init__(self, message: str, *, eval_set: Any, errors: dict[str, Exception]) -> None:
        super().__init__(message, failed=len(errors), total=len(eval_set.tasks))
        self.eval_set = eval_set
        self.errors = errors


class BudgetExceeded(VitalsError):
    """The run reached its budget (`cost_budget`, `token_budget`, or a model's
    `cost_budget`): it started no more samples, finished those at work as far as
    their calls fit, and wrote its log with status "cancelled"; `resume=True` continues
    it. Inside the run, a model call that does not fit (and is not sent) raises it too:
    its sample stops unfinished, and a resumed run runs it again.

    `reason` says which budget ("budget reached: $4.98 of $5.00"), `spent` the dollars
    (or tokens) spent against it, `log_path` where the log lies.

    Example:
        >>> task = ve.Task([{"input": "What's 2+2?", "target": "4"}],
        ...                ve.generate(ve.chat_mock()), ve.detect_includes())
        >>> try:
        ...     task.eval(token_budget=1, progress=False)
        ... except ve.BudgetExceeded as error:
        ...     print(error.reason)
        token budget reached: 0 of 1 tokens
        >>> task.eval(resume=True, token_budget=100, progress=False).metrics
        {'accuracy': 1.0}
    """

    def __init__(
        self, message: str, *, reason: str, spent: float | None, log_path: str | None = None
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.spent = spent
        self.log_path = log_path


class LogFormatError(VitalsError):
    """A log or journal cannot be read: the message names the file and the position.

    Example:
        >>> from pathlib import Path
        >>> _ = Path("cut.json").write_text('{"version": 2, "eval": ')
        >>> try:
        ...     ve.read_log("cut.json")
        ... except ve.LogFormatError as error:
        ...     print(error)
        cut.json: cannot read the log: Input data was truncated (at byte 23, the end of the data).
    """


class NotALogError(LogFormatError):
    """A JSON file that is valid JSON but not an eval log (a manifest, a schema ...).

    Example:
        >>> from pathlib import Path
        >>> _ = Path("manifest.json").write_text('{"files": []}')
        >>> try:
        ...     ve.read_log("manifest.json")
        ... except ve.NotALogError as error:
        ...     print(error)
        manifest.json: not an eval log: Object missing required field `eval`.
    """


class LogWriteError(VitalsError):
    """A log, journal or listing cannot be written: the message names the file and why.

    `path` is the file that could not be written; the OS error is the `__cause__`.

    Example:
        >>> from pathlib import Path
        >>> _ = Path("a-file").write_text("")
        >>> task = ve.Task([{"input": "What's 2+2?", "target": "4"}], lambda x: "4",
        ...                ve.detect_includes(), dir="a-file/logs")
        >>> try:
        ...     task.eval(progress=False)
        ... except ve.LogWriteError as error:
        ...     print(error.path.startswith("a-file/logs/"))
        True
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class StoreError(VitalsError):
    """An object store holding logs (an fsspec URL such as `s3://bucket/prefix`) failed.

    `url` is the log directory's URL; the message says what was being done and what to
    do about it. The backend's own error is the `__cause__`.

    Example:
        >>> try:
        ...     task.eval(dir="s3://team-evals/qa")
        ... except ve.StoreError as error:  # or one of its kinds: StoreNotFound ...
        ...     print(error.url, error)
    """

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url


class StoreNotFound(StoreError):
    """The bucket (or container) of a log directory's URL does not exist.

    Example:
        >>> try:
        ...     task.eval(dir="s3://team-evals/qa")
        ... except ve.StoreNotFound as error:
        ...     print(error)  # names the bucket: create it, or correct the URL
    """


class StoreAccessDenied(StoreError):
    """The store refused the credentials found (environment, profile): access denied.

    Example:
        >>> try:
        ...     ve.read_logs("s3://team-evals/qa")
        ... except ve.StoreAccessDenied as error:
        ...     print(error)  # then set AWS_PROFILE (or the AWS_* variables) and try again
    """


class StoreUnreachable(StoreError):
    """The store's endpoint could not be reached (DNS, refused or dropped connections), or
    gave no answer within `VITALS_STORE_TIMEOUT` seconds. Mid-run, a run whose store stays
    away that long stops with it; the message names the log kept on this disk.

    Example:
        >>> try:
        ...     task.eval(dir="s3://team-evals/qa")
        ... except ve.StoreUnreachable as error:
        ...     print(error)  # check the network, and AWS_ENDPOINT_URL_S3 if set
    """


class StoreThrottled(StoreError):
    """The store kept answering 503 SlowDown (or another throttling reply) after retries.

    Example:
        >>> try:
        ...     task.eval(dir="s3://team-evals/qa")
        ... except ve.StoreThrottled:
        ...     time.sleep(60)  # the store asks for fewer requests: try again later
    """


class JournalInUseError(ConfigError):
    """A run's journal is locked by another run still writing it, or a run's lock in an
    object store was taken over while the store did not answer it: the message says which
    process (pid, host, since when). `path` is the journal.

    Example:
        >>> try:
        ...     task.eval(dir="s3://team-evals/qa", resume=True)
        ... except ve.JournalInUseError as error:
        ...     print(error)  # the run that holds it: pid, host, since when
    """

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

    Example:
        >>> try:
        ...     task.eval(backend=ve.Ray())
        ... except ve.WorkerLostError as error:
        ...     print(f"{error.left} samples left")
        ...     task.eval(backend=ve.Ray(), resume=True)
    """

    def __init__(self, message: str, *, left: int) -> None:
        super().__init__(message)
        self.left = left

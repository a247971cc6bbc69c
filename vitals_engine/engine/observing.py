"""What an application sees of a run besides its log: the run's fields on every record
the library logs, and, when the application set up OpenTelemetry, the run's trace.

One `RunObserver` per run (a Ray worker's continues the driver's run: its task, its id,
its trace context). The run is opened once (`running()`, at its start: the engine's
`Run.execute`, and around a run on Ray, its driver), and that is when it is decided
whether it is traced (`tracing/setup.py`); a run opened again inside (or, on a Ray
worker, by each parcel at once) shares what the first opening decided, and the last to
leave closes it. Around each sample stage, `stage(record)` binds the sample to what is
logged and, when traced, makes the sample's span current (started at its first stage);
`done(record)` ends that span when the sample is handed on; the run's end closes the
spans of the samples that did not finish, then the run's: failed when an error stopped
the run, or when its `outcome` (asked at the end: the type of the error the run's end
will raise, as for too many failed samples or a budget reached) names one.

A run that is not traced pays, per sample stage, for binding its fields (a context
variable set and reset), and nothing of OpenTelemetry is imported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .._logging import LogFields, bind_fields, reset_fields
from ..progress import Progress
from ..samples import SampleRecord
from ..tracing.setup import providers_of_run

if TYPE_CHECKING:
    from ..tracing.spans import RunTrace

__all__ = ["RunObserver"]


def _totals(progress: Progress) -> dict[str, Any]:
    """A run's figures, for its span."""
    totals: dict[str, Any] = {
        "vitals.samples.done": progress.done,
        "vitals.samples.failed": progress.failed,
        "vitals.retries": progress.retries,
        "vitals.tokens": progress.tokens,
    }
    if progress.cost is not None:
        totals["vitals.cost_usd"] = progress.cost
    return totals


class RunObserver:
    """A run's log fields and trace (see the module docstring).

    Example:
        >>> observer = RunObserver(task="sums", run_id="abc")
        >>> with observer.running(run.progress):
        ...     with observer.stage(record):
        ...         ...                  # solve or score the sample
        ...     observer.done(record)
    """

    __slots__ = ("_fields", "_open", "carrier", "run_id", "task", "trace")

    def __init__(
        self,
        *,
        task: str | None = None,
        run_id: str | None = None,
        carrier: Mapping[str, str] | None = None,
    ) -> None:
        self.task = task
        self.run_id = run_id
        #: The trace context of the run this one continues (a Ray driver's), if any.
        self.carrier = carrier
        #: The run's trace while it is open (None: not traced, or not open).
        self.trace: RunTrace | None = None
        self._fields = LogFields({})
        self._open = 0

    @contextmanager
    def running(
        self,
        progress: Callable[[], Progress] | None = None,
        outcome: Callable[[], str | None] | None = None,
    ) -> Iterator[None]:
        """The run, open while inside; `progress`: its figures, for its span's end;
        `outcome`: the type of the error the run will end with when it ends without one
        here (None: it ended well), asked when the last opening leaves."""
        if not self._open:
            self._start()
        self._open += 1
        trace = self.trace
        fields = bind_fields(self._fields)
        entered = trace.enter_run() if trace is not None else None
        error: BaseException | None = None
        try:
            yield
        except BaseException as exc:
            error = exc
            raise
        finally:
            if trace is not None:
                trace.leave(entered)
            reset_fields(fields)
            self._open -= 1
            if not self._open:
                self._end(progress, error, outcome)

    def _start(self) -> None:
        fields = {"run_id": self.run_id, "task": self.task}
        fields = {key: value for key, value in fields.items() if value is not None}
        trace = None
        providers = providers_of_run()
        if providers is not None:
            from ..tracing.spans import RunTrace

            trace = RunTrace(providers, self.carrier)
            trace.open_run(self.task, {f"vitals.{key}": value for key, value in fields.items()})
        self.trace = trace
        self._fields = LogFields(fields, trace.span_ids if trace is not None else None)

    def _end(
        self,
        progress: Callable[[], Progress] | None,
        error: BaseException | None,
        outcome: Callable[[], str | None] | None,
    ) -> None:
        trace, self.trace = self.trace, None
        if trace is not None:
            ended = outcome() if outcome is not None and error is None else None
            trace.close_run(_totals(progress()) if progress is not None else {}, error, ended)

    def carrier_out(self) -> dict[str, str] | None:
        """The open run's trace context, for the processes that continue it (None: not
        traced)."""
        return (self.trace.carrier() or None) if self.trace is not None else None

    def stage(self, record: SampleRecord) -> _Stage:
        """One stage of `record`'s sample: its id and epoch on what is logged, its span
        current when traced (a context manager)."""
        return _Stage(self, record)

    def done(self, record: SampleRecord) -> None:
        """`record`'s sample is handed on: its span ends (failed, when it did)."""
        trace = self.trace
        if trace is not None:
            error = record.error
            trace.sample_done(record.key, error.type if error is not None else None)


class _Stage:
    """`RunObserver.stage()`: a class rather than a generator, as it wraps every stage."""

    __slots__ = ("entered", "fields", "observer", "record", "trace")

    def __init__(self, observer: RunObserver, record: SampleRecord) -> None:
        self.observer = observer
        self.record = record

    def __enter__(self) -> None:
        sample, observer = self.record.sample, self.observer
        self.fields = bind_fields(
            observer._fields.with_fields(sample_id=sample.id, epoch=sample.epoch)
        )
        self.trace = trace = observer.trace
        if trace is not None:
            self.entered = trace.enter(trace.sample_span(self.record.key))

    def __exit__(self, *exc: object) -> None:
        if self.trace is not None:
            self.trace.leave(self.entered)
        reset_fields(self.fields)

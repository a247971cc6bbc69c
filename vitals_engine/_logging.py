"""The library's logger: structlog on top of the stdlib logger "vitals_engine".

The library never configures logging and adds no handler: where the
application sets up none, Python's last-resort handler prints warnings and
errors on stderr (that a model's calls are being retried, a damaged journal
line skipped ...) and nothing below; once the application configures logging
(e.g. `logging.basicConfig(level=logging.INFO)`), its settings decide. Events
are passed to the stdlib logger with their key-value pairs rendered into the
message.

structlog (and with it its console renderer, which pulls in rich when rich is
installed) is imported on the first event the stdlib logger would let
through, not when the package is imported: most runs never log anything.

Correlation: a run binds its fields (`bind_fields`: the run's id and task, then, around
each sample stage, the sample's id and epoch) in a context variable of ours, which costs
no import; every record logged in that context carries them as attributes of the stdlib
record (`record.run_id`, `record.task`, `record.sample_id`, `record.epoch`), and, when
the run is traced, the current span's `trace_id` and `span_id` (hex), for a handler or
formatter of the application to use. The message itself stays as it was.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import structlog

__all__ = ["LogFields", "bind_fields", "log", "reset_fields"]

_stdlib = logging.getLogger("vitals_engine")


class LogFields:
    """The fields every record logged in a context carries, and where the ids of the
    current span come from (None: the run is not traced).

    Example:
        >>> run = LogFields({"run_id": "abc", "task": "sums"})
        >>> run.with_fields(sample_id=1, epoch=1).fields["sample_id"]
        1
    """

    __slots__ = ("fields", "span_ids")

    def __init__(
        self,
        fields: Mapping[str, Any],
        span_ids: Callable[[], Mapping[str, str] | None] | None = None,
    ) -> None:
        self.fields = fields
        self.span_ids = span_ids

    def with_fields(self, **more: Any) -> LogFields:
        """These fields and `more`, with the same source of span ids."""
        return LogFields({**self.fields, **more}, self.span_ids)

    def extra(self) -> dict[str, Any]:
        """What a record logged now carries: the fields, then the current span's ids."""
        extra = dict(self.fields)
        if self.span_ids is not None:
            ids = self.span_ids()
            if ids:
                extra.update(ids)
        return extra


_fields: ContextVar[LogFields | None] = ContextVar("vitals_log_fields", default=None)


def bind_fields(fields: LogFields | None) -> Token[LogFields | None]:
    """Make `fields` what the records logged in this context carry (until `reset_fields`).

    Example:
        >>> token = bind_fields(LogFields({"run_id": "abc", "task": "sums"}))
        >>> log.warning("something happened")   # record.run_id == "abc"
        >>> reset_fields(token)
    """
    return _fields.set(fields)


def reset_fields(token: Token[LogFields | None]) -> None:
    """Undo the `bind_fields` that returned `token`."""
    _fields.reset(token)


def _with_context(render: Callable[..., str]) -> Callable[..., Any]:
    """The last processor: the message as `render` makes it, and the context's fields as
    the stdlib record's `extra`."""

    def final(logger: Any, method: str, event: Any) -> Any:
        message = render(logger, method, event)
        bound = _fields.get()
        if bound is None:
            return message
        return (message,), {"extra": bound.extra()}

    return final


class _Log:
    """`info()` and `warning()` of a structlog logger that is built on first use."""

    def __init__(self) -> None:
        self._logger: structlog.stdlib.BoundLogger | None = None

    def _structlog(self) -> structlog.stdlib.BoundLogger:
        logger = self._logger
        if logger is None:
            import structlog

            logger = self._logger = structlog.wrap_logger(
                _stdlib,
                processors=[
                    structlog.stdlib.filter_by_level,
                    structlog.processors.format_exc_info,
                    _with_context(
                        structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=False)
                    ),
                ],
                wrapper_class=structlog.stdlib.BoundLogger,
                cache_logger_on_first_use=True,
            )
        return logger

    def info(self, event: str, **fields: Any) -> None:
        """Log `event` with its key-value `fields` at INFO."""
        if _stdlib.isEnabledFor(logging.INFO):
            self._structlog().info(event, **fields)

    def warning(self, event: str, **fields: Any) -> None:
        """Log `event` with its key-value `fields` at WARNING."""
        if _stdlib.isEnabledFor(logging.WARNING):
            self._structlog().warning(event, **fields)


log = _Log()

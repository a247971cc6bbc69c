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
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import structlog

__all__ = ["log"]

_stdlib = logging.getLogger("vitals_engine")


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
                    structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=False),
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

"""The library's logger: structlog on top of the stdlib logger "vitals_engine".

The library never configures logging and adds no handler: where the
application sets up none, Python's last-resort handler prints warnings and
errors on stderr (that a model's calls are being retried, a damaged journal
line skipped ...) and nothing below; once the application configures logging
(e.g. `logging.basicConfig(level=logging.INFO)`), its settings decide. Events
are passed to the stdlib logger with their key-value pairs rendered into the
message.
"""

from __future__ import annotations

import logging

import structlog

__all__ = ["log"]

_stdlib = logging.getLogger("vitals_engine")

log: structlog.stdlib.BoundLogger = structlog.wrap_logger(
    _stdlib,
    processors=[
        structlog.stdlib.filter_by_level,
        structlog.processors.format_exc_info,
        structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=False),
    ],
    wrapper_class=structlog.stdlib.BoundLogger,
    cache_logger_on_first_use=True,
)

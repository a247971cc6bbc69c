"""Which OpenTelemetry providers a run reports to: decided once, at its start.

A run is traced (spans) and measured (metrics) only when the application configured a
tracer provider or a meter provider, through OpenTelemetry's API or `use_providers()`.
An application can only have configured a global provider if it imported
`opentelemetry.trace` (or `opentelemetry.metrics`), so the check looks in `sys.modules`
first and imports nothing: without the package, or without a provider set, a run pays
for one dictionary lookup per module, once. A global provider still OpenTelemetry's
proxy (nothing set yet) or a no-op one counts as none.

`use_providers()` names the providers runs use in place of the global ones (for an
application that keeps its providers to itself, and for tests: OpenTelemetry's global
providers can be set once per process).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["Providers", "providers_of_run", "use_providers"]


@dataclass(frozen=True, slots=True)
class Providers:
    """The tracer and meter providers of one run (None: that signal is not reported)."""

    tracer_provider: Any = None
    meter_provider: Any = None


#: The providers `use_providers()` set, in place of the global ones (None: the global ones).
_chosen: Providers | None = None


@contextmanager
def use_providers(*, tracer_provider: Any = None, meter_provider: Any = None) -> Iterator[None]:
    """Runs started inside report to these providers instead of OpenTelemetry's global
    ones (None: that signal is not reported). Process-wide while it lasts.

    Example:
        >>> from opentelemetry.sdk.trace import TracerProvider
        >>> with use_providers(tracer_provider=TracerProvider()):
        ...     task.eval()
    """
    global _chosen
    before = _chosen
    _chosen = Providers(tracer_provider, meter_provider)
    try:
        yield
    finally:
        _chosen = before


def providers_of_run() -> Providers | None:
    """The providers a run starting now reports to; None when there are none (the run
    is neither traced nor measured, and nothing of OpenTelemetry is imported).

    Example:
        >>> providers_of_run() is None     # in a process that set no provider
        True
    """
    chosen = _chosen
    if chosen is None:
        chosen = Providers(_global_tracer_provider(), _global_meter_provider())
    if chosen.tracer_provider is None and chosen.meter_provider is None:
        return None
    return chosen


def _global_tracer_provider() -> Any:
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    return provider


def _global_meter_provider() -> Any:
    metrics = sys.modules.get("opentelemetry.metrics")
    if metrics is None:
        return None
    provider = metrics.get_meter_provider()
    # the proxy's class is private to the API: known by its name
    if isinstance(provider, metrics.NoOpMeterProvider) or type(provider).__name__.startswith(
        "_Proxy"
    ):
        return None
    return provider

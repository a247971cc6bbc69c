"""A run as an application's OpenTelemetry sees it: spans, metrics, correlated logs.

When the application configured a tracer or meter provider (OpenTelemetry's global
ones, or `use_providers()`), a run is a span, each sample a child span, each model call
and tool call a span in the GenAI semantic conventions, with metrics beside them; when
it did not, nothing here is imported on a run's path and nothing changes.
`setup.py` decides, once per run; `spans.py` makes the spans, `instruments.py` the
metrics, `genai.py` and `contents.py` the attributes. The model call's span is one
layer of the call path (`chats/layers/traced.py`); the run's and samples' come from the
engine (`engine/observing.py`).

Example:
    >>> from vitals_engine.tracing import use_providers
    >>> with use_providers(tracer_provider=provider):
    ...     task.eval()
"""

from .setup import use_providers

__all__ = ["use_providers"]

"""Tools: typed Python functions the model may call.

A function's signature and docstring become a JSON-schema tool definition;
the model's arguments are validated against the type hints before the call.
A tool that raises sends the error back to the model instead of failing the
conversation (a `ToolError`'s message as it is, any other error with its type). In a
traced run (`tracing/`), each tool call is a span; in a sample stage, each is recorded
in the sample's transcript (a span of its own, holding what the tool did, and the call:
`vocab/transcript.py`).
"""

from __future__ import annotations

import functools
import inspect
import re
import time
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import msgspec

from .._errors import ConfigError, ToolError
from ..pacing.scope import current_scope
from ..pacing.transcript import record, recording, span
from ..vocab.model_calls import ToolDef
from ..vocab.transcript import ToolRecord
from ..vocab.turns import ContentToolRequest, ContentToolResult
from .layers.stacks import CallStacks

if TYPE_CHECKING:
    from ..tracing.spans import RunTrace

__all__ = ["Tool", "tool_from_function"]

_GOOGLE_ARG = re.compile(r"^\s*(\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")
_REST_PARAM = re.compile(r"^\s*:param\s+(?:\w+\s+)?(\w+)\s*:\s*(.+)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(summary, {param: description}) from a Google- or reST-style docstring."""
    doc = inspect.cleandoc(doc or "")
    summary_lines: list[str] = []
    params: dict[str, str] = {}
    in_args = False
    for line in doc.splitlines():
        stripped = line.strip()
        rest = _REST_PARAM.match(line)
        if rest:
            params[rest[1]] = rest[2].strip()
            continue
        if stripped.lower() in ("args:", "arguments:", "parameters:"):
            in_args = True
            continue
        if in_args:
            if stripped.endswith(":") and not line.startswith((" ", "\t")):
                in_args = False
                continue
            arg = _GOOGLE_ARG.match(line)
            if arg:
                params[arg[1]] = arg[2].strip()
            elif stripped and params:
                last = next(reversed(params))
                params[last] += " " + stripped
            continue
        if not params and not stripped.startswith(":"):
            summary_lines.append(line)
    summary = "\n".join(summary_lines).strip()
    return summary, params


class Tool:
    """A registered tool: its definition for the model and the function to call.

    `Chat.register_tool()` makes one from a function (its docstring and typed parameters
    tell the model what it does).

    Example:
        >>> chat = ve.chat_mock()
        >>> def add(a: int, b: int) -> int:
        ...     '''Add two numbers.'''
        ...     return a + b
        >>> tool = chat.register_tool(add)
        >>> tool.name, chat.tools
        ('add', [<Tool add>])
        >>> chat.chat("Use add to add 3 and 4")  # the mock calls the tool the prompt names
        'The tool returned 7.'
    """

    def __init__(self, fn: Callable[..., Any], definition: ToolDef, hints: dict[str, Any]):
        self.fn = fn
        self.definition = definition
        self._hints = hints
        self._is_async = inspect.iscoroutinefunction(fn)

    @property
    def name(self) -> str:
        return self.definition.name

    async def invoke(self, request: ContentToolRequest) -> ContentToolResult:
        """Call the tool with the model's arguments; errors become tool errors."""
        if not recording():
            return await self._traced(request)
        with span(self.name, "tool") as tool_span:
            started = time.time()  # inside its span: the log places the call at its start
            result = await self._traced(request)
        error = result.error
        record(
            ToolRecord(
                call_id=request.id,
                function=self.name,
                arguments=dict(request.arguments or {}),
                result=_text(result.value) if error is None else "",
                started=started,
                completed=time.time(),
                error_type=None if error is None else result.error_kind or "unknown",
                error_message=error,
                span=tool_span,
            )
        )
        return result

    async def _traced(self, request: ContentToolRequest) -> ContentToolResult:
        trace = _run_trace()
        if trace is None:
            return await self._invoke(request)
        with trace.tool(self.name, request.id) as tool_span:
            result = await self._invoke(request)
            tool_span.result(request.arguments, result)
        return result

    async def _invoke(self, request: ContentToolRequest) -> ContentToolResult:
        try:
            kwargs = {
                key: msgspec.convert(value, self._hints.get(key, Any), strict=False)
                for key, value in (request.arguments or {}).items()
            }
            if self._is_async:
                value = await self.fn(**kwargs)
            else:
                value = await anyio.to_thread.run_sync(functools.partial(self.fn, **kwargs))
            value = msgspec.to_builtins(value)
        except ToolError as exc:  # the tool's own words for the model
            return ContentToolResult(request.id, request.name, error=str(exc), error_kind=exc.kind)
        except Exception as exc:  # the model gets to see what went wrong and try again
            return ContentToolResult(request.id, request.name, error=f"{type(exc).__name__}: {exc}")
        return ContentToolResult(request.id, request.name, value=value)

    def __repr__(self) -> str:
        return f"<Tool {self.name}>"


def _text(value: Any) -> str:
    """A tool's value as the text the transcript records."""
    if isinstance(value, str):
        return value
    return msgspec.json.encode(value).decode()


def _run_trace() -> RunTrace | None:
    """The trace of the run whose sample calls the tool (None: not traced, or no run)."""
    scope = current_scope()
    stacks = scope.stacks if scope is not None else None
    return stacks.trace if isinstance(stacks, CallStacks) else None


def tool_from_function(fn: Callable[..., Any], *, name: str | None = None) -> Tool:
    """Build a `Tool` from a typed function and its docstring.

    Example:
        >>> def add(a: int, b: int) -> int:
        ...     '''Add two integers.
        ...
        ...     Args:
        ...         a: The first number.
        ...         b: The second number.
        ...     '''
        ...     return a + b
        >>> tool_from_function(add).definition.parameters["required"]
        ['a', 'b']
    """
    if not callable(fn):
        raise ConfigError(f"register_tool() needs a function, not {type(fn).__name__}.")
    tool_name = name or getattr(fn, "__name__", "")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]{0,63}", tool_name or ""):
        raise ConfigError(f"'{tool_name}' is not a valid tool name; pass name=... to set one.")
    summary, param_docs = _parse_docstring(fn.__doc__ or "")
    if not summary:
        raise ConfigError(
            f"Tool '{tool_name}' has no docstring: the model needs one to know when to call it."
        )
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:
        raise ConfigError(f"Cannot read the type hints of tool '{tool_name}': {exc}") from exc
    params = [
        p
        for p in signature.parameters.values()
        if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    missing = [p.name for p in params if p.name not in hints]
    if missing:
        raise ConfigError(f"Tool '{tool_name}' needs type annotations on: {', '.join(missing)}.")
    schemas, components = msgspec.json.schema_components(
        [hints[p.name] for p in params], ref_template="#/$defs/{name}"
    )
    properties: dict[str, Any] = {}
    for param, schema in zip(params, schemas, strict=True):
        prop = dict(schema)
        if param.name in param_docs:
            prop["description"] = param_docs[param.name]
        properties[param.name] = prop
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": [p.name for p in params if p.default is inspect.Parameter.empty],
        "additionalProperties": False,
    }
    if components:
        parameters["$defs"] = components
    definition = ToolDef(tool_name, summary, parameters)
    return Tool(fn, definition, {p.name: hints[p.name] for p in params})

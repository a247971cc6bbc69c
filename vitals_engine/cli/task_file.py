"""Finding the tasks of a user's file: importing it, its Tasks and the functions that
return one (annotated or by their code), refusing those with required parameters."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import inspect
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from .._errors import ConfigError, DatasetError
from ..task.task import Task
from .shared import RunError, UsageError

__all__ = ["find_tasks_or_fail", "imported"]


@contextlib.contextmanager
def imported(path: Path) -> Iterator[ModuleType]:
    """The task file imported as a module, its directory on sys.path while in use."""
    path = path.resolve()
    name = path.stem if path.stem.isidentifier() else "vitals_task_file"
    existing = sys.modules.get(name)
    if existing is not None and getattr(existing, "__file__", None) != str(path):
        name = f"_vitals_task_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"Cannot import '{path}' as a Python module.")
    module = importlib.util.module_from_spec(spec)
    saved_path = list(sys.path)
    saved_module = sys.modules.get(name)
    sys.path.insert(0, str(path.parent))
    sys.modules[name] = module
    try:
        try:
            spec.loader.exec_module(module)
        except (ConfigError, DatasetError, KeyboardInterrupt):
            raise
        except SystemExit as exc:
            raise RunError(f"importing '{path.name}' called sys.exit({exc.code!r}).") from exc
        except Exception as exc:
            where = _user_frame(exc, path)
            raise RunError(
                f"importing '{path.name}' failed{where}: {type(exc).__name__}: {exc}"
            ) from exc
        yield module
    finally:
        sys.path[:] = saved_path
        if saved_module is not None:
            sys.modules[name] = saved_module
        else:
            sys.modules.pop(name, None)


def _user_frame(exc: BaseException, path: Path) -> str:
    """' (line N)' of the deepest frame of `exc` in the task file, or ''."""
    if isinstance(exc, SyntaxError) and exc.lineno:
        return f" (line {exc.lineno})"
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
    return f" (line {lines[-1]})" if lines else ""


def _task_returning_functions(path: Path) -> set[str]:
    """Names of top-level functions of the file whose code returns `Task(...)` / `ve.Task(...)`."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return set()
    found = set()
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.Return) and isinstance(inner.value, ast.Call):
                func = inner.value.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called == "Task":
                    found.add(node.name)
    return found


def _annotated_task(fn: Callable[..., Any]) -> bool:
    """Whether `fn` is annotated to return a Task."""
    try:
        returns = inspect.signature(fn, eval_str=True).return_annotation
    except Exception:
        returns = getattr(fn, "__annotations__", {}).get("return")
    if isinstance(returns, type):
        return issubclass(returns, Task)
    return isinstance(returns, str) and returns.rsplit(".", 1)[-1] == "Task"


def _required_params(fn: Callable[..., Any]) -> list[str]:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    return [
        p.name
        for p in params
        if p.default is inspect.Parameter.empty
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]


def _call_task_function(fn: Callable[..., Any], name: str, path: Path) -> Task:
    required = _required_params(fn)
    if required:
        raise UsageError(
            f"'{name}' in {path.name} takes required argument(s) {', '.join(required)}; "
            "a task function must be callable without arguments."
        )
    try:
        made = fn()
    except (ConfigError, DatasetError, KeyboardInterrupt):
        raise
    except Exception as exc:
        raise RunError(
            f"building task '{name}' failed{_user_frame(exc, path.resolve())}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(made, Task):
        raise UsageError(
            f"'{name}' in {path.name} returned {type(made).__name__}, not a vitals_engine Task."
        )
    return made


def _find_tasks(module: ModuleType, path: Path, name: str | None) -> list[tuple[str, Task]]:
    """The tasks of the file: the one named `name`, else every module-level Task and task
    function, in the order they are defined."""
    if name is not None:
        if not hasattr(module, name):
            known = ", ".join(_task_names(module, path))
            raise UsageError(
                f"No '{name}' in {path.name}." + (f" Tasks there: {known}." if known else "")
            )
        obj = getattr(module, name)
        if isinstance(obj, Task):
            return [(name, obj)]
        if callable(obj):
            return [(name, _call_task_function(obj, name, path))]
        raise UsageError(f"'{name}' in {path.name} is a {type(obj).__name__}, not a Task.")
    tasks: list[tuple[str, Task]] = []
    seen: set[int] = set()
    for attr in _task_names(module, path):
        obj = getattr(module, attr)
        task = obj if isinstance(obj, Task) else _call_task_function(obj, attr, path)
        if id(task) not in seen:
            seen.add(id(task))
            tasks.append((attr, task))
    return tasks


def _task_names(module: ModuleType, path: Path) -> list[str]:
    """Names of the module's Tasks and task functions, in definition order, without calling."""
    returning = _task_returning_functions(path)
    names = []
    for attr, obj in list(vars(module).items()):
        if attr.startswith("_"):
            continue
        if isinstance(obj, Task) or (
            inspect.isfunction(obj)
            and obj.__module__ == module.__name__
            and (attr in returning or _annotated_task(obj))
            and not _required_params(obj)
        ):
            names.append(attr)
    return names


def find_tasks_or_fail(module: ModuleType, path: Path, name: str | None) -> list[tuple[str, Task]]:
    """The tasks of the file, as `_find_tasks`; a usage error when there is none."""
    tasks = _find_tasks(module, path, name)
    if not tasks:
        raise UsageError(
            f"No Task in {path}: define a module-level `Task(...)`, or a function without "
            "arguments returning one (annotated `-> Task`), or pick one with FILE.py:name."
        )
    return tasks

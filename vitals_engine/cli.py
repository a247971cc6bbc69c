"""The `vitals` command: run evals from Python files, list, view and bundle their logs.

    vitals eval FILE.py[:task] [--model provider/model] [--epochs N] ...
    vitals ls [DIR]
    vitals view [DIR] [--port N] [--host H]
    vitals bundle [LOG_DIR] [--output-dir DIR] [--overwrite]

Exit codes: 0 success; 1 when samples failed beyond `--fail-on-error` or a
run failed; 2 for usage errors (bad arguments, a missing file, no Task in the
file, a `ConfigError` or `DatasetError` while building the task). Errors are
one line on stderr; `--debug` adds the traceback.

`main(argv)` returns the exit code, so it can be called in-process; the
console script and `python -m vitals_engine` exit with it.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import math
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

from . import config
from ._errors import ConfigError, DatasetError, EvalFailedError, LogFormatError
from .chats.chat import Chat
from .chats.constructors import chat as make_chat
from .log import schema as log_schema
from .log.decoding import NotALogError
from .log.formats import LOG_SUFFIXES
from .log.reader import read_log
from .pacing.limits import Limits
from .report import summary
from .task.task import Task

__all__ = ["main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

#: JSON files a log directory holds that are not logs: viewer manifests.
_MANIFESTS = {"listing.json", "logs.json", "eval-set.json"}


class UsageError(Exception):
    """A mistake in how the command was called: exit code 2."""


class RunError(Exception):
    """A failure while running user code (importing the task file, building a task): exit 1."""


# -- argument parsing ------------------------------------------------------------------------------

MAIN_EPILOG = """\
Examples:
  vitals eval evals/arithmetic.py                        run every Task in the file
  vitals eval evals/arithmetic.py:hard --epochs 3        run only the task `hard`, 3 epochs
  vitals eval evals/arithmetic.py --model openai/gpt-4.1-mini --rpm 500
  vitals ls                                              list the logs in VITALS_LOG_DIR (or ./logs)
  vitals view logs --port 7576                           open the log viewer
  vitals bundle logs --output-dir site                   a static site of the viewer and logs

Run `vitals COMMAND --help` for the options of a command.
"""

EVAL_EPILOG = """\
The file is imported as a module (its directory goes on sys.path). Tasks are
module-level `Task` objects, or functions without required arguments that
return one (annotated `-> Task` or ending in `return ve.Task(...)`). With
several tasks and no `:name`, all of them run in order.

Examples:
  vitals eval examples/cli_task.py
  vitals eval evals/suite.py:arithmetic --epochs 5 --max-concurrency 20
  vitals eval evals/suite.py --model anthropic/claude-sonnet-4-5 --rpm 50
  vitals eval evals/suite.py --fail-on-error 0.05 --log-dir runs/today
  vitals eval evals/suite.py --log-format eval --no-progress
  vitals eval evals/suite.py --resume                  continue the newest unfinished run
  vitals eval evals/suite.py --resume logs/2026-01-14T16-19-11-00-00_suite_abc.journal

Exit codes: 0 success, 1 samples failed beyond --fail-on-error (the log is
still written) or the run failed, 2 usage error.
"""

LS_EPILOG = """\
One line per log, newest first: date, task, model, status, samples, first
metric and file. Reads .json and .eval logs and the journals of runs still
going (or killed), header only.

Examples:
  vitals ls
  vitals ls runs/today
"""

VIEW_EPILOG = """\
Examples:
  vitals view                       the logs in VITALS_LOG_DIR (or ./logs), on a free port
  vitals view runs/today --port 7576
  vitals view logs --host 0.0.0.0 --port 8080
"""

BUNDLE_EPILOG = """\
Writes the viewer and every log into one directory that any static web host
(GitHub Pages, S3, Netlify ...) can serve.

Examples:
  vitals bundle --output-dir site
  vitals bundle runs/today --output-dir public/evals --overwrite
"""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, raised rather than exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see `{self.prog} --help`)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return value


def _positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text!r}")
    return value


def _fail_on_error(text: str) -> bool | int | float:
    """`--fail-on-error`: "true"/"false", a count ("5") or a fraction below 1 ("0.1")."""
    lowered = text.strip().lower()
    if lowered in ("true", "yes"):
        return True
    if lowered in ("false", "no"):
        return False
    with contextlib.suppress(ValueError):
        count = int(lowered)
        if count >= 0:
            return count
    with contextlib.suppress(ValueError):
        fraction = float(lowered)
        if 0 <= fraction < 1:
            return fraction
    raise argparse.ArgumentTypeError(
        f"must be true (no failed sample allowed), false (any number), a count such as 5 "
        f"or a fraction below 1 such as 0.1, not {text!r}"
    )


def _add_debug(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print the full traceback of an error",
    )


def build_parser() -> argparse.ArgumentParser:
    """The parser of the `vitals` command and its subcommands."""
    formatter = argparse.RawDescriptionHelpFormatter
    parser = _Parser(
        prog="vitals",
        description="Evaluate products built on large language models: run evals, "
        "list, view and bundle their logs.",
        epilog=MAIN_EPILOG,
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=f"vitals-engine {_version()}")
    parser.add_argument(
        "--debug", action="store_true", default=False, help="print the full traceback of an error"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    run = commands.add_parser(
        "eval",
        help="run the Task(s) of a Python file",
        description="Run the Task(s) defined in a Python file and print a summary.",
        epilog=EVAL_EPILOG,
        formatter_class=formatter,
    )
    run.add_argument(
        "target", metavar="FILE.py[:task]", help="the task file, and optionally a task name"
    )
    run.add_argument(
        "--model",
        metavar="PROVIDER/MODEL",
        help="run the solver on this model instead (e.g. openai/gpt-4.1-mini); "
        "the solver must take `solver_chat`, as ve.generate() does",
    )
    run.add_argument("--epochs", type=_positive_int, metavar="N", help="runs per sample")
    run.add_argument(
        "--max-concurrency", type=_positive_int, metavar="N", help="samples in flight at once"
    )
    run.add_argument(
        "--rpm", type=_positive_number, metavar="N", help="requests per minute for every model"
    )
    run.add_argument("--log-dir", metavar="DIR", help="where to write the log(s)")
    run.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=None,
        metavar="LOG",
        help="continue an unfinished run: the newest journal of the task, or this journal or log",
    )
    run.add_argument(
        "--fail-on-error",
        type=_fail_on_error,
        metavar="X",
        help="failed samples tolerated: a count (5), a fraction (0.1), true (none, the "
        "default) or false (any)",
    )
    run.add_argument("--log-format", choices=["json", "eval"], help="the log's format")
    run.add_argument("--no-progress", action="store_true", help="do not draw a progress bar")
    _add_debug(run)
    run.set_defaults(handler=_cmd_eval)

    ls = commands.add_parser(
        "ls",
        help="list the logs of a directory",
        description="List the eval logs of a directory, newest first.",
        epilog=LS_EPILOG,
        formatter_class=formatter,
    )
    ls.add_argument("dir", nargs="?", metavar="DIR", help="default: VITALS_LOG_DIR, else ./logs")
    _add_debug(ls)
    ls.set_defaults(handler=_cmd_ls)

    view = commands.add_parser(
        "view",
        help="open the log viewer",
        description="Serve the log viewer on a log directory until interrupted.",
        epilog=VIEW_EPILOG,
        formatter_class=formatter,
    )
    view.add_argument("dir", nargs="?", metavar="DIR", help="default: VITALS_LOG_DIR, else ./logs")
    view.add_argument("--host", default="127.0.0.1", help="default: 127.0.0.1")
    view.add_argument("--port", type=_port, metavar="N", help="default: a free port")
    _add_debug(view)
    view.set_defaults(handler=_cmd_view)

    bundle = commands.add_parser(
        "bundle",
        help="write a static site of the viewer and the logs",
        description="Bundle the log viewer and the logs of a directory into a static site.",
        epilog=BUNDLE_EPILOG,
        formatter_class=formatter,
    )
    bundle.add_argument(
        "log_dir", nargs="?", metavar="LOG_DIR", help="default: VITALS_LOG_DIR, else ./logs"
    )
    bundle.add_argument("--output-dir", metavar="DIR", help="where to write the site")
    bundle.add_argument(
        "--overwrite", action="store_true", help="replace the output directory if it exists"
    )
    _add_debug(bundle)
    bundle.set_defaults(handler=_cmd_bundle)
    return parser


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number between 0 and 65535, not {text!r}")
    return value


# -- entry point ---------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run `vitals` with `argv` (default: the process's arguments); return the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(args_list)
    except UsageError as exc:
        _say(str(exc))
        return EXIT_USAGE
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    debug = bool(getattr(args, "debug", False))
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except KeyboardInterrupt:
        _say("interrupted.")
        return EXIT_INTERRUPTED
    except UsageError as exc:
        _report(exc, debug, prefix=f"vitals {args.command}: error: ")
        return EXIT_USAGE
    except (ConfigError, DatasetError) as exc:
        _report(exc, debug, prefix=f"vitals {args.command}: error: ")
        return EXIT_USAGE
    except RunError as exc:
        _report(exc, debug, prefix=f"vitals {args.command}: error: ", cause=exc.__cause__)
        return EXIT_FAILED
    except Exception as exc:
        _report(exc, debug, prefix=f"vitals {args.command}: error: {type(exc).__name__}: ")
        return EXIT_FAILED


def _say(message: str) -> None:
    print(" ".join(message.split()) if "\n" in message else message, file=sys.stderr)


def _report(
    exc: BaseException, debug: bool, prefix: str, cause: BaseException | None = None
) -> None:
    if debug:
        shown = cause or exc
        traceback.print_exception(type(shown), shown, shown.__traceback__, file=sys.stderr)
    _say(prefix + str(exc))


def _version() -> str:
    try:
        return importlib.metadata.version("vitals-engine")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def _default_dir(given: str | None) -> Path:
    return Path(given or config.log_dir() or config.DEFAULT_LOG_DIR)


# -- vitals eval ---------------------------------------------------------------------------------


def _split_target(target: str) -> tuple[Path, str | None]:
    """`FILE.py:name` -> (FILE.py, name); a plain path (even `C:\\x.py`) -> (path, None)."""
    head, sep, tail = target.rpartition(":")
    if sep and head and tail.isidentifier() and not Path(target).exists():
        return Path(head), tail
    if sep and head and not tail:
        raise UsageError(f"'{target}': the task name after ':' is empty.")
    return Path(target), None


@contextlib.contextmanager
def _imported(path: Path) -> Iterator[ModuleType]:
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


def _find_tasks_or_fail(module: ModuleType, path: Path, name: str | None) -> list[tuple[str, Task]]:
    tasks = _find_tasks(module, path, name)
    if not tasks:
        raise UsageError(
            f"No Task in {path}: define a module-level `Task(...)`, or a function without "
            "arguments returning one (annotated `-> Task`), or pick one with FILE.py:name."
        )
    return tasks


def _takes_solver_chat(task: Task) -> bool:
    return task.takes("solver_chat")


def _swapped_chat(model: str, task: Task) -> Chat:
    """A chat with `model` that keeps the system prompt and tools of the solver's own chat."""
    current = getattr(task.solver, "solver_chat", None)
    if not isinstance(current, Chat):
        return make_chat(model)
    swapped = make_chat(model, system_prompt=current.system_prompt)
    for tool in current.tools:
        swapped.register_tool(tool.fn, name=tool.name)
    return swapped


@dataclass
class _Outcome:
    task: Task
    code: int


def _cmd_eval(args: argparse.Namespace) -> int:
    path, name = _split_target(args.target)
    if not path.exists():
        raise UsageError(f"File not found: {path}")
    if not path.is_file():
        raise UsageError(f"{path} is not a file: give a Python file with a Task in it.")
    if path.suffix != ".py":
        raise UsageError(f"{path} is not a Python file (.py).")

    with _imported(path) as module:
        tasks = _find_tasks_or_fail(module, path, name)
        if isinstance(args.resume, str) and len(tasks) > 1:
            names = ", ".join(n for n, _ in tasks)
            raise UsageError(
                f"--resume {args.resume} continues one task, but {path.name} has "
                f"{len(tasks)} ({names}); pick one with {path}:NAME."
            )
        routed: list[dict[str, Any]] = [{} for _ in tasks]
        if args.model:
            for attr, task in tasks:
                if not _takes_solver_chat(task):
                    raise UsageError(
                        f"--model cannot swap the model of task '{task.name}' ({attr}): its "
                        "solver takes no `solver_chat` argument. Use ve.generate(...) or give "
                        "the solver a `solver_chat` parameter."
                    )
            routed = [{"solver_chat": _swapped_chat(args.model, task)} for _, task in tasks]
        options: dict[str, Any] = {
            "epochs": args.epochs,
            "max_concurrency": args.max_concurrency,
            "limits": Limits(rpm=args.rpm) if args.rpm is not None else None,
            "fail_on_error": args.fail_on_error,
            "progress": False if args.no_progress else None,
            "log_format": args.log_format,
            "resume": args.resume,
        }
        outcomes: list[_Outcome] = []
        debug = bool(getattr(args, "debug", False))
        for (_, task), kwargs in zip(tasks, routed, strict=True):
            if args.log_dir:
                task.dir = Path(args.log_dir)
            outcomes.append(_run_task(task, options, kwargs, debug))
            if outcomes[-1].code == EXIT_INTERRUPTED:
                break
    return max((o.code for o in outcomes), default=EXIT_OK)


def _run_task(task: Task, options: dict[str, Any], routed: dict[str, Any], debug: bool) -> _Outcome:
    """Run one task, print its summary, and say how it went as an exit code."""
    prefix = f"vitals eval: task '{task.name}': "
    try:
        task.eval(**options, **routed)
    except EvalFailedError as exc:
        _print_summary(task)
        _report(exc, debug, prefix=prefix)
        return _Outcome(task, EXIT_FAILED)
    except (ConfigError, DatasetError) as exc:
        if task.log_path is not None:
            _print_summary(task)
        _report(exc, debug, prefix=prefix)
        return _Outcome(task, EXIT_USAGE if task.log_path is None else EXIT_FAILED)
    except KeyboardInterrupt:
        if task.log_path is not None:
            _print_summary(task)
        _say(prefix + "interrupted; the finished samples are in the log.")
        return _Outcome(task, EXIT_INTERRUPTED)
    except Exception as exc:
        if task.log_path is not None:
            _print_summary(task)
        _report(exc, debug, prefix=f"{prefix}the run failed: {type(exc).__name__}: ")
        return _Outcome(task, EXIT_FAILED)
    _print_summary(task)
    return _Outcome(task, EXIT_OK)


def _print_summary(task: Task) -> None:
    try:
        text = summary(task)
    except Exception as exc:  # a half-finished task may not summarize; the log is what counts
        text = f"Task {task.name}: no summary ({type(exc).__name__}: {exc})"
        if task.log_path is not None:
            text += f"\n\nLog: {task.log_path}"
    print(text + "\n", flush=True)


# -- vitals ls -----------------------------------------------------------------------------------


def _log_files(root: Path) -> Iterator[Path]:
    """Logs under `root`: .json/.eval files and journals of runs without a final log."""
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if any(part.startswith(".") for part in relative.parts):
            continue
        if path.suffix.lower() not in LOG_SUFFIXES or path.name in _MANIFESTS:
            continue
        if not path.is_file():
            continue
        if path.suffix == ".journal" and any(
            path.with_suffix(ext).exists() for ext in (".json", ".eval")
        ):
            continue
        yield path


def _created(header: log_schema.EvalLog, path: Path) -> datetime:
    try:
        when = datetime.fromisoformat(header.eval.created)
    except (TypeError, ValueError):
        return datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)
    return when if when.tzinfo is not None else when.astimezone()


def _samples_cell(header: log_schema.EvalLog) -> str:
    results = header.results
    if isinstance(results, log_schema.EvalResults):
        total, done = results.total_samples, results.completed_samples
        return f"{total}" if done == total else f"{done}/{total}"
    return "-"


def _metric_cell(metrics: dict[str, float | int | None] | None) -> str:
    for name, value in (metrics or {}).items():
        return f"{name} {value:.4g}" if isinstance(value, int | float) else f"{name} -"
    return "-"


def _cmd_ls(args: argparse.Namespace) -> int:
    root = _default_dir(args.dir)
    if not root.exists():
        raise UsageError(f"Log directory '{root}' not found.")
    if not root.is_dir():
        raise UsageError(f"'{root}' is a file, not a log directory.")
    rows: list[tuple[datetime, list[str]]] = []
    for path in _log_files(root):
        name = str(path.relative_to(root))
        try:
            logged = read_log(path, header_only=True)
        except NotALogError:
            continue
        except LogFormatError:
            when = datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)
            rows.append((when, [_when(when), "?", "?", "unreadable", "-", "-", name]))
            continue
        header = logged.header
        when = _created(header, path)
        status = logged.status + (" (running)" if path.suffix == ".journal" else "")
        cells = [
            _when(when),
            logged.task,
            logged.model,
            status,
            _samples_cell(header),
            _metric_cell(logged.metrics),
            name,
        ]
        rows.append((when, cells))
    if not rows:
        print(f"No logs in {root}.")
        return EXIT_OK
    rows.sort(key=lambda r: r[0].timestamp(), reverse=True)
    header_cells = ["date", "task", "model", "status", "samples", "metric", "file"]
    print(_columns([header_cells, *(cells for _, cells in rows)]))
    return EXIT_OK


def _when(when: datetime) -> str:
    return when.astimezone().strftime("%Y-%m-%d %H:%M")


def _columns(lines: list[list[str]]) -> str:
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


# -- vitals view / bundle ------------------------------------------------------------------------


def _viewer(module: str) -> Any:
    """`vitals_engine.viewer.<module>`, imported only when a command needs it."""
    try:
        return importlib.import_module(f"vitals_engine.viewer.{module}")
    except ImportError as exc:
        raise RunError(f"the log viewer is not available: {exc}") from exc


def _cmd_view(args: argparse.Namespace) -> int:
    directory = _default_dir(args.dir)
    if not directory.is_dir():
        raise UsageError(f"Log directory '{directory}' not found.")
    viewer = _viewer("launch")
    try:
        viewer.view(str(directory), host=args.host, port=args.port, block=True)
    except KeyboardInterrupt:
        _say("Viewer stopped.")
    return EXIT_OK


def _cmd_bundle(args: argparse.Namespace) -> int:
    log_dir = _default_dir(args.log_dir)
    if not log_dir.is_dir():
        raise UsageError(f"Log directory '{log_dir}' not found.")
    viewer = _viewer("bundle")
    written = viewer.bundle(str(log_dir), args.output_dir, args.overwrite)
    where = written if written is not None else args.output_dir
    if where is not None:
        print(f"Bundle '{os.fspath(where)}' created.")
    return EXIT_OK

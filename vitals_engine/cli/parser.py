"""The `vitals` argument parser, its commands' options and help, and `main()`, which
dispatches to a command and turns its errors into one line and an exit code."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from .._errors import ConfigError, DatasetError
from .._version import version
from ..engine.option_table import positive_int
from ..thresholds import parse_threshold
from .run_flags import add_run_flags
from .shared import (
    EXIT_BROKEN_PIPE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    RunError,
    UsageError,
    quiet_stdout,
    report,
    say,
    stdout_closed,
)

__all__ = ["build_parser", "main"]

MAIN_EPILOG = """\
Examples:
  vitals eval evals/arithmetic.py                        run every Task in the file
  vitals eval evals/arithmetic.py:hard --epochs 3        run only the task `hard`, 3 epochs
  vitals eval evals/arithmetic.py --model openai/gpt-4.1-mini --rpm 500
  vitals ls                                              list the logs in VITALS_LOG_DIR (or ./logs)
  vitals view logs --port 7576                           open the log viewer
  vitals bundle logs --output-dir site                   a static site of the viewer and logs
  vitals cache stats                                     what the cache of model replies holds
  vitals score logs/run.json --scorer evals.py:strict    grade a log's outputs again, no solving

Run `vitals COMMAND --help` for the options of a command.
"""

EVAL_EPILOG = """\
The file is imported as a module (its directory goes on sys.path). Tasks are
module-level `Task` objects, or functions without required arguments that
return one (annotated `-> Task` or ending in `return ve.Task(...)`). With
several tasks and no `:name`, all of them run in order. With several --model
(or --max-tasks), every task runs on every model at once, as an eval set:
runs that call one model share its limits, and --resume continues only the
runs that did not finish.

Examples:
  vitals eval examples/cli_task.py
  vitals eval evals/suite.py:arithmetic --epochs 5 --max-concurrency 20
  vitals eval evals/suite.py --model anthropic/claude-sonnet-4-5 --rpm 50
  vitals eval evals/suite.py --model openai/gpt-4.1-mini --model anthropic/claude-sonnet-4-5
                                                       every task on both models, at once
  vitals eval evals/suite.py --model openai/gpt-4.1 --model openai/o3 --max-tasks 2 --resume
  vitals eval evals/suite.py --fail-on-error 0.05 --log-dir runs/today
  vitals eval evals/suite.py --log-format eval --no-progress
  vitals eval evals/suite.py --resume                  continue the newest unfinished run
  vitals eval evals/suite.py --resume --resume-anyway   ... even after changing the model
  vitals eval evals/suite.py --ray auto --workers 8     on the Ray cluster of this node
  vitals eval evals/suite.py --estimate --epochs 3      what it would cost, from 20 rows
  vitals eval evals/suite.py --limit 200 --shuffle --seed 1
                                                       the same 200 random samples each time
  vitals eval evals/suite.py --sample-id 3 --sample-id q-12   only these two samples
  vitals eval evals/suite.py --cache --cost-budget 5    replies from the cache; at most $5
  vitals eval evals/suite.py --resume logs/2026-01-14T16-19-11-00-00_suite_abc.journal
  vitals eval evals/suite.py --fail-under accuracy=0.8 --junit report.xml
                                                       a CI gate: exit 3 below 0.8
  vitals eval evals/suite.py --fail-under detect_includes/accuracy=0.9

Exit codes: 0 success, 1 samples failed beyond --fail-on-error (the log is
still written), the run reached --cost-budget or --token-budget, or the run failed,
2 usage error (a --fail-under name that matches no metric included), 3 a metric
below its --fail-under threshold (when no run failed); for several runs, the
worst of them.
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
  vitals bundle                    # ./logs-bundle (the log directory's name, -bundle)
  vitals bundle --output-dir site
  vitals bundle runs/today --output-dir public/evals --overwrite
"""

SCORE_EPILOG = """\
Scores the finished samples of a log (their results, inputs, targets, metadata and
solver chats, as logged) with another scorer, calling no solver, and writes a new
log beside it (or in --dir); the original is not changed. The new log names the
one it came from (`rescored_from` in its eval's metadata). LOG is a .json or .eval
log (ours, vitals' or Inspect's) or the journal of a running or killed run: samples
without a result, or that failed while solving, are left out (and counted).

NAME is a scorer the file defines (strict_judge = ve.model_graded_qa(...)), or a
function without arguments that returns one. A judge needs its own chat
(scorer_chat=...): the model a log was solved with cannot be called from the log.

Examples:
  vitals score logs/run.json --scorer evals.py:strict_judge
  vitals score logs/run.eval --scorer evals.py:make_judge --dir logs/rescored
  vitals score logs/run.journal --scorer evals.py:exact --max-concurrency 20

Exit codes: 0 success, 1 samples failed while scoring (the log is still written)
or the scoring failed, 2 usage error (no --scorer, a NAME that is not a scorer, a
log with nothing to re-score).
"""


CACHE_EPILOG = """\
The cache of model replies (`eval(cache=True)`, `chat_*(cache=True)`) lives in
VITALS_CACHE_DIR, else the user's cache directory; --dir names another.
AGE is "90s", "15m", "12h", "7d", "2w" or a number of seconds.

Examples:
  vitals cache stats                          replies, size, oldest and newest per model
  vitals cache ls --model gpt-4.1-mini        the newest replies of a model, and whose they were
  vitals cache clear --older-than 7d          remove the replies stored over a week ago
  vitals cache clear --dir ./cache            empty the cache in ./cache
"""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, raised rather than exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see `{self.prog} --help`)")


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
        "score their logs again, list, view and bundle them, look into the cache of model "
        "replies.",
        epilog=MAIN_EPILOG,
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=f"vitals-engine {version()}")
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
        action="append",
        metavar="PROVIDER/MODEL",
        help="run the solver on this model instead (e.g. openai/gpt-4.1-mini); "
        "the solver must take `solver_chat`, as ve.generate() does. Repeat it to run every "
        "task on each model, all at once (an eval set: one log per task and model, one "
        "summary)",
    )
    run.add_argument(
        "--max-tasks",
        type=positive_int,
        metavar="N",
        help="runs at once in an eval set (default: all); alone, it runs the file's tasks "
        "as a set, N at a time",
    )
    add_run_flags(run, "eval")
    run.add_argument("--log-dir", metavar="DIR", help="where to write the log(s)")
    run.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=None,
        metavar="LOG",
        help="continue an unfinished run: the newest journal of the task, or this journal or log",
    )
    _add_gates(run)
    run.add_argument(
        "--estimate",
        action="store_true",
        help="print what the eval would cost, from a sample of its rows, and exit without "
        "running it (nothing is logged)",
    )
    run.add_argument(
        "--estimate-samples",
        type=positive_int,
        metavar="N",
        help="with --estimate: the rows to run (default 20)",
    )
    run.add_argument(
        "--estimate-local",
        action="store_true",
        help="with --estimate: call nothing; count the input tokens locally (output tokens "
        "and a judge's calls stay unknown)",
    )
    _add_debug(run)

    ls = commands.add_parser(
        "ls",
        help="list the logs of a directory",
        description="List the eval logs of a directory, newest first.",
        epilog=LS_EPILOG,
        formatter_class=formatter,
    )
    ls.add_argument("dir", nargs="?", metavar="DIR", help="default: VITALS_LOG_DIR, else ./logs")
    _add_debug(ls)

    view = commands.add_parser(
        "view",
        help="open the log viewer",
        description="Serve the log viewer on a log directory until interrupted.",
        epilog=VIEW_EPILOG,
        formatter_class=formatter,
    )
    view.add_argument("dir", nargs="?", metavar="DIR", help="default: VITALS_LOG_DIR, else ./logs")
    view.add_argument(
        "--host",
        default="127.0.0.1",
        help="default: 127.0.0.1; another address (0.0.0.0) opens the logs to the network",
    )
    view.add_argument("--port", type=_port, metavar="N", help="default: a free port")
    _add_debug(view)

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
    bundle.add_argument(
        "--output-dir",
        metavar="DIR",
        help="where to write the site (default: ./<LOG_DIR name>-bundle)",
    )
    bundle.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the output directory if it is an earlier bundle",
    )
    _add_debug(bundle)
    _add_score(commands, formatter)
    _add_cache(commands, formatter)
    _add_install_agent(commands, formatter)
    return parser


def _add_install_agent(commands: argparse._SubParsersAction, formatter: type) -> None:
    """`vitals install-agent NAME[==VERSION] ...`."""
    install = commands.add_parser(
        "install-agent",
        help="install agent CLIs (claude-code, codex) for the coding-agent solvers",
        description="Install pinned agent CLIs from npm into this machine's cache, once: "
        "claude_code() and codex() run them from there, never reaching npm during a run.",
        epilog="The cache is VITALS_AGENT_CACHE, else the user's cache directory.\n\n"
        "Examples:\n  vitals install-agent claude-code codex\n"
        "  vitals install-agent codex==0.169.0",
        formatter_class=formatter,
    )
    install.add_argument(
        "names", nargs="+", metavar="NAME", help="claude-code or codex (==VERSION)"
    )
    _add_debug(install)


def _add_score(commands: argparse._SubParsersAction, formatter: type) -> None:
    """`vitals score LOG --scorer FILE.py:NAME` and its options."""
    score = commands.add_parser(
        "score",
        help="score a saved log again with another scorer, solving nothing",
        description="Score the finished samples of a log again, into a new log.",
        epilog=SCORE_EPILOG,
        formatter_class=formatter,
    )
    score.add_argument("log", metavar="LOG", help="the log (.json, .eval) or journal to re-score")
    score.add_argument(
        "--scorer",
        metavar="FILE.py:NAME",
        help="the scorer: NAME in FILE.py, a scorer or a function without arguments making one",
    )
    score.add_argument(
        "--dir",
        "--log-dir",
        dest="dir",
        metavar="DIR",
        help="where to write the new log (default: the directory of LOG)",
    )
    add_run_flags(score, "score")
    score.add_argument(
        "--human",
        metavar="COLUMN",
        help="a metadata column of human grades: the new scores' means are corrected by them",
    )
    _add_debug(score)


def _threshold(text: str) -> tuple[str, float]:
    """`--fail-under NAME=VALUE` as (name, value)."""
    try:
        return parse_threshold(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_gates(run: argparse.ArgumentParser) -> None:
    """`vitals eval --fail-under METRIC=VALUE --junit FILE`: the run as a CI gate."""
    run.add_argument(
        "--fail-under",
        action="append",
        type=_threshold,
        metavar="METRIC=VALUE",
        help="after the run(s), exit 3 when a task's metric is below VALUE (repeatable); name "
        "a metric as scorer/metric (detect_includes/accuracy), or plainly when one scorer has it",
    )
    run.add_argument(
        "--junit",
        metavar="FILE",
        help="write a JUnit XML report for CI: a test suite per task, a test case for its run, "
        "each --fail-under threshold and each sample that failed with an error",
    )


def _add_cache(commands: argparse._SubParsersAction, formatter: type) -> None:
    """`vitals cache ls|stats|clear` and their options."""
    cache = commands.add_parser(
        "cache",
        help="list, count or clear the cache of model replies",
        description="What the cache of model replies holds, and emptying it.",
        epilog=CACHE_EPILOG,
        formatter_class=formatter,
    )
    actions = cache.add_subparsers(
        dest="cache_command", metavar="ACTION", parser_class=_Parser, required=True
    )
    helps = {
        "ls": "list the stored replies, newest first, with the call each first answered",
        "stats": "replies, size, oldest and newest per model, and where the store is",
        "clear": "remove stored replies (all, or those older than AGE, or of a model)",
    }
    for name, text in helps.items():
        action = actions.add_parser(
            name,
            help=text,
            description=text[0].upper() + text[1:] + ".",
            epilog=CACHE_EPILOG,
            formatter_class=formatter,
        )
        action.add_argument(
            "--dir",
            metavar="DIR",
            help="the cache's directory (default: VITALS_CACHE_DIR, "
            "else the user's cache directory)",
        )
        action.add_argument(
            "--model",
            metavar="MODEL",
            help="only this model's (gpt-4.1-mini or openai/gpt-4.1-mini)",
        )
        if name != "stats":
            action.add_argument(
                "--older-than", metavar="AGE", help="only replies stored longer ago than AGE (7d)"
            )
        if name == "ls":
            action.add_argument(
                "--limit",
                type=positive_int,
                default=50,
                metavar="N",
                help="list at most N replies (default: 50)",
            )
        _add_debug(action)


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number between 0 and 65535, not {text!r}")
    return value


def _run(command: str, args: argparse.Namespace) -> int:
    """Run `command`, importing its module only now: `vitals --help` needs none of them."""
    if command == "eval":
        from .eval import run_eval

        return run_eval(args)
    if command == "ls":
        from .ls import run_ls

        return run_ls(args)
    if command == "view":
        from .view import run_view

        return run_view(args)
    if command == "score":
        from .score import run_score

        return run_score(args)
    if command == "cache":
        from .cache import run_cache

        return run_cache(args)
    if command == "install-agent":
        from .install_agent import run_install_agent

        return run_install_agent(args)
    from .bundle import run_bundle

    return run_bundle(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run `vitals` with `argv` (default: the process's arguments); return the exit code.

    A reader that stops reading (`vitals ls | head -1`) ends the command quietly with
    `EXIT_BROKEN_PIPE`, as SIGPIPE ends other commands.
    """
    try:
        code = _main(argv)
        sys.stdout.flush()  # a closed pipe shows here, not as a traceback at exit
    except BrokenPipeError:
        if not stdout_closed():
            raise
        quiet_stdout()
        return EXIT_BROKEN_PIPE
    return code


def _main(argv: Sequence[str] | None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(args_list)
    except UsageError as exc:
        say(str(exc))
        return EXIT_USAGE
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    debug = bool(getattr(args, "debug", False))
    try:
        return _run(args.command, args)
    except KeyboardInterrupt:
        say("interrupted.")
        return EXIT_INTERRUPTED
    except UsageError as exc:
        report(exc, debug, prefix=f"vitals {args.command}: error: ")
        return EXIT_USAGE
    except (ConfigError, DatasetError) as exc:
        report(exc, debug, prefix=f"vitals {args.command}: error: ")
        return EXIT_USAGE
    except RunError as exc:
        report(exc, debug, prefix=f"vitals {args.command}: error: ", cause=exc.__cause__)
        return EXIT_FAILED
    except BrokenPipeError as exc:
        if stdout_closed():
            raise  # our output's reader went: `main()` ends quietly
        report(exc, debug, prefix=f"vitals {args.command}: error: BrokenPipeError: ")
        return EXIT_FAILED
    except Exception as exc:
        report(exc, debug, prefix=f"vitals {args.command}: error: {type(exc).__name__}: ")
        return EXIT_FAILED

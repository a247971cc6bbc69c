"""The `vitals` command: run evals from Python files, list, view and bundle their logs.

    vitals eval FILE.py[:task] [--model provider/model] [--epochs N] ...
    vitals ls [DIR]
    vitals view [DIR] [--port N] [--host H]
    vitals bundle [LOG_DIR] [--output-dir DIR] [--overwrite]

Exit codes: 0 success; 1 when samples failed beyond `--fail-on-error` or a
run failed; 2 for usage errors (bad arguments, a missing file, no Task in the
file, a `ConfigError` or `DatasetError` while building the task, a `--fail-under`
name that matches no metric); 3 when `vitals eval --fail-under` found a metric below
its threshold and no run failed; 130 when interrupted; 141 (quietly) when the reader
of stdout went away (`vitals ls | head -1`), as SIGPIPE ends other commands. Errors
are one line on stderr; `--debug` adds the traceback.

`main(argv)` returns the exit code, so it can be called in-process; the
console script and `python -m vitals_engine` exit with it.
"""

from .parser import main

__all__ = ["main"]

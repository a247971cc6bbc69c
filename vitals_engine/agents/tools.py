"""The tools an agent uses in its sample's sandbox: `bash()`, `python()`, `text_editor()`,
and `sandbox()`, the sandbox itself for tools and scorers of one's own.

Each tool runs in the sandbox of the sample whose stage calls it (`Task(sandbox=)`): a
command that times out, exits with an error or prints more than the cap goes back to
the model as the tool's error (a `ToolError`), never as the sample's; output over the
cap is cut, and says so. What a tool does in the sandbox is in the sample's transcript
(the sandbox records its actions).

`text_editor()` takes the commands of the providers' own text-editor tools: `view`,
`create`, `str_replace`, `insert` and `undo_edit`. What an edit replaced is kept in the
sandbox itself (under `.vitals-edits` in its work directory), so `undo_edit` works as
long as the sample does, and nothing of it outlives the sandbox.
"""

from __future__ import annotations

import hashlib
import shlex
from typing import Any, Literal

from .._errors import ConfigError, ToolError
from ..chats.tools import Tool, tool_from_function
from ..pacing.scope import current_sandbox

__all__ = ["bash", "python", "sandbox", "text_editor"]

#: Characters of a command's output the model gets at most (the rest is cut, and it is said).
OUTPUT_LIMIT = 16 * 1024

#: Where `text_editor()` keeps what its edits replaced, inside the sandbox.
_EDITS = ".vitals-edits"


def sandbox() -> Any:
    """The sandbox of the sample being solved or scored: for a tool or scorer of one's own.

    Raises `ConfigError` outside a sample of a task with a sandbox (`Task(sandbox=)`).

    Example:
        >>> async def tests_pass(solved):
        ...     result = await ve.sandbox().exec(["python3", "-m", "pytest", "-q"], timeout=120)
        ...     return "C" if result.returncode == 0 else "I"
    """
    found = current_sandbox()
    if found is None:
        raise ConfigError(
            "ve.sandbox() is the sandbox of the sample being solved or scored: call it inside "
            "a solver, tool or scorer of a task made with Task(sandbox=...)."
        )
    return found


def _shown(result: Any) -> str:
    """A command's output as the model sees it: stdout, then stderr."""
    parts = [part for part in (result.stdout, result.stderr) if part]
    return "\n".join(parts)


async def _run(cmd: list[str], *, input: str | None, seconds: float, user: str | None) -> str:
    """Run `cmd` in the sample's sandbox; its output, or a `ToolError` saying what failed."""
    result = await sandbox().exec(
        cmd, input=input, timeout=seconds, user=user, output_limit=OUTPUT_LIMIT
    )
    output = _shown(result)
    if result.timed_out:
        raise ToolError(
            f"The command timed out after {seconds:g} seconds." + (f"\n{output}" if output else ""),
            kind="timeout",
        )
    if result.returncode != 0:
        raise ToolError(f"exit code {result.returncode}\n{output}".rstrip(), kind="exit")
    return output


def bash(timeout: float = 180, *, user: str | None = None) -> Tool:
    """A tool that runs a bash command in the sample's sandbox.

    Args:
        timeout: seconds a command may run; past them it is killed and the model told.
        user: the user it runs as (where the sandbox has users: docker).

    Example:
        >>> solver = ve.react(chat, tools=[ve.bash(timeout=60)])
    """
    _check_timeout(timeout, "bash")

    async def bash(cmd: str) -> str:
        """Run a bash command in your machine and get its output.

        Args:
            cmd: The bash command to run.
        """
        command = ["bash", "--noprofile", "--norc", "-c", cmd]
        return await _run(command, input=None, seconds=timeout, user=user)

    return tool_from_function(bash)


def python(timeout: float = 180, *, user: str | None = None) -> Tool:
    """A tool that runs Python code in the sample's sandbox (`python3`, the code on its
    standard input): what it prints comes back.

    Example:
        >>> solver = ve.react(chat, tools=[ve.python(timeout=60)])
    """
    _check_timeout(timeout, "python")

    async def python(code: str) -> str:
        """Run Python code in your machine and get what it prints. Use print() to see a
        value: the code runs as a script, not in an interactive session.

        Args:
            code: The Python code to run.
        """
        return await _run(["python3", "-"], input=code, seconds=timeout, user=user)

    return tool_from_function(python)


def _check_timeout(timeout: Any, tool: str) -> None:
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ConfigError(f"{tool}(timeout=...) takes seconds above 0, not {timeout!r}.")


# -- the text editor -----------------------------------------------------------------------


async def _read(path: str) -> str:
    try:
        text = await sandbox().read_file(path, text=True)
    except ToolError:
        raise
    except Exception as exc:
        raise ToolError(f"Cannot read {path}: {exc}", kind="file") from None
    return str(text)


async def _backup(path: str, old: str) -> None:
    """Keep what an edit of `path` replaces, for `undo_edit`."""
    where = _history(path)
    quoted = shlex.quote(where)
    listing = await sandbox().exec(["sh", "-c", f"mkdir -p {quoted} && ls {quoted}"])
    count = len(listing.stdout.split())
    await sandbox().write_file(f"{where}/{count:06d}", old)


def _history(path: str) -> str:
    return f"{_EDITS}/{hashlib.sha256(path.encode()).hexdigest()[:16]}"


async def _view(path: str, view_range: list[int] | None) -> str:
    quoted = shlex.quote(path)
    found = f"test -d {quoted} && find {quoted} -maxdepth 2 -not -path '*/.*'"
    listing = await sandbox().exec(["sh", "-c", found])
    if listing.returncode == 0:
        return f"The files and directories up to 2 levels deep in {path}:\n{listing.stdout}"
    lines = (await _read(path)).split("\n")
    first, last = 1, len(lines)
    if view_range:
        if len(view_range) != 2:
            raise ToolError("view_range takes two line numbers: [first, last].", kind="parsing")
        first, last = view_range[0], (len(lines) if view_range[1] == -1 else view_range[1])
        if not 1 <= first <= last <= len(lines):
            raise ToolError(
                f"view_range {view_range} is outside the file's {len(lines)} lines.",
                kind="parsing",
            )
    numbered = (f"{n:6}\t{line}" for n, line in enumerate(lines[first - 1 : last], first))
    return f"Here is {path}, lines {first} to {last}:\n" + "\n".join(numbered)


async def _str_replace(path: str, old_str: str | None, new_str: str | None) -> str:
    if not old_str:
        raise ToolError("str_replace needs old_str: the text to replace.", kind="parsing")
    text = await _read(path)
    found = text.count(old_str)
    if found != 1:
        said = "does not occur" if found == 0 else f"occurs {found} times"
        raise ToolError(f"old_str {said} in {path}: it must occur exactly once.", kind="parsing")
    await _backup(path, text)
    await sandbox().write_file(path, text.replace(old_str, new_str or "", 1))
    return f"{path} was edited: old_str replaced."


async def _insert(path: str, insert_line: int | None, new_str: str | None) -> str:
    if insert_line is None or new_str is None:
        raise ToolError("insert needs insert_line and new_str.", kind="parsing")
    text = await _read(path)
    lines = text.split("\n")
    if not 0 <= insert_line <= len(lines):
        raise ToolError(
            f"insert_line {insert_line} is outside the file's {len(lines)} lines.",
            kind="parsing",
        )
    await _backup(path, text)
    lines[insert_line:insert_line] = new_str.split("\n")
    await sandbox().write_file(path, "\n".join(lines))
    return f"{path} was edited: text inserted after line {insert_line}."


async def _undo(path: str) -> str:
    where = _history(path)
    listing = await sandbox().exec(["sh", "-c", f"ls {shlex.quote(where)} 2>/dev/null"])
    kept = sorted(listing.stdout.split())
    if not kept:
        raise ToolError(f"No edit of {path} to undo.", kind="file")
    last = f"{where}/{kept[-1]}"
    await sandbox().write_file(path, await _read(last))
    await sandbox().exec(["rm", "-f", last])
    return f"The last edit of {path} was undone."


def text_editor() -> Tool:
    """A tool that views, creates and edits files in the sample's sandbox, with the
    commands of the providers' own text-editor tools.

    Example:
        >>> solver = ve.react(chat, tools=[ve.bash(), ve.text_editor()])
    """

    async def text_editor(
        command: Literal["view", "create", "str_replace", "insert", "undo_edit"],
        path: str,
        file_text: str | None = None,
        old_str: str | None = None,
        new_str: str | None = None,
        insert_line: int | None = None,
        view_range: list[int] | None = None,
    ) -> str:
        """View, create and edit files. `view` shows a file with line numbers (or a
        directory's files); `create` writes a file; `str_replace` replaces `old_str`, which
        must occur exactly once, with `new_str`; `insert` puts `new_str` after line
        `insert_line` (0: at the top); `undo_edit` undoes the last edit of a file.

        Args:
            command: What to do: view, create, str_replace, insert or undo_edit.
            path: The file (or directory, to view), an absolute path.
            file_text: create: the file's contents.
            old_str: str_replace: the text to replace.
            new_str: str_replace: the text to put instead; insert: the text to insert.
            insert_line: insert: the line after which new_str goes.
            view_range: view: the first and last line to show ([first, -1]: to the end).
        """
        if command == "view":
            return await _view(path, view_range)
        if command == "create":
            await sandbox().write_file(path, file_text or "")
            return f"{path} was written."
        if command == "str_replace":
            return await _str_replace(path, old_str, new_str)
        if command == "insert":
            return await _insert(path, insert_line, new_str)
        if command == "undo_edit":
            return await _undo(path)
        raise ToolError(f"Unknown command {command!r}.", kind="parsing")

    return tool_from_function(text_editor)

"""Agent harnesses as solvers: Claude Code, Codex, or any agent CLI, run in the sample's
sandbox with their model calls served by the bridge (the user's chat, through the run's
call pipeline: limits, usage, cost and the transcript are the eval's). How each runs for
a sample is `harness.py`'s; here, each harness's command, environment and answer.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._errors import ConfigError
from ..chats.chat import Chat
from ..sandboxes.base import shared_path
from .cli_install import AGENT_CLIS, agent_cache, installed_agent
from .harness import AgentCli, AgentRun, Api, check_chat, cli_failed, last_text

__all__ = ["agent_cli", "claude_code", "codex"]

#: What `agent_cli()` fills in its command's arguments (other braces are left as they are).
_PLACEHOLDER = re.compile(r"\{(input|base_url|api_key|model)\}")


def _program(entry: Path, root: str, kind: str) -> list[str]:
    """How to run an installed CLI inside a sandbox of `kind` (its installation `root`
    shared into it): its program, or node with its script."""
    inside = f"{shared_path(root, kind)}/{entry.relative_to(root)}"
    return ["node", inside] if entry.suffix == ".js" else [inside]


def _entry(name: str, version: str | None) -> Path:
    return installed_agent(name, version)


def _install_root(name: str, version: str | None) -> str:
    """The folder the CLI is installed in: shown read-only inside the sandbox."""
    return str(agent_cache() / AGENT_CLIS[name].folder(version))


def claude_code(
    chat: Chat,
    *,
    version: str | None = None,
    sandbox: Any = None,
    max_turns: int | None = None,
    system_prompt: str | None = None,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
) -> AgentCli:
    """Claude Code (npm `@anthropic-ai/claude-code`, pinned) as the solver: it works on the
    sample's input in the sample's sandbox, its model calls served by `chat` (any provider)
    through the bridge; its final message is the sample's result.

    Args:
        chat: the model that serves every call the agent makes.
        version: a version other than the pinned one (installed with `vitals install-agent`).
        sandbox: the sandbox it needs when the task names none (`"bwrap"`, `"docker"` ...).
        max_turns: the agent's own cap on its turns (the sample's limits apply as well).
        system_prompt: text appended to Claude Code's system prompt.
        timeout: seconds after which the CLI is killed (a sample error).
        env: more environment variables for the CLI.

    Example:
        >>> task = ve.Task(dataset, solver=ve.claude_code(ve.chat_anthropic("claude-sonnet-4-5")),
        ...                scorer=ve.detect_includes(), sandbox="bwrap")
    """
    chat = check_chat(chat, "claude_code")
    entry = _entry("claude_code", version)
    root = _install_root("claude_code", version)

    def command(run: AgentRun) -> list[str]:
        argv = [
            *_program(entry, root, run.kind),
            "-p",
            run.input,
            "--output-format",
            "json",
            "--dangerously-skip-permissions",
            "--no-session-persistence",
            "--model",
            run.model,
        ]
        if max_turns is not None:
            argv += ["--max-turns", str(max_turns)]
        if system_prompt is not None:
            argv += ["--append-system-prompt", system_prompt]
        return argv

    def environment(run: AgentRun) -> dict[str, str]:
        return {
            "ANTHROPIC_BASE_URL": run.base_url,
            "ANTHROPIC_API_KEY": run.api_key,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "IS_SANDBOX": "1",
        }

    return AgentCli(
        chat,
        "claude_code",
        "anthropic",
        command,
        environment,
        _claude_answer,
        shared=(root,),
        sandbox=sandbox,
        timeout=timeout,
        env=dict(env or {}),
    )


def _claude_answer(result: Any, box: Any, chat: Chat) -> str:
    """Claude Code's final message, from its JSON output (`result`); at its own turn cap
    (`max_turns`), its last reply."""
    try:
        printed = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise cli_failed("claude_code", result) from None
    if printed.get("subtype") == "error_max_turns":
        return last_text(chat)
    if result.returncode != 0 or printed.get("is_error"):
        raise cli_failed("claude_code", result)
    return str(printed.get("result", ""))


def codex(
    chat: Chat,
    *,
    version: str | None = None,
    sandbox: Any = None,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
) -> AgentCli:
    """Codex CLI (npm `@openai/codex`, pinned) as the solver: `codex exec` works on the
    sample's input in the sample's sandbox, its model calls (the Responses API) served by
    `chat` (any provider) through the bridge; its last message is the sample's result.

    Example:
        >>> task = ve.Task(dataset, solver=ve.codex(ve.chat_openai("gpt-5-mini")),
        ...                scorer=ve.detect_includes(), sandbox="bwrap")
    """
    chat = check_chat(chat, "codex")
    entry = _entry("codex", version)
    root = _install_root("codex", version)
    last = "/tmp/.vitals-codex-last.txt"

    def command(run: AgentRun) -> list[str]:
        settings = {
            "model_provider": '"vitals"',
            "model_providers.vitals": (
                f'{{name="vitals", base_url="{run.base_url}/v1", env_key="AGENT_BRIDGE_KEY", '
                'wire_api="responses", request_max_retries=0, stream_max_retries=0}'
            ),
            "web_search": '"disabled"',
            "check_for_update_on_startup": "false",
            "features.plugins": "false",
            "features.unbounded_connection_retries": "false",
            "otel.metrics_exporter": '"none"',
        }
        configured = [arg for key, value in settings.items() for arg in ("-c", f"{key}={value}")]
        return [
            *_program(entry, root, run.kind),
            "exec",
            "--skip-git-repo-check",
            "--ephemeral",
            "--dangerously-bypass-approvals-and-sandbox",
            "--color",
            "never",
            *configured,
            "-m",
            run.model,
            "--output-last-message",
            last,
            run.input,
        ]

    def environment(run: AgentRun) -> dict[str, str]:
        return {"AGENT_BRIDGE_KEY": run.api_key, "CODEX_HOME": f"{run.home}/.codex"}

    async def answer(result: Any, box: Any, chat: Chat) -> str:
        if result.returncode != 0:
            raise cli_failed("codex", result)
        try:
            return str(await box.read_file(last)).strip()
        except FileNotFoundError:
            raise cli_failed("codex", result) from None

    return AgentCli(
        chat,
        "codex",
        "responses",
        command,
        environment,
        answer,
        shared=(root,),
        folders=(".codex",),
        sandbox=sandbox,
        timeout=timeout,
        env=dict(env or {}),
    )


def _printed(result: Any, box: Any, chat: Chat) -> str:
    """What an agent CLI printed, as its answer."""
    if result.returncode != 0:
        raise cli_failed("agent_cli", result)
    return result.stdout.strip()


def agent_cli(
    command: Sequence[str],
    *,
    chat: Chat,
    api: Api,
    env: Mapping[str, str] | None = None,
    sandbox: Any = None,
    timeout: float | None = None,
) -> AgentCli:
    """Any agent harness as the solver: `command` (its arguments; `{input}`, `{base_url}`,
    `{api_key}` and `{model}` in them are filled in per sample) runs in the sample's
    sandbox, speaking `api` ("anthropic", "responses" or "chat_completions") to the
    bridge, which serves it with `chat`; what it prints is the sample's result.

    The environment also carries the bridge's address and key under the names the
    providers' own clients read (`ANTHROPIC_BASE_URL`/`ANTHROPIC_API_KEY`,
    `OPENAI_BASE_URL`/`OPENAI_API_KEY`), and `AGENT_BRIDGE_URL`/`AGENT_BRIDGE_KEY`.

    Example:
        >>> solver = ve.agent_cli(["my-agent", "--task", "{input}"], chat=chat, api="responses")
    """
    chat = check_chat(chat, "agent_cli")
    if api not in ("anthropic", "responses", "chat_completions"):
        raise ConfigError(
            f"agent_cli(api={api!r}): the APIs the bridge speaks are 'anthropic', "
            "'responses' and 'chat_completions'."
        )
    template = [str(part) for part in command]
    if not template:
        raise ConfigError("agent_cli() needs the command to run, as a list of arguments.")

    def argv(run: AgentRun) -> list[str]:
        fill = {
            "input": run.input,
            "base_url": run.base_url,
            "api_key": run.api_key,
            "model": run.model,
        }
        return [_PLACEHOLDER.sub(lambda m: fill[m.group(1)], part) for part in template]

    def environment(run: AgentRun) -> dict[str, str]:
        return {
            "ANTHROPIC_BASE_URL": run.base_url,
            "ANTHROPIC_API_KEY": run.api_key,
            "OPENAI_BASE_URL": f"{run.base_url}/v1",
            "OPENAI_API_KEY": run.api_key,
            "AGENT_BRIDGE_URL": run.base_url,
            "AGENT_BRIDGE_KEY": run.api_key,
        }

    return AgentCli(
        chat,
        shlex.split(template[0])[0].rsplit("/", 1)[-1] or "agent_cli",
        api,
        argv,
        environment,
        _printed,
        sandbox=sandbox,
        timeout=timeout,
        env=dict(env or {}),
    )

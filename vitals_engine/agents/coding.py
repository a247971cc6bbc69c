"""Agent harnesses as solvers: Claude Code, Codex, or any agent CLI, run in the sample's
sandbox with their model calls served by the bridge (the user's chat, through the run's
call pipeline: limits, usage, cost and the transcript are the eval's).

Each sample: the bridge opens, the CLI runs with the sample's input and a key of the
bridge's (never a real API key), and its final answer is the sample's result. A CLI that
exits non-zero is a sample error that says what it printed last; a limit stops it where
it is.

Where the bridge listens: in a bwrap or docker sandbox (no network), on a unix socket
with a random name in this process's folder of bridge sockets (`bridge_sockets()`), which
the solver shares into its sandboxes read-only; inside, a small forwarder (node's
forward.js, else python3's forward.py) turns it back into 127.0.0.1:INSIDE_PORT for the
CLI, and ends with it. For a local sandbox, on 127.0.0.1 of the host.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import secrets
import shlex
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from .._errors import AgentCliError, ConfigError, SolverError
from ..bridging.server import BridgeAddress, serve_bridge
from ..chats.chat import Chat
from ..pacing.scope import current_scope
from ..samples import Sample, Solution
from ..sandboxes.base import shared_path
from .cli_install import AGENT_CLIS, agent_cache, installed_agent
from .tools import sandbox as current_sandbox

__all__ = ["AgentCli", "agent_cli", "claude_code", "codex"]

Api = Literal["anthropic", "responses", "chat_completions"]

#: The port the forwarder listens on inside a sandbox (each sandbox has its own network).
INSIDE_PORT = 43117
#: The forwarders, by the program that runs them, as the sandbox holds them.
_FORWARDERS = {"node": "/tmp/.vitals-forward.js", "python3": "/tmp/.vitals-forward.py"}
_READY = "/tmp/.vitals-forward.ready"
_FORWARD_LOG = "/tmp/.vitals-forward.log"
#: How many times (each 10 ms apart) the CLI's shell looks for the forwarder listening.
_FORWARD_WAITS = 3000
_OUTPUT_LIMIT = 16 * 1024 * 1024
#: What `agent_cli()` fills in its command's arguments (other braces are left as they are).
_PLACEHOLDER = re.compile(r"\{(input|base_url|api_key|model)\}")


@dataclass(frozen=True)
class AgentRun:
    """What a CLI is told for one sample: its input, the bridge's URL and key as it sees
    them (inside the sandbox), and the model the user's chat names."""

    input: str
    base_url: str
    api_key: str
    model: str
    home: str
    kind: str


@dataclass
class AgentCli:
    """The solver `claude_code()`, `codex()` and `agent_cli()` return (see the module
    docstring): `command` makes the CLI's argument list and `environment` its variables
    for one sample; `answer` reads its final answer from how it ended (its `ExecResult`,
    the sandbox, for a file it wrote, and the conversation the bridge served), raising
    `AgentCliError` for a CLI that failed.

    Example:
        >>> solver = ve.claude_code(ve.chat_anthropic("claude-sonnet-4-5"), max_turns=30)
        >>> solver
        <claude_code(anthropic/claude-sonnet-4-5)>
    """

    chat: Chat
    name: str
    api: Api
    command: Callable[[AgentRun], list[str]]
    environment: Callable[[AgentRun], dict[str, str]]
    answer: Callable[[Any, Any, Chat], Any]
    shared: tuple[str, ...] = ()
    #: Folders under the CLI's HOME made before it starts (where it insists they exist).
    folders: tuple[str, ...] = ()
    sandbox: Any = None
    timeout: float | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    __name__ = "agent_cli"

    @property
    def __vitals_label__(self) -> str:
        return f"{self.name}({self.chat.provider.model_id})"

    @property
    def __vitals_sandbox__(self) -> Any:
        return self.sandbox

    @property
    def __vitals_sandbox_shared__(self) -> tuple[str, ...]:
        return (*self.shared, bridge_sockets())

    async def __call__(self, input: Any, *, sample: Sample | None = None) -> Solution:
        if not isinstance(input, str):
            raise SolverError(
                f"{self.name} takes the sample's input as its task: a string, not "
                f"{type(input).__name__}."
            )
        box = current_sandbox()
        if box.kind not in ("bwrap", "docker", "local"):
            raise ConfigError(
                f"{self.name} runs in bwrap, docker or local sandboxes, not {box.kind}: "
                'Task(sandbox="bwrap") (isolated, no network), "docker" or "local".'
            )
        scope = current_scope()
        inside = box.kind != "local"
        socket = await _prepare(box) if inside else None
        async with serve_bridge(self.chat, socket=socket) as address:
            if socket is not None:
                os.chmod(socket, 0o666)  # for any user of the sandbox: the bridge's key guards it
            if scope is not None and scope.limits is not None:
                scope.limits.chat = address.bridge.chat
            run = _agent_run(input, address, self.chat, box, inside)
            if self.folders:
                await box.exec(["mkdir", "-p", *(f"{run.home}/{name}" for name in self.folders)])
            argv = self.command(run)
            result = await box.exec(
                _with_forwarder(_inside(socket, box.kind), argv) if socket else argv,
                env={"HOME": run.home, **self.environment(run), **self.env},
                timeout=self.timeout,
                output_limit=_OUTPUT_LIMIT,
            )
        answer = self.answer(result, box, address.bridge.chat)
        if hasattr(answer, "__await__"):
            answer = await answer
        return Solution(answer, chat=address.bridge.chat)

    def __repr__(self) -> str:
        return f"<{self.__vitals_label__}>"


def _agent_run(input: str, address: BridgeAddress, chat: Chat, box: Any, inside: bool) -> AgentRun:
    """What the CLI is told; its HOME is the sandbox's /tmp, or for a local sandbox a
    folder in its directory (never the user's own HOME)."""
    if inside:
        url = f"http://127.0.0.1:{INSIDE_PORT}"
        return AgentRun(input, url, address.api_key, chat.model, "/tmp", box.kind)
    home = str(Path(box.workdir) / ".agent-home")
    return AgentRun(input, address.base_url, address.api_key, chat.model, home, box.kind)


@cache
def bridge_sockets() -> str:
    """This process's folder of bridge sockets on the host (made once, removed at exit),
    which the coding agents share into their sandboxes: each sample's bridge listens on a
    socket of its own in it. Searchable by all (0o711) but not listed; each socket is
    open to all, its bridge's key guarding it.

    Example:
        >>> bridge_sockets()
        '/tmp/vitals-bridges-k2j4x9_a'
    """
    folder = tempfile.mkdtemp(prefix="vitals-bridges-")
    os.chmod(folder, 0o711)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


async def _prepare(box: Any) -> str:
    """The forwarders written into the sandbox; the host path of a new socket for its
    bridge (in `bridge_sockets()`, which the sandbox shows)."""
    for runtime, path in _FORWARDERS.items():
        await box.write_file(path, _forwarder_script(runtime))
    return os.path.join(bridge_sockets(), f"{secrets.token_hex(8)}.sock")


def _inside(socket: str, kind: str) -> str:
    """Where the sandbox sees the bridge's `socket` (a file of `bridge_sockets()`)."""
    return f"{shared_path(bridge_sockets(), kind)}/{os.path.basename(socket)}"


def _forwarder_script(runtime: str) -> str:
    name = "forward.js" if runtime == "node" else "forward.py"
    return resources.files("vitals_engine.agents").joinpath(name).read_text()


#: The shell script that starts the forwarder (node's, else python3's), waits until it
#: listens, runs the CLI (its arguments) and ends the forwarder with it.
_START = """\
if command -v node >/dev/null 2>&1; then forward="node {node}"
elif command -v python3 >/dev/null 2>&1; then forward="python3 {python3}"
else
  echo "vitals: the agent reaches the bridge through a forwarder run by node or" \\
    "python3, and this sandbox has neither on its PATH: give it an image with one." >&2
  exit 127
fi
rm -f {ready}
$forward {socket} {port} {ready} </dev/null >/dev/null 2>{log} &
forwarder=$!
i=0
while [ ! -e {ready} ]; do
  if ! kill -0 $forwarder 2>/dev/null || [ $i -ge {waits} ]; then
    echo "vitals: the bridge's forwarder ($forward) did not start: $(cat {log})" >&2
    kill $forwarder 2>/dev/null
    exit 126
  fi
  sleep 0.01
  i=$((i+1))
done
"$@"
status=$?
kill $forwarder 2>/dev/null
exit $status
"""


def _with_forwarder(socket: str, argv: list[str]) -> list[str]:
    """`argv` run in the sandbox once a forwarder from 127.0.0.1:INSIDE_PORT to the
    bridge's `socket` (as the sandbox sees it) listens; the forwarder ends with it.

    Example:
        >>> _with_forwarder("/vitals-shared/vitals-bridges-x/ab.sock", ["codex", "exec", "hi"])
        ['sh', '-c', 'if command -v node ...', 'sh', 'codex', 'exec', 'hi']
    """
    script = _START.format(
        node=_FORWARDERS["node"],
        python3=_FORWARDERS["python3"],
        socket=shlex.quote(socket),
        port=INSIDE_PORT,
        ready=_READY,
        log=_FORWARD_LOG,
        waits=_FORWARD_WAITS,
    )
    return ["sh", "-c", script, "sh", *argv]


def _failed(name: str, result: Any) -> AgentCliError:
    """The sample error of a CLI that exited non-zero (or was killed at its timeout): what
    it printed last."""
    said = (result.stderr or result.stdout or "").strip()[-2000:]
    timed_out = " (killed at its timeout)" if result.timed_out else ""
    return AgentCliError(
        f"{name} exited with {result.returncode}{timed_out}: {said or 'it printed nothing'}"
    )


def _program(entry: Path, root: str, kind: str) -> list[str]:
    """How to run an installed CLI inside a sandbox of `kind` (its installation `root`
    shared into it): its program, or node with its script."""
    inside = f"{shared_path(root, kind)}/{entry.relative_to(root)}"
    return ["node", inside] if entry.suffix == ".js" else [inside]


def _last_text(chat: Chat) -> str:
    turn = chat.last_turn()
    return turn.text if turn is not None else ""


def _check_chat(chat: Any, who: str) -> Chat:
    if not isinstance(chat, Chat):
        raise ConfigError(
            f"{who}() needs a Chat to serve its model calls, not {type(chat).__name__}."
        )
    if chat.provider.batch:
        raise ConfigError(
            f"{who}() does not go with batch mode: each of the agent's steps waits on its last "
            "reply. Give it a live chat (batch=False)."
        )
    return chat


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
    chat = _check_chat(chat, "claude_code")
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
        raise _failed("claude_code", result) from None
    if printed.get("subtype") == "error_max_turns":
        return _last_text(chat)
    if result.returncode != 0 or printed.get("is_error"):
        raise _failed("claude_code", result)
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
    chat = _check_chat(chat, "codex")
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
            raise _failed("codex", result)
        try:
            return str(await box.read_file(last)).strip()
        except FileNotFoundError:
            raise _failed("codex", result) from None

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
        raise _failed("agent_cli", result)
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
    chat = _check_chat(chat, "agent_cli")
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

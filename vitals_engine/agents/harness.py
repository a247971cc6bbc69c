"""Running an agent CLI as a sample's solver (`AgentCli`): the bridge opened for the
sample, the CLI run in the sample's sandbox with its input and a key of the bridge's
(never a real API key), and its final answer read back. A CLI that exits non-zero is a
sample error (`AgentCliError`) that says what it printed last; a limit stops it where it
is. `coding.py` makes the harnesses (`claude_code()`, `codex()`, `agent_cli()`) from it.

Where the bridge listens: in a bwrap or docker sandbox (no network), on a unix socket
with a random name in this process's folder of bridge sockets (`bridge_sockets()`), which
the solver shares into its sandboxes read-only; inside, a small forwarder (node's
forward.js, else python3's forward.py) turns it back into 127.0.0.1:INSIDE_PORT for the
CLI, and ends with it. For a local sandbox, on 127.0.0.1 of the host.
"""

from __future__ import annotations

import atexit
import os
import secrets
import shlex
import shutil
import tempfile
from collections.abc import Callable, Mapping
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
from .tools import sandbox as current_sandbox

__all__ = [
    "INSIDE_PORT",
    "AgentCli",
    "AgentRun",
    "Api",
    "bridge_sockets",
    "check_chat",
    "cli_failed",
    "last_text",
]

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


def cli_failed(name: str, result: Any) -> AgentCliError:
    """The sample error of a CLI that exited non-zero (or was killed at its timeout): what
    it printed last."""
    said = (result.stderr or result.stdout or "").strip()[-2000:]
    timed_out = " (killed at its timeout)" if result.timed_out else ""
    return AgentCliError(
        f"{name} exited with {result.returncode}{timed_out}: {said or 'it printed nothing'}"
    )


def last_text(chat: Chat) -> str:
    turn = chat.last_turn()
    return turn.text if turn is not None else ""


def check_chat(chat: Any, who: str) -> Chat:
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

"""The sandbox conformance suite: the same cases against every kind (bwrap, docker, local),
on asyncio and trio.

A kind the system cannot run skips, saying why (`tests/sandboxes.py`; `make test` sets
them all up). A test finds the processes it started by an environment variable of its
own (`mark()`), looking in the host's /proc, where sandboxed processes show too.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
from functools import partial
from pathlib import Path

import anyio
import pytest

from tests.children import kill, start
from tests.helpers import until, wait_until
from tests.sandboxes import kind_of, mark, marked
from vitals_engine import ConfigError, SandboxError
from vitals_engine.sandboxes import DEFAULT_OUTPUT_LIMIT, ExecResult

pytestmark = pytest.mark.anyio


# -- exec ------------------------------------------------------------------------------------


async def test_exec_returns_the_exit_code_and_both_outputs(sandbox):
    """A shell string runs under `sh -c`: its exit code, stdout and stderr come back apart."""
    result = await sandbox.exec("echo hello; echo oops >&2; exit 3")
    assert isinstance(result, ExecResult)
    assert (result.returncode, result.stdout, result.stderr) == (3, "hello\n", "oops\n")
    assert not result.timed_out
    assert not result.truncated
    assert result.seconds >= 0


async def test_an_argument_list_runs_without_a_shell(sandbox):
    """A sequence is the command's arguments as they are: no word splitting, no `$`."""
    result = await sandbox.exec(["printf", "%s|", "a b", "$HOME", "*"])
    assert (result.returncode, result.stdout) == (0, "a b|$HOME|*|")


async def test_exit_codes_and_a_missing_command(sandbox):
    """Each exit code comes back as it was; a command that is not there is 127."""
    for code in (0, 1, 42):
        assert (await sandbox.exec(f"exit {code}")).returncode == code
    missing = await sandbox.exec(["no-such-command", "x"])
    assert missing.returncode == 127
    assert missing.stderr == "no-such-command: command not found\n"


async def test_input_goes_to_stdin(sandbox):
    """`input` (text or bytes) is the command's stdin, closed after it."""
    assert (await sandbox.exec(["cat"], input="héllo\nworld")).stdout == "héllo\nworld"
    assert (await sandbox.exec("wc -c", input=b"\x00\x01\x02")).stdout.strip() == "3"
    assert (await sandbox.exec(["cat"], input="")).stdout == ""


async def test_cwd_and_env(sandbox):
    """`cwd` (relative ones under `workdir`) is where the command starts, `env` adds to its
    environment; a `cwd` that is not there is 126."""
    assert (await sandbox.exec("pwd")).stdout == f"{sandbox.workdir}\n"
    await sandbox.exec("mkdir -p sub/deeper")
    result = await sandbox.exec('pwd; echo "$GREETING"', cwd="sub", env={"GREETING": "hi there"})
    assert result.stdout == f"{sandbox.workdir}/sub\nhi there\n"
    absolute = await sandbox.exec("pwd", cwd=f"{sandbox.workdir}/sub/deeper")
    assert absolute.stdout == f"{sandbox.workdir}/sub/deeper\n"
    missing = await sandbox.exec("pwd", cwd="not-here")
    assert missing.returncode == 126
    assert missing.stderr == f"cwd {sandbox.workdir}/not-here: no such directory\n"


async def test_a_timeout_kills_the_command_and_what_it_started(sandbox):
    """A command past its timeout is killed with its children: -1, `timed_out`, and none of
    its processes left when exec returns."""
    env = mark()
    result = await sandbox.exec("sleep 600 & sleep 600; echo never", env=env, timeout=0.5)
    assert (result.returncode, result.timed_out, result.stdout) == (-1, True, "")
    assert marked(env) == []
    assert (await sandbox.exec("echo after")).stdout == "after\n"


async def test_output_past_the_limit_is_cut_and_said(sandbox):
    """Each stream keeps `output_limit` bytes, cut with a note of how much was left out; a
    command writing far more is drained, not blocked."""
    result = await sandbox.exec(
        "head -c 100000 /dev/zero | tr '\\0' a; head -c 50 /dev/zero | tr '\\0' b >&2",
        output_limit=1000,
    )
    assert result.returncode == 0
    assert result.truncated
    assert (
        result.stdout == "a" * 1000 + "\n[output truncated: 99000 bytes over the 1000-byte limit]"
    )
    assert result.stderr == "b" * 50
    flood = await sandbox.exec("head -c 5000000 /dev/zero", output_limit=10)
    assert flood.returncode == 0
    assert flood.stdout.endswith("4999990 bytes over the 10-byte limit]")
    assert DEFAULT_OUTPUT_LIMIT == 16 * 1024
    default = await sandbox.exec("head -c 20000 /dev/zero | tr '\\0' c")
    assert default.stdout.startswith("c" * DEFAULT_OUTPUT_LIMIT + "\n[output truncated: 3616")


async def test_binary_output_never_breaks_decoding(sandbox):
    """Bytes that are not UTF-8 come back replaced (U+FFFD), never as an error."""
    result = await sandbox.exec("printf '\\377\\376ok\\n'; printf '\\300' >&2")
    assert result.returncode == 0
    assert result.stdout == "\ufffd\ufffdok\n"
    assert result.stderr == "\ufffd"


# -- files -----------------------------------------------------------------------------------


async def test_files_round_trip_as_text_and_bytes(sandbox, kind_name):
    """What write_file wrote, read_file and the commands read back, text and bytes alike,
    at nested paths (their directories made) and at absolute ones (/tmp too, but a local
    sandbox's /tmp is the host's)."""
    await sandbox.write_file("notes.txt", "héllo\n")
    assert await sandbox.read_file("notes.txt") == "héllo\n"
    every_byte = bytes(range(256))
    await sandbox.write_file("a/b/c/data.bin", every_byte)
    assert await sandbox.read_file("a/b/c/data.bin", text=False) == every_byte
    assert (await sandbox.exec("wc -c < a/b/c/data.bin")).stdout.strip() == "256"
    await sandbox.write_file(f"{sandbox.workdir}/abs.txt", "absolute")
    assert (await sandbox.exec(["cat", "abs.txt"])).stdout == "absolute"
    await sandbox.exec("echo from a command > made.txt")
    assert await sandbox.read_file(f"{sandbox.workdir}/made.txt") == "from a command\n"
    await sandbox.write_file("notes.txt", "shorter")
    assert await sandbox.read_file("notes.txt") == "shorter"
    if kind_name != "local":
        await sandbox.write_file("/tmp/scratch/t.txt", "in tmp")
        assert await sandbox.read_file("/tmp/scratch/t.txt") == "in tmp"


async def test_reading_what_is_not_there(sandbox):
    """A missing file is FileNotFoundError; a file that is not UTF-8 reads as text with
    replacement characters."""
    with pytest.raises(FileNotFoundError):
        await sandbox.read_file("missing.txt")
    await sandbox.write_file("latin1.txt", "café".encode("latin-1"))
    assert await sandbox.read_file("latin1.txt") == "caf\ufffd"


async def test_files_and_setup_at_creation(kind, tmp_path):
    """`files` (text, bytes, a host file, a host directory) are written before `setup` runs,
    and setup's work is there when the sandbox is handed over."""
    (tmp_path / "host.txt").write_text("from the host")
    (tmp_path / "tree" / "sub").mkdir(parents=True)
    (tmp_path / "tree" / "sub" / "leaf.txt").write_text("leaf")
    made = await kind.create(
        run_id="test-run",
        sample_id="files",
        epoch=1,
        files={
            "data/in.txt": "input",
            "blob.bin": b"\x00\xff",
            "copied.txt": tmp_path / "host.txt",
            "tree": tmp_path / "tree",
        },
        setup="cat data/in.txt copied.txt tree/sub/leaf.txt > out.txt",
    )
    try:
        assert await made.read_file("out.txt") == "inputfrom the hostleaf"
        assert await made.read_file("blob.bin", text=False) == b"\x00\xff"
    finally:
        await kind.remove(made)


async def test_a_failing_setup_is_a_sandbox_error_and_leaves_nothing(kind, kind_name):
    """A setup script that fails is a SandboxError carrying its output, and the sandbox it
    was made in is removed."""
    before = await kind.remove_leftovers()
    assert before >= 0
    with pytest.raises(SandboxError, match="setup script failed \\(exit 7\\)") as caught:
        await kind.create(
            run_id="test-run", sample_id="setup", epoch=1, setup="echo broken step; exit 7"
        )
    assert caught.value.kind == kind_name
    assert caught.value.output == "broken step"
    assert "broken step" in str(caught.value)


def _own_dirs(kind_name: str) -> set[str]:
    """The sandbox directories this process has on the host (bwrap's and local's)."""
    return {
        path.name
        for path in Path(tempfile.gettempdir()).glob(f"vitals-{kind_name}-{os.getpid()}-*")
    }


async def test_files_given_as_a_file_and_a_folder_are_refused_before_anything_is_made(
    kind, kind_name
):
    """A path given as a file and also as the folder of another file is a ConfigError that
    names both, raised before a sandbox is made."""
    before = _own_dirs(kind_name)
    with pytest.raises(ConfigError, match=r"'data/x/y\.txt' would be inside 'data/x'"):
        await kind.create(
            run_id="test-run",
            sample_id="nested",
            epoch=1,
            files={"data/x": "a file", "data/x/y.txt": "under it"},
        )
    assert _own_dirs(kind_name) == before


async def test_a_file_that_cannot_be_laid_out_leaves_no_directory(kind, kind_name):
    """When a sample's file cannot be written into its new sandbox, the error is raised and
    the directory made for it is removed."""
    if kind_name == "docker":
        pytest.skip("docker: any failure in create removes the container (the setup test)")
    before = _own_dirs(kind_name)
    outside = "/etc/vitals-test.txt" if kind_name == "bwrap" else "/proc/vitals-test/x.txt"
    with pytest.raises((ConfigError, OSError)):
        await kind.create(
            run_id="test-run", sample_id="unwritable", epoch=1, files={outside: "nowhere"}
        )
    assert _own_dirs(kind_name) == before


async def test_two_samples_sandboxes_are_apart(kind, kind_name):
    """A file one sample's sandbox writes is not in another's (nor, but for a local
    sandbox, what it writes in /tmp)."""
    first = await kind.create(run_id="test-run", sample_id="a", epoch=1)
    second = await kind.create(run_id="test-run", sample_id="b", epoch=1)
    try:
        await first.write_file("secret.txt", "mine")
        if kind_name != "local":
            await first.exec("echo mine > /tmp/also-secret.txt")
        with pytest.raises(FileNotFoundError):
            await second.read_file("secret.txt")
        listing = await second.exec("ls -a; ls /tmp")
        assert "secret" not in listing.stdout
    finally:
        await kind.remove(first)
        await kind.remove(second)


# -- users -----------------------------------------------------------------------------------


async def test_user(sandbox, kind_name):
    """docker runs a command as any user the image knows; bwrap and local only as the user
    running the eval, and say so for any other."""
    if kind_name == "docker":
        assert (await sandbox.exec(["id", "-un"], user="sandbox")).stdout == "sandbox\n"
        return
    me = (await sandbox.exec(["id", "-un"])).stdout.strip()
    assert (await sandbox.exec(["id", "-un"], user=me)).stdout == f"{me}\n"
    with pytest.raises(ConfigError, match="user='nobody' needs a docker sandbox"):
        await sandbox.exec(["id"], user="nobody")


# -- the network -----------------------------------------------------------------------------

_CONNECT = (
    "import socket, sys\n"
    "host = sys.argv[1]\n"
    "if host == 'gateway':\n"
    "    for line in open('/proc/net/route').read().splitlines()[1:]:\n"
    "        f = line.split()\n"
    "        if f[1] == '00000000':\n"
    "            host = socket.inet_ntoa(bytes.fromhex(f[2])[::-1])\n"
    "try:\n"
    "    print(socket.create_connection((host, int(sys.argv[2])), timeout=10).recv(5).decode())\n"
    "except OSError as e:\n"
    "    print('unreachable', e)\n"
)


@pytest.fixture
async def listening(anyio_backend):
    """A TCP server of the test on every address of the host, answering "hello": its port."""

    async def hello(client):
        async with client:
            await client.send(b"hello")

    listener = await anyio.create_tcp_listener(local_host="0.0.0.0", local_port=0)
    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, hello)
        yield listener.extra(anyio.abc.SocketAttribute.local_port)
        group.cancel_scope.cancel()


@pytest.mark.parametrize("network", [False, True], ids=["no-network", "network"])
async def test_the_network_is_off_unless_asked_for(kind_name, listening, network):
    """bwrap and docker sandboxes reach no server, not even the host's 127.0.0.1, unless
    the spec says `network=True` (docker then reaches the host through its gateway); a
    local sandbox is no isolation, and reaches it always."""
    kind = kind_of(kind_name, network=network) if kind_name != "local" else kind_of("local")
    made = await kind.create(run_id="test-run", sample_id="net", epoch=1)
    host = "gateway" if kind_name == "docker" else "127.0.0.1"
    try:
        result = await made.exec(["python3", "-c", _CONNECT, host, str(listening)])
    finally:
        await kind.remove(made)
    reached = network or kind_name == "local"
    assert result.stdout.startswith("hello" if reached else "unreachable"), result


# -- nothing left behind ---------------------------------------------------------------------


async def _exists(kind_name: str, made) -> bool:
    if kind_name == "docker":
        reply = await made.api.request("GET", f"/containers/{made.container}/json")
        return reply.status == 200
    return made.root.exists()


async def test_remove_leaves_nothing_and_is_idempotent(kind, kind_name):
    """After remove, the sandbox's directory or container is gone, and so is every process
    it ran; removing again does nothing."""
    made = await kind.create(run_id="test-run", sample_id="rm", epoch=1)
    await made.write_file("big.bin", b"x" * 100_000)
    assert await _exists(kind_name, made)
    await kind.remove(made)
    assert not await _exists(kind_name, made)
    await kind.remove(made)


async def test_a_cancelled_exec_kills_its_process(sandbox):
    """Cancelling the task that runs an exec kills the command and what it started: when
    the cancellation is through, none of its processes is left."""
    env = mark()
    async with anyio.create_task_group() as group:
        group.start_soon(partial(sandbox.exec, "sleep 600 & sleep 600", env=env))
        await until(lambda: len(marked(env)) >= 2, "the command's two sleeps")
        group.cancel_scope.cancel()
    assert marked(env) == []


async def test_a_dead_sandbox_is_a_sandbox_error_with_its_last_output(sandbox, kind_name):
    """A sandbox that dies under a sample (its container killed, its directory gone) makes
    the exec a SandboxError carrying the output it had, never a result."""
    if kind_name == "docker":
        env = mark()

        async def kill_container():
            await until(lambda: marked(env), "the command")
            await sandbox.api.call("POST", f"/containers/{sandbox.container}/kill")

        async with anyio.create_task_group() as group:
            group.start_soon(kill_container)
            with pytest.raises(SandboxError, match="died") as caught:
                await sandbox.exec("echo partial; sleep 600", env=env)
            assert caught.value.output == "partial"
        return
    await anyio.to_thread.run_sync(sandbox.root.rename, sandbox.root.with_name("moved-away"))
    try:
        with pytest.raises(SandboxError) as caught:
            await sandbox.exec("echo hi")
        assert caught.value.kind == kind_name
    finally:
        await anyio.to_thread.run_sync(sandbox.root.with_name("moved-away").rename, sandbox.root)


def hold_sandboxes(kind_name: str, report: str) -> None:
    """In a child process: make two sandboxes, start a long command in one, write their
    names to `report`, and wait to be killed."""

    async def main() -> None:
        from tests.sandboxes import kind_of, mark

        kind = kind_of(kind_name)
        made = [await kind.create(run_id="killed-run", sample_id=str(i), epoch=1) for i in (1, 2)]
        env = mark()
        async with anyio.create_task_group() as group:
            group.start_soon(partial(made[0].exec, "sleep 600", env=env))
            names = [getattr(m, "container", None) or str(getattr(m, "root", "")) for m in made]
            await until(lambda: marked(env), "the child's command")
            part = anyio.Path(report + ".part")
            await part.write_text(json.dumps({"env": env, "names": names}))
            await part.rename(report)
            await anyio.sleep_forever()

    anyio.run(main)


async def test_what_a_killed_run_left_is_removed_by_the_next(kind, kind_name, tmp_path):
    """A process killed with kill -9 while holding sandboxes leaves no process running in
    bwrap ones; the next run's `remove_leftovers()` removes what is left (directories,
    containers, the commands still running in docker and local ones) and says how many.
    Sandboxes of a process still running are left alone."""
    await kind.remove_leftovers()  # what an earlier killed process left, not this test's
    ours = await kind.create(run_id="live-run", sample_id="kept", epoch=1)
    report = tmp_path / "report.json"
    child = start(hold_sandboxes, kind_name, str(report))
    try:
        held = await anyio.to_thread.run_sync(
            lambda: json.loads(
                wait_until(lambda: report.exists() and report.read_text(), "the child's report")
            )
        )
    finally:
        exitcode = await anyio.to_thread.run_sync(kill, child)
    assert exitcode == -signal.SIGKILL
    env = held["env"]
    if kind_name == "bwrap":  # --die-with-parent: gone with the child
        await until(lambda: not marked(env), "the killed run's command to die with it")
    assert await kind.remove_leftovers() == 2
    assert marked(env) == []
    if kind_name == "docker":
        for name in held["names"]:
            reply = await ours.api.request("GET", f"/containers/{name}/json")
            assert reply.status == 404
    else:
        assert not any([await anyio.Path(name).exists() for name in held["names"]])
    assert await kind.remove_leftovers() == 0
    try:
        assert (await ours.exec("echo still here")).stdout == "still here\n"
    finally:
        await kind.remove(ours)


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
async def test_the_marks_find_processes(sandbox):
    """The tests' way of finding a sandbox's processes finds a running one (else a test
    that finds none would prove nothing)."""
    env = mark()
    async with anyio.create_task_group() as group:
        group.start_soon(partial(sandbox.exec, "sleep 600", env=env))
        pids = await until(lambda: marked(env), "the command")
        assert all([await anyio.Path(f"/proc/{pid}").exists() for pid in pids])
        group.cancel_scope.cancel()

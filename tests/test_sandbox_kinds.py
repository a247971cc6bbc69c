"""What each kind of sandbox does of its own, beside the conformance suite
(tests/test_sandboxes.py): what a task may ask for (`sandbox_spec`), how a missing bwrap,
daemon or image is reported, docker's images, limits and labels, bwrap's view of the
host, local's warning; and the pieces underneath (the output cap, the Engine API's
frames and archives).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import anyio
import pytest

import vitals_engine as ve
from tests.sandboxes import TEST_IMAGE, kind_of, spec_of
from vitals_engine import ConfigError
from vitals_engine.sandboxes import SandboxSpec, sandbox_kind, sandbox_spec
from vitals_engine.sandboxes.base import Capped, file_items, memory_bytes
from vitals_engine.sandboxes.bwrap import BwrapKind
from vitals_engine.sandboxes.docker import DockerKind
from vitals_engine.sandboxes.engine_api import Frames, one_file, tar_of
from vitals_engine.sandboxes.local import LocalKind

# -- what a task may ask for -----------------------------------------------------------------


def test_sandbox_spec_reads_every_form():
    """A kind's name, ("docker", a Dockerfile), ("docker", the spec's fields), a spec or None."""
    assert sandbox_spec(None) is None
    assert sandbox_spec("bwrap") == SandboxSpec("bwrap")
    assert sandbox_spec("local") == SandboxSpec("local")
    assert sandbox_spec("docker") == SandboxSpec("docker", image="python:3.12-slim")
    assert sandbox_spec(("docker", "env/Dockerfile")) == SandboxSpec(
        "docker", dockerfile="env/Dockerfile"
    )
    assert sandbox_spec(("docker", Path("env/Dockerfile"))) == SandboxSpec(
        "docker", dockerfile="env/Dockerfile"
    )
    fields = sandbox_spec(("docker", {"image": "img", "memory": "1g", "cpus": 2, "pids": 64}))
    assert fields == SandboxSpec("docker", image="img", memory="1g", cpus=2, pids=64)
    assert sandbox_spec(("bwrap", {"network": True})) == SandboxSpec("bwrap", network=True)
    spec = SandboxSpec("docker", image="img")
    assert sandbox_spec(spec) is spec
    assert ve.SandboxSpec is SandboxSpec


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("podman", "'podman' is no kind of sandbox"),
        (42, "sandbox=42: sandbox= takes"),
        (("bwrap", "Dockerfile"), "only docker builds a Dockerfile"),
        (("docker", {"image": "a", "dockerfile": "b"}), "an image or a Dockerfile"),
        (("docker", {}), "an image or a Dockerfile"),
        (("docker", {"image": "a", "colour": "red"}), "unexpected keyword argument 'colour'"),
        (("bwrap", {"memory": "1g"}), "A bwrap sandbox takes no memory"),
        (("local", {"image": "x", "pids": 3}), "A local sandbox takes no image or pids"),
        (("docker", {"image": "a", "memory": "lots"}), "memory='lots'\\) is not a size"),
        (("docker", {"image": "a", "cpus": 0}), "cpus=0\\) must be a positive number"),
        (("docker", {"image": "a", "pids": 1.5}), "pids=1.5\\) must be a whole number"),
    ],
)
def test_sandbox_spec_refuses_what_it_cannot_run(value, message):
    """Anything else is a ConfigError that says what sandbox= takes."""
    with pytest.raises(ConfigError, match=message):
        sandbox_spec(value)


def test_memory_sizes_read_as_docker_writes_them():
    """ "512m", "2g", "1.5GiB" and a plain number of bytes."""
    assert memory_bytes("512m") == 512 * 1024**2
    assert memory_bytes("2g") == 2 * 1024**3
    assert memory_bytes("1.5GiB") == int(1.5 * 1024**3)
    assert memory_bytes("65536") == 65536


def test_each_kind_is_made_from_its_spec():
    """`sandbox_kind` makes the kind the spec names, holding the spec."""
    for spec, made in [
        (SandboxSpec("bwrap"), BwrapKind),
        (SandboxSpec("docker", image="img"), DockerKind),
        (SandboxSpec("local"), LocalKind),
    ]:
        kind = sandbox_kind(spec)
        assert isinstance(kind, made)
        assert kind.spec is spec


# -- the pieces underneath -------------------------------------------------------------------


def test_the_cap_keeps_whole_characters():
    """A cut inside a UTF-8 character backs off to its start; the note counts what was
    left out."""
    out = Capped(4)
    out.feed("ab€".encode())  # 2 + 3 bytes
    assert out.text() == "ab\n[output truncated: 3 bytes over the 4-byte limit]"
    out = Capped(5)
    out.feed(b"abc")
    out.feed(b"defgh")
    assert out.text() == "abcde\n[output truncated: 3 bytes over the 5-byte limit]"
    assert Capped(5).text() == ""


def test_files_given_at_creation(tmp_path):
    """Text is UTF-8, bytes are as they are, a host path is read (a directory file by file);
    anything else is a ConfigError."""
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "d" / "e" / "f.txt").write_text("deep")
    (tmp_path / "one.txt").write_text("one")
    items = file_items(
        {"t.txt": "é", "b.bin": b"\x00", "host.txt": tmp_path / "one.txt", "dir": tmp_path / "d"}
    )
    assert items == [
        ("t.txt", "é".encode()),
        ("b.bin", b"\x00"),
        ("host.txt", b"one"),
        ("dir/e/f.txt", b"deep"),
    ]
    with pytest.raises(ConfigError, match=r"give text, bytes or a pathlib\.Path"):
        file_items({"x": 3})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match="does not exist"):
        file_items({"x": tmp_path / "missing"})


def test_an_execs_stream_splits_into_frames_wherever_it_is_cut():
    """stdout and stderr frames come out whole, however the bytes arrive."""
    stream = (
        b"\x01\x00\x00\x00\x00\x00\x00\x05hello"
        + b"\x02\x00\x00\x00\x00\x00\x00\x03err"
        + b"\x01\x00\x00\x00\x00\x00\x00\x00"
    )
    for size in (1, 2, 3, 7, 8, 9, len(stream)):
        frames = Frames()
        found = []
        for start in range(0, len(stream), size):
            found += frames.feed(stream[start : start + size])
        assert found == [(1, b"hello"), (2, b"err"), (1, b"")], size


def test_archives_carry_files_and_directories():
    """What `write_file` sends and `read_file` reads: one file in a tar; a directory is
    IsADirectoryError."""
    assert one_file(tar_of({"a.txt": b"x" * 10_000})) == b"x" * 10_000
    with pytest.raises(IsADirectoryError):
        one_file(tar_of({}, ("folder",)))


# -- telling the user what is missing --------------------------------------------------------


@pytest.mark.anyio
async def test_a_missing_daemon_says_how_to_start_it(monkeypatch, tmp_path):
    """No daemon at the socket: a ConfigError naming the socket and how to start docker; a
    DOCKER_HOST that is no unix socket is one too."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/docker.sock")
    with pytest.raises(ConfigError, match=r"does not answer at .*docker.sock.*start it"):
        await kind_of("docker").check()
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.1:2375")
    with pytest.raises(ConfigError, match="over a unix socket"):
        await kind_of("docker").check()


@pytest.mark.anyio
async def test_a_missing_image_says_to_pull_it(docker_ready):
    """An image the daemon does not have: a ConfigError saying to pull it first."""
    with pytest.raises(ConfigError, match="not on this machine: `docker pull no-such/image:0`"):
        await kind_of("docker", image="no-such/image:0").check()


@pytest.mark.anyio
async def test_a_missing_bwrap_says_how_to_install_it(monkeypatch):
    """No bwrap on PATH: a ConfigError with the packages to install."""
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ConfigError, match="apt-get install bubblewrap"):
        await kind_of("bwrap").check()


# -- docker ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_docker_builds_a_dockerfile_once_and_runs_it(docker_ready, tmp_path):
    """("docker", "path/Dockerfile") builds the image at check, from its directory, and the
    containers run it, in its WORKDIR."""
    (tmp_path / "data.txt").write_text("context file")
    (tmp_path / "Dockerfile").write_text(
        f"FROM {TEST_IMAGE}\nCOPY data.txt /app/data.txt\nRUN echo built > /built.txt\n"
        "WORKDIR /app\n"
    )
    kind = DockerKind(SandboxSpec("docker", dockerfile=str(tmp_path / "Dockerfile")))
    await kind.check()
    image = kind.image
    assert image is not None
    assert image.startswith("vitals-build:")
    try:
        made = await kind.create(run_id="test-run", sample_id="built", epoch=1)
        try:
            assert made.workdir == "/app"
            result = await made.exec("pwd; cat /built.txt data.txt")
            assert result.stdout == "/app\nbuilt\ncontext file"
        finally:
            await kind.remove(made)
    finally:
        await kind.api.call("DELETE", f"/images/{image}", query={"force": True})


@pytest.mark.anyio
async def test_a_broken_dockerfile_is_a_config_error_with_its_output(docker_ready, tmp_path):
    """A build that fails says so, with the build's last output."""
    (tmp_path / "Dockerfile").write_text(f"FROM {TEST_IMAGE}\nRUN echo about to fail; exit 3\n")
    kind = kind_of("docker", image=None, dockerfile=str(tmp_path / "Dockerfile"))
    with pytest.raises(ConfigError, match=r"(?s)docker build of .* failed.*about to fail"):
        await kind.check()


@pytest.mark.anyio
async def test_docker_containers_carry_their_limits_and_labels(docker_ready):
    """Memory, CPUs and processes limited as the spec says, no network, labels naming the
    run, the sample and the process that made it."""
    kind = DockerKind(spec_of("docker", memory="96m", cpus=0.5, pids=50))
    made = await kind.create(run_id="run-7", sample_id="s-3", epoch=2)
    try:
        info = await made.api.call("GET", f"/containers/{made.container}/json")
    finally:
        await kind.remove(made)
    host = info["HostConfig"]
    assert (host["Memory"], host["NanoCpus"], host["PidsLimit"]) == (96 * 1024**2, 5 * 10**8, 50)
    assert host["NetworkMode"] == "none"
    labels = info["Config"]["Labels"]
    assert (labels["vitals.run_id"], labels["vitals.sample"], labels["vitals.epoch"]) == (
        "run-7",
        "s-3",
        "2",
    )
    assert labels["vitals.owner"].split(":")[1] == str(os.getpid())


@pytest.mark.anyio
async def test_a_command_over_the_memory_limit_is_killed_and_the_sandbox_lives(docker_ready):
    """A process that outgrows the container's memory is OOM-killed (137); the container
    goes on, so the sample sees a result, not a dead sandbox."""
    kind = kind_of("docker", memory="64m")
    made = await kind.create(run_id="test-run", sample_id="oom", epoch=1)
    try:
        result = await made.exec(["python3", "-c", "b = bytearray(400 * 1024 * 1024); print(1)"])
        assert result.returncode == 137
        assert (await made.exec("echo alive")).stdout == "alive\n"
    finally:
        await kind.remove(made)


@pytest.mark.anyio
async def test_docker_reads_files_through_links(docker_ready):
    """read_file follows a link the commands made, inside the container."""
    kind = DockerKind(spec_of("docker"))
    made = await kind.create(run_id="test-run", sample_id="links", epoch=1)
    try:
        await made.exec("mkdir -p real && echo target > real/t.txt && ln -s real/t.txt link")
        assert await made.read_file("link") == "target\n"
    finally:
        await kind.remove(made)


# -- bwrap -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_bwrap_shows_the_system_read_only_and_nothing_of_the_eval(
    bwrap_ready, monkeypatch, tmp_path
):
    """A bwrap sandbox sees /usr and /etc read-only, not the eval's files or home, and not
    its environment (its API keys)."""
    monkeypatch.setenv("VITALS_TEST_SECRET", "sk-do-not-leak")
    (tmp_path / "eval-file.txt").write_text("private")
    kind = kind_of("bwrap")
    made = await kind.create(run_id="test-run", sample_id="view", epoch=1)
    try:
        result = await made.exec("env; touch /usr/x; ls /home /root")
        assert "sk-do-not-leak" not in result.stdout
        assert "Read-only file system" in result.stderr
        outside = await made.exec(["cat", str(tmp_path / "eval-file.txt")])
        assert outside.returncode != 0
        with pytest.raises(OSError, match="Read-only file system"):
            await made.write_file("/etc/x", "no")
        hostname = await anyio.Path("/etc/hostname").read_text()
        assert await made.read_file("/etc/hostname") == hostname
    finally:
        await kind.remove(made)


# -- local -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_local_warns_once_per_run_that_nothing_is_isolated(caplog):
    """A local kind says loudly, once per run (per kind made), that nothing is isolated."""
    kind = kind_of("local")
    with caplog.at_level(logging.WARNING, logger="vitals_engine"):
        await kind.check()
        made = [await kind.create(run_id="r", sample_id=str(i), epoch=1) for i in (1, 2)]
        for sandbox in made:
            await kind.remove(sandbox)
    warnings = [r for r in caplog.records if "sandbox_not_isolated" in r.getMessage()]
    assert len(warnings) == 1
    assert "use bwrap or docker" in warnings[0].getMessage()


@pytest.mark.anyio
@pytest.mark.parametrize("pidfds", [True, False], ids=["pidfd", "no-pidfd"])
async def test_a_host_process_reads_writes_and_ends_with_or_without_pidfds(monkeypatch, pidfds):
    """A sandbox's host process (bwrap's and local's commands) gets its input, gives both
    outputs whole, and tells how it ended: through pidfds where the system has them, and
    through anyio's processes where it does not (not Linux)."""
    from vitals_engine.sandboxes.processes import end_group, run_process

    if not pidfds:
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    elif not hasattr(os, "pidfd_open"):
        pytest.skip("this system has no pidfds")
    lines = b"".join(b"line %d\n" % i for i in range(20_000))  # past a pipe's buffer
    done = await run_process(
        ["sh", "-c", "cat; echo oops >&2; exit 3"],
        input=lines,
        cwd=None,
        env=None,
        time_limit=30,
        limit=1 << 20,
        kill=end_group,
    )
    assert (done.returncode, done.timed_out) == (3, False)
    assert done.stdout.text().encode() == lines
    assert done.stderr.text() == "oops\n"

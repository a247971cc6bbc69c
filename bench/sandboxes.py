"""What a sandbox costs, for each kind this machine runs (bwrap, docker, local).

For each kind: making and removing `--count` sandboxes one after another (p50 and p99 of
each), an exec's round trip (`true`, p50 and p99 over `--execs`), and memory: `--live`
sandboxes made at once, each running a command (`sleep`): the memory their processes hold
(PSS; for docker the containers' own memory and their containerd shims), and the growth
of the machine's used memory (MemTotal - MemAvailable, noisy on a shared machine), over
their number. The
live ones are then cancelled together, as a run's end would, and the time until all
their processes are gone is printed.

    .venv/bin/python bench/sandboxes.py                       # every kind, 200 sandboxes, 100 live
    .venv/bin/python bench/sandboxes.py --kinds bwrap --live 300
    .venv/bin/python bench/sandboxes.py --kinds docker --count 50 --live 20 --image python:3.12-slim

docker needs its daemon and an image (`make sandboxes` makes vitals-sandbox-test:1).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from functools import partial
from pathlib import Path

import _this_tree  # noqa: F401  (first: this tree's vitals_engine)
import anyio

from vitals_engine import ConfigError
from vitals_engine.sandboxes import SandboxSpec, sandbox_kind


def used_memory() -> int:
    """Bytes of memory in use on this machine (MemTotal - MemAvailable)."""
    fields = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        name, value = line.split(":", 1)
        fields[name] = int(value.split()[0]) * 1024
    return fields["MemTotal"] - fields["MemAvailable"]


def _pss(pid: int) -> int:
    """Bytes of memory process `pid` holds, shared pages split among their users (PSS)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def descendants_pss(root: int) -> int:
    """The PSS of every process descended from `root` (bwrap's and local's sandboxes)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdecimal():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    total, todo = 0, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        total += _pss(pid)
        todo += children.get(pid, [])
    return total


def shims_pss(containers: list[str]) -> int:
    """The PSS of the containerd shims running `containers` (host processes of docker's)."""
    total = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdecimal():
            try:
                cmdline = Path(entry.path, "cmdline").read_bytes()
            except OSError:
                continue
            if b"containerd-shim" in cmdline and any(c.encode() in cmdline for c in containers):
                total += _pss(int(entry.name))
    return total


async def docker_memory(made: list) -> int:
    """What docker's live sandboxes hold: each container's memory (its cgroup's usage less
    the page cache) and the shims that run them."""
    total = 0
    for sandbox in made:
        stats = await sandbox.api.call(
            "GET", f"/containers/{sandbox.container}/stats", query={"stream": False}
        )
        memory = stats.get("memory_stats", {})
        total += memory.get("usage", 0) - memory.get("stats", {}).get("cache", 0)
    shims = await anyio.to_thread.run_sync(shims_pss, [s.container for s in made])
    return total + shims


def marked(needle: bytes) -> int:
    """How many processes on this host have `needle` in their environment."""
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdecimal():
            try:
                count += needle in Path(entry.path, "environ").read_bytes()
            except OSError:
                continue
    return count


def quantiles(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered) * 1000:8.1f} ms   p99 {p99 * 1000:8.1f} ms"


async def start_and_remove(kind, count: int) -> tuple[list[float], list[float]]:
    starts, removals = [], []
    for i in range(count):
        began = time.perf_counter()
        made = await kind.create(run_id="bench", sample_id=str(i), epoch=1)
        starts.append(time.perf_counter() - began)
        began = time.perf_counter()
        await kind.remove(made)
        removals.append(time.perf_counter() - began)
    return starts, removals


async def round_trips(kind, count: int) -> list[float]:
    made = await kind.create(run_id="bench", sample_id="execs", epoch=1)
    try:
        await made.exec(["true"])
        times = []
        for _ in range(count):
            result = await made.exec(["true"])
            assert result.returncode == 0, result
            times.append(result.seconds)
        return times
    finally:
        await kind.remove(made)


async def hold_live(kind, live: int) -> None:
    """`live` sandboxes at once, each running `sleep`: memory per sandbox, and the time to
    end them all by cancelling."""
    mark = uuid.uuid4().hex
    needle = f"BENCH_MARK={mark}".encode()
    before = used_memory()
    began = time.perf_counter()
    made = []
    async with anyio.create_task_group() as group:

        async def one(i: int) -> None:
            sandbox = await kind.create(run_id="bench", sample_id=f"live-{i}", epoch=1)
            made.append(sandbox)
            await sandbox.exec("sleep 3600", env={"BENCH_MARK": mark})

        for i in range(live):
            group.start_soon(one, i)
        while await anyio.to_thread.run_sync(marked, needle) < live:  # noqa: ASYNC110
            await anyio.sleep(0.05)
        up = time.perf_counter() - began
        during = used_memory()
        if kind.spec.kind == "docker":
            held = await docker_memory(made)
        else:
            held = await anyio.to_thread.run_sync(descendants_pss, os.getpid())
        began = time.perf_counter()
        group.cancel_scope.cancel()
    ended = time.perf_counter() - began
    left = marked(needle)
    began = time.perf_counter()
    async with anyio.create_task_group() as group:
        for sandbox in made:
            group.start_soon(kind.remove, sandbox)
    removed = time.perf_counter() - began
    print(
        f"  {live} live at once: all running after {up:.1f} s; {held / live / 2**20:.2f} MiB "
        f"each (PSS of its processes{', container and shim' if kind.spec.kind == 'docker' else ''}"
        f"; the machine's used memory grew {(during - before) / live / 2**20:.1f} MiB each); "
        f"cancelled in {ended:.2f} s ({left} processes left); removed in {removed:.2f} s"
    )


async def bench(name: str, args: argparse.Namespace) -> None:
    spec = SandboxSpec(name, image=args.image) if name == "docker" else SandboxSpec(name)
    kind = sandbox_kind(spec)
    try:
        await kind.check()
    except ConfigError as exc:
        print(f"{name}: not measured ({exc})")
        return
    left = await kind.remove_leftovers()
    print(f"{name}:" + (f" ({left} left by a killed run removed first)" if left else ""))
    count = args.count if name != "docker" else min(args.count, args.docker_count)
    starts, removals = await start_and_remove(kind, count)
    print(f"  start  ({count:3d}): {quantiles(starts)}")
    print(f"  remove ({count:3d}): {quantiles(removals)}")
    print(f"  exec   ({args.execs:3d}): {quantiles(await round_trips(kind, args.execs))}")
    live = args.live if name != "docker" else min(args.live, args.docker_live)
    await hold_live(kind, live)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", default="bwrap,docker,local")
    parser.add_argument("--count", type=int, default=200, help="sandboxes started and removed")
    parser.add_argument("--docker-count", type=int, default=200, help="at most, for docker")
    parser.add_argument("--execs", type=int, default=100, help="exec round trips")
    parser.add_argument("--live", type=int, default=100, help="sandboxes held at once")
    parser.add_argument("--docker-live", type=int, default=50, help="at most, for docker")
    parser.add_argument("--image", default="vitals-sandbox-test:1")
    parser.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, {args.backend}")
    for name in args.kinds.split(","):
        anyio.run(partial(bench, name.strip(), args), backend=args.backend)


if __name__ == "__main__":
    main()

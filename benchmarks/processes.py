"""The processes of the controller benchmark: the local control plane (``devcluster up``),
the manager under test (``omenative-manager``, its log, ``/metrics`` and ``/proc``
figures), and an optional py-spy sampling the manager. Children get SIGTERM when the
benchmark dies, so nothing outlives a ``kill -9``."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import shutil
import signal
import sys
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import aiohttp
import click
from prometheus_client.parser import text_string_to_metric_families
from watching import say

from omenative_controller.cli.manager import main as manager_command
from omenative_controller.kube.client import JSON

REPO = Path(__file__).resolve().parents[1]


def _pdeathsig() -> None:
    """In the child: get SIGTERM when the benchmark dies (so nothing outlives a kill -9)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _child_env() -> dict[str, str]:
    src = str(REPO / "src")
    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}


# ---------------------------------------------------------------------------- the cluster


class DevCluster:
    """``devcluster up`` as a child process (or nothing, when ``KUBECONFIG`` is set)."""

    def __init__(self, state_dir: Path, nodes: int, extra: tuple[str, ...] = ()) -> None:
        self.state_dir = state_dir
        self.nodes = nodes
        self.extra = extra
        self.proc: asyncio.subprocess.Process | None = None
        self.kubeconfig: Path | None = None

    async def start(self, timeout: float = 300.0) -> Path:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        err = (self.state_dir / "up.stderr.log").open("wb")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "omenative_devcluster", "up",
            "--state-dir", str(self.state_dir), "--nodes", str(self.nodes), *self.extra,
            stdout=asyncio.subprocess.PIPE, stderr=err, env=_child_env(),
            preexec_fn=_pdeathsig,
        )
        err.close()
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"devcluster up gave no KUBECONFIG within {timeout:.0f}s")
            line = await asyncio.wait_for(self.proc.stdout.readline(), left)
            if not line:
                tail = (self.state_dir / "up.stderr.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"devcluster up exited ({self.proc.returncode}):\n{tail}")
            text = line.decode().strip()
            if text.startswith("KUBECONFIG="):
                self.kubeconfig = Path(text.partition("=")[2])
                return self.kubeconfig

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.proc.wait(), 30)
        # whatever `up` left behind (it checks each PID still runs its recorded binary)
        down = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "omenative_devcluster", "down",
            "--state-dir", str(self.state_dir), stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL, env=_child_env(),
        )
        await down.wait()
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


# ---------------------------------------------------------------------------- the manager


def manager_argv(flags: Mapping[str, object]) -> list[str]:
    """``omenative-manager`` arguments for ``flags``, keyed by the manager's own option names
    (its click parameters: ``max_inflight``, ``pipeline_creates``); ``None`` leaves an option
    at the manager's default. A name the manager does not have raises ``KeyError``, so a
    benchmark cannot pass an option the manager dropped or renamed, and every option it
    does not name keeps the manager's own default (nothing is copied here to rot)."""
    params = {p.name: p for p in manager_command.params if isinstance(p, click.Option)}
    unknown = sorted(set(flags) - set(params))
    if unknown:
        raise KeyError(f"omenative-manager has no option {', '.join(unknown)}")
    argv: list[str] = []
    for name, value in flags.items():
        option = params[name]
        if value is None:
            continue
        if option.is_flag and option.secondary_opts:  # --x/--no-x
            argv.append(option.opts[0] if value else option.secondary_opts[0])
        elif option.is_flag:
            if value:
                argv.append(option.opts[0])
        else:
            values = value if option.multiple and isinstance(value, tuple | list) else (value,)
            for one in values:
                argv += [option.opts[0], _flag_text(one)]
    return argv


def _flag_text(value: object) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


class ManagerProcess:
    """``omenative-manager`` as a subprocess: its ports, log events and /proc figures."""

    def __init__(self, log_dir: Path, *, ticks: bool = False) -> None:
        self.log_dir = log_dir
        #: the event loop's longest tick gap per second (``manager_ticked.py``), or None
        self.ticks: Path | None = log_dir / "manager.ticks" if ticks else None
        self.proc: asyncio.subprocess.Process | None = None
        self.metrics_port: int | None = None
        self.events: Counter[str] = Counter()
        self.warnings: list[JSON] = []
        self.leading = asyncio.Event()
        self.listening = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self.hwm_kib = 0
        self.cpu_seconds = 0.0

    async def start(self, kubeconfig: Path, namespace: str, flags: Mapping[str, object]) -> None:
        """Run the manager on ``namespace``; ``flags`` are its options by name (``workers``,
        ``status_coalesce``: ``manager_argv``), every other option at the manager's default."""
        err = (self.log_dir / "manager.stderr.log").open("wb")
        runner = (["-m", "omenative_controller.cli.manager"] if self.ticks is None else
                  [str(REPO / "benchmarks" / "manager_ticked.py"), str(self.ticks)])
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, *runner,
            *manager_argv({"kubeconfig": kubeconfig, "namespaces": (namespace,),
                           "config_namespace": namespace, "bind_address": "127.0.0.1",
                           "metrics_port": 0, "probe_port": 0, "identity": "bench",
                           **flags}),
            stdout=asyncio.subprocess.PIPE, stderr=err, env=_child_env(),
            preexec_fn=_pdeathsig,
        )
        err.close()
        self._reader = asyncio.create_task(self._read_logs())
        await asyncio.wait_for(self.leading.wait(), 60)

    async def _read_logs(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        with (self.log_dir / "manager.log").open("wb") as out:
            async for line in self.proc.stdout:
                out.write(line)
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(rec, dict):
                    continue
                event = str(rec.get("event"))
                self.events[event] += 1
                if rec.get("level") in ("warning", "error", "critical") and len(
                        self.warnings) < 20:
                    self.warnings.append(rec)
                if event == "manager.listening":
                    self.metrics_port = int(rec["metrics_port"])
                    self.listening.set()
                elif event == "manager.leading":
                    self.leading.set()

    def sample_proc(self) -> tuple[int, int, float]:
        """(VmHWM KiB, VmRSS KiB, CPU seconds) of the manager process, kept as the maximum."""
        assert self.proc is not None
        hwm = rss = 0
        cpu = 0.0
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
                elif line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        self.hwm_kib = max(self.hwm_kib, hwm)
        self.cpu_seconds = max(self.cpu_seconds, cpu)
        return hwm, rss, cpu

    def longest_stall(self, start: float, end: float
                      ) -> tuple[float, float, int, int, float]:
        """(longest event-loop tick gap, the process's CPU s within it, seconds with a gap
        over 10 ms, seconds in all, the most CPU s the loop thread ran within one gap) of
        the seconds ending in [``start``, ``end`` + 1] (``time.monotonic()``); NaN and 0
        without ticks."""
        gaps: list[tuple[float, float, float]] = []
        if self.ticks is not None and self.ticks.exists():
            for line in self.ticks.read_text().splitlines():
                at, gap, cpu, *loop_cpu = (float(v) for v in line.split())
                if start <= at <= end + 1.0:
                    gaps.append((gap, cpu, loop_cpu[0] if loop_cpu else float("nan")))
        if not gaps:
            return float("nan"), float("nan"), 0, 0, float("nan")
        gap, cpu, _ = max(gaps)
        return (gap, cpu, sum(1 for g, _, _ in gaps if g > 0.010), len(gaps),
                max(c for _, _, c in gaps))

    async def metrics(self) -> list[tuple[str, dict[str, str], float]]:
        """Every sample of the manager's /metrics."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        async with aiohttp.ClientSession() as http, http.get(
                url, timeout=aiohttp.ClientTimeout(total=10)) as resp:
            text = await resp.text()
        return [(s.name, dict(s.labels), float(s.value))
                for fam in text_string_to_metric_families(text) for s in fam.samples]

    async def stop(self) -> None:
        """SIGTERM (graceful), SIGKILL after 30 s."""
        if self.proc is None:
            return
        if self.proc.returncode is None:
            self.sample_proc()
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 30)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self._reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._reader, 5)


async def start_py_spy(path: Path | None, manager: ManagerProcess, rate: int = 100
                       ) -> asyncio.subprocess.Process | None:
    """``py-spy record`` of the manager at ``rate`` Hz, or None: collapsed stacks, or for
    a ``.json`` path a timeline (speedscope, idle samples kept: ``spy_stalls.py``)."""
    exe = shutil.which("py-spy", path=str(Path(sys.executable).parent) + os.pathsep
                       + os.environ.get("PATH", ""))
    if path is None or manager.proc is None:
        return None
    if exe is None:
        say("--py-spy: py-spy is not installed (pip install py-spy); not profiling")
        return None
    form = ["--format", "speedscope", "--idle"] if path.suffix == ".json" else [
        "--format", "raw"]
    return await asyncio.create_subprocess_exec(
        exe, "record", "--pid", str(manager.proc.pid), "--rate", str(rate), *form,
        "--nonblocking", "--output", str(path), stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL, preexec_fn=_pdeathsig)


async def stop_py_spy(proc: asyncio.subprocess.Process | None, path: Path | None) -> None:
    """Stop the profiler (it writes its file on SIGINT)."""
    if proc is None or proc.returncode is not None:
        return
    proc.send_signal(signal.SIGINT)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), 30)
    say(f"py-spy samples of the manager in {path}")

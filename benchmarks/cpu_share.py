"""Who used the machine's CPU during a timed phase: each control-plane process, the
kubelet stand-in, the manager and the benchmark itself.

The controller benchmark runs everything on one machine (2 cores here), so a controller
that burns CPU slows the API server, the scheduler and the kubelet stand-in that move its
own pods. :class:`CpuShare` reads ``utime + stime`` from ``/proc/<pid>/stat`` at the start
and the end of a phase for every process it is given (the cluster's from its
``pids.json``: the ``devcluster up`` supervisor runs the kubelet stand-in) and prints the
seconds each used, and their sum against the phase's wall time x cores.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from pathlib import Path

__all__ = ["CpuShare", "LoadAverage", "cluster_pids", "self_hwm_mib"]


def _cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cluster_pids(state_dir: Path) -> dict[str, int]:
    """The processes of a ``devcluster up`` state folder, by name (the supervisor, which
    runs the kubelet stand-in, as ``kubelet stand-in``); empty when it has none."""
    try:
        data = json.loads((state_dir / "pids.json").read_text())
    except (OSError, ValueError):
        return {}
    out = {"kubelet stand-in": int(data["supervisor"]["pid"])}
    out.update({name: int(rec["pid"]) for name, rec in (data.get("components") or {}).items()})
    return out


class CpuShare:
    """CPU seconds per process between :meth:`start` and :meth:`stop`."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = dict(pids)
        self._start: dict[str, float] = {}
        self.used: dict[str, float] = {}
        self.wall = 0.0
        self._t0 = 0.0

    def start(self) -> None:
        """Sample every process now."""
        self._t0 = time.monotonic()
        self._start = {n: c for n, p in self.pids.items()
                       if (c := _cpu_seconds(p)) is not None}

    def stop(self) -> None:
        """Sample again; ``used`` holds the seconds each process used in between."""
        self.wall = time.monotonic() - self._t0
        for name, before in self._start.items():
            after = _cpu_seconds(self.pids[name])
            if after is not None:
                self.used[name] = after - before

    def line(self) -> str:
        """``name 12.3 s, ...; all 40.1 s of 60.0 s x 2 cores (33 %)``."""
        cores = os.cpu_count() or 1
        total = sum(self.used.values())
        parts = ", ".join(f"{n} {s:.1f}" for n, s in
                          sorted(self.used.items(), key=lambda kv: -kv[1]))
        share = 100 * total / max(self.wall * cores, 1e-9)
        return (f"{parts}; all {total:.1f} s of {self.wall:.1f} s x {cores} cores "
                f"({share:.0f} %)")


class LoadAverage:
    """The machine's 1-minute load average (``/proc/loadavg``) sampled every 2 s between
    :meth:`start` and :meth:`stop`: how busy the machine was while a phase ran (other
    sessions' work included), printed beside its figures."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Sample now and every 2 s (needs a running event loop)."""
        self._task = asyncio.get_running_loop().create_task(self._sample())

    async def _sample(self) -> None:
        while True:
            with contextlib.suppress(OSError, ValueError):
                self.samples.append(float(Path("/proc/loadavg").read_text().split()[0]))
            await asyncio.sleep(2.0)

    async def stop(self) -> None:
        """Stop sampling."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def line(self) -> str:
        """``1.2-3.4 (mean 2.1)``."""
        if not self.samples:
            return "not sampled"
        return (f"{min(self.samples):.1f}-{max(self.samples):.1f} "
                f"(mean {sum(self.samples) / len(self.samples):.1f})")


def self_hwm_mib() -> float:
    """This process's VmHWM (the bare loop shares it with the watchers of the benchmark)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")

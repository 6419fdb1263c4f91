"""A core of its own, or the CPU first, for the process under measurement
(``bench_controller.py --manager-core``, ``--manager-realtime``).

On a machine of 2 cores the API server, etcd, KWOK and the scheduler keep both busy: the
OS then parks the manager's event loop for tens of milliseconds at a time, and the loop
comes back to a backlog of ready sockets it runs in one long iteration. The stall the
planner benchmark bounds is the loop's own hold, on a quiet machine; giving the manager
one core and everything else the others measures that on this one (the cluster then runs
slower: wall times of such a run are not comparable with an unpinned one). At 10,000 pods
one core is too little for the cluster (KWOK fell minutes behind); there the manager's
threads run under ``SCHED_RR`` instead: the OS runs them the moment they are ready, and the
cluster has both cores whenever the manager does not need one (it needs 20-40 % of one).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["children", "others", "pin", "realtime"]


def _each_thread(pid: int, apply: Callable[[int], None],
                 gone: type[OSError] = OSError) -> int:
    """``apply(tid)`` for every thread of ``pid`` (threads it starts later inherit what was
    set); how many it was applied to (0: the process is gone). A thread that ended
    meanwhile raises ``gone`` and is skipped."""
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return 0
    done = 0
    for tid in tids:
        with contextlib.suppress(gone):
            apply(tid)
            done += 1
    return done


def pin(pid: int, cores: Iterable[int]) -> int:
    """Pin every thread of ``pid`` to ``cores``; how many threads were pinned."""
    wanted = set(cores)
    return _each_thread(pid, lambda tid: os.sched_setaffinity(tid, wanted))


def others(core: int) -> set[int]:
    """Every core this process may use but ``core``."""
    allowed = os.sched_getaffinity(0)
    if core not in allowed or not allowed - {core}:
        raise ValueError(f"--manager-core {core}: this process may use cores "
                         f"{sorted(allowed)}; it needs that one and another")
    return allowed - {core}


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (from /proc)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def realtime(pid: int, on: bool = True) -> int:
    """Every thread of ``pid`` under ``SCHED_RR`` at the lowest real-time priority (or back
    to ``SCHED_OTHER``); how many threads were set."""
    policy, param = (os.SCHED_RR, os.sched_param(1)) if on else \
        (os.SCHED_OTHER, os.sched_param(0))
    return _each_thread(pid, lambda tid: os.sched_setscheduler(tid, policy, param),
                        gone=ProcessLookupError)

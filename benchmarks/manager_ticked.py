"""``omenative-manager`` with its event loop's stalls recorded, for the controller benchmark.

``python benchmarks/manager_ticked.py OUT [manager options]`` runs the manager as
``omenative-manager [manager options]`` does, with one more task on its event loop: the
1 ms ticker of ``loop_hold.tick_gaps`` (the measure of ``bench_planner`` and
``bench_decode``). Once a second it appends to ``OUT`` one line, ``<CLOCK_MONOTONIC end of
the second> <longest tick gap s> <CPU s in that gap>``, so the benchmark can take the
longest stall within a timed phase (the clock is the machine's, shared by processes). The
ticker costs the manager ~1,000 wake-ups a second: figures measured with it, not without.
With ``OMENATIVE_MEMPROBE=DIR`` it also writes the deep sizes of the manager's structures
(``manager_memory.py``); with ``OMENATIVE_STALLPROBE=FILE``, each callback and collection
that held the loop over 5 ms (``loop_callbacks.py``); with ``OMENATIVE_GCFANOUT=FILE``,
each young collection over 3 ms and the references it walked (``gc_fanout.py``). Each line
of ``OUT`` also carries the most CPU the loop thread ran within one gap of that second.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import gc_fanout
import loop_callbacks
from loop_hold import tick_gaps
from manager_memory import start_from_env

from omenative_controller.cli.manager import main as manager_main


class Windows:
    """Each second's longest gap with the process's CPU in it, and the most CPU the loop
    thread itself ran within one gap, appended to a file."""

    def __init__(self, out: Path) -> None:
        self.out = out.open("a", buffering=1)
        self.gap = self.cpu = self.loop_cpu = 0.0
        self.thread_cpu = time.thread_time()  # runs on the loop thread, after each tick
        self.until = time.monotonic() + 1.0

    def __call__(self, gap: float, cpu: float) -> None:
        thread_cpu = time.thread_time()
        # the process's CPU counts planning threads and the GIL they hold; the loop
        # thread's own is what the planner benchmark's "holds the loop" bounds
        self.loop_cpu = max(self.loop_cpu, thread_cpu - self.thread_cpu)
        self.thread_cpu = thread_cpu
        if gap > self.gap:
            self.gap, self.cpu = gap, cpu
        now = time.monotonic()
        if now >= self.until:
            self.out.write(f"{now:.3f} {self.gap:.6f} {self.cpu:.6f} {self.loop_cpu:.6f}\n")
            self.gap = self.cpu = self.loop_cpu = 0.0
            self.until = now + 1.0


def ticked_run(out: Path) -> Any:
    """``asyncio.run`` with the ticker beside the main coroutine."""
    plain_run = asyncio.run

    def run(main: Coroutine[Any, Any, Any], **kwargs: Any) -> Any:
        async def with_ticks() -> Any:
            done = asyncio.Event()
            ticks = asyncio.create_task(tick_gaps(Windows(out), done))
            try:
                return await main
            finally:
                done.set()
                await ticks

        return plain_run(with_ticks(), **kwargs)

    return run


if __name__ == "__main__":
    start_from_env()  # OMENATIVE_MEMPROBE=DIR: where the memory goes (manager_memory.py)
    if (probe := loop_callbacks.probe_file()) is not None:  # what held the loop
        loop_callbacks.install(probe)
    gc_fanout.install_from_env()  # OMENATIVE_GCFANOUT=FILE: what young collections walk
    asyncio.run = ticked_run(Path(sys.argv[1]))  # the manager calls asyncio.run(...)
    sys.argv = ["omenative-manager", *sys.argv[2:]]
    manager_main()

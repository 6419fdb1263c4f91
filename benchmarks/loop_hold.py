"""How long a piece of work holds the event loop: the measure every loop-stall benchmark
shares (``bench_planner``, ``bench_decode``), so they cannot drift apart."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable

__all__ = ["GcPauses", "loop_hold", "tick_gaps"]


class GcPauses:
    """The longest garbage collection per generation while installed (``gc.callbacks``):
    a collection never gives up the GIL, so one in the planning thread holds the loop for
    all of it."""

    def __init__(self, on_pause: Callable[[int, float, dict[str, int]], None] | None = None
                 ) -> None:
        self.longest: dict[int, float] = {}
        self.on_pause = on_pause  # each collection: (generation, seconds, gc's info)
        self.last_cpu = 0.0
        """The collecting thread's CPU in the last collection (s): its wall time less what
        the OS gave other processes meanwhile."""
        self._started = 0.0
        self._started_cpu = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started, self._started_cpu = time.perf_counter(), time.thread_time()
            return
        gen, took = info["generation"], time.perf_counter() - self._started
        self.last_cpu = time.thread_time() - self._started_cpu
        self.longest[gen] = max(self.longest.get(gen, 0.0), took)
        if self.on_pause is not None:
            self.on_pause(gen, took, info)


async def loop_hold(run: Callable[[], Awaitable[object]]
                     ) -> tuple[float, float, float, dict[int, float]]:
    """(longest gap between 1 ms ticks of the event loop, the most CPU this process ran
    within one gap, wall time of ``run``, the longest collection per GC generation) while
    ``run`` plans.

    The CPU (every thread's: the pass's, wherever it runs) tells the time the pass held
    the loop from the time the OS ran other processes, which a loaded machine adds to the
    wall gap."""
    gaps: list[tuple[float, float]] = []
    done = asyncio.Event()
    pauses = GcPauses()

    gc.collect()
    gc.freeze()  # as in _median_time: a full collection of the world is not the planner
    task = asyncio.create_task(tick_gaps(lambda gap, cpu: gaps.append((gap, cpu)), done))
    await asyncio.sleep(0.01)
    gc.callbacks.append(pauses)
    t0 = time.perf_counter()
    try:
        result = await run()  # kept, as the manager keeps its memo: freed after the ticks
    finally:
        gc.callbacks.remove(pauses)
    took = time.perf_counter() - t0
    await asyncio.sleep(0.005)
    done.set()
    await task
    del result
    gc.unfreeze()
    return max(g for g, _ in gaps), max(c for _, c in gaps), took, pauses.longest


async def tick_gaps(on_gap: Callable[[float, float], None], done: asyncio.Event) -> None:
    """Tick the event loop every 1 ms until ``done``; ``on_gap(wall, cpu)`` per tick: the
    wall time since the previous tick and the CPU this process (every thread) ran in it.
    The one measure of a loop stall, here and in the manager under the controller
    benchmark (``manager_ticked.py``)."""
    last, last_cpu = time.perf_counter(), time.process_time()
    while not done.is_set():
        await asyncio.sleep(0.001)
        now, cpu = time.perf_counter(), time.process_time()
        on_gap(now - last, cpu - last_cpu)
        last, last_cpu = now, cpu

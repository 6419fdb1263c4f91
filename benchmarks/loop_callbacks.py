"""What held the manager's event loop: each callback that ran long on the loop thread, and
each long garbage collection, written as it happens (``OMENATIVE_STALLPROBE=FILE``).

The 1 ms ticker (``manager_ticked.py``) says how long the loop was held; this says by what.
Each ``asyncio`` callback (a task's step, a reader, a timer) is timed with the loop thread's
own CPU clock, so time the OS gave other processes does not count, and one over
``THRESHOLD`` s is written with the coroutine it stepped (and ``[gc N ms]``: the CPU of
the collections that ran inside it). A collection never gives up the
GIL, so one in any thread is written too. Costs two thread-clock reads per callback: figures
of a probed run are not the benchmark's figures.

Lines: ``<CLOCK_MONOTONIC end> cb <loop CPU s> <wall s> <what>`` or
``<end> gc<generation> <collecting thread's CPU s> <wall s> <collected>``: a collection
over ``THRESHOLD`` s of wall (its CPU says how much of that it held the GIL while running);
``<end> iter <loop CPU s> <wall s> <n> callbacks, ...``: a loop iteration over ``ITERATION``
s of loop-thread CPU or 3 x that of wall (its wait for events included), with the longest
callbacks it ran and the size of the loop's timer heap before it (and how much of it was
cancelled: asyncio rebuilds the heap within an iteration once over half is);
``<end> timers 0 0 <n> timers, <m> live: <count> <owner>, ...``: who owns the live timers
of a heap over ``TIMERS``, at most every 30 s.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from loop_hold import GcPauses

THRESHOLD = 0.005
"""A callback or collection over this (s) is written."""

ITERATION = float(os.environ.get("OMENATIVE_STALLPROBE_ITERATION", "0.010"))
"""A loop iteration whose callbacks ran over this (s) of loop-thread CPU is written, with
how many ran and the longest: the 1 ms ticker sees an iteration, not a callback (it may
wait two: ``OMENATIVE_STALLPROBE_ITERATION=0.005`` writes the halves of a 10 ms gap)."""

TIMERS = 2000
"""A timer heap of at least this many handles is counted by owner (``timers`` lines, at
most every 30 s): what makes asyncio's rebuild of it long."""

ENV = "OMENATIVE_STALLPROBE"
"""The environment variable naming the file; the benchmark and its manager both read it."""


def probe_file() -> Path | None:
    """The file ``OMENATIVE_STALLPROBE`` names, or None when the probe is off."""
    value = os.environ.get(ENV)
    return Path(value) if value else None


def _what(handle: asyncio.Handle) -> str:
    """The coroutine a task step runs, else the callback's name."""
    callback = getattr(handle, "_callback", None)
    task = getattr(callback, "__self__", None)
    if isinstance(task, asyncio.Task):
        coro = task.get_coro()
        frame = getattr(coro, "cr_frame", None)
        where = f"@{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno}" if frame \
            else ""
        return f"task {getattr(coro, '__qualname__', coro)}{where}"
    return str(getattr(callback, "__qualname__", callback))


def _census(loop: asyncio.AbstractEventLoop) -> str:
    """Who owns the loop's live timers: the callbacks' names, the most common first."""
    owners: Counter[str] = Counter()
    heap = getattr(loop, "_scheduled", ())
    for handle in heap:
        if not handle.cancelled():
            owners[_what(handle)] += 1
    live = sum(owners.values())
    return (f"{len(heap)} timers, {live} live: "
            + ", ".join(f"{n} {what}" for what, n in owners.most_common(8)))


def install(out: Path) -> Callable[[], None]:
    """Time every callback of every event loop in this process from now on; returns what
    undoes it."""
    sink: TextIO = out.open("a", buffering=1)
    plain_run = asyncio.events.Handle._run
    plain_iteration = asyncio.BaseEventLoop._run_once  # type: ignore[attr-defined]

    ran: list[tuple[float, float, str]] = []  # this iteration's callbacks: CPU s, wall s, what
    collecting = [0.0]  # CPU s of every collection so far (a callback's share: its GC)
    census = [0.0]  # when the timer heap may be counted by owner again

    def timed_run(self: asyncio.Handle) -> None:
        what = _what(self)  # before: a finished task's coroutine has no frame
        cpu0, t0, gc0 = time.thread_time(), time.perf_counter(), collecting[0]
        plain_run(self)
        cpu, wall = time.thread_time() - cpu0, time.perf_counter() - t0
        if collecting[0] > gc0:  # collections ran inside it: how much of its time they took
            what = f"{what} [gc {1000 * (collecting[0] - gc0):.1f} ms]"
        ran.append((cpu, wall, what))
        if cpu > THRESHOLD:
            sink.write(f"{time.monotonic():.3f} cb {cpu:.6f} {wall:.6f} {what}\n")

    def timed_iteration(self: asyncio.BaseEventLoop) -> None:
        ran.clear()
        # the timer heap: asyncio rebuilds it in the iteration (outside every callback)
        # once over half of it is cancelled, at O(n) with a Python comparison per step
        timers = len(getattr(self, "_scheduled", ()))
        cancelled = getattr(self, "_timer_cancelled_count", 0)
        if timers >= TIMERS and time.monotonic() >= census[0]:
            census[0] = time.monotonic() + 30.0
            sink.write(f"{time.monotonic():.3f} timers 0 0 {_census(self)}\n")
        cpu0, t0 = time.thread_time(), time.perf_counter()
        plain_iteration(self)
        cpu, wall = time.thread_time() - cpu0, time.perf_counter() - t0
        if cpu > ITERATION or wall > 3 * ITERATION:
            top = sorted(ran, reverse=True)[:4]
            sink.write(f"{time.monotonic():.3f} iter {cpu:.6f} {wall:.6f} "
                       f"{len(ran)} callbacks, {1000 * sum(c for c, _, _ in ran):.1f} ms CPU "
                       f"and {1000 * sum(w for _, w, _ in ran):.1f} ms wall in them (the "
                       "rest: waiting for events); "
                       + ", ".join(f"{1000 * c:.1f} ms {what}" for c, _, what in top)
                       + f"; timers before it: {timers} ({cancelled} cancelled)\n")

    def collection(generation: int, wall: float, info: dict[str, int]) -> None:
        collecting[0] += pauses.last_cpu
        if wall > THRESHOLD:
            sink.write(f"{time.monotonic():.3f} gc{generation} {pauses.last_cpu:.6f} "
                       f"{wall:.6f} {info.get('collected', 0)} collected\n")

    pauses = GcPauses(on_pause=collection)

    def undo() -> None:
        asyncio.events.Handle._run = plain_run  # type: ignore[method-assign]
        asyncio.BaseEventLoop._run_once = plain_iteration  # type: ignore[attr-defined]
        gc.callbacks.remove(pauses)
        sink.close()

    asyncio.events.Handle._run = timed_run  # type: ignore[method-assign]
    asyncio.BaseEventLoop._run_once = timed_iteration  # type: ignore[attr-defined]
    gc.callbacks.append(pauses)
    return undo


def worst(out: Path | None, start: float, end: float, top: int = 8) -> list[str]:
    """The callbacks and collections of [``start``, ``end``] (``time.monotonic()``) that held
    the loop longest, as report lines: the longest first, and each kind's count."""
    if out is None or not out.exists():
        return []
    rows: list[tuple[float, str]] = []
    kinds: Counter[str] = Counter()
    for line in out.read_text().splitlines():
        at, kind, cpu, wall, what = line.split(" ", 4)
        if kind != "timers" and start <= float(at) <= end:  # a census holds nothing
            held = float(cpu)
            label = f"{kind} {what}" if kind in ("cb", "iter") else \
                f"{kind} ({1000 * float(wall):.1f} ms wall)"
            rows.append((held, f"{1000 * held:.1f} ms {label}"))
            kinds[kind if kind != "cb" else f"cb {what.split('@')[0]}"] += 1
    rows.sort(reverse=True)
    return ([text for _, text in rows[:top]]
            + [f"{n} x {k}" for k, n in kinds.most_common(top)])

"""The stall probe names what held the event loop (``benchmarks/loop_callbacks.py``).

The controller benchmark's ticker says how long the manager's loop was held; with
``OMENATIVE_STALLPROBE`` the report also says by which coroutine, by the loop thread's own
CPU, so a loaded machine's scheduling is not blamed on the manager or the reverse.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import loop_callbacks


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


async def holds_the_loop() -> None:
    await asyncio.sleep(0)
    _spin(0.02)  # CPU on the loop thread, no await


async def sleeps_politely() -> None:
    for _ in range(5):
        await asyncio.sleep(0.01)  # wall time, no CPU: never named


def test_the_coroutine_that_held_the_loop_is_named_and_a_sleeper_is_not(tmp_path: Path
                                                                        ) -> None:
    out = tmp_path / "held"
    undo = loop_callbacks.install(out)
    try:
        start = time.monotonic()

        async def both() -> None:
            await asyncio.gather(holds_the_loop(), sleeps_politely())

        asyncio.run(both())
        end = time.monotonic()
    finally:
        undo()
    lines = loop_callbacks.worst(out, start, end)
    assert lines, "a 20 ms hold was not written"
    held_ms = float(lines[0].split()[0])
    assert 19.0 <= held_ms < 200.0
    assert "holds_the_loop@test_bench_loop_callbacks.py" in lines[0]
    assert not any("sleeps_politely" in line for line in lines)
    assert loop_callbacks.worst(out, end + 1, end + 2) == []
    assert loop_callbacks.worst(None, start, end) == []


def test_a_long_collection_is_written_with_the_cpu_it_held(tmp_path: Path) -> None:
    out = tmp_path / "held"
    heap = [[i] for i in range(400_000)]  # tracked objects a full collection must walk
    undo = loop_callbacks.install(out)
    try:
        start = time.monotonic()
        gc.collect()
        end = time.monotonic()
    finally:
        undo()
    del heap
    (line,) = [x for x in out.read_text().splitlines() if " gc2 " in x]
    _, _, cpu, wall, _ = line.split(" ", 4)
    assert 0.0 < float(cpu) <= float(wall) + 0.001
    worst = loop_callbacks.worst(out, start, end + 0.001)  # its clock is written to 1 ms
    assert worst[0].startswith(f"{1000 * float(cpu):.1f} ms gc2 (")


async def short_step() -> None:
    await asyncio.sleep(0)  # every such task's next step is ready in the same iteration
    _spin(0.004)  # under the 5 ms a callback needs to be written


def test_an_iteration_of_short_callbacks_is_written_with_its_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The 1 ms ticker waits for a whole loop iteration: four 4 ms steps ready together
    hold it 16 ms though no callback is long enough to be named on its own."""
    monkeypatch.setattr(loop_callbacks, "TIMERS", 20)  # count the heap's owners too
    out = tmp_path / "held"
    undo = loop_callbacks.install(out)
    try:
        start = time.monotonic()

        async def four() -> None:
            loop = asyncio.get_running_loop()
            for _ in range(150):  # a timer heap, most of it cancelled
                loop.call_later(60, print).cancel()
            keep = [loop.call_later(60, print) for _ in range(30)]
            await asyncio.gather(*(short_step() for _ in range(4)))
            for handle in keep:
                handle.cancel()

        asyncio.run(four())
        end = time.monotonic()
    finally:
        undo()
    assert " cb " not in out.read_text()
    (line,) = [x for x in loop_callbacks.worst(out, start, end) if " iter " in x]
    assert float(line.split()[0]) >= 15.0
    assert line.count("short_step@test_bench_loop_callbacks.py") == 4
    # the loop's timers as the iteration began: the 30 live ones; the 150 cancelled were
    # dropped when asyncio rebuilt its heap (over half cancelled) an iteration before
    assert "timers before it: 30 (0 cancelled)" in line
    (census,) = [x for x in out.read_text().splitlines() if " timers 0 0 " in x]
    assert census.endswith("180 timers, 30 live: 30 print")
    assert asyncio.BaseEventLoop._run_once.__name__ == "_run_once"  # type: ignore[attr-defined]


def test_a_long_callback_says_how_much_of_it_was_collecting(tmp_path: Path) -> None:
    """A pass that held the loop 10 ms may have spent most of it in a collection CPython
    started inside it: the line says so, so the pass is not blamed for the collector."""
    out = tmp_path / "held"
    heap = [[i] for i in range(200_000)]  # tracked objects the collection walks

    async def collects_inside() -> None:
        await asyncio.sleep(0)
        gc.collect()
        _spin(0.006)

    async def only_spins() -> None:
        await asyncio.sleep(0)
        _spin(0.006)

    undo = loop_callbacks.install(out)
    try:
        asyncio.run(collects_inside())
        asyncio.run(only_spins())
    finally:
        undo()
    del heap
    steps = [x for x in out.read_text().splitlines() if " cb " in x]
    collecting = [x for x in steps if "collects_inside" in x]
    spinning = [x for x in steps if "only_spins" in x]
    assert collecting and spinning
    share = float(collecting[0].split("[gc ")[1].split(" ms]")[0])
    assert 0.0 < share <= 1000 * float(collecting[0].split()[2])
    assert "[gc" not in spinning[0]

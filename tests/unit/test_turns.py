"""Turns: sections woken together start one per event-loop iteration, in arrival order, and
a cancelled waiter never keeps the others waiting."""

from __future__ import annotations

import asyncio

from omenative_controller.kube.turns import Turns


class Iterations:
    """Counts event-loop iterations: a callback that re-schedules itself once each."""

    def __init__(self) -> None:
        self.count = 0
        self._handle: asyncio.Handle | None = None

    def start(self) -> None:
        self._handle = asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        self.count += 1
        self._handle = asyncio.get_running_loop().call_soon(self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()


async def _sections(turns: Turns, n: int, seen: Iterations) -> list[tuple[int, int]]:
    """``n`` tasks woken in one iteration each take a turn; (task, iteration) per section."""
    ran: list[tuple[int, int]] = []

    async def section(i: int) -> None:
        await turns.take()
        ran.append((i, seen.count))

    await asyncio.gather(*(section(i) for i in range(n)))
    return ran


def test_sections_woken_together_start_one_per_iteration_in_order() -> None:
    async def main() -> list[tuple[int, int]]:
        seen = Iterations()
        seen.start()
        try:
            return await _sections(Turns(), 6, seen)
        finally:
            seen.stop()

    ran = asyncio.run(main())
    assert [i for i, _ in ran] == list(range(6))  # first come, first served
    iterations = [it for _, it in ran]
    assert len(set(iterations)) == 6  # never two in one iteration
    assert iterations == sorted(iterations)


def test_a_lone_section_goes_on_at_once() -> None:
    async def main() -> bool:
        turns = Turns()
        task = asyncio.create_task(turns.take())
        await asyncio.sleep(0)  # one step: it took the turn without waiting
        return task.done()

    assert asyncio.run(main())


async def _noted(turns: Turns, done: list[str], name: str) -> None:
    """Take a turn, then note ``name``."""
    await turns.take()
    done.append(name)


def test_a_cancelled_waiter_does_not_block_the_rest() -> None:
    async def main() -> list[str]:
        turns = Turns()
        done: list[str] = []
        tasks = [asyncio.create_task(_noted(turns, done, n))
                 for n in ("first", "cancelled", "a", "b")]
        await asyncio.sleep(0)  # all four ran once: "first" has the turn, three wait
        assert done == ["first"] and turns.waiting == 3
        tasks[1].cancel()
        await asyncio.wait_for(asyncio.gather(*tasks[2:]), 1.0)
        assert turns.waiting == 0
        return done

    assert asyncio.run(main()) == ["first", "a", "b"]


def test_cancelled_after_the_turn_came_passes_it_on() -> None:
    async def main() -> list[str]:
        turns = Turns()
        done: list[str] = []
        tasks = [asyncio.create_task(_noted(turns, done, n)) for n in ("first", "given", "after")]
        await asyncio.sleep(0)  # "first" has the turn; the next iteration hands it on
        while turns.waiting == 2:  # until the turn is handed to "given"
            await asyncio.sleep(0)
        tasks[1].cancel()  # its turn came, its step has not run yet
        await asyncio.wait_for(tasks[2], 1.0)
        return done

    assert asyncio.run(main()) == ["first", "after"]

"""Turns: sections woken together start one per event-loop iteration, in arrival order, and
a cancelled waiter never keeps the others waiting."""

from __future__ import annotations

import asyncio
from collections import Counter

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


class Clock:
    """A clock each section moves on by its cost: the budget is spent deterministically."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def _costly_sections(turns: Turns, clock: Clock, costs: list[float], seen: Iterations,
                           ) -> list[tuple[int, int]]:
    ran: list[tuple[int, int]] = []

    async def section(i: int) -> None:
        await turns.take()
        ran.append((i, seen.count))
        clock.now += costs[i]  # the section's CPU

    await asyncio.gather(*(section(i) for i in range(len(costs))))
    return ran


def _iterations_of(costs: list[float], budget: float) -> list[int]:
    async def main() -> list[tuple[int, int]]:
        seen = Iterations()
        seen.start()
        clock = Clock()
        try:
            return await _costly_sections(Turns(budget, clock), clock, costs, seen)
        finally:
            seen.stop()

    ran = asyncio.run(main())
    assert [i for i, _ in ran] == list(range(len(costs)))  # first come, first served
    first = ran[0][1]
    return [it - first for _, it in ran]


def test_quick_sections_share_one_iteration_within_the_budget() -> None:
    assert _iterations_of([0.0001] * 6, budget=0.002) == [0] * 6


def test_sections_past_the_budget_wait_for_later_iterations_within_theirs() -> None:
    # 1 ms each in a 2.5 ms budget: three go on at once (the third starts at 2 ms), the
    # fourth finds the budget spent and queues; no later iteration runs more than its
    # budget and one section's overrun
    costs = [0.001] * 10
    its = _iterations_of(costs, budget=0.0025)
    assert its[:3] == [0, 0, 0]
    assert its[3] > 0
    per_iteration = Counter(its)
    assert max(per_iteration.values()) * 0.001 <= 0.0025 + 0.001


def test_a_queue_of_quick_sections_drains_several_per_iteration() -> None:
    # one 10 ms section spends the first iteration's budget; the 40 quick ones behind it
    # are woken in growing batches, not one per iteration
    its = _iterations_of([0.01] + [0.0001] * 40, budget=0.002)
    assert its[1] > 0
    assert len(set(its[1:])) <= 7  # batches of 1, 2, 4, 8, then what 2 ms holds
    per_iteration = Counter(its[1:])
    assert max(per_iteration.values()) * 0.0001 <= 0.002 + 0.0001


def test_a_lone_section_runs_first_in_its_iteration_and_nothing_after_it() -> None:
    async def main() -> list[tuple[str, int]]:
        seen = Iterations()
        seen.start()
        turns = Turns(1.0)  # a budget no quick section spends
        ran: list[tuple[str, int]] = []

        async def section(name: str, alone: bool = False) -> None:
            await turns.take(alone=alone)
            ran.append((name, seen.count))

        try:
            await asyncio.gather(section("a"), section("gc", alone=True), section("b"),
                                 section("c"))
        finally:
            seen.stop()
        return ran

    ran = asyncio.run(main())
    assert [name for name, _ in ran] == ["a", "gc", "b", "c"]
    at = dict(ran)
    assert at["gc"] > at["a"]  # it waited although the budget had room
    assert at["b"] > at["gc"]  # nothing ran after it in its iteration


def test_an_idle_loop_stops_handing_turns_on() -> None:
    async def main() -> bool:
        turns = Turns(0.002)
        await turns.take()
        for _ in range(5):  # a few iterations without a section
            await asyncio.sleep(0)
        return turns._handing

    assert asyncio.run(main()) is False  # no callback left spinning the loop

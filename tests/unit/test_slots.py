"""The in-flight budget: never more than its size, urgent actions first, no slot leaked."""

from __future__ import annotations

import asyncio

from test_client_env import CountedTurns

from omenative_controller.slots import Slots


def test_urgent_waiters_get_the_next_free_slot_before_earlier_bring_up_writes() -> None:
    order: list[str] = []

    async def main() -> None:
        slots = Slots(1)
        gate = asyncio.Event()

        async def action(name: str, urgent: bool) -> None:
            async with slots.hold(urgent=urgent):
                assert slots.taken <= 1
                order.append(name)
                await gate.wait()

        first = asyncio.create_task(action("create-0", False))
        await asyncio.sleep(0)
        rest = [asyncio.create_task(action(f"create-{i}", False)) for i in (1, 2)]
        await asyncio.sleep(0)
        rest.append(asyncio.create_task(action("gate", True)))
        await asyncio.sleep(0)
        assert slots.waiting() == 3
        gate.set()
        await asyncio.gather(first, *rest)
        assert slots.taken == 0

    asyncio.run(main())
    assert order == ["create-0", "gate", "create-1", "create-2"]


def test_a_cancelled_waiter_leaks_no_slot() -> None:
    async def main() -> None:
        slots = Slots(1)
        release = asyncio.Event()

        async def holder() -> None:
            async with slots.hold():
                await release.wait()

        held = asyncio.create_task(holder())
        await asyncio.sleep(0)
        waiter = asyncio.create_task(holder())
        await asyncio.sleep(0)
        waiter.cancel()
        release.set()
        await held
        await asyncio.gather(waiter, return_exceptions=True)
        assert slots.taken == 0 and slots.waiting() == 0
        async with slots.hold():  # still usable
            assert slots.taken == 1

    asyncio.run(main())


def test_on_wait_reports_how_long_each_action_waited_for_its_slot() -> None:
    waits: list[tuple[bool, float]] = []

    async def main() -> None:
        slots = Slots(1, on_wait=lambda urgent, s: waits.append((urgent, s)))
        release = asyncio.Event()

        async def hold(urgent: bool) -> None:
            async with slots.hold(urgent=urgent):
                await release.wait()

        first = asyncio.create_task(hold(False))
        await asyncio.sleep(0)
        second = asyncio.create_task(hold(True))
        await asyncio.sleep(0.05)
        release.set()
        await asyncio.gather(first, second)

    asyncio.run(main())
    assert [u for u, _ in waits] == [False, True]
    assert waits[0][1] < 0.05 <= waits[1][1]


def test_an_action_handed_its_slot_goes_on_in_a_turn_and_cancelled_there_leaks_none() -> None:
    async def main() -> tuple[int, int]:
        turns = CountedTurns(0.0)
        slots = Slots(1, turns=turns)
        gate = asyncio.Event()

        async def action() -> None:
            async with slots.hold():
                await gate.wait()

        first = asyncio.create_task(action())  # a free slot: goes on in its own step
        await asyncio.sleep(0)
        assert turns.taken == 0
        second = asyncio.create_task(action())
        third = asyncio.create_task(action())
        await asyncio.sleep(0)
        gate.set()
        await asyncio.wait_for(asyncio.gather(first, second, third), 1.0)
        handed = turns.taken  # the second and third were handed theirs: a turn each
        # one cancelled while it waits for the turn after the hand-over frees its slot
        gate.clear()
        holder = asyncio.create_task(action())
        await asyncio.sleep(0)
        waiter = asyncio.create_task(action())
        await asyncio.sleep(0)
        gate.set()
        while turns.taken == handed:  # until the hand-over reaches its turn
            await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.gather(holder, waiter, return_exceptions=True)
        return handed, slots.taken

    assert asyncio.run(main()) == (2, 0)

"""Stopping child tasks never swallows a cancel aimed at the one stopping them.

The manager's teardown waits for its loops; a loop that survives its own cancel (because
it was stopping children when the cancel came) made a test's manager hang for good.
"""

from __future__ import annotations

import asyncio

import pytest

from omenative_controller.kube.presence import Presence, Unknown
from omenative_controller.kube.tasks import cancel_and_wait

pytestmark = pytest.mark.asyncio


def slow_to_stop(cleaning: asyncio.Event, seconds: float = 0.05) -> asyncio.Task[None]:
    """A child that takes ``seconds`` to clean up after its cancel (as an informer closing
    its watch does)."""

    async def child() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cleaning.set()
            await asyncio.sleep(seconds)
            raise

    return asyncio.create_task(child())


async def test_a_cancel_of_the_caller_while_it_waits_is_raised_again() -> None:
    cleaning = asyncio.Event()
    other_cleaning = asyncio.Event()
    children = [slow_to_stop(cleaning), slow_to_stop(other_cleaning)]
    await asyncio.sleep(0)
    stopper = asyncio.create_task(cancel_and_wait(children))
    await cleaning.wait()
    stopper.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopper
    assert stopper.cancelled()
    assert other_cleaning.is_set(), "every child was asked to stop before the cancel went on"


async def test_the_childrens_own_cancels_are_absorbed() -> None:
    cleaning = asyncio.Event()
    children = [slow_to_stop(cleaning), slow_to_stop(asyncio.Event())]
    await asyncio.sleep(0)
    await cancel_and_wait(children)
    assert all(c.cancelled() for c in children)


async def test_a_teardown_after_a_kill_still_waits_for_every_child() -> None:
    """In a ``finally`` after the caller was cancelled once (the manager killed), the
    children's cancels are theirs: the teardown goes on to the last one."""
    children = [slow_to_stop(asyncio.Event()) for _ in range(3)]
    reached_the_end = asyncio.Event()

    async def killed_then_torn_down() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await cancel_and_wait(children)
            reached_the_end.set()

    task = asyncio.create_task(killed_then_torn_down())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert reached_the_end.is_set()
    assert all(c.done() for c in children)


async def test_a_childs_error_is_ignored_unless_asked_for() -> None:
    async def fails() -> None:
        raise RuntimeError("boom")

    await cancel_and_wait([asyncio.ensure_future(fails())])  # started: it ends with its error
    task = asyncio.ensure_future(fails())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="boom"):
        await cancel_and_wait([task], errors=True)


class _GoneAfterOnePoll(Presence):
    """An optional API served at the first poll and gone at the next, with one child task
    that is slow to stop: the manager's CRD poll when a test deletes a CRD."""

    def __init__(self, cleaning: asyncio.Event) -> None:
        super().__init__("test", interval=0.001, on_change=None)
        self.cleaning = cleaning
        self.polls = 0

    async def _probe(self) -> str | Unknown | None:
        self.polls += 1
        return "v1" if self.polls == 1 else None

    async def _start(self, served: str) -> None:
        self.served = served
        self._tasks.append(slow_to_stop(self.cleaning, seconds=0.2))


async def test_a_presence_poll_cancelled_while_it_stops_its_informers_ends() -> None:
    cleaning = asyncio.Event()
    presence = _GoneAfterOnePoll(cleaning)
    poll = asyncio.create_task(presence.run())
    await cleaning.wait()  # the API went: the poll is stopping its informers
    poll.cancel()
    done, _ = await asyncio.wait({poll}, timeout=5)
    assert poll in done, "the poll survived its cancel: whoever waits for it hangs"
    assert poll.cancelled()

"""A cancellation that arrives as the awaited thing completes is not lost.

On Python 3.11 ``asyncio.wait_for`` returns the inner result when the inner future is done
at the moment its caller is cancelled, and swallows the cancellation (CPython gh-86296,
fixed in 3.12). A manager stopping while an informer finished its first LIST then waited
forever: the InferenceService controller, its cancel lost in ``wait_synced``, went on into
its workers and the manager's teardown awaited it without end (a CI run hung in a test's
teardown). Our waits use ``asyncio.timeout``, which keeps the cancellation; ``make lint``
refuses ``asyncio.wait_for`` in ``src/``.
"""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.informer import Informer
from omenative_controller.kube.resources import INFERENCE_REPLICAS
from omenative_controller.kube.workqueue import WorkQueue

pytestmark = pytest.mark.asyncio


async def test_a_stop_that_meets_the_informer_s_first_list_still_stops_the_waiter() -> None:
    informer: Informer[dict[str, object]] = Informer(
        cast(KubeClient, None), INFERENCE_REPLICAS, dict)
    waiter = asyncio.create_task(informer.wait_synced(30))
    await asyncio.sleep(0)  # the waiter is parked on the event
    informer.synced.set()  # the first LIST is in ...
    waiter.cancel()  # ... in the same loop iteration as the stop
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert waiter.cancelled()


async def test_a_stop_that_meets_the_queue_going_idle_still_stops_the_waiter() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("llm/a")
    assert await queue.get() == "llm/a"
    waiter = asyncio.create_task(queue.wait_idle(30))
    await asyncio.sleep(0)
    queue.done("llm/a")  # completes the idle waiter's future ...
    waiter.cancel()  # ... in the same loop iteration as the stop
    with pytest.raises(asyncio.CancelledError):
        await waiter

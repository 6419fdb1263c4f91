"""Which cache change wakes which replica, and which goes ahead of fresh first passes."""

from __future__ import annotations

import asyncio

from omenative_controller.kube.workqueue import WorkQueue
from omenative_controller.wakeups import Wakeups
from omenative_core.labels import LABEL_REPLICA
from omenative_core.model.observed import PodView


def _pod(owner: str, **conditions: str) -> PodView:
    return PodView(name=f"{owner}-0-leader-0", uid="u", labels={LABEL_REPLICA: owner},
                   conditions=conditions)


async def test_a_gang_waiting_only_for_its_gate_goes_before_fresh_replicas() -> None:
    queue: WorkQueue[str] = WorkQueue()
    wake = Wakeups(lambda: queue, lambda: None, lambda: None)
    for i in range(3):
        wake.one(f"ns/fresh-{i}")
    wake.pod("ns", None, _pod("starting", PodScheduled="True"))
    wake.pod("ns", None, _pod("almost", ContainersReady="True", Ready="False"))
    order = [await queue.get() for _ in range(5)]
    assert order[0] == "ns/almost"
    assert order[1:] == ["ns/fresh-0", "ns/fresh-1", "ns/fresh-2", "ns/starting"]


async def test_a_pod_that_just_turned_ready_goes_first_one_that_stays_ready_does_not() -> None:
    queue: WorkQueue[str] = WorkQueue()
    wake = Wakeups(lambda: queue, lambda: None, lambda: None)
    wake.one("ns/fresh")
    gated = {"ContainersReady": "True", "ome.io/serving": "True"}
    before = _pod("steady", **gated, Ready="True")
    wake.pod("ns", before, _pod("steady", **gated, Ready="True", PodScheduled="True"))
    wake.pod("ns", _pod("turned", **gated, Ready="False"), _pod("turned", **gated, Ready="True"))
    assert [await queue.get() for _ in range(3)] == ["ns/turned", "ns/fresh", "ns/steady"]


async def test_a_gangs_pods_moving_together_wake_it_once_its_gate_at_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    wake = Wakeups(lambda: queue, lambda: None, lambda: None, window=0.05)
    for i in range(4):
        pod = PodView(name=f"gang-0-worker-{i}", uid=f"u{i}", labels={LABEL_REPLICA: "gang"},
                      conditions={"PodScheduled": "True"})
        wake.pod("ns", None, pod)
    assert len(queue) == 0, "not urgent: queued within the window"
    assert await queue.get() == "ns/gang"
    queue.done("ns/gang")
    await asyncio.sleep(0.1)
    assert len(queue) == 0, "four events, one pass"
    wake.pod("ns", None, _pod("gang", ContainersReady="True", Ready="False"))
    assert len(queue) == 1, "ready but for its gate: at once"


async def test_a_spec_change_wakes_the_replica_at_once_a_status_write_soon() -> None:
    queue: WorkQueue[str] = WorkQueue()
    wake = Wakeups(lambda: queue, lambda: None, lambda: None, window=0.05)

    def ir(generation: int, ready: int) -> dict[str, object]:
        return {"metadata": {"name": "r", "generation": generation},
                "status": {"readyReplicas": ready}}

    wake.replica("ns", ir(1, 0), ir(1, 1))  # our own status write, written through
    assert len(queue) == 0 and queue.holds("ns/r")
    assert await queue.get() == "ns/r"
    queue.done("ns/r")
    wake.replica("ns", ir(1, 1), ir(2, 1))  # a user edited the spec
    assert len(queue) == 1

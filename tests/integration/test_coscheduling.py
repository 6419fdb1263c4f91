"""The real scheduler-plugins coscheduling (v0.32.7) places omenative's gangs all or nothing.

The scheduler (profile ``scheduler-plugins-scheduler``) and the PodGroup controller run out
of cluster (``omenative_devcluster.schedplugins``, fixtures in ``coscheduling_fixtures``);
the PodGroup CRD is the module's own. The test has GPU nodes of its own, 8 GPUs each, and
pins its pods to them. Each Instance is a leader and 3 workers of 4 GPUs (16 GPUs), the
pods naming the coscheduling scheduler. What is asserted is what a user sees: the pods'
``nodeName``, the PodGroups and their status, the InferenceReplica's Instance rows.

* on 3 nodes (24 GPUs) two Instances are wanted: one binds whole, the other stays wholly
  Pending, none of its pods bound at any moment, although 8 GPUs (two of its pods) are free;
* a 4th node joins: the waiting Instance binds whole and both become Ready.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS, PODS, pod_groups
from omenative_devcluster.schedplugins import SCHEDULER_NAME, SchedulerPlugins

pytest.register_assert_rewrite("manager_fixtures", "coscheduling_fixtures")
from coscheduling_fixtures import GangNodes, bound, node_affinity  # noqa: E402
from manager_fixtures import (  # noqa: E402
    TEST_LIFECYCLE,
    ManagerHandle,
    PodRecorder,
    eventually,
    get_replica,
    list_pods,
)

pytestmark = [pytest.mark.integration, pytest.mark.component("scheduler-plugins"),
              pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures", "coscheduling_fixtures"]

GPU = "nvidia.com/gpu"
GPUS_PER_POD = 4
PODS_PER_INSTANCE = 4  # a leader and 3 workers
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
INDEX_LABEL = "ome.io/instance-index"
QUIET_SECONDS = 8.0
"""How long the waiting gang is watched (every change recorded) for a pod that binds."""


def lifecycle() -> dict[str, Any]:
    """The test lifecycle: PodGroups for gangs, deadlines that do not end a wait for a node."""
    return {**TEST_LIFECYCLE, "instanceReadyTimeout": "5m", "unschedulableGracePeriod": "5m",
            "gangScheduling": "PodGroup"}


def gang_replica(name: str, *, replicas: int, nodes: list[str]) -> JSON:
    """A leader + 3 workers InferenceReplica for the coscheduling scheduler, on ``nodes``."""
    template = {"spec": {
        "schedulerName": SCHEDULER_NAME,
        "affinity": node_affinity(nodes),
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "ome-container", "image": "example.com/llm:1",
                        "resources": {"limits": {GPU: str(GPUS_PER_POD)}}}]}}
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
            "metadata": {"name": name},
            "spec": {"component": "engine", "replicas": replicas, "runners": [
                {"name": "leader", "size": 1, "template": template},
                {"name": "worker", "size": PODS_PER_INSTANCE - 1, "template": template}]}}


def by_instance(pods: dict[str, JSON]) -> dict[int, dict[str, JSON]]:
    """Live pods by Instance index."""
    out: dict[int, dict[str, JSON]] = {}
    for n, p in pods.items():
        if not p["metadata"].get("deletionTimestamp"):
            out.setdefault(int(p["metadata"]["labels"][INDEX_LABEL]), {})[n] = p
    return out


def rows(ir: JSON) -> dict[int, JSON]:
    """The InferenceReplica's Instance rows (DenseV1) by index."""
    return {int(r["index"]): r for r in (ir.get("status") or {}).get("instanceStatuses") or ()}


def show(what: str, obj: Any) -> None:
    """Print what a user would see at this step (``pytest -rP`` shows it; the docs quote it)."""
    print(f"--- {what}\n{json.dumps(obj, indent=1, sort_keys=True, default=str)}")


def pod_group_summary(groups: dict[str, JSON]) -> dict[str, Any]:
    """PodGroup name -> minMember and the controller's status."""
    return {n: {"minMember": g["spec"].get("minMember"),
                **{k: (g.get("status") or {}).get(k) for k in ("phase", "scheduled", "running")}}
            for n, g in sorted(groups.items())}


async def list_pod_groups(kube: KubeClient, namespace: str) -> dict[str, JSON]:
    """The namespace's PodGroups by name."""
    page = await kube.list(pod_groups(), namespace)
    return {g["metadata"]["name"]: g for g in page.get("items") or ()}


def scheduled_condition(pod: JSON) -> JSON:
    """The pod's PodScheduled condition (empty when none)."""
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled":
            return {k: c.get(k) for k in ("status", "reason", "message")}
    return {}


async def test_one_gang_binds_whole_the_other_waits_whole_then_binds_when_a_node_joins(
    sched_plugins: SchedulerPlugins, gang_nodes: GangNodes, kube: KubeClient, namespace: str,
    start_manager: Callable[..., Awaitable[ManagerHandle]],
) -> None:
    allowed = [*gang_nodes.names_of("a", 3), *gang_nodes.names_of("b", 1)]
    await gang_nodes.add("a", 3)
    await start_manager(lifecycle=lifecycle())
    recorder = await PodRecorder(kube, namespace).start()
    await kube.create(INFERENCE_REPLICAS, gang_replica("chat", replicas=2, nodes=allowed),
                      namespace)

    # 1. one Instance binds whole: its 4 pods on the 3 nodes, its PodGroup Running
    async def one_bound() -> tuple[int, int] | None:
        inst = by_instance(await list_pods(kube, namespace))
        if len(inst) != 2 or any(len(p) != PODS_PER_INSTANCE for p in inst.values()):
            return None
        whole = [i for i, p in inst.items() if len(bound(p)) == PODS_PER_INSTANCE]
        groups = await list_pod_groups(kube, namespace)
        if len(whole) != 1 or len(groups) != 2:
            return None
        group = next(iter(inst[whole[0]].values()))["metadata"]["labels"][POD_GROUP_LABEL]
        if (groups[group].get("status") or {}).get("phase") != "Running":
            return None
        return whole[0], 1 - whole[0]

    first, second = await eventually(one_bound, timeout=90,
                                     what="one Instance bound whole, its PodGroup Running")
    pods = await list_pods(kube, namespace)
    inst = by_instance(pods)
    groups = await list_pod_groups(kube, namespace)
    show("PodGroups with one Instance bound", pod_group_summary(groups))
    # every pod is in its Instance's PodGroup, which asks for the whole Instance
    for index, members in inst.items():
        names = {p["metadata"]["labels"][POD_GROUP_LABEL] for p in members.values()}
        assert len(names) == 1, (index, names)
        assert groups[names.pop()]["spec"]["minMember"] == PODS_PER_INSTANCE
    assert set(bound(inst[first]).values()) <= set(gang_nodes.names)
    waiting_pod = next(iter(inst[second].values()))
    show("a waiting pod's PodScheduled condition", scheduled_condition(waiting_pod))

    # 2. the other stays wholly Pending: 8 GPUs are free (two of its pods would fit); every
    # pod change over QUIET_SECONDS is recorded and none binds one of its pods
    await recorder.caught_up()
    quiet_from = len(recorder.history)
    await asyncio.sleep(QUIET_SECONDS)
    await recorder.caught_up()

    def partly_bound(state: dict[str, JSON]) -> str | None:
        now = by_instance(state)
        if bound(now.get(second, {})) or len(bound(now.get(first, {}))) != PODS_PER_INSTANCE:
            return f"bound: {bound(now.get(second, {}))} / {bound(now.get(first, {}))}"
        return None

    recorder.assert_never(partly_bound, "the waiting gang stays wholly unbound",
                          since=quiet_from)
    ir = await get_replica(kube, namespace, "chat")
    show("the Instance rows while one waits", rows(ir))
    # it waits for room, its readiness deadline parked, and has not failed
    operation = rows(ir)[second].get("operation") or {}
    assert rows(ir)[second].get("phase") != "Failed", rows(ir)[second]
    assert operation.get("waiting") == "Unschedulable", rows(ir)[second]
    assert operation.get("deadline") is None, rows(ir)[second]
    boundary = int((await kube.list(PODS, namespace))["metadata"]["resourceVersion"])

    # 3. a 4th node joins: the waiting Instance binds whole, both become Ready
    joined_at = time.monotonic()
    await gang_nodes.add("b", 1)

    async def all_bound() -> float | None:
        inst = by_instance(await list_pods(kube, namespace))
        done = len(inst) == 2 and all(len(bound(p)) == PODS_PER_INSTANCE for p in inst.values())
        return time.monotonic() - joined_at if done else None

    took = await eventually(all_bound, timeout=90, what="the waiting Instance bound whole")
    print(f"--- the waiting Instance bound whole {took:.1f} s after the 4th node was added")

    async def both_ready() -> dict[int, JSON] | None:
        got = rows(await get_replica(kube, namespace, "chat"))
        return got if len(got) == 2 and all(
            r.get("phase") == "Ready" for r in got.values()) else None

    show("the Instance rows after the node joined",
         await eventually(both_ready, timeout=90, what="both Instances Ready"))

    async def groups_running() -> dict[str, JSON] | None:
        got = await list_pod_groups(kube, namespace)
        return got if len(got) == 2 and all(
            (g.get("status") or {}).get("phase") == "Running" for g in got.values()) else None

    show("PodGroups after the node joined",
         pod_group_summary(await eventually(groups_running, timeout=60,
                                            what="both PodGroups Running")))
    # only 8 GPUs were free on the first 3 nodes: at least two of its pods are on the new one
    late = bound(by_instance(await list_pods(kube, namespace))[second])
    assert list(late.values()).count(gang_nodes.names_of("b", 1)[0]) >= 2, late

    # and at no moment before the node joined was any pod of the waiting Instance bound
    await recorder.stop()
    for _, obj, state in recorder.replay(from_start=True):
        if int(obj["metadata"]["resourceVersion"]) > boundary:
            break
        partial = bound(by_instance(state).get(second, {}))
        assert not partial, ("a pod of the waiting Instance was bound before the node joined",
                             partial)

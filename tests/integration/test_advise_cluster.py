"""``kubectl ome advise`` on the local control plane: fragmented GPUs, and a bad-GPU node.

Four 8-GPU nodes (the kubelet stand-in's), four single-pod 4-GPU Instances spread one per
node by the default scheduler, and a pending leader + worker Instance of 2 x 8 GPUs that no
node can hold. The advisor recommends two moves that free two whole nodes; ``--apply
--yes`` requests them as migrations, one after another; each completes replacement-first;
the pending gang then schedules and becomes Ready, and the small replica never serves fewer
than its 4 Instances.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import EVENTS, INFERENCE_REPLICAS, NODES, PODS

pytest.register_assert_rewrite("manager_fixtures")
import test_kubectl_ome  # noqa: E402
from manager_fixtures import TEST_LIFECYCLE, eventually, get_replica  # noqa: E402
from test_kubectl_ome import Kubectl  # noqa: E402

kubectl = test_kubectl_ome.kubectl  # the fixture: real kubectl with our plugin on PATH

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

GPU = "nvidia.com/gpu"
LIFECYCLE: dict[str, Any] = {
    **TEST_LIFECYCLE,
    # the pending gang waits for room: no deadline or unschedulable grace ends it meanwhile
    "instanceReadyTimeout": "15m",
    "unschedulableGracePeriod": "15m",
    "audit": {"maxInFlightMigrations": 1, "maxMigrationsPerWindow": 10, "window": "1h"},
}


def gpu_replica(name: str, *, replicas: int, gpus: int, gang: bool) -> JSON:
    """An InferenceReplica whose pods each request ``gpus`` GPUs."""
    def template() -> JSON:
        return {"spec": {"terminationGracePeriodSeconds": 1, "containers": [{
            "name": "ome-container", "image": "example.com/llm:1",
            "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}}}]}}
    runners = ([{"name": "leader", "size": 1, "template": template()},
                {"name": "worker", "size": 1, "template": template()}]
               if gang else [{"name": "default", "size": 1, "template": template()}])
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
            "metadata": {"name": name},
            "spec": {"component": "engine", "runners": runners, "replicas": replicas}}


async def ready_rows(kube: KubeClient, namespace: str, name: str) -> int:
    ir = await get_replica(kube, namespace, name)
    rows = (ir.get("status") or {}).get("instanceStatuses") or []
    return sum(1 for r in rows if r.get("phase") == "Ready" and not r.get("operation"))


async def serving_pods(kube: KubeClient, namespace: str, name: str) -> int:
    """Pods of ``name`` in rotation: Ready, their ``ome.io/serving`` gate True, not deleting."""
    pods = (await kube.list(PODS, namespace,
                            label_selector=f"ome.io/inferencereplica={name}")).get("items") or []
    count = 0
    for p in pods:
        conds = {c.get("type"): c.get("status")
                 for c in (p.get("status") or {}).get("conditions") or ()}
        if (conds.get("Ready") == "True" and conds.get("ome.io/serving") == "True"
                and not p["metadata"].get("deletionTimestamp")):
            count += 1
    return count


async def gpu_nodes(kube: KubeClient) -> list[str]:
    nodes = (await kube.list(NODES)).get("items") or []
    return sorted(n["metadata"]["name"] for n in nodes
                  if int((n.get("status") or {}).get("allocatable", {}).get(GPU, "0")) >= 8)


async def small_pods_by_node(kube: KubeClient, namespace: str) -> dict[str, int]:
    pods = (await kube.list(PODS, namespace,
                            label_selector="ome.io/inferencereplica=small")).get("items") or []
    out: dict[str, int] = {}
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        if node and not p["metadata"].get("deletionTimestamp"):
            out[node] = out.get(node, 0) + 1
    return out


async def no_gpu_pods(kube: KubeClient) -> bool:
    """No pod of any namespace holds a GPU (an earlier test's namespace may still be going)."""
    pods = (await kube.list(PODS)).get("items") or []
    return not any(
        (c.get("resources") or {}).get("requests", {}).get(GPU)
        for p in pods for c in (p.get("spec") or {}).get("containers") or ()
        if (p.get("spec") or {}).get("nodeName"))


async def start_small(kube: KubeClient, namespace: str, start_manager: Any,
                      **manager: Any) -> list[str]:
    """Start the manager and bring up small: 4 Instances of one 4-GPU pod; the GPU nodes."""
    nodes = await gpu_nodes(kube)
    assert len(nodes) == 4, f"the test needs the stand-in's four 8-GPU nodes, found {nodes}"
    await eventually(lambda: no_gpu_pods(kube), timeout=120,
                     what="no GPU pods left from earlier tests")
    await start_manager(lifecycle=LIFECYCLE, **manager)
    await kube.create(INFERENCE_REPLICAS, gpu_replica("small", replicas=4, gpus=4, gang=False),
                      namespace)

    async def four_ready() -> bool:
        return await ready_rows(kube, namespace, "small") == 4

    await eventually(four_ready, timeout=90, what="small: 4 Ready Instances")
    return nodes


async def spread_small(kube: KubeClient, namespace: str, start_manager: Any,
                       **manager: Any) -> list[str]:
    """``start_small``, then check the default scheduler spread the pods one per node."""
    nodes = await start_small(kube, namespace, start_manager, **manager)
    placed = await small_pods_by_node(kube, namespace)
    assert sorted(placed) == nodes and set(placed.values()) == {1}, (
        f"precondition: the scheduler should spread the 4 pods one per node, got {placed}")
    return nodes


async def test_advise_apply_frees_two_nodes_and_the_pending_gang_becomes_ready(
    kube: KubeClient, namespace: str, start_manager: Any, kubectl: Kubectl,
) -> None:
    await spread_small(kube, namespace, start_manager)
    await kube.create(INFERENCE_REPLICAS, gpu_replica("big", replicas=1, gpus=8, gang=True),
                      namespace)

    async def big_pending() -> bool:
        out = await kubectl.ok("advise", "-o", "json")
        return bool(json.loads(out)["recommendations"])

    await eventually(big_pending, timeout=60, what="the advisor to see big's pending gang")
    table = await kubectl.ok("advise")
    moves = [line for line in table.splitlines() if line.startswith("Fragmentation")]
    assert len(moves) == 2, table
    assert all(f"places {namespace}/big[0]" in m and "whole free nodes 0 -> 2" in m
               for m in moves), table

    lowest = 4
    done = asyncio.Event()

    async def watch_serving() -> None:
        nonlocal lowest
        while not done.is_set():
            lowest = min(lowest, await serving_pods(kube, namespace, "small"))
            await asyncio.sleep(0.5)

    watcher = asyncio.create_task(watch_serving())
    try:
        rc, out, err = await kubectl.ome("advise", "--apply", "--yes", "--wait", "240")
    finally:
        done.set()
        with contextlib.suppress(Exception):
            await watcher
    assert rc == 0, f"advise --apply: exit {rc}\n{out}\n{err}"
    assert out.count(": Completed") == 2, out
    assert "advise --apply: done" in out

    async def big_ready() -> bool:
        return await ready_rows(kube, namespace, "big") == 1

    await eventually(big_ready, timeout=90, what="big: the gang scheduled and Ready")
    assert lowest >= 4, f"small served {lowest} Instances at its lowest (desired 4)"
    placed = await small_pods_by_node(kube, namespace)
    assert len(placed) == 2 and set(placed.values()) == {2}, placed
    ir = await get_replica(kube, namespace, "small")
    migrations = (ir.get("status") or {}).get("migrations") or []
    assert [m.get("phase") for m in migrations] == ["Completed", "Completed"], migrations


async def test_a_node_with_bad_gpus_gets_its_instance_moved_off(
    kube: KubeClient, namespace: str, start_manager: Any, kubectl: Kubectl,
) -> None:
    await start_small(kube, namespace, start_manager)
    placed = await small_pods_by_node(kube, namespace)
    bad = sorted(placed)[0]
    await kube.patch(NODES, bad, {"status": {"conditions": [{
        "type": "GpuUnhealthy", "status": "True", "reason": "XidErrors",
        "message": "test: GPU 3 reports Xid 79"}]}}, subresource="status",
                     patch_type="strategic")
    try:
        out = await kubectl.ok("advise", "--bad-gpu-condition", "GpuUnhealthy")
        moves = [line for line in out.splitlines() if line.startswith("UnhealthyNode")]
        # every Instance on the bad node moves off it, each to a sound node
        assert len(moves) == placed[bad], out
        assert all(line.split()[2] == bad and line.split()[3] != bad for line in moves), out
        # without the flag no condition counts as bad GPUs: nothing to do, and it says so
        plain = await kubectl.ok("advise")
        assert "No moves recommended." in plain and "nothing to do" in plain, plain
    finally:
        await kube.patch(NODES, bad, {"status": {"conditions": [{
            "type": "GpuUnhealthy", "status": "False", "reason": "Recovered",
            "message": "test over"}]}}, subresource="status", patch_type="strategic")


async def test_the_manager_with_advisor_apply_places_the_gang_by_itself(
    kube: KubeClient, namespace: str, start_manager: Any,
) -> None:
    await spread_small(kube, namespace, start_manager, advisor="apply", advisor_interval=2.0)
    await kube.create(INFERENCE_REPLICAS, gpu_replica("big", replicas=1, gpus=8, gang=True),
                      namespace)
    lowest = 4
    done = asyncio.Event()

    async def watch_serving() -> None:
        nonlocal lowest
        while not done.is_set():
            lowest = min(lowest, await serving_pods(kube, namespace, "small"))
            await asyncio.sleep(0.5)

    watcher = asyncio.create_task(watch_serving())
    try:
        async def big_ready() -> bool:
            return await ready_rows(kube, namespace, "big") == 1

        await eventually(big_ready, timeout=240, what="big placed by the manager's advisor")
    finally:
        done.set()
        with contextlib.suppress(Exception):
            await watcher
    assert lowest >= 4, f"small served {lowest} Instances at its lowest (desired 4)"
    ir = await get_replica(kube, namespace, "small")
    migrations = (ir.get("status") or {}).get("migrations") or []
    assert [m.get("requestedBy") for m in migrations] == ["omenative-manager/advisor"] * 2, (
        migrations)
    events = (await kube.list(EVENTS, namespace)).get("items") or []
    reasons = {e.get("reason") for e in events
               if (e.get("involvedObject") or {}).get("name") == "small"}
    assert {"MoveRecommended", "MoveRequested"} <= reasons, reasons

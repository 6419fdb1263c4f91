"""Issue 15 against the real API server and scheduler: what depends on the nodes is a
condition and a Warning Event, never a rejection, and the pods are still created.

- a ``topologySpread: Required`` key no node carries: ``TopologyKeyMissing`` at once,
  naming the key; the pod is created and stays Pending; when a node gets the label the
  scheduler places the pod and the condition clears;
- a pod bigger than any node: ``InsufficientCapacity`` / ``GangExceedsCapacity`` naming
  the numbers; the gang's pods are created and stay Pending.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS, NODES

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    eventually,
    get_replica,
    list_pods,
    replica_body,
    replica_condition,
    warning_events,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]


def _pending_unscheduled(pods: dict[str, JSON]) -> bool:
    return bool(pods) and all(
        p["status"].get("phase") == "Pending" and not p["spec"].get("nodeName")
        for p in pods.values()
    )


async def _condition(kube: KubeClient, namespace: str, name: str, type_: str, status: str) -> JSON:
    """Wait until the InferenceReplica's ``type_`` condition has ``status``; return it."""

    async def check() -> JSON | None:
        cond = replica_condition(await get_replica(kube, namespace, name), type_)
        return cond if cond and cond["status"] == status else None

    return await eventually(check, what=f"{type_}={status}")


async def _warning(kube: KubeClient, namespace: str, name: str, reason: str) -> JSON:
    """Wait for exactly one Warning Event of ``reason`` on the InferenceReplica."""

    async def check() -> list[JSON]:
        events = await warning_events(kube, namespace, name)
        return [e for e in events if e.get("reason") == reason]

    (event,) = await eventually(check, what=f"a {reason} Warning Event")
    return event


async def _ready_nodes(kube: KubeClient) -> list[JSON]:
    page = await kube.list(NODES)
    return [
        n
        for n in page.get("items") or ()
        if not (n.get("spec") or {}).get("unschedulable")
        and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (n.get("status") or {}).get("conditions") or ()
        )
    ]


async def test_missing_spread_key_is_a_condition_pods_wait_then_schedule_when_labelled(
    kube: KubeClient, namespace: str, start_manager: Any, no_pod_group_crd: None
) -> None:
    key = f"example.com/rack-{namespace}"  # unique: no node carries it
    await start_manager()
    body = replica_body("spread", replicas=1, single=True)
    body["spec"].update(topologySpread="Required", topologySpreadKey=key)
    await kube.create(INFERENCE_REPLICAS, body, namespace)

    cond = await _condition(kube, namespace, "spread", "TopologyKeyMissing", "True")
    assert f"spec.topologySpreadKey '{key}'" in cond["message"]
    assert "no Ready, schedulable node carries the label" in cond["message"]

    event = await _warning(kube, namespace, "spread", "TopologyKeyMissing")
    assert key in event["message"]

    pods = await eventually(lambda: list_pods(kube, namespace), what="the pod to be created")
    assert list(pods) == ["spread-engine-0-default-0"]
    assert _pending_unscheduled(pods)  # created, not placed: DoNotSchedule on a missing key

    node = (await _ready_nodes(kube))[0]["metadata"]["name"]
    await kube.patch(NODES, node, {"metadata": {"labels": {key: "r1"}}})
    try:

        async def placed() -> str | None:
            pod = (await list_pods(kube, namespace)).get("spread-engine-0-default-0")
            return pod["spec"].get("nodeName") if pod else None

        assert await eventually(placed, what="the pod to be scheduled") == node

        done = await _condition(kube, namespace, "spread", "TopologyKeyMissing", "False")
        assert done["reason"] == "TopologyKeyPresent"
    finally:
        with contextlib.suppress(Exception):
            await kube.patch(NODES, node, {"metadata": {"labels": {key: None}}})


async def test_pod_bigger_than_any_node_is_a_condition_naming_the_numbers(
    kube: KubeClient, namespace: str, start_manager: Any, no_pod_group_crd: None
) -> None:
    nodes = await _ready_nodes(kube)
    gpus = [int(n["status"]["allocatable"].get("nvidia.com/gpu", "0")) for n in nodes]
    per_pod = max(gpus) + 8
    await start_manager()
    body = replica_body("huge", replicas=1, worker_size=1)
    for runner in body["spec"]["runners"]:
        runner["template"]["spec"]["containers"][0]["resources"] = {
            "limits": {"nvidia.com/gpu": per_pod}
        }
    await kube.create(INFERENCE_REPLICAS, body, namespace)

    cond = await _condition(kube, namespace, "huge", "InsufficientCapacity", "True")
    assert cond["reason"] == "GangExceedsCapacity"
    assert cond["message"].startswith(
        f"a leader+1 worker gang needs {2 * per_pod} nvidia.com/gpu, {per_pod} per pod; "
        f"the largest Ready node has {max(gpus)}; all Ready nodes together {sum(gpus)}"
    )

    event = await _warning(kube, namespace, "huge", "GangExceedsCapacity")
    assert f"needs {2 * per_pod} nvidia.com/gpu" in event["message"]

    async def both_pods() -> dict[str, JSON] | None:
        pods = await list_pods(kube, namespace)
        return pods if len(pods) == 2 else None

    pods = await eventually(both_pods, what="the gang's pods to be created")
    assert sorted(pods) == ["huge-engine-0-leader-0", "huge-engine-0-worker-0"]
    assert _pending_unscheduled(pods)

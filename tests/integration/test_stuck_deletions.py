"""Stuck deletions on the real API server, as OME's "recover stuck deletions" runbook reads.

A deleted InferenceReplica without a teardown deadline whose pod another controller pins
with a finalizer: the manager records ``TeardownBlocked`` (Warning, with OME's count and
manual escape) while it waits, reports the pinned pod once it is ``overdueSlack`` past its
deletion (``PodDeleteBlockedByFinalizer``, naming the finalizer) and never force-deletes
it; once the finalizer's owner lets go, the pod and then the InferenceReplica go.
"""

from __future__ import annotations

from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import INFERENCE_REPLICAS, PODS

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    TEST_LIFECYCLE,
    eventually,
    get_replica,
    list_pods,
    replica_body,
    warning_events,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

FINALIZER = "example.com/cleanup"


async def test_a_pinned_pod_blocks_the_teardown_is_reported_and_never_force_deleted(
    kube: KubeClient, namespace: str, start_manager: Any,
) -> None:
    lifecycle = {**TEST_LIFECYCLE, "teardown": None,
                 "forceDelete": {"overdueSlack": "2s", "nodeUnreachableThreshold": "1s"}}
    await start_manager(lifecycle=lifecycle)
    await kube.create(INFERENCE_REPLICAS, replica_body("sd", replicas=1, single=True),
                      namespace)

    async def one_pod() -> JSON | None:
        pods = await list_pods(kube, namespace)
        return next(iter(pods.values()), None)

    pod = await eventually(one_pod, timeout=60, what="the Instance's pod")
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    await kube.patch(PODS, name, {"metadata": {"finalizers": [FINALIZER]}}, namespace)
    await kube.delete(INFERENCE_REPLICAS, "sd", namespace)

    async def reported() -> dict[str, str] | None:
        seen = {e["reason"]: e["message"] for e in await warning_events(kube, namespace, "sd")}
        wanted = ("TeardownBlocked", "PodDeleteBlockedByFinalizer")
        return seen if all(r in seen for r in wanted) else None

    seen = await eventually(reported, timeout=60, what="TeardownBlocked and the finalizer report")
    assert seen["TeardownBlocked"].startswith("teardown blocked: 1 owned pod(s)"), seen
    assert "manual escape: kubectl patch inferencereplica sd" in seen["TeardownBlocked"]
    assert name in seen["PodDeleteBlockedByFinalizer"]
    assert f"[{FINALIZER}]" in seen["PodDeleteBlockedByFinalizer"]
    assert "PodForceDeleted" not in seen
    # the pod is still the same object, Terminating, and the replica holds its finalizer
    still = (await list_pods(kube, namespace))[name]
    assert still["metadata"]["uid"] == uid and still["metadata"].get("deletionTimestamp")
    ir = await get_replica(kube, namespace, "sd")
    assert "ome.io/ir-teardown" in ir["metadata"]["finalizers"]

    await kube.patch(PODS, name, {"metadata": {"finalizers": None}}, namespace)

    async def gone() -> bool:
        try:
            await get_replica(kube, namespace, "sd")
        except ApiError as exc:
            if exc.not_found:
                return await list_pods(kube, namespace) == {}
            raise
        return False

    await eventually(gone, timeout=60, what="the pod, then the InferenceReplica, gone")

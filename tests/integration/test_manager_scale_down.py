"""A scale-down in the middle of a SurgeThenDrain rollout, against the real API server.

The user scales a replica down while some Instances already run the new image: the
updated ones must be the ones kept (they are not updated a second time: no pod of the
remaining Instance is created after the scale), and nothing on the old image is left.
"""

from __future__ import annotations

from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    eventually,
    get_replica,
    list_pods,
    patch_replica,
    replica_body,
)
from test_manager_lifecycle import create_ready  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]


def _settled_updated(status: JSON) -> set[int]:
    """Indexes of Instances on the update revision, Ready, with no operation open."""
    rev = status.get("updateRevision")
    return {
        int(r["index"])
        for r in status.get("instanceStatuses") or []
        if r.get("runningRevision") == rev and r.get("phase") == "Ready" and not r.get("operation")
    }


async def test_scale_down_mid_rollout_keeps_the_updated_instances(
    kube: KubeClient, namespace: str, start_manager: Any
) -> None:
    await start_manager()
    await create_ready(kube, namespace, replica_body("sd", replicas=3), 3)
    new = replica_body("x", image="example.com/llm:2")["spec"]["runners"]
    await patch_replica(kube, namespace, "sd", {"spec": {"runners": new}})

    async def partly_updated() -> JSON | None:
        status = (await get_replica(kube, namespace, "sd")).get("status") or {}
        updated = _settled_updated(status)
        return status if updated and int(status.get("updatedReplicas", 0)) < 3 else None

    await eventually(partly_updated, timeout=120, interval=0.1,
                     what="one Instance updated, others still on the old image")
    await patch_replica(kube, namespace, "sd", {"spec": {"replicas": 1}}, subresource="scale")
    existing = {p["metadata"]["uid"] for p in (await list_pods(kube, namespace)).values()}

    async def scaled() -> dict[str, JSON] | None:
        status = (await get_replica(kube, namespace, "sd")).get("status") or {}
        pods = await list_pods(kube, namespace)
        done = (
            status.get("replicas") == 1
            and status.get("readyReplicas") == 1
            and len(status.get("instanceStatuses") or []) == 1
            and len(pods) == 2
            and not any(p["metadata"].get("deletionTimestamp") for p in pods.values())
        )
        return pods if done else None

    pods = await eventually(scaled, timeout=120, what="one Instance left, Ready")
    images = {c["image"] for p in pods.values() for c in p["spec"]["containers"]}
    assert images == {"example.com/llm:2"}
    # the kept Instance was already updated: its pods predate the scale-down
    assert {p["metadata"]["uid"] for p in pods.values()} <= existing

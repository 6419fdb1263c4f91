"""SurgeThenDrain update, readiness deadline, scale up and a migration off a node."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    TEST_LIFECYCLE,
    PodRecorder,
    eventually,
    get_replica,
    list_pods,
    patch_replica,
    replica_body,
)
from test_manager_lifecycle import create_ready, drained_before_deleted  # noqa: E402

if TYPE_CHECKING:
    from conftest import FaultControl

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]


def _runners(image: str) -> list[JSON]:
    body = replica_body("x", image=image)
    runners: list[JSON] = body["spec"]["runners"]
    return runners


async def test_surge_then_drain_update_serves_throughout_and_drains_old_pods_last(
    kube: KubeClient, namespace: str, start_manager: Any
) -> None:
    await start_manager()
    await create_ready(kube, namespace, replica_body("up", replicas=2), 2)
    before = await list_pods(kube, namespace)
    old = set(before)
    old_uids = {p["metadata"]["uid"] for p in before.values()}
    recorder = await PodRecorder(kube, namespace).start()
    await patch_replica(kube, namespace, "up", {"spec": {"runners": _runners("example.com/llm:2")}})
    lowest_serving = 2

    async def rolled() -> JSON | None:
        nonlocal lowest_serving
        ir = await get_replica(kube, namespace, "up")
        status = ir.get("status") or {}
        lowest_serving = min(lowest_serving, int(status.get("servingReplicas", 0)))
        pods = await list_pods(kube, namespace)
        done = (
            status.get("updatedReplicas") == 2
            and status.get("readyReplicas") == 2
            and status.get("replicas") == 2
            # names can come back (a freed index is reused), so compare UIDs
            and not old_uids & {p["metadata"]["uid"] for p in pods.values()}
        )
        return ir if done else None

    ir = await eventually(rolled, timeout=120, interval=0.2, what="the update to finish")
    await recorder.caught_up()  # the checks below read its history to now
    await recorder.stop()
    assert lowest_serving >= 2, f"servingReplicas dropped to {lowest_serving} during the update"
    drained_before_deleted(recorder, old)
    status = ir["status"]
    assert status["currentRevision"] == status["updateRevision"]
    pods = await list_pods(kube, namespace)
    images = {c["image"] for p in pods.values() for c in p["spec"]["containers"]}
    assert images == {"example.com/llm:2"}
    # the replacements are new gangs (incarnation 1 at the lowest free index), not restarts
    incarnations = {p["metadata"]["labels"]["ome.io/instance-incarnation"]
                    for p in pods.values()}
    assert incarnations == {"1"}
    assert len({p["metadata"]["labels"]["ome.io/instance-index"] for p in pods.values()}) == 2


async def test_an_attempt_that_misses_its_deadline_fails_without_holding(
    kube: KubeClient, namespace: str, start_manager: Any, faults: FaultControl
) -> None:
    await faults.set(crash_images=["example.com/crash:1"])
    await start_manager(lifecycle={**TEST_LIFECYCLE, "instanceReadyTimeout": "8s"})
    body = replica_body("dl", replicas=1, image="example.com/crash:1")
    await kube.create(INFERENCE_REPLICAS, body, namespace)

    async def failed() -> JSON | None:
        ir = await get_replica(kube, namespace, "dl")
        rows = (ir.get("status") or {}).get("instanceStatuses") or []
        if rows and rows[0].get("phase") == "Failed":
            return ir
        return None

    ir = await eventually(failed, timeout=60, what="Instance 0 Failed on its deadline")
    row = ir["status"]["instanceStatuses"][0]
    assert row["lastFailure"]["reason"] == "DeadlineExceeded"
    blocks = ir["status"].get("retryBlocks") or []
    assert blocks and all(b["state"] != "Held" for b in blocks)  # a timeout never holds
    ready = next(c for c in ir["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "InstanceFailed")


async def test_scale_up_adds_instances_at_the_lowest_free_indexes(
    kube: KubeClient, namespace: str, start_manager: Any
) -> None:
    await start_manager()
    await create_ready(kube, namespace, replica_body("su", replicas=1, single=True), 1)
    await patch_replica(kube, namespace, "su", {"spec": {"replicas": 3}}, subresource="scale")

    async def scaled() -> bool:
        ir = await get_replica(kube, namespace, "su")
        return (ir.get("status") or {}).get("readyReplicas") == 3

    await eventually(scaled, timeout=60, what="3 Instances Ready")
    pods = await list_pods(kube, namespace)
    assert sorted(pods) == [f"su-engine-{i}-default-0" for i in range(3)]
    # the first Instance was not replaced: scaling is not a new revision
    assert pods["su-engine-0-default-0"]["metadata"]["labels"]["ome.io/instance-incarnation"] == "1"
    revisions = {p["metadata"]["labels"]["ome.io/revision-hash"] for p in pods.values()}
    assert len(revisions) == 1


async def test_migration_off_a_node_starts_the_replacement_first(
    kube: KubeClient, namespace: str, start_manager: Any
) -> None:
    await start_manager()
    await create_ready(kube, namespace, replica_body("mg", replicas=1), 1)
    pods = await list_pods(kube, namespace)
    source_node = pods["mg-engine-0-leader-0"]["spec"]["nodeName"]
    request = {
        "schemaVersion": "v1",
        "instance": 0,
        "from_node": source_node,
        "hint_target_nodes": [],
        "reason": "integration test",
        "requested_by": "pytest",
    }
    key = "ome.io/migration-request-v1-0b6c1f9e-1111-4c1e-9c61-3f1d2b9a7e01"
    await patch_replica(kube, namespace, "mg",
                        {"metadata": {"annotations": {key: json.dumps(request)}}})
    lowest_serving = 1

    async def moved() -> JSON | None:
        nonlocal lowest_serving
        ir = await get_replica(kube, namespace, "mg")
        status = ir.get("status") or {}
        lowest_serving = min(lowest_serving, int(status.get("servingReplicas", 0)))
        migrations = status.get("migrations") or []
        if migrations and migrations[0].get("phase") == "Completed" and \
                status.get("readyReplicas") == 1 and status.get("replicas") == 1:
            return ir
        if migrations and migrations[0].get("phase") == "Failed":
            raise AssertionError(f"migration failed: {migrations[0]}")
        return None

    ir = await eventually(moved, timeout=90, interval=0.2, what="the migration to complete")
    assert lowest_serving >= 1, "the Instance stopped serving during its migration"
    (migration,) = ir["status"]["migrations"]
    assert migration["sourceInstance"] == 0 and migration["succeeded"] is True
    assert key not in (ir["metadata"].get("annotations") or {})  # consumed
    pods = await list_pods(kube, namespace)
    assert "mg-engine-0-leader-0" not in pods
    indexes = {p["metadata"]["labels"]["ome.io/instance-index"] for p in pods.values()}
    assert indexes == {str(migration["surgeInstance"])}

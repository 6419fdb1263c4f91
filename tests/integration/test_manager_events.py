"""Events a user reads with ``kubectl describe`` for refused and finished work (issue 15).

The real manager against the real API server: a request the policy refuses is a Warning
Event naming the setting (never ``MigrationAccepted``), the serving pods are untouched and
the annotation is consumed; a migration that finishes is a ``MigrationCompleted`` Event;
an image the kubelet still cannot pull at the readiness deadline is the revision's fault.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import EVENTS, INFERENCE_REPLICAS

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    TEST_LIFECYCLE,
    eventually,
    get_replica,
    list_pods,
    patch_replica,
    replica_body,
)
from test_manager_lifecycle import create_ready  # noqa: E402

if TYPE_CHECKING:
    from conftest import FaultControl

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

REQUEST_UUID = "5d2e8a41-7b3c-4f9e-a1d0-6c4b2e8f9a13"
KEY = f"ome.io/migration-request-v1-{REQUEST_UUID}"


async def _events(kube: KubeClient, namespace: str, name: str) -> list[JSON]:
    page = await kube.list(EVENTS, namespace)
    return [e for e in page.get("items") or ()
            if e["involvedObject"].get("kind") == "InferenceReplica"
            and e["involvedObject"].get("name") == name]


async def _request(kube: KubeClient, namespace: str, name: str) -> None:
    value = json.dumps({"schemaVersion": "v1", "instance": 0, "requested_by": "pytest"})
    await patch_replica(kube, namespace, name, {"metadata": {"annotations": {KEY: value}}})


async def test_a_migration_refused_by_policy_is_a_warning_and_no_pod_moves(
    kube: KubeClient, namespace: str, start_manager: Any
) -> None:
    await start_manager()
    body = replica_body("nm", replicas=1)
    body["spec"]["lifecycle"] = {"migrationPolicy": {"mode": "Never"}}
    await create_ready(kube, namespace, body, 1)
    before = {p["metadata"]["uid"] for p in (await list_pods(kube, namespace)).values()}
    await _request(kube, namespace, "nm")

    async def warned() -> JSON | None:
        found = [e for e in await _events(kube, namespace, "nm")
                 if e.get("reason") == "MigrationRequestRejected"]
        return found[0] if found else None

    event = await eventually(warned, timeout=30, what="a MigrationRequestRejected Event on nm")
    assert event["type"] == "Warning"
    assert REQUEST_UUID in event["message"]
    assert "lifecycle.migrationPolicy.mode is Never" in event["message"]
    reasons = {e.get("reason") for e in await _events(kube, namespace, "nm")}
    assert "MigrationAccepted" not in reasons

    # the Event goes out once the pass's writes are made; if its annotation removal failed
    # (a conflict), the next pass removes it: wait for the request consumed and recorded
    async def consumed() -> JSON | None:
        ir = await get_replica(kube, namespace, "nm")
        return ir if KEY not in (ir["metadata"].get("annotations") or {}) and \
            (ir.get("status") or {}).get("migrations") else None

    ir = await eventually(consumed, timeout=30, what="the request consumed and recorded")
    (record,) = ir["status"]["migrations"]
    assert record["phase"] == "Failed" and record["requestUUID"] == REQUEST_UUID
    after = {p["metadata"]["uid"] for p in (await list_pods(kube, namespace)).values()}
    assert after == before  # the serving Instance was not touched
    assert ir["status"]["readyReplicas"] == 1


async def test_a_finished_migration_is_a_migration_completed_event(
    kube: KubeClient, namespace: str, start_manager: Any
) -> None:
    await start_manager()
    await create_ready(kube, namespace, replica_body("mc", replicas=1), 1)
    await _request(kube, namespace, "mc")

    async def completed() -> JSON | None:
        found = [e for e in await _events(kube, namespace, "mc")
                 if e.get("reason") in ("MigrationCompleted", "MigrationFailed")]
        return found[0] if found else None

    event = await eventually(completed, timeout=90, interval=0.3,
                             what="a MigrationCompleted Event on mc")
    assert (event["type"], event["reason"]) == ("Normal", "MigrationCompleted"), event
    ir = await get_replica(kube, namespace, "mc")
    (record,) = ir["status"]["migrations"]
    assert record["phase"] == "Completed"
    assert REQUEST_UUID in event["message"]
    assert f"Instance {record['surgeInstance']} replaces it" in event["message"]


async def test_an_image_still_unpullable_at_the_deadline_holds_the_revision(
    kube: KubeClient, namespace: str, start_manager: Any, faults: FaultControl
) -> None:
    bad = f"example.com/{namespace}/llm:unpullable"
    await faults.set(bad_images=[bad])
    # no stuck-pod grace: only the readiness deadline ends an attempt
    await start_manager(lifecycle={
        **TEST_LIFECYCLE,
        "stuckPodGracePeriod": None,
        "instanceReadyTimeout": "5s",
        "updateRetry": {"maxAttempts": 1, "initialDelay": "1s", "maxDelay": "2s",
                        "multiplier": 2.0},
    })
    await kube.create(INFERENCE_REPLICAS,
                      replica_body("ip", replicas=1, single=True, image=bad), namespace)

    async def held() -> JSON | None:
        status = (await get_replica(kube, namespace, "ip")).get("status") or {}
        blocks = status.get("retryBlocks") or []
        return status if blocks and blocks[0].get("state") == "Held" else None

    try:
        status = await eventually(held, timeout=60, what="the unpullable revision Held")
    finally:
        await faults.clear()
    (block,) = status["retryBlocks"]
    assert block["reason"] in ("ErrImagePull", "ImagePullBackOff"), block

    async def warned() -> JSON | None:
        found = [e for e in await _events(kube, namespace, "ip") if e.get("reason") == "RetryHeld"]
        return found[0] if found else None

    event = await eventually(warned, timeout=30, what="a RetryHeld Event on ip")
    assert event["type"] == "Warning" and block["targetRevision"] in event["message"]

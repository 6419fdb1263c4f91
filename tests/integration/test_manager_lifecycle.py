"""Scale down, whole-Instance restart, teardown, and a bad image held then released."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import ENDPOINT_SLICES, EVENTS, INFERENCE_REPLICAS, PODS

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    TEST_LIFECYCLE,
    PodRecorder,
    eventually,
    gate,
    get_replica,
    list_pods,
    patch_replica,
    replica_body,
)

if TYPE_CHECKING:
    from conftest import FaultControl

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]


async def create_ready(kube: KubeClient, namespace: str, body: JSON, ready: int) -> JSON:
    """Create ``body`` and wait until ``ready`` Instances are Ready and every gate is True."""
    name = body["metadata"]["name"]
    await kube.create(INFERENCE_REPLICAS, body, namespace)

    async def check() -> JSON | None:
        ir = await get_replica(kube, namespace, name)
        status = ir.get("status") or {}
        pods = await list_pods(kube, namespace)
        if status.get("readyReplicas") == ready and status.get("replicas") == ready and \
                pods and all(gate(p) == "True" for p in pods.values()):
            return ir
        return None

    return await eventually(check, timeout=90, what=f"{name}: {ready} Instance(s) Ready")


def drained_before_deleted(recorder: PodRecorder, names: set[str]) -> None:
    """Each pod in ``names`` that served had its gate False before it began terminating."""
    serving: dict[str, bool] = {}
    seen_delete: set[str] = set()
    for kind, obj, _ in recorder.replay():
        name = obj["metadata"]["name"]
        if name not in names:
            continue
        if obj["metadata"].get("deletionTimestamp") and name not in seen_delete:
            seen_delete.add(name)
            assert not serving.get(name), f"{name} was deleted while in rotation"
        if kind != "DELETED":
            serving[name] = gate(obj) == "True"
    assert seen_delete == names, f"not all of {sorted(names)} were deleted: {seen_delete}"


async def test_scale_down_drains_then_deletes_the_highest_instance(
    kube: KubeClient, namespace: str, start_manager: Any
) -> None:
    await start_manager()
    await create_ready(kube, namespace, replica_body("sc", replicas=2), 2)
    before = await list_pods(kube, namespace)
    recorder = await PodRecorder(kube, namespace).start()
    await patch_replica(kube, namespace, "sc", {"spec": {"replicas": 1}}, subresource="scale")

    async def scaled() -> bool:
        ir = await get_replica(kube, namespace, "sc")
        status = ir.get("status") or {}
        pods = await list_pods(kube, namespace)
        slices = await kube.list(ENDPOINT_SLICES, namespace)
        routed = {ep["targetRef"]["name"]: ep.get("conditions")
                  for s in slices.get("items") or () for ep in s.get("endpoints") or ()}
        # a failed check says what the cluster looked like (pods, gates, endpoints, rows)
        assert sorted(pods) == ["sc-engine-0-leader-0", "sc-engine-0-worker-0"], (
            {n: gate(p) for n, p in pods.items()}, routed,
            [(r["index"], r["phase"]) for r in status.get("instanceStatuses") or ()])
        return status.get("replicas") == 1 and status.get("readyReplicas") == 1

    await eventually(scaled, timeout=60, what="Instance 1 gone, 1 Instance Ready")
    await recorder.caught_up()  # the checks below read its history to now
    await recorder.stop()
    drained_before_deleted(recorder, {"sc-engine-1-leader-0", "sc-engine-1-worker-0"})
    after = await list_pods(kube, namespace)
    for name in ("sc-engine-0-leader-0", "sc-engine-0-worker-0"):
        assert after[name]["metadata"]["uid"] == before[name]["metadata"]["uid"]
        assert gate(after[name]) == "True"
    for _, obj, _ in recorder.replay():
        if obj["metadata"]["name"].startswith("sc-engine-0-"):
            assert gate(obj) == "True", "Instance 0 left rotation during the scale-down"


async def test_worker_pod_deleted_recreates_the_whole_instance(
    kube: KubeClient, namespace: str, start_manager: Any
) -> None:
    await start_manager()
    await create_ready(kube, namespace, replica_body("rs", replicas=2), 2)
    before = await list_pods(kube, namespace)
    await kube.delete(PODS, "rs-engine-0-worker-0", namespace)

    async def recreated() -> bool:
        ir = await get_replica(kube, namespace, "rs")
        pods = await list_pods(kube, namespace)
        inst0 = [p for n, p in pods.items() if n.startswith("rs-engine-0-")]
        rows = {r["index"]: r for r in (ir.get("status") or {}).get("instanceStatuses") or ()}
        return (
            len(inst0) == 2
            and all(p["metadata"]["labels"]["ome.io/instance-incarnation"] == "2"
                    and gate(p) == "True" and not p["metadata"].get("deletionTimestamp")
                    for p in inst0)
            and rows.get(0, {}).get("incarnation") == 2
            and rows.get(0, {}).get("phase") == "Ready"
            and (ir.get("status") or {}).get("readyReplicas") == 2
        )

    await eventually(recreated, timeout=90, what="Instance 0 recreated at incarnation 2")
    after = await list_pods(kube, namespace)
    leader = "rs-engine-0-leader-0"
    assert after[leader]["metadata"]["uid"] != before[leader]["metadata"]["uid"]
    for name in ("rs-engine-1-leader-0", "rs-engine-1-worker-0"):
        assert after[name]["metadata"]["uid"] == before[name]["metadata"]["uid"]
        assert after[name]["metadata"]["labels"]["ome.io/instance-incarnation"] == "1"


async def test_delete_replica_drains_pods_then_removes_the_finalizer(
    kube: KubeClient, namespace: str, start_manager: Any
) -> None:
    await start_manager()
    await create_ready(kube, namespace, replica_body("td", replicas=2), 2)
    pods = await list_pods(kube, namespace)
    recorder = await PodRecorder(kube, namespace).start()
    await kube.delete(INFERENCE_REPLICAS, "td", namespace)

    async def gone() -> bool:
        try:
            await get_replica(kube, namespace, "td")
        except ApiError as exc:
            if exc.not_found:
                return await list_pods(kube, namespace) == {}
            raise
        return False

    await eventually(gone, timeout=90, what="pods gone, then the InferenceReplica")
    await recorder.caught_up()  # the checks below read its history to now
    await recorder.stop()
    drained_before_deleted(recorder, set(pods))


async def test_bad_image_fails_is_held_and_released_by_annotation(
    kube: KubeClient, namespace: str, start_manager: Any, faults: FaultControl
) -> None:
    bad = f"example.com/{namespace}/llm:broken"
    await faults.set(bad_images=[bad])
    lifecycle = {**TEST_LIFECYCLE, "stuckPodGracePeriod": "2s",
                 "updateRetry": {"maxAttempts": 2, "initialDelay": "1s", "maxDelay": "2s",
                                 "multiplier": 2.0}}
    await start_manager(lifecycle=lifecycle)
    await kube.create(INFERENCE_REPLICAS, replica_body("bi", replicas=1, single=True, image=bad),
                      namespace)
    phases: set[str] = set()

    async def held() -> JSON | None:
        ir = await get_replica(kube, namespace, "bi")
        status = ir.get("status") or {}
        phases.update(r.get("phase", "") for r in status.get("instanceStatuses") or ())
        blocks = [b for b in status.get("retryBlocks") or () if b.get("state") == "Held"]
        return ir if blocks else None

    ir = await eventually(held, timeout=90, what="the revision Held")
    assert "Failed" in phases, f"phases seen: {phases}"
    revision = ir["status"]["updateRevision"]
    assert any(b["targetRevision"] == revision for b in ir["status"]["retryBlocks"])
    ready = next(c for c in ir["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False"

    async def held_events() -> list[JSON]:
        page = await kube.list(EVENTS, namespace, field_selector="involvedObject.name=bi")
        return [e for e in page.get("items") or () if e["reason"] == "RetryHeld"]

    await eventually(held_events, timeout=15, what="a RetryHeld event")

    await faults.clear()
    await patch_replica(kube, namespace, "bi", {
        "metadata": {"annotations": {"ome.io/release-held-revision": revision}}})

    async def released() -> bool:
        ir = await get_replica(kube, namespace, "bi")
        status = ir.get("status") or {}
        annotations = ir["metadata"].get("annotations") or {}
        blocks = [b for b in status.get("retryBlocks") or () if b.get("state") == "Held"]
        return ("ome.io/release-held-revision" not in annotations and not blocks
                and status.get("readyReplicas") == 1)

    await eventually(released, timeout=90, what="released: annotation consumed, Instance Ready")

"""The InferenceService controller beside the IR manager: `chat` on OMENative, end to end.

The IR manager runs in-process (``start_manager``) and the ServiceController runs as an
asyncio task on the test's namespace. Behaviour is checked as a user sees it: the
InferenceReplicas, pods and the ISVC status, never the API calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import CONFIG_MAPS, EVENTS, INFERENCE_REPLICAS
from omenative_controller.service_controller import (
    CLUSTER_SERVING_RUNTIMES,
    INFERENCE_SERVICES,
    SERVING_RUNTIMES,
    VALIDATION_CONDITION,
    ServiceController,
)

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    conditions,
    eventually,
    list_pods,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

EXPECTED_PODS = [
    "chat-engine-0-leader-0",
    "chat-engine-0-worker-0",
    "chat-engine-1-leader-0",
    "chat-engine-1-worker-0",
    "chat-router-0-default-0",
]



def runtime_body(namespace: str, image: str) -> JSON:
    """A ServingRuntime: an engine of leader + 1 worker, and a single-pod router."""
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "ServingRuntime",
        "metadata": {"name": "srt-chat", "namespace": namespace},
        "spec": {
            "engineConfig": {
                "terminationGracePeriodSeconds": 1,
                "runner": {"name": "ome-container", "image": image,
                           "ports": [{"name": "http", "containerPort": 30000}]},
                "leader": {"runner": {"name": "ome-container", "command": ["serve", "--leader"]}},
                "worker": {"size": 1, "runner": {"name": "ome-container",
                                                 "command": ["serve", "--worker"]}},
                "someFutureOmeField": {"kept": True},
            },
            "routerConfig": {
                "terminationGracePeriodSeconds": 1,
                "runner": {"name": "ome-container", "image": "example.com/router:1"},
            },
        },
    }


def chat_body(namespace: str) -> JSON:
    """The seed example ``chat`` (docs/serve-a-model.md) on the namespaced runtime."""
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": namespace},
        "spec": {
            "deploymentMode": "OMENative",
            "model": {"name": "llama-3-3-70b-instruct"},
            "runtime": {"name": "srt-chat", "kind": "ServingRuntime"},
            "engine": {"minReplicas": 2, "maxReplicas": 2, "leader": {}, "worker": {}},
            "router": {"minReplicas": 1, "maxReplicas": 1},
        },
    }


async def get_isvc(kube: KubeClient, namespace: str, name: str = "chat") -> JSON:
    """The InferenceService as the API server has it."""
    return await kube.get(INFERENCE_SERVICES, name, namespace)


async def replica_names(kube: KubeClient, namespace: str) -> list[str]:
    """InferenceReplicas of the namespace."""
    page = await kube.list(INFERENCE_REPLICAS, namespace)
    return sorted(i["metadata"]["name"] for i in page.get("items") or ())


def _ready_pods(pods: dict[str, JSON]) -> list[str]:
    return sorted(n for n, p in pods.items()
                  if not p["metadata"].get("deletionTimestamp")
                  and conditions(p).get("Ready") == "True")


async def test_chat_is_projected_becomes_ready_and_rolls_on_a_runtime_change(
    kube: KubeClient, namespace: str, start_manager: Any, service_controller: ServiceController
) -> None:
    await start_manager()
    await kube.create(SERVING_RUNTIMES, runtime_body(namespace, "example.com/llm:1"), namespace)
    await kube.create(INFERENCE_SERVICES, chat_body(namespace), namespace)

    async def ready() -> JSON | None:
        isvc = await get_isvc(kube, namespace)
        conds = conditions(isvc)
        pods = await list_pods(kube, namespace)
        ok = (conds.get("EngineReady") == "True" and conds.get("RouterReady") == "True"
              and _ready_pods(pods) == EXPECTED_PODS)
        return isvc if ok else None

    isvc = await eventually(ready, timeout=120, interval=0.3, what="chat Ready")
    assert await replica_names(kube, namespace) == ["chat-engine", "chat-router"]
    assert sorted(await list_pods(kube, namespace)) == EXPECTED_PODS
    engine_status = isvc["status"]["components"]["engine"]["lifecycle"]
    assert engine_status["readyReplicas"] == 2
    reasons = {c["type"]: c["reason"] for c in isvc["status"]["conditions"]}
    assert reasons["EngineReady"] == "Ready" and reasons["RouterReady"] == "Ready"
    assert conditions(isvc).get("Ready") == "True"  # what `kubectl get isvc` shows
    assert VALIDATION_CONDITION not in reasons
    engine = await kube.get(INFERENCE_REPLICAS, "chat-engine", namespace)
    owner = engine["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "InferenceService", "chat", isvc["metadata"]["uid"])
    managers = {f["manager"] for f in engine["metadata"]["managedFields"]
                if f.get("operation") == "Apply"}
    assert managers == {"omenative-isvc"}
    # a field OME's schema does not know is pruned, as on an OME cluster (config/ome-crd/)
    runtime = await kube.get(SERVING_RUNTIMES, "srt-chat", namespace)
    assert "someFutureOmeField" not in runtime["spec"]["engineConfig"]
    assert isvc["spec"]["model"]["name"] == "llama-3-3-70b-instruct"

    # a runtime image change: the engine rolls SurgeThenDrain, never below 2 serving
    await kube.patch(SERVING_RUNTIMES, "srt-chat",
                     {"spec": {"engineConfig": {"runner": {"image": "example.com/llm:2"}}}},
                     namespace)
    lowest_serving = 2
    saw_new_revision = False

    async def rolled() -> JSON | None:
        nonlocal lowest_serving, saw_new_revision
        ir = await kube.get(INFERENCE_REPLICAS, "chat-engine", namespace)
        status = ir.get("status") or {}
        lowest_serving = min(lowest_serving, int(status.get("servingReplicas", 0)))
        if status.get("updateRevision") and status.get("updateRevision") != status.get(
                "currentRevision"):
            saw_new_revision = True
        images = {c["image"] for r in ir["spec"]["runners"]
                  for c in r["template"]["spec"]["containers"]}
        pods = await list_pods(kube, namespace)
        engine_images = {c["image"] for n, p in pods.items() if n.startswith("chat-engine-")
                         for c in p["spec"]["containers"]}
        done = (images == {"example.com/llm:2"} and status.get("updatedReplicas") == 2
                and status.get("readyReplicas") == 2 and status.get("replicas") == 2
                and status.get("currentRevision") == status.get("updateRevision")
                and engine_images == {"example.com/llm:2"})
        return ir if done else None

    await eventually(rolled, timeout=150, interval=0.2, what="the engine rollout to finish")
    assert lowest_serving >= 2, f"servingReplicas dropped to {lowest_serving} during the update"

    async def isvc_ready_again() -> bool:
        conds = conditions(await get_isvc(kube, namespace))
        return bool(conds.get("EngineReady") == "True" and conds.get("RouterReady") == "True")

    await eventually(isvc_ready_again, timeout=60, what="EngineReady/RouterReady after the roll")
    assert await replica_names(kube, namespace) == ["chat-engine", "chat-router"]


async def test_a_migration_requested_on_the_isvc_is_taken_once_audited_and_removed(
    kube: KubeClient, namespace: str, start_manager: Any, service_controller: ServiceController
) -> None:
    await start_manager()
    await kube.create(SERVING_RUNTIMES, runtime_body(namespace, "example.com/llm:1"), namespace)
    body = chat_body(namespace)
    body["spec"]["engine"].update(minReplicas=1, maxReplicas=1)
    await kube.create(INFERENCE_SERVICES, body, namespace)

    async def engine_ready() -> dict[str, JSON] | None:
        pods = await list_pods(kube, namespace)
        ready = [n for n in _ready_pods(pods) if n.startswith("chat-engine-0-")]
        return pods if len(ready) == 2 else None

    pods = await eventually(engine_ready, timeout=90, interval=0.3, what="chat-engine-0 Ready")
    source_node = pods["chat-engine-0-leader-0"]["spec"]["nodeName"]
    request_id = "7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"
    key = f"ome.io/migration-request-v1-{request_id}"
    request = {"schemaVersion": "v1", "component": "engine", "instance": 0,
               "from_node": source_node, "hint_target_nodes": [], "reason": "maintenance",
               "requested_at": "2026-01-01T00:00:00Z", "requested_by": "pytest"}
    await kube.patch(INFERENCE_SERVICES, "chat",
                     {"metadata": {"annotations": {key: json.dumps(request)}}}, namespace)

    async def finished() -> JSON | None:
        ir = await kube.get(INFERENCE_REPLICAS, "chat-engine", namespace)
        mine = [m for m in (ir.get("status") or {}).get("migrations") or ()
                if m["requestUUID"] == request_id]
        if mine and mine[0]["phase"] == "Failed":
            raise AssertionError(f"migration failed: {mine[0]}")
        return ir if mine and mine[0]["phase"] == "Completed" else None

    ir = await eventually(finished, timeout=120, interval=0.3, what="the migration to complete")
    (record,) = [m for m in ir["status"]["migrations"] if m["requestUUID"] == request_id]
    assert record["sourceInstance"] == 0 and record["succeeded"] is True

    async def audited() -> JSON | None:
        try:
            cm = await kube.get(CONFIG_MAPS, "chat-ome-migration-audit", namespace)
        except ApiError:
            return None
        rows = json.loads(cm["data"]["history.json"])["entries"]
        return cm if any(r.get("outcome") == "succeeded" for r in rows) else None

    cm = await eventually(audited, timeout=30, what="the audit row's outcome")
    (row,) = json.loads(cm["data"]["history.json"])["entries"]
    # the audit goes with the InferenceService it records (garbage-collected on delete)
    isvc_uid = (await get_isvc(kube, namespace))["metadata"]["uid"]
    assert [(r["kind"], r["name"], r["uid"]) for r in cm["metadata"]["ownerReferences"]] == [
        ("InferenceService", "chat", isvc_uid)]
    assert (row["requestUUID"], row["component"], row["fromNode"], row["phase"]) == (
        request_id, "engine", source_node, "Completed")

    async def removed() -> bool:
        isvc = await get_isvc(kube, namespace)
        return key not in (isvc["metadata"].get("annotations") or {})

    await eventually(removed, timeout=30, what="the request annotation removed from the ISVC")
    # later passes neither forward it again nor start a second migration
    service_controller.queue.add(f"{namespace}/chat")
    await asyncio.sleep(2)
    ir = await kube.get(INFERENCE_REPLICAS, "chat-engine", namespace)
    assert key not in (ir["metadata"].get("annotations") or {})
    assert [m["requestUUID"] for m in ir["status"]["migrations"]].count(request_id) == 1
    assert key not in ((await get_isvc(kube, namespace))["metadata"].get("annotations") or {})
    pods = await list_pods(kube, namespace)
    assert "chat-engine-0-leader-0" not in pods  # the Instance moved to a surge index

    # the InferenceReplica's Events are surfaced on the InferenceService, naming the component
    async def surfaced() -> list[JSON] | None:
        page = await kube.list(EVENTS, namespace)
        mine = [e for e in page.get("items") or ()
                if e["involvedObject"].get("kind") == "InferenceService"
                and e["involvedObject"].get("name") == "chat"
                and e.get("reason") == "MigrationAccepted"]
        return mine or None

    (event,) = await eventually(surfaced, timeout=20, what="MigrationAccepted on the ISVC")
    assert event["message"].startswith("chat-engine: ") and request_id in event["message"]
    assert event["involvedObject"]["uid"] == (await get_isvc(kube, namespace))["metadata"]["uid"]


async def test_an_invalid_isvc_gets_a_condition_and_a_warning_and_nothing_is_created(
    kube: KubeClient, namespace: str, service_controller: ServiceController
) -> None:
    await kube.create(SERVING_RUNTIMES, runtime_body(namespace, "example.com/llm:1"), namespace)
    body = chat_body(namespace)
    body["metadata"]["name"] = "broken"
    # admitted by the CRD's rules, refused by the controller (OMENative keeps one Instance)
    body["spec"]["engine"] = {"minReplicas": 0, "leader": {}, "worker": {}}
    await kube.create(INFERENCE_SERVICES, body, namespace)

    async def reported() -> JSON | None:
        isvc = await get_isvc(kube, namespace, "broken")
        cond = next((c for c in (isvc.get("status") or {}).get("conditions") or ()
                     if c.get("type") == VALIDATION_CONDITION), None)
        return cond if cond and cond.get("status") == "False" else None

    cond = await eventually(reported, timeout=60, what="SpecValid=False on broken")
    assert cond["reason"]

    async def warned() -> list[JSON]:
        page = await kube.list(EVENTS, namespace,
                               field_selector="involvedObject.name=broken,type=Warning")
        return list(page.get("items") or ())

    events = await eventually(warned, timeout=30, what="a Warning Event on broken")
    assert events[0]["involvedObject"]["kind"] == "InferenceService"
    await asyncio.sleep(1.0)
    assert await replica_names(kube, namespace) == []
    with contextlib.suppress(ApiError):
        await kube.delete(INFERENCE_SERVICES, "broken", namespace)


async def test_a_missing_cluster_runtime_blocks_and_a_removed_one_deletes_nothing(
    kube: KubeClient, namespace: str, start_manager: Any, service_controller: ServiceController
) -> None:
    await start_manager()
    csr_name = f"srt-{namespace}"
    body = chat_body(namespace)
    body["spec"]["runtime"] = {"name": csr_name}  # kind defaults to ClusterServingRuntime
    body["spec"]["engine"] = {"minReplicas": 1, "maxReplicas": 1, "leader": {}, "worker": {}}
    await kube.create(INFERENCE_SERVICES, body, namespace)

    async def blocked() -> dict[str, str] | None:
        isvc = await get_isvc(kube, namespace)
        reasons = {c["type"]: c["reason"] for c in (isvc.get("status") or {}).get(
            "conditions") or ()}
        ok = reasons.get("EngineReady") == "RuntimeNotFound" and \
            reasons.get("RouterReady") == "RuntimeNotFound"
        return reasons if ok else None

    await eventually(blocked, timeout=60, what="RuntimeNotFound on both components")
    assert await replica_names(kube, namespace) == []

    runtime = runtime_body(namespace, "example.com/llm:1")
    runtime["kind"] = "ClusterServingRuntime"
    runtime["metadata"] = {"name": csr_name}
    await kube.create(CLUSTER_SERVING_RUNTIMES, runtime)
    try:
        async def ready() -> bool:
            conds = conditions(await get_isvc(kube, namespace))
            pods = await list_pods(kube, namespace)
            return bool(conds.get("EngineReady") == "True"
                        and conds.get("RouterReady") == "True"
                        and _ready_pods(pods) == ["chat-engine-0-leader-0",
                                                  "chat-engine-0-worker-0",
                                                  "chat-router-0-default-0"])

        await eventually(ready, timeout=120, interval=0.3, what="chat Ready on the CSR")
        engine = await kube.get(INFERENCE_REPLICAS, "chat-engine", namespace)
        spec_before = engine["spec"]
    finally:
        with contextlib.suppress(ApiError):
            await kube.delete(CLUSTER_SERVING_RUNTIMES, csr_name)

    await eventually(blocked, timeout=60, what="RuntimeNotFound after the CSR is deleted")
    await asyncio.sleep(1.0)
    # blocked: the serving workload is left exactly as it was
    assert await replica_names(kube, namespace) == ["chat-engine", "chat-router"]
    engine = await kube.get(INFERENCE_REPLICAS, "chat-engine", namespace)
    assert engine["spec"] == spec_before
    assert not engine["metadata"].get("deletionTimestamp")
    pods = await list_pods(kube, namespace)
    assert _ready_pods(pods) == ["chat-engine-0-leader-0", "chat-engine-0-worker-0",
                                 "chat-router-0-default-0"]

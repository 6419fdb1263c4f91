"""The cluster config (``lifecycle`` and the InferenceService blocks) is re-read while the
manager runs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import (
    CONFIG_MAPS,
    CONTROLLER_REVISIONS,
    INFERENCE_REPLICAS,
)
from omenative_controller.service_controller import INFERENCE_SERVICES, SERVING_RUNTIMES

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    TEST_LIFECYCLE,
    eventually,
    get_replica,
    patch_replica,
    put_lifecycle,
    replica_body,
    warning_events,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]


async def _revisions(kube: KubeClient, namespace: str) -> list[str]:
    page = await kube.list(CONTROLLER_REVISIONS, namespace)
    return sorted(r["metadata"]["name"] for r in page.get("items") or ())


async def _on_image(kube: KubeClient, namespace: str, image: str) -> JSON:
    async def check() -> JSON | None:
        ir = await get_replica(kube, namespace, "cfg")
        status = ir.get("status") or {}
        ok = (status.get("readyReplicas") == 1 and status.get("updatedReplicas") == 1
              and status.get("currentRevision") == status.get("updateRevision")
              and ir["spec"]["runners"][0]["template"]["spec"]["containers"][0]["image"]
              == image
              and (status.get("observedGeneration") or 0) >= ir["metadata"]["generation"])
        return ir if ok else None

    return await eventually(check, timeout=90, what=f"the Instance on {image}")


async def test_config_changes_apply_without_restart_and_bad_config_keeps_the_last_good(
    kube: KubeClient, namespace: str, start_manager: Any
) -> None:
    handle = await start_manager(lifecycle={**TEST_LIFECYCLE, "revisionHistoryLimit": 10})
    await kube.create(INFERENCE_REPLICAS, replica_body("cfg", replicas=1, single=True),
                      namespace)
    await _on_image(kube, namespace, "example.com/llm:1")
    for n in (2, 3, 4):
        image = f"example.com/llm:{n}"
        body = replica_body("cfg", replicas=1, single=True, image=image)
        await patch_replica(kube, namespace, "cfg", {"spec": {"runners": body["spec"]["runners"]}})
        await _on_image(kube, namespace, image)
    kept = await _revisions(kube, namespace)
    assert len(kept) == 4, f"a history limit of 10 keeps every revision: {kept}"

    # A config the parser refuses is logged and counted; the last good one stays in force.
    def reloads(result: str) -> float:
        return float(handle.metrics.sample("omenative_config_reloads_total", {"result": result}))

    await put_lifecycle(kube, namespace, {**TEST_LIFECYCLE, "revisionHistoryLimit": "many"})
    await eventually(lambda: _true(reloads("invalid") >= 1), timeout=30,
                     what="the invalid config noticed")
    await patch_replica(kube, namespace, "cfg", {"metadata": {"labels": {"poke": "1"}}})
    assert await _revisions(kube, namespace) == kept
    assert (await get_replica(kube, namespace, "cfg"))["status"]["readyReplicas"] == 1

    # A valid change is picked up at the next reload and every replica is looked at again.
    await put_lifecycle(kube, namespace, {**TEST_LIFECYCLE, "revisionHistoryLimit": 1})

    async def pruned() -> list[str] | None:
        names = await _revisions(kube, namespace)
        return names if len(names) == 2 else None

    names = await eventually(pruned, timeout=60, what="history pruned to the live + 1 revision")
    ir = await get_replica(kube, namespace, "cfg")
    assert any(ir["status"]["currentRevision"] == n for n in names), "the live one was pruned"
    assert reloads("changed") >= 1


async def _true(value: bool) -> bool:
    return value


def _router_isvc(namespace: str) -> tuple[JSON, JSON]:
    """A runtime and an InferenceService whose router sets no replica count."""
    runtime: JSON = {
        "apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime",
        "metadata": {"name": "srt-cfg", "namespace": namespace},
        "spec": {"routerConfig": {"terminationGracePeriodSeconds": 1,
                                  "runner": {"name": "ome-container",
                                             "image": "example.com/router:1"}}},
    }
    isvc: JSON = {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "cfg", "namespace": namespace},
        "spec": {"deploymentMode": "OMENative", "model": {"name": "m"},
                 "runtime": {"name": "srt-cfg", "kind": "ServingRuntime"}, "router": {}},
    }
    return runtime, isvc


async def test_inferenceservice_blocks_of_the_config_reach_rendering_and_reload(
    kube: KubeClient, namespace: str, start_manager: Any, service_crds_applied: list[str]
) -> None:
    await put_lifecycle(kube, namespace, TEST_LIFECYCLE)
    await kube.patch(CONFIG_MAPS, "inferenceservice-config",
                     {"data": {"deploy": json.dumps({"replicas": 2})}}, namespace)
    handle = await start_manager(write_config=False)
    runtime, isvc = _router_isvc(namespace)
    await kube.create(SERVING_RUNTIMES, runtime, namespace)
    await kube.create(INFERENCE_SERVICES, isvc, namespace)

    async def replicas(n: int) -> JSON | None:
        try:
            ir = await get_replica(kube, namespace, "cfg-router")
        except ApiError:
            return None
        return ir if ir["spec"].get("replicas") == n else None

    await eventually(lambda: replicas(2), timeout=60, what="deploy.replicas=2 on the router")

    def reloads(result: str) -> float:
        return float(handle.metrics.sample("omenative_config_reloads_total", {"result": result}))

    # a malformed block is refused as a whole: the previous settings stay
    await kube.patch(CONFIG_MAPS, "inferenceservice-config",
                     {"data": {"deploy": json.dumps({"replicas": 3}),
                               "coordination": "{not json"}}, namespace)
    await eventually(lambda: _true(reloads("invalid") >= 1), timeout=30,
                     what="the invalid coordination block noticed")
    await kube.patch(INFERENCE_SERVICES, "cfg", {"metadata": {"labels": {"poke": "1"}}},
                     namespace)
    await eventually(lambda: _true(reloads("invalid") >= 2), timeout=30,
                     what="a second reload still refused")
    assert (await get_replica(kube, namespace, "cfg-router"))["spec"]["replicas"] == 2

    # fixed: the next reload applies it and every InferenceService is rendered again
    await kube.patch(CONFIG_MAPS, "inferenceservice-config",
                     {"data": {"coordination": json.dumps({"defaultRatioTolerancePercent": 10})}},
                     namespace)
    await eventually(lambda: replicas(3), timeout=60, what="deploy.replicas=3 after the fix")
    assert handle.manager.service_config.rollout.default_ratio_tolerance == 10


async def test_an_invalid_lifecycle_reload_is_a_warning_event_naming_every_bad_key(
    kube: KubeClient, namespace: str, start_manager: Any
) -> None:
    handle = await start_manager()
    bad = {**TEST_LIFECYCLE, "revisionHistoryLimit": "many", "requeue": {"gate": "soon"},
           "colour": "blue"}
    await put_lifecycle(kube, namespace, bad)

    async def warned() -> list[JSON]:
        return await warning_events(kube, namespace, "inferenceservice-config")

    (event,) = await eventually(warned, timeout=30, what="a Warning Event on the ConfigMap")
    assert event["reason"] == "InvalidLifecycleConfig"
    assert event["involvedObject"]["kind"] == "ConfigMap"
    message = event["message"]
    assert "previous settings stay in force" in message
    assert "lifecycle.revisionHistoryLimit: expected an integer >= 1, got 'many'" in message
    assert "lifecycle.requeue.gate: invalid duration 'soon'" in message
    assert "lifecycle: unknown key(s) colour" in message
    assert handle.manager.config.requeue.gate.total_seconds() == 1, "the last good one stays"

    # reloads of the same bad config do not repeat the Event
    reloads = handle.metrics.sample("omenative_config_reloads_total", {"result": "invalid"})
    await eventually(lambda: _true(handle.metrics.sample(
        "omenative_config_reloads_total", {"result": "invalid"}) >= reloads + 2), timeout=30,
        what="two more reloads of the bad config")
    events = await warned()
    assert len(events) == 1 and events[0].get("count", 1) == 1

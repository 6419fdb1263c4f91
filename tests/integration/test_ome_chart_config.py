"""The manager starts on OME's own ``inferenceservice-config``, as OME's chart renders it with
its defaults (tests/ome_chart_config.py, transcribed from ome-projects/ome@4ff3b6e3), and
applies it with OME's meaning: the replica defaults reach rendering, the lifecycle keys
OME's chart leaves out are off, ``omenativeStatus`` picks the status encoding, and OME's
keys omenative does not use are reported once, never fatal (issue 28, item 1)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.ome_chart_config import OME_CHART_COMMIT, ome_chart_data

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import (
    CONFIG_MAPS,
    INFERENCE_REPLICAS,
    SERVICES,
    Resource,
)
from omenative_controller.service_controller import INFERENCE_SERVICES, SERVING_RUNTIMES

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    EVENTS,
    eventually,
    get_replica,
    replica_body,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

HPAS = Resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler")


async def _put_ome_chart_config(kube: KubeClient, namespace: str) -> None:
    body: JSON = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "inferenceservice-config", "namespace": namespace,
                     "annotations": {"source": f"ome-projects/ome@{OME_CHART_COMMIT}"}},
        "data": ome_chart_data(namespace),
    }
    try:
        await kube.create(CONFIG_MAPS, body, namespace)
    except ApiError as exc:
        if not exc.already_exists:
            raise
        await kube.replace(CONFIG_MAPS, "inferenceservice-config", body, namespace)


def _condition(ir: JSON, kind: str) -> JSON | None:
    return next((c for c in (ir.get("status") or {}).get("conditions") or ()
                 if c.get("type") == kind), None)


async def test_the_manager_runs_on_omes_chart_configmap_with_omes_meaning(
    kube: KubeClient, namespace: str, start_manager: Any, service_crds_applied: list[str]
) -> None:
    await _put_ome_chart_config(kube, namespace)
    handle = await start_manager(write_config=False)  # today: exit 2 on OME's deploy entry

    # OME's keys omenative does not use: one Normal Event on the ConfigMap naming them
    async def reported() -> list[JSON] | None:
        page = await kube.list(EVENTS, namespace,
                               field_selector="involvedObject.name=inferenceservice-config")
        found = [e for e in page.get("items") or () if e["reason"] == "OMEConfigKeysIgnored"]
        return found or None

    (event,) = await eventually(reported, timeout=30, what="the ignored OME keys reported")
    assert event["type"] == "Normal"
    for key in ("ingress", "canaryAnalysis", "multicluster", "modelInit", "servingSidecar"):
        assert key in event["message"]

    # the lifecycle OME's chart writes has no instanceReadyTimeout: no deadline, as in OME
    await kube.create(INFERENCE_REPLICAS, replica_body("plain", replicas=1, single=True),
                      namespace)

    async def settled() -> JSON | None:
        ir = await get_replica(kube, namespace, "plain")
        status = ir.get("status") or {}
        return ir if status.get("readyReplicas") == 1 else None

    ir = await eventually(settled, timeout=90, what="the standalone replica Ready")
    unconfigured = _condition(ir, "InstanceReadyTimeoutUnconfigured")
    assert unconfigured is not None and unconfigured["status"] == "True", unconfigured
    assert unconfigured["message"].startswith("no instanceReadyTimeout is set")
    assert "instanceStatusEncoding" not in ir["status"]  # omenativeStatus: DenseV1
    assert ir["status"]["instanceStatuses"][0]["phase"] == "Ready"
    assert handle.manager.config.audit is None  # no audit block: migration requests wait

    # deploy.replicas: a router with no min/max gets 1..2 (defaultMaxReplicas.router) and an HPA
    runtime: JSON = {
        "apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime",
        "metadata": {"name": "srt-ome", "namespace": namespace},
        "spec": {"routerConfig": {"terminationGracePeriodSeconds": 1,
                                  "runner": {"name": "ome-container",
                                             "image": "example.com/router:1"}}},
    }
    isvc: JSON = {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "omecfg", "namespace": namespace},
        "spec": {"deploymentMode": "OMENative", "model": {"name": "m"},
                 "runtime": {"name": "srt-ome", "kind": "ServingRuntime"}, "router": {}},
    }
    await kube.create(SERVING_RUNTIMES, runtime, namespace)
    await kube.create(INFERENCE_SERVICES, isvc, namespace)

    async def hpa() -> JSON | None:
        try:
            return await kube.get(HPAS, "omecfg-router", namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    found = await eventually(hpa, timeout=60, what="the router's HPA")
    assert (found["spec"]["minReplicas"], found["spec"]["maxReplicas"]) == (1, 2), json.dumps(
        found["spec"])
    router = await get_replica(kube, namespace, "omecfg-router")
    assert router["spec"]["replicas"] == 1

    # the objects OME creates: the external {isvc} Service on the router, and the Services
    # of the router's revision although it is in no rollout group
    async def revised() -> str | None:
        status = (await get_replica(kube, namespace, "omecfg-router")).get("status") or {}
        return status.get("updateRevision") or None

    rev_hash = str(await eventually(revised, timeout=60, what="the router's revision")
                   ).rpartition("-")[2]
    expected = sorted(["omecfg", "omecfg-router", "omecfg-router-headless",
                       f"omecfg-router-rev-{rev_hash}", f"omecfg-router-rev-{rev_hash}-headless"])

    async def services() -> list[str] | None:
        page = await kube.list(SERVICES, namespace,
                               label_selector="ome.io/inferenceservice=omecfg")
        names = sorted(s["metadata"]["name"] for s in page.get("items") or ())
        return names if names == expected else None

    await eventually(services, timeout=60, what=f"the Services {expected}")
    external = await kube.get(SERVICES, "omecfg", namespace)
    assert external["spec"]["selector"] == {"ome.io/inferenceservice": "omecfg",
                                            "component": "router"}

"""The ScaledObject omenative renders for ``class: KEDA`` passes KEDA's own CRD schema on a
real API server (KEDA v2.21.1's ``scaledobjects.keda.sh`` from its Go module; no operator)."""

from __future__ import annotations

from typing import Any

import pytest

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.service_autoscalers import SCALED_OBJECTS
from omenative_core.service import isvc_from_json
from omenative_core.service.objects import base_labels, scaled_object

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures", "keda_fixtures"]

KEDA = {"class": "KEDA", "keda": {
    "triggers": [{"type": "prometheus",
                  "metadata": {"serverAddress": "http://prometheus.monitoring:9090",
                               "query": "sum(rate(ome_requests_total[1m]))",
                               "threshold": "10"}}],
    "pollingInterval": 15, "cooldownPeriod": 120, "idleReplicaCount": 0,
    "fallback": {"failureThreshold": 3, "replicas": 2},
    "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {
        "scaleDown": {"stabilizationWindowSeconds": 300}}}}}}


def _rendered(namespace: str) -> dict[str, Any]:
    isvc = isvc_from_json({
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": namespace, "uid": "u-1", "generation": 1},
        "spec": {"deploymentMode": "OMENative", "engine": {
            "minReplicas": 1, "maxReplicas": 4, "autoscaler": KEDA}}})
    engine = isvc.component("engine")
    assert engine is not None
    target = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": "chat-engine"}
    body = scaled_object(isvc, "chat-engine", base_labels(isvc, "engine"), target, 1, 4, engine)
    body["metadata"].pop("ownerReferences")  # no InferenceService u-1 in this cluster
    return body


def _kept(ours: Any, stored: Any) -> bool:
    """Whether everything in ``ours`` is in ``stored`` (which may hold more: defaults)."""
    if isinstance(ours, dict):
        return isinstance(stored, dict) and all(
            k in stored and _kept(v, stored[k]) for k, v in ours.items())
    return bool(ours == stored)


async def test_the_rendered_scaled_object_passes_kedas_schema(
    kube: KubeClient, namespace: str, keda_crd: str,
) -> None:
    body = _rendered(namespace)
    created = await kube.create(SCALED_OBJECTS, body, namespace)
    assert created["metadata"]["name"] == "scaledobject-chat-engine"
    # the API server prunes fields KEDA's schema does not know: every field we write is kept
    # (KEDA's schema may add defaults, such as fallback.behavior: static)
    assert _kept(body["spec"], created["spec"]), created["spec"]

    bad = _rendered(namespace)
    bad["metadata"]["name"] = "scaledobject-bad"
    del bad["spec"]["triggers"]
    try:
        await kube.create(SCALED_OBJECTS, bad, namespace)
    except ApiError as exc:
        assert exc.status == 422 and "triggers" in exc.message, exc
    else:
        pytest.fail("KEDA's schema admitted a ScaledObject without triggers")

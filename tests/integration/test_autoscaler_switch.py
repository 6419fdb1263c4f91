"""An autoscaler class change on a running InferenceService, as OME's component autoscaling
guide describes it: HPA -> KEDA -> None -> HPA. The old HPA or ScaledObject of ours goes once
the new one is applied, a user's own HPA beside it is never touched, and
``status.components.engine.autoscaler`` / ``scaleTargetRef`` say what is in effect.

The ServiceController runs on the test's namespace with KEDA's ScaledObject CRD installed
(KEDA v2.21.1's, no operator); the API server and kube-controller-manager are real."""

from __future__ import annotations

from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.service_autoscalers import HPAS, SCALED_OBJECTS
from omenative_controller.service_controller import (
    INFERENCE_SERVICES,
    SERVING_RUNTIMES,
    ServiceController,
)
from omenative_core.service import CRD_SCALED_OBJECT

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402
    chat_runtime,
    eventually,
    running_service_controller,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures", "keda_fixtures"]

KEDA = {"class": "KEDA", "keda": {"triggers": [
    {"type": "prometheus", "metadata": {"serverAddress": "http://prometheus.monitoring:9090",
                                        "query": "sum(vllm:num_requests_waiting)",
                                        "threshold": "5"}}]}}
TARGET = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": "chat-engine"}


def _isvc(namespace: str) -> JSON:
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "chat", "namespace": namespace},
            "spec": {"deploymentMode": "OMENative",
                     "runtime": {"name": "srt-chat", "kind": "ServingRuntime"},
                     "engine": {"minReplicas": 1, "maxReplicas": 3}}}


def _users_hpa(namespace: str) -> JSON:
    """The user's own HPA on the same InferenceReplica, with our labels but no owner."""
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "chat-engine-byo", "namespace": namespace,
                         "labels": {"ome.io/inferenceservice": "chat", "component": "engine"}},
            "spec": {"scaleTargetRef": TARGET, "minReplicas": 1, "maxReplicas": 2,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                         "type": "Utilization", "averageUtilization": 70}}}]}}


@pytest.fixture
async def keda_controller(kubeconfig_path: Any, namespace: str, kube: KubeClient,
                          service_crds_applied: list[str], ir_crd: str, keda_crd: str) -> Any:
    """A ServiceController that sees KEDA's CRD (so ``class: KEDA`` renders)."""
    async with running_service_controller(
            kubeconfig_path, namespace, kube, "isvc-controller-keda",
            crds_present=lambda: (CRD_SCALED_OBJECT,)) as controller:
        yield controller


async def _names(kube: KubeClient, namespace: str) -> tuple[list[str], list[str]]:
    hpas = await kube.list(HPAS, namespace)
    sos = await kube.list(SCALED_OBJECTS, namespace)
    return (sorted(o["metadata"]["name"] for o in hpas.get("items") or ()),
            sorted(o["metadata"]["name"] for o in sos.get("items") or ()))


async def _settles(kube: KubeClient, namespace: str, hpas: list[str], sos: list[str],
                   autoscaler: dict[str, str]) -> None:
    """Wait until exactly these HPAs and ScaledObjects exist and the status says so."""
    async def check() -> bool:
        if await _names(kube, namespace) != (hpas, sos):
            return False
        engine = ((await kube.get(INFERENCE_SERVICES, "chat", namespace)).get("status") or {}
                  ).get("components", {}).get("engine", {})
        got = {k: engine.get("autoscaler", {}).get(k) for k in autoscaler}
        return got == autoscaler and engine.get("scaleTargetRef") == TARGET

    await eventually(check, timeout=60, interval=0.3,
                     what=f"HPAs {hpas}, ScaledObjects {sos}, autoscaler {autoscaler}")


async def _switch(kube: KubeClient, namespace: str, autoscaler: Any) -> None:
    await kube.patch(INFERENCE_SERVICES, "chat",
                     {"spec": {"engine": {"autoscaler": autoscaler}}}, namespace)


async def test_a_class_change_replaces_our_autoscaler_and_leaves_the_users(
    kube: KubeClient, namespace: str, keda_controller: ServiceController,
) -> None:
    await kube.create(SERVING_RUNTIMES, chat_runtime(namespace), namespace)
    await kube.create(HPAS, _users_hpa(namespace), namespace)
    await kube.create(INFERENCE_SERVICES, _isvc(namespace), namespace)
    ours = {"class": "HPA", "managedBy": "ome", "specSource": "default"}
    await _settles(kube, namespace, ["chat-engine", "chat-engine-byo"], [], ours)

    await _switch(kube, namespace, KEDA)  # HPA -> KEDA: the ScaledObject, then no HPA
    keda = {"class": "KEDA", "managedBy": "ome", "specSource": "isvc"}
    await _settles(kube, namespace, ["chat-engine-byo"], ["scaledobject-chat-engine"], keda)

    await _switch(kube, namespace, {"class": "None", "keda": None})  # KEDA -> None
    none = {"class": "None", "managedBy": "none", "specSource": "isvc"}
    await _settles(kube, namespace, ["chat-engine-byo"], [], none)
    engine = (await kube.get(INFERENCE_SERVICES, "chat", namespace))["status"]["components"][
        "engine"]
    assert engine["autoscaler"] == none  # nothing mirrored from a scaler that is gone

    await _switch(kube, namespace, None)  # back to the default: OME's HPA again
    await _settles(kube, namespace, ["chat-engine", "chat-engine-byo"], [], ours)
    hpa = await kube.get(HPAS, "chat-engine", namespace)
    assert hpa["spec"]["scaleTargetRef"] == TARGET
    assert hpa["metadata"]["ownerReferences"][0]["kind"] == "InferenceService"


async def test_a_users_autoscaler_under_omes_name_is_never_deleted(
    kube: KubeClient, namespace: str, keda_controller: ServiceController,
) -> None:
    await kube.create(SERVING_RUNTIMES, chat_runtime(namespace), namespace)
    users = _users_hpa(namespace)
    users["metadata"]["name"] = "chat-engine"  # OME's name, but not ours: no owner reference
    await kube.create(HPAS, users, namespace)
    body = _isvc(namespace)
    body["spec"]["engine"]["autoscaler"] = {"class": "External"}
    await kube.create(INFERENCE_SERVICES, body, namespace)
    external = {"class": "External", "managedBy": "external", "specSource": "isvc"}
    await _settles(kube, namespace, ["chat-engine"], [], external)
    try:
        hpa = await kube.get(HPAS, "chat-engine", namespace)
    except ApiError as exc:  # pragma: no cover - the assertion below says what went wrong
        pytest.fail(f"the user's HPA was deleted: {exc.message}")
    assert "ownerReferences" not in hpa["metadata"]

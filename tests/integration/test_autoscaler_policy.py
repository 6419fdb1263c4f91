"""OME's AutoscalerPolicy with the feature on (its CRD ``autoscalerpolicies.ome.io``
installed), as ome-docs ``concepts/serving/autoscaler-policy.md`` walks it: a policy
attached to the engine renders its HPA; editing the policy changes the HPA; deleting the
policy holds the HPA as it was (fail-closed: ``AutoscalerResolved`` False
``PolicyNotFound`` and a Warning ``AutoscalerPolicyHold``). The policy's own status says
``Ready`` / ``InUse`` / ``attachedComponents``. Real API server and kube-controller-manager;
the CRD is removed at the end."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import EVENTS
from omenative_controller.service_autoscalers import HPAS
from omenative_controller.service_controller import (
    INFERENCE_SERVICES,
    SERVING_RUNTIMES,
    ServiceController,
)
from omenative_controller.service_crds import AUTOSCALER_POLICY
from omenative_controller.service_policies import AUTOSCALER_POLICIES

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402
    REPO,
    apply_crd,
    chat_runtime,
    delete_crd,
    eventually,
    running_service_controller,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]


def _cpu(utilization: int) -> dict[str, Any]:
    return {"class": "HPA", "hpa": {
        "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
            "type": "Utilization", "averageUtilization": utilization}}}],
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300}}}}


def _policy(namespace: str) -> JSON:
    return {"apiVersion": "ome.io/v1beta1", "kind": "AutoscalerPolicy",
            "metadata": {"name": "cpu-60", "namespace": namespace}, "spec": _cpu(60)}


def _isvc(namespace: str) -> JSON:
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "chat", "namespace": namespace},
            "spec": {"deploymentMode": "OMENative",
                     "runtime": {"name": "srt-chat", "kind": "ServingRuntime"},
                     "engine": {"minReplicas": 1, "maxReplicas": 3,
                                "autoscalerPolicyRef": {"name": "cpu-60"}}}}


@pytest.fixture
async def policy_crd(kube: KubeClient) -> AsyncIterator[str]:
    """OME's AutoscalerPolicy CRD (the feature on), removed at the end."""
    name = await apply_crd(kube, REPO / AUTOSCALER_POLICY.file)
    yield name
    await delete_crd(kube, name)


@pytest.fixture
async def policy_controller(kubeconfig_path: Any, namespace: str, kube: KubeClient,
                            service_crds_applied: list[str], ir_crd: str,
                            policy_crd: str) -> AsyncIterator[ServiceController]:
    """A ServiceController that polls discovery every second (so it finds the CRD)."""
    async with running_service_controller(
            kubeconfig_path, namespace, kube, "isvc-controller-policy",
            crds_present=lambda: (), crd_poll_seconds=1.0) as controller:
        yield controller


async def _engine(kube: KubeClient, namespace: str) -> dict[str, Any]:
    isvc = await kube.get(INFERENCE_SERVICES, "chat", namespace)
    engine: dict[str, Any] = ((isvc.get("status") or {}).get("components") or {}).get(
        "engine") or {}
    return engine


def _resolved(engine: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in (engine.get("autoscaler") or {}).get("conditions") or ()
                 if c.get("type") == "AutoscalerResolved"), {})


def _utilization(hpa: JSON) -> Any:
    return hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"]


async def test_a_policy_renders_follows_edits_and_holds_when_deleted(
    kube: KubeClient, namespace: str, policy_controller: ServiceController,
) -> None:
    await kube.create(SERVING_RUNTIMES, chat_runtime(namespace), namespace)
    await kube.create(AUTOSCALER_POLICIES, _policy(namespace), namespace)
    await kube.create(INFERENCE_SERVICES, _isvc(namespace), namespace)

    async def rendered(utilization: int, generation: int) -> bool:
        try:
            hpa = await kube.get(HPAS, "chat-engine", namespace)
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        engine = await _engine(kube, namespace)
        autoscaler = engine.get("autoscaler") or {}
        return (_utilization(hpa) == utilization
                and autoscaler.get("specSource") == "policy"
                and (autoscaler.get("policy") or {}).get("name") == "cpu-60"
                and (autoscaler.get("policy") or {}).get("observedGeneration") == generation
                and _resolved(engine).get("reason") == "RenderedFromPolicy")

    await eventually(lambda: rendered(60, 1), timeout=60, interval=0.3,
                     what="the HPA rendered from cpu-60 and the engine's status saying so")
    hpa = await kube.get(HPAS, "chat-engine", namespace)
    assert hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 300
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 3)
    uid = hpa["metadata"]["uid"]

    async def policy_status() -> bool:
        status = (await kube.get(AUTOSCALER_POLICIES, "cpu-60", namespace)).get("status") or {}
        conditions = {c["type"]: c for c in status.get("conditions") or ()}
        return (status.get("attachedComponents") == 1
                and (conditions.get("Ready") or {}).get("reason") == "TemplatesValid"
                and (conditions.get("InUse") or {}).get("reason") == "Attached")

    await eventually(policy_status, timeout=30, interval=0.3,
                     what="the policy's status Ready/InUse/attachedComponents")

    await kube.patch(AUTOSCALER_POLICIES, "cpu-60", {"spec": _cpu(30)}, namespace)
    await eventually(lambda: rendered(30, 2), timeout=60, interval=0.3,
                     what="the HPA following the policy edit")

    await kube.delete(AUTOSCALER_POLICIES, "cpu-60", namespace)

    async def held() -> bool:
        resolved = _resolved(await _engine(kube, namespace))
        return resolved.get("reason") == "PolicyNotFound"

    await eventually(held, timeout=60, interval=0.3, what="the engine holding PolicyNotFound")
    resolved = _resolved(await _engine(kube, namespace))
    assert resolved["status"] == "False"
    assert resolved["message"].startswith("holding last-known-good scaler:")
    hpa = await kube.get(HPAS, "chat-engine", namespace)
    assert hpa["metadata"]["uid"] == uid and _utilization(hpa) == 30  # kept as it was

    async def warned() -> list[JSON]:
        page = await kube.list(EVENTS, namespace,
                               field_selector="involvedObject.name=chat,type=Warning")
        return [e for e in page.get("items") or () if e.get("reason") == "AutoscalerPolicyHold"]

    (event,) = await eventually(warned, timeout=30, interval=0.3,
                                what="the AutoscalerPolicyHold Event")
    assert "engine autoscaler is holding last-known-good (PolicyNotFound)" in event["message"]

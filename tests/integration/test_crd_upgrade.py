"""An upgrade from the loose CRDs (config/crd-loose/) to OME's schema (config/crd/) on a
cluster with InferenceServices, the manager running them throughout.

What docs/install.md ("Moving from the loose CRDs to OME's schema") tells a user rests on
this: after the CRDs are replaced, the objects stored under the loose schema read back
(pruned and defaulted on read: the API server applies the new schema to what etcd holds),
the manager keeps serving them without a rollout, and the next write of each is accepted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from omenative_controller import service_crds
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS
from omenative_controller.service_controller import INFERENCE_SERVICES, SERVING_RUNTIMES

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    REPO,
    apply_crd,
    conditions,
    eventually,
    restore_ome_crds,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

FUTURE = "someFutureOmeField"


async def keeps_unknown_fields(kube: KubeClient, namespace: str) -> bool:
    """Whether the InferenceService schema the API server serves now keeps an unknown field
    (a dry-run create: nothing is stored). A replaced CRD is Established at once, but its
    handler takes the new schema a moment later."""
    probe = isvc_body(namespace)
    probe["metadata"]["name"] = "schema-probe"
    out = await kube.request("POST", INFERENCE_SERVICES.path(namespace), verb="create",
                             resource=INFERENCE_SERVICES.plural, query=(("dryRun", "All"),),
                             body=probe, content_type="application/json")
    return FUTURE in out["spec"]


async def served(kube: KubeClient, namespace: str, *, loose: bool) -> None:
    """Until the served InferenceService schema is the loose one (or OME's)."""

    async def now() -> bool:
        return await keeps_unknown_fields(kube, namespace) == loose

    await eventually(now, timeout=30, interval=0.2,
                     what="the loose schema served" if loose else "OME's schema served")


@pytest.fixture
async def loose_crds(kube: KubeClient, namespace: str) -> AsyncIterator[list[str]]:
    """The loose InferenceService and runtime CRDs in place of OME's; OME's put back after."""
    try:
        names = [await apply_crd(kube, REPO / crd.file)
                 for crd in service_crds.LOOSE_SERVICE_CRDS]
        await served(kube, namespace, loose=True)
        yield names
    finally:
        await restore_ome_crds(kube)
        await served(kube, namespace, loose=False)


def runtime_body(namespace: str) -> JSON:
    return {"apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime",
            "metadata": {"name": "srt", "namespace": namespace},
            "spec": {"supportedModelFormats": [{"modelFormat": {"name": "safetensors"},
                                                "modelFramework": {"name": "transformers"}}],
                     "engineConfig": {"terminationGracePeriodSeconds": 1,
                                      "runner": {"name": "ome-container",
                                                 "image": "example.com/llm:1"}}}}


def isvc_body(namespace: str) -> JSON:
    """Written for the loose CRD: a field OME's schema does not know, ``runtime.autoSync``
    and ``apiGroup`` left to their (OME) defaults."""
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "chat", "namespace": namespace},
            "spec": {"deploymentMode": "OMENative", FUTURE: {"kept": "until the upgrade"},
                     "runtime": {"name": "srt", "kind": "ServingRuntime"},
                     "engine": {"minReplicas": 1, "maxReplicas": 1}}}


async def test_isvcs_stored_under_the_loose_crds_keep_running_after_omes_schema(
    kube: KubeClient, namespace: str, loose_crds: list[str], start_manager: Any
) -> None:
    await kube.create(SERVING_RUNTIMES, runtime_body(namespace), namespace)
    created = await kube.create(INFERENCE_SERVICES, isvc_body(namespace), namespace)
    assert created["spec"][FUTURE] == {"kept": "until the upgrade"}  # the loose CRD keeps it
    assert "autoSync" not in created["spec"]["runtime"]
    await start_manager()

    async def ready() -> JSON | None:
        isvc = await kube.get(INFERENCE_SERVICES, "chat", namespace)
        return isvc if conditions(isvc).get("Ready") == "True" else None

    await eventually(ready, timeout=120, interval=0.3, what="chat Ready on the loose CRDs")
    before = await kube.get(INFERENCE_REPLICAS, "chat-engine", namespace)

    # the upgrade: OME's schema replaces the loose CRDs (kubectl apply -k config/ does this)
    for crd in service_crds.SERVICE_CRDS:
        await apply_crd(kube, REPO / crd.file)
    await served(kube, namespace, loose=False)

    # what etcd holds reads back through the new schema: pruned and defaulted
    isvc = await kube.get(INFERENCE_SERVICES, "chat", namespace)
    assert FUTURE not in isvc["spec"]
    assert isvc["spec"]["runtime"]["autoSync"] is True
    assert isvc["spec"]["runtime"]["apiGroup"] == "ome.io"
    assert conditions(isvc).get("Ready") == "True"
    listed = (await kube.list(INFERENCE_SERVICES, namespace))["items"]
    assert [i["metadata"]["name"] for i in listed] == ["chat"]

    # the manager keeps running it: a change after the upgrade is admitted and rendered, and
    # the pruned and defaulted fields changed nothing in what the engine renders
    await kube.patch(INFERENCE_SERVICES, "chat",
                     {"spec": {"engine": {"minReplicas": 2, "maxReplicas": 2}}}, namespace)

    async def scaled() -> JSON | None:
        ir = await kube.get(INFERENCE_REPLICAS, "chat-engine", namespace)
        isvc = await kube.get(INFERENCE_SERVICES, "chat", namespace)
        engine = ((isvc.get("status") or {}).get("components") or {}).get("engine") or {}
        ok = (ir["spec"].get("replicas") == 2 and conditions(isvc).get("Ready") == "True"
              and (engine.get("lifecycle") or {}).get("readyReplicas") == 2)
        return ir if ok else None

    after = await eventually(scaled, timeout=120, interval=0.3,
                             what="chat scaled to 2 after the upgrade")
    assert after["spec"]["runners"] == before["spec"]["runners"]
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    stored = await kube.get(INFERENCE_SERVICES, "chat", namespace)
    assert FUTURE not in stored["spec"]  # the write stored the pruned object

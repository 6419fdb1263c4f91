"""OME's "Run a standalone InferenceReplica" (ome-projects/ome-docs@8c764098,
guides/omenative/run-a-standalone-inferencereplica.md) with a runtime reference: the
replica renders its pods from ``spec.runtimeRef`` in memory, ``replicas: 0`` runs one
Instance, and a runtime it cannot render from is ``Ready=False`` with OME's reason and a
Warning Event (issue 28, item 3). The test model server stands in for the engine image.

With ``spec.modelRef`` (OME's ``serviceShell``: ome-projects/ome@a543351b,
``pkg/controller/v1beta1/inferencereplica/render.go``) the model reaches the pods as for an
InferenceService: OME's catalog ClusterBaseModel ``qwen3-0-6b`` and the auto-selecting
runtime of ``test_isvc_models`` (a model directory made by the test, the node label OME's
model agent would set), with OME's model CRDs installed for that test only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS, PODS, SERVICES
from omenative_controller.service_controller import SERVING_RUNTIMES
from omenative_controller.service_sources import CLUSTER_BASE_MODELS, CLUSTER_SERVING_RUNTIMES

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    eventually,
    get_replica,
    list_pods,
    posted_warning_events,
    warning_event,
)
from test_isvc_models import (  # noqa: E402 - OME's catalog model and runtime, as there
    MODEL_LABEL,
    cluster_base_model,
    label_model_ready,
    model_crds,
    model_node,
    node_names,
    runtime,
)

__all__ = ["model_crds", "model_node"]  # fixtures this module's tests use

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]


def _pool(name: str, runtime: str, replicas: int) -> JSON:
    return {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
        "metadata": {"name": name},
        "spec": {"component": "engine", "replicas": replicas,
                 "runtimeRef": {"name": runtime, "kind": "ServingRuntime"}},
    }


async def test_a_standalone_replica_runs_from_its_runtime_ref(
    kube: KubeClient, namespace: str, start_manager: Any, service_crds_applied: list[str]
) -> None:
    await start_manager()
    runtime: JSON = {
        "apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime",
        "metadata": {"name": "srt-pool", "namespace": namespace},
        "spec": {"engineConfig": {"terminationGracePeriodSeconds": 1,
                                  "runner": {"name": "ome-container",
                                             "image": "example.com/llm:1"}}},
    }
    await kube.create(SERVING_RUNTIMES, runtime, namespace)
    await kube.create(INFERENCE_REPLICAS, _pool("llama-pool", "srt-pool", 0), namespace)

    async def ready() -> JSON | None:
        ir = await get_replica(kube, namespace, "llama-pool")
        return ir if (ir.get("status") or {}).get("readyReplicas") == 1 else None

    ir = await eventually(ready, timeout=90, what="the runtimeRef replica Ready")
    assert ir["spec"]["replicas"] == 0 and "runners" not in ir["spec"]  # never written
    assert ir["status"]["replicas"] == 1  # OME: 0 runs one Instance
    pods = [p for p in (await list_pods(kube, namespace)).values()
            if p["metadata"]["labels"].get("ome.io/inferencereplica") == "llama-pool"]
    assert len(pods) == 1
    images = [c["image"] for c in pods[0]["spec"]["containers"]]
    assert "example.com/llm:1" in images

    # a runtime that does not exist: Ready=False RuntimeNotFound and a Warning Event
    await kube.create(INFERENCE_REPLICAS, _pool("orphan-pool", "srt-missing", 1), namespace)

    async def blocked() -> JSON | None:
        got = await get_replica(kube, namespace, "orphan-pool")
        conds = {c["type"]: c for c in (got.get("status") or {}).get("conditions") or ()}
        ready_cond = conds.get("Ready")
        return got if ready_cond is not None and ready_cond["reason"] == "RuntimeNotFound" \
            else None

    orphan = await eventually(blocked, timeout=30, what="RuntimeNotFound on the replica")
    ready_cond = next(c for c in orphan["status"]["conditions"] if c["type"] == "Ready")
    assert ready_cond["status"] == "False"
    assert "ServingRuntime 'srt-missing' not found" in ready_cond["message"]
    await warning_event(kube, namespace, "orphan-pool", "RuntimeNotFound")

    # a change to the runtime re-renders the replica at once (OME watches it): well
    # inside the 30 s config reload and the resync that used to pick it up
    await kube.patch(SERVING_RUNTIMES, "srt-pool", {"spec": {"engineConfig": {
        "runner": {"name": "ome-container", "image": "example.com/llm:2"}}}}, namespace)
    await eventually(lambda: _pod_with_image(kube, namespace, "llama-pool",
                                             "example.com/llm:2"),
                     timeout=20, what="the runtime change in the replica's pod")


async def _pod_with_image(kube: KubeClient, namespace: str, replica: str,
                          image: str) -> JSON | None:
    for pod in (await list_pods(kube, namespace)).values():
        if pod["metadata"]["labels"].get("ome.io/inferencereplica") == replica and \
                image in [c["image"] for c in pod["spec"]["containers"]]:
            return pod
    return None


def _blocked_reason(got: JSON) -> JSON | None:
    conds = {c["type"]: c for c in (got.get("status") or {}).get("conditions") or ()}
    return conds.get("Ready")


async def test_a_standalone_replica_serves_the_model_of_its_model_ref(
    kube: KubeClient, namespace: str, start_manager: Any, model_crds: None, model_node: str,
    tmp_path: Path,
) -> None:
    weights = tmp_path / "Qwen" / "Qwen3-0.6B"
    weights.mkdir(parents=True)
    await kube.create(CLUSTER_BASE_MODELS, cluster_base_model(weights))
    await kube.create(CLUSTER_SERVING_RUNTIMES, runtime("srt-auto", auto_select=True))
    await start_manager()
    pool: JSON = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
                  "metadata": {"name": "qwen-pool"},
                  "spec": {"component": "engine", "modelRef": {"name": "qwen3-0-6b"}}}
    await kube.create(INFERENCE_REPLICAS, pool, namespace)

    async def scheduled() -> JSON | None:
        pods = [p for p in (await list_pods(kube, namespace)).values()
                if p["metadata"]["labels"].get("ome.io/inferencereplica") == "qwen-pool"]
        return pods[0] if len(pods) == 1 and pods[0]["spec"].get("nodeName") else None

    pod = await eventually(scheduled, timeout=90, what="the modelRef replica's pod scheduled")
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "ome-container")
    assert container["image"] == "example.com/sglang:v0.5.5"  # the auto-selected runtime
    env = {e["name"]: e.get("value") for e in container.get("env") or ()}
    assert env["MODEL_PATH"] == str(weights)
    assert env["PARALLELISM_SIZE"] == "1"
    assert {"name": "qwen3-0-6b", "mountPath": str(weights), "readOnly": True} \
        in container["volumeMounts"]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["qwen3-0-6b"]["hostPath"]["path"] == str(weights)
    assert pod["spec"]["nodeSelector"][MODEL_LABEL] == "Ready"
    assert pod["spec"]["nodeName"] == model_node
    stored = await get_replica(kube, namespace, "qwen-pool")
    assert "runners" not in stored["spec"]  # rendered in memory, never written

    # a model that does not exist: Ready=False ModelNotFound, a Warning Event, no pods
    missing: JSON = {**pool, "metadata": {"name": "ghost-pool"},
                     "spec": {**pool["spec"], "modelRef": {"name": "no-such-model"}}}
    await kube.create(INFERENCE_REPLICAS, missing, namespace)

    async def blocked() -> JSON | None:
        cond = _blocked_reason(await get_replica(kube, namespace, "ghost-pool"))
        return cond if cond is not None and cond["reason"] == "ModelNotFound" else None

    cond = await eventually(blocked, timeout=30, what="ModelNotFound on the replica")
    assert cond["status"] == "False" and "no-such-model" in cond["message"]
    event = await warning_event(kube, namespace, "ghost-pool", "ModelNotFound")
    assert "no-such-model" in event["message"]
    assert not [p for p in (await list_pods(kube, namespace)).values()
                if p["metadata"]["labels"].get("ome.io/inferencereplica") == "ghost-pool"]

    # a runtime named for a model it does not declare: rendered anyway, with OME's
    # RuntimeCompatibilityAdvisory as one Warning Event on the replica
    onnx = runtime("srt-onnx")
    onnx["spec"]["supportedModelFormats"][0]["modelFormat"] = {"name": "onnx"}
    await kube.create(CLUSTER_SERVING_RUNTIMES, onnx)
    named: JSON = {**pool, "metadata": {"name": "named-pool"},
                   "spec": {**pool["spec"], "runtimeRef": {"name": "srt-onnx"}}}
    await kube.create(INFERENCE_REPLICAS, named, namespace)

    advisory = (kube, namespace, "named-pool", "RuntimeCompatibilityAdvisory")
    (event,) = await posted_warning_events(*advisory)  # one Event, however many passes
    assert "proceeding because the runtime was named explicitly" in event["message"]
    # the runtime changes (a new image): the replica re-renders at once, and its later
    # passes do not send the advisory again (same generation)
    await kube.patch(CLUSTER_SERVING_RUNTIMES, "srt-onnx", {"spec": {"engineConfig": {
        "runner": {"name": "ome-container", "image": "example.com/sglang:v2"}}}})
    await eventually(lambda: _pod_with_image(kube, namespace, "named-pool",
                                             "example.com/sglang:v2"),
                     timeout=20, what="the runtime change in the named replica's pod")
    (again,) = await posted_warning_events(*advisory)
    assert again.get("count", 1) == 1 and again["metadata"]["name"] == \
        event["metadata"]["name"]

# ---------------------------------------------------------------------------- the guide

GUIDE_MODEL = "llama-3-2-1b-instruct"
GUIDE_LABEL = f"models.ome.io/clusterbasemodel.{GUIDE_MODEL}"


def guide_replica(namespace: str) -> JSON:
    """The guide's ``llama-pool.yaml`` (Step 1) as written; only the namespace is the
    test's (``llama-demo`` there)."""
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {"name": "llama-pool", "namespace": namespace},
        "spec": {"component": "engine", "modelRef": {"name": GUIDE_MODEL}, "replicas": 1},
    }


def guide_prerequisites(weights: Path) -> tuple[JSON, JSON]:
    """The guide's prerequisites: the ClusterBaseModel ``llama-3-2-1b-instruct`` as the
    model agent records it (a directory made by the test for its storage), and the
    ClusterServingRuntime ``vllm-llama-3-2-1b-instruct`` serving it (the test image)."""
    model = cluster_base_model(weights)
    model["metadata"]["name"] = GUIDE_MODEL
    model["spec"].update(vendor="meta", displayName="meta.llama-3.2-1b-instruct",
                         modelArchitecture="LlamaForCausalLM", modelParameterSize="1.24B")
    model["spec"]["storage"]["storageUri"] = "hf://meta-llama/Llama-3.2-1B-Instruct"
    srt = runtime("vllm-llama-3-2-1b-instruct", auto_select=True)
    srt["spec"]["supportedModelFormats"][0]["modelArchitecture"] = "LlamaForCausalLM"
    srt["spec"]["modelSizeRange"] = {"min": "1B", "max": "3B"}
    return model, srt


async def test_the_standalone_guide_runs_with_omes_names(
    kube: KubeClient, namespace: str, start_manager: Any, model_crds: None, tmp_path: Path,
) -> None:
    """ome-docs@8c764098 guides/omenative/run-a-standalone-inferencereplica.md, Steps 1-3:
    the pod ``llama-pool-engine-0-default-0`` labelled ``ome.io/inferenceservice=llama-pool``
    and serving, the one Service ``llama-pool-engine-headless`` (ClusterIP None), and a
    scale to 2 taking index 1."""
    weights = tmp_path / "meta-llama" / "Llama-3.2-1B-Instruct"
    weights.mkdir(parents=True)
    model, srt = guide_prerequisites(weights)
    await kube.create(CLUSTER_BASE_MODELS, model)
    await kube.create(CLUSTER_SERVING_RUNTIMES, srt)
    nodes = (await node_names(kube))[-2:]  # where the model agent found the weights
    for node in nodes:
        await label_model_ready(kube, node, GUIDE_LABEL)
    try:
        await start_manager()
        await kube.create(INFERENCE_REPLICAS, guide_replica(namespace), namespace)
        await _guide_steps(kube, namespace)
    finally:
        for node in nodes:
            await label_model_ready(kube, node, GUIDE_LABEL, ready=False)


async def _serving(kube: KubeClient, namespace: str, want: int) -> dict[str, str] | None:
    """``kubectl get pods -l ome.io/inferenceservice=llama-pool`` with the
    ``ome.io/serving`` column, once ``want`` pods show True."""
    page = await kube.list(PODS, namespace, label_selector="ome.io/inferenceservice=llama-pool")
    got = {p["metadata"]["name"]: next(
        (c["status"] for c in (p.get("status") or {}).get("conditions") or ()
         if c["type"] == "ome.io/serving"), "") for p in page.get("items") or ()}
    return got if list(got.values()).count("True") == want == len(got) else None


async def _guide_steps(kube: KubeClient, namespace: str) -> None:
    async def ready(want: int) -> JSON | None:
        ir = await get_replica(kube, namespace, "llama-pool")
        status = ir.get("status") or {}
        return ir if status.get("readyReplicas") == want == status.get("replicas") else None

    await eventually(lambda: ready(1), timeout=90, what="llama-pool Ready (Step 1)")
    pods = await eventually(lambda: _serving(kube, namespace, 1), timeout=60,
                            what="the engine pod serving (Step 2)")
    assert pods == {"llama-pool-engine-0-default-0": "True"}
    services = {s["metadata"]["name"]: s["spec"]
                for s in (await kube.list(SERVICES, namespace)).get("items") or ()}
    assert list(services) == ["llama-pool-engine-headless"]
    assert services["llama-pool-engine-headless"]["type"] == "ClusterIP"
    assert services["llama-pool-engine-headless"]["clusterIP"] == "None"

    await kube.patch(INFERENCE_REPLICAS, "llama-pool", {"spec": {"replicas": 2}}, namespace)
    await eventually(lambda: ready(2), timeout=90, what="llama-pool at 2 (Step 3)")
    pods = await eventually(lambda: _serving(kube, namespace, 2), timeout=60,
                            what="both engine pods serving (Step 3)")
    assert sorted(pods) == ["llama-pool-engine-0-default-0", "llama-pool-engine-1-default-0"]

"""OME's guide "Serve a prefill-decode model", end to end on the real manager (stand-in nodes).

Transcribed: the guide's InferenceService ``llama-pd`` (ome-projects/ome-docs
``guides/omenative/serve-a-prefill-decode-model.md`` at 7f641a34, since v1.3), OME's
ClusterBaseModel ``llama-3-2-1b-instruct`` (ome-projects/ome
``config/models/meta/Llama-3.2-1B-Instruct.yaml`` at cfa05c69) and ClusterServingRuntime
``srt-llama-3-2-1b-instruct-pd`` (``config/runtimes/srt/meta/llama-3-2-1b-instruct-pd-rt.yaml``
at 3e3532aa), probes, resources, host network and RDMA annotations as written. Substituted,
as nothing else can exist here: the SGLang and router images (the kubelet stand-in runs any
image), the model's storage path (a directory the test makes), what OME's model agent records
on the model (format, framework 4.45.0.dev0 as the guide's warning shows, architecture, size)
and the node label it sets where the model is Ready (three nodes, a fourth before Step 5).

The guide's steps, each checked: the three components become Ready (``Ready``,
``DecoderReady``, ``RouterReady``); one InferenceReplica per component with 2, 1 and 1
Instances; the pods named ``{isvc}-{component}-{index}-default-0`` with their ``component``
label, one engine or decoder pod per node (port 8080 on the host network), the model's path
in the engine and decoder; the Service ``llama-pd`` in front of the router (what the guide
port-forwards to); the runtime's advisory (its framework version is older than the model's);
then Step 5: a third prefill Instance on the fourth node, the running pods left alone.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS, PODS, SERVICES
from omenative_controller.service_controller import INFERENCE_SERVICES
from omenative_controller.service_sources import CLUSTER_BASE_MODELS, CLUSTER_SERVING_RUNTIMES

pytest.register_assert_rewrite("manager_fixtures", "test_isvc_models")
from manager_fixtures import eventually, warning_event  # noqa: E402 - after the rewrite
from test_isvc_models import (  # noqa: E402 - OME's model CRDs and the agent's node label
    conditions,
    label_model_ready,
    model_crds,
    node_names,
    ome_env,
)

__all__ = ["model_crds"]  # the fixture this module's test uses

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

MODEL = "llama-3-2-1b-instruct"
RUNTIME = "srt-llama-3-2-1b-instruct-pd"
MODEL_LABEL = f"models.ome.io/clusterbasemodel.{MODEL}"
IMAGE = "example.com/sglang:v0.5.5.post3-cu129-amd64"
ROUTER_IMAGE = "example.com/smg:v0.2.4.post1-dev"


@pytest.fixture
async def model_nodes(kube: KubeClient) -> AsyncIterator[list[str]]:
    """Every node, in name order; the test labels the ones that have the model."""
    nodes = await node_names(kube)
    assert len(nodes) >= 4, nodes
    try:
        yield nodes
    finally:
        for node in nodes:
            await label_model_ready(kube, node, MODEL_LABEL, ready=False)


def cluster_base_model(path: Path) -> JSON:
    """OME's catalog ClusterBaseModel, with what the model agent records and a local path."""
    return {
        "apiVersion": "ome.io/v1beta1", "kind": "ClusterBaseModel",
        "metadata": {"name": MODEL},
        "spec": {
            "modelCapabilities": ["TEXT_TO_TEXT"], "displayName": "meta.llama-3.2-1b-instruct",
            "vendor": "meta", "disabled": False, "version": "1.0.0",
            "storage": {"storageUri": "hf://meta-llama/Llama-3.2-1B-Instruct",
                        "path": str(path), "key": "hf-token"},
            # recorded by OME's model agent once the weights are on a node
            "modelFormat": {"name": "safetensors", "version": "1.0.0"},
            "modelFramework": {"name": "transformers", "version": "4.45.0.dev0"},
            "modelArchitecture": "LlamaForCausalLM",
            "modelParameterSize": "1.24B",
        },
    }


def _probe(path: str, **fields: int) -> JSON:
    return {"httpGet": {"path": path, "port": 8080}, **fields}


def _sglang(mode: str) -> JSON:
    """``engineConfig`` / ``decoderConfig`` of the runtime, for ``--disaggregation-mode``."""
    gpu = {"cpu": 10, "memory": "30Gi", "nvidia.com/gpu": 1}
    return {
        "annotations": {
            "rdma.ome.io/auto-inject": "true", "rdma.ome.io/profile": "oci-roce",
            "rdma.ome.io/container-name": "ome-container", "prometheus.io/scrape": "true",
            "prometheus.io/port": "8080", "prometheus.io/path": "/metrics"},
        "labels": {"logging-forward": "enabled"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
        "dnsPolicy": "ClusterFirstWithHostNet",
        "hostNetwork": True,
        "runner": {
            "name": "ome-container", "securityContext": {"privileged": True}, "image": IMAGE,
            "ports": [{"containerPort": 8080, "name": "http1", "protocol": "TCP"}],
            "command": ["python3", "-m", "sglang.launch_server", "--host", "0.0.0.0",
                        "--port", "8080", "--enable-metrics", "--log-requests",
                        "--model-path", "$(MODEL_PATH)", "--tp-size", "1", "--mem-frac", "0.9",
                        "--served-model-name", "meta-llama/Llama-3.2-1B-Instruct",
                        "--disaggregation-mode", mode, "--disaggregation-ib-device", "mlx5_0"],
            "volumeMounts": [{"mountPath": "/dev/shm", "name": "dshm"}],
            "resources": {"requests": dict(gpu), "limits": dict(gpu)},
            "readinessProbe": _probe("/health_generate", failureThreshold=3, successThreshold=1,
                                     periodSeconds=60, timeoutSeconds=200),
            "livenessProbe": _probe("/health", failureThreshold=5, successThreshold=1,
                                    periodSeconds=60, timeoutSeconds=60),
            "startupProbe": _probe("/health_generate", failureThreshold=150, successThreshold=1,
                                   periodSeconds=6, initialDelaySeconds=60, timeoutSeconds=30),
        },
    }


def pd_runtime() -> JSON:
    """OME's catalog ClusterServingRuntime ``srt-llama-3-2-1b-instruct-pd`` (test images)."""
    selector = "component={} ome.io/inferenceservice=$(INFERENCESERVICE_NAME)"
    router = {
        "name": "router", "image": ROUTER_IMAGE,
        "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
        "ports": [{"containerPort": 8080, "name": "http"}],
        "command": ["python3", "-m", "sglang_router.launch_router", "--host", "0.0.0.0",
                    "--port", "8080", "--pd-disaggregation", "--policy", "power_of_two",
                    "--service-discovery", "--service-discovery-namespace", "$(NAMESPACE)",
                    "--service-discovery-port", "8080",
                    "--prefill-selector", selector.format("engine"),
                    "--decode-selector", selector.format("decoder")],
        "env": [
            {"name": "NAMESPACE",
             "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "INFERENCESERVICE_NAME", "valueFrom": {"fieldRef": {
                "fieldPath": "metadata.labels['ome.io/inferenceservice']"}}}],
        "readinessProbe": _probe("/readiness", failureThreshold=5, successThreshold=1,
                                 periodSeconds=30, timeoutSeconds=10),
        "livenessProbe": _probe("/liveness", failureThreshold=5, successThreshold=1,
                                periodSeconds=30, timeoutSeconds=10),
        "startupProbe": _probe("/readiness", failureThreshold=10, successThreshold=1,
                               periodSeconds=20, timeoutSeconds=10),
    }
    return {
        "apiVersion": "ome.io/v1beta1", "kind": "ClusterServingRuntime",
        "metadata": {"name": RUNTIME},
        "spec": {
            "disabled": False,
            "supportedModelFormats": [{
                "modelFramework": {"name": "transformers", "version": "4.43.0"},
                "modelFormat": {"name": "safetensors", "version": "1.0.0"},
                "modelArchitecture": "LlamaForCausalLM", "autoSelect": False, "priority": 1}],
            "protocolVersions": ["openAI"],
            "modelSizeRange": {"min": "500M", "max": "2B"},
            "engineConfig": _sglang("prefill"),
            "decoderConfig": _sglang("decode"),
            "routerConfig": {"runner": router},
        },
    }


def llama_pd(namespace: str) -> JSON:
    """The guide's ``llama-pd.yaml`` (in the test's namespace)."""
    return {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "llama-pd", "namespace": namespace},
        "spec": {"deploymentMode": "OMENative", "model": {"name": MODEL},
                 "runtime": {"name": RUNTIME},
                 "engine": {"minReplicas": 2, "maxReplicas": 2},
                 "decoder": {"minReplicas": 1, "maxReplicas": 1},
                 "router": {"minReplicas": 1, "maxReplicas": 1}},
    }


def _true(obj: JSON, kind: str) -> bool:
    return (conditions(obj).get(kind) or {}).get("status") == "True"


async def _pods(kube: KubeClient, namespace: str) -> dict[str, JSON]:
    page = await kube.list(PODS, namespace, label_selector="ome.io/inferenceservice=llama-pd")
    return {p["metadata"]["name"]: p for p in page.get("items") or ()
            if not p["metadata"].get("deletionTimestamp")}


async def test_serve_a_prefill_decode_model(
    kube: KubeClient, namespace: str, start_manager: Any, model_crds: None,
    model_nodes: list[str], tmp_path: Path,
) -> None:
    # Step 1: the model and the runtime; the model Ready on three nodes
    weights = tmp_path / "meta" / MODEL
    weights.mkdir(parents=True)
    await kube.create(CLUSTER_BASE_MODELS, cluster_base_model(weights))
    await kube.create(CLUSTER_SERVING_RUNTIMES, pd_runtime())
    for node in model_nodes[:3]:
        await label_model_ready(kube, node, MODEL_LABEL)
    await start_manager()

    # Step 2: the InferenceService, then Ready, DecoderReady, RouterReady
    await kube.create(INFERENCE_SERVICES, llama_pd(namespace), namespace)

    async def all_ready() -> JSON | None:
        isvc = await kube.get(INFERENCE_SERVICES, "llama-pd", namespace)
        ok = all(_true(isvc, c) for c in ("Ready", "DecoderReady", "RouterReady"))
        return isvc if ok else None

    await eventually(all_ready, timeout=180, what="Ready, DecoderReady and RouterReady")
    advisory = await warning_event(kube, namespace, "llama-pd", "RuntimeCompatibilityAdvisory")
    assert "proceeding because the runtime was named explicitly" in advisory["message"]

    # Step 3: one InferenceReplica per component, the pods, one GPU pod per node
    for component, instances in (("engine", 2), ("decoder", 1), ("router", 1)):
        ir = await kube.get(INFERENCE_REPLICAS, f"llama-pd-{component}", namespace)
        assert ir["spec"]["component"] == component
        assert (ir["spec"]["replicas"], ir["status"]["readyReplicas"]) == (instances, instances)
    pods = await _pods(kube, namespace)
    assert sorted(pods) == ["llama-pd-decoder-0-default-0", "llama-pd-engine-0-default-0",
                            "llama-pd-engine-1-default-0", "llama-pd-router-0-default-0"]
    assert {n: p["metadata"]["labels"]["component"] for n, p in pods.items()} == {
        "llama-pd-decoder-0-default-0": "decoder", "llama-pd-engine-0-default-0": "engine",
        "llama-pd-engine-1-default-0": "engine", "llama-pd-router-0-default-0": "router"}
    gpu_pods = [p for n, p in pods.items() if "router" not in n]
    assert len({p["spec"]["nodeName"] for p in gpu_pods}) == 3  # port 8080 on the host
    assert {p["spec"]["nodeName"] for p in gpu_pods} <= set(model_nodes[:3])
    for pod in gpu_pods:
        assert ome_env(pod)["MODEL_PATH"] == str(weights)
        assert pod["spec"]["hostNetwork"] is True
    modes = {p["metadata"]["labels"]["component"]: p["spec"]["containers"][0]["command"]
             for p in gpu_pods}
    assert modes["engine"][modes["engine"].index("--disaggregation-mode") + 1] == "prefill"
    assert modes["decoder"][modes["decoder"].index("--disaggregation-mode") + 1] == "decode"

    # Step 4: the Service the guide port-forwards to sends requests to the router
    service = await kube.get(SERVICES, "llama-pd", namespace)
    assert service["spec"]["selector"]["component"] == "router"
    assert service["spec"]["ports"][0]["port"] == 8080

    # Step 5: a fourth node gets the model; a third prefill Instance, the rest left alone
    await label_model_ready(kube, model_nodes[3], MODEL_LABEL)
    before = {n: p["metadata"]["uid"] for n, p in pods.items()}
    await kube.patch(INFERENCE_SERVICES, "llama-pd",
                     {"spec": {"engine": {"minReplicas": 3, "maxReplicas": 3}}}, namespace)

    async def three_engines() -> JSON | None:
        ir = await kube.get(INFERENCE_REPLICAS, "llama-pd-engine", namespace)
        return ir if (ir.get("status") or {}).get("readyReplicas") == 3 else None

    await eventually(three_engines, timeout=180, what="three Ready engine Instances")
    after = await _pods(kube, namespace)
    assert after["llama-pd-engine-2-default-0"]["spec"]["nodeName"] == model_nodes[3]
    assert {n: after[n]["metadata"]["uid"] for n in before} == before
    decoder = await kube.get(INFERENCE_REPLICAS, "llama-pd-decoder", namespace)
    assert decoder["spec"]["replicas"] == 1

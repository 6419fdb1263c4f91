"""OME's "Serve a model on OMENative" and "Serve a multi-node model" on the real manager: the
model reaches the pods.

The manifests are OME's, transcribed: the InferenceServices from the guides "Serve a model
on OMENative" and "Serve a multi-node model" (ome-projects/ome-docs,
guides/omenative/serve-a-model-on-omenative.md and serve-a-multi-node-model.md, since v1.3;
the latter's runtime ``srt-qwen3-0-6b-multi-node`` too), the ClusterBaseModel ``qwen3-0-6b``
(ome-projects/ome ``config/models/Qwen/Qwen3-0.6B.yaml``) and the ClusterServingRuntime
``srt-qwen3-0-6b`` (``config/runtimes/srt/Qwen/qwen3-0-6b-rt.yaml``), both at commit
cfa05c6967648a1bd62e2d96221f06aa1dec95fe. Substituted, as nothing else can exist here: the
engine image (the kubelet stand-in runs any image), the model's storage path (a directory
the test makes), the model metadata OME's model agent would record (format, framework,
architecture, size) and the node label the agent sets where the model is ``Ready``. The
runtime's probes and routerConfig are left out (the stand-in ignores probes; the guide
serves the engine only), and its engine gets ``terminationGracePeriodSeconds: 1`` so the
namespace goes quickly.

OME's model CRDs are installed for these tests only and removed afterwards: with them
served, every InferenceService's ``spec.model`` must exist.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from omenative_controller import service_crds
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import INFERENCE_REPLICAS, NODES, PODS
from omenative_controller.service_controller import INFERENCE_SERVICES
from omenative_controller.service_sources import CLUSTER_BASE_MODELS, CLUSTER_SERVING_RUNTIMES

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    REPO,
    apply_crd,
    delete_crd,
    eventually,
    warning_events,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

MODEL_LABEL = "models.ome.io/clusterbasemodel.qwen3-0-6b"
IMAGE = "example.com/sglang:v0.5.5"


@contextlib.asynccontextmanager
async def ome_model_crds(kube: KubeClient) -> AsyncIterator[None]:
    """OME's BaseModel and ClusterBaseModel CRDs while the block runs; afterwards every
    ClusterServingRuntime is deleted and the CRDs with every model (with them served, each
    InferenceService's ``spec.model`` must exist, so they stay for one test)."""
    names = [await apply_crd(kube, REPO / crd.file) for crd in service_crds.MODEL_CRDS]
    try:
        yield
    finally:
        for runtime in (await kube.list(CLUSTER_SERVING_RUNTIMES)).get("items") or ():
            with contextlib.suppress(ApiError):
                await kube.delete(CLUSTER_SERVING_RUNTIMES, runtime["metadata"]["name"])
        for name in names:
            await delete_crd(kube, name)


@pytest.fixture
async def model_crds(kube: KubeClient, service_crds_applied: list[str]) -> AsyncIterator[None]:
    """OME's model CRDs for one test (``ome_model_crds``)."""
    async with ome_model_crds(kube):
        yield


async def node_names(kube: KubeClient) -> list[str]:
    """Every node's name, in order."""
    return sorted(n["metadata"]["name"] for n in (await kube.list(NODES)).get("items") or ())


async def label_model_ready(kube: KubeClient, node: str, label: str = MODEL_LABEL, *,
                            ready: bool = True) -> None:
    """What OME's model agent does once the weights are on ``node`` (``ready=False``: the
    label removed)."""
    await kube.patch(NODES, node, {"metadata": {"labels": {label: "Ready" if ready else None}}})


@pytest.fixture
async def model_node(kube: KubeClient) -> AsyncIterator[str]:
    """One node labelled as OME's model agent labels a node where ``qwen3-0-6b`` is Ready."""
    node = (await node_names(kube))[-1]
    await label_model_ready(kube, node)
    try:
        yield node
    finally:
        await label_model_ready(kube, node, ready=False)


def ome_env(pod: JSON) -> dict[str, Any]:
    """The environment of the pod's ``ome-container`` (name -> value)."""
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "ome-container")
    return {e["name"]: e.get("value") for e in container.get("env") or ()}


def conditions(obj: JSON) -> dict[str, JSON]:
    """The object's status conditions by type."""
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or ()}


def cluster_base_model(path: Path) -> JSON:
    """OME's catalog ClusterBaseModel, with what the model agent records and a local path."""
    return {
        "apiVersion": "ome.io/v1beta1", "kind": "ClusterBaseModel",
        "metadata": {"name": "qwen3-0-6b"},
        "spec": {
            "modelCapabilities": ["TEXT_TO_TEXT"], "vendor": "Qwen",
            "displayName": "Qwen.qwen3-0.6b", "disabled": False, "version": "1.0.0",
            "storage": {"storageUri": "hf://Qwen/Qwen3-0.6B", "path": str(path)},
            # recorded by OME's model agent once the weights are on a node
            "modelFormat": {"name": "safetensors", "version": "1.0.0"},
            "modelFramework": {"name": "transformers", "version": "4.51.0"},
            "modelArchitecture": "Qwen3ForCausalLM",
            "modelParameterSize": "751.63M",
        },
    }


def runtime(name: str = "srt-qwen3-0-6b", *, auto_select: bool = False) -> JSON:
    """OME's catalog ClusterServingRuntime ``srt-qwen3-0-6b`` (engine only, test image)."""
    return {
        "apiVersion": "ome.io/v1beta1", "kind": "ClusterServingRuntime",
        "metadata": {"name": name},
        "spec": {
            "disabled": False,
            "supportedModelFormats": [{
                "modelFramework": {"name": "transformers", "version": "4.51.0"},
                "modelFormat": {"name": "safetensors", "version": "1.0.0"},
                "modelArchitecture": "Qwen3ForCausalLM",
                "autoSelect": auto_select, "priority": 1,
            }],
            "protocolVersions": ["openAI"],
            "modelSizeRange": {"min": "0.5B", "max": "1B"},
            "engineConfig": {
                "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "8080",
                                "prometheus.io/path": "/metrics"},
                "labels": {"logging-forward": "enabled"},
                "terminationGracePeriodSeconds": 1,
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                 "effect": "NoSchedule"}],
                "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
                "runner": {
                    "name": "ome-container", "image": IMAGE,
                    "ports": [{"containerPort": 8080, "name": "http1", "protocol": "TCP"}],
                    "command": ["python3", "-m", "sglang.launch_server", "--host", "0.0.0.0",
                                "--port", "8080", "--enable-metrics", "--log-requests",
                                "--model-path", "$(MODEL_PATH)", "--tp-size", "1",
                                "--mem-frac", "0.9", "--served-model-name", "Qwen/Qwen3-0.6B"],
                    "volumeMounts": [{"mountPath": "/dev/shm", "name": "dshm"}],
                    "resources": {
                        "requests": {"cpu": "10", "memory": "30Gi", "nvidia.com/gpu": "1"},
                        "limits": {"cpu": "10", "memory": "30Gi", "nvidia.com/gpu": "1"},
                    },
                },
            },
        },
    }


def guide_isvc(namespace: str, *, named_runtime: bool = True) -> JSON:
    """The guide's ``qwen3-0-6b-native.yaml`` (in the test's namespace)."""
    spec: JSON = {"deploymentMode": "OMENative", "model": {"name": "qwen3-0-6b"},
                  "engine": {"minReplicas": 1, "maxReplicas": 1}}
    if named_runtime:
        spec["runtime"] = {"name": "srt-qwen3-0-6b"}
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "qwen3-0-6b", "namespace": namespace}, "spec": spec}


async def _engine_pod(kube: KubeClient, namespace: str) -> JSON:
    async def scheduled() -> JSON | None:
        pod = await kube.get(PODS, "qwen3-0-6b-engine-0-default-0", namespace)
        return pod if pod["spec"].get("nodeName") else None

    return await eventually(scheduled, timeout=90, what="the engine pod scheduled")


async def test_serve_a_model_on_omenative_puts_the_model_in_the_pod(
    kube: KubeClient, namespace: str, start_manager: Any, model_crds: None, model_node: str,
    tmp_path: Path,
) -> None:
    weights = tmp_path / "Qwen" / "Qwen3-0.6B"
    weights.mkdir(parents=True)
    await kube.create(CLUSTER_BASE_MODELS, cluster_base_model(weights))
    await kube.create(CLUSTER_SERVING_RUNTIMES, runtime())
    await start_manager()
    await kube.create(INFERENCE_SERVICES, guide_isvc(namespace), namespace)

    pod = await _engine_pod(kube, namespace)
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "ome-container")
    env = {e["name"]: e.get("value") for e in container.get("env") or ()}
    assert env["MODEL_PATH"] == str(weights)
    assert env["PARALLELISM_SIZE"] == "1"  # one GPU, one pod
    assert {"name": "qwen3-0-6b", "mountPath": str(weights), "readOnly": True} \
        in container["volumeMounts"]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["qwen3-0-6b"]["hostPath"]["path"] == str(weights)
    assert pod["spec"]["nodeSelector"][MODEL_LABEL] == "Ready"
    assert pod["spec"]["nodeName"] == model_node  # the only node where the model is Ready
    assert pod["metadata"]["labels"]["base-model-name"] == "qwen3-0-6b"

    async def ready() -> bool:
        isvc = await kube.get(INFERENCE_SERVICES, "qwen3-0-6b", namespace)
        return (conditions(isvc).get("Ready") or {}).get("status") == "True"

    await eventually(ready, timeout=120, what="the InferenceService Ready")


async def test_a_missing_model_blocks_until_it_exists_then_the_runtime_is_auto_selected(
    kube: KubeClient, namespace: str, start_manager: Any, model_crds: None, model_node: str,
    tmp_path: Path,
) -> None:
    await start_manager()
    await kube.create(INFERENCE_SERVICES, guide_isvc(namespace, named_runtime=False), namespace)

    async def reason(expected: str) -> JSON | None:
        isvc = await kube.get(INFERENCE_SERVICES, "qwen3-0-6b", namespace)
        cond = conditions(isvc)
        engine, overall = cond.get("EngineReady") or {}, cond.get("Ready") or {}
        ok = engine.get("reason") == expected and engine.get("status") == "False" \
            and overall.get("status") == "False"
        return isvc if ok else None

    isvc = await eventually(lambda: reason("ModelNotFound"), timeout=60,
                            what="EngineReady=False ModelNotFound")
    assert "qwen3-0-6b" in conditions(isvc)["EngineReady"]["message"]
    events = await eventually(lambda: warning_events(kube, namespace, "qwen3-0-6b"),
                              timeout=30, what="a Warning Event on the InferenceService")
    assert "ModelNotFound" in {e["reason"] for e in events}
    with pytest.raises(ApiError) as gone:  # nothing serves a model that is not there
        await kube.get(INFERENCE_REPLICAS, "qwen3-0-6b-engine", namespace)
    assert gone.value.not_found

    weights = tmp_path / "qwen3"
    weights.mkdir()
    await kube.create(CLUSTER_BASE_MODELS, cluster_base_model(weights))
    isvc = await eventually(lambda: reason("RuntimeNotFound"), timeout=60,
                            what="EngineReady=False RuntimeNotFound (no runtime auto-selects)")
    assert conditions(isvc)["EngineReady"]["message"].startswith(
        "no runtime found to support model safetensors")

    await kube.create(CLUSTER_SERVING_RUNTIMES, runtime("srt-auto", auto_select=True))
    pod = await _engine_pod(kube, namespace)
    assert pod["metadata"]["annotations"]["ome.io/base-model-name"] == "qwen3-0-6b"
    assert {c["name"]: c["image"] for c in pod["spec"]["containers"]}["ome-container"] == IMAGE
    assert ome_env(pod)["MODEL_PATH"] == str(weights)


def _multi_node_runner() -> JSON:
    """``leader.runner`` / ``worker.runner`` of the guide's runtime (test image, no probes)."""
    return {
        "name": "ome-container", "image": IMAGE,
        "command": ["python3", "-m", "sglang.launch_server", "--host", "0.0.0.0", "--port",
                    "8080", "--model-path", "$(MODEL_PATH)", "--served-model-name",
                    "Qwen/Qwen3-0.6B", "--mem-frac", "0.9", "--tp-size", "$(PARALLELISM_SIZE)",
                    "--dist-init-addr", "$(OME_LEADER_ADDRESS):5000", "--nnodes",
                    "$(OME_INSTANCE_POD_COUNT)", "--node-rank", "$(OME_INSTANCE_POD_RANK)"],
        "volumeMounts": [{"mountPath": "/dev/shm", "name": "dshm"}],
        "resources": {"requests": {"cpu": "10", "memory": "30Gi", "nvidia.com/gpu": "1"},
                      "limits": {"cpu": "10", "memory": "30Gi", "nvidia.com/gpu": "1"}},
    }


def multi_node_runtime() -> JSON:
    """The guide's ``srt-qwen3-0-6b-multi-node``."""
    body = runtime("srt-qwen3-0-6b-multi-node")
    leader = _multi_node_runner()
    leader["ports"] = [{"containerPort": 8080, "name": "http1", "protocol": "TCP"}]
    body["spec"]["engineConfig"] = {
        "terminationGracePeriodSeconds": 1,
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
        "leader": {"runner": leader},
        "worker": {"size": 1, "runner": _multi_node_runner()},
    }
    return body


def multi_node_isvc(namespace: str) -> JSON:
    """The guide's ``qwen3-multi-node-isvc.yaml`` (in the test's namespace)."""
    return {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "qwen3-multi-node", "namespace": namespace},
        "spec": {"model": {"name": "qwen3-0-6b"},
                 "runtime": {"name": "srt-qwen3-0-6b-multi-node"},
                 "engine": {"minReplicas": 1, "maxReplicas": 1, "leader": {},
                            "worker": {"size": 1}}},
    }


async def test_serve_a_multi_node_model_gives_both_pods_the_model_and_parallelism(
    kube: KubeClient, namespace: str, start_manager: Any, model_crds: None, model_node: str,
    tmp_path: Path,
) -> None:
    weights = tmp_path / "qwen3"
    weights.mkdir()
    await kube.create(CLUSTER_BASE_MODELS, cluster_base_model(weights))
    await kube.create(CLUSTER_SERVING_RUNTIMES, multi_node_runtime())
    await start_manager()
    await kube.create(INFERENCE_SERVICES, multi_node_isvc(namespace), namespace)

    async def both_scheduled() -> list[JSON] | None:
        pods = [await kube.get(PODS, f"qwen3-multi-node-engine-0-{role}-0", namespace)
                for role in ("leader", "worker")]
        return pods if all(p["spec"].get("nodeName") for p in pods) else None

    for rank, pod in enumerate(await eventually(both_scheduled, timeout=90,
                                                what="the leader and the worker scheduled")):
        (container,) = [c for c in pod["spec"]["containers"] if c["name"] == "ome-container"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["MODEL_PATH"] == str(weights)
        assert env["PARALLELISM_SIZE"] == "2"  # the guide: 1 GPU x 2 pods
        assert env["OME_INSTANCE_POD_COUNT"] == "2"
        assert env["OME_INSTANCE_POD_RANK"] == str(rank)
        assert {"name": "qwen3-0-6b", "mountPath": str(weights), "readOnly": True} \
            in container["volumeMounts"]
        assert pod["spec"]["nodeSelector"][MODEL_LABEL] == "Ready"
        assert pod["spec"]["nodeName"] == model_node

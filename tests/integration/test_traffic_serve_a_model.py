"""OME's guide "Serve a model on OMENative" on real nodes: the request of Step 4 is answered.

The manifests are those of ``test_isvc_models.py`` (OME's catalog ClusterBaseModel
``qwen3-0-6b`` and ClusterServingRuntime ``srt-qwen3-0-6b`` at cfa05c69, the guide's
InferenceService, ome-projects/ome-docs ``guides/omenative/serve-a-model-on-omenative.md``
at 7f641a34), on real kubelets and containerd. Substituted, as nothing else can exist here:
the engine's container is the test model server (``model_engine.server_container``: its
image, command, probe and small requests, as the host has no GPU and no SGLang), the model's
storage path is a directory the test makes on the host (the pod mounts it with OME's
``hostPath`` volume), and the test labels one node as OME's model agent labels a node where
the model is Ready. Checked, as the guide does: the InferenceService becomes Ready, the pod
runs on that node with ``MODEL_PATH`` and the model mounted, and a chat completion sent to the
Service ``qwen3-0-6b`` (what the guide port-forwards to) is answered by the pod.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from omenative_controller import service_crds
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import PODS
from omenative_controller.service_controller import INFERENCE_SERVICES
from omenative_controller.service_sources import CLUSTER_BASE_MODELS, CLUSTER_SERVING_RUNTIMES
from omenative_devcluster.model_engine import server_container

pytest.register_assert_rewrite("manager_fixtures", "test_isvc_models")
from manager_fixtures import apply_crd, eventually  # noqa: E402
from test_isvc_models import (  # noqa: E402
    MODEL_LABEL,
    cluster_base_model,
    guide_isvc,
    label_model_ready,
    node_names,
    ome_env,
    ome_model_crds,
    runtime,
)
from traffic_checks import answering_service  # noqa: E402

pytest_plugins = ["realnode_fixtures", "traffic_fixtures"]
pytestmark = [pytest.mark.integration, pytest.mark.realnodes, pytest.mark.component("coredns"),
              pytest.mark.asyncio(loop_scope="session")]

REPO = Path(__file__).resolve().parents[2]


@contextlib.asynccontextmanager
async def models_ready_on(kube: KubeClient, nodes: list[str], label: str = MODEL_LABEL,
                          ) -> AsyncIterator[None]:
    """OME's CRDs on the real-node cluster and the model agent's ``label`` on ``nodes``
    while the block runs; afterwards the labels, the runtimes and the model CRDs (with the
    models) are removed."""
    for crd in service_crds.SERVICE_CRDS:
        await apply_crd(kube, REPO / crd.file)
    async with ome_model_crds(kube):
        for node in nodes:
            await label_model_ready(kube, node, label)
        try:
            yield
        finally:
            for node in nodes:
                await label_model_ready(kube, node, label, ready=False)


@pytest.fixture
async def real_models(real_kube: KubeClient) -> AsyncIterator[str]:
    """OME's CRDs on the real-node cluster, one node labelled for the model (removed after)."""
    node = (await node_names(real_kube))[-1]
    async with models_ready_on(real_kube, [node]):
        yield node


def real_runtime() -> JSON:
    """OME's runtime with the test model server as its engine's container."""
    body = runtime()
    engine = body["spec"]["engineConfig"]
    engine["runner"] = {**server_container("qwen3-0-6b"),
                        "volumeMounts": engine["runner"]["volumeMounts"]}
    return body


async def test_serve_a_model_on_omenative_answers_on_real_nodes(
    real_kube: KubeClient, real_namespace: str, real_manager: Any, real_models: str,
    tmp_path: Path,
) -> None:
    kube, ns = real_kube, real_namespace
    weights = tmp_path / "Qwen" / "Qwen3-0.6B"
    weights.mkdir(parents=True)
    (weights / "config.json").write_text("{}\n")
    await kube.create(CLUSTER_BASE_MODELS, cluster_base_model(weights))
    await kube.create(CLUSTER_SERVING_RUNTIMES, real_runtime())
    await real_manager()
    await kube.create(INFERENCE_SERVICES, guide_isvc(ns), ns)

    async def ready() -> JSON | None:
        isvc = await kube.get(INFERENCE_SERVICES, "qwen3-0-6b", ns)
        conds = {c["type"]: c["status"] for c in (isvc.get("status") or {}).get("conditions")
                 or ()}
        return isvc if conds.get("Ready") == "True" else None

    await eventually(ready, timeout=180, what="the InferenceService Ready")
    pod = await kube.get(PODS, "qwen3-0-6b-engine-0-default-0", ns)
    assert pod["spec"]["nodeName"] == real_models  # the node where the model is Ready
    assert ome_env(pod)["MODEL_PATH"] == str(weights)
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "ome-container")
    assert {"name": "qwen3-0-6b", "mountPath": str(weights), "readOnly": True} \
        in container["volumeMounts"]

    url = await answering_service(kube, ns, "qwen3-0-6b", pods=1)  # the guide's port-forward
    request = {"model": "Qwen/Qwen3-0.6B", "max_tokens": 100, "messages": [
        {"role": "user", "content": "What is Kubernetes? Answer in one sentence."}]}
    async with aiohttp.ClientSession() as session, session.post(
            f"{url}/v1/chat/completions", json=request,
            timeout=aiohttp.ClientTimeout(total=10)) as resp:
        body = await resp.text()
        assert resp.status == 200, body
    assert "qwen3-0-6b" in body  # the model server answers with its revision

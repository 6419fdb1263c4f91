"""The webhook looks an InferenceService's model and runtime up, as OME v1.3's validator does.

Against the real API server with OME's CRDs (config/ome-crd/): a model that does not exist,
a disabled model and a model no runtime serves are refused at ``kubectl apply`` time with
OME's text; a model that exists is admitted, with OME's warning naming the runtime that will
be auto-selected (ome-projects/ome ``pkg/webhook/admission/isvc/inference_service_validation.go``
at ca73aa4c). The webhook runs in this process and is scoped to the test's namespace.
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
from omenative_controller.service_controller import INFERENCE_SERVICES, SERVING_RUNTIMES
from omenative_controller.service_sources import BASE_MODELS
from omenative_controller.webhook import kube_runtime_lookup, serve_webhook
from omenative_controller.webhook_sources import kube_sources_lookup

pytest.register_assert_rewrite("manager_fixtures", "test_admission")
from manager_fixtures import REPO, apply_crd, delete_crd  # noqa: E402
from test_admission import (  # noqa: E402
    WEBHOOKS,
    _create_with_warnings,
    _self_signed,
    _webhook_config,
    _webhook_in_force,
    isvc_body,
    rejected,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]


@pytest.fixture
async def model_webhook(
    kube: KubeClient, namespace: str, ir_crd: str, tmp_path: Path
) -> AsyncIterator[None]:
    """OME's CRDs (models included) and the webhook with its model lookups, for one test."""
    for crd in service_crds.SERVICE_CRDS:
        await apply_crd(kube, REPO / crd.file)
    models = [await apply_crd(kube, REPO / crd.file) for crd in service_crds.MODEL_CRDS]
    cert, key = _self_signed(tmp_path)
    server = await serve_webhook("127.0.0.1", 0, str(cert), str(key),
                                 runtime_lookup=kube_runtime_lookup(kube),
                                 sources_lookup=kube_sources_lookup(kube))
    name = f"omenative-models-{namespace}"
    try:
        await kube.create(WEBHOOKS, _webhook_config(name, namespace, server, cert.read_bytes()))
        await _webhook_in_force(kube, namespace)
        yield
    finally:
        with contextlib.suppress(ApiError):
            await kube.delete(WEBHOOKS, name)
        await server.stop()
        for crd_name in models:
            await delete_crd(kube, crd_name)


def base_model(namespace: str, **spec: Any) -> JSON:
    """A BaseModel ``llama`` in ``namespace`` (safetensors, transformers)."""
    return {"apiVersion": "ome.io/v1beta1", "kind": "BaseModel",
            "metadata": {"name": "llama", "namespace": namespace},
            "spec": {"modelFormat": {"name": "safetensors"},
                     "modelFramework": {"name": "transformers"},
                     "storage": {"path": "/models/llama"}, **spec}}


def serving_runtime(namespace: str) -> JSON:
    """A ServingRuntime ``srt-auto`` that auto-selects for safetensors models."""
    return {"apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime",
            "metadata": {"name": "srt-auto", "namespace": namespace},
            "spec": {"supportedModelFormats": [{
                "modelFormat": {"name": "safetensors"},
                "modelFramework": {"name": "transformers"}, "autoSelect": True}],
                "engineConfig": {"runner": {"name": "ome-container",
                                            "image": "example.com/llm:1"}}}}


async def test_the_webhook_refuses_a_model_ome_would_not_find_or_serve(
    kube: KubeClient, namespace: str, model_webhook: None
) -> None:
    body = isvc_body(namespace, "typo", model={"name": "no-such-model"})
    exc = await rejected(kube.create(INFERENCE_SERVICES, body, namespace))
    assert (f"ModelNotFound: referenced model 'no-such-model' not found in namespace "
            f"'{namespace}'") in exc.message, exc.message

    # OME's CRD defaults spec.model.kind to ClusterBaseModel: a BaseModel is named with
    # kind: BaseModel, as OME's guides say
    await kube.create(BASE_MODELS, base_model(namespace), namespace)
    exc = await rejected(kube.create(INFERENCE_SERVICES, isvc_body(namespace, "defaulted"),
                                     namespace))
    assert "ModelNotFound" in exc.message, exc.message
    local = {"name": "llama", "kind": "BaseModel"}
    exc = await rejected(kube.create(INFERENCE_SERVICES, isvc_body(namespace, "none",
                                                                   model=local), namespace))
    assert ("RuntimeNotFound: no supporting runtime found for model llama and engine does not "
            "have complete runner configuration") in exc.message, exc.message

    await kube.create(SERVING_RUNTIMES, serving_runtime(namespace), namespace)
    warnings = await _create_with_warnings(kube, isvc_body(namespace, "chat", model=local),
                                           namespace)
    assert any("Runtime srt-auto will be auto-selected for model llama" in w
               for w in warnings), warnings

    await kube.patch(BASE_MODELS, "llama", {"spec": {"disabled": True}}, namespace)
    exc = await rejected(kube.create(INFERENCE_SERVICES, isvc_body(namespace, "off",
                                                                   model=local), namespace))
    assert "ModelDisabled: model llama is disabled" in exc.message, exc.message

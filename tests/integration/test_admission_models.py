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
from typing import Any, cast

import pytest

from omenative_controller import service_crds
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import Resource
from omenative_controller.service_controller import INFERENCE_SERVICES, SERVING_RUNTIMES
from omenative_controller.service_sources import BASE_MODELS
from omenative_controller.webhook import kube_runtime_lookup, serve_webhook
from omenative_controller.webhook_sources import kube_sources_lookup

pytest.register_assert_rewrite("manager_fixtures", "test_admission")
from manager_fixtures import REPO, apply_crd, delete_crd, eventually  # noqa: E402
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


class CountingKube:
    """The test's client for the webhook's lookups, recording each read (verb, resource)."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.calls: list[tuple[str, str]] = []

    async def get(self, res: Resource, *args: Any, **kw: Any) -> JSON:
        self.calls.append(("get", res.plural))
        return await self.kube.get(res, *args, **kw)

    async def list(self, res: Resource, *args: Any, **kw: Any) -> JSON:
        self.calls.append(("list", res.plural))
        return await self.kube.list(res, *args, **kw)


@pytest.fixture
async def model_webhook(
    kube: KubeClient, namespace: str, ir_crd: str, tmp_path: Path
) -> AsyncIterator[CountingKube]:
    """OME's CRDs (models included) and the webhook with its model lookups, for one test;
    yields the client the lookups read through (its calls counted)."""
    for crd in service_crds.SERVICE_CRDS:
        await apply_crd(kube, REPO / crd.file)
    models = [await apply_crd(kube, REPO / crd.file) for crd in service_crds.MODEL_CRDS]
    cert, key = _self_signed(tmp_path)
    reads = CountingKube(kube)
    client = cast(KubeClient, reads)
    server = await serve_webhook("127.0.0.1", 0, str(cert), str(key),
                                 runtime_lookup=kube_runtime_lookup(client),
                                 sources_lookup=kube_sources_lookup(client))
    name = f"omenative-models-{namespace}"
    try:
        await kube.create(WEBHOOKS, _webhook_config(name, namespace, server, cert.read_bytes()))
        await _webhook_in_force(kube, namespace)
        yield reads
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
    kube: KubeClient, namespace: str, model_webhook: CountingKube
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
    model_webhook.calls.clear()
    warnings = await _create_with_warnings(kube, isvc_body(namespace, "chat", model=local),
                                           namespace)
    assert any("Runtime srt-auto will be auto-selected for model llama" in w
               for w in warnings), warnings
    # one review: the model by name, and the runtimes auto-selection picks from; no model LIST
    auto_reads = list(model_webhook.calls)
    assert auto_reads == [("get", "basemodels"), ("list", "servingruntimes"),
                          ("list", "clusterservingruntimes")], auto_reads

    # a named runtime: its GET (shared with the runtime checks) and the model's; no LIST
    model_webhook.calls.clear()
    named = isvc_body(namespace, "named", model=local,
                      runtime={"name": "srt-auto", "kind": "ServingRuntime"})
    await kube.create(INFERENCE_SERVICES, named, namespace)
    named_reads = list(model_webhook.calls)
    assert named_reads == [("get", "servingruntimes"), ("get", "basemodels")], named_reads
    print(f"webhook reads per review: auto-selected {auto_reads}; named runtime {named_reads}")

    await kube.patch(BASE_MODELS, "llama", {"spec": {"disabled": True}}, namespace)
    exc = await rejected(kube.create(INFERENCE_SERVICES, isvc_body(namespace, "off",
                                                                   model=local), namespace))
    assert "ModelDisabled: model llama is disabled" in exc.message, exc.message


def _no_model(namespace: str, name: str, **spec: Any) -> JSON:
    body = isvc_body(namespace, name, **spec)
    del body["spec"]["model"]
    return body


async def test_the_webhook_checks_the_form_of_a_pinned_revision(
    kube: KubeClient, namespace: str, model_webhook: CountingKube
) -> None:
    """OME's validateRuntimePin: ``spec.runtime.revision`` needs ``autoSync: false`` and the
    name form of the runtime it names (a ClusterServingRuntime's revision named for a
    ServingRuntime is OME's docs' example); the revision's existence is not checked."""
    await kube.create(SERVING_RUNTIMES, serving_runtime(namespace), namespace)
    pinned = {"name": "srt-auto", "kind": "ServingRuntime", "autoSync": False,
              "revision": "cr-srt-auto-590753e8"}
    exc = await rejected(kube.create(INFERENCE_SERVICES, _no_model(
        namespace, "pinned", runtime=pinned), namespace))
    assert (f'InvalidRuntimeRevision: spec.runtime.revision "cr-srt-auto-590753e8" does not '
            f'match the expected naming convention for runtime "srt-auto" (ServingRuntime); '
            f"expected the form r-{namespace}-srt-auto-<8 lowercase hex chars>"
            ) in exc.message, exc.message
    live = {**pinned, "autoSync": True, "revision": f"r-{namespace}-srt-auto-590753e8"}
    exc = await rejected(kube.create(INFERENCE_SERVICES, _no_model(
        namespace, "live", runtime=live), namespace))
    assert "spec.runtime.revision requires spec.runtime.autoSync=false" in exc.message
    good = {**pinned, "revision": f"r-{namespace}-srt-auto-590753e8"}
    await kube.create(INFERENCE_SERVICES, _no_model(namespace, "pinned", runtime=good),
                      namespace)


async def test_the_webhook_refuses_a_model_only_while_model_crds_are_served(
    kube: KubeClient, namespace: str, model_webhook: CountingKube
) -> None:
    """Without OME's model CRDs, ``spec.model`` is not checked: the webhook tells a CRD that
    is not served (a 404 naming no object) from a model that does not exist."""
    for crd in service_crds.MODEL_CRDS:
        await delete_crd(kube, crd.name)
    model = {"name": "no-such-model", "kind": "ClusterBaseModel"}

    async def admitted() -> bool:
        try:
            await kube.create(INFERENCE_SERVICES, isvc_body(namespace, "unchecked",
                                                            model=model), namespace)
        except ApiError as exc:
            assert "ModelNotFound" in exc.message, exc.message  # until discovery drops it
            return False
        return True

    model_webhook.calls.clear()
    await eventually(admitted, timeout=30, interval=0.5, what="spec.model unchecked")
    assert model_webhook.calls[-2:] == [("get", "clusterbasemodels"), ("get", "basemodels")]

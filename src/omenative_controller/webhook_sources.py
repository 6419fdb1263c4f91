"""The webhook's reads for OME's model and runtime checks (``admission_models``).

``kube_sources_lookup`` reads, per InferenceService under review, only what
``model_admission`` decides with (OME's validator reads the same objects through its
client's cache):

* the model ``spec.model`` names: one GET (a BaseModel in the ISVC's namespace, or a
  ClusterBaseModel; both in that order when ``kind`` is unset, the second only when there is
  no BaseModel). A 404 that names no object means the kind's CRD is not served; both kinds
  unserved means the model CRDs are not served and ``spec.model`` is not checked;
* the runtime ``spec.runtime`` names: the one the webhook's runtime lookup already has
  (no read), else one GET; a runtime that inherits (``ome.io/inherit-from``) needs its
  chain: then both runtime scopes are LISTed;
* no runtime named, a model found and an engine without a complete runner: OME's
  auto-selection picks from every runtime, so both scopes are LISTed;
* nothing when the ISVC names neither (or has no engine and no model).

Before, every review LISTed the four collections (ServingRuntimes of the namespace,
ClusterServingRuntimes, BaseModels, ClusterBaseModels). A failure other than a 404 returns
None: the checks are skipped (best effort, like the webhook's other lookups), never a wrong
refusal.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Final

import structlog

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import Resource
from omenative_controller.service_policies import AUTOSCALER_POLICIES
from omenative_controller.service_sources import (
    BASE_MODELS,
    CLUSTER_BASE_MODELS,
    CLUSTER_SERVING_RUNTIMES,
    SERVING_RUNTIMES,
)
from omenative_core.codec import CodecError
from omenative_core.service import (
    BaseModel,
    InferenceService,
    ServingRuntime,
    basemodel_from_json,
    decode_runtime,
)
from omenative_core.service.admission_models import AdmissionSources, has_full_runner
from omenative_core.service.inheritance import ANNOTATION_INHERIT_FROM
from omenative_core.service.models import model_ref
from omenative_core.service.policy_resolve import policy_ref

__all__ = ["SourcesLookup", "kube_sources_lookup"]

log = structlog.get_logger("omenative.webhook")

SourcesLookup = Callable[[InferenceService, ServingRuntime | None],
                         Awaitable[AdmissionSources | None]]
"""The runtimes and models an InferenceService's admission needs, given the runtime it names
when the webhook has read it already; None when they could not be read."""

_MODEL_RESOURCES: Final = {"BaseModel": BASE_MODELS, "ClusterBaseModel": CLUSTER_BASE_MODELS}


async def _items(client: KubeClient, res: Resource, namespace: str | None) -> list[JSON]:
    """Every object of ``res`` ([] when the resource is not served)."""
    try:
        out: list[JSON] = []
        token: str | None = None
        while True:
            page = await client.list(res, namespace, limit=500, continue_token=token)
            out += [i for i in page.get("items") or [] if isinstance(i, dict)]
            token = (page.get("metadata") or {}).get("continue") or None
            if token is None:
                return out
    except ApiError as exc:
        if exc.status == 404:
            return []
        raise


async def _get(client: KubeClient, res: Resource, name: str,
               namespace: str | None) -> tuple[bool, JSON | None]:
    """(served, the object or None). A 404 naming the object: served, absent; a 404 naming
    nothing: the resource itself is not served."""
    try:
        return True, await client.get(res, name, namespace)
    except ApiError as exc:
        if exc.status != 404:
            raise
        details = exc.body.get("details") if isinstance(exc.body, Mapping) else None
        return isinstance(details, Mapping) and details.get("name") == name, None


def _runtime(obj: JSON | None, kind: str) -> ServingRuntime | None:
    if obj is None:
        return None
    try:
        return decode_runtime({**obj, "kind": kind})  # LIST items carry no kind
    except CodecError:
        return None  # a runtime the controller cannot read either: as if absent


async def _all_runtimes(client: KubeClient, namespace: str) -> list[ServingRuntime]:
    found = [_runtime(o, "ServingRuntime")
             for o in await _items(client, SERVING_RUNTIMES, namespace)]
    found += [_runtime(o, "ClusterServingRuntime")
              for o in await _items(client, CLUSTER_SERVING_RUNTIMES, None)]
    return [rt for rt in found if rt is not None]


async def _models(client: KubeClient, isvc: InferenceService) -> tuple[BaseModel, ...] | None:
    """The model ``spec.model`` names (module docstring); None: neither model CRD served."""
    ref = model_ref(isvc)
    if ref is None:
        return None
    kinds = [ref.kind] if ref.kind else ["BaseModel", "ClusterBaseModel"]
    served = False
    for kind in kinds:
        here, obj = await _get(client, _MODEL_RESOURCES[kind], ref.name,
                               isvc.namespace if kind == "BaseModel" else None)
        served = served or here
        if obj is None:
            continue
        try:
            return (basemodel_from_json({**obj, "kind": kind}),)
        except CodecError:
            continue  # a model the controller cannot read either: as if absent
    if not served and ref.kind:  # is the other kind served? (then the model is missing)
        other = "ClusterBaseModel" if ref.kind == "BaseModel" else "BaseModel"
        served, _ = await _get(client, _MODEL_RESOURCES[other], ref.name,
                               isvc.namespace if other == "BaseModel" else None)
    return () if served else None


async def _named_runtime(client: KubeClient, isvc: InferenceService,
                         known: ServingRuntime | None) -> list[ServingRuntime]:
    """The runtime ``spec.runtime`` names ([] when absent), with its chain when it inherits."""
    ref = isvc.runtime_ref
    assert ref is not None
    runtime = known
    if runtime is None:
        if ref.kind == "ServingRuntime":
            _, obj = await _get(client, SERVING_RUNTIMES, ref.name, isvc.namespace)
        else:
            _, obj = await _get(client, CLUSTER_SERVING_RUNTIMES, ref.name, None)
        runtime = _runtime(obj, ref.kind)
    if runtime is None:
        return []
    meta = runtime.raw.get("metadata")
    notes = meta.get("annotations") if isinstance(meta, Mapping) else None
    if isinstance(notes, Mapping) and notes.get(ANNOTATION_INHERIT_FROM):
        return await _all_runtimes(client, isvc.namespace)
    return [runtime]


async def _sources(client: KubeClient, isvc: InferenceService,
                   known: ServingRuntime | None) -> AdmissionSources:
    models = await _models(client, isvc)
    engine = isvc.component("engine")
    runtimes: list[ServingRuntime] = []
    if engine is not None and isvc.runtime_ref is not None:
        runtimes = await _named_runtime(client, isvc, known)
    elif engine is not None and models and not has_full_runner(engine.raw):
        runtimes = await _all_runtimes(client, isvc.namespace)  # auto-selection
    return AdmissionSources(runtimes=tuple(runtimes), models=models,
                            policy_feature=await _policy_feature(client, isvc))


async def _policy_feature(client: KubeClient, isvc: InferenceService) -> bool | None:
    """Whether OME's AutoscalerPolicy CRD is served (one LIST of at most one policy), asked
    only when a component names a policy; None otherwise or when it cannot be told."""
    if not any(policy_ref(isvc, c) for c in isvc.declared_components):
        return None
    try:
        await client.list(AUTOSCALER_POLICIES, isvc.namespace, limit=1)
    except ApiError as exc:
        return False if exc.status == 404 else None
    return True


def kube_sources_lookup(client: KubeClient) -> SourcesLookup:
    """A ``SourcesLookup`` that reads what the review needs (module docstring)."""

    async def lookup(isvc: InferenceService,
                     known: ServingRuntime | None = None) -> AdmissionSources | None:
        try:
            return await _sources(client, isvc, known)
        except ApiError as exc:
            log.info("webhook.sources_unavailable", isvc=isvc.name, error=str(exc))
            return None

    return lookup

"""The webhook's reads for OME's model and runtime checks (``admission_models``).

``kube_sources_lookup`` lists, per InferenceService under review, the ServingRuntimes of its
namespace, the ClusterServingRuntimes, the BaseModels of its namespace and the
ClusterBaseModels: four LISTs, what OME's validator reads through its client's cache. A model
kind whose CRD is not served (404 on the LIST) counts as absent; both absent means the model
CRDs are not served and ``spec.model`` is not checked. Any other failure returns None: the
checks are skipped (best effort, like the webhook's other lookups), never a wrong refusal.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

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
from omenative_core.service.admission_models import AdmissionSources
from omenative_core.service.policy_resolve import policy_ref

__all__ = ["SourcesLookup", "kube_sources_lookup"]

log = structlog.get_logger("omenative.webhook")

SourcesLookup = Callable[[InferenceService], Awaitable[AdmissionSources | None]]
"""The runtimes and models an InferenceService may use; None when they could not be read."""


async def _items(client: KubeClient, res: Resource, namespace: str | None) -> list[JSON] | None:
    """Every object of ``res`` (None: the resource is not served)."""
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
            return None
        raise


def _models(raw: list[JSON], kind: str) -> list[BaseModel]:
    out: list[BaseModel] = []
    for obj in raw:
        try:
            out.append(basemodel_from_json({**obj, "kind": kind}))
        except CodecError:
            continue  # a model the controller cannot read either: as if absent
    return out


def _runtimes(raw: list[JSON] | None, kind: str) -> list[ServingRuntime]:
    out: list[ServingRuntime] = []
    for obj in raw or []:
        try:
            out.append(decode_runtime({**obj, "kind": kind}))  # LIST items carry no kind
        except CodecError:
            continue
    return out


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
    """A ``SourcesLookup`` that LISTs the runtimes and models (module docstring)."""

    async def lookup(isvc: InferenceService) -> AdmissionSources | None:
        try:
            runtimes = [
                *_runtimes(await _items(client, SERVING_RUNTIMES, isvc.namespace),
                           "ServingRuntime"),
                *_runtimes(await _items(client, CLUSTER_SERVING_RUNTIMES, None),
                           "ClusterServingRuntime"),
            ]
            base = await _items(client, BASE_MODELS, isvc.namespace)
            cluster = await _items(client, CLUSTER_BASE_MODELS, None)
        except ApiError as exc:
            log.info("webhook.sources_unavailable", isvc=isvc.name, error=str(exc))
            return None
        models = None if base is None and cluster is None else (
            *_models(base or [], "BaseModel"), *_models(cluster or [], "ClusterBaseModel"))
        return AdmissionSources(runtimes=tuple(runtimes), models=models,
                                policy_feature=await _policy_feature(client, isvc))

    return lookup

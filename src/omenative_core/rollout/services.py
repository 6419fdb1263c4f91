"""Per-revision Services and peer endpoints of rollout groups, as pure functions.

Each live revision of every OMENative component (as in OME: not only rollout-group members)
gets a Service ``{isvc}-{component}-rev-{hash}`` (and its ``-headless`` twin) selecting only
that revision's pods: drains, canary analysis and peer pairing address it
(``component_revision_services``). A pod finds its peers through ``OME_<PEER>_ENDPOINT``
(the peer's main Service) and ``OME_<PEER>_REVISION_ENDPOINT`` (the peer revision it pairs
with: a canary decoder talks to the canary engine, a stable decoder to the stable engine).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from omenative_core.labels import (
    LABEL_COMPONENT,
    LABEL_ISVC,
    LABEL_MANAGED_BY,
    LABEL_REVISION_HASH,
    MANAGED_BY,
)
from omenative_core.model.spec import InferenceReplica
from omenative_core.model.status import InferenceReplicaStatus
from omenative_core.revisions import hash_of

__all__ = [
    "PEERS",
    "component_endpoint",
    "component_revision_services",
    "live_revision_hashes",
    "paired_peer_revisions",
    "peer_env",
    "render_revision_service",
    "revision_endpoint",
    "revision_headless_service_name",
    "revision_service_name",
    "revision_service_selector",
    "traffic_revision_name",
]

PEERS: Mapping[str, tuple[str, ...]] = {
    "engine": ("decoder",),
    "decoder": ("engine",),
    "router": ("engine", "decoder"),
}
"""The components each component talks to."""


def revision_service_name(isvc: str, component: str, hash: str) -> str:
    """``{isvc}-{component}-rev-{hash}``."""
    return f"{isvc}-{component}-rev-{hash}"


def revision_headless_service_name(isvc: str, component: str, hash: str) -> str:
    """``{isvc}-{component}-rev-{hash}-headless``."""
    return f"{revision_service_name(isvc, component, hash)}-headless"


def traffic_revision_name(revision: str) -> str:
    """The traffic ``revisionName`` of a ControllerRevision ``{isvc}-{component}-{hash}``:
    ``{isvc}-{component}-rev-{hash}`` (a name without a hash is returned unchanged)."""
    head, sep, tail = revision.rpartition("-")
    if not sep or not head or not hash_of(revision):
        return revision
    return f"{head}-rev-{tail}"


def component_endpoint(isvc: str, component: str, namespace: str) -> str:
    """The main Service's DNS name ``{isvc}-{component}.{ns}.svc.cluster.local``."""
    return f"{isvc}-{component}.{namespace}.svc.cluster.local"


def revision_endpoint(isvc: str, component: str, hash: str, namespace: str) -> str:
    """A revision Service's DNS name ``{isvc}-{component}-rev-{hash}.{ns}.svc.cluster.local``."""
    return f"{revision_service_name(isvc, component, hash)}.{namespace}.svc.cluster.local"


def revision_service_selector(isvc: str, component: str, hash: str) -> dict[str, str]:
    """Labels a revision Service selects on: the component's pods of that revision."""
    return {
        LABEL_ISVC: isvc,
        LABEL_COMPONENT: component,
        LABEL_REVISION_HASH: hash,
    }


def render_revision_service(
    isvc: str,
    component: str,
    hash: str,
    namespace: str,
    *,
    ports: list[dict[str, Any]] | None = None,
    headless: bool = False,
    owner: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A per-revision Service (``headless`` also publishes not-ready pods, for DNS)."""
    name = (
        revision_headless_service_name(isvc, component, hash)
        if headless
        else revision_service_name(isvc, component, hash)
    )
    spec: dict[str, Any] = {
        "selector": revision_service_selector(isvc, component, hash),
        "ports": list(ports) if ports else [{"name": "http", "port": 8080, "targetPort": 8080}],
    }
    if headless:
        spec["clusterIP"] = "None"
        spec["publishNotReadyAddresses"] = True
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {
            LABEL_ISVC: isvc,
            LABEL_COMPONENT: component,
            LABEL_MANAGED_BY: MANAGED_BY,
            LABEL_REVISION_HASH: hash,
        },
    }
    if owner is not None:
        meta["ownerReferences"] = [dict(owner)]
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}


def paired_peer_revisions(
    component: str,
    own_revision: str,
    stable: Mapping[str, str],
    canary: Mapping[str, str],
) -> dict[str, str]:
    """The revision of each peer that a pod of ``own_revision`` pairs with.

    A pod on its component's canary pairs with each peer's canary (when the peer has one
    in the same run), otherwise with the peer's stable revision.
    """
    on_canary = canary.get(component) == own_revision and own_revision != stable.get(component)
    out: dict[str, str] = {}
    for peer in PEERS.get(component, ()):
        rev = canary.get(peer) if on_canary and canary.get(peer) else stable.get(peer)
        if rev:
            out[peer] = rev
    return out


def peer_env(
    isvc: str,
    component: str,
    namespace: str,
    peer_revisions: Mapping[str, str],
) -> dict[str, str]:
    """``OME_<PEER>_ENDPOINT`` and ``OME_<PEER>_REVISION_ENDPOINT`` for a pod.

    ``peer_revisions`` maps each peer to the revision this pod pairs with (see
    ``paired_peer_revisions``); a peer without one gets only the plain endpoint.
    """
    env: dict[str, str] = {}
    for peer in PEERS.get(component, ()):
        key = peer.upper()
        env[f"OME_{key}_ENDPOINT"] = component_endpoint(isvc, peer, namespace)
        rev = peer_revisions.get(peer)
        if rev:
            env[f"OME_{key}_REVISION_ENDPOINT"] = revision_endpoint(
                isvc, peer, hash_of(rev) or rev, namespace
            )
    return env


def live_revision_hashes(replica: InferenceReplica | None, rendered_hash: str) -> set[str]:
    """The revision hashes of a component that need Services: the one just rendered, the
    replica's current and update revisions, and every Instance's running and target one."""
    names: set[str] = set()
    status = replica.status if replica is not None else None
    if isinstance(status, InferenceReplicaStatus):
        names |= {status.current_revision, status.update_revision}
        for row in status.instances:
            names |= {row.running_revision, row.target_revision}
    hashes = {hash_of(n) for n in names if n}
    if rendered_hash:
        hashes.add(rendered_hash)
    return {h for h in hashes if h}


def component_revision_services(
    isvc: str,
    namespace: str,
    component: str,
    hashes: Iterable[str],
    *,
    main_service: Mapping[str, Any] | None,
    owner: Mapping[str, Any] | None,
) -> dict[str, dict[str, Any]]:
    """By name, the traffic and headless Service of each revision in ``hashes``: the
    traffic one selects what the component's main Service selects, of that revision."""
    spec = (main_service or {}).get("spec") or {}
    ports = list(spec.get("ports") or []) or None
    out: dict[str, dict[str, Any]] = {}
    for h in sorted(set(hashes)):
        for headless in (False, True):
            svc = render_revision_service(isvc, component, h, namespace, ports=ports,
                                          headless=headless, owner=owner)
            if not headless and main_service is not None:
                svc["spec"]["selector"] = {**(spec.get("selector") or {}),
                                           LABEL_REVISION_HASH: h}
            out[svc["metadata"]["name"]] = svc
    return out

"""The advisor's view built from Kubernetes JSON: nodes, pods and InferenceReplicas.

The shell lists (or watches) these and calls ``cluster_view_from_json``; everything it
decides from them is here, pure, so ``kubectl ome advise``, the manager and the tests read
a cluster the same way. ``now`` is an input (it dates the audit window).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from omenative_core.advisor.model import (
    ClusterView,
    GpuNode,
    GpuPod,
    InstanceKey,
    PendingGang,
    ReplicaView,
)
from omenative_core.codec import CodecError
from omenative_core.gpus import GPU_RESOURCE, gpu_quantity
from omenative_core.labels import LABEL_INSTANCE_INDEX, LABEL_REPLICA
from omenative_core.model.config import AuditConfig
from omenative_core.policy import desired_instances
from omenative_core.status.wire import replica_from_json

__all__ = ["GPU_RESOURCE", "cluster_view_from_json", "gpu_quantity"]


_ACTIVE_MIGRATIONS = ("Accepted", "SurgePending", "SurgeReady", "Draining")
_HARD_TAINTS = ("NoSchedule", "NoExecute")

JSON = Mapping[str, Any]


def _node(obj: JSON) -> GpuNode:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    true = frozenset(
        str(c.get("type")) for c in status.get("conditions") or () if c.get("status") == "True"
    )
    cordoned = bool(spec.get("unschedulable"))
    tainted = any(t.get("effect") in _HARD_TAINTS for t in spec.get("taints") or ()
                  if not str(t.get("key", "")).startswith("node.kubernetes.io/unschedulable"))
    return GpuNode(
        name=str(meta.get("name")),
        gpus=gpu_quantity((status.get("allocatable") or {}).get(GPU_RESOURCE)),
        labels=dict(meta.get("labels") or {}),
        ready="Ready" in true,
        schedulable=not cordoned and not tainted,
        cordoned=cordoned,
        conditions=true,
    )


def _pod_gpus(spec: JSON) -> int:
    total = 0
    for c in spec.get("containers") or ():
        res = c.get("resources") or {}
        total += gpu_quantity((res.get("requests") or {}).get(GPU_RESOURCE)
                              or (res.get("limits") or {}).get(GPU_RESOURCE))
    return total


def _owner(obj: JSON) -> InstanceKey | None:
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    index = str(labels.get(LABEL_INSTANCE_INDEX, ""))
    if LABEL_REPLICA not in labels or not index.isdigit():
        return None
    return InstanceKey(str(meta.get("namespace", "")), str(labels[LABEL_REPLICA]), int(index))


def _unschedulable(obj: JSON) -> bool:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return bool(c.get("reason") == "Unschedulable")
    return False


def _replica(obj: JSON, now: datetime, audit: AuditConfig | None) -> ReplicaView:
    ir = replica_from_json(obj)
    spec, status = ir.spec, ir.status
    rows = status.instances if status else ()
    migrations = status.migrations if status else ()
    window_start = now - (audit or AuditConfig()).window
    policy = spec.lifecycle.migration_policy if spec.lifecycle else None
    return ReplicaView(
        namespace=ir.metadata.namespace,
        name=ir.metadata.name,
        desired=desired_instances(spec.replicas),
        ready=frozenset(r.index for r in rows if r.phase == "Ready" and r.operation is None),
        migration_never=policy is not None and policy.mode == "Never",
        topology_key=spec.topology_key,
        migrations_in_flight=sum(1 for m in migrations if m.phase in _ACTIVE_MIGRATIONS),
        migrations_in_window=sum(1 for m in migrations
                                 if m.allocated_at is not None and m.allocated_at > window_start),
    )


def cluster_view_from_json(
    nodes: Iterable[JSON],
    pods: Iterable[JSON],
    replicas: Iterable[JSON],
    *,
    now: datetime,
    audit: AuditConfig | None,
    namespace: str | None = None,
) -> tuple[ClusterView, tuple[str, ...]]:
    """The advisor's view, and a note for each InferenceReplica that could not be read.

    Bound pods that are not finished hold their GPUs (a deleting pod still does until it is
    gone); an omenative pod that the scheduler reports ``Unschedulable`` makes its
    Instance a pending gang of the GPUs of its unbound pods. ``audit`` is the cluster's
    ``lifecycle.audit`` (it dates the migration window). With ``namespace``, only the
    InferenceReplicas and pending gangs of that namespace are advised on, while the pods of
    every namespace still hold their GPUs (pass them all).
    """
    notes: list[str] = []
    views = []
    for obj in replicas:
        try:
            views.append(_replica(obj, now, audit))
        except CodecError as exc:
            meta = obj.get("metadata") or {}
            notes.append(f"InferenceReplica {meta.get('namespace')}/{meta.get('name')} "
                         f"skipped: {exc}")
    topology = {(r.namespace, r.name): r.topology_key for r in views}
    bound: list[GpuPod] = []
    unbound: dict[InstanceKey, list[int]] = defaultdict(list)
    stuck: set[InstanceKey] = set()
    for obj in pods:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        if status.get("phase") in ("Succeeded", "Failed"):
            continue
        gpus, owner = _pod_gpus(spec), _owner(obj)
        if owner is not None and namespace is not None and owner.namespace != namespace:
            owner = None
        deleting = bool((obj.get("metadata") or {}).get("deletionTimestamp"))
        if spec.get("nodeName"):
            bound.append(GpuPod(name=str((obj.get("metadata") or {}).get("name")),
                                node=str(spec["nodeName"]), gpus=gpus,
                                owner=None if deleting else owner))
        elif owner is not None and not deleting and gpus > 0:
            unbound[owner].append(gpus)
            if _unschedulable(obj):
                stuck.add(owner)
    pending = tuple(
        PendingGang(namespace=key.namespace, name=f"{key.replica}[{key.index}]",
                    pod_gpus=tuple(sorted(unbound[key], reverse=True)),
                    topology_key=topology.get((key.namespace, key.replica)))
        for key in sorted(stuck)
    )
    view = ClusterView(
        nodes=tuple(sorted((_node(n) for n in nodes), key=lambda n: n.name)),
        pods=tuple(sorted(bound, key=lambda p: p.name)),
        replicas=tuple(sorted(views, key=lambda r: (r.namespace, r.name))),
        pending=pending,
    )
    return view, tuple(notes)

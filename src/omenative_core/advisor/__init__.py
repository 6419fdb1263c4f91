"""The GPU caretaker: which Instance moves free room for pending gangs or empty bad nodes.

A pure advisor in the core's style: ``advise(ClusterView, AdvisorConfig) -> Advice``. It
reads nodes (GPUs, topology labels, Ready, cordons, bad-GPU conditions), bound pods and
their Instances, the InferenceReplicas' migration policy, caps and in-flight migrations,
and the gangs that cannot be placed; it answers with ranked, replacement-first moves
(``Recommendation``), the fragmentation of each topology domain, and notes saying why
nothing more is recommended. Carrying a move out is a migration request, written by the
shell (``kubectl ome advise --apply``); the advisor itself never acts.
"""

from omenative_core.advisor.model import (
    REASONS,
    Advice,
    AdvisorConfig,
    Benefit,
    ClusterView,
    Cost,
    DomainReport,
    GpuNode,
    GpuPod,
    InstanceKey,
    PendingGang,
    Recommendation,
    ReplicaView,
)
from omenative_core.advisor.observe import GPU_RESOURCE, cluster_view_from_json, gpu_quantity
from omenative_core.advisor.search import advise

__all__ = [
    "GPU_RESOURCE",
    "REASONS",
    "Advice",
    "AdvisorConfig",
    "Benefit",
    "ClusterView",
    "Cost",
    "DomainReport",
    "GpuNode",
    "GpuPod",
    "InstanceKey",
    "PendingGang",
    "Recommendation",
    "ReplicaView",
    "advise",
    "cluster_view_from_json",
    "gpu_quantity",
]

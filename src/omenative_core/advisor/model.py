"""What the GPU caretaker reads and what it answers: slim, GPU-centred views and advice.

The shell (``kubectl ome advise``, the manager's ``--advisor``) and the simulator build these
from what they observe; the advisor never reads a cluster itself.
"""

from __future__ import annotations

from collections.abc import Mapping

from attrs import field, frozen

from omenative_core.model.config import AuditConfig

__all__ = [
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
]

REASONS = ("UnhealthyNode", "Cordoned", "Fragmentation")
"""Why an Instance should move, in the order the advisor ranks them."""


@frozen(order=True)
class InstanceKey:
    """One Instance: its InferenceReplica (namespace, name) and index."""

    namespace: str
    replica: str
    index: int

    def __str__(self) -> str:
        return f"{self.namespace}/{self.replica}[{self.index}]"


@frozen(kw_only=True)
class GpuNode:
    """A node as the advisor sees it: GPUs it can hold, where it sits, whether it is sound.

    ``schedulable`` is False for a cordoned node or one with a NoSchedule/NoExecute taint;
    ``conditions`` holds the condition types whose status is True (``Ready`` among them
    when the node heartbeats).
    """

    name: str
    gpus: int
    labels: Mapping[str, str] = field(factory=dict)
    ready: bool = True
    schedulable: bool = True
    cordoned: bool = False
    conditions: frozenset[str] = frozenset()


@frozen(kw_only=True)
class GpuPod:
    """A bound, live pod's GPU request; ``owner`` is its Instance when omenative runs it."""

    name: str
    node: str
    gpus: int
    owner: InstanceKey | None = None


@frozen(kw_only=True)
class ReplicaView:
    """An InferenceReplica's facts that decide whether its Instances may move.

    ``ready`` holds the indexes of its Ready (serving) Instances; ``migrations_in_flight``
    and ``migrations_in_window`` count its migrations against the cluster's audit caps.
    """

    namespace: str
    name: str
    desired: int
    ready: frozenset[int] = frozenset()
    migration_never: bool = False
    topology_key: str | None = None
    migrations_in_flight: int = 0
    migrations_in_window: int = 0


@frozen(kw_only=True)
class PendingGang:
    """A gang that cannot be placed: the GPU request of each of its pods.

    ``name`` names it for people (a PodGroup, or ``replica[index]``); ``topology_key``
    asks for all its pods in one domain of that node label.
    """

    namespace: str
    name: str
    pod_gpus: tuple[int, ...]
    topology_key: str | None = None


@frozen(kw_only=True)
class ClusterView:
    """Everything the advisor reads, at one moment."""

    nodes: tuple[GpuNode, ...]
    pods: tuple[GpuPod, ...] = ()
    replicas: tuple[ReplicaView, ...] = ()
    pending: tuple[PendingGang, ...] = ()


@frozen(kw_only=True)
class AdvisorConfig:
    """How far the advisor may go.

    ``bad_gpu_conditions``: node condition types that, when True, flag bad GPUs (empty by
    default: clusters name them differently). ``max_moves_per_gang`` bounds the greedy
    search for one pending gang. ``audit`` holds the migration caps of ``lifecycle.audit``
    (None: not configured, and then the manager starts no migration at all).
    """

    bad_gpu_conditions: tuple[str, ...] = ()
    max_moves_per_gang: int = 4
    audit: AuditConfig | None = field(factory=AuditConfig)


@frozen(kw_only=True)
class Benefit:
    """What a set of moves buys: the gang it places, whole nodes and gang size before/after."""

    pending_gang: str | None
    free_whole_nodes_before: int
    free_whole_nodes_after: int
    largest_placeable_gang_before: int
    largest_placeable_gang_after: int


@frozen(kw_only=True)
class Cost:
    """What a set of moves costs: Instances moved and GPUs held twice while they move."""

    instances_moved: int
    surge_gpus: int


@frozen(kw_only=True)
class Recommendation:
    """Move one Instance: why, from where, to where (hints), and what it buys.

    ``step`` orders the moves of one set (``group``): they run one after another, and the
    advisor is asked again after each, since the scheduler may not follow a hint.
    """

    instance: InstanceKey
    reason: str
    group: str
    step: int
    from_nodes: tuple[str, ...]
    target_nodes: tuple[str, ...]
    target_domain: str | None
    gpus: int
    benefit: Benefit
    cost: Cost


@frozen(kw_only=True)
class DomainReport:
    """Free GPUs in one topology domain, and how fragmented they are.

    ``fragmentation`` is ``1 - free GPUs on wholly free nodes / free GPUs`` (0 when nothing
    is free); ``largest_placeable_gang`` is the GPUs of the whole free nodes, the most a gang
    of whole-node pods could get there today.
    """

    key: str | None
    value: str | None
    nodes: int
    free_gpus: int
    free_on_whole_nodes: int
    fragmentation: float
    largest_placeable_gang: int


@frozen(kw_only=True)
class Advice:
    """The advisor's answer: ranked moves, the per-domain picture, and why not more."""

    recommendations: tuple[Recommendation, ...]
    domains: tuple[DomainReport, ...]
    notes: tuple[str, ...]

"""The simulated world's state: the cluster's shape, the clock and event queue, the objects
held, and change tracking (every change bumps ``version``; views are cached until then).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from attrs import field, frozen

from omenative_core.labels import (
    NODE_HOSTNAME_LABEL,
)
from omenative_core.model.config import LifecycleConfig
from omenative_core.model.observed import (
    NodeView,
    PodGroupView,
    PodView,
    RevisionView,
)
from omenative_core.model.spec import JSON, InferenceReplica
from omenative_core.model.status import InferenceReplicaStatus
from omenative_core.model.timefmt import to_second
from omenative_core.status.wire import replica_from_json
from omenative_sim.objects import SimContainer, SimNode, SimPod, SimPodGroup

__all__ = ["EPOCH", "ClusterSpec", "WorldError"]

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
"""The wall-clock time of simulated second 0 (any fixed instant would do)."""


class WorldError(ValueError):
    """A fault or query that names something the world does not have."""


@frozen(kw_only=True)
class ClusterSpec:
    """The simulated cluster: nodes ``node-0..node-{n-1}``, their GPUs and kubelet timing."""

    nodes: int = 1
    gpus_per_node: int = 8
    labels: Mapping[str, str] = field(factory=dict)  # on every node
    node_labels: Mapping[str, Mapping[str, str]] = field(factory=dict)  # node name -> labels
    node_gpus: Mapping[str, int] = field(factory=dict)  # node name -> GPUs (overrides)
    pod_start_seconds: float = 30.0
    pod_ready_seconds: float = 30.0
    gang_scheduling: bool = True
    pod_group_crd: bool = True
    termination_seconds: float = 2.0
    endpoint_delay_seconds: float = 1.0
    image_pull_backoff_seconds: float = 5.0
    node_monitor_grace_seconds: float = 40.0
    eviction_seconds: float = 300.0

    def node_names(self) -> tuple[str, ...]:
        """``node-0`` ... ``node-{n-1}``."""
        return tuple(f"node-{i}" for i in range(self.nodes))


C_START = 1  # (pod uid, container name, container epoch)
C_READY = 2
C_PULL_ERROR = 3
C_BACKOFF = 4
POD_GONE = 5  # (pod uid)
UNROUTE = 6  # (pod uid, route epoch)
NODE_LOST = 7  # (node name, node epoch)
NODE_EVICT = 8


def format_stamp(value: datetime) -> str:
    """``value`` as an RFC 3339 timestamp with second precision."""
    return to_second(value).strftime("%Y-%m-%dT%H:%M:%SZ")


class _WorldState:
    """The world's state, its clock and event queue, change tracking and container starts:
    what every other part of the world reads and writes."""

    def __init__(
        self,
        cluster: ClusterSpec,
        replica: JSON,
        *,
        config: LifecycleConfig | None = None,
        seed: int = 0,
        epoch: datetime = EPOCH,
        status_roundtrip: bool = True,
    ) -> None:
        self.cluster = cluster
        self.config = config if config is not None else LifecycleConfig()
        self.rng = random.Random(seed)
        self.epoch = epoch
        self.now = 0.0
        self.status_roundtrip = status_roundtrip
        self.version = 0  # bumps on every change a snapshot can see
        self.notes: list[tuple[float, str]] = []  # (time, what happened that the API hides)
        self.bad_images: set[str] = set()
        self.audit: dict[str, list[JSON]] = {}
        self.objects: dict[tuple[str, str], JSON] = {}  # (kind, name) -> body
        self.revisions: dict[str, RevisionView] = {}
        self.pods: dict[str, SimPod] = {}
        self._uids: dict[str, SimPod] = {}
        self._pending: dict[str, SimPod] = {}  # uid -> unbound pod, in creation order
        self.pod_groups: dict[str, SimPodGroup] = {}
        self.nodes: dict[str, SimNode] = {}
        for name in cluster.node_names():
            labels = {
                NODE_HOSTNAME_LABEL: name,
                **cluster.labels,
                **cluster.node_labels.get(name, {}),
            }
            capacity = cluster.node_gpus.get(name, cluster.gpus_per_node)
            self.nodes[name] = SimNode(name, capacity, labels)
        self._heap: list[tuple[float, int, int, str, str, int]] = []
        self._seq = 0
        self._ip_seq = 0
        self._sched_dirty = False
        self._pods_cache: tuple[PodView, ...] | None = None
        self._nodes_cache: Mapping[str, NodeView] | None = None
        self._pg_cache: Mapping[str, PodGroupView] | None = None
        self._rev_cache: tuple[RevisionView, ...] | None = None
        self._routed_cache: frozenset[str] | None = None
        self.gpus_in_use = 0
        # the replica: its manifest (metadata managed here) and its status
        manifest = {k: v for k, v in replica.items() if k != "status"}
        meta = dict(manifest.get("metadata") or {})
        meta.setdefault("namespace", "default")
        meta.setdefault("uid", "replica-uid")
        meta["generation"] = int(meta.get("generation") or 1)
        meta["resourceVersion"] = "1"
        meta.setdefault("creationTimestamp", format_stamp(epoch))
        manifest["metadata"] = meta
        self._manifest: dict[str, Any] = manifest
        self._replica_base = replica_from_json(manifest)
        self.status: InferenceReplicaStatus | None = None
        self._status_seen: Any = None  # the status as the shell would read it back
        self._replica_cache: InferenceReplica | None = None

    def time(self, t: float) -> datetime:
        """The wall-clock datetime of simulated second ``t``."""
        return self.epoch + timedelta(seconds=t)

    def _stamp(self, t: float) -> datetime:
        return to_second(self.time(t))

    def _push(self, t: float, kind: int, a: str, b: str = "", c: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, kind, a, b, c))

    def _new_uid(self, kind: str) -> str:
        self._seq += 1
        return f"{kind}-{self._seq:06d}"

    def _changed(self, pod: SimPod | None) -> None:
        self.version += 1
        if pod is not None:
            pod.view_cache = None
            self._pods_cache = None

    def _refresh(self, pod: SimPod) -> None:
        """Recompute Ready and routing after a change to ``pod``; mark it changed."""
        ready = (
            pod.containers_ready
            and not pod.node_lost
            and not pod.failed
            and all(pod.gates.get(g) == "True" for g in pod.readiness_gates)
        )
        pod.ready = ready
        if ready and not pod.terminating:
            if not pod.routed:
                pod.routed = True
                self._routed_cache = None
            if pod.unroute_at is not None:  # back in rotation: cancel the pending removal
                pod.unroute_at = None
                pod.route_epoch += 1
        elif pod.routed and pod.unroute_at is None:
            # endpoints drop it only after the endpoint delay
            pod.unroute_at = self.now + self.cluster.endpoint_delay_seconds
            self._push(pod.unroute_at, UNROUTE, pod.uid, "", pod.route_epoch)
        self._changed(pod)

    def _start_container(self, pod: SimPod, ct: SimContainer) -> None:
        """Schedule a (re)start of ``ct``: pull, then run after the start delay."""
        ct.epoch += 1
        ct.state = "waiting"
        ct.ready = False
        ct.waiting_reason = "ContainerCreating"
        ct.waiting_message = ""
        if ct.image in self.bad_images:
            self._push(
                self.now + min(1.0, self.cluster.pod_start_seconds),
                C_PULL_ERROR,
                pod.uid,
                ct.name,
                ct.epoch,
            )
        else:
            self._push(
                self.now + self.cluster.pod_start_seconds, C_START, pod.uid, ct.name, ct.epoch
            )

    def _pull_failed(self, pod: SimPod, ct: SimContainer) -> None:
        ct.state = "waiting"
        ct.ready = False
        ct.status_image = ct.image
        ct.waiting_reason = "ErrImagePull"
        ct.waiting_message = f'failed to pull image "{ct.image}": not found'
        self._push(
            self.now + self.cluster.image_pull_backoff_seconds,
            C_BACKOFF,
            pod.uid,
            ct.name,
            ct.epoch,
        )
        self._refresh(pod)

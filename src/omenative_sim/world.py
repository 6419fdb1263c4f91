"""A discrete-event model of one namespace of a GPU cluster, for one InferenceReplica.

Theory of operation:

1. Time is a float number of seconds since ``World.epoch``; it only moves forward.
   ``advance(t)`` runs every queued event due at or before ``t``; ``snapshot(t)`` and
   ``apply(plan, t)`` advance first. ``next_event_time()`` says when something will next
   change on its own (a container starts, a pod finishes terminating, ...).
2. ``apply`` performs the core's actions in order, as the shell's executor would: a create
   whose name exists is "AlreadyExists" (success, no change), a delete or gate change
   whose UID precondition fails is a no-op, and the first action the API would refuse
   (a PodGroup without its CRD) stops the plan. After the actions the scheduler runs.
3. The scheduler binds Pending pods to Ready nodes with free ``nvidia.com/gpu``. Pods
   carrying ``scheduling.x-k8s.io/pod-group`` are a gang (all placed or none, only once
   their PodGroup exists and ``minMember`` pods are there) when the cluster runs gang
   scheduling and the PodGroup CRD is installed; otherwise pods are placed one by one.
   Required node affinity, nodeSelector and required pod (anti-)affinity are honoured,
   preferred node affinity scores; among equals it bin-packs, then breaks ties with the
   world's seeded ``random.Random``. Topology spread constraints are not modelled.
4. The kubelet: a bound pod gets an IP; after ``pod_start_seconds`` its containers run
   (phase Running), after ``pod_ready_seconds`` more they are ready (ContainersReady).
   Ready needs ContainersReady and every readiness gate of the pod spec True (the
   ``ome.io/serving`` condition is set by ``SetServingGate``). An image listed by
   ``add_bad_image`` fails to pull (``ErrImagePull``, then ``ImagePullBackOff``).
   ``PatchPodImages`` restarts just the changed containers (start and ready delays again).
5. Deletion: a graceful delete sets ``deletionTimestamp`` (now + the pod's grace period)
   and the pod, with its GPUs, goes ``termination_seconds`` later; a force delete removes
   it at once. Pods on a lost node never finish terminating unless forced.
6. Endpoints: a pod is routed while Ready and not terminating, and for
   ``endpoint_delay_seconds`` after it stops being so.
7. Faults. ``fail_pod``: the main container (``ome-container``, else the first) exits
   with code 1, reason Error, and the pod turns Failed (it keeps its GPUs until deleted).
   ``fail_node``: the node stops heartbeating at once (its kubelet does nothing more); after
   ``node_monitor_grace_seconds`` the node's Ready turns Unknown and its pods' Ready
   condition False (reason NodeNotReady; container statuses stay as last reported, as in
   Kubernetes); ``eviction_seconds`` later the taint manager deletes them gracefully, which
   never completes. ``add_bad_image``: later pulls of that image fail.

Pod views are cached per pod and the snapshot's pod tuple per change, so a step costs in
proportion to what changed, not to the number of pods.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
from attrs import field, frozen

from omenative_core.labels import (
    LABEL_POD_GROUP,
    LABEL_POD_ORDINAL,
    LABEL_RUNNER,
    NODE_HOSTNAME_LABEL,
    SERVING_GATE,
)
from omenative_core.model.config import LifecycleConfig
from omenative_core.model.observed import (
    ContainerView,
    NodeView,
    PodGroupView,
    PodView,
    RevisionView,
    Snapshot,
)
from omenative_core.model.plan import (
    Action,
    CreateObject,
    CreatePod,
    CreatePodGroup,
    CreateRevision,
    DeleteObject,
    DeletePod,
    DeletePodGroup,
    DeleteRevision,
    PatchPodImages,
    Plan,
    RecordAudit,
    RemoveAnnotations,
    SetFinalizer,
    SetServingGate,
    UpdateStatus,
)
from omenative_core.model.spec import JSON, InferenceReplica
from omenative_core.model.status import InferenceReplicaStatus
from omenative_core.model.timefmt import to_second
from omenative_core.status.wire import replica_from_json, status_from_json, status_to_json

__all__ = [
    "EPOCH",
    "GPU_RESOURCE",
    "MAIN_CONTAINER",
    "ApplyResult",
    "ClusterSpec",
    "SimContainer",
    "SimPod",
    "World",
    "WorldError",
    "merge_patch",
    "pod_gpus",
]

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
"""The wall-clock time of simulated second 0 (any fixed instant would do)."""

GPU_RESOURCE = "nvidia.com/gpu"
"""The extended resource the scheduler places pods by."""

MAIN_CONTAINER = "ome-container"
"""The container ``fail_pod`` kills when the pod has one (else the first container)."""

_RUNNER_RANK = {"leader": 0, "default": 1, "worker": 2}
_DEFAULT_GRACE_SECONDS = 30


class WorldError(ValueError):
    """A fault or query that names something the world does not have."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge key by key, ``null`` deletes, the rest replace.

    Returns a new value; neither argument is modified.
    """
    if not isinstance(patch, Mapping):
        return patch
    result: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


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


@frozen(kw_only=True)
class ApplyResult:
    """What ``World.apply`` did: actions applied, how many changed the world, the refusal."""

    applied: int
    changed: int
    error: str | None = None


# ------------------------------------------------------------------------------ state


class SimContainer:
    """One container of a simulated pod (mutable; the world owns it)."""

    __slots__ = (
        "epoch",
        "image",
        "name",
        "ready",
        "restart_count",
        "started_once",
        "state",
        "status_image",
        "term_exit",
        "term_reason",
        "waiting_message",
        "waiting_reason",
    )

    def __init__(self, name: str, image: str) -> None:
        self.name = name
        self.image = image  # spec
        self.status_image = image  # what the kubelet reports
        self.state = "waiting"  # waiting | running | terminated
        self.waiting_reason: str | None = "ContainerCreating"
        self.waiting_message = ""
        self.term_reason: str | None = None
        self.term_exit: int | None = None
        self.ready = False
        self.started_once = False
        self.restart_count = 0
        self.epoch = 0  # bumps on restart or failure: stale timers are ignored

    def view(self) -> ContainerView:
        """The ``ContainerView`` the kubelet would report."""
        return ContainerView(
            name=self.name,
            image=self.status_image,
            ready=self.ready,
            restart_count=self.restart_count,
            running=self.state == "running",
            waiting_reason=self.waiting_reason if self.state == "waiting" else None,
            waiting_message=self.waiting_message if self.state == "waiting" else "",
            terminated_reason=self.term_reason if self.state == "terminated" else None,
            terminated_exit_code=self.term_exit if self.state == "terminated" else None,
        )


class SimPod:
    """A simulated pod: the body it was created from plus its mutable status."""

    __slots__ = (
        "annotations",
        "body",
        "constrained",
        "containers",
        "created_at",
        "deletion_at",
        "deletion_timestamp",
        "failed",
        "gates",
        "gpus",
        "grace_seconds",
        "ip",
        "labels",
        "name",
        "node",
        "node_lost",
        "pod_affinity",
        "readiness_gates",
        "ready",
        "route_epoch",
        "routed",
        "sched_message",
        "sched_reason",
        "scheduling_gates",
        "seq",
        "uid",
        "unroute_at",
        "view_cache",
    )

    def __init__(self, body: JSON, uid: str, seq: int, now: float) -> None:
        meta = body.get("metadata") or {}
        spec = body.get("spec") or {}
        self.body = body
        self.name = str(meta["name"])
        self.uid = uid
        self.seq = seq
        self.created_at = now
        self.labels: dict[str, str] = {
            str(k): str(v) for k, v in (meta.get("labels") or {}).items()
        }
        self.annotations: dict[str, str] = {
            str(k): str(v) for k, v in (meta.get("annotations") or {}).items()
        }
        self.containers = [
            SimContainer(str(c.get("name", f"c{i}")), str(c.get("image") or ""))
            for i, c in enumerate(spec.get("containers") or ())
        ]
        self.gpus = pod_gpus(body)
        self.readiness_gates = tuple(
            str(g.get("conditionType"))
            for g in spec.get("readinessGates") or ()
            if isinstance(g, Mapping) and g.get("conditionType")
        )
        self.scheduling_gates = tuple(
            str(g.get("name", ""))
            for g in spec.get("schedulingGates") or ()
            if isinstance(g, Mapping)
        )
        self.pod_affinity: tuple[tuple[str, Mapping[str, Any]], ...] = tuple(
            (kind, term)
            for kind in ("podAffinity", "podAntiAffinity")
            for term in _pod_affinity_terms(body, kind)
        )
        self.constrained = bool(
            spec.get("nodeName") or spec.get("nodeSelector") or spec.get("affinity")
        )
        grace = spec.get("terminationGracePeriodSeconds")
        self.grace_seconds = (
            grace
            if isinstance(grace, int) and not isinstance(grace, bool)
            else _DEFAULT_GRACE_SECONDS
        )
        self.node: str | None = None
        self.ip: str | None = None
        self.failed = False
        self.node_lost = False  # the node's controller marked it not ready
        self.gates: dict[str, str] = {}  # pod conditions set through the API (readiness gates)
        self.sched_reason: str | None = None
        self.sched_message = ""
        self.deletion_at: float | None = None
        self.deletion_timestamp: datetime | None = None
        self.ready = False
        self.routed = False
        self.route_epoch = 0
        self.unroute_at: float | None = None
        self.view_cache: PodView | None = None

    @property
    def terminating(self) -> bool:
        """Has a deletionTimestamp."""
        return self.deletion_at is not None

    @property
    def containers_ready(self) -> bool:
        """Every container reports ready."""
        return bool(self.containers) and all(c.ready for c in self.containers) and not self.failed

    @property
    def phase(self) -> str:
        """Pending, Running or Failed."""
        if self.failed:
            return "Failed"
        if (
            self.node is not None
            and self.containers
            and all(c.started_once for c in self.containers)
        ):
            return "Running"
        return "Pending"

    def main_container(self) -> SimContainer | None:
        """``ome-container`` if present, else the first container."""
        for c in self.containers:
            if c.name == MAIN_CONTAINER:
                return c
        return self.containers[0] if self.containers else None

    def rank(self) -> tuple[int, int, str]:
        """Gang placement order: leader, default, workers by ordinal."""
        runner = self.labels.get(LABEL_RUNNER, "")
        try:
            ordinal = int(self.labels.get(LABEL_POD_ORDINAL, "0"))
        except ValueError:
            ordinal = 0
        return (_RUNNER_RANK.get(runner, 3), ordinal, self.name)


def pod_gpus(body: JSON) -> int:
    """GPUs a pod asks for: ``nvidia.com/gpu`` requests (else limits), summed over containers."""
    total = 0
    for c in (body.get("spec") or {}).get("containers") or ():
        resources = c.get("resources") or {}
        value = (resources.get("requests") or {}).get(GPU_RESOURCE)
        if value is None:
            value = (resources.get("limits") or {}).get(GPU_RESOURCE)
        if value is None:
            continue
        try:
            total += int(str(value))
        except ValueError:
            total += 0
    return total


class _Node:
    __slots__ = ("capacity", "dead", "epoch", "labels", "name", "not_ready_since", "ready", "used")

    def __init__(self, name: str, capacity: int, labels: dict[str, str]) -> None:
        self.name = name
        self.capacity = capacity
        self.labels = labels
        self.used = 0
        self.ready: bool | None = True
        self.not_ready_since: datetime | None = None
        self.dead = False  # the kubelet stopped (reported as Unknown after the grace period)
        self.epoch = 0

    def view(self) -> NodeView:
        return NodeView(
            name=self.name,
            ready=self.ready,
            labels=dict(self.labels),
            not_ready_since=self.not_ready_since,
        )


class _PodGroup:
    __slots__ = ("body", "labels", "min_member", "name", "uid")

    def __init__(self, body: JSON, uid: str) -> None:
        meta = body.get("metadata") or {}
        self.body = body
        self.name = str(meta["name"])
        self.uid = uid
        self.labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        mm = (body.get("spec") or {}).get("minMember", 1)
        self.min_member = mm if isinstance(mm, int) and not isinstance(mm, bool) else 1


# event kinds
_C_START = 1  # (pod uid, container name, container epoch)
_C_READY = 2
_C_PULL_ERROR = 3
_C_BACKOFF = 4
_POD_GONE = 5  # (pod uid)
_UNROUTE = 6  # (pod uid, route epoch)
_NODE_LOST = 7  # (node name, node epoch)
_NODE_EVICT = 8


# ------------------------------------------------------------------------------ world


class World:
    """The simulated cluster for one InferenceReplica: apply plans, take snapshots."""

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
        self.pod_groups: dict[str, _PodGroup] = {}
        self.nodes: dict[str, _Node] = {}
        for name in cluster.node_names():
            labels = {
                NODE_HOSTNAME_LABEL: name,
                **cluster.labels,
                **cluster.node_labels.get(name, {}),
            }
            capacity = cluster.node_gpus.get(name, cluster.gpus_per_node)
            self.nodes[name] = _Node(name, capacity, labels)
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
        meta.setdefault("creationTimestamp", _fmt(epoch))
        manifest["metadata"] = meta
        self._manifest: dict[str, Any] = manifest
        self._replica_base = replica_from_json(manifest)
        self.status: InferenceReplicaStatus | None = None
        self._status_seen: Any = None  # the status as the shell would read it back
        self._replica_cache: InferenceReplica | None = None

    # -------------------------------------------------------------- time and events

    def time(self, t: float) -> datetime:
        """The wall-clock datetime of simulated second ``t``."""
        return self.epoch + timedelta(seconds=t)

    def _stamp(self, t: float) -> datetime:
        return to_second(self.time(t))

    def _push(self, t: float, kind: int, a: str, b: str = "", c: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, kind, a, b, c))

    def _valid(self, kind: int, a: str, b: str, c: int) -> bool:
        if kind in (_NODE_LOST, _NODE_EVICT):
            node = self.nodes.get(a)
            return node is not None and node.epoch == c
        pod = self._uids.get(a)
        if pod is None:
            return False
        if kind == _POD_GONE:
            return True
        if kind == _UNROUTE:
            return pod.route_epoch == c
        if pod.node is not None and self.nodes[pod.node].dead:
            return False  # the kubelet is gone
        return any(ct.name == b and ct.epoch == c for ct in pod.containers)

    def next_event_time(self) -> float | None:
        """When the world next changes by itself, or None when nothing is scheduled."""
        heap = self._heap
        while heap and not self._valid(*heap[0][2:]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def advance(self, t: float) -> None:
        """Run every event due at or before ``t`` (in time order), then schedule."""
        if t < self.now - 1e-9:
            raise ValueError(f"time goes forward only: at {self.now}s, asked for {t}s")
        heap = self._heap
        while heap and heap[0][0] <= t + 1e-9:
            et, _, kind, a, b, c = heapq.heappop(heap)
            self.now = max(self.now, et)
            if self._valid(kind, a, b, c):
                self._run_event(kind, a, b, c)
            if self._sched_dirty:
                self._schedule()
        self.now = max(self.now, t)
        if self._sched_dirty:
            self._schedule()

    def reschedule(self) -> None:
        """Try to place pending pods again: capacity changed outside this world (another
        replica's world sharing the same nodes freed GPUs)."""
        if self._pending:
            self._schedule()

    def _run_event(self, kind: int, a: str, b: str, c: int) -> None:
        now = self.now
        if kind == _NODE_LOST:
            self._node_lost(self.nodes[a])
            return
        if kind == _NODE_EVICT:
            for pod in self._pods_on(a):
                if not pod.terminating:
                    self._mark_deleted(pod, now, complete=False)
            return
        pod = self._uids[a]
        if kind == _POD_GONE:
            self._remove(pod)
            return
        if kind == _UNROUTE:
            pod.routed = False
            pod.unroute_at = None
            self._routed_cache = None
            self._changed(None)
            return
        ct = next(x for x in pod.containers if x.name == b)
        if kind == _C_START:
            if ct.image in self.bad_images:
                self._pull_failed(pod, ct)
                return
            ct.state = "running"
            ct.started_once = True
            ct.status_image = ct.image
            ct.waiting_reason = None
            self._push(now + self.cluster.pod_ready_seconds, _C_READY, pod.uid, ct.name, ct.epoch)
        elif kind == _C_READY:
            ct.ready = True
        elif kind == _C_PULL_ERROR:
            self._pull_failed(pod, ct)
            return
        elif kind == _C_BACKOFF:
            ct.waiting_reason = "ImagePullBackOff"
            ct.waiting_message = f'Back-off pulling image "{ct.image}"'
        self._refresh(pod)

    def _pull_failed(self, pod: SimPod, ct: SimContainer) -> None:
        ct.state = "waiting"
        ct.ready = False
        ct.status_image = ct.image
        ct.waiting_reason = "ErrImagePull"
        ct.waiting_message = f'failed to pull image "{ct.image}": not found'
        self._push(
            self.now + self.cluster.image_pull_backoff_seconds,
            _C_BACKOFF,
            pod.uid,
            ct.name,
            ct.epoch,
        )
        self._refresh(pod)

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
                _C_PULL_ERROR,
                pod.uid,
                ct.name,
                ct.epoch,
            )
        else:
            self._push(
                self.now + self.cluster.pod_start_seconds, _C_START, pod.uid, ct.name, ct.epoch
            )

    # -------------------------------------------------------------- change tracking

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
            self._push(pod.unroute_at, _UNROUTE, pod.uid, "", pod.route_epoch)
        self._changed(pod)

    # -------------------------------------------------------------- pods

    def _new_uid(self, kind: str) -> str:
        self._seq += 1
        return f"{kind}-{self._seq:06d}"

    def _add_pod(self, body: JSON) -> SimPod:
        pod = SimPod(body, self._new_uid("pod"), self._seq, self.now)
        pod.sched_reason = None
        self.pods[pod.name] = pod
        self._uids[pod.uid] = pod
        self._pending[pod.uid] = pod
        self._sched_dirty = True
        self._changed(pod)
        return pod

    def _remove(self, pod: SimPod) -> None:
        if self.pods.get(pod.name) is pod:
            del self.pods[pod.name]
        self._uids.pop(pod.uid, None)
        self._pending.pop(pod.uid, None)
        if pod.node is not None:
            self.nodes[pod.node].used -= pod.gpus
            self.gpus_in_use -= pod.gpus
            self._sched_dirty = True
            self._nodes_cache = None
        if pod.routed:
            pod.routed = False
            self._routed_cache = None
        self._changed(pod)

    def _mark_deleted(self, pod: SimPod, t: float, *, complete: bool = True) -> None:
        pod.deletion_at = t
        pod.deletion_timestamp = self._stamp(t + pod.grace_seconds)
        self._pending.pop(pod.uid, None)
        node = self.nodes.get(pod.node) if pod.node is not None else None
        if complete and (node is None or not node.dead):
            delay = 0.0 if pod.node is None else self.cluster.termination_seconds
            self._push(t + delay, _POD_GONE, pod.uid)
        self._refresh(pod)

    def _pods_on(self, node: str) -> list[SimPod]:
        return [p for p in self.pods.values() if p.node == node]

    def pod(self, name: str) -> SimPod | None:
        """The pod of that name, if it exists."""
        return self.pods.get(name)

    @property
    def pod_count(self) -> int:
        """Pods that exist (Pending, Terminating and Failed ones included)."""
        return len(self.pods)

    # -------------------------------------------------------------- scheduler

    def _schedule(self) -> None:
        self._sched_dirty = False
        if not self._pending:
            return
        gang = self.cluster.gang_scheduling and self.cluster.pod_group_crd
        order = list(self.nodes)
        self.rng.shuffle(order)
        tie = {name: i for i, name in enumerate(order)}
        done: set[str] = set()
        pending = list(self._pending.values())
        groups: dict[str, list[SimPod]] = {}
        if gang:
            for pod in pending:
                key = pod.labels.get(LABEL_POD_GROUP)
                if key:
                    groups.setdefault(key, []).append(pod)
        for pod in pending:
            if pod.uid in done:
                continue
            if pod.scheduling_gates:
                self._unschedulable(
                    [pod],
                    "SchedulingGated",
                    "Scheduling is blocked due to non-empty scheduling gates",
                )
                done.add(pod.uid)
                continue
            key = pod.labels.get(LABEL_POD_GROUP) if gang else None
            if key:
                members = groups[key]
                done.update(p.uid for p in members)
                self._schedule_gang(key, members, tie)
            else:
                done.add(pod.uid)
                placement = self._place([pod], tie)
                if placement is None:
                    self._unschedulable([pod], "Unschedulable", self._why([pod]))
                else:
                    self._bind(placement)

    def _schedule_gang(self, key: str, members: list[SimPod], tie: Mapping[str, int]) -> None:
        pg = self.pod_groups.get(key)
        if pg is None:
            self._unschedulable(members, "Unschedulable", f'podgroup "{key}" not found')
            return
        members = [p for p in members if not p.scheduling_gates]
        bound = sum(
            1
            for p in self.pods.values()
            if p.node is not None
            and not p.terminating
            and not p.failed
            and p.labels.get(LABEL_POD_GROUP) == key
        )
        if bound + len(members) < pg.min_member:
            self._unschedulable(
                members,
                "Unschedulable",
                f'pod group "{key}": {bound + len(members)} of minMember '
                f"{pg.min_member} pods exist",
            )
            return
        placement = self._place(sorted(members, key=SimPod.rank), tie)
        if placement is None:
            self._unschedulable(members, "Unschedulable", self._why(members, gang=key))
        else:
            self._bind(placement)

    def _why(self, pods: Sequence[SimPod], gang: str | None = None) -> str:
        need = sum(p.gpus for p in pods)
        ready = sum(1 for n in self.nodes.values() if n.ready is True and not n.dead)
        free = sum(n.capacity - n.used for n in self.nodes.values() if n.ready is True)
        what = f"gang {gang} ({len(pods)} pods, {need} GPUs)" if gang else f"{need} GPUs"
        return (
            f"0/{len(self.nodes)} nodes are available for {what}: {ready} Ready, "
            f"{free} GPUs free in total"
        )

    def _unschedulable(self, pods: Iterable[SimPod], reason: str, message: str) -> None:
        for pod in pods:
            if pod.sched_reason != reason or pod.sched_message != message:
                pod.sched_reason = reason
                pod.sched_message = message
                self._changed(pod)

    def _bind(self, placement: list[tuple[SimPod, str]]) -> None:
        for pod, node_name in placement:
            node = self.nodes[node_name]
            node.used += pod.gpus
            self.gpus_in_use += pod.gpus
            pod.node = node_name
            pod.sched_reason = None
            pod.sched_message = ""
            self._pending.pop(pod.uid, None)
            self._ip_seq += 1
            pod.ip = (
                f"10.{(self._ip_seq >> 16) & 255}.{(self._ip_seq >> 8) & 255}.{self._ip_seq & 255}"
            )
            for ct in pod.containers:
                self._start_container(pod, ct)
            self._refresh(pod)
        self._nodes_cache = None

    def _place(
        self, pods: Sequence[SimPod], tie: Mapping[str, int]
    ) -> list[tuple[SimPod, str]] | None:
        nodes = [n for n in self.nodes.values() if n.ready is True and not n.dead]
        result = self._greedy(pods, nodes, tie)
        if result is not None:
            return result
        keys = sorted(
            {
                t.get("topologyKey", "")
                for p in pods
                for t in _pod_affinity_terms(p.body, "podAffinity")
            }
            - {""}
        )
        for key in keys:  # gangs tied to one domain: try each domain whole
            domains = sorted({n.labels[key] for n in nodes if key in n.labels})
            for value in domains:
                subset = [n for n in nodes if n.labels.get(key) == value]
                result = self._greedy(pods, subset, tie)
                if result is not None:
                    return result
        return None

    def _greedy(
        self, pods: Sequence[SimPod], nodes: Sequence[_Node], tie: Mapping[str, int]
    ) -> list[tuple[SimPod, str]] | None:
        free = {n.name: n.capacity - n.used for n in nodes}
        if sum(p.gpus for p in pods) > sum(free.values()):
            return None
        by_name = {n.name: n for n in nodes}
        placed: list[tuple[SimPod, str]] = []
        for pod in pods:
            gpus = pod.gpus
            best: tuple[int, int, int] | None = None
            best_node: str | None = None
            if not pod.constrained:  # the common case: best fit, then the seeded tie order
                for name, left in free.items():
                    if left >= gpus:
                        score = (0, left - gpus, tie[name])
                        if best is None or score < best:
                            best, best_node = score, name
            else:
                spec = pod.body.get("spec") or {}
                fixed = spec.get("nodeName")
                for name, left in free.items():
                    if left < gpus or (fixed and name != fixed):
                        continue
                    node = by_name[name]
                    if not _node_fits(spec, node):
                        continue
                    if pod.pod_affinity and not self._pod_affinity_ok(pod, node, placed):
                        continue
                    score = (-_preferred_score(spec, node), left - gpus, tie[name])
                    if best is None or score < best:
                        best, best_node = score, name
            if best_node is None:
                return None
            free[best_node] -= gpus
            placed.append((pod, best_node))
        return placed

    def _pod_affinity_ok(
        self, pod: SimPod, node: _Node, placed: Sequence[tuple[SimPod, str]]
    ) -> bool:
        terms = pod.pod_affinity
        others: list[tuple[SimPod, str | None]] = [
            (p, p.node) for p in self.pods.values() if p.node is not None and not p.terminating
        ]
        others.extend(placed)
        for kind, term in terms:
            key = term.get("topologyKey", "")
            selector = term.get("labelSelector") or {}
            domain = node.labels.get(key)
            matched_any = False
            same_domain = False
            for other, other_node in others:
                if (
                    other is pod
                    or other_node is None
                    or not _selector_matches(selector, other.labels)
                ):
                    continue
                matched_any = True
                if domain is not None and self.nodes[other_node].labels.get(key) == domain:
                    same_domain = True
                    break
            if kind == "podAffinity":
                if same_domain:
                    continue
                if not matched_any and _selector_matches(selector, pod.labels):
                    continue  # the first pod of a set may go anywhere
                return False
            if same_domain:
                return False
        return True

    # -------------------------------------------------------------- node faults

    def _node_lost(self, node: _Node) -> None:
        node.ready = None
        node.not_ready_since = self._stamp(self.now)
        node.epoch += 1
        self._nodes_cache = None
        self._changed(None)
        for pod in self._pods_on(node.name):
            pod.node_lost = True
            self._refresh(pod)
        self._push(self.now + self.cluster.eviction_seconds, _NODE_EVICT, node.name, "", node.epoch)

    def fail_node(self, name: str, now: float | None = None) -> None:
        """The node stops heartbeating now; it reads Unknown after the monitor grace period."""
        if now is not None:
            self.advance(now)
        node = self.nodes.get(name)
        if node is None:
            raise WorldError(f"no node {name!r} (nodes are node-0 .. node-{len(self.nodes) - 1})")
        if node.dead:
            return
        node.dead = True
        node.epoch += 1
        self._push(
            self.now + self.cluster.node_monitor_grace_seconds, _NODE_LOST, name, "", node.epoch
        )

    def fail_pod(self, name: str, now: float | None = None) -> None:
        """The pod's main container exits with code 1 (reason Error); the pod turns Failed."""
        if now is not None:
            self.advance(now)
        pod = self.pods.get(name)
        if pod is None:
            raise WorldError(f"no pod {name!r}")
        if pod.node is not None and self.nodes[pod.node].dead:
            self.notes.append((self.now, f"failPod {name}: its node is lost, nothing is reported"))
            return
        if pod.failed:
            return
        main = pod.main_container()
        for ct in pod.containers:
            ct.epoch += 1
            ct.ready = False
            ct.state = "terminated"
            ct.started_once = True
            if ct is main:
                ct.term_reason, ct.term_exit = "Error", 1
            else:
                ct.term_reason, ct.term_exit = "Completed", 0
        pod.failed = True
        self._pending.pop(pod.uid, None)
        self._refresh(pod)

    def add_bad_image(self, image: str, now: float | None = None) -> None:
        """From now on, pulls of ``image`` fail; running containers are untouched."""
        if now is not None:
            self.advance(now)
        self.bad_images.add(image)

    # -------------------------------------------------------------- replica

    def _replica_changed(self, *, spec_changed: bool = False) -> None:
        meta = self._manifest["metadata"]
        if spec_changed:
            meta["generation"] = int(meta["generation"]) + 1
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        self._replica_base = replica_from_json(self._manifest)
        self._replica_cache = None
        self._changed(None)

    @property
    def manifest(self) -> JSON:
        """The replica's object as the API server holds it (without status)."""
        return self._manifest

    def patch_replica(self, patch: JSON, now: float | None = None) -> None:
        """Apply a JSON merge patch to the replica (a spec change bumps the generation)."""
        if now is not None:
            self.advance(now)
        patched = merge_patch(self._manifest, {k: v for k, v in patch.items() if k != "status"})
        meta = dict(patched.get("metadata") or {})
        for key in (
            "generation",
            "resourceVersion",
            "uid",
            "namespace",
            "name",
            "creationTimestamp",
        ):
            if key in self._manifest["metadata"]:
                meta[key] = self._manifest["metadata"][key]
        patched["metadata"] = meta
        replica_from_json(patched)  # raises CodecError before anything changes
        spec_changed = patched.get("spec") != self._manifest.get("spec")
        if patched == self._manifest:
            return
        self._manifest = patched
        self._replica_changed(spec_changed=spec_changed)

    def set_annotation(self, key: str, value: str | None, now: float | None = None) -> None:
        """Set (or with None remove) one annotation on the replica."""
        self.patch_replica({"metadata": {"annotations": {key: value}}}, now)

    @property
    def replica(self) -> InferenceReplica:
        """The replica as the shell would observe it, with the last status written."""
        if self._replica_cache is None:
            self._replica_cache = attrs.evolve(self._replica_base, status=self._status_seen)
        return self._replica_cache

    def _write_status(self, status: InferenceReplicaStatus) -> bool:
        if status == self.status:
            return False
        self.status = status
        if self.status_roundtrip:
            encoding = self.config.instance_status_encoding
            wire = status_to_json(
                status, encoding=encoding, max_decoded=self.config.max_decoded_instances
            )
            self._status_seen = status_from_json(
                wire, max_decoded=self.config.max_decoded_instances
            )
        else:
            self._status_seen = status
        meta = self._manifest["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        self._replica_base = attrs.evolve(
            self._replica_base,
            metadata=attrs.evolve(
                self._replica_base.metadata, resource_version=meta["resourceVersion"]
            ),
        )
        self._replica_cache = None
        self._changed(None)
        return True

    def status_json(self) -> dict[str, Any] | None:
        """The last status written, as the manager would write it (its configured encoding)."""
        if self.status is None:
            return None
        return status_to_json(
            self.status,
            encoding=self.config.instance_status_encoding,
            max_decoded=self.config.max_decoded_instances,
        )

    # -------------------------------------------------------------- snapshot

    def snapshot(self, now: float | None = None) -> Snapshot:
        """One consistent view at ``now`` (default: the world's time), as the shell builds it."""
        if now is not None:
            self.advance(now)
        if self._pods_cache is None:
            self._pods_cache = tuple(self._pod_view(p) for p in self.pods.values())
        if self._nodes_cache is None:
            self._nodes_cache = {n.name: n.view() for n in self.nodes.values()}
        if self._pg_cache is None:
            self._pg_cache = {
                g.name: PodGroupView(name=g.name, uid=g.uid, labels=dict(g.labels))
                for g in self.pod_groups.values()
            }
        if self._rev_cache is None:
            self._rev_cache = tuple(self.revisions.values())
        if self._routed_cache is None:
            self._routed_cache = frozenset(p.name for p in self.pods.values() if p.routed)
        headless = any(
            kind == "Service" and ((body.get("spec") or {}).get("clusterIP") == "None")
            for (kind, _), body in self.objects.items()
        )
        return Snapshot(
            replica=self.replica,
            now=self.time(self.now),
            pods=self._pods_cache,
            nodes=self._nodes_cache,
            pod_groups=self._pg_cache,
            pod_group_crd=self.cluster.pod_group_crd,
            routed_pods=self._routed_cache,
            revisions=self._rev_cache,
            config=self.config,
            headless_service_exists=headless,
        )

    def _pod_view(self, pod: SimPod) -> PodView:
        if pod.view_cache is not None:
            return pod.view_cache
        conditions: dict[str, str] = {}
        reasons: dict[str, str] = {}
        if pod.node is not None:
            conditions["PodScheduled"] = "True"
            conditions["Initialized"] = "True"
            cr = pod.containers_ready
            conditions["ContainersReady"] = "True" if cr else "False"
            if not cr:
                reasons["ContainersReady"] = "PodFailed" if pod.failed else "ContainersNotReady"
            conditions["Ready"] = "True" if pod.ready else "False"
            if not pod.ready:
                reasons["Ready"] = (
                    "NodeNotReady"
                    if pod.node_lost
                    else "PodFailed"
                    if pod.failed
                    else "ContainersNotReady"
                    if not cr
                    else "ReadinessGatesNotReady"
                )
        else:
            conditions["PodScheduled"] = "False"
            if pod.sched_reason:
                reasons["PodScheduled"] = pod.sched_reason
        conditions.update(pod.gates)
        view = PodView(
            name=pod.name,
            uid=pod.uid,
            labels=dict(pod.labels),
            node_name=pod.node,
            phase=pod.phase,
            conditions=conditions,
            condition_reasons=reasons,
            containers=tuple(c.view() for c in pod.containers) if pod.node is not None else (),
            images={c.name: c.image for c in pod.containers},
            deletion_timestamp=pod.deletion_timestamp,
            creation_timestamp=self._stamp(pod.created_at),
            scheduling_gates=pod.scheduling_gates,
            pod_ip=pod.ip,
            annotations=dict(pod.annotations),
        )
        pod.view_cache = view
        return view

    # -------------------------------------------------------------- apply

    def apply(
        self, plan: Plan | Iterable[Action], now: float | None = None, *, limit: int | None = None
    ) -> ApplyResult:
        """Apply actions in order (at most ``limit``), then run the scheduler.

        Stops at the first action the API server would refuse, as the shell does.
        """
        if now is not None:
            self.advance(now)
        actions = plan.actions if isinstance(plan, Plan) else tuple(plan)
        if limit is not None:
            actions = actions[:limit]
        applied = changed = 0
        error: str | None = None
        for action in actions:
            before = self.version
            error = self._apply_one(action)
            if error is not None:
                self.notes.append((self.now, f"{action.kind} refused: {error}"))
                break
            applied += 1
            if self.version != before:
                changed += 1
        if self._sched_dirty:
            self._schedule()
        return ApplyResult(applied=applied, changed=changed, error=error)

    def _apply_one(self, action: Action) -> str | None:
        now = self.now
        if isinstance(action, UpdateStatus):
            self._write_status(action.status)
        elif isinstance(action, CreatePod):
            if action.name not in self.pods:
                self._add_pod(action.body)
        elif isinstance(action, DeletePod):
            pod = self.pods.get(action.name)
            if pod is None or (action.uid and pod.uid != action.uid):
                return None
            if action.force:
                self._remove(pod)
            elif not pod.terminating:
                self._mark_deleted(pod, now)
        elif isinstance(action, SetServingGate):
            pod = self.pods.get(action.name)
            if pod is None or (action.uid and pod.uid != action.uid):
                return None
            value = "True" if action.value else "False"
            if pod.gates.get(SERVING_GATE) != value:
                pod.gates[SERVING_GATE] = value
                self._refresh(pod)
        elif isinstance(action, PatchPodImages):
            pod = self.pods.get(action.name)
            if pod is None or (action.uid and pod.uid != action.uid):
                return None
            self._patch_images(pod, action.images, action.labels)
        elif isinstance(action, CreatePodGroup):
            if not self.cluster.pod_group_crd:
                return (
                    "the server could not find the requested resource (PodGroup CRD not installed)"
                )
            name = str(action.body["metadata"]["name"])
            if name not in self.pod_groups:
                self.pod_groups[name] = _PodGroup(action.body, self._new_uid("pg"))
                self._pg_cache = None
                self._sched_dirty = True
                self._changed(None)
        elif isinstance(action, DeletePodGroup):
            group = self.pod_groups.get(action.name)
            if group is not None and (not action.uid or group.uid == action.uid):
                del self.pod_groups[action.name]
                self._pg_cache = None
                self._changed(None)
        elif isinstance(action, CreateRevision):
            meta = action.body.get("metadata") or {}
            name = str(meta["name"])
            if name not in self.revisions:
                rev = action.body.get("revision", 0)
                self.revisions[name] = RevisionView(
                    name=name,
                    uid=self._new_uid("rev"),
                    revision=rev if isinstance(rev, int) else 0,
                    data=action.body.get("data") or {},
                    labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
                )
                self._rev_cache = None
                self._changed(None)
        elif isinstance(action, DeleteRevision):
            found = self.revisions.get(action.name)
            if found is not None and (not action.uid or found.uid == action.uid):
                del self.revisions[action.name]
                self._rev_cache = None
                self._changed(None)
        elif isinstance(action, CreateObject):
            key = (str(action.body.get("kind", "")), str(action.body["metadata"]["name"]))
            if key not in self.objects:
                self.objects[key] = action.body
                self._changed(None)
        elif isinstance(action, DeleteObject):
            if self.objects.pop((action.object_kind, action.name), None) is not None:
                self._changed(None)
        elif isinstance(action, SetFinalizer):
            meta = self._manifest["metadata"]
            finalizers = list(meta.get("finalizers") or [])
            if action.present and action.finalizer not in finalizers:
                meta["finalizers"] = [*finalizers, action.finalizer]
                self._replica_changed()
            elif not action.present and action.finalizer in finalizers:
                meta["finalizers"] = [f for f in finalizers if f != action.finalizer]
                self._replica_changed()
        elif isinstance(action, RemoveAnnotations):
            meta = self._manifest["metadata"]
            annotations = dict(meta.get("annotations") or {})
            if any(k in annotations for k in action.keys):
                for k in action.keys:
                    annotations.pop(k, None)
                meta["annotations"] = annotations
                self._replica_changed()
        elif isinstance(action, RecordAudit):
            self.audit.setdefault(action.config_map, []).extend(action.entries)
            self._changed(None)
        else:  # pragma: no cover - every Action kind is handled above
            return f"unknown action {action!r}"
        return None

    def _patch_images(
        self, pod: SimPod, images: Mapping[str, str], labels: Mapping[str, str]
    ) -> None:
        changed = False
        if labels and any(pod.labels.get(k) != v for k, v in labels.items()):
            pod.labels.update(labels)
            changed = True
        for ct in pod.containers:
            new = images.get(ct.name)
            if new is None or new == ct.image:
                continue
            ct.image = new
            changed = True
            if pod.failed or pod.node is None:
                continue
            if self.nodes[pod.node].dead:
                continue
            if ct.started_once:
                ct.restart_count += 1
            ct.status_image = new
            self._start_container(pod, ct)
        if changed:
            self._refresh(pod)


# ------------------------------------------------------------------------------ matching


def _fmt(value: datetime) -> str:
    return to_second(value).strftime("%Y-%m-%dT%H:%M:%SZ")


def _match_expression(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = expr.get("key", "")
    op = expr.get("operator", "")
    values = [str(v) for v in expr.get("values") or ()]
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and values:
        try:
            a, b = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def _term_matches(term: Mapping[str, Any], node: _Node) -> bool:
    exprs = term.get("matchExpressions") or ()
    fields = term.get("matchFields") or ()
    if not exprs and not fields:
        return False  # an empty term matches nothing
    if not all(_match_expression(e, node.labels) for e in exprs):
        return False
    return all(_match_expression(f, {"metadata.name": node.name}) for f in fields)


def _node_fits(spec: Mapping[str, Any], node: _Node) -> bool:
    selector = spec.get("nodeSelector") or {}
    if any(node.labels.get(k) != v for k, v in selector.items()):
        return False
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms")
    if terms is not None:
        return any(_term_matches(t, node) for t in terms)
    return True


def _preferred_score(spec: Mapping[str, Any], node: _Node) -> int:
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    score = 0
    for pref in node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ():
        if _term_matches(pref.get("preference") or {}, node):
            weight = pref.get("weight", 1)
            score += weight if isinstance(weight, int) else 1
    return score


def _pod_affinity_terms(body: JSON, kind: str) -> Sequence[Mapping[str, Any]]:
    affinity = ((body.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    terms = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or ()
    return [t for t in terms if isinstance(t, Mapping)]


def _selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    match_labels = selector.get("matchLabels") or {}
    if any(labels.get(k) != v for k, v in match_labels.items()):
        return False
    return all(_match_expression(e, labels) for e in selector.get("matchExpressions") or ())

"""The objects a simulated cluster holds: pods and their containers, nodes, PodGroups.

They are mutable and owned by the world; the planner only ever sees their views
(``PodView``, ``NodeView``), built from them at snapshot time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from omenative_core.labels import (
    LABEL_POD_ORDINAL,
    LABEL_RUNNER,
)
from omenative_core.model.observed import (
    ContainerView,
    NodeView,
    PodView,
)
from omenative_core.model.spec import JSON

__all__ = ["GPU_RESOURCE", "MAIN_CONTAINER", "SimContainer", "SimPod", "pod_gpus"]

GPU_RESOURCE = "nvidia.com/gpu"
"""The extended resource the scheduler places pods by."""


MAIN_CONTAINER = "ome-container"
"""The container ``fail_pod`` kills when the pod has one (else the first container)."""


RUNNER_RANK = {"leader": 0, "default": 1, "worker": 2}
"""Scheduling order inside a gang: the leader first, workers last."""

DEFAULT_GRACE_SECONDS = 30
"""A pod's termination grace period when its spec sets none."""


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
            for term in pod_affinity_terms(body, kind)
        )
        self.constrained = bool(
            spec.get("nodeName") or spec.get("nodeSelector") or spec.get("affinity")
        )
        grace = spec.get("terminationGracePeriodSeconds")
        self.grace_seconds = (
            grace
            if isinstance(grace, int) and not isinstance(grace, bool)
            else DEFAULT_GRACE_SECONDS
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
        return (RUNNER_RANK.get(runner, 3), ordinal, self.name)


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


class SimNode:
    """One simulated node: its GPUs, labels, readiness and whether its kubelet is gone."""

    __slots__ = ("capacity", "cordoned", "dead", "epoch", "labels", "name", "not_ready_since",
                 "ready", "used")

    def __init__(self, name: str, capacity: int, labels: dict[str, str]) -> None:
        self.name = name
        self.capacity = capacity
        self.labels = labels
        self.used = 0
        self.ready: bool | None = True
        self.not_ready_since: datetime | None = None
        self.dead = False  # the kubelet stopped (reported as Unknown after the grace period)
        self.cordoned = False  # a NoSchedule taint or cordon: nothing new is placed here
        self.epoch = 0

    def view(self) -> NodeView:
        """The node as the planner sees it."""
        return NodeView(
            name=self.name,
            ready=self.ready,
            labels=dict(self.labels),
            not_ready_since=self.not_ready_since,
            gpus=self.capacity,
        )


class SimPodGroup:
    """One scheduler-plugins PodGroup: its name, UID, labels and ``minMember``."""

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


def pod_affinity_terms(body: JSON, kind: str) -> Sequence[Mapping[str, Any]]:
    """The required pod affinity (or anti-affinity) terms of a pod body."""
    affinity = ((body.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    terms = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or ()
    return [t for t in terms if isinstance(t, Mapping)]

"""Observed views: the slim facts about the cluster that the core reads.

The shell builds these from watch caches (keeping only these fields, so memory stays flat
as fleets grow); the simulator builds them from its world model. ``Snapshot`` bundles one
consistent view, with the time as an input.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from datetime import datetime

from attrs import field, frozen

from omenative_core.labels import LABEL_INCARNATION, LABEL_INSTANCE_INDEX, LABEL_REVISION_HASH
from omenative_core.model.config import LifecycleConfig
from omenative_core.model.spec import JSON, InferenceReplica

__all__ = [
    "CRASH_REASONS",
    "ContainerView",
    "CreateError",
    "NodeView",
    "PodGroupView",
    "PodView",
    "RevisionView",
    "Snapshot",
]


CRASH_REASONS = frozenset({"CrashLoopBackOff", "CreateContainerError", "RunContainerError"})
"""Container trouble that a bad node or GPU could cause: never holds a revision
(``failures``); a pod with a container waiting for one of these is not ``PodView.sound``."""

_FINISHED = ("Failed", "Succeeded")


@frozen(kw_only=True)
class ContainerView:
    """One container's state from ``status.containerStatuses``."""

    name: str
    image: str = ""
    ready: bool = False
    restart_count: int = 0
    running: bool = False
    waiting_reason: str | None = None
    waiting_message: str = ""
    terminated_reason: str | None = None
    terminated_exit_code: int | None = None


@frozen(kw_only=True)
class PodView:
    """A pod as the core sees it."""

    name: str
    uid: str
    labels: Mapping[str, str] = field(factory=dict)
    node_name: str | None = None
    phase: str = "Pending"
    conditions: Mapping[str, str] = field(factory=dict)  # type -> "True"/"False"/"Unknown"
    condition_reasons: Mapping[str, str] = field(factory=dict)  # type -> reason
    containers: tuple[ContainerView, ...] = ()
    images: Mapping[str, str] = field(factory=dict)  # spec: container name -> image
    deletion_timestamp: datetime | None = None
    creation_timestamp: datetime | None = None
    scheduling_gates: tuple[str, ...] = ()
    pod_ip: str | None = None
    annotations: Mapping[str, str] = field(factory=dict)
    finalizers: tuple[str, ...] = ()  # a pod with any is never force-deleted (OME's rule)
    # Derived when the view is built (the shell builds one per pod change, not per pass):
    # what every planning pass asks of every pod, so a pass over 20,000 pods reads these
    # slots instead of the label, condition and container maps (``steps.verdicts.group_all``,
    # ``steps.steady``). Not compared: they follow from the fields above.
    instance: int | None = field(init=False, eq=False, repr=False)
    """The Instance index its labels name (None: no index label, or not a number)."""
    revision_hash: str | None = field(init=False, eq=False, repr=False)
    """Its revision-hash label, interned: the pods of one revision share one string."""
    incarnation: int = field(init=False, eq=False, repr=False)
    """Its incarnation label as a number (0 when absent or not a number)."""
    in_rotation: bool = field(init=False, eq=False, repr=False)
    """The ``ome.io/serving`` gate and ContainersReady are both True."""
    sound: bool = field(init=False, eq=False, repr=False)
    """Ready, not reported unschedulable, not terminating, not finished, and no container
    restarted or waiting in a crash reason (``CRASH_REASONS``): a steady Instance's pod."""

    def __attrs_post_init__(self) -> None:
        labels, conditions = self.labels, self.conditions
        raw = labels.get(LABEL_INSTANCE_INDEX)
        inc = labels.get(LABEL_INCARNATION, "")
        rev_hash = labels.get(LABEL_REVISION_HASH)
        rotation = conditions.get("ome.io/serving") == "True" == conditions.get("ContainersReady")
        sound = (
            conditions.get("Ready") == "True"
            and conditions.get("PodScheduled") != "False"
            and self.deletion_timestamp is None
            and self.phase not in _FINISHED
            and not any(
                c.restart_count or c.waiting_reason in CRASH_REASONS for c in self.containers
            )
        )
        set_ = object.__setattr__  # a frozen class: set once, here
        set_(self, "instance", int(raw) if raw is not None and raw.isdigit() else None)
        set_(self, "revision_hash", sys.intern(rev_hash) if type(rev_hash) is str else rev_hash)
        set_(self, "incarnation", int(inc) if inc.isdigit() else 0)
        set_(self, "in_rotation", rotation)
        set_(self, "sound", sound)

    @property
    def attempt(self) -> tuple[str | None, int]:
        """(revision-hash label, incarnation): the attempt its labels say it belongs to."""
        return (self.revision_hash, self.incarnation)

    @property
    def containers_ready(self) -> bool:
        """ContainersReady True: every container ready (the gate is not part of it)."""
        return self.conditions.get("ContainersReady") == "True"

    @property
    def ready(self) -> bool:
        """Ready True: containers ready and every readiness gate True."""
        return self.conditions.get("Ready") == "True"

    @property
    def serving_gate(self) -> bool:
        """The ``ome.io/serving`` readiness gate is True."""
        return self.conditions.get("ome.io/serving") == "True"

    @property
    def unschedulable(self) -> bool:
        """The scheduler reported it cannot place the pod."""
        return (
            self.conditions.get("PodScheduled") == "False"
            and self.condition_reasons.get("PodScheduled") == "Unschedulable"
        )

    @property
    def terminating(self) -> bool:
        """The pod has a deletionTimestamp."""
        return self.deletion_timestamp is not None


@frozen(kw_only=True)
class NodeView:
    """A node: whether it heartbeats, whether it takes pods, its labels, its GPUs.

    ``gpus`` is allocatable ``nvidia.com/gpu`` (None: unknown), so the planner can say
    when a gang cannot fit the cluster.
    """

    name: str
    ready: bool | None = True  # None: status Unknown (stopped heartbeating)
    unschedulable: bool = False
    labels: Mapping[str, str] = field(factory=dict)
    not_ready_since: datetime | None = None
    gpus: int | None = None
    #: when the ``node.kubernetes.io/unreachable`` taint was added (None: not tainted)
    unreachable_since: datetime | None = None


@frozen(kw_only=True)
class PodGroupView:
    """A PodGroup owned by an Instance (scheduler-plugins or native), or a native Workload.

    ``scheduled`` is the native PodGroup's ``PodGroupScheduled`` condition status
    (None: not reported), with its reason and message.
    """

    name: str
    uid: str = ""
    deleting: bool = False
    labels: Mapping[str, str] = field(factory=dict)
    scheduled: str | None = None
    scheduled_reason: str = ""
    scheduled_message: str = ""
    failed: str = ""
    """A scheduler-plugins PodGroup the scheduler ruled ``Failed``: its explanation
    (``PodGroup <name> reported phase Failed: <f> of <min> members failed``); "" when not."""


@frozen(kw_only=True)
class RevisionView:
    """A ControllerRevision: its stored runner templates under ``data``."""

    name: str
    uid: str = ""
    revision: int = 0
    data: JSON = field(factory=dict)
    labels: Mapping[str, str] = field(factory=dict)


@frozen(kw_only=True)
class CreateError:
    """What the API server answered to a create of the last pass (invalid, quota, ...)."""

    name: str  # object name that was refused
    reason: str  # Invalid | QuotaExceeded | Forbidden | ...
    message: str = ""
    at: datetime | None = None


@frozen(kw_only=True)
class Snapshot:
    """One consistent view of the world for one InferenceReplica, including ``now``."""

    replica: InferenceReplica
    now: datetime
    pods: tuple[PodView, ...] = ()
    nodes: Mapping[str, NodeView] = field(factory=dict)
    pod_groups: Mapping[str, PodGroupView] = field(factory=dict)
    pod_group_crd: bool = False
    #: the native gang API version served and synced (``scheduling.k8s.io/v1beta1`` or
    #: ``v1alpha2``), "" when none is
    native_gang_api: str = ""
    native_pod_groups: Mapping[str, PodGroupView] = field(factory=dict)
    workloads: Mapping[str, PodGroupView] = field(factory=dict)
    routed_pods: frozenset[str] = frozenset()
    revisions: tuple[RevisionView, ...] = ()
    create_errors: tuple[CreateError, ...] = ()
    config: LifecycleConfig = field(factory=LifecycleConfig)
    headless_service_exists: bool = True
    #: a standalone replica's pre-OME headless Service ``{replica}-headless`` exists,
    #: labelled as this replica's (the planner deletes it once no pod is named under it)
    legacy_headless_service_exists: bool = False

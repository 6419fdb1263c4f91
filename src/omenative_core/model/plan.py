"""The core's output: ordered actions, the new status, events, and when to look again.

The shell applies actions in order and stops at the first failure; the next plan starts
from what it then observes. ``UpdateStatus`` comes first whenever the status changed, so a
step that destroys something is always preceded by the status that records it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from attrs import field, frozen

from omenative_core.model.spec import JSON
from omenative_core.model.status import InferenceReplicaStatus

__all__ = [
    "Action",
    "CreateObject",
    "CreatePod",
    "CreatePodGroup",
    "CreateRevision",
    "DeleteObject",
    "DeletePod",
    "DeletePodGroup",
    "DeleteRevision",
    "Event",
    "PatchPodImages",
    "Plan",
    "RecordAudit",
    "RemoveAnnotations",
    "ScaleDownWave",
    "ScaleUpBatch",
    "SetFinalizer",
    "SetServingGate",
    "UpdateStatus",
]


@frozen(kw_only=True)
class UpdateStatus:
    """Write the status subresource (with the observed resourceVersion)."""

    status: InferenceReplicaStatus
    kind: str = "UpdateStatus"


@frozen(kw_only=True)
class CreatePod:
    """Create a pod; AlreadyExists counts as success."""

    body: JSON
    kind: str = "CreatePod"

    @property
    def name(self) -> str:
        """The pod's name."""
        return str(self.body["metadata"]["name"])


@frozen(kw_only=True)
class DeletePod:
    """Delete a pod with a UID precondition; NotFound counts as success."""

    name: str
    uid: str
    force: bool = False  # grace period 0 (only for pods on unreachable nodes)
    reason: str = ""
    kind: str = "DeletePod"


@frozen(kw_only=True)
class SetServingGate:
    """Set the ``ome.io/serving`` condition on a pod's status."""

    name: str
    uid: str
    value: bool
    kind: str = "SetServingGate"


@frozen(kw_only=True)
class PatchPodImages:
    """Patch container images of a running pod (in-place update) and its revision label."""

    name: str
    uid: str
    images: Mapping[str, str]
    labels: Mapping[str, str] = field(factory=dict)
    kind: str = "PatchPodImages"


@frozen(kw_only=True)
class CreatePodGroup:
    """Create a PodGroup before the Instance's pods (its ``apiVersion`` says which API)."""

    body: JSON
    kind: str = "CreatePodGroup"


@frozen(kw_only=True)
class DeletePodGroup:
    """Delete an Instance's PodGroup (scheduler-plugins unless ``api_version`` says)."""

    name: str
    uid: str = ""
    api_version: str = "scheduling.x-k8s.io/v1alpha1"
    kind: str = "DeletePodGroup"


@frozen(kw_only=True)
class CreateRevision:
    """Create a ControllerRevision."""

    body: JSON
    kind: str = "CreateRevision"


@frozen(kw_only=True)
class DeleteRevision:
    """Prune a ControllerRevision that is neither live nor within the history limit."""

    name: str
    uid: str = ""
    kind: str = "DeleteRevision"


@frozen(kw_only=True)
class CreateObject:
    """Create a namespaced object the InferenceReplica owns (its headless Service)."""

    body: JSON
    kind: str = "CreateObject"


@frozen(kw_only=True)
class DeleteObject:
    """Delete a namespaced object the InferenceReplica owns."""

    api_version: str
    object_kind: str
    name: str
    kind: str = "DeleteObject"


@frozen(kw_only=True)
class SetFinalizer:
    """Add or remove the ``ome.io/ir-teardown`` finalizer on the InferenceReplica."""

    present: bool
    finalizer: str = "ome.io/ir-teardown"
    kind: str = "SetFinalizer"


@frozen(kw_only=True)
class RemoveAnnotations:
    """Remove consumed one-shot annotations (reset-instances, migration requests)."""

    keys: tuple[str, ...]
    kind: str = "RemoveAnnotations"


@frozen(kw_only=True)
class RecordAudit:
    """Append entries to the ``{isvc}-ome-migration-audit`` ConfigMap."""

    config_map: str
    entries: tuple[JSON, ...]
    kind: str = "RecordAudit"


Action = (
    UpdateStatus
    | CreatePod
    | DeletePod
    | SetServingGate
    | PatchPodImages
    | CreatePodGroup
    | DeletePodGroup
    | CreateRevision
    | DeleteRevision
    | CreateObject
    | DeleteObject
    | SetFinalizer
    | RemoveAnnotations
    | RecordAudit
)
"""Every action the core can ask for."""


@frozen(kw_only=True)
class Event:
    """A Kubernetes Event a user should see, on the InferenceReplica (or, from the
    InferenceService layer, on the InferenceService)."""

    type: str  # Normal | Warning
    reason: str
    message: str
    instance: int | None = None


@frozen(kw_only=True)
class ScaleDownWave:
    """One component's scale-down batch this pass, as OME logs it ("OMENative scale-down
    wave"): the budget, the cost of deletion work already running, and what was admitted or
    left waiting. The shell logs it and counts the metrics."""

    pod_budget: int
    active_pod_cost: int
    active_instances: int
    admitted_instances: int
    deferred_instances: int
    oversized: bool = False
    """One Instance larger than the whole budget was admitted alone."""


@frozen(kw_only=True)
class ScaleUpBatch:
    """This pass's pod creates under OME's ``scaleUpPodBatchSize`` (``steps.waves``): whole
    Instances while their pods fit the budget, one larger than it alone; the creates of the
    rest wait for the next pass, which the shell asks for at once (``deferred_pods``)."""

    pod_budget: int
    admitted_pods: int
    admitted_instances: int
    deferred_pods: int
    deferred_instances: int
    oversized: bool = False
    """One Instance larger than the whole budget was admitted alone."""


@frozen(kw_only=True)
class Plan:
    """What to do now, the status to write, and when to look again (None: on change only)."""

    actions: tuple[Action, ...]
    status: InferenceReplicaStatus
    events: tuple[Event, ...] = ()
    requeue_after: timedelta | None = None
    scale_down_wave: ScaleDownWave | None = None
    """This pass's scale-down batch (None: no scale-down budget, or nothing to scale down)."""
    scale_up_batch: ScaleUpBatch | None = None
    """This pass's creates batch (None: no ``scaleUpPodBatchSize``, or nothing to create)."""

    @property
    def empty(self) -> bool:
        """No actions: the world matches the spec (events are not actions)."""
        return not self.actions

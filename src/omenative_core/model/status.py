"""The InferenceReplica status: everything the core must remember between passes.

The core is level-triggered: operations in progress, deadlines, retry counts, holds and
migrations all live here, so a manager restarted at any point resumes from what it wrote.
Instance rows are kept as a tuple ordered by index; the codec picks the wire encoding
(DenseV1 rows or ColumnarV2 columns).
"""

from __future__ import annotations

from datetime import datetime

from attrs import frozen

__all__ = [
    "PHASES",
    "Condition",
    "InferenceReplicaStatus",
    "InstanceOperation",
    "InstanceStatus",
    "InstanceTermination",
    "MigrationStatus",
    "RetryBlock",
    "RolloutHold",
    "TrafficTarget",
]

PHASES = (
    "Pending",
    "Creating",
    "Ready",
    "Updating",
    "Restarting",
    "Migrating",
    "Failed",
    "Deleting",
)
"""Instance phases, as OME names them."""


@frozen(kw_only=True)
class Condition:
    """A metav1.Condition."""

    # fields in metav1.Condition's Go struct order, which is the order OME writes them in

    type: str
    status: str
    observed_generation: int | None = None
    last_transition_time: datetime | None = None
    reason: str
    message: str = ""


@frozen(kw_only=True)
class InstanceTermination:
    """Why an Instance's attempt last failed: the pod, container and kubelet reason."""

    pod_name: str = ""
    container_name: str = ""
    reason: str = ""
    exit_code: int | None = None
    message: str = ""
    time: datetime | None = None


@frozen(kw_only=True)
class InstanceOperation:
    """An operation in progress on one Instance, recorded before it acts.

    ``deadline`` is None while the clock is parked (``waiting`` names the external hold);
    when the hold ends the attempt gets a full window again.
    """

    id: str
    type: str  # Create | Update | Restart | Migrate | Delete
    step: str = ""
    started_at: datetime | None = None
    last_progress_at: datetime | None = None
    deadline: datetime | None = None
    retry_count: int = 0
    target_revision: str = ""
    reason: str = ""
    waiting: str | None = None
    capacity_refused_at: datetime | None = None
    strategy: str | None = None
    surge_index: int | None = None
    from_node: str | None = None
    hint_target_nodes: tuple[str, ...] = ()
    request_uuid: str | None = None
    replaces: int | None = None  # omenative: the Instance a gang surge replaces
    unschedulable_since: datetime | None = None  # omenative: start of the Unschedulable wait


@frozen(kw_only=True)
class InstanceStatus:
    """One Instance: its identity, phase, revisions, pod counts and last failure."""

    index: int
    incarnation: int = 1
    phase: str = "Pending"
    running_revision: str = ""
    target_revision: str = ""
    pod_count: int = 0
    serving_pod_count: int = 0
    available_pod_count: int = 0
    admitted: bool = False
    conditions: tuple[Condition, ...] = ()
    ready_since: datetime | None = None
    operation: InstanceOperation | None = None
    active_ordinal: int = 0
    last_failure: InstanceTermination | None = None
    announced: tuple[str, ...] = ()


@frozen(kw_only=True)
class RetryBlock:
    """Retry authority for one target revision, shared by every Instance."""

    target_revision: str
    state: str  # Backoff | RetryInProgress | Held
    attempts_started: int = 0
    next_retry_at: datetime | None = None
    first_failure_at: datetime | None = None
    last_failure_at: datetime | None = None
    reason: str = ""


@frozen(kw_only=True)
class MigrationStatus:
    """One migration request (manual) or relocation (auto) and how far it got."""

    request_uuid: str
    trigger: str = "Manual"
    source_instance: int = 0
    surge_instance: int | None = None
    allocated_at: datetime | None = None
    from_node: str | None = None
    hint_target_nodes: tuple[str, ...] = ()
    phase: str = "Accepted"
    attempt: int = 0
    reason: str = ""
    message: str = ""
    requested_by: str = ""
    started_at: datetime | None = None
    deadline: datetime | None = None
    completed_at: datetime | None = None
    succeeded: bool | None = None


@frozen(kw_only=True)
class RolloutHold:
    """The last reason an update was denied (Budget, RetryBlock, Held, ...)."""

    gate: str
    reason: str = ""
    target: str = ""
    since: datetime | None = None


@frozen(kw_only=True)
class TrafficTarget:
    """A revision's share of requests (rollout groups)."""

    revision_name: str
    percent: int = 0
    tag: str | None = None
    latest_revision: bool | None = None
    pairing_protocol: str | None = None


@frozen(kw_only=True)
class InferenceReplicaStatus:
    """The complete status the manager writes for one InferenceReplica."""

    observed_generation: int = 0
    replicas: int = 0
    ready_replicas: int = 0
    serving_replicas: int = 0
    available_replicas: int = 0
    updated_replicas: int = 0
    updated_ready_replicas: int = 0
    current_revision: str = ""
    update_revision: str = ""
    collision_count: int | None = None
    label_selector: str = ""
    instances: tuple[InstanceStatus, ...] = ()
    retry_blocks: tuple[RetryBlock, ...] = ()
    migrations: tuple[MigrationStatus, ...] = ()
    conditions: tuple[Condition, ...] = ()
    traffic: tuple[TrafficTarget, ...] = ()
    coordination_group_ref: str | None = None
    rollout_hold: RolloutHold | None = None

"""The InferenceReplica spec: what the user (or the InferenceService layer) asks for.

Field names follow OME's ``ome.io/v1beta1`` types; the codec maps them to camelCase JSON.
Pod templates stay plain JSON mappings: the core renders and hashes them, it never needs a
typed pod model.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from attrs import field, frozen

__all__ = [
    "COMPONENTS",
    "JSON",
    "RUNNER_NAMES",
    "InPlaceUpdateStrategy",
    "InferenceReplica",
    "InferenceReplicaSpec",
    "IntOrStr",
    "LifecycleSpec",
    "MigrationPolicy",
    "ObjectMeta",
    "Pacing",
    "ParentRef",
    "RollingUpdate",
    "Runner",
    "UpdateStrategy",
]

JSON = Mapping[str, Any]
"""A JSON object as the API server sends it."""

IntOrStr = int | str
"""Kubernetes IntOrString: a count or a percentage such as ``"25%"``."""

RUNNER_NAMES = ("default", "leader", "worker")
"""Runner names OME accepts, in pod-rank order."""

COMPONENTS = ("engine", "decoder", "router")
"""Component types an InferenceReplica can run."""


@frozen(kw_only=True)
class Runner:
    """One pod template of an Instance: ``default`` alone, or ``leader`` plus ``worker``."""

    name: str
    size: int = 1
    template: JSON = field(factory=dict)


@frozen(kw_only=True)
class RollingUpdate:
    """Budgets and partition of an update strategy."""

    partition: int | None = None
    max_unavailable: IntOrStr | None = None
    max_surge: IntOrStr | None = None


@frozen(kw_only=True)
class InPlaceUpdateStrategy:
    """How an in-place image update treats serving."""

    grace_period_seconds: int | None = None
    mark_not_ready_during_lifecycle: bool | None = None


@frozen(kw_only=True)
class UpdateStrategy:
    """``SurgeThenDrain`` (default), ``RecreatePod``, ``InPlaceIfPossible`` or ``InPlaceOnly``."""

    type: str | None = None
    rolling_update: RollingUpdate | None = None
    in_place_update_strategy: InPlaceUpdateStrategy | None = None


@frozen(kw_only=True)
class MigrationPolicy:
    """``Auto`` (default), ``Surge`` (same as Auto) or ``Never``."""

    mode: str | None = None


@frozen(kw_only=True)
class LifecycleSpec:
    """Per-component lifecycle settings; unset fields fall back to the cluster config."""

    restart_policy: str | None = None
    update_strategy: UpdateStrategy | None = None
    ready_policy: str | None = None
    instance_ready_timeout: timedelta | None = None
    min_ready_seconds: int | None = None
    migration_policy: MigrationPolicy | None = None


@frozen(kw_only=True)
class Pacing:
    """Rollout control: hold the lowest indexes back, or roll back to a stored revision."""

    partition: int | None = None
    max_unavailable: IntOrStr | None = None
    rollback_to_revision: str | None = None


@frozen(kw_only=True)
class ParentRef:
    """The InferenceService a projected InferenceReplica belongs to."""

    name: str


@frozen(kw_only=True)
class InferenceReplicaSpec:
    """Desired state of one component's Instances."""

    component: str = "engine"
    runners: tuple[Runner, ...] = ()
    replicas: int | None = None
    min_ready_seconds: int = 0
    topology_key: str | None = None
    topology_spread: str | None = None
    topology_spread_key: str | None = None
    pairing_protocol: str | None = None
    lifecycle: LifecycleSpec | None = None
    pacing: Pacing | None = None
    paused: bool = False
    pause_mode: str | None = None
    revision_history_limit: int | None = None
    parent_ref: ParentRef | None = None


@frozen(kw_only=True)
class ObjectMeta:
    """The metadata fields of an object that the core reads."""

    name: str
    namespace: str = "default"
    uid: str = ""
    generation: int = 0
    resource_version: str = ""
    labels: Mapping[str, str] = field(factory=dict)
    annotations: Mapping[str, str] = field(factory=dict)
    finalizers: tuple[str, ...] = ()
    deletion_timestamp: datetime | None = None
    creation_timestamp: datetime | None = None


@frozen(kw_only=True)
class InferenceReplica:
    """An InferenceReplica object: metadata, spec and the status last written."""

    metadata: ObjectMeta
    spec: InferenceReplicaSpec
    status: Any = None  # InferenceReplicaStatus | None; typed loosely to avoid an import cycle

    @property
    def prefix(self) -> str:
        """Name prefix of the pods and the headless Service of new Instances, as OME names
        them: ``{isvc}-{component}`` when projected, ``{replica}-{component}`` when
        standalone (OME's guide "Run a standalone InferenceReplica", Step 2)."""
        if self.spec.parent_ref is not None:
            return f"{self.spec.parent_ref.name}-{self.spec.component}"
        return f"{self.metadata.name}-{self.spec.component}"

    @property
    def legacy_prefix(self) -> str | None:
        """Standalone only: ``{replica}``, the prefix omenative gave pods and the headless
        Service before it took OME's names. An Instance whose pods carry it keeps it until
        the Instance is replaced, so a running leader is never renamed under its workers."""
        return None if self.spec.parent_ref is not None else self.metadata.name

    @property
    def stable_prefix(self) -> str:
        """Name prefix of what is not one pod's: ControllerRevisions, PodGroups, Workloads
        and Kueue pod groups. ``{replica}`` when standalone (unchanged by OME's pod names,
        so an upgrade neither mints a new revision of every replica nor renames a running
        gang's group), else ``prefix``."""
        return self.metadata.name if self.spec.parent_ref is None else self.prefix

    @property
    def isvc_name(self) -> str:
        """The InferenceService name pods report (its own name when standalone)."""
        if self.spec.parent_ref is not None:
            return self.spec.parent_ref.name
        return self.metadata.name

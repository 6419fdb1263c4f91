"""The names an Instance's lifecycle is spelled in: operation types, steps and phases.

Each is a ``StrEnum`` whose values are the wire strings OME and older omenative statuses
use, so a member compares (and hashes) equal to the string the status holds: the status
types keep their ``str`` fields and read both. ``lifecycle.py`` says how they connect.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "ACTIVE_MIGRATION_PHASES",
    "TERMINAL_MIGRATION_PHASES",
    "MigrationPhase",
    "OpType",
    "Outcome",
    "Phase",
    "Step",
    "Strategy",
    "Waiting",
    "stops_clock",
]


class OpType(StrEnum):
    """``operation.type``: what an open operation is doing to its Instance."""

    CREATE = "Create"
    RESTART = "Restart"
    UPDATE = "Update"
    DELETE = "Delete"
    MIGRATE = "Migrate"


class Step(StrEnum):
    """``operation.step``: how far the operation got (the value written to the status).

    One wire value can mean different moves for different operations (``Drain`` is the
    first step of a Restart, a Delete, a RecreatePod update and the last step of a
    SurgeThenDrain source); ``lifecycle.Stage`` names each move apart.
    """

    CREATE_PODS = "CreatePods"
    DRAIN = "Drain"
    GANG_SURGE_TARGET = "GangSurgeTarget"
    GANG_SURGE = "GangSurge"
    SURGE = "Surge"
    SURGE_DRAIN = "SurgeDrain"
    IN_PLACE = "InPlace"
    CREATE_SURGE = "CreateSurge"


class Phase(StrEnum):
    """``instances[].phase``, as OME names them (``model.status.PHASES``)."""

    PENDING = "Pending"
    CREATING = "Creating"
    READY = "Ready"
    UPDATING = "Updating"
    RESTARTING = "Restarting"
    MIGRATING = "Migrating"
    FAILED = "Failed"
    DELETING = "Deleting"


class Strategy(StrEnum):
    """``updateStrategy.type``, pinned on an Update operation when it opens."""

    SURGE_THEN_DRAIN = "SurgeThenDrain"
    RECREATE_POD = "RecreatePod"
    IN_PLACE_IF_POSSIBLE = "InPlaceIfPossible"
    IN_PLACE_ONLY = "InPlaceOnly"


class MigrationPhase(StrEnum):
    """``migrations[].phase``: a migration request's (or relocation's) progress."""

    ACCEPTED = "Accepted"
    SURGE_PENDING = "SurgePending"
    SURGE_READY = "SurgeReady"
    DRAINING = "Draining"
    COMPLETED = "Completed"
    FAILED = "Failed"
    REJECTED = "Rejected"
    RELOCATED = "Relocated"


ACTIVE_MIGRATION_PHASES = (
    MigrationPhase.SURGE_PENDING,
    MigrationPhase.SURGE_READY,
    MigrationPhase.DRAINING,
)
"""A migration with a replacement in flight: it is advanced every pass."""

TERMINAL_MIGRATION_PHASES = (
    MigrationPhase.COMPLETED,
    MigrationPhase.FAILED,
    MigrationPhase.REJECTED,
    MigrationPhase.RELOCATED,
)
"""A finished migration record: kept for the audit window, then pruned."""


class Waiting(StrEnum):
    """``operation.waiting``: what outside the revision an attempt's pods wait on (OME's
    reasons, plus ``PodGroupUnschedulable`` for Kubernetes' native gangs)."""

    QUOTA_EXCEEDED = "QuotaExceeded"
    UNSCHEDULABLE = "Unschedulable"
    POD_GROUP_TERMINATING = "PodGroupTerminating"
    POD_GROUP_UNSCHEDULABLE = "PodGroupUnschedulable"
    NODE_UNKNOWN = "NodeUnknown"
    PAUSED = "Paused"
    SOURCE_UNROUTED = "SourceUnrouted"


def stops_clock(reason: str | None) -> bool:
    """Whether a wait parks the readiness deadline: every wait but ``SourceUnrouted`` does
    (OME's rule), so an attempt is not failed for what the revision cannot help. The one
    place this rule lives: every step that parks or resumes the clock asks it."""
    return reason is not None and reason != Waiting.SOURCE_UNROUTED


class Outcome(StrEnum):
    """What one bring-up step observed of an attempt's pods."""

    READY = "ready"
    PROGRESS = "progress"
    FAILED = "failed"

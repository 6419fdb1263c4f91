"""Statuses for the wire-format golden tests: uniform, mid-rollout and failure-heavy.

Built from OME's rules (ome-facts.md §1 and §4): every value is one OME writes. The
expected bytes beside them (``tests/unit/golden/*.json``) were written by omenative's own
encoder and pin its output; the bytes checked against OME's own tests are under
``tests/unit/golden/ome/`` (sources in ``tests/unit/golden/README.md``).
"""

from __future__ import annotations

from datetime import UTC, datetime

from omenative_core.model.status import (
    Condition,
    InferenceReplicaStatus,
    InstanceOperation,
    InstanceStatus,
    InstanceTermination,
    RetryBlock,
    RolloutHold,
)

OLD = "chat-engine-5d8f9c"
NEW = "chat-engine-7b21e4"
T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
T1 = datetime(2026, 3, 1, 12, 5, 0, tzinfo=UTC)
T2 = datetime(2026, 3, 1, 12, 35, 0, tzinfo=UTC)


def _ready(index: int, revision: str = OLD) -> InstanceStatus:
    return InstanceStatus(
        index=index,
        incarnation=1,
        phase="Ready",
        running_revision=revision,
        pod_count=2,
        serving_pod_count=2,
        available_pod_count=2,
        admitted=True,
    )


def _ready_condition(status: str, reason: str, message: str = "") -> Condition:
    return Condition(
        type="Ready", status=status, reason=reason, message=message, last_transition_time=T0
    )


def uniform() -> InferenceReplicaStatus:
    """Six Ready Instances on one revision: the steady state."""
    return InferenceReplicaStatus(
        observed_generation=3,
        replicas=6,
        ready_replicas=6,
        serving_replicas=6,
        available_replicas=6,
        updated_replicas=6,
        updated_ready_replicas=6,
        current_revision=OLD,
        update_revision=OLD,
        label_selector="ome.io/inferenceservice=chat,component=engine",
        instances=tuple(_ready(i) for i in range(6)),
        conditions=(_ready_condition("True", "AllInstancesReady"),),
    )


def mixed() -> InferenceReplicaStatus:
    """A rollout in flight: four on the old revision, one surging, one creating at index 7."""
    surging = InstanceStatus(
        index=4,
        incarnation=2,
        phase="Updating",
        running_revision=OLD,
        target_revision=NEW,
        pod_count=3,
        serving_pod_count=2,
        available_pod_count=2,
        admitted=True,
        operation=InstanceOperation(
            id="update-4-2",
            type="Update",
            step="Surge",
            started_at=T1,
            last_progress_at=T1,
            deadline=T2,
            target_revision=NEW,
            reason="RevisionRoll",
            strategy="SurgeThenDrain",
        ),
    )
    creating = InstanceStatus(
        index=7,
        incarnation=1,
        phase="Creating",
        target_revision=NEW,
        operation=InstanceOperation(
            id="create-7-1",
            type="Create",
            step="CreatePods",
            started_at=T1,
            last_progress_at=T1,
            target_revision=NEW,
            reason="ScaleUp",
            waiting="QuotaExceeded",
        ),
    )
    flipped = InstanceStatus(
        index=5,
        incarnation=1,
        phase="Ready",
        running_revision=NEW,
        pod_count=1,
        serving_pod_count=1,
        available_pod_count=1,
        admitted=True,
        active_ordinal=1,
        ready_since=T1,
    )
    return InferenceReplicaStatus(
        observed_generation=4,
        replicas=7,
        ready_replicas=6,
        serving_replicas=6,
        available_replicas=6,
        updated_replicas=1,
        updated_ready_replicas=1,
        current_revision=OLD,
        update_revision=NEW,
        label_selector="ome.io/inferenceservice=chat,component=engine",
        instances=(*(_ready(i) for i in range(4)), surging, flipped, creating),
        conditions=(_ready_condition("Unknown", "RolloutInProgress"),),
        rollout_hold=RolloutHold(gate="Budget", reason="maxSurge 1 in use", target=NEW, since=T1),
    )


def failure_heavy() -> InferenceReplicaStatus:
    """A revision that keeps failing: every Instance Failed with its last failure kept."""

    def failed(index: int) -> InstanceStatus:
        return InstanceStatus(
            index=index,
            incarnation=3,
            phase="Failed",
            running_revision=NEW,
            pod_count=2,
            conditions=(
                Condition(
                    type="Failed",
                    status="True",
                    reason="OOMKilled",
                    message=f"container engine of chat-engine-{index}-leader-0 was OOMKilled",
                    last_transition_time=T2,
                ),
            ),
            last_failure=InstanceTermination(
                pod_name=f"chat-engine-{index}-leader-0",
                container_name="engine",
                reason="OOMKilled",
                exit_code=137,
                time=T2,
            ),
        )

    return InferenceReplicaStatus(
        observed_generation=5,
        replicas=3,
        current_revision=OLD,
        update_revision=NEW,
        label_selector="ome.io/inferenceservice=chat,component=engine",
        instances=tuple(failed(i) for i in range(3)),
        retry_blocks=(
            RetryBlock(
                target_revision=NEW,
                state="Held",
                attempts_started=3,
                first_failure_at=T1,
                last_failure_at=T2,
                reason="OOMKilled",
            ),
        ),
        conditions=(
            _ready_condition("False", "InstanceFailed", "At least one Instance has Phase=Failed"),
        ),
    )


CASES = {"uniform": uniform, "mixed": mixed, "failure-heavy": failure_heavy}
"""Golden case name -> the status it is built from."""

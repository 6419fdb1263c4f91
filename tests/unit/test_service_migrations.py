"""Migration requests on an InferenceService once taken: removed from the ISVC, audited."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from omenative_core.model.spec import InferenceReplica, InferenceReplicaSpec, ObjectMeta
from omenative_core.model.status import InferenceReplicaStatus, MigrationStatus
from omenative_core.service import (
    AUDIT_LIMIT,
    accepted_migration_annotations,
    audit_configmap_name,
    isvc_from_json,
    merge_audit,
)

T0 = datetime(2025, 6, 1, 10, 0, tzinfo=UTC)
DONE, WAITING = "0b6e8f43-3c1d-4a0e-9f1a-2b3c4d5e6f70", "1b6e8f43-3c1d-4a0e-9f1a-2b3c4d5e6f70"


def replica(component: str, *migrations: MigrationStatus) -> InferenceReplica:
    return InferenceReplica(
        metadata=ObjectMeta(name=f"chat-{component}"),
        spec=InferenceReplicaSpec(component=component, replicas=2),
        status=InferenceReplicaStatus(migrations=migrations),
    )


def entries(text: str | None) -> list[dict[str, object]]:
    assert text is not None
    rows = json.loads(text)["entries"]
    assert isinstance(rows, list)
    return rows


def test_accepted_migrations_are_the_ones_a_replica_recorded() -> None:
    isvc = isvc_from_json({
        "metadata": {"name": "chat", "annotations": {
            f"ome.io/migration-request-v1-{DONE}": "{}",
            f"ome.io/migration-request-v1-{WAITING}": "{}",
            "other": "x",
        }},
        "spec": {},
    })
    taken = replica("engine", MigrationStatus(request_uuid=DONE))
    assert accepted_migration_annotations(isvc, {"engine": taken}) == (
        f"ome.io/migration-request-v1-{DONE}",
    )


def test_the_audit_records_a_request_from_acceptance_to_its_outcome() -> None:
    assert audit_configmap_name("chat") == "chat-ome-migration-audit"
    accepted = MigrationStatus(request_uuid=DONE, source_instance=1, from_node="n1",
                               started_at=T0, reason="maintenance")
    first = merge_audit(None, {"engine": replica("engine", accepted)})
    (row,) = entries(first)
    assert row == {"requestUUID": DONE, "component": "engine", "sourceInstance": 1,
                   "phase": "Accepted", "reason": "maintenance", "fromNode": "n1",
                   "startedAt": "2025-06-01T10:00:00Z", "completedAt": ""}
    assert merge_audit(first, {"engine": replica("engine", accepted)}) is None  # no write
    done = MigrationStatus(request_uuid=DONE, source_instance=1, from_node="n1",
                           started_at=T0, completed_at=T0 + timedelta(minutes=3),
                           phase="Completed", reason="maintenance", succeeded=True)
    second = merge_audit(first, {"engine": replica("engine", done)})
    (row,) = entries(second)
    assert row["phase"] == "Completed" and row["outcome"] == "succeeded"
    assert row["completedAt"] == "2025-06-01T10:03:00Z"
    # the InferenceReplica prunes its record: the audit keeps the row
    assert merge_audit(second, {"engine": replica("engine")}) is None


def test_the_audit_keeps_the_last_finished_ones_and_every_running_one() -> None:
    finished = [
        MigrationStatus(request_uuid=f"{i:08d}-0000-4000-8000-000000000000", phase="Failed",
                        started_at=T0, completed_at=T0 + timedelta(seconds=i))
        for i in range(AUDIT_LIMIT + 5)
    ]
    running = MigrationStatus(request_uuid=WAITING, phase="Draining", started_at=T0)
    rows = entries(merge_audit(None, {"decoder": replica("decoder", *finished, running)}))
    assert len(rows) == AUDIT_LIMIT + 1
    kept = [r["requestUUID"] for r in rows if r.get("outcome") == "failed"]
    assert kept == [m.request_uuid for m in finished[5:]]  # the oldest five went
    assert rows[-1]["requestUUID"] == WAITING and "outcome" not in rows[-1]


def test_a_relocation_counts_once_its_instance_is_ready_and_bad_history_is_not_fatal() -> None:
    moving = MigrationStatus(request_uuid=DONE, trigger="Auto", phase="Relocated",
                             started_at=T0)
    (row,) = entries(merge_audit("not json", {"engine": replica("engine", moving)}))
    assert "outcome" not in row
    moved = MigrationStatus(request_uuid=DONE, trigger="Auto", phase="Relocated",
                            started_at=T0, succeeded=True)
    (row,) = entries(merge_audit('{"entries": "x"}', {"engine": replica("engine", moved)}))
    assert row["outcome"] == "relocated"

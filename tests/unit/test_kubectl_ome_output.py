"""``kubectl ome`` formatting from status JSON, in both row encodings (pure, no cluster)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from omenative_controller.cli import ome_output as out
from omenative_core.codec import status_to_json
from omenative_core.model.status import (
    Condition,
    InferenceReplicaStatus,
    InstanceOperation,
    InstanceStatus,
    InstanceTermination,
    MigrationStatus,
    RetryBlock,
    RolloutHold,
)

NOW = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)
OLD = "llama-engine-ecd29a478c"
NEW = "llama-engine-8c5cbe7a9e"


def _status(n_ready: int = 20) -> InferenceReplicaStatus:
    rows = [
        InstanceStatus(index=i, incarnation=1, phase="Ready", running_revision=OLD,
                       target_revision=OLD, pod_count=2, serving_pod_count=2,
                       available_pod_count=2, admitted=True)
        for i in range(n_ready)
    ]
    rows.append(InstanceStatus(
        index=n_ready, incarnation=3, phase="Failed", running_revision=OLD,
        target_revision=NEW, pod_count=2, serving_pod_count=0, available_pod_count=0,
        active_ordinal=1,
        last_failure=InstanceTermination(pod_name=f"llama-engine-{n_ready}-leader-0",
                                         container_name="ome-container",
                                         reason="ImagePullBackOff", exit_code=None,
                                         message="back-off pulling image",
                                         time=NOW - timedelta(seconds=30)),
    ))
    rows.append(InstanceStatus(
        index=n_ready + 1, incarnation=1, phase="Creating", target_revision=NEW,
        pod_count=2, operation=InstanceOperation(
            id="op-1", type="Create", step="CreatePods", started_at=NOW - timedelta(minutes=2),
            deadline=None, waiting="Unschedulable", target_revision=NEW),
    ))
    return InferenceReplicaStatus(
        observed_generation=2, replicas=len(rows), ready_replicas=n_ready,
        serving_replicas=n_ready, available_replicas=n_ready, updated_replicas=1,
        current_revision=OLD, update_revision=NEW, instances=tuple(rows),
        retry_blocks=(
            RetryBlock(target_revision=NEW, state="Backoff", attempts_started=1,
                       next_retry_at=NOW + timedelta(seconds=90),
                       last_failure_at=NOW - timedelta(seconds=30), reason="ImagePullBackOff"),
            RetryBlock(target_revision="llama-engine-0123456789", state="Held",
                       attempts_started=3, reason="ErrImagePull"),
        ),
        migrations=(MigrationStatus(request_uuid="u-1", source_instance=0, surge_instance=30,
                                    phase="SurgePending", started_at=NOW - timedelta(seconds=5),
                                    from_node="node-a"),),
        conditions=(Condition(type="Ready", status="Unknown", reason="RolloutInProgress",
                              message="rolling out"),),
        rollout_hold=RolloutHold(gate="RetryBlock", reason="revision backing off",
                                 target=NEW, since=NOW - timedelta(seconds=60)),
    )


def _encodings() -> dict[str, dict[str, Any]]:
    status = _status()
    dense = status_to_json(status, encoding="DenseV1")
    columnar = status_to_json(status, encoding="ColumnarV2")
    # through a JSON round trip, as read from the API server
    return {"DenseV1": json.loads(json.dumps(dense)),
            "ColumnarV2": json.loads(json.dumps(columnar))}


def test_the_fixture_really_has_both_encodings() -> None:
    enc = _encodings()
    assert "instanceStatuses" in enc["DenseV1"]
    assert enc["ColumnarV2"].get("instanceStatusEncoding") == "ColumnarV2"
    assert "instanceStatuses" not in enc["ColumnarV2"]


@pytest.mark.parametrize("encoding", ["DenseV1", "ColumnarV2"])
def test_instance_table_reads_at_a_glance(encoding: str) -> None:
    status = out.decode_status({"status": _encodings()[encoding]})
    text = out.format_instance_table("engine", status)
    lines = text.splitlines()
    assert lines[0].split() == ["COMP", "IDX/INC", "PHASE", "PODS(S/A/T)", "REVS", "AOF",
                                "EVIDENCE"]
    assert len(lines) == 1 + 22
    assert lines[1].split() == ["engine", "0/1", "Ready", "2/2/2", "ecd29a478c", "0", "-"]
    failed = lines[21].split()
    assert failed[:6] == ["engine", "20/3", "Failed", "0/0/2", "ecd29a478c→8c5cbe7a9e", "1"]
    assert "ImagePullBackOff on llama-engine-20-leader-0" in lines[21]
    assert "Create/CreatePods waiting Unschedulable" in lines[22]
    assert lines[22].split()[4] == "-→8c5cbe7a9e"
    # columns line up: every PHASE cell starts at the same offset
    offset = lines[0].index("PHASE")
    assert all(line[offset:].split()[0] in {"PHASE", "Ready", "Failed", "Creating"}
               for line in lines)


def test_both_encodings_format_identically() -> None:
    enc = _encodings()
    dense = out.decode_status({"status": enc["DenseV1"]})
    columnar = out.decode_status({"status": enc["ColumnarV2"]})
    assert out.format_instance_table("engine", dense) == out.format_instance_table(
        "engine", columnar)
    assert out.format_retry_blocks(dense, NOW) == out.format_retry_blocks(columnar, NOW)
    assert [out.instance_json(r) for r in dense.instances] == [
        out.instance_json(r) for r in columnar.instances]


def test_empty_status_lists_no_instances() -> None:
    status = out.decode_status({"metadata": {"name": "x"}})
    assert "(no Instances)" in out.format_instance_table("engine", status)
    assert out.format_retry_blocks(status, NOW) == "no retry blocks: no revision has failed"


@pytest.mark.parametrize("encoding", ["DenseV1", "ColumnarV2"])
def test_instance_detail_shows_operation_deadline_failure_and_pods(encoding: str) -> None:
    status = out.decode_status({"status": _encodings()[encoding]})
    creating = next(r for r in status.instances if r.index == 21)
    pods = [{"metadata": {"name": "llama-engine-21-leader-0",
                          "labels": {"ome.io/revision-hash": "8c5cbe7a9e"}},
             "spec": {}, "status": {"phase": "Pending",
                                    "conditions": [{"type": "Ready", "status": "False"}]}}]
    text = out.format_instance_detail("llama-engine", "engine", creating, pods, NOW)
    assert "Phase:         Creating" in text
    assert "Operation:     Create step CreatePods (id op-1)" in text
    assert "Deadline:     parked (clock stopped)" in text
    assert "Waiting:      Unschedulable" in text
    assert "Started:      2026-12-02T11:58:00Z (2m00s ago)" in text
    assert "LastFailure:   none" in text
    assert "llama-engine-21-leader-0" in text and "Pending" in text
    failed = next(r for r in status.instances if r.index == 20)
    text = out.format_instance_detail("llama-engine", "engine", failed, [], NOW)
    assert "LastFailure:   ImagePullBackOff at 2026-12-02T11:59:30Z" in text
    assert "back-off pulling image" in text
    assert "Operation:     none" in text
    assert "Pod objects:   none" in text


def test_instance_detail_with_a_deadline() -> None:
    row = InstanceStatus(index=0, phase="Updating", operation=InstanceOperation(
        id="u", type="Update", step="Surge", deadline=NOW + timedelta(minutes=30),
        strategy="SurgeThenDrain", surge_index=4))
    text = out.format_instance_detail("x", "engine", row, [], NOW)
    assert "Deadline:     2026-12-02T12:30:00Z (in 30m)" in text
    assert "Strategy:     SurgeThenDrain" in text
    assert "SurgeIndex:   4" in text


@pytest.mark.parametrize("encoding", ["DenseV1", "ColumnarV2"])
def test_retry_blocks_table(encoding: str) -> None:
    status = out.decode_status({"status": _encodings()[encoding]})
    lines = out.format_retry_blocks(status, NOW).splitlines()
    assert lines[0].split()[:3] == ["STATE", "REVISION", "ATTEMPTS"]
    assert lines[1].split()[:3] == ["BACKOFF", NEW, "1"]
    assert "2026-12-02T12:01:30Z (in 90s)" in lines[1]
    assert "30s ago" in lines[1] and lines[1].endswith("ImagePullBackOff")
    assert lines[2].split()[:3] == ["HELD", "llama-engine-0123456789", "3"]
    assert "never (held)" in lines[2]
    assert out.retry_blocks_json(status)[1]["state"] == "Held"


def test_running_retry_block() -> None:
    status = InferenceReplicaStatus(retry_blocks=(
        RetryBlock(target_revision=NEW, state="RetryInProgress", attempts_started=2),))
    assert out.format_retry_blocks(status, NOW).splitlines()[1].split()[:4] == [
        "RUNNING", NEW, "2", "running"]


def test_held_revision_match() -> None:
    status = _status(1)
    assert out.held_revision_match(status, "llama-engine-0123456789") == [
        "llama-engine-0123456789"]
    assert out.held_revision_match(status, "0123456789") == ["llama-engine-0123456789"]
    assert out.held_revision_match(status, "01234567") == ["llama-engine-0123456789"]
    assert out.held_revision_match(status, "0123") == []
    assert out.held_revision_match(status, NEW) == []  # Backoff, not Held


def test_rollout_status_text_and_json() -> None:
    status = _status(2)
    ir = {"metadata": {"name": "llama-engine"},
          "spec": {"component": "engine", "replicas": 4, "paused": True,
                   "pauseMode": "Freeze"}}
    text = out.format_rollout_status(ir, status, NOW)
    assert f"current {OLD} -> update {NEW} (in progress)" in text
    assert "desired 4, current 4, updated 1" in text
    assert "Paused:     yes (Freeze)" in text
    assert "Hold:       gate RetryBlock: revision backing off" in text
    assert "Ready:      Unknown RolloutInProgress: rolling out" in text
    data = out.rollout_json(ir, status)
    assert data["rolloutHold"]["gate"] == "RetryBlock"
    assert data["ready"]["reason"] == "RolloutInProgress"
    assert data["updateRevision"] == NEW and data["paused"] is True
    json.dumps(data)  # serialisable


def test_migrations_and_preconditions() -> None:
    status = _status(2)
    ir = {"metadata": {"name": "llama-engine", "annotations": {
        out.ANNOTATION_MIGRATION_PREFIX + "u-2": json.dumps({"instance": 1})}}}
    text = out.format_migrations(status, out.pending_migration_requests(ir), NOW)
    assert text.splitlines()[1].split()[:6] == ["u-1", "Manual", "SurgePending", "0", "30",
                                                "node-a"]
    assert "requests not yet accepted: u-2" in text
    assert "already migrating" in (out.migration_conflict(ir, status, 0) or "")
    assert "already waiting" in (out.migration_conflict(ir, status, 1) or "")
    assert "no Instance 99" in (out.migration_conflict(ir, status, 99) or "")
    assert out.migration_conflict(ir, status, 2) is None
    assert out.migrations_json(status, ["u-2"])["migrations"][0]["phase"] == "SurgePending"


def test_migration_request_body() -> None:
    value = json.loads(out.migration_request(
        instance=2, component="engine", from_node="node-a", hint_nodes=["n1", "n2"],
        reason="maintenance", requested_by="alice", requested_at=NOW))
    assert value == {"schemaVersion": "v1", "component": "engine", "instance": 2,
                     "from_node": "node-a", "hint_target_nodes": ["n1", "n2"],
                     "reason": "maintenance", "requested_at": "2026-12-02T12:00:00Z",
                     "requested_by": "alice"}


def test_scale_refusals() -> None:
    settled = InferenceReplicaStatus(replicas=2, updated_replicas=2, current_revision=OLD,
                                     update_revision=OLD)
    ir: dict[str, Any] = {"metadata": {"name": "x"}, "spec": {"replicas": 2}}
    assert "to 0" in (out.scale_refusal(ir, settled, 0) or "")
    assert out.scale_refusal(ir, settled, 3) is None
    assert "rollout is in progress" in (out.scale_refusal(ir, _status(2), 3) or "")
    migrating = InferenceReplicaStatus(
        replicas=2, updated_replicas=2, current_revision=OLD, update_revision=OLD,
        migrations=(MigrationStatus(request_uuid="m", phase="Draining"),))
    assert "migration work" in (out.scale_refusal(ir, migrating, 3) or "")
    done = InferenceReplicaStatus(
        replicas=2, updated_replicas=2, current_revision=OLD, update_revision=OLD,
        migrations=(MigrationStatus(request_uuid="m", phase="Completed"),))
    assert out.scale_refusal(ir, done, 3) is None


def test_short_revision_and_age() -> None:
    assert out.short_revision(OLD) == "ecd29a478c"
    assert out.short_revision("") == "-"
    assert out.short_revision("plain") == "plain"
    assert out.age(None, NOW) == "-"
    assert out.age(NOW - timedelta(hours=3, minutes=5), NOW) == "3h05m ago"
    assert out.age(NOW - timedelta(days=3), NOW) == "3d ago"

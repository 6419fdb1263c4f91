"""``kubectl ome`` formatting from status JSON, in both row encodings (pure, no cluster)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from omenative_controller.cli import ome_output as out
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
from omenative_core.rollout import (
    GroupState,
    RolloutState,
    RolloutStateError,
    parse_rollout,
    plan_token,
    rollout_to_json,
    state_to_json,
)
from omenative_core.status.wire import status_to_json

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


def test_a_request_without_a_known_source_node_leaves_it_out_and_passes_admission() -> None:
    from omenative_core.service.migration_request import (
        MigrationTarget,
        migration_request_problem,
    )

    value = out.migration_request(
        instance=0, component="engine", from_node=None, hint_nodes=[],
        reason="", requested_by="alice", requested_at=NOW)
    assert "from_node" not in json.loads(value)
    target = MigrationTarget(modes={"engine": "OMENative"}, implied="engine",
                             kind="InferenceReplica")
    key = "ome.io/migration-request-v1-0b6e8f43-3c1d-4a0e-9f1a-2b3c4d5e6f70"
    assert migration_request_problem(key, value, target) is None


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


# ---------------------------------------------------------------------------- rollout groups

E1, E2 = "llama-engine-aaaaaaaaaa", "llama-engine-bbbbbbbbbb"
D1, D2 = "llama-decoder-cccccccccc", "llama-decoder-dddddddddd"
R1 = "llama-router-eeeeeeeeee"
ROLLOUT: dict[str, Any] = {"groups": [
    {"components": ["engine", "decoder"], "canary": {"steps": [
        {"capacity": "25%", "traffic": 25, "pause": {}},
        {"capacity": "50%", "traffic": 50, "pause": {"duration": "10m"}},
        {"capacity": "100%", "traffic": 100,
         "analysis": {"metrics": [{"name": "err", "query": "q", "operator": "LT",
                                   "threshold": 0.05}]}}]}},
    {"components": ["router"], "rollingUpdate": {"maxSurge": 1}}]}


def _canary(**kw: Any) -> GroupState:
    base: dict[str, Any] = {
        "index": 0, "components": ("engine", "decoder"), "progression": "canary",
        "phase": "Paused", "step": 0, "gate": "Manual",
        "stable": {"engine": E1, "decoder": D1}, "canary": {"engine": E2, "decoder": D2}}
    base.update(kw)
    return GroupState(**base)


def _router(**kw: Any) -> GroupState:
    base: dict[str, Any] = {
        "index": 1, "components": ("router",), "progression": "rollingUpdate",
        "phase": "Stable", "stable": {"router": R1}, "stable_at": NOW - timedelta(hours=3)}
    base.update(kw)
    return GroupState(**base)


def _rstate(*groups: GroupState, rollout: dict[str, Any] | None = None) -> RolloutState:
    spec = parse_rollout(rollout or ROLLOUT)
    return RolloutState(plan_token=plan_token(spec), plan=rollout_to_json(spec), groups=groups)


def _member(name: str, comp: str, replicas: int, rows: list[str], cur: str,
            upd: str) -> dict[str, Any]:
    st = InferenceReplicaStatus(
        replicas=len(rows), current_revision=cur, update_revision=upd,
        instances=tuple(InstanceStatus(index=i, incarnation=1, phase="Ready",
                                       running_revision=r, target_revision=r, pod_count=1,
                                       serving_pod_count=1, available_pod_count=1)
                        for i, r in enumerate(rows)))
    return {"kind": "InferenceReplica", "metadata": {"name": name},
            "spec": {"component": comp, "replicas": replicas}, "status": status_to_json(st)}


REPLICAS = {
    "engine": _member("llama-engine", "engine", 4, [E1, E1, E1, E2], E1, E2),
    "decoder": _member("llama-decoder", "decoder", 2, [D1, D2], D1, D2),
    "router": _member("llama-router", "router", 1, [R1], R1, R1),
}


def _isvc(state: RolloutState, annotations: dict[str, str] | None = None,
          rollout: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "kind": "InferenceService",
        "metadata": {"name": "llama", "namespace": "prod", "annotations": annotations or {}},
        "spec": {"rollout": rollout or ROLLOUT},
        "status": {"rollout": state_to_json(state), "components": {
            "engine": {
                "traffic": [
                    {"revisionName": "llama-engine-rev-aaaaaaaaaa", "percent": 75,
                     "tag": "stable"},
                    {"revisionName": "llama-engine-rev-bbbbbbbbbb", "percent": 25,
                     "tag": "canary", "latestRevision": True}],
                "lifecycle": {"rolloutHold": {"gate": "Budget", "reason": "no surge room",
                                              "since": "2026-12-02T11:58:00Z"}}},
            "decoder": {"traffic": [
                {"revisionName": "llama-decoder-rev-cccccccccc", "percent": 50, "tag": "stable"},
                {"revisionName": "llama-decoder-rev-dddddddddd", "percent": 50,
                 "tag": "canary"}]}}},
    }


def _row(text: str, first: str) -> list[str]:
    return next(line.split() for line in text.splitlines() if line.split()[:1] == [first])


def test_service_rollout_status_reads_per_group_and_member() -> None:
    state = _rstate(_canary(), _router())
    isvc = _isvc(state)
    assert out.rollout_state(isvc) == state  # read back through the JSON written
    text = out.format_service_rollout(isvc, state, REPLICAS, NOW)
    lines = text.splitlines()
    assert lines[0] == "Rollout:   inferenceservice prod/llama"
    assert lines[1] == f"Plan:      {state.plan_token} pinned"
    assert lines[2].startswith("Explain:   group 0 (engine+decoder) Paused at step 1/3: "
                               "manual pause")
    assert _row(text, "GROUP") == ["GROUP", "COMPONENTS", "PROGRESSION", "PHASE", "STEP",
                                   "GATE", "HOLD"]
    assert _row(text, "0") == ["0", "engine+decoder", "canary", "Paused", "1/3", "Manual", "-"]
    assert _row(text, "1") == ["1", "router", "rollingUpdate", "Stable", "-", "-", "-"]
    # engine: 1 of 4 on the canary is Ready and 25% of 4 allows 1
    assert _row(text, "engine") == ["engine", "0", "aaaaaaaaaa", "bbbbbbbbbb", "-", "1/1/4",
                                    "aaaaaaaaaa", "75%", "stable,", "bbbbbbbbbb", "25%",
                                    "canary", "Budget"]
    assert _row(text, "decoder")[:6] == ["decoder", "0", "cccccccccc", "dddddddddd", "-",
                                         "1/1/2"]
    assert _row(text, "router") == ["router", "1", "eeeeeeeeee", "-", "-", "-", "-", "-"]
    assert "CAP(R/A/D): canary Instances Ready / allowed by the step / desired" in text
    assert "  engine: Budget: no surge room, since 2026-12-02T11:58:00Z (2m00s ago)" in text
    assert "Requests:" not in text


def test_service_rollout_json() -> None:
    state = _rstate(_canary(), _router())
    data = out.service_rollout_json(_isvc(state, {"ome.io/rollout-promote": "bbbbbbbbbb"}),
                                    state, REPLICAS, NOW)
    json.dumps(data)
    assert data["kind"] == "InferenceService" and data["active"] is True
    assert data["planToken"] == data["specPlanToken"] and data["drifted"] is False
    assert data["requests"] == {"ome.io/rollout-promote": "bbbbbbbbbb"}
    g0 = data["groups"][0]
    assert (g0["phase"], g0["step"], g0["steps"], g0["gate"]) == ("Paused", 1, 3, "Manual")
    engine = g0["members"][0]
    assert engine["stable"] == E1 and engine["canary"] == E2
    assert (engine["readyOnCanary"], engine["allowed"], engine["desired"]) == (1, 1, 4)
    assert engine["traffic"][1] == {"revisionName": "llama-engine-rev-bbbbbbbbbb",
                                    "percent": 25, "tag": "canary", "latestRevision": True}
    assert engine["rolloutHold"]["gate"] == "Budget"
    assert data["groups"][1]["members"][0]["allowed"] is None


def test_service_rollout_shows_drift_holds_failures_and_requests() -> None:
    hold = RolloutHold(gate="Sequential", reason="Sequential waiting on engine",
                       target=R1, since=NOW - timedelta(minutes=3))
    state = _rstate(_canary(phase="Canarying", step=2, gate="Analysis"),
                    _router(phase="Pending", hold=hold,
                            canary={"router": "llama-router-ffffff0000"}))
    edited = json.loads(json.dumps(ROLLOUT))
    edited["groups"][1]["rollingUpdate"]["maxSurge"] = 2
    isvc = _isvc(state, {"ome.io/rollout-rollback": "true"}, rollout=edited)
    text = out.format_service_rollout(isvc, state, REPLICAS, NOW)
    token = out.spec_plan_token(isvc)
    assert token is not None and token != state.plan_token
    assert f"spec.rollout is now {token} (drifted: kubectl ome rollout repin" in text
    assert "Requests:  ome.io/rollout-rollback=true (not yet consumed" in text
    assert _row(text, "1") == ["1", "router", "rollingUpdate", "Pending", "batch", "1", "-",
                               "Sequential"]
    assert ("  group 1 (router): Sequential: Sequential waiting on engine (target "
            f"{R1}), since") in text
    assert "plan drifted" in out.explain_line(isvc, state, NOW)


def test_no_rollout_says_so() -> None:
    bare = {"metadata": {"name": "llama", "namespace": "prod"}, "spec": {}}
    state = out.rollout_state(bare)
    assert not out.has_rollout(bare, state)
    assert out.explain_line(bare, state, NOW) == (
        "no rollout groups: spec.rollout is not set, each component rolls on its own")
    assert "no rollout groups" in out.format_service_rollout(bare, state, {}, NOW)
    waiting = {**bare, "spec": {"rollout": ROLLOUT}}
    assert out.explain_line(waiting, state, NOW).startswith("no rollout state yet")
    assert out.promote_target(bare, state, NOW) == (
        "no rollout: spec.rollout is not set (each component rolls on its own)")
    assert out.rollback_preview(waiting, state, NOW) == (
        "no rollout yet: the controller has not recorded status.rollout")


def test_bad_rollout_state_names_the_path() -> None:
    isvc = {"status": {"rollout": {"groups": [{"phase": "Sideways"}]}}}
    with pytest.raises(RolloutStateError, match=r"status.rollout.groups\[0\].phase"):
        out.rollout_state(isvc)


def test_history_tags_stable_canary_rejected_and_when() -> None:
    state = _rstate(_canary(phase="RolledBack", gate="", canary={},
                            rejected={"engine": E2, "decoder": D2}),
                    _router())
    revisions = {"engine": [
        {"metadata": {"name": E2, "creationTimestamp": "2026-12-02T11:50:00Z"}, "revision": 2},
        {"metadata": {"name": E1, "creationTimestamp": "2026-12-01T12:00:00Z"}, "revision": 1,
         "data": {"pairingProtocol": "nixl-v2"}}]}
    isvc = _isvc(state)
    text = out.format_history(isvc, state, REPLICAS, revisions, NOW)
    assert _row(text, "COMPONENT") == ["COMPONENT", "REVISION", "NAME", "CREATED", "ROLE",
                                       "INSTANCES"]
    rows = [line.split() for line in text.splitlines()[1:]]
    assert rows[0] == ["engine", "1", E1, "24h00m", "ago", "stable,current", "3"]
    assert rows[1] == ["engine", "2", E2, "10m", "ago", "rejected,update", "1"]
    assert rows[2][:5] == ["decoder", "-", D1, "-", "stable,current"]
    assert rows[-1] == ["router", "-", R1, "-", "stable,current", "(since", "3h00m", "ago)",
                        "1"]
    data = out.history_json(isvc, state, REPLICAS, revisions)
    json.dumps(data)
    engine = data["components"][0]
    assert engine["group"] == 0
    assert [r["revision"] for r in engine["revisions"]] == [1, 2]
    assert engine["revisions"][0]["pairingProtocol"] == "nixl-v2"
    assert engine["revisions"][1]["roles"] == ["rejected", "update"]
    empty = out.format_history({"metadata": {}}, RolloutState(), {}, {}, NOW)
    assert empty.startswith("no revisions")


def test_promote_targets_the_gated_canary() -> None:
    state = _rstate(_canary(), _router())
    found = out.promote_target(_isvc(state), state, NOW)
    assert isinstance(found, out.PromoteTarget)
    assert found.value == "bbbbbbbbbb" and found.group.index == 0 and found.notes == ()
    # at an analysis gate a promote without --override-analysis only waits
    state = _rstate(_canary(phase="Canarying", step=2, gate="Analysis"), _router())
    found = out.promote_target(_isvc(state), state, NOW)
    assert isinstance(found, out.PromoteTarget)
    assert "waits for a passing round unless --override-analysis" in found.notes[0]
    found = out.promote_target(_isvc(state), state, NOW, override_analysis=True)
    assert isinstance(found, out.PromoteTarget) and found.notes == ()
    state = _rstate(_canary(phase="Paused", step=1, gate="Pause"), _router())
    found = out.promote_target(_isvc(state), state, NOW)
    assert isinstance(found, out.PromoteTarget) and "does not shorten" in found.notes[0]


def test_promote_refusals() -> None:
    stable = _rstate(_canary(phase="Stable", gate="", canary={}), _router())
    refusal = out.promote_target(_isvc(stable), stable, NOW)
    assert refusal == ("no canary to promote: Stable: every group is on its stable revision")
    state = _rstate(_canary(), _router())
    assert out.promote_target(_isvc(state), state, NOW, group=1) == (
        "group 1 has no canary to promote")
    assert out.promote_target(_isvc(state), state, NOW, group=7) == "no group 7 (groups: 0, 1)"
    rolling = _isvc(state, {"ome.io/rollout-rollback": "true"})
    assert out.promote_target(rolling, state, NOW) == (
        "a rollback is requested (ome.io/rollout-rollback=true): promote is refused while it "
        "is present (it is removed when a new revision appears)")


def test_rollback_preview_and_refusals() -> None:
    state = _rstate(_canary(), _router())
    assert out.rollback_preview(_isvc(state), state, NOW) == [
        "group 0 (engine+decoder): engine bbbbbbbbbb -> aaaaaaaaaa",
        "group 0 (engine+decoder): decoder dddddddddd -> cccccccccc"]
    again = out.rollback_preview(_isvc(state, {"ome.io/rollout-rollback": "true"}), state, NOW)
    assert isinstance(again, str) and again.startswith("a rollback is requested")
    stable = _rstate(_canary(phase="Stable", gate="", canary={}), _router())
    nothing = out.rollback_preview(_isvc(stable), stable, NOW)
    assert nothing == ("nothing to roll back: no rollout is in progress (Stable: every group "
                       "is on its stable revision)")


def test_repin_checks() -> None:
    assert out.valid_repin_token("now") and out.valid_repin_token("rp1:3f9a0c1b2d4e")
    assert not out.valid_repin_token("rp1:3F9A0C1B2D4E") and not out.valid_repin_token("rp1:1")
    state = _rstate(_canary(), _router())
    isvc = _isvc(state)
    assert out.repin_refusal(isvc, state, "now") == (
        f"the run already follows {state.plan_token}: nothing to repin")
    edited = json.loads(json.dumps(ROLLOUT))
    edited["groups"][1]["rollingUpdate"]["maxSurge"] = 2
    drifted = _isvc(state, rollout=edited)
    token = out.spec_plan_token(drifted)
    assert token is not None
    assert out.repin_refusal(drifted, state, "now") is None
    assert out.repin_refusal(drifted, state, token) is None
    assert out.repin_refusal(drifted, state, "rp1:000000000000") == (
        f"rp1:000000000000 is not the current plan (spec.rollout is {token})")
    stable = _rstate(_canary(phase="Stable", gate="", canary={}), _router())
    assert out.repin_refusal(_isvc(stable, rollout=edited), stable, "now") == (
        "no run is active: nothing to repin (a new plan applies at once)")
    back = _rstate(_canary(phase="RollingBack", gate=""), _router())
    assert out.repin_refusal(_isvc(back, rollout=edited), back, "now") == (
        "a rollback is in progress: repin is refused")

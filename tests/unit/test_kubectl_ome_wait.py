"""``kubectl ome wait`` (OME's predicates and WaitReport), ``scale``'s OME arguments and
bounds, ``instance list ISVC`` over every component and ``--dry-run`` parsing (no cluster)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click
import pytest
from click.testing import CliRunner

from omenative_controller.cli import get_output as go
from omenative_controller.cli import history_output as hist
from omenative_controller.cli import ome_output as out
from omenative_controller.cli import wait_output as wo
from omenative_controller.cli.kubectl_migration import _replicas_wanted
from omenative_controller.cli.kubectl_ome import cli
from omenative_core.model.status import (
    InferenceReplicaStatus,
    InstanceStatus,
    MigrationStatus,
    RetryBlock,
)
from omenative_core.status.wire import status_to_json

REQ = "12345678-1234-4234-8234-123456789abc"
REV = "chat-engine-7f9c4d2b"
ISVC = {"metadata": {"name": "chat", "uid": "isvc-uid"}}


def _ir(status: InferenceReplicaStatus, *, name: str = "chat-engine", uid: str = "ir-uid",
        component: str = "engine", generation: int = 1, replicas: int = 2,
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": uid, "generation": generation,
                         "annotations": annotations or {}},
            "spec": {"parentRef": {"name": "chat"}, "component": component,
                     "replicas": replicas},
            "status": status_to_json(status)}


def _spec(predicate: str, **given: Any) -> wo.WaitSpec:
    flags = dict.fromkeys(("component", "replicas", "request_id", "revision", "ir_name",
                           "ir_uid"))
    flags.update(given)
    return wo.parse_wait(predicate, flags)


HELD = {"component": "engine", "revision": REV, "ir_name": "chat-engine", "ir_uid": "ir-uid"}


def test_predicates_are_spelled_as_in_omes_report() -> None:
    assert _spec("condition=Ready").requested == "Ready=True"
    assert _spec("condition=Ready=Unknown").want == "Unknown"
    assert _spec("migration=terminal", request_id=REQ).requested == "Migration=Terminal"
    assert _spec("held-revision=unheld", **HELD).requested == "HeldRevision=Unheld"
    assert _spec("replicas=current", component="engine", replicas=3).requested == \
        "Replicas=Current"


@pytest.mark.parametrize(("predicate", "given", "message"), [
    ("rollout=done", {}, "not supported"),
    ("condition=Ready=Maybe", {}, "not supported"),
    ("condition=Ready", {"request_id": REQ}, "does not take --request-id"),
    ("migration=terminal", {}, "needs --request-id"),
    ("migration=terminal", {"request_id": "not-a-uuid"}, "canonical"),
    ("held-revision=unheld", {"component": "engine", "revision": REV}, "needs --ir-name"),
    ("held-revision=unheld", {**HELD, "revision": "7f9c4d2b"}, "full ISVC-engine-HASH"),
    ("replicas=current", {"component": "engine", "replicas": 0}, "at least 1"),
    ("replicas=ready", {"component": "gpu", "replicas": 1}, "one of engine"),
    ("replicas=current", {"component": "engine", "replicas": 1, "ir_name": "x"},
     "go together"),
])
def test_bad_flags_are_refused_naming_the_flag(predicate: str, given: dict[str, Any],
                                               message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _spec(predicate, **given)


def test_timeouts_are_go_durations_up_to_a_day() -> None:
    assert wo.parse_duration("1m0s") == 60
    assert wo.parse_duration("1h30m") == 5400
    assert wo.parse_duration("1500ms") == 1.5
    for bad in ("", "0s", "25h", "10", "5 m", "-1m"):
        with pytest.raises(ValueError, match="--timeout"):
            wo.parse_duration(bad)


def test_ready_condition() -> None:
    spec = _spec("condition=Ready")
    ready = {**ISVC, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert wo.check(spec, ready, []).reason == "ConditionMatched"
    not_yet = {**ISVC, "status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    assert not wo.check(spec, not_yet, []).matched
    assert wo.check(spec, ISVC, []).reason == "ConditionNotRecorded"
    both = {**ISVC, "status": {"conditions": [{"type": "Ready", "status": "True"},
                                              {"type": "Ready", "status": "False"}]}}
    assert wo.check(spec, both, []).reason == "InvalidCondition"


@pytest.mark.parametrize(("phase", "matched", "reason", "outcome"), [
    ("Draining", False, "MigrationInProgress", "InProgress"),
    ("Completed", True, "MigrationMatched", "Completed"),
    ("Failed", True, "MigrationMatched", "Failed"),
])
def test_migration_terminal(phase: str, matched: bool, reason: str, outcome: str) -> None:
    spec = _spec("migration=terminal", request_id=REQ)
    status = InferenceReplicaStatus(observed_generation=1, migrations=(
        MigrationStatus(request_uuid=REQ, phase=phase),))
    router = _ir(InferenceReplicaStatus(observed_generation=1), name="chat-router",
                 component="router")
    got = wo.check(spec, ISVC, [router, _ir(status)])
    assert (got.matched, got.reason) == (matched, reason)
    assert ("Migration outcome", outcome) in got.rows
    assert ("Component", "engine") in got.rows


def test_migration_not_recorded_and_stale_do_not_match() -> None:
    spec = _spec("migration=terminal", request_id=REQ)
    assert wo.check(spec, ISVC, [_ir(InferenceReplicaStatus())]).reason == \
        "MigrationNotRecorded"
    done = InferenceReplicaStatus(observed_generation=1, migrations=(
        MigrationStatus(request_uuid=REQ, phase="Completed"),))
    stale = wo.check(spec, ISVC, [_ir(done, generation=2)])
    assert (stale.matched, stale.reason) == (False, "InvalidMigration")


def test_held_revision_unheld_needs_the_block_and_the_mailbox_gone() -> None:
    spec = _spec("held-revision=unheld", **HELD)
    held = InferenceReplicaStatus(observed_generation=1, retry_blocks=(
        RetryBlock(target_revision=REV, state="Held"),))
    assert wo.check(spec, ISVC, [_ir(held)]).reason == "Held"
    released = InferenceReplicaStatus(observed_generation=1)
    pending = _ir(released, annotations={out.ANNOTATION_RELEASE_HELD: REV})
    assert wo.check(spec, ISVC, [pending]).reason == "MailboxPending"
    done = wo.check(spec, ISVC, [_ir(released)])
    assert (done.matched, done.reason) == (True, "Unheld")
    assert ("Target state", "Absent") in done.rows
    assert wo.check(spec, ISVC, [_ir(released, uid="other")]).reason == "ReplicaReplaced"
    assert wo.check(spec, ISVC, []).reason == "ReplicaMissing"
    assert wo.check(spec, ISVC, [_ir(released, generation=3)]).reason == "SourceStale"


def test_replica_counts() -> None:
    status = InferenceReplicaStatus(observed_generation=1, replicas=2, ready_replicas=1,
                                    instances=(InstanceStatus(index=0), InstanceStatus(index=1)))
    current = _spec("replicas=current", component="engine", replicas=2)
    assert wo.check(current, ISVC, [_ir(status)]).reason == "ReplicaScaleMatched"
    assert wo.check(current, ISVC, [_ir(status, replicas=3)]).reason == \
        "ReplicaScaleNotMatched"
    ready = _spec("replicas=ready", component="engine", replicas=2)
    assert wo.check(ready, ISVC, [_ir(status)]).reason == "ReplicaReadyNotMatched"
    assert wo.check(ready, ISVC, []).reason == "ReplicaReadyNotRecorded"


def test_report_table_and_json() -> None:
    spec = _spec("held-revision=unheld", **HELD)
    last = wo.check(spec, ISVC, [_ir(InferenceReplicaStatus(observed_generation=1))])
    text = wo.report_table("prod/chat", spec, "Matched", last, 12, {"gets": 2, "polls": 0})
    lines = text.splitlines()
    assert lines[0].split() == ["FIELD", "VALUE"]
    assert lines[1].split() == ["Service", "prod/chat"]
    assert lines[2].split() == ["Requested", "HeldRevision=Unheld"]
    assert any(line.split() == ["Outcome", "Matched"] for line in lines)
    assert any(line.split() == ["Reason", "Unheld"] for line in lines)
    assert any(line.split() == ["GET", "/", "WATCH", "/", "polls", "2", "/", "0", "/", "0"]
               for line in lines)
    report = wo.report_json("prod", "chat", spec, "TimedOut", None, 5, {"gets": 1},
                            "2026-12-06T10:00:00Z")
    assert (report["apiVersion"], report["kind"]) == ("cli.ome.io/v1alpha1", "WaitReport")
    assert report["content"]["reason"] == "PredicateUnmet"
    assert wo.OUTCOME_EXIT["TimedOut"] == 2 and wo.OUTCOME_EXIT["Matched"] == 0


def test_scale_takes_omes_replicas_flag_and_refuses_outside_the_bounds() -> None:
    assert _replicas_wanted(None, 3) == 3
    assert _replicas_wanted(3, None) == 3
    with pytest.raises(click.UsageError, match="disagree"):
        _replicas_wanted(2, 3)
    with pytest.raises(click.UsageError, match="--replicas"):
        _replicas_wanted(None, None)
    bounds = {"minReplicas": 2, "maxReplicas": 4}
    assert "below the component's minReplicas 2" in (out.scale_bounds_refusal(bounds, 1) or "")
    assert "above the component's maxReplicas 4" in (out.scale_bounds_refusal(bounds, 5) or "")
    assert out.scale_bounds_refusal(bounds, 4) is None
    assert out.scale_bounds_refusal(None, 9) is None


def test_instance_list_of_a_service_is_one_table_over_its_components() -> None:
    engine = InferenceReplicaStatus(instances=(InstanceStatus(index=0, phase="Ready"),
                                               InstanceStatus(index=1, phase="Creating")))
    router = InferenceReplicaStatus(instances=(InstanceStatus(index=0, phase="Ready"),))
    text = out.format_components_table([("engine", engine, None), ("router", router, None)])
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["COMP", "IDX/INC", "PHASE"]
    assert [line.split()[0] for line in lines[1:]] == ["engine", "engine", "router"]


@pytest.mark.parametrize("verb", [
    ["scale", "chat", "--component", "engine", "--replicas", "3"],
    ["instance", "release-held", "chat", "--revision", REV],
    ["migration", "start", "chat", "--instance", "0"],
    ["rollout", "pause", "chat"],
    ["rollout", "promote", "chat"],
])
def test_mutating_verbs_take_omes_dry_run(verb: list[str]) -> None:
    result = CliRunner().invoke(cli, [*verb, "--dry-run", "sideways"], obj=None)
    assert result.exit_code == 2
    assert "'sideways' is not one of 'none', 'client', 'server'" in result.output


def test_migration_history_merges_live_records_and_the_audit_map() -> None:
    live = InferenceReplicaStatus(migrations=(MigrationStatus(
        request_uuid="7c9e6679-aaaa-4aaa-8aaa-aaaaaaaaaaaa", phase="Completed",
        started_at=datetime(2026, 9, 28, 10, 1, tzinfo=UTC),
        completed_at=datetime(2026, 9, 28, 10, 31, tzinfo=UTC),
        message="migrated to instance=4"),))
    audit_map = {"data": {"history.json": json.dumps({"entries": [
        {"requestUUID": "3f2a9c1e-bbbb-4bbb-8bbb-bbbbbbbbbbbb", "component": "engine",
         "phase": "Failed", "startedAt": "2026-09-28T09:00:00Z",
         "completedAt": "2026-09-28T09:20:00Z", "outcome": "failed"}]})}}
    audited, issues = hist.audit_records(audit_map)
    records = hist.auth_records("engine", live) + audited
    lines = hist.format_history_table(records, issues).splitlines()
    assert lines[0].split() == ["EVID", "REQUEST/COMP", "PHASE/STATE", "WHEN", "DETAIL"]
    assert lines[1].split()[:4] == ["AUTH", "7c9e6679/E", "Completed/T", "09-28T10:31Z"]
    assert lines[2].split() == ["AUDIT", "3f2a9c1e/E", "Failed/T", "09-28T09:20Z", "failed"]
    report = hist.history_json("prod", "chat", records, issues, audit_found=True)
    assert report["kind"] == "MigrationHistoryReport"
    assert report["content"]["summary"] == {"state": "Reported", "records": 2}
    broken, codes = hist.audit_records({"data": {"history.json": "{not json"}})
    assert (broken, codes) == ([], ["AuditMalformed"])
    assert "Empty" in hist.format_history_table([], [])


def test_get_accepts_omes_resource_names_in_any_case() -> None:
    assert go.kind_of("ISVC") == "inferenceservices"
    assert go.kind_of("ir") == "inferencereplicas"
    assert go.kind_of("csrt") == "clusterservingruntimes"
    assert go.kind_of("irep") is None  # kubectl's short name, not OME's plugin's


def test_get_inferencereplicas_has_omes_columns() -> None:
    now = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    ir = {"metadata": {"name": "chat-engine", "namespace": "prod",
                       "creationTimestamp": "2026-12-06T09:00:00Z"},
          "spec": {"component": "engine", "parentRef": {"name": "chat"}, "replicas": 3},
          "status": {"replicas": 3, "readyReplicas": 2,
                     "conditions": [{"type": "Ready", "status": "False",
                                     "reason": "InstancesNotReady"}]}}
    lines = go.format_get("inferencereplicas", [ir], now).splitlines()
    assert lines[0].split() == ["NAME", "COMPONENT", "PARENT", "DESIRED", "CURRENT", "READY",
                                "LIFECYCLE", "AGE"]
    assert lines[1].split() == ["chat-engine", "engine", "chat", "3", "3", "2",
                                "Ready=False", "3h"]
    wide = go.format_get("inferencereplicas", [ir], now, wide=True,
                         all_namespaces=True).splitlines()
    assert wide[0].split()[:3] == ["NAMESPACE", "NAME", "COMPONENT"]
    assert "InstancesNotReady" in wide[1] and "PAUSED" in wide[0]


def test_get_runtimes_merges_both_scopes() -> None:
    now = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    formats = [{"name": n} for n in ("safetensors", "pytorch", "onnx", "gguf", "tf")]
    rows = [{"kind": "ServingRuntime", "metadata": {"name": "srt"},
             "spec": {"supportedModelFormats": formats[:1]}},
            {"kind": "ClusterServingRuntime", "metadata": {"name": "csrt"},
             "spec": {"disabled": True, "supportedModelFormats": formats}}]
    lines = go.format_get("runtimes", rows, now).splitlines()
    assert lines[0].split() == ["NAME", "SCOPE", "DISABLED", "FORMATS", "AGE"]
    assert lines[1].split()[:4] == ["srt", "Namespaced", "false", "safetensors"]
    assert lines[2].split()[:4] == ["csrt", "Cluster", "true", "safetensors,pytorch,onnx,+2"]


@pytest.mark.parametrize(("seconds", "shown"), [
    (45, "45s"), (450, "7m30s"), (600, "10m"), (10800, "3h"), (11100, "3h5m"),
    (36000, "10h"), (3 * 86400 + 7200, "3d2h"), (30 * 86400, "30d"),
])
def test_age_reads_as_kubectls(seconds: int, shown: str) -> None:
    assert go.human_duration(seconds) == shown

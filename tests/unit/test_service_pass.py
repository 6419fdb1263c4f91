"""``plan_service``: one InferenceService pass planned from one snapshot, as the shell
carries it out (rejections, migration takes, applies, status, per-revision Services)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from omenative_core.model.spec import InferenceReplica, ObjectMeta
from omenative_core.model.status import InferenceReplicaStatus, MigrationStatus
from omenative_core.service import (
    VALIDATION_CONDITION,
    ServiceSnapshot,
    isvc_from_json,
    plan_service,
    render_service,
)
from omenative_core.status.wire import replica_from_json

NOW = datetime(2026, 1, 1, tzinfo=UTC)
DONE = "0b6e8f43-3c1d-4a0e-9f1a-2b3c4d5e6f70"
MIGRATION = f"ome.io/migration-request-v1-{DONE}"
REQUEST = ('{"schemaVersion":"v1","component":"engine","instance":0,"hint_target_nodes":[],'
           '"reason":"r","requested_at":"2026-01-01T00:00:00Z","requested_by":"me"}')


def _raw(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": "prod", "uid": "u", "generation": 3},
        "spec": {"deploymentMode": "OMENative",
                 "engine": {"minReplicas": 2, "runner": {"image": "x"}},
                 "router": {"runner": {"image": "r"}}, **spec},
    }


def _types(status: dict[str, Any] | None) -> dict[str, str]:
    assert status is not None
    return {c["type"]: c["status"] for c in status["conditions"]}


def test_a_valid_isvc_applies_each_component_in_order_and_writes_its_status() -> None:
    raw = _raw()
    raw["status"] = {"conditions": [{"type": VALIDATION_CONDITION, "status": "False",
                                     "reason": "InvalidSpec", "message": "was bad"}]}
    sp = plan_service(ServiceSnapshot(isvc=raw, now=NOW))
    assert sp.rejection is None and not sp.wait_for_lws
    assert [c for c, _ in sp.applies][:1] == ["engine"]
    kinds = [(c, o["kind"]) for c, o in sp.applies if o["kind"] == "InferenceReplica"]
    assert kinds == [("engine", "InferenceReplica"), ("router", "InferenceReplica")]
    # the shell used to strip SpecValid itself: now the plan's status comes without it
    assert _types(sp.status) == {"EngineReady": "False", "RouterReady": "False",
                                 "Ready": "False"}
    names = sorted(sp.revision_services)
    assert len(names) == 4 and all(n.startswith(("chat-engine-rev-", "chat-router-rev-"))
                                   for n in names)


def test_the_same_snapshot_plans_the_same_pass() -> None:
    snap = ServiceSnapshot(isvc=_raw(), now=NOW)
    assert plan_service(snap) == plan_service(snap)


def test_a_spec_that_does_not_decode_is_reported_and_nothing_is_written() -> None:
    raw = _raw()
    raw["spec"]["engine"]["minReplicas"] = "two"
    sp = plan_service(ServiceSnapshot(isvc=raw, now=NOW))
    assert sp.rejection is not None and sp.rejection.reason == "InvalidSpec"
    assert sp.applies == () and sp.take_migrations == () and sp.warnings == ()
    assert _types(sp.status) == {VALIDATION_CONDITION: "False"}


def test_a_rollout_spec_that_cannot_be_used_is_a_rejection_before_any_apply() -> None:
    sp = plan_service(ServiceSnapshot(isvc=_raw(rollout={"groups": "x"}), now=NOW))
    assert sp.rejection is not None and sp.rejection.reason == "InvalidRolloutSpec"
    assert "spec.rollout.groups" in sp.rejection.message
    assert sp.applies == ()
    assert _types(sp.status)[VALIDATION_CONDITION] == "False"


def test_a_recorded_migration_request_is_taken_and_no_longer_forwarded() -> None:
    raw = _raw()
    raw["metadata"]["annotations"] = {MIGRATION: REQUEST, "keep": "me"}
    rendered = render_service(isvc_from_json(raw), [], ())
    cp = rendered.component("engine")
    assert cp is not None and cp.replica is not None
    assert MIGRATION in cp.replica["metadata"]["annotations"]  # forwarded until taken
    ir = replica_from_json(cp.replica)
    live = InferenceReplica(metadata=ObjectMeta(name=ir.metadata.name), spec=ir.spec,
                            status=InferenceReplicaStatus(
                                migrations=(MigrationStatus(request_uuid=DONE),)))
    sp = plan_service(ServiceSnapshot(isvc=raw, now=NOW, replicas={"engine": live}))
    assert sp.rejection is None
    assert sp.take_migrations == (MIGRATION,)
    assert sp.isvc is not None and MIGRATION not in sp.isvc.annotations
    engine = next(o for c, o in sp.applies if c == "engine" and o["kind"] == "InferenceReplica")
    assert MIGRATION not in engine["metadata"].get("annotations", {})


def test_the_status_reads_the_live_replicas_and_keeps_its_transition_times() -> None:
    raw = _raw()
    rendered = render_service(isvc_from_json(raw), [], ())
    live = {}
    for component, ready in (("engine", 2), ("router", 1)):
        cp = rendered.component(component)
        assert cp is not None and cp.replica is not None
        ir = replica_from_json(cp.replica)
        live[component] = InferenceReplica(
            metadata=ObjectMeta(name=ir.metadata.name), spec=ir.spec,
            status=InferenceReplicaStatus(replicas=ready, ready_replicas=ready,
                                          serving_replicas=ready))
    first = plan_service(ServiceSnapshot(isvc=raw, now=NOW, replicas=live))
    assert _types(first.status) == {"EngineReady": "True", "RouterReady": "True",
                                    "Ready": "True"}
    again = copy.deepcopy(raw)
    again["status"] = first.status
    later = plan_service(ServiceSnapshot(isvc=again, now=NOW.replace(hour=5), replicas=live))
    assert later.status == first.status  # an unchanged world writes nothing new

"""The InferenceService status rolled up from its components' InferenceReplicas."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from omenative_core.model.spec import (
    InferenceReplica,
    InferenceReplicaSpec,
    LifecycleSpec,
    ObjectMeta,
    RollingUpdate,
    UpdateStrategy,
)
from omenative_core.model.status import (
    Condition,
    InferenceReplicaStatus,
    MigrationStatus,
    RolloutHold,
)
from omenative_core.service import (
    ServiceCondition,
    accepted_migration_annotations,
    component_ready,
    isvc_from_json,
    lifecycle_status,
    render_service,
    service_ready,
    service_status,
    with_status,
)
from omenative_core.status.wire import replica_from_json

T0 = datetime(2025, 6, 1, 10, 0, tzinfo=UTC)
T1 = datetime(2025, 6, 1, 11, 0, tzinfo=UTC)


def spec(
    replicas: int | None = 4, max_unavailable: int | str | None = None
) -> InferenceReplicaSpec:
    lifecycle = None
    if max_unavailable is not None:
        lifecycle = LifecycleSpec(
            update_strategy=UpdateStrategy(
                rolling_update=RollingUpdate(max_unavailable=max_unavailable)
            )
        )
    return InferenceReplicaSpec(component="engine", replicas=replicas, lifecycle=lifecycle)


def status(serving: int, ready: int | None = None, **kw: Any) -> InferenceReplicaStatus:
    return InferenceReplicaStatus(
        replicas=4,
        serving_replicas=serving,
        ready_replicas=serving if ready is None else ready,
        **kw,
    )


@pytest.mark.parametrize(
    ("the_spec", "the_status", "expected"),
    [
        (spec(), status(4), ("True", "Ready", "All Instances are Ready")),
        (
            spec(max_unavailable=1),
            status(3),
            ("True", "MinimumAvailable", "3/4 Instances serving (min 3)"),
        ),
        (
            spec(max_unavailable="50%"),
            status(2),
            ("True", "MinimumAvailable", "2/4 Instances serving (min 2)"),
        ),
        (spec(), status(3), ("False", "InsufficientAvailable", "3/4 Instances serving, need 4")),
        (
            spec(max_unavailable=1),
            status(2),
            ("False", "InsufficientAvailable", "2/4 Instances serving, need 3"),
        ),
        (  # OME: 0 runs one Instance
            spec(replicas=0),
            status(0),
            ("False", "InsufficientAvailable", "0/1 Instances serving, need 1"),
        ),
        (
            spec(replicas=None),
            None,
            ("False", "InsufficientAvailable", "0/1 Instances serving, need 1"),
        ),
        (
            spec(replicas=1, max_unavailable="100%"),
            status(0),
            ("False", "InsufficientAvailable", "0/1 Instances serving, need 1"),
        ),
    ],
)
def test_component_ready_reasons(
    the_spec: InferenceReplicaSpec,
    the_status: InferenceReplicaStatus | None,
    expected: tuple[str, str, str],
) -> None:
    cond = component_ready("engine", the_spec, the_status)
    assert cond.type == "EngineReady"
    assert (cond.status, cond.reason, cond.message) == expected


def test_condition_types_per_component() -> None:
    assert component_ready("decoder", spec(), status(4)).type == "DecoderReady"
    assert component_ready("router", spec(), status(4)).type == "RouterReady"


def test_lifecycle_status_mirrors_counts_revisions_conditions_and_hold() -> None:
    st = InferenceReplicaStatus(
        replicas=3,
        ready_replicas=2,
        serving_replicas=2,
        available_replicas=1,
        updated_replicas=1,
        updated_ready_replicas=1,
        current_revision="chat-engine-aaa",
        update_revision="chat-engine-bbb",
        conditions=(
            Condition(
                type="Ready", status="Unknown", reason="RolloutInProgress", last_transition_time=T0
            ),
        ),
        rollout_hold=RolloutHold(gate="Budget", reason="no room", since=T0),
    )
    assert lifecycle_status(st) == {
        "replicas": 3,
        "readyReplicas": 2,
        "servingReplicas": 2,
        "availableReplicas": 1,
        "updatedReplicas": 1,
        "updatedReadyReplicas": 1,
        "currentRevision": "chat-engine-aaa",
        "updateRevision": "chat-engine-bbb",
        "conditions": [
            {
                "type": "Ready",
                "status": "Unknown",
                "reason": "RolloutInProgress",
                "message": "",
                "lastTransitionTime": "2025-06-01T10:00:00Z",
            }
        ],
        "rolloutHold": {
            "gate": "Budget",
            "reason": "no room",
            "target": "",
            "since": "2025-06-01T10:00:00Z",
        },
    }
    assert "instanceStatuses" not in lifecycle_status(st)


# ---------------------------------------------------------------------------- the rollup


def _isvc(status_json: dict[str, Any] | None = None, **spec: Any) -> Any:
    obj: dict[str, Any] = {
        "metadata": {"name": "chat", "namespace": "prod", "uid": "u"},
        "spec": {
            "deploymentMode": "OMENative",
            "engine": {"minReplicas": 2, "runner": {"image": "x"}},
            "router": {"runner": {"image": "r"}},
            **spec,
        },
    }
    if status_json is not None:
        obj["status"] = status_json
    return isvc_from_json(obj)


def _live(plan: Any, component: str, st: InferenceReplicaStatus | None) -> InferenceReplica:
    ir = replica_from_json(plan.component(component).replica)
    return InferenceReplica(metadata=ObjectMeta(name=ir.metadata.name), spec=ir.spec, status=st)


def test_service_status_reports_lifecycle_and_ready_conditions() -> None:
    isvc = _isvc()
    plan = render_service(isvc, [], [])
    live = {
        "engine": _live(plan, "engine", status(2, current_revision="chat-engine-a")),
        "router": _live(plan, "router", None),
    }
    out = service_status(isvc, plan, live, T0)
    assert out["components"]["engine"]["lifecycle"]["currentRevision"] == "chat-engine-a"
    assert "lifecycle" not in out["components"].get("router", {})
    conds = {c["type"]: (c["status"], c["reason"]) for c in out["conditions"]}
    assert conds == {
        "EngineReady": ("True", "Ready"),
        "RouterReady": ("False", "InsufficientAvailable"),
        "Ready": ("False", "RouterNotReady"),  # the ISVC is ready when every component is
    }
    (overall,) = [c for c in out["conditions"] if c["type"] == "Ready"]
    assert overall["message"] == "RouterReady InsufficientAvailable: 0/1 Instances serving, need 1"


def test_transition_time_moves_only_when_the_status_changes() -> None:
    isvc = _isvc()
    plan = render_service(isvc, [], [])
    ready = {"engine": _live(plan, "engine", status(2)), "router": _live(plan, "router", status(1))}
    first = service_status(isvc, plan, ready, T0)
    again = service_status(isvc_from_json({**isvc.raw, "status": first}), plan, ready, T1)
    assert again["conditions"] == first["conditions"]
    degraded = {**ready, "engine": _live(plan, "engine", status(1))}
    later = service_status(isvc_from_json({**isvc.raw, "status": first}), plan, degraded, T1)
    times = {c["type"]: c["lastTransitionTime"] for c in later["conditions"]}
    assert times == {
        "EngineReady": "2025-06-01T11:00:00Z",
        "RouterReady": "2025-06-01T10:00:00Z",
        "Ready": "2025-06-01T11:00:00Z",
    }
    assert {c["type"]: c["status"] for c in first["conditions"]}["Ready"] == "True"


def test_blocked_component_reports_its_plan_reason_and_others_conditions_stay() -> None:
    isvc = _isvc(
        {
            "conditions": [
                {"type": "IngressReady", "status": "True"},
                {"type": "DecoderReady", "status": "True"},
            ]
        },
        runtime={"name": "gone"},
    )
    plan = render_service(isvc, [], [])
    out = service_status(isvc, plan, {}, T0)
    conds = {c["type"]: c for c in out["conditions"]}
    assert conds["EngineReady"]["reason"] == "RuntimeNotFound"
    assert conds["IngressReady"] == {"type": "IngressReady", "status": "True"}
    assert "DecoderReady" not in conds  # no decoder any more


def test_plan_conditions_land_under_the_component() -> None:
    isvc = _isvc(engine={"leader": {}, "worker": {}, "runner": {"image": "x"}})
    plan = render_service(isvc, [], [])
    out = service_status(isvc, plan, {}, T0)
    assert out["components"]["engine"]["conditions"][0]["type"] == "GangSchedulingUnavailable"


def test_write_back_keeps_fields_written_by_others() -> None:
    isvc = _isvc(
        {
            "url": "http://chat.prod",
            "components": {"engine": {"traffic": [{"percent": 100}], "lifecycle": {"replicas": 9}}},
        }
    )
    plan = render_service(isvc, [], [])
    live = {"engine": _live(plan, "engine", status(2))}
    out = with_status(isvc, service_status(isvc, plan, live, T0))
    assert out["status"]["url"] == "http://chat.prod"
    assert out["status"]["components"]["engine"]["traffic"] == [{"percent": 100}]
    assert out["status"]["components"]["engine"]["lifecycle"]["replicas"] == 4
    assert out["spec"] == isvc.raw["spec"]


def test_accepted_migrations_are_the_ones_a_replica_recorded() -> None:
    done, waiting = "0b6e8f43-3c1d-4a0e-9f1a-2b3c4d5e6f70", "1b6e8f43-3c1d-4a0e-9f1a-2b3c4d5e6f70"
    isvc = isvc_from_json(
        {
            "metadata": {
                "name": "chat",
                "annotations": {
                    f"ome.io/migration-request-v1-{done}": "{}",
                    f"ome.io/migration-request-v1-{waiting}": "{}",
                    "other": "x",
                },
            },
            "spec": {},
        }
    )
    replica = InferenceReplica(
        metadata=ObjectMeta(name="chat-engine"),
        spec=spec(),
        status=InferenceReplicaStatus(migrations=(MigrationStatus(request_uuid=done),)),
    )
    assert accepted_migration_annotations(isvc, {"engine": replica}) == (
        f"ome.io/migration-request-v1-{done}",
    )


def test_the_isvc_is_ready_only_when_every_reporting_component_is() -> None:
    ok = ServiceCondition(type="EngineReady", status="True", reason="Ready", message="m")
    low = ServiceCondition(type="DecoderReady", status="True", reason="MinimumAvailable",
                           message="1/2 Instances serving (min 1)")
    down = ServiceCondition(type="RouterReady", status="False", reason="RuntimeNotFound",
                            message="no runtime")
    ready = service_ready([ok, low], ["engine", "decoder"])
    assert ready is not None
    assert (ready.status, ready.reason, ready.message) == (
        "True", "Ready", "engine ready, decoder ready")
    not_ready = service_ready([down, ok], ["engine", "router"])
    assert not_ready is not None
    assert (not_ready.status, not_ready.reason) == ("False", "RouterNotReady")
    # a RawDeployment component reports no {Component}Ready and does not count
    only = service_ready([ok], ["engine", "router"])
    assert only is not None and only.status == "True"
    assert service_ready([], ["router"]) is None

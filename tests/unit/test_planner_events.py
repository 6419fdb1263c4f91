"""The Events a user sees for refused, failed and finished requests (issue 15).

A refused or failed request is a Warning whose reason says so and whose message names the
request or field; only a request that will run is ``Normal MigrationAccepted``.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from sim_helpers import run_world

from omenative_core.model import Event, LifecycleConfig
from omenative_core.model.config import AuditConfig, TeardownConfig, UpdateRetry
from omenative_core.model.status import MigrationStatus
from omenative_core.planner import plan
from omenative_sim.world import ClusterSpec, World

UUID = "0b6e8f43-3c1d-4a0e-9f1a-2b3c4d5e6f70"
UUID2 = "1c7f9054-4d2e-4b1f-8a2b-3c4d5e6f7081"
PREFIX = "ome.io/migration-request-v1-"


def _manifest(*, replicas: int = 1, image: str = "img:1", **spec: Any) -> dict[str, Any]:
    tpl = {"spec": {"containers": [{"name": "ome-container", "image": image,
                                    "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    runners = [{"name": "leader", "template": tpl},
               {"name": "worker", "size": 1, "template": tpl}]
    return {"metadata": {"name": "chat-engine", "namespace": "ns"},
            "spec": {"component": "engine", "replicas": replicas, "runners": runners, **spec}}


def _world(manifest: dict[str, Any] | None = None, *, config: LifecycleConfig | None = None,
           nodes: int = 8) -> World:
    return World(ClusterSpec(nodes=nodes, gpus_per_node=2, pod_start_seconds=2,
                             pod_ready_seconds=2.0),
                 manifest or _manifest(), config=config or LifecycleConfig())


def _serving(world: World) -> World:
    run_world(world, 60)
    assert world.status is not None and world.status.ready_replicas == world.status.replicas
    return world


def _request(**fields: Any) -> str:
    return json.dumps({"schemaVersion": "v1", "instance": 0, **fields})


def _only(events: list[Event] | tuple[Event, ...], reason: str) -> Event:
    found = [e for e in events if e.reason == reason]
    assert len(found) == 1, f"expected one {reason} Event, got {events}"
    return found[0]


def _reasons(events: list[Event] | tuple[Event, ...]) -> list[str]:
    return [e.reason for e in events]


# ---------------------------------------------------------------------- malformed requests


@pytest.mark.parametrize(
    ("uuid", "value", "reason", "names"),
    [
        (UUID, "{not json", "MigrationRequestRejected", "not JSON"),
        (UUID, json.dumps({"schemaVersion": "v2", "instance": 0}),
         "UnsupportedSchemaVersion", "schemaVersion"),
        (UUID, json.dumps({"instance": 0}), "UnsupportedSchemaVersion", "schemaVersion"),
        (UUID, _request(instance=-1), "MigrationRequestRejected", "instance must be an integer"),
        (UUID, json.dumps({"schemaVersion": "v1"}), "MigrationRequestRejected",
         "instance is missing"),
        ("not-a-uuid", _request(), "MigrationRequestRejected", "must end in a UUID"),
        (UUID, _request(component="decoder"), "MigrationRequestRejected", "component"),
    ],
    ids=["bad-json", "schema-v2", "schema-missing", "negative-instance", "missing-instance",
         "key-not-uuid", "other-component"],
)
def test_a_malformed_migration_request_is_a_warning_naming_the_request_and_field(
    uuid: str, value: str, reason: str, names: str
) -> None:
    world = _serving(_world())
    world.set_annotation(PREFIX + uuid, value)
    p = plan(world.snapshot())
    event = _only(p.events, reason)
    assert event.type == "Warning"
    assert PREFIX + uuid in event.message and names in event.message
    assert "MigrationAccepted" not in _reasons(p.events)
    assert p.status.migrations == ()  # nothing recorded, nothing moves
    world.apply(p)
    assert PREFIX + uuid not in (world.manifest["metadata"].get("annotations") or {})
    assert world.status is not None and world.status.ready_replicas == 1


def test_the_planner_judges_a_request_as_admission_does() -> None:
    from omenative_core.service.migration_request import MigrationTarget, migration_request_problem

    target = MigrationTarget(modes={"engine": "OMENative"}, implied="engine",
                             kind="InferenceReplica")
    value = json.dumps({"schemaVersion": "v1", "instance": 0, "hint_target_nodes": "node-1"})
    admission = migration_request_problem(PREFIX + UUID, value, target)
    assert admission is not None
    world = _serving(_world())
    world.set_annotation(PREFIX + UUID, value)
    event = _only(plan(world.snapshot()).events, admission[0])
    assert event.type == "Warning" and admission[1] in event.message


def test_a_request_for_an_instance_that_does_not_exist_fails_with_a_warning() -> None:
    world = _serving(_world())
    world.set_annotation(PREFIX + UUID, _request(instance=7))
    p = plan(world.snapshot())
    event = _only(p.events, "MigrationRequestRejected")
    assert event.type == "Warning"
    assert "instance 7" in event.message and "there are: 0" in event.message
    assert "MigrationAccepted" not in _reasons(p.events)
    (record,) = p.status.migrations
    assert record.phase == "Failed" and record.succeeded is False


def test_a_request_naming_an_unknown_source_node_is_rejected() -> None:
    world = _serving(_world())
    world.set_annotation(PREFIX + UUID, _request(from_node="node-99"))
    p = plan(world.snapshot())
    event = _only(p.events, "MigrationRequestRejected")
    assert event.type == "Warning" and "from_node 'node-99'" in event.message
    assert "MigrationAccepted" not in _reasons(p.events)
    (record,) = p.status.migrations
    assert record.phase == "Failed"


# ---------------------------------------------------------------------- refused by policy


def test_mode_never_refuses_a_migration_with_a_warning_naming_the_setting() -> None:
    world = _serving(_world(_manifest(lifecycle={"migrationPolicy": {"mode": "Never"}})))
    world.set_annotation(PREFIX + UUID, _request())
    p = plan(world.snapshot())
    event = _only(p.events, "MigrationRequestRejected")  # OME's reason under Never
    assert event.type == "Warning" and event.instance == 0
    assert UUID in event.message and "lifecycle.migrationPolicy.mode is Never" in event.message
    assert "MigrationAccepted" not in _reasons(p.events)
    (record,) = p.status.migrations
    assert record.phase == "Failed"
    assert record.message.startswith("MigrationRequestRejected")


def test_a_request_beyond_the_in_flight_cap_is_accepted_with_a_warning_that_it_waits() -> None:
    config = LifecycleConfig(audit=AuditConfig(max_in_flight_migrations=1))
    world = _serving(_world(_manifest(replicas=2), config=config))
    world.set_annotation(PREFIX + UUID, _request(instance=0))
    world.set_annotation(PREFIX + UUID2, _request(instance=1))
    p = plan(world.snapshot())
    assert _reasons(p.events).count("MigrationAccepted") == 2
    event = _only(p.events, "MigrationCapReached")
    assert event.type == "Warning"
    assert UUID2 in event.message and "maxInFlightMigrations is 1" in event.message


def test_a_request_over_the_window_cap_fails_rate_limited_as_omes_does() -> None:
    config = LifecycleConfig(audit=AuditConfig(max_migrations_per_window=1))
    world = _serving(_world(_manifest(replicas=2), config=config))
    world.set_annotation(PREFIX + UUID, _request(instance=0))
    world.set_annotation(PREFIX + UUID2, _request(instance=1))
    p = plan(world.snapshot())
    assert _reasons(p.events).count("MigrationAccepted") == 1  # the first one runs
    event = _only(p.events, "RateLimited")
    assert event.type == "Warning" and event.instance == 1
    assert event.message == (f"migration request {PREFIX}{UUID2}: "
                             "migration rate cap reached (1/1 in the last 1h0m0s)")
    assert "MigrationCapReached" not in _reasons(p.events)  # it does not wait: it failed
    failed = {m.request_uuid: m for m in p.status.migrations}[UUID2]
    assert failed.phase == "Failed" and failed.succeeded is False
    assert failed.message == "RateLimited: migration rate cap reached (1/1 in the last 1h0m0s)"


def test_with_audit_unconfigured_an_accepted_request_warns_it_will_not_start() -> None:
    world = _serving(_world(config=LifecycleConfig(audit=None)))
    world.set_annotation(PREFIX + UUID, _request())
    p = plan(world.snapshot())
    assert _only(p.events, "MigrationAccepted").type == "Normal"
    event = _only(p.events, "MigrationCapacityUnconfigured")
    assert event.type == "Warning" and "lifecycle.audit is null" in event.message


# ---------------------------------------------------------------------- finished migrations


def _migrate(world: World, seconds: float) -> tuple[MigrationStatus, list[Event]]:
    """Request a migration of Instance 0, run, and return its record and every Event."""
    world.set_annotation(PREFIX + UUID, _request())
    events: list[Event] = []
    run_world(world, seconds, events)
    assert world.status is not None
    (record,) = world.status.migrations
    return record, events


def test_a_finished_migration_gets_a_migration_completed_event() -> None:
    record, events = _migrate(_serving(_world()), 120)
    assert record.phase == "Completed"
    assert _only(events, "MigrationAccepted").type == "Normal"
    done = _only(events, "MigrationCompleted")
    assert done.type == "Normal" and done.instance == 0
    assert UUID in done.message and f"Instance {record.surge_instance} replaces it" in done.message
    assert "MigrationFailed" not in _reasons(events)


def test_a_migration_past_its_deadline_gets_omes_migration_expired_warning_saying_why() -> None:
    # one node: the replacement gang cannot be placed, and the source keeps serving
    config = LifecycleConfig(instance_ready_timeout=timedelta(seconds=60))
    world = _serving(_world(config=config, nodes=1))
    record, events = _migrate(world, 300)
    assert record.phase == "Failed"
    failed = _only(events, "MigrationExpired")
    assert failed.type == "Warning" and failed.instance == 0
    assert UUID in failed.message and "failed: DeadlineExceeded" in failed.message
    assert "MigrationFailed" not in _reasons(events)
    started = _only(events, "MigrationRequestAccepted")  # OME's, when the surge opens
    assert started.type == "Normal" and f"uuid={UUID}" in started.message
    assert "MigrationCompleted" not in _reasons(events)
    assert world.status is not None and world.status.ready_replicas == 1


# ---------------------------------------------------------------------- verbs


def _verb(annotation: str, value: str, reason: str) -> tuple[Event, list[str]]:
    """Set a verb annotation on a serving replica: its one Warning, and all reasons."""
    world = _serving(_world())
    world.set_annotation(annotation, value)
    p = plan(world.snapshot())
    event = _only(p.events, reason)
    assert event.type == "Warning"
    assert f"{annotation}={value!r}" in event.message
    return event, _reasons(p.events)



@pytest.mark.parametrize("value", ["1,,2", "All", "one", "-1", "0,-1"])  # OME rejects -1 too
def test_a_reset_value_that_does_not_parse_is_rejected_naming_the_annotation(value: str) -> None:
    event, others = _verb("ome.io/reset-instances", value, "InstancesResetRejected")
    assert "comma-separated non-negative Instance indexes" in event.message
    assert "InstancesReset" not in others


@pytest.mark.parametrize(("value", "rule"), [
    ("chat-engine-deadbeef", "no held revision by that name or hash"),
    ("abc", "8 characters or more"),
])
def test_a_release_that_matches_nothing_is_a_warning(value: str, rule: str) -> None:
    event, others = _verb("ome.io/release-held-revision", value, "RetryBlockReleaseSkipped")
    assert rule in event.message
    assert "RetryBlockReleased" not in others


# ---------------------------------------------------------------------- teardown


def _deleted_with_a_lost_node(config: LifecycleConfig) -> tuple[World, list[Event]]:
    world = _serving(_world(config=config, nodes=2))
    lost = sorted({p.node for p in world.pods.values() if p.node})[0]
    world.fail_node(lost)
    world.advance(world.now + 60)  # past the node monitor grace: the node reads Unknown
    world.patch_replica({"metadata": {"deletionTimestamp": "2026-01-01T00:02:00Z"}})
    events: list[Event] = []
    run_world(world, 120, events)
    return world, events


def test_a_teardown_that_cannot_finish_and_has_no_deadline_is_a_warning() -> None:
    config = LifecycleConfig(teardown=TeardownConfig(deadline=None))
    world, events = _deleted_with_a_lost_node(config)
    assert "ome.io/ir-teardown" in world.manifest["metadata"]["finalizers"]
    blocked = [e for e in events if e.reason == "TeardownBlocked"]
    assert blocked and all(e.type == "Warning" for e in blocked)
    message = blocked[-1].message
    assert "ome.io/ir-teardown" in message and "teardown.deadline" in message
    assert "chat-engine-engine-0-" in message and "unreachable" in message


def test_a_teardown_with_a_deadline_is_not_reported_blocked() -> None:
    config = LifecycleConfig(teardown=TeardownConfig(deadline=timedelta(minutes=30)))
    _, events = _deleted_with_a_lost_node(config)
    assert "TeardownBlocked" not in _reasons(events)


# ---------------------------------------------------------------------- image pulls


def test_an_image_still_unpullable_at_the_deadline_is_blamed_on_the_revision() -> None:
    config = LifecycleConfig(
        instance_ready_timeout=timedelta(seconds=60),
        stuck_pod_grace_period=None,  # only the readiness deadline ends the attempt
        update_retry=UpdateRetry(max_attempts=1, initial_delay=timedelta(seconds=10),
                                 max_delay=timedelta(seconds=20)),
    )
    world = _world(_manifest(image="bad:1"), config=config)
    world.add_bad_image("bad:1")
    events: list[Event] = []
    run_world(world, 90, events)
    status = world.status
    assert status is not None
    row = status.instances[0]
    assert row.phase == "Failed"
    assert row.last_failure is not None
    assert row.last_failure.reason in ("ErrImagePull", "ImagePullBackOff")
    assert "could not pull its image" in row.last_failure.message
    (block,) = status.retry_blocks
    assert block.state == "Held"  # the revision's own fault: the ladder holds it
    held = _only(events, "RetryHeld")
    assert held.type == "Warning" and block.target_revision in held.message


def test_a_reset_touches_only_the_instances_it_names() -> None:
    # OME clears only the named Instance's attempt; the RetryBlock all Instances share
    # keeps its backoff (it was moved to now, which restarted an unnamed Failed Instance)
    config = LifecycleConfig(instance_ready_timeout=timedelta(seconds=60))
    world = World(ClusterSpec(nodes=4, gpus_per_node=2, pod_start_seconds=1,
                              pod_ready_seconds=10_000), _manifest(replicas=2), config=config)
    run_world(world, 90)
    before = world.status
    assert before is not None
    assert [r.phase for r in before.instances] == ["Failed", "Failed"]
    (block,) = before.retry_blocks
    assert block.state == "Backoff" and block.next_retry_at is not None
    world.set_annotation("ome.io/reset-instances", "0")
    p = plan(world.snapshot())
    assert p.status.retry_blocks == before.retry_blocks
    rows = {r.index: r for r in p.status.instances}
    assert rows[1] == before.instances[1]
    assert rows[0].phase == "Pending" and rows[0].operation is None
    reset = _only(p.events, "InstancesReset")
    assert "DeadlineExceeded" in reset.message  # the cleared lastFailure, kept in the Event

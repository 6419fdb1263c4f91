"""What a user sees the planner do, one behaviour per test, driven through the simulator."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sim_helpers import engine_manifest as _manifest
from sim_helpers import run_world as _run

from omenative_core.model import (
    ConfigError,
    CreatePod,
    CreatePodGroup,
    DeletePod,
    LifecycleConfig,
    SetFinalizer,
    SetServingGate,
    UpdateStatus,
    parse_lifecycle_config,
)
from omenative_core.model.config import UpdateRetry
from omenative_core.planner import plan
from omenative_sim.world import ClusterSpec, World


def _runners_patch(image: str, workers: int = 1) -> dict[str, Any]:
    return {"spec": {"runners": _manifest(workers=workers, image=image)["spec"]["runners"]}}


def _world(manifest: dict[str, Any], *, config: LifecycleConfig | None = None,
           nodes: int = 8, ready: float = 2.0) -> World:
    return World(ClusterSpec(nodes=nodes, gpus_per_node=2, pod_start_seconds=2,
                             pod_ready_seconds=ready),
                 manifest, config=config or LifecycleConfig())


def test_gang_is_created_whole_podgroup_first_with_oem_names() -> None:
    world = _world(_manifest())
    first = plan(world.snapshot())
    kinds = [a.kind for a in first.actions]
    assert kinds[0] == "UpdateStatus"
    assert kinds.index("CreatePodGroup") < kinds.index("CreatePod")
    names = [a.name for a in first.actions if isinstance(a, CreatePod)]
    assert names == ["chat-engine-engine-0-leader-0", "chat-engine-engine-0-worker-0",
                     "chat-engine-engine-1-leader-0", "chat-engine-engine-1-worker-0"]
    groups = [a.body["metadata"]["name"] for a in first.actions if isinstance(a, CreatePodGroup)]
    assert groups == ["chat-engine-0-1", "chat-engine-1-1"]  # {prefix}-{index}-{incarnation}
    assert any(isinstance(a, SetFinalizer) and a.present for a in first.actions)


def test_serving_gate_goes_true_only_when_every_pod_is_ready() -> None:
    world = _world(_manifest(replicas=1))
    world.apply(plan(world.snapshot()))
    world.advance(3)  # running, not yet ready
    p = plan(world.snapshot())
    assert not [a for a in p.actions if isinstance(a, SetServingGate)]
    world.advance(10)
    p = plan(world.snapshot())
    gates = sorted(a.name for a in p.actions if isinstance(a, SetServingGate) and a.value)
    assert gates == ["chat-engine-engine-0-leader-0", "chat-engine-engine-0-worker-0"]


def test_at_rest_the_plan_is_empty_and_status_unchanged() -> None:
    world = _world(_manifest())
    _run(world, 60)
    snap = world.snapshot()
    p = plan(snap)
    assert p.actions == ()
    assert p.status == snap.replica.status
    assert p.status.ready_replicas == 2 and p.status.serving_replicas == 2


def test_missed_readiness_deadline_fails_the_attempt_and_backs_off_without_holding() -> None:
    config = LifecycleConfig(instance_ready_timeout=timedelta(seconds=60))
    world = _world(_manifest(replicas=1), config=config, ready=10_000)
    _run(world, 70)
    status = world.status
    assert status is not None
    row = status.instances[0]
    assert row.phase == "Failed"
    assert row.last_failure is not None and row.last_failure.reason == "DeadlineExceeded"
    (block,) = status.retry_blocks
    assert block.state == "Backoff"  # a timeout never holds a revision


def test_bad_image_retries_then_holds_and_release_allows_another_try() -> None:
    config = LifecycleConfig(
        stuck_pod_grace_period=timedelta(seconds=10),
        update_retry=UpdateRetry(max_attempts=2, initial_delay=timedelta(seconds=10),
                                 max_delay=timedelta(seconds=20)),
    )
    world = _world(_manifest(replicas=1, image="bad:1"), config=config)
    world.add_bad_image("bad:1")
    _run(world, 200)
    status = world.status
    assert status is not None
    (block,) = status.retry_blocks
    assert block.state == "Held" and block.attempts_started == 2
    assert block.reason in ("ImagePullBackOff", "ErrImagePull")
    assert world.pod_count == 0  # a held revision gets no pods
    world.set_annotation("ome.io/release-held-revision", block.target_revision)
    p = plan(world.snapshot())
    assert any(isinstance(a, CreatePod) for a in p.actions)
    assert "RetryBlockReleased" in [e.reason for e in p.events]


def test_invalid_spec_gets_a_condition_and_touches_no_pod() -> None:
    world = _world(_manifest(replicas=1))
    _run(world, 30)
    before = world.pod_count
    bad = _manifest(replicas=1)
    bad["spec"]["runners"] = [r for r in bad["spec"]["runners"] if r["name"] == "leader"]
    world.patch_replica({"spec": {"runners": bad["spec"]["runners"]}})
    p = plan(world.snapshot())
    assert all(isinstance(a, UpdateStatus) for a in p.actions)
    ready = next(c for c in p.status.conditions if c.type == "Ready")
    assert ready.status == "False" and ready.reason == "LeaderRequiresWorker"
    world.apply(p)
    assert world.pod_count == before


def test_zero_replicas_runs_one_instance_as_in_ome() -> None:
    # OME's InferenceReplicaSpec.Replicas: "nil or 0 runs one Instance"
    world = _world(_manifest(replicas=0))
    _run(world, 60)
    status = world.status
    assert status is not None and [r.index for r in status.instances] == [0]
    ready = next(c for c in status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("True", "AllInstancesReady")


def test_scale_down_drains_the_highest_index_before_deleting_it() -> None:
    world = _world(_manifest(replicas=3))
    _run(world, 60)
    world.patch_replica({"spec": {"replicas": 2}})
    p = plan(world.snapshot())
    gates_off = {a.name for a in p.actions if isinstance(a, SetServingGate) and not a.value}
    assert gates_off == {"chat-engine-engine-2-leader-0", "chat-engine-engine-2-worker-0"}
    assert not [a for a in p.actions if isinstance(a, DeletePod)]  # drain first
    _run(world, 60)
    assert sorted(world.pods) == ["chat-engine-engine-0-leader-0", "chat-engine-engine-0-worker-0",
                                  "chat-engine-engine-1-leader-0", "chat-engine-engine-1-worker-0"]


def test_surge_then_drain_replaces_a_gang_at_a_new_index_and_keeps_serving() -> None:
    world = _world(_manifest(replicas=2))
    _run(world, 60)
    world.patch_replica(_runners_patch("img:2"))
    serving: list[int] = []
    end = world.now + 300
    while world.now < end:
        p = plan(world.snapshot())
        serving.append(p.status.serving_replicas)
        if p.actions:
            world.apply(p)
            continue
        world.advance(world.now + 1)
    status = world.status
    assert status is not None
    assert min(serving) >= 2
    assert [r.running_revision for r in status.instances] == [status.update_revision] * 2
    assert status.current_revision == status.update_revision


def test_pause_holds_an_update_until_resumed() -> None:
    world = _world(_manifest(replicas=1))
    _run(world, 60)
    world.patch_replica({"spec": {"paused": True}})
    world.patch_replica(_runners_patch("img:2"))
    _run(world, 60)
    status = world.status
    assert status is not None and status.updated_replicas == 0
    assert status.rollout_hold is not None
    world.patch_replica({"spec": {"paused": False}})
    _run(world, 120)
    status = world.status
    assert status is not None and status.updated_replicas == 1


def test_teardown_drains_then_releases_the_finalizer() -> None:
    world = _world(_manifest(replicas=1))
    _run(world, 60)
    assert "ome.io/ir-teardown" in world.manifest["metadata"]["finalizers"]
    world.patch_replica({"metadata": {"deletionTimestamp": "2026-01-01T00:01:00Z"}})
    p = plan(world.snapshot())
    assert {a.name for a in p.actions if isinstance(a, SetServingGate)} == {
        "chat-engine-engine-0-leader-0", "chat-engine-engine-0-worker-0"}
    assert not [a for a in p.actions if isinstance(a, DeletePod)]
    _run(world, 60)
    assert world.pod_count == 0
    assert "ome.io/ir-teardown" not in (world.manifest["metadata"].get("finalizers") or [])


def test_whole_instance_restart_when_a_worker_dies() -> None:
    world = _world(_manifest(replicas=1))
    _run(world, 60)
    world.fail_pod("chat-engine-engine-0-worker-0")
    _run(world, 60)
    status = world.status
    assert status is not None
    (row,) = status.instances
    assert row.phase == "Ready" and row.incarnation == 2
    assert {p.labels["ome.io/instance-incarnation"] for p in world.pods.values()} == {"2"}


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("{", "unable to parse lifecycle config json"),
        ('{"instanceReadyTimeout": 30}', "lifecycle.instanceReadyTimeout"),
        ('{"instanceReadyTimeout": "30"}', "expected a number with a unit"),
        ('{"updateRetry": {"maxAttempts": 0}}', "lifecycle.updateRetry.maxAttempts"),
        ('{"forceDelete": {"overdueSlack": "2m"}}', "both keys are required"),
        ('{"bogus": 1}', "lifecycle: unknown key(s) bogus"),
        ("42", "expected an object"),
    ],
)
def test_bad_lifecycle_config_is_rejected_naming_the_key(raw: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_lifecycle_config(raw)
    assert fragment in str(err.value)


def test_absent_config_means_chart_defaults_and_null_turns_a_feature_off() -> None:
    cfg = parse_lifecycle_config(None)
    assert cfg.instance_ready_timeout == timedelta(minutes=30)
    assert cfg.update_retry == UpdateRetry()
    assert cfg.audit is not None and cfg.audit.max_in_flight_migrations == 3
    off = parse_lifecycle_config('{"updateRetry": null, "audit": null}')
    assert off.update_retry is None and off.audit is None
    assert off.instance_ready_timeout == timedelta(minutes=30)


def test_partition_keeps_the_lowest_indexes_and_reports_staged() -> None:
    world = _world(_manifest(replicas=3), nodes=12)
    _run(world, 60)
    world.patch_replica({"spec": {"pacing": {"partition": 1}}})
    world.patch_replica(_runners_patch("img:2"))
    _run(world, 600)
    status = world.status
    assert status is not None
    by_index = {r.index: r.running_revision for r in status.instances}
    old = [i for i, rev in by_index.items() if rev != status.update_revision]
    assert old == [0] and len(by_index) == 3
    ready = next(c for c in status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("True", "Staged")
    assert ready.message.startswith("Staged at partition 1: 2/3 Instances on")
    world.patch_replica({"spec": {"pacing": {"partition": 0}}})
    _run(world, 600)
    status = world.status
    assert status is not None and status.updated_replicas == 3
    ready = next(c for c in status.conditions if c.type == "Ready")
    assert ready.reason == "AllInstancesReady"


def test_scale_up_below_the_partition_adds_prior_revision_instances() -> None:
    """A canary step of 1 of 4: scaling 2 -> 4 with a new revision and partition 3 must not
    put the new Instance at index 2 on the canary (only index 3 is above the partition)."""
    world = _world(_manifest(replicas=2), nodes=12)
    _run(world, 60)
    prior = world.status.current_revision if world.status else None
    world.patch_replica({"spec": {"replicas": 4, "pacing": {"partition": 3}}})
    world.patch_replica(_runners_patch("img:2"))
    _run(world, 600)
    status = world.status
    assert status is not None and prior
    by_index = {r.index: r.running_revision for r in status.instances}
    assert len(by_index) == 4
    on_new = sorted(i for i, rev in by_index.items() if rev == status.update_revision)
    assert on_new == [3], by_index
    assert all(by_index[i] == prior for i in (0, 1, 2))
    world.patch_replica({"spec": {"pacing": {"partition": 0}}})
    _run(world, 900)
    status = world.status
    assert status is not None and status.updated_replicas == 4


def test_rollback_to_a_stored_revision_makes_it_the_target() -> None:
    world = _world(_manifest(replicas=1))
    _run(world, 60)
    status = world.status
    assert status is not None
    first = status.update_revision
    world.patch_replica(_runners_patch("img:2"))
    _run(world, 300)
    assert world.status is not None and world.status.update_revision != first
    world.patch_replica({"spec": {"pacing": {"rollbackToRevision": first}}})
    _run(world, 300)
    status = world.status
    assert status is not None
    assert status.update_revision == first
    assert [r.running_revision for r in status.instances] == [first]
    images = {c["image"] for p in world.pods.values() for c in p.body["spec"]["containers"]}
    assert images == {"img:1"}

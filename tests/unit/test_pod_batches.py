"""OME's ``scaleUpPodBatchSize``: a pass creates the pods of whole Instances while they fit
the budget, one Instance larger than it alone, the rest in later passes; and a deleted
InferenceReplica drains in the same waves as a scale-down (``scaleDownPodBatchSize``)."""

from __future__ import annotations

import pytest
from sim_helpers import engine_manifest, run_world

from omenative_core.labels import LABEL_INSTANCE_INDEX
from omenative_core.model import CreatePod, LifecycleConfig
from omenative_core.model.config import UNCONFIGURED, ConfigError, parse_lifecycle_config
from omenative_core.model.plan import Plan
from omenative_core.phases import OpType
from omenative_core.planner import plan
from omenative_core.steps.teardown import FINALIZER
from omenative_sim.world import ClusterSpec, World

CLUSTER = ClusterSpec(nodes=40, gpus_per_node=8, pod_start_seconds=2, pod_ready_seconds=2)


def _world(replicas: int, workers: int, config: LifecycleConfig) -> World:
    return World(CLUSTER, engine_manifest(workers=workers, replicas=replicas), config=config)


def _created(p: Plan) -> list[str]:
    """The Instance index of each pod the plan creates."""
    return [a.body["metadata"]["labels"][LABEL_INSTANCE_INDEX]
            for a in p.actions if isinstance(a, CreatePod)]


def test_a_bring_up_creates_whole_gangs_within_the_budget_and_the_rest_next() -> None:
    # 4-pod Instances (a leader and 3 workers), budget 10 pods: two gangs per pass
    world = _world(8, 3, LifecycleConfig(scale_up_pod_batch_size=10))
    first = plan(world.snapshot())
    created = _created(first)
    assert len(created) == 8
    assert created == ["0"] * 4 + ["1"] * 4, "two whole gangs, in index order"
    batch = first.scale_up_batch
    assert batch is not None
    assert (batch.pod_budget, batch.admitted_pods, batch.admitted_instances,
            batch.deferred_pods, batch.deferred_instances, batch.oversized) == (
        10, 8, 2, 24, 6, False)
    world.apply(first)
    second = plan(world.snapshot())  # the next pass, at once: the next two gangs
    assert len(_created(second)) == 8
    run_world(world, 120)
    assert world.status is not None and world.status.ready_replicas == 8


def test_a_gang_larger_than_the_budget_goes_alone() -> None:
    world = _world(3, 3, LifecycleConfig(scale_up_pod_batch_size=2))
    first = plan(world.snapshot())
    assert len(_created(first)) == 4, "the whole gang, never a part of it"
    batch = first.scale_up_batch
    assert batch is not None and (batch.admitted_instances, batch.oversized) == (1, True)
    run_world(world, 120)
    assert world.status is not None and world.status.ready_replicas == 3


def test_without_the_key_the_core_does_not_batch_creates() -> None:
    world = _world(8, 3, LifecycleConfig(scale_up_pod_batch_size=None))
    first = plan(world.snapshot())
    assert len(_created(first)) == 32 and first.scale_up_batch is None


def test_the_key_is_read_and_absent_keeps_omenatives_own_pace() -> None:
    read = parse_lifecycle_config('{"scaleUpPodBatchSize": 64}', absent=UNCONFIGURED)
    assert read.scale_up_pod_batch_size == 64
    assert parse_lifecycle_config("{}", absent=UNCONFIGURED).scale_up_pod_batch_size is None
    assert LifecycleConfig().scale_up_pod_batch_size == 100  # OME's chart
    with pytest.raises(ConfigError, match="scaleUpPodBatchSize"):
        parse_lifecycle_config('{"scaleUpPodBatchSize": 0}')


def _delete(world: World) -> None:
    """The user deletes the InferenceReplica (the finalizer holds it)."""
    stamp = world.time(world.now).strftime("%Y-%m-%dT%H:%M:%SZ")
    world.patch_replica({"metadata": {"deletionTimestamp": stamp}})


def test_a_deleted_replica_drains_in_scale_down_waves() -> None:
    config = LifecycleConfig(scale_down_pod_batch_size=10)
    world = _world(8, 3, config)
    run_world(world, 120)
    _delete(world)
    first = plan(world.snapshot())
    wave = first.scale_down_wave
    assert wave is not None
    assert (wave.pod_budget, wave.active_pod_cost, wave.admitted_instances,
            wave.deferred_instances) == (10, 0, 2, 6)
    deleting = [r.index for r in first.status.instances
                if r.operation is not None and r.operation.type == OpType.DELETE]
    assert deleting == [0, 1]
    world.apply(first)
    second = plan(world.snapshot())  # the first wave still drains: it counts first
    assert second.scale_down_wave is not None
    assert second.scale_down_wave.active_pod_cost == 8
    assert second.scale_down_wave.admitted_instances == 0
    run_world(world, 600)
    assert world.pod_count == 0, "every wave drained"
    assert FINALIZER not in (world.manifest["metadata"].get("finalizers") or [])

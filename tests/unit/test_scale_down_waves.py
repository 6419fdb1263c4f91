"""OME's scale-down waves (``scaleDownPodBatchSize``, ``scaleDownRequeueInterval``): the core
admits whole Instances while their pods fit the budget, counts deletion work already running
first, lets one Instance larger than the budget go alone, and returns the wave as data."""

from __future__ import annotations

from datetime import timedelta

from sim_helpers import engine_manifest, run_world

from omenative_core.model import LifecycleConfig
from omenative_core.model.config import UNCONFIGURED, parse_lifecycle_config
from omenative_core.phases import OpType
from omenative_core.planner import plan
from omenative_sim.world import ClusterSpec, World


def _world(replicas: int, workers: int, config: LifecycleConfig) -> World:
    manifest = engine_manifest(workers=workers, replicas=replicas)
    cluster = ClusterSpec(nodes=40, gpus_per_node=8, pod_start_seconds=2, pod_ready_seconds=2)
    world = World(cluster, manifest, config=config)
    run_world(world, 120)
    return world


def _deleting(p: object) -> int:
    return sum(1 for r in p.status.instances  # type: ignore[attr-defined]
               if r.operation is not None and r.operation.type == OpType.DELETE)


def test_whole_gangs_fit_the_budget_and_the_rest_wait() -> None:
    # 4-pod Instances (a leader and 3 workers), budget 10 pods: two Instances per wave
    config = LifecycleConfig(scale_down_pod_batch_size=10)
    world = _world(8, 3, config)
    world.patch_replica({"spec": {"replicas": 2}})
    p = plan(world.snapshot())
    wave = p.scale_down_wave
    assert wave is not None
    assert (wave.pod_budget, wave.active_pod_cost, wave.admitted_instances,
            wave.deferred_instances, wave.oversized) == (10, 0, 2, 4, False)
    assert _deleting(p) == 2
    # the requeue interval (chart 5s) brings the next look while the work runs
    assert p.requeue_after is not None and p.requeue_after <= timedelta(seconds=5)
    run_world(world, 300)
    assert world.status is not None and len(world.status.instances) == 2


def test_running_deletion_work_counts_first() -> None:
    config = LifecycleConfig(scale_down_pod_batch_size=10)
    world = _world(8, 3, config)
    world.patch_replica({"spec": {"replicas": 2}})
    world.apply(plan(world.snapshot()))
    world.patch_replica({"spec": {"replicas": 1}})  # lower again while two drain
    wave = plan(world.snapshot()).scale_down_wave
    assert wave is not None
    assert (wave.active_instances, wave.active_pod_cost, wave.admitted_instances) == (2, 8, 0)


def test_an_instance_larger_than_the_budget_goes_alone() -> None:
    config = LifecycleConfig(scale_down_pod_batch_size=2)
    world = _world(3, 3, config)
    world.patch_replica({"spec": {"replicas": 1}})
    wave = plan(world.snapshot()).scale_down_wave
    assert wave is not None
    assert (wave.admitted_instances, wave.deferred_instances, wave.oversized) == (1, 1, True)
    run_world(world, 300)
    assert world.status is not None and len(world.status.instances) == 1


def test_the_keys_are_read_and_absent_means_unbounded_as_omes_binary() -> None:
    read = parse_lifecycle_config('{"scaleDownPodBatchSize": 32, '
                                  '"scaleDownRequeueInterval": "7s"}', absent=UNCONFIGURED)
    assert (read.scale_down_pod_batch_size, read.scale_down_requeue_interval) == (
        32, timedelta(seconds=7))
    bare = parse_lifecycle_config("{}", absent=UNCONFIGURED)
    assert (bare.scale_down_pod_batch_size, bare.scale_down_requeue_interval) == (None, None)
    assert LifecycleConfig().scale_down_pod_batch_size == 100  # OME's chart

"""A gang that must restart while its replica rolls out comes back on the target (issue 30).

Before, a broken Instance was rebuilt at its old revision while the rollout was pending,
then replaced again about 15 s later: one wasted gang start, minutes of model loading on
real GPUs. A user expects one start, on the revision the rollout is heading to.
"""

from __future__ import annotations

from sim_helpers import engine_manifest, run_world

from omenative_core.model import CreatePod, LifecycleConfig
from omenative_core.planner import plan
from omenative_sim.world import ClusterSpec, World


def _world(**spec: object) -> World:
    return World(ClusterSpec(nodes=12, gpus_per_node=2, pod_start_seconds=5,
                             pod_ready_seconds=20.0),
                 engine_manifest(replicas=2, **spec), config=LifecycleConfig())


def _rolling_with_instance_0_waiting(world: World) -> str:
    """Roll img:2 until Instance 1's replacement is being built and 0 waits its turn."""
    run_world(world, 120)
    world.patch_replica({"spec": {"runners": engine_manifest(image="img:2")["spec"]["runners"]}})
    p = plan(world.snapshot())
    world.apply(p)
    rows = {r.index: r for r in p.status.instances}
    assert rows[0].operation is None and rows[1].operation is not None  # 1 surges first
    return p.status.update_revision


def _starts_of_instance_0(world: World, seconds: float) -> list[str]:
    """Images of the pods created for Instance 0 over ``seconds``, pass by pass."""
    images: list[str] = []
    end = world.now + seconds
    while world.now < end:
        p = plan(world.snapshot())
        for a in p.actions:
            if isinstance(a, CreatePod) and a.body["metadata"]["labels"].get(
                    "ome.io/instance-index") == "0":
                images.append(a.body["spec"]["containers"][0]["image"])
        if p.actions:
            world.apply(p)
        else:
            world.advance(world.now + 1)
    return images


def test_a_restart_during_a_rollout_comes_back_on_the_target_once() -> None:
    world = _world()
    target = _rolling_with_instance_0_waiting(world)
    world.fail_pod("chat-engine-engine-0-worker-0")
    p = plan(world.snapshot())
    row = next(r for r in p.status.instances if r.index == 0)
    assert row.operation is not None and row.operation.type == "Restart"
    assert row.operation.target_revision == target
    world.apply(p)
    images = _starts_of_instance_0(world, 600)
    assert images == ["img:2", "img:2"]  # one gang start (leader + worker), on the target
    status = world.status
    assert status is not None and status.updated_replicas == 2
    assert status.current_revision == status.update_revision


def test_below_the_partition_a_restart_keeps_the_revision_it_ran() -> None:
    world = _world(pacing={"partition": 1})
    _rolling_with_instance_0_waiting(world)
    world.fail_pod("chat-engine-engine-0-worker-0")
    images = _starts_of_instance_0(world, 300)
    assert images and set(images) == {"img:1"}

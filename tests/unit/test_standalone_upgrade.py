"""Upgrading to OME's standalone names (issue 28 (a)): what the release before left keeps
running under its own names, and only what replaces it takes OME's.

The release before named a standalone replica ``llm``'s pods ``llm-{index}-...`` behind
``llm-headless``; OME names them ``llm-engine-{index}-...`` behind
``llm-engine-headless`` (guide "Run a standalone InferenceReplica", ome-docs@8c764098).
A worker finds its leader at ``OME_LEADER_ADDRESS``, so an Instance's pods must never be
split between the two spellings.
"""

from __future__ import annotations

from typing import Any

from tests.old_names import old_names, old_prefix
from tests.unit.sim_helpers import engine_manifest, run_world

from omenative_core.planner import plan
from omenative_sim.world import ClusterSpec, World


def _world(replicas: int = 2) -> World:
    manifest = engine_manifest(workers=1, replicas=replicas)
    manifest["metadata"]["name"] = "llm"
    return World(ClusterSpec(nodes=6, gpus_per_node=2, pod_start_seconds=2,
                             pod_ready_seconds=2.0), manifest)


def _services(world: World) -> set[str]:
    return {name for kind, name in world.objects if kind == "Service"}


def _leader_address(world: World, pod: str) -> str:
    env = world.pods[pod].body["spec"]["containers"][0]["env"]
    return next(e["value"] for e in env if e["name"] == "OME_LEADER_ADDRESS")


def _ready(world: World) -> list[int]:
    status = world.status
    assert status is not None
    return sorted(r.index for r in status.instances if r.phase == "Ready")


def test_running_old_instances_keep_their_pods_and_service() -> None:
    world = _world()
    with old_names():
        run_world(world, 60)
    before = {name: pod.uid for name, pod in world.pods.items()}
    assert sorted(before) == ["llm-0-leader-0", "llm-0-worker-0",
                              "llm-1-leader-0", "llm-1-worker-0"]
    assert _services(world) == {"llm-headless"}

    run_world(world, 120)  # the upgraded manager takes over
    assert {name: pod.uid for name, pod in world.pods.items()} == before  # none replaced
    assert _services(world) == {"llm-headless", "llm-engine-headless"}  # the old one kept
    assert _ready(world) == [0, 1]
    assert not plan(world.snapshot()).actions  # at rest: nothing to rename


def test_a_half_created_old_instance_is_finished_under_its_own_names() -> None:
    world = _world(replicas=1)
    with old_names():
        p = plan(world.snapshot())
        leader = next(i for i, a in enumerate(p.actions)
                      if getattr(a, "name", "") == "llm-0-leader-0")
        world.apply(p, limit=leader + 1)  # the old release stopped after the leader
    assert sorted(world.pods) == ["llm-0-leader-0"]

    run_world(world, 60)
    assert sorted(world.pods) == ["llm-0-leader-0", "llm-0-worker-0"]
    assert _leader_address(world, "llm-0-worker-0") == "llm-0-leader-0.llm-headless"
    assert world.pods["llm-0-worker-0"].body["spec"]["subdomain"] == "llm-headless"
    assert _ready(world) == [0]


def _old(world: World) -> list[str]:
    return sorted(n for n in world.pods if old_prefix("llm", n))


def test_replacements_take_omes_names_and_the_old_service_goes() -> None:
    world = _world()
    with old_names():
        run_world(world, 60)
    run_world(world, 10)

    world.patch_replica({"spec": {"replicas": 3}})  # a new Instance: OME's names
    run_world(world, 60)
    assert {"llm-engine-2-leader-0", "llm-engine-2-worker-0"} <= set(world.pods)
    assert _leader_address(world, "llm-engine-2-worker-0") == (
        "llm-engine-2-leader-0.llm-engine-headless")

    world.fail_pod("llm-0-worker-0")  # a whole-Instance restart: its next attempt is new
    run_world(world, 60)
    assert _old(world) == ["llm-1-leader-0", "llm-1-worker-0"]
    assert _leader_address(world, "llm-engine-0-worker-0") == (
        "llm-engine-0-leader-0.llm-engine-headless")
    assert "llm-headless" in _services(world)  # Instance 1 still hangs off it

    spec: dict[str, Any] = world.manifest["spec"]
    runners = spec["runners"]
    for runner in runners:
        runner["template"]["spec"]["containers"][0]["image"] = "img:2"
    world.patch_replica({"spec": {"runners": runners}})  # an update replaces Instance 1
    run_world(world, 300)
    assert _old(world) == []
    assert len(_ready(world)) == 3  # a gang's surge takes a new index
    assert _services(world) == {"llm-engine-headless"}  # the old Service is gone

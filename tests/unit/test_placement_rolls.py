"""Placement is part of what rolls out (issue 30 item 2).

Changing ``topologyKey``, ``topologySpread`` or ``topologySpreadKey`` on a running replica
is a new revision, so every Instance moves through the update strategy (a new gang with
the new affinity serves before the old one drains); a spec that sets none of them hashes
exactly as before, so upgrading the manager rolls nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from sim_helpers import engine_manifest, run_world

from omenative_core import replica_from_json
from omenative_core.model import LifecycleConfig
from omenative_core.revisions import revision_hash, spec_revision_hash
from omenative_sim.world import ClusterSpec, World


def _world(strategy: str = "SurgeThenDrain") -> World:
    manifest = engine_manifest(replicas=2, workers=1)
    manifest["spec"]["lifecycle"] = {"updateStrategy": {"type": strategy}}
    spec = ClusterSpec(nodes=8, gpus_per_node=2, pod_start_seconds=2, pod_ready_seconds=2.0,
                       labels={"example.com/rack": "r1"})
    return World(spec, manifest, config=LifecycleConfig())


def _worker_affinity_keys(world: World) -> set[str]:
    keys: set[str] = set()
    for pod in world.pods.values():
        if pod.labels.get("ome.io/runner") != "worker" or pod.terminating:
            continue
        terms = (((pod.body.get("spec") or {}).get("affinity") or {}).get("podAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution") or []
        keys |= {t.get("topologyKey", "") for t in terms}
    return keys


def test_a_spec_without_placement_fields_hashes_as_before() -> None:
    manifest: dict[str, Any] = engine_manifest(replicas=2, workers=1)
    spec = replica_from_json(manifest).spec
    before = revision_hash(spec.runners, spec.pairing_protocol, None)  # the old formula
    assert spec_revision_hash(spec, None) == before == "26e53d993a"  # main's code gave it


@pytest.mark.parametrize("strategy", ["SurgeThenDrain", "InPlaceIfPossible"])
def test_changing_topology_key_rolls_every_instance_through_the_strategy(
        strategy: str) -> None:
    world = _world(strategy)
    run_world(world, 60)
    before = world.status
    assert before is not None and _worker_affinity_keys(world) == set()
    world.patch_replica({"spec": {"topologyKey": "example.com/rack"}})
    serving: list[int] = []
    for _ in range(60):
        run_world(world, 5)
        status = world.status
        assert status is not None
        serving.append(status.serving_replicas)
    after = world.status
    assert after is not None
    assert after.update_revision != before.update_revision  # a new revision
    assert after.current_revision == after.update_revision
    assert after.updated_replicas == 2
    assert {r.running_revision for r in after.instances} == {after.update_revision}
    assert _worker_affinity_keys(world) == {"example.com/rack"}  # the gangs moved
    assert min(serving) >= 2  # surge first: serving never dropped

"""steps.steady: the steady rows of a big pass, found all at once, are the per-row check's.

A cold pass over a fleet checks every settled row in one go (``steady.find`` over at least
``_BULK`` rows); a row with any fault must be left to the full check, which acts on it.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from attrs import evolve
from tests.property.test_incremental_plan import changed_pod
from tests.unit.sim_helpers import engine_manifest, run_world

from omenative_core.incremental import plan_incremental
from omenative_core.labels import LABEL_REVISION_HASH
from omenative_core.model import LifecycleConfig, Snapshot
from omenative_core.model.observed import ContainerView, NodeView, PodView
from omenative_core.planner import plan_pass
from omenative_core.steps import steady
from omenative_sim.world import ClusterSpec, World

INSTANCES = 2 * steady._BULK


@pytest.fixture(scope="module")
def settled() -> Snapshot:
    world = World(
        ClusterSpec(nodes=INSTANCES // 4 + 1, gpus_per_node=8, pod_start_seconds=1,
                    pod_ready_seconds=1),
        engine_manifest(replicas=INSTANCES),
        config=LifecycleConfig(),
    )
    run_world(world, 30)
    return world.snapshot()


def _crashing(pod: PodView) -> PodView:
    return evolve(pod, containers=(ContainerView(name="c", waiting_reason="CrashLoopBackOff"),))


FAULTS = {
    "unready": lambda pod: changed_pod(pod, "unready"),
    "restarted": lambda pod: changed_pod(pod, "restarted"),
    "unschedulable": lambda pod: changed_pod(pod, "unschedulable"),
    "crashing": _crashing,
    "terminating": lambda pod: evolve(pod, deletion_timestamp=datetime(2026, 1, 1)),
    "failed": lambda pod: evolve(pod, phase="Failed"),
    "renamed": lambda pod: evolve(pod, name=pod.name + "x"),
    "other revision": lambda pod: evolve(
        pod, labels={**pod.labels, LABEL_REVISION_HASH: "0000000000"}
    ),
    "lost node": lambda pod: evolve(pod, node_name="node-gone"),
}


def test_a_fleet_at_rest_is_steady_row_by_row(settled: Snapshot) -> None:
    _, st = plan_pass(settled)
    assert st is not None and len(st.steady_rows) == INSTANCES
    assert len(st.steady_counts) == INSTANCES, "every row found steady by one bulk check"


def test_each_fault_leaves_its_instance_to_the_full_check(settled: Snapshot) -> None:
    """One pod per fault kind changed, each in its own Instance (pods 1, 3, 5 ...): the
    fast pass finds exactly the others steady and plans what the slow pass plans."""
    pods = list(settled.pods)
    faulty = set()
    for k, fault in enumerate(FAULTS.values()):
        pod = fault(pods[2 * k + 1])
        assert pod is not None
        pods[2 * k + 1] = pod
        faulty.add(int(pod.labels["ome.io/instance-index"]))
    snap = evolve(settled, pods=tuple(pods))
    fast, st = plan_pass(snap)
    slow, _ = plan_pass(snap, fast=False)
    assert fast == slow
    assert st is not None and not faulty & st.steady_counts.keys()
    assert len(st.steady_counts) == INSTANCES - len(FAULTS)
    assert fast == plan_incremental(snap, None)[0]


def test_a_gated_pod_is_steady_and_counted_not_admitted(settled: Snapshot) -> None:
    pods = list(settled.pods)
    pods[1] = evolve(pods[1], scheduling_gates=("example.com/hold",))
    index = int(pods[1].labels["ome.io/instance-index"])
    snap = evolve(settled, pods=tuple(pods))
    fast, st = plan_pass(snap)
    assert fast == plan_pass(snap, fast=False)[0]
    assert st is not None and st.steady_counts[index][1] is False
    assert fast.status.instances[index].admitted is False


def test_a_node_that_is_not_ready_unsteadies_its_pods(settled: Snapshot) -> None:
    node = settled.pods[0].node_name
    assert node is not None
    nodes = {**settled.nodes, node: NodeView(name=node, ready=False)}
    snap = evolve(settled, nodes=nodes)
    fast, st = plan_pass(snap)
    assert fast == plan_pass(snap, fast=False)[0]
    on_node = {int(p.labels["ome.io/instance-index"]) for p in snap.pods if p.node_name == node}
    assert st is not None and on_node and not on_node & st.steady_counts.keys()


@pytest.mark.parametrize("same_attempt", [True, False])
def test_two_pods_of_one_name_are_judged_as_the_full_check_judges_them(
    settled: Snapshot, same_attempt: bool
) -> None:
    """A worker that carries its leader's name (a cache that is not what the API server
    holds): the full check reads the Instance's pods by name, so the bulk check leaves
    every row to it (before, it found that Instance steady and the plans differed)."""
    pods = list(settled.pods)
    leader, worker = pods[2], pods[3]
    assert leader.instance == worker.instance
    labels = worker.labels if same_attempt else {**worker.labels, LABEL_REVISION_HASH: "0"}
    pods[3] = evolve(worker, name=leader.name, labels=labels)
    snap = evolve(settled, pods=tuple(pods))
    fast, st = plan_pass(snap)
    assert st is not None and not st.cache.names_unique
    assert fast == plan_pass(snap, fast=False)[0] == plan_incremental(snap, None)[0]

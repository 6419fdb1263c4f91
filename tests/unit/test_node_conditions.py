"""Issue 15: what depends on the nodes is a condition and a Warning Event, never a rejection.

A spread key no node carries, or a gang bigger than the cluster (in total, or in what is
free now), is reported at once, naming the key or the numbers; the pods are still
created, and the condition clears when the nodes change. Driven through the simulator.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from attrs import evolve
from sim_helpers import run_world

from omenative_core.model import CreatePod, Plan
from omenative_core.model.observed import NodeView, Snapshot
from omenative_core.planner import plan
from omenative_core.steps.capacity import usable_nodes
from omenative_core.views import node_view_from_json
from omenative_sim.world import ClusterSpec, World

ZONE = "topology.kubernetes.io/zone"


def _manifest(
    *,
    workers: int = 1,
    replicas: int = 1,
    gpus: int = 1,
    leader_gpus: int | None = None,
    **spec: Any,
) -> dict[str, Any]:
    def tpl(n: int) -> dict[str, Any]:
        return {
            "spec": {
                "containers": [
                    {
                        "name": "ome-container",
                        "image": "img:1",
                        "resources": {"limits": {"nvidia.com/gpu": n}},
                    }
                ]
            }
        }

    runners: list[dict[str, Any]] = (
        [
            {"name": "leader", "template": tpl(gpus if leader_gpus is None else leader_gpus)},
            {"name": "worker", "size": workers, "template": tpl(gpus)},
        ]
        if workers
        else [{"name": "default", "template": tpl(gpus)}]
    )
    return {
        "metadata": {"name": "chat-engine", "namespace": "ns"},
        "spec": {"component": "engine", "replicas": replicas, "runners": runners, **spec},
    }


def _world(manifest: dict[str, Any], *, nodes: int = 2, gpus: int = 8) -> World:
    return World(
        ClusterSpec(nodes=nodes, gpus_per_node=gpus, pod_start_seconds=2, pod_ready_seconds=2),
        manifest,
    )


def _condition(p: Plan, type_: str) -> tuple[str, str, str] | None:
    for c in p.status.conditions:
        if c.type == type_:
            return (c.status, c.reason, c.message)
    return None


def _events(p: Plan, reason: str) -> list[tuple[str, str]]:
    return [(e.type, e.message) for e in p.events if e.reason == reason]


def _creates(p: Plan) -> list[str]:
    return [a.name for a in p.actions if isinstance(a, CreatePod)]


def _with_nodes(snap: Snapshot, nodes: list[NodeView]) -> Snapshot:
    return evolve(snap, nodes={n.name: n for n in nodes})


# ---------------------------------------------------------------- topologySpread: Required


def test_required_spread_key_on_no_node_is_reported_at_once_and_pods_are_created() -> None:
    world = _world(
        _manifest(workers=0, replicas=2, topologySpread="Required", topologySpreadKey=ZONE)
    )
    p = plan(world.snapshot())
    assert _creates(p) == ["chat-engine-engine-0-default-0", "chat-engine-engine-1-default-0"]
    cond = _condition(p, "TopologyKeyMissing")
    assert cond is not None and cond[:2] == ("True", "TopologyKeyMissing")
    assert f"spec.topologySpreadKey '{ZONE}'" in cond[2]
    assert "no Ready, schedulable node carries the label" in cond[2]
    ((kind, message),) = _events(p, "TopologyKeyMissing")
    assert kind == "Warning" and ZONE in message and "no Ready, schedulable node" in message
    assert p.status.observed_generation == world.replica.metadata.generation  # not rejected


def test_missing_spread_key_warns_once_then_clears_when_a_node_gets_the_label() -> None:
    world = _world(_manifest(workers=0, topologySpread="Required", topologySpreadKey=ZONE))
    world.apply(plan(world.snapshot()))
    world.advance(10)
    again = plan(world.snapshot())
    assert _condition(again, "TopologyKeyMissing") is not None
    assert _events(again, "TopologyKeyMissing") == []  # no Event storm while it waits
    assert world.pod_count == 1  # the pod exists, Pending
    world.apply(again)
    snap = world.snapshot()
    labelled = [evolve(n, labels={**n.labels, ZONE: "a"}) for n in snap.nodes.values()]
    cleared = plan(_with_nodes(snap, labelled))
    assert _condition(cleared, "TopologyKeyMissing") == (
        "False",
        "TopologyKeyPresent",
        "a Ready, schedulable node carries the spread key",
    )
    assert [t for t, _ in _events(cleared, "TopologyKeyPresent")] == ["Normal"]
    assert not [e for e in cleared.events if e.type == "Warning"]


def test_preferred_spread_or_a_carried_key_raises_nothing() -> None:
    preferred = _world(_manifest(workers=0, topologySpread="Preferred", topologySpreadKey=ZONE))
    carried = World(
        ClusterSpec(nodes=2, gpus_per_node=8, labels={ZONE: "a"}),
        _manifest(workers=0, topologySpread="Required", topologySpreadKey=ZONE),
    )
    for world in (preferred, carried):
        p = plan(world.snapshot())
        assert _condition(p, "TopologyKeyMissing") is None
        assert not [e for e in p.events if e.type == "Warning"]


def test_spread_key_falls_back_to_topology_key() -> None:
    world = _world(_manifest(topologySpread="Required", topologyKey="rack"))
    cond = _condition(plan(world.snapshot()), "TopologyKeyMissing")
    assert cond is not None and "'rack'" in cond[2]


# ---------------------------------------------------------------- total capacity


def test_pod_bigger_than_any_node_names_the_numbers_and_pods_are_still_created() -> None:
    world = _world(_manifest(workers=7, gpus=8), nodes=8, gpus=4)
    p = plan(world.snapshot())
    assert len(_creates(p)) == 8
    assert _condition(p, "InsufficientCapacity") == (
        "True",
        "GangExceedsCapacity",
        "a leader+7 workers gang needs 64 nvidia.com/gpu, 8 per pod; the largest Ready "
        "node has 4; all Ready nodes together 32; its pods are created and stay Pending "
        "until the cluster grows",
    )
    ((kind, message),) = _events(p, "GangExceedsCapacity")
    assert kind == "Warning" and "needs 64 nvidia.com/gpu" in message


def test_gang_bigger_than_all_ready_nodes_together_is_reported() -> None:
    world = _world(_manifest(workers=3, gpus=8, leader_gpus=2), nodes=2, gpus=8)
    p = plan(world.snapshot())
    assert len(_creates(p)) == 4
    cond = _condition(p, "InsufficientCapacity")
    assert cond is not None and cond[1] == "GangExceedsCapacity"
    assert cond[2].startswith(
        "a leader+3 workers gang needs 26 nvidia.com/gpu, 2 for the leader, 8 per worker; "
        "the largest Ready node has 8; all Ready nodes together 16"
    )


def test_gang_capacity_clears_when_bigger_nodes_join() -> None:
    world = _world(_manifest(workers=1, gpus=8), nodes=2, gpus=4)
    world.apply(plan(world.snapshot()))
    snap = world.snapshot()
    big = [NodeView(name=f"big-{i}", gpus=8) for i in range(2)]
    joined = _with_nodes(snap, [*snap.nodes.values(), *big])
    # until the scheduler retries, the pods still wait: now for free GPUs, not a bigger cluster
    waiting = _condition(plan(joined), "InsufficientCapacity")
    assert waiting is not None and waiting[:2] == ("True", "InsufficientFreeCapacity")
    placed = tuple(
        evolve(
            pod,
            node_name=f"big-{i}",
            condition_reasons={},
            conditions={**pod.conditions, "PodScheduled": "True"},
        )
        for i, pod in enumerate(joined.pods)
    )
    cleared = plan(evolve(joined, pods=placed))
    assert _condition(cleared, "InsufficientCapacity") == (
        "False",
        "CapacityAvailable",
        "the gang fits the Ready nodes",
    )
    assert [t for t, _ in _events(cleared, "CapacityAvailable")] == ["Normal"]


def test_not_ready_and_cordoned_nodes_do_not_count() -> None:
    world = _world(_manifest(workers=1, gpus=4), nodes=1, gpus=8)
    snap = world.snapshot()
    extra = [
        NodeView(name="down", ready=False, gpus=80),
        NodeView(name="cordoned", unschedulable=True, gpus=80),
    ]
    p = plan(_with_nodes(snap, [*snap.nodes.values(), *extra]))
    assert _condition(p, "InsufficientCapacity") is None  # 8 fits the one Ready node
    tight = [NodeView(name="small", gpus=2), *extra]
    p = plan(_with_nodes(snap, tight))
    cond = _condition(p, "InsufficientCapacity")
    assert (
        cond is not None and "the largest Ready node has 2; all Ready nodes together 2" in cond[2]
    )


def test_unknown_gpus_or_no_ready_node_says_nothing_new() -> None:
    world = _world(_manifest(workers=1, gpus=8), nodes=2, gpus=4)
    snap = world.snapshot()
    unknown = [NodeView(name="n", gpus=None)]
    assert _condition(plan(_with_nodes(snap, unknown)), "InsufficientCapacity") is None
    assert _condition(plan(_with_nodes(snap, [])), "InsufficientCapacity") is None
    raised = plan(snap)
    world.apply(raised)
    said = _condition(raised, "InsufficientCapacity")
    assert said is not None and said[0] == "True"
    for nodes in (unknown, []):  # the nodes cannot tell: keep what was said, no new Event
        p = plan(_with_nodes(world.snapshot(), nodes))
        assert _condition(p, "InsufficientCapacity") == said
        assert not [e for e in p.events if e.reason in ("CapacityAvailable", said[1])]


# ---------------------------------------------------------------- free capacity


def test_gang_that_fits_the_cluster_but_not_what_is_free_is_reported_and_clears() -> None:
    # two nodes of 4 GPUs hold two gangs of 2x2 GPUs; the third waits for free GPUs
    world = _world(_manifest(workers=1, gpus=2, replicas=3), nodes=2, gpus=4)
    run_world(world, 30)
    p = plan(world.snapshot())
    assert world.pod_count == 6  # every gang's pods exist
    cond = _condition(p, "InsufficientCapacity")
    assert cond is not None and cond[:2] == ("True", "InsufficientFreeCapacity")
    assert cond[2] == (
        "a leader+1 worker gang needs 4 nvidia.com/gpu, 2 per pod; it fits the cluster "
        "(all Ready nodes together 8) but not what is free now: the scheduler cannot place "
        "the pods of Instance(s) 2; they stay Pending until GPUs free up"
    )
    status = world.status
    assert status is not None and status.ready_replicas == 2
    world.patch_replica({"spec": {"replicas": 2}})
    run_world(world, 30)
    status = world.status
    assert status is not None
    (cleared,) = [c for c in status.conditions if c.type == "InsufficientCapacity"]
    assert (cleared.status, cleared.reason) == ("False", "CapacityAvailable")


def test_a_cluster_that_holds_everything_has_no_capacity_condition() -> None:
    world = _world(_manifest(workers=1, gpus=2, replicas=2), nodes=2, gpus=4)
    run_world(world, 30)
    status = world.status
    assert status is not None and status.ready_replicas == 2
    assert not [
        c for c in status.conditions if c.type in ("InsufficientCapacity", "TopologyKeyMissing")
    ]


# ---------------------------------------------------------------- the node view


def test_node_view_reads_allocatable_gpus() -> None:
    def node(status: dict[str, Any]) -> NodeView:
        return node_view_from_json({"metadata": {"name": "n"}, "status": status})

    assert node({"allocatable": {"nvidia.com/gpu": "8", "cpu": "64"}}).gpus == 8
    assert node({"allocatable": {"cpu": "64"}}).gpus == 0  # a CPU node
    assert node({}).gpus is None  # not reported yet: unknown


def test_many_waiting_instances_keep_the_message_short() -> None:
    world = _world(_manifest(workers=1, gpus=2, replicas=9), nodes=1, gpus=4)
    run_world(world, 30)
    cond = _condition(plan(world.snapshot()), "InsufficientCapacity")
    assert cond is not None and cond[1] == "InsufficientFreeCapacity"
    assert "Instance(s) 1, 2, 3, 4, 5 and 3 more;" in cond[2]


def test_a_gang_bigger_than_any_topology_domain_is_reported_as_exceeding_capacity() -> None:
    # issue 30: a leader+3 workers gang of 4 GPUs with topologyKey ZONE fits the cluster's
    # 8 GPUs, but each zone (one node) has 2: no placement can ever hold it
    world = World(
        ClusterSpec(nodes=4, gpus_per_node=2, pod_start_seconds=2, pod_ready_seconds=2,
                    node_labels={f"node-{i}": {ZONE: f"z{i}"} for i in range(4)}),
        _manifest(workers=3, gpus=1, topologyKey=ZONE),
    )
    run_world(world, 30)
    p = plan(world.snapshot())
    cond = _condition(p, "InsufficientCapacity")
    assert cond is not None and cond[:2] == ("True", "GangExceedsCapacity")
    assert f"topologyKey {ZONE!r}" in cond[2] and "has 2" in cond[2]
    status = world.status
    assert status is not None and status.instances[0].phase != "Failed"


def test_a_gang_that_fits_one_domain_is_not_reported_as_exceeding_capacity() -> None:
    world = World(
        ClusterSpec(nodes=4, gpus_per_node=2, pod_start_seconds=2, pod_ready_seconds=2,
                    node_labels={f"node-{i}": {ZONE: f"z{i // 2}"} for i in range(4)}),
        _manifest(workers=3, gpus=1, replicas=2, topologyKey=ZONE),
    )
    run_world(world, 30)
    cond = _condition(plan(world.snapshot()), "InsufficientCapacity")
    assert cond is None or cond[1] != "GangExceedsCapacity"


class _CountingNodes(dict[str, NodeView]):
    """A node map that counts how often a pass reads all of it."""

    reads = 0

    def values(self) -> Any:
        type(self).reads += 1
        return super().values()


def _nodes(
    *specs: tuple[str, bool | None, bool, int | None, dict[str, str]],
) -> dict[str, NodeView]:
    return {name: NodeView(name=name, ready=ready, unschedulable=cordoned, gpus=gpus,
                           labels=labels)
            for name, ready, cordoned, gpus, labels in specs}


def test_the_usable_nodes_summary_counts_only_ready_schedulable_nodes() -> None:
    summary = usable_nodes(_nodes(
        ("a", True, False, 8, {ZONE: "z1"}), ("b", True, False, 4, {"rack": "r"}),
        ("cordoned", True, True, 16, {"only-cordoned": "x"}),
        ("down", False, False, 32, {"only-down": "x"}), ("unknown", None, False, 8, {})))
    assert (summary.any, summary.known, summary.largest, summary.together) == (True, True, 8, 12)
    assert summary.carries(ZONE) and summary.carries("rack")
    assert not summary.carries("only-cordoned") and not summary.carries("only-down")
    unknown_gpus = usable_nodes(_nodes(("a", True, False, 8, {}), ("b", True, False, None, {})))
    assert (unknown_gpus.known, unknown_gpus.largest, unknown_gpus.together) == (False, 0, 0)
    empty = usable_nodes({})
    assert (empty.any, empty.known, empty.largest, empty.together) == (False, True, 0, 0)
    assert not empty.carries(ZONE)


def test_passes_over_one_node_map_read_its_nodes_once() -> None:
    """The manager hands every replica's snapshot the same node map until a node changes:
    1,250 nodes are then read once for 2,500 replicas, not once a pass."""
    nodes = _CountingNodes(_nodes(("a", True, False, 8, {ZONE: "z1"})))
    _CountingNodes.reads = 0
    first = usable_nodes(nodes)
    assert usable_nodes(nodes) is first and _CountingNodes.reads == 1
    changed = _CountingNodes({**nodes, "b": NodeView(name="b", gpus=8)})  # a node came
    assert usable_nodes(changed).together == 16 and _CountingNodes.reads == 2


def test_a_live_node_view_is_read_again_each_time() -> None:
    """A ``MappingProxyType`` is a live view of a cache: what it shows may change, so its
    summary is never kept."""
    backing = _nodes(("a", True, False, 8, {}))
    live = MappingProxyType(backing)
    assert usable_nodes(live).together == 8
    backing["b"] = NodeView(name="b", gpus=8)
    assert usable_nodes(live).together == 16

"""The GPU caretaker on the clusters a user describes: what it recommends, and when it won't."""

from __future__ import annotations

from omenative_core.advisor import (
    AdvisorConfig,
    ClusterView,
    GpuNode,
    GpuPod,
    InstanceKey,
    PendingGang,
    ReplicaView,
    advise,
)
from omenative_core.model.config import AuditConfig


def _spread_cluster(*, never: bool = False, audit: AuditConfig | None = None,
                    nodes: int = 4) -> tuple[ClusterView, AdvisorConfig]:
    """Four 8-GPU nodes, four single-pod 4-GPU Instances one per node, a 2 x 8 gang pending."""
    view = ClusterView(
        nodes=tuple(GpuNode(name=f"gpu-{i}", gpus=8) for i in range(nodes)),
        pods=tuple(GpuPod(name=f"small-{i}", node=f"gpu-{i}", gpus=4,
                          owner=InstanceKey("ml", "small-engine", i)) for i in range(4)),
        replicas=(ReplicaView(namespace="ml", name="small-engine", desired=4,
                              ready=frozenset(range(4)), migration_never=never),),
        pending=(PendingGang(namespace="ml", name="big-engine[0]", pod_gpus=(8, 8)),),
    )
    return view, AdvisorConfig(audit=audit or AuditConfig())


def test_fragmented_gpus_two_moves_free_two_whole_nodes_for_the_pending_gang() -> None:
    view, config = _spread_cluster()
    advice = advise(view, config)
    recs = advice.recommendations
    assert [r.reason for r in recs] == ["Fragmentation", "Fragmentation"]
    assert [r.step for r in recs] == [1, 2]
    moved_from = {r.from_nodes[0] for r in recs}
    moved_to = {r.target_nodes[0] for r in recs}
    assert len(moved_from) == 2 and not moved_from & moved_to, "two nodes emptied, not refilled"
    first = recs[0]
    assert first.benefit.pending_gang == "ml/big-engine[0]"
    assert (first.benefit.free_whole_nodes_before, first.benefit.free_whole_nodes_after) == (0, 2)
    assert first.benefit.largest_placeable_gang_before == 0
    assert first.benefit.largest_placeable_gang_after == 16
    assert (first.cost.instances_moved, first.cost.surge_gpus) == (2, 8)
    (domain,) = advice.domains
    assert (domain.free_gpus, domain.free_on_whole_nodes, domain.fragmentation) == (16, 0, 1.0)


def test_a_gang_that_fits_already_is_not_a_reason_to_move_anything() -> None:
    view, config = _spread_cluster(nodes=6)
    advice = advise(view, config)
    assert advice.recommendations == ()
    assert any("fits as the cluster is" in n for n in advice.notes)


def test_a_notready_node_under_a_ready_instance_is_emptied() -> None:
    view = ClusterView(
        nodes=(GpuNode(name="a", gpus=8, ready=False, schedulable=False),
               GpuNode(name="b", gpus=8)),
        pods=(GpuPod(name="p", node="a", gpus=4, owner=InstanceKey("ml", "chat", 0)),),
        replicas=(ReplicaView(namespace="ml", name="chat", desired=1, ready=frozenset({0})),),
    )
    (rec,) = advise(view).recommendations
    assert (rec.reason, rec.from_nodes, rec.target_nodes) == ("UnhealthyNode", ("a",), ("b",))


def test_a_bad_gpu_condition_and_a_cordon_are_reasons_too() -> None:
    view = ClusterView(
        nodes=(GpuNode(name="a", gpus=8, conditions=frozenset({"Ready", "GpuXidErrors"})),
               GpuNode(name="b", gpus=8, cordoned=True, schedulable=False),
               GpuNode(name="c", gpus=8), GpuNode(name="d", gpus=8)),
        pods=(GpuPod(name="p0", node="b", gpus=8, owner=InstanceKey("ml", "chat", 0)),
              GpuPod(name="p1", node="a", gpus=8, owner=InstanceKey("ml", "chat", 1))),
        replicas=(ReplicaView(namespace="ml", name="chat", desired=2, ready=frozenset({0, 1})),),
    )
    config = AdvisorConfig(bad_gpu_conditions=("GpuXidErrors",))
    recs = advise(view, config).recommendations
    assert [(r.reason, r.from_nodes) for r in recs] == [("UnhealthyNode", ("a",)),
                                                         ("Cordoned", ("b",))]
    # by default no condition flags bad GPUs: only the cordon counts
    assert [r.reason for r in advise(view).recommendations] == ["Cordoned"]


def test_no_gpu_nodes_is_a_clear_nothing_to_do() -> None:
    advice = advise(ClusterView(nodes=(GpuNode(name="cpu", gpus=0),)))
    assert advice.recommendations == ()
    assert advice.notes == ("no schedulable GPU nodes: nothing to place or move",)


def test_policy_never_is_never_moved_and_says_so() -> None:
    view, config = _spread_cluster(never=True)
    advice = advise(view, config)
    assert advice.recommendations == ()
    assert any("no set of at most 4 allowed moves places it" in n for n in advice.notes)


def test_caps_of_zero_move_nothing_and_a_node_problem_says_why() -> None:
    view = ClusterView(
        nodes=(GpuNode(name="a", gpus=8, cordoned=True, schedulable=False),
               GpuNode(name="b", gpus=8)),
        pods=(GpuPod(name="p", node="a", gpus=4, owner=InstanceKey("ml", "chat", 0)),),
        replicas=(ReplicaView(namespace="ml", name="chat", desired=1, ready=frozenset({0})),),
    )
    config = AdvisorConfig(audit=AuditConfig(max_in_flight_migrations=0))
    advice = advise(view, config)
    assert advice.recommendations == ()
    assert advice.notes == ("ml/chat[0] on Cordoned node a stays: the audit caps allow no "
                            "migrations (lifecycle.audit)",)


def test_nothing_pending_and_all_nodes_sound_is_nothing_to_do() -> None:
    view, config = _spread_cluster()
    quiet = ClusterView(nodes=view.nodes, pods=view.pods, replicas=view.replicas)
    assert advise(quiet, config).notes == (
        "no unsound node holds an Instance and no gang is pending: nothing to do",)


def test_a_gang_with_a_topology_key_is_placed_inside_one_domain() -> None:
    # fabric x: two half-full nodes of ours; fabric y: one of ours, one half-full by a pod
    # omenative does not manage (it cannot move)
    nodes = (GpuNode(name="x1", gpus=8, labels={"fabric": "x"}),
             GpuNode(name="x2", gpus=8, labels={"fabric": "x"}),
             GpuNode(name="y1", gpus=8, labels={"fabric": "y"}),
             GpuNode(name="y2", gpus=8, labels={"fabric": "y"}))
    pods = tuple(GpuPod(name=f"p{i}", node=n, gpus=4, owner=InstanceKey("ml", "s", i))
                 for i, n in enumerate(["x1", "x2", "y1"]))
    view = ClusterView(
        nodes=nodes, pods=(*pods, GpuPod(name="other", node="y2", gpus=4)),
        replicas=(ReplicaView(namespace="ml", name="s", desired=3, ready=frozenset({0, 1, 2})),),
        pending=(PendingGang(namespace="ml", name="g", pod_gpus=(8, 8), topology_key="fabric"),),
    )
    recs = advise(view).recommendations
    # only fabric x can be emptied: both its Instances move to fabric y
    assert sorted(r.from_nodes[0] for r in recs) == ["x1", "x2"]
    assert sorted(r.target_nodes[0] for r in recs) == ["y1", "y2"]


def test_freeing_one_node_never_moves_a_replica_past_its_window_cap() -> None:
    """Two Instances of one replica share the only node a pending gang could take whole; the
    replica has room for one more migration in the window, so neither moves (found by the
    property test: both were recommended, 1 + 2 migrations against a cap of 2)."""
    view = ClusterView(
        nodes=(GpuNode(name="a", gpus=8), GpuNode(name="b", gpus=8)),
        pods=(GpuPod(name="r-1", node="a", gpus=1, owner=InstanceKey("ml", "r", 1)),
              GpuPod(name="r-3", node="a", gpus=1, owner=InstanceKey("ml", "r", 3)),
              GpuPod(name="s-0", node="b", gpus=1, owner=InstanceKey("ml", "s", 0))),
        replicas=(ReplicaView(namespace="ml", name="r", desired=2, ready=frozenset({1, 3}),
                              migrations_in_window=1),
                  ReplicaView(namespace="ml", name="s", desired=1, ready=frozenset({0}),
                              migration_never=True)),
        pending=(PendingGang(namespace="ml", name="big[0]", pod_gpus=(8,)),),
    )
    config = AdvisorConfig(audit=AuditConfig(max_in_flight_migrations=1,
                                             max_migrations_per_window=2))
    advice = advise(view, config)
    assert advice.recommendations == ()
    assert any("no set of at most" in n for n in advice.notes)
    # one slot more in the window and the same two moves are allowed
    roomy = AdvisorConfig(audit=AuditConfig(max_in_flight_migrations=1,
                                            max_migrations_per_window=3))
    assert {r.instance.index for r in advise(view, roomy).recommendations} == {1, 3}

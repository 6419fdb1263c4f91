"""The GPU caretaker's advice carried out in the simulator, on generated small clusters.

Each generated cluster has 8-GPU nodes, single-Instance replicas started on nodes where
they fit (some on a node whose GPUs are flagged unhealthy), and maybe a leader+worker
replica that does not fit. ``run_advise_scenario`` asks the advisor, requests the moves of
its first answer one after another as migrations that the real planner carries out, and
asks again after each. Whatever the advice was, no replica ever serves fewer Instances
than before the moves (they are replacement-first), and the moves do what they say: the
pending gang they name is placed, every Instance they
move off an unhealthy node leaves it.
"""

from __future__ import annotations

from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from omenative_sim.advise import AdviseResult, parse_advise_scenario, run_advise_scenario

GPUS_PER_NODE = 8


def _runner(name: str, gpus: int) -> dict[str, Any]:
    container = {"name": "ome-container", "image": "example.com/llm:1",
                 "resources": {"limits": {"nvidia.com/gpu": gpus}}}
    return {"name": name, "size": 1, "template": {"spec": {"containers": [container]}}}


def _replica(name: str, runners: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"component": "engine", "replicas": 1, "runners": runners}}


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    n_nodes = draw(st.integers(3, 6))
    replicas: list[dict[str, Any]] = []
    for node in range(n_nodes):  # most nodes partly used: free GPUs, few whole free nodes
        used = 0
        for _ in range(draw(st.sampled_from([0, 1, 1, 1, 1, 1, 2]))):
            gpus = draw(st.sampled_from([2, 2, 4, 4, 6]))
            if used + gpus > GPUS_PER_NODE:
                break
            used += gpus
            replicas.append({"startOn": [f"node-{node}"], "replica": _replica(
                f"r{len(replicas)}", [_runner("default", gpus)])})
    if not replicas:
        replicas.append({"replica": _replica("r0", [_runner("default", 2)])})
    if draw(st.sampled_from([True, True, True, False])):  # mostly: a gang to make room for
        gpus = draw(st.sampled_from([4, 6, 8, 8]))
        replicas.append({"replica": _replica(
            "gang", [_runner("leader", gpus), _runner("worker", gpus)])})
    scenario: dict[str, Any] = {
        "cluster": {"nodes": n_nodes, "gpusPerNode": GPUS_PER_NODE,
                    "podStartSeconds": 10, "podReadySeconds": 20},
        "replicas": replicas,
        "startSeconds": "5m",
        "moveTimeout": "30m",
    }
    if draw(st.sampled_from([True, False, False])):
        scenario["unhealthyNodes"] = [f"node-{draw(st.integers(0, n_nodes - 1))}"]
    return scenario


def _check(result: AdviseResult) -> None:
    for name, before in result.serving_before.items():
        assert result.min_serving[name] >= before, (
            f"{name} served {result.min_serving[name]} during the moves, {before} before")
    assert all(m.phase == "Completed" for m in result.moves), \
        [(str(m.recommendation.instance), m.phase) for m in result.moves]
    named = {r.benefit.pending_gang for r in result.before.recommendations
             if r.benefit.pending_gang}
    for gang in named:
        assert gang in result.placed(), f"{gang} named by the advice but still pending"
    for rec in result.before.recommendations:
        if rec.reason == "UnhealthyNode":  # each generated replica has one Instance
            assert rec.from_nodes[0] not in result.nodes_after[rec.instance.replica], \
                f"{rec.instance} was to leave unhealthy {rec.from_nodes[0]} and did not"


@given(scenarios(), st.integers(0, 3))
def test_advice_in_the_simulator_keeps_serving_and_does_its_job(
        raw: dict[str, Any], seed: int) -> None:
    result = run_advise_scenario(parse_advise_scenario(raw), seed=seed)
    event(f"moves: {len(result.moves)}")
    event(f"gangs placed: {len(result.placed())}")
    event("unhealthy-node moves" if any(m.recommendation.reason == "UnhealthyNode"
                                        for m in result.moves) else "no unhealthy-node move")
    _check(result)


def test_a_gang_is_not_promised_room_that_an_instance_on_an_unhealthy_node_will_take() -> None:
    """Found by the generator in CI (2026-12-05): five 8-GPU nodes, 4+4+6+4+4 GPUs used,
    the 6-GPU Instance on an unhealthy node with no room to leave, a 6+6 gang pending. The
    first answer moved two Instances to free two nodes for the gang; after the first move
    the advisor, asked again, gave the freed node to the Instance on the unhealthy node
    (unsound nodes are emptied first), and the gang stayed pending. Now the first answer
    sees that coming: it moves nothing for the gang and says why."""
    sizes = [4, 4, 6, 4, 4]
    replicas: list[dict[str, Any]] = [
        {"startOn": [f"node-{i}"], "replica": _replica(f"r{i}", [_runner("default", g)])}
        for i, g in enumerate(sizes)]
    replicas.append({"replica": _replica("gang", [_runner("leader", 6), _runner("worker", 6)])})
    raw = {"cluster": {"nodes": 5, "gpusPerNode": GPUS_PER_NODE, "podStartSeconds": 10,
                       "podReadySeconds": 20},
           "replicas": replicas, "startSeconds": "5m", "moveTimeout": "30m",
           "unhealthyNodes": ["node-2"]}
    result = run_advise_scenario(parse_advise_scenario(raw), seed=0)
    _check(result)
    assert not result.moves, "no move that the next answer would undo"
    assert any("goes first to ml/r2[0]" in n for n in result.before.notes), result.before.notes

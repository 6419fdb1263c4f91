"""KWOK's nodes and pod stages as the devcluster writes them (``omenative_devcluster.kwok``).

What the manager relies on from a node simulator: GPU capacity and the stand-in's topology
labels on every node; a pod Ready only once its serving gate is True (KWOK's own fast stage
sets every gate True itself); a Ready pod whose gate goes False unready again; a deleted pod
deleted only from a terminal phase.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from omenative_devcluster.kubelet_nodes import node_labels
from omenative_devcluster.kwok import (
    KWOK_NODE_ANNOTATION,
    KwokOptions,
    kwok_args,
    kwok_node,
    nodes_ready,
    pod_stages,
    stage_config,
)

OPTS = KwokOptions(nodes=3, gpus_per_node=4, start_delay=1.5, ready_delay=0.5,
                   delete_delay=0.25)


def _by_name() -> dict[str, dict[str, Any]]:
    return {s["metadata"]["name"]: s for s in pod_stages(OPTS)}


def _keys(stage: dict[str, Any]) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {m["key"]: (m["operator"], tuple(m.get("values", ())))
            for m in stage["spec"]["selector"]["matchExpressions"]}


def test_nodes_carry_gpus_the_stand_ins_labels_and_kwoks_annotation() -> None:
    node = kwok_node(OPTS, 1)
    name = node["metadata"]["name"]
    assert name == "kwok-node-1"
    assert node["metadata"]["labels"] == {**node_labels(name, 1), "type": "kwok"}
    key, value = KWOK_NODE_ANNOTATION
    assert node["metadata"]["annotations"][key] == value
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "4"
    assert node["status"]["allocatable"] == node["status"]["capacity"]


def test_a_pod_runs_after_its_delays_and_is_ready_only_by_its_serving_gate() -> None:
    stages = _by_name()
    running = stages["omenative-pod-running"]
    assert running["spec"]["delay"]["durationMilliseconds"] == 2000
    template = running["spec"]["next"]["patches"][0]["template"]
    assert "readinessGates }}\"False\"" in template, "gated pods start unready"
    assert "phase: Running" in template
    gate_ready = _keys(stages["omenative-pod-gate-ready"])
    assert gate_ready['.status.conditions.[] | select( .type == "ome.io/serving" ) | .status'
                      ] == ("In", ("True",))
    unready = _keys(stages["omenative-pod-gate-unready"])
    assert unready['.status.conditions.[] | select( .type == "ome.io/serving" ) | .status'
                   ] == ("In", ("False",))
    for stage in stages.values():
        patches = stage["spec"]["next"].get("patches") or []
        assert all(p["type"] == "strategic" and p["subresource"] == "status" for p in patches)


def test_a_deleted_pod_passes_a_terminal_phase_before_it_is_deleted() -> None:
    stages = _by_name()
    terminated = stages["omenative-pod-terminated"]
    assert terminated["spec"]["delay"]["durationMilliseconds"] == 250
    assert "phase: Succeeded" in terminated["spec"]["next"]["patches"][0]["template"]
    delete = stages["omenative-pod-delete"]
    assert delete["spec"]["next"] == {"delete": True}
    assert _keys(delete)[".status.phase"] == ("In", ("Succeeded", "Failed"))


def test_the_config_file_holds_the_options_every_stage_and_leases_of_40_seconds() -> None:
    node_stage = {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage",
                  "metadata": {"name": "node-initialize"}, "spec": {}}
    options, *docs = yaml.safe_load_all(stage_config(OPTS, [node_stage]))
    assert options["kind"] == "KwokConfiguration"
    assert options["options"]["podPlayStageParallelism"] == 32, "kwok's default 4 queues pods"
    assert [d["metadata"]["name"] for d in docs][:2] == ["node-initialize",
                                                         "omenative-pod-running"]
    args = kwok_args(Path("/k"), Path("/c"), Path("/s.yaml"), 1234)
    assert "--node-lease-duration-seconds=40" in args
    assert "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake" in args
    assert "--server-address=127.0.0.1:1234" in args


def test_only_our_ready_nodes_are_counted() -> None:
    def node(name: str, ready: str) -> dict[str, Any]:
        return {"metadata": {"name": name},
                "status": {"conditions": [{"type": "Ready", "status": ready}]}}

    listed = json.dumps({"items": [node("kwok-node-0", "True"), node("kwok-node-1", "False"),
                                   node("node-0", "True"), node("kwok-node-2", "True")]})
    assert nodes_ready(listed, 3, "kwok-node-") == 2


def test_a_big_cluster_gets_more_node_writers_so_its_leases_do_not_lapse() -> None:
    small, mid, big = (next(yaml.safe_load_all(stage_config(KwokOptions(nodes=n), [])))
                       for n in (100, 250, 1250))
    assert small["options"]["nodeLeaseParallelism"] == 4, "kwok's own default"
    assert mid["options"]["nodeLeaseParallelism"] == 10
    options = big["options"]
    assert options["nodeLeaseParallelism"] == 50, "125 renewals a second at up to 400 ms each"
    assert options["nodePlayStageParallelism"] == 50

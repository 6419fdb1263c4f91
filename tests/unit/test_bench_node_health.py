"""The controller benchmark names a contender whose run saw a node lose Ready.

Such a run measures the flap, not the controller: kube-controller-manager marks the node's
pods NotReady and the manager repairs Instances it then counts as lost. The 10,000-pod
re-run of 2026-12-07 was read as a slow manager until the controller-manager's log showed
KWOK nodes lapsing; ``cluster_signals.NodeHealth`` says so in the report itself.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from cluster_signals import NodeHealth

from omenative_controller.kube.client import KubeClient


def node(name: str, ready: str | None) -> dict[str, Any]:
    conditions = [] if ready is None else [{"type": "Ready", "status": ready}]
    return {"metadata": {"name": name}, "status": {"conditions": conditions}}


def health() -> NodeHealth:
    return NodeHealth(cast(KubeClient, None))  # the watch is never opened here


def test_a_node_that_lost_ready_voids_the_contender_running_then() -> None:
    h = health()
    h._see("ADDED", node("kwok-node-0", "True"))
    h._see("ADDED", node("kwok-node-1", "True"))
    h.phase("omenative")
    h._see("MODIFIED", node("kwok-node-1", "Unknown"))
    h._see("MODIFIED", node("kwok-node-1", "True"))
    h._see("MODIFIED", node("kwok-node-1", "False"))
    h.phase(None)
    h.phase("bare loop")
    h._see("MODIFIED", node("kwok-node-0", "True"))  # a heartbeat, no loss
    h.phase(None)
    assert h.lost["omenative"] == {"kwok-node-1": 2}
    assert "1 of 2 nodes lost Ready (2 times): NOT COMPARABLE" in h.line("omenative")
    assert h.line("bare loop") == "no node lost Ready (2 nodes)"


def test_starting_nodes_losses_between_contenders_and_deletions() -> None:
    h = health()
    h.phase("omenative")
    h._see("ADDED", node("kwok-node-0", None))  # still starting: not a loss
    h._see("MODIFIED", node("kwok-node-0", "False"))
    h._see("MODIFIED", node("kwok-node-0", "True"))
    h.phase(None)
    h._see("MODIFIED", node("kwok-node-0", "False"))  # between contenders: nobody's
    h._see("MODIFIED", node("kwok-node-0", "True"))
    h.phase("LWS")
    h._see("DELETED", node("kwok-node-0", "True"))  # a node gone under a run is a loss
    assert not h.lost["omenative"]
    assert h.lost["LWS"] == {"kwok-node-0": 1}

"""Where a pod may run: a worker next to its leader, away from or toward given nodes, and
the replica's topology spread.

- ``topologyKey``: a worker pod must share the topology domain of its own Instance's
  leader (required pod affinity on the leader of the same index and incarnation).
- ``avoid_node`` / ``prefer_nodes``: preferred node affinity (weight 100 away, 50 toward),
  used when a migration moves an Instance.
- ``topologySpread``: leaders (or single pods) spread over ``topologySpreadKey`` (default
  ``topologyKey``), with ``maxSkew`` 1; Required does not schedule past it.

Each rule appends to what the template already has; nothing is removed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from omenative_core.jsoncopy import as_dict, as_list
from omenative_core.labels import (
    LABEL_INCARNATION,
    LABEL_INSTANCE_INDEX,
    LABEL_REPLICA,
    LABEL_RUNNER,
    NODE_HOSTNAME_LABEL,
)
from omenative_core.model.spec import InferenceReplica

__all__: list[str] = []

SPREAD_POLICIES = {"Preferred": "ScheduleAnyway", "Required": "DoNotSchedule"}
"""``topologySpread`` values and the ``whenUnsatisfiable`` each becomes."""


def _node_term(weight: int, operator: str, nodes: list[str]) -> dict[str, Any]:
    return {
        "weight": weight,
        "preference": {
            "matchExpressions": [
                {"key": NODE_HOSTNAME_LABEL, "operator": operator, "values": nodes}
            ]
        },
    }


def _leader_affinity(
    affinity: dict[str, Any], replica_name: str, index: int, incarnation: int, topology_key: str
) -> None:
    pod_affinity = as_dict(affinity.get("podAffinity"))
    required = as_list(pod_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
    required.append(
        {
            "labelSelector": {
                "matchLabels": {
                    LABEL_REPLICA: replica_name,
                    LABEL_INSTANCE_INDEX: str(index),
                    LABEL_INCARNATION: str(incarnation),
                    LABEL_RUNNER: "leader",
                }
            },
            "topologyKey": topology_key,
        }
    )
    pod_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    affinity["podAffinity"] = pod_affinity


def _node_preferences(
    affinity: dict[str, Any], avoid_node: str | None, prefer_nodes: Sequence[str]
) -> None:
    node_affinity = as_dict(affinity.get("nodeAffinity"))
    preferred = as_list(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"))
    if avoid_node:
        preferred.append(_node_term(100, "NotIn", [avoid_node]))
    wanted = [n for n in dict.fromkeys(prefer_nodes) if n != avoid_node]
    if wanted:
        preferred.append(_node_term(50, "In", wanted))
    node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    affinity["nodeAffinity"] = node_affinity


def place_pod(
    spec: dict[str, Any],
    replica: InferenceReplica,
    *,
    runner: str,
    index: int,
    incarnation: int,
    avoid_node: str | None,
    prefer_nodes: Sequence[str],
    leader_affinity: bool = True,
) -> None:
    """Add the placement rules of pod ``runner`` of Instance ``index`` to ``spec`` (the
    pod's own, private spec). ``leader_affinity=False`` leaves out the worker's affinity
    to its leader (a native gang's PodGroup keeps the domain instead)."""
    topology_key = replica.spec.topology_key
    worker_affinity = leader_affinity and runner == "worker" and bool(topology_key)
    if worker_affinity or avoid_node or prefer_nodes:
        affinity = as_dict(spec.get("affinity"))
        if worker_affinity:
            assert topology_key is not None
            _leader_affinity(affinity, replica.metadata.name, index, incarnation, topology_key)
        if avoid_node or prefer_nodes:
            _node_preferences(affinity, avoid_node, prefer_nodes)
        spec["affinity"] = affinity

    spread = SPREAD_POLICIES.get(replica.spec.topology_spread or "")
    spread_key = replica.spec.topology_spread_key or topology_key
    if spread is not None and spread_key and runner in ("leader", "default"):
        constraints = as_list(spec.get("topologySpreadConstraints"))
        constraints.append(
            {
                "maxSkew": 1,
                "topologyKey": spread_key,
                "whenUnsatisfiable": spread,
                "labelSelector": {
                    "matchLabels": {LABEL_REPLICA: replica.metadata.name, LABEL_RUNNER: runner}
                },
            }
        )
        spec["topologySpreadConstraints"] = constraints

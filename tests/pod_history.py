"""Checks over a recorded history of a namespace's pods (pure: no cluster, no clock).

The integration tests record every pod change with ``manager_fixtures.PodRecorder`` and
replay it: ``(event type, pod, the namespace's pods after the event)`` per change. The
checks here read only the pods' labels, never their names: a pod is in a *role slot*, its
Instance (``ome.io/inferencereplica``, ``ome.io/instance-index``) and its place in it
(``ome.io/runner``, ``ome.io/pod-ordinal``). A planner that made a second pod for one
slot, under any name, is caught; so is a pod in a slot the Instance does not have (a worker
ordinal beyond the gang's size). A single ``default`` pod surges into ordinal 1 beside
ordinal 0 by design (OME's ``activeOrdinal``): both are slots of their own.
Unit-tested on hand-made histories in ``tests/unit/test_pod_history.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

JSON = dict[str, Any]
Replay = Iterable[tuple[str, JSON, Mapping[str, JSON]]]

LABEL_REPLICA = "ome.io/inferencereplica"
LABEL_INDEX = "ome.io/instance-index"
LABEL_RUNNER = "ome.io/runner"
LABEL_ORDINAL = "ome.io/pod-ordinal"

LEADER_WORKER = {"leader": 1, "worker": 1}
"""The role slots of the integration tests' usual Instance: one leader, one worker."""

Instance = tuple[str, int]
"""(InferenceReplica name, Instance index)."""


def slot(pod: JSON) -> tuple[str, int, str, int]:
    """The pod's role slot: (replica, Instance index, runner, ordinal), from its labels."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return (str(labels.get(LABEL_REPLICA, "")), int(labels.get(LABEL_INDEX, -1)),
            str(labels.get(LABEL_RUNNER, "")), int(labels.get(LABEL_ORDINAL, 0)))


def live_by_slot(pods: Mapping[str, JSON]) -> dict[tuple[str, int, str, int], list[str]]:
    """Names of the live (not terminating) pods of each role slot."""
    out: dict[tuple[str, int, str, int], list[str]] = {}
    for name, pod in pods.items():
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        out.setdefault(slot(pod), []).append(name)
    return out


def slot_problems(pods: Mapping[str, JSON], runners: Mapping[str, int],
                  max_live: int) -> list[str]:
    """What is wrong with one state: a slot with two live pods, a pod in a slot its
    Instance does not have (``runners``: runner -> pods), more than ``max_live`` Instances
    holding live pods."""
    problems = []
    by_slot = live_by_slot(pods)
    instances: set[Instance] = set()
    for (replica, index, runner, ordinal), names in sorted(by_slot.items()):
        instances.add((replica, index))
        where = f"Instance {replica}/{index} {runner}-{ordinal}"
        if len(names) > 1:
            problems.append(f"{where} has {len(names)} live pods: {sorted(names)}")
        size = runners.get(runner)
        top = 1 if runner == "default" else (size or 0) - 1  # default surges into ordinal 1
        if size is None or not 0 <= ordinal <= top:
            problems.append(f"{where}: no such slot (runners {dict(runners)}): {names}")
    if len(instances) > max_live:
        problems.append(f"{len(instances)} Instances hold live pods {sorted(instances)}, "
                        f"more than {max_live}")
    return problems


def assert_no_duplicates(replay: Replay, *, max_live: int,
                         runners: Mapping[str, int] = LEADER_WORKER) -> int:
    """At no moment of the history a role slot with two live pods, a pod outside its
    Instance's slots, or more than ``max_live`` Instances with live pods. Returns how many
    states were checked (a history that checked nothing is the caller's to refuse)."""
    checked = 0
    for kind, obj, state in replay:
        checked += 1
        problems = slot_problems(state, runners, max_live)
        assert not problems, (
            f"after {kind} {obj['metadata']['name']}: " + "; ".join(problems))
    return checked

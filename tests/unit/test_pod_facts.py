"""PodView's derived facts: read from the labels, conditions and containers once, when the
view is built, and always those of the view's own fields (a changed pod is a new view)."""

from __future__ import annotations

from datetime import datetime

import pytest
from attrs import evolve

from omenative_core.labels import LABEL_INCARNATION, LABEL_INSTANCE_INDEX, LABEL_REVISION_HASH
from omenative_core.model.observed import ContainerView, PodView
from omenative_core.views import pod_view_from_json


def _running(labels: dict[str, str] | None = None) -> PodView:
    return pod_view_from_json(
        {
            "metadata": {"name": "chat-engine-7-leader-0", "uid": "u", "labels": labels or {}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "img:1"}]},
            "status": {
                "phase": "Running",
                "conditions": [
                    {"type": t, "status": "True"}
                    for t in ("PodScheduled", "ContainersReady", "ome.io/serving", "Ready")
                ],
                "containerStatuses": [{"name": "c", "ready": True, "state": {"running": {}}}],
            },
        }
    )


def test_a_pod_knows_its_instance_and_attempt_from_its_labels() -> None:
    pod = _running({LABEL_INSTANCE_INDEX: "7", LABEL_REVISION_HASH: "abc", LABEL_INCARNATION: "3"})
    assert (pod.instance, pod.attempt) == (7, ("abc", 3))
    assert pod.sound and pod.in_rotation


@pytest.mark.parametrize(
    ("labels", "instance", "attempt"),
    [
        ({}, None, (None, 0)),
        ({LABEL_INSTANCE_INDEX: "x"}, None, (None, 0)),
        ({LABEL_INSTANCE_INDEX: "2", LABEL_INCARNATION: "?"}, 2, (None, 0)),
    ],
)
def test_missing_or_malformed_labels(
    labels: dict[str, str], instance: int | None, attempt: tuple[str | None, int]
) -> None:
    pod = _running(labels)
    assert (pod.instance, pod.attempt) == (instance, attempt)


FAULTS = {
    "not Ready": lambda p: evolve(p, conditions={**p.conditions, "Ready": "False"}),
    "unschedulable": lambda p: evolve(p, conditions={**p.conditions, "PodScheduled": "False"}),
    "terminating": lambda p: evolve(p, deletion_timestamp=datetime(2026, 1, 1)),
    "Failed": lambda p: evolve(p, phase="Failed"),
    "Succeeded": lambda p: evolve(p, phase="Succeeded"),
    "restarted": lambda p: evolve(p, containers=(ContainerView(name="c", restart_count=1),)),
    "crash loop": lambda p: evolve(
        p, containers=(ContainerView(name="c", waiting_reason="CrashLoopBackOff"),)
    ),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_changed_pod_has_the_facts_of_its_change(fault: str) -> None:
    """``evolve`` (as the shell and the simulator make a changed pod's view) derives the
    facts again: a pod is never read with the facts of its last state."""
    pod = _running({LABEL_INSTANCE_INDEX: "7"})
    changed = FAULTS[fault](pod)
    assert pod.sound and not changed.sound
    moved = evolve(pod, labels={LABEL_INSTANCE_INDEX: "8", LABEL_INCARNATION: "2"})
    assert (moved.instance, moved.attempt) == (8, (None, 2))


def test_out_of_rotation_when_the_gate_or_the_containers_are_not_ready() -> None:
    pod = _running()
    for kind in ("ome.io/serving", "ContainersReady"):
        assert not evolve(pod, conditions={**pod.conditions, kind: "False"}).in_rotation


def test_the_facts_are_not_compared() -> None:
    """They follow from the other fields: two views of one pod are equal."""
    assert _running() == _running()

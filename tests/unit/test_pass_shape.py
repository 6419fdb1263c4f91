"""The shape of a planner pass: a frozen view, a write-set, one waiting-reason rule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs
import pytest

from omenative_core.model.observed import Snapshot
from omenative_core.model.status import InstanceOperation
from omenative_core.phases import Waiting, stops_clock
from omenative_core.planner import plan_pass
from omenative_core.steps.bringup import park
from omenative_sim.world import ClusterSpec, World


def _snapshot() -> Snapshot:
    tpl = {"spec": {"containers": [{"name": "c", "image": "img:1"}]}}
    world = World(
        ClusterSpec(nodes=2, gpus_per_node=1),
        {
            "metadata": {"name": "r", "namespace": "ns"},
            "spec": {"component": "engine", "replicas": 2,
                     "runners": [{"name": "default", "template": tpl}]},
        },
    )
    return world.snapshot()


def test_a_step_cannot_change_what_the_other_steps_read() -> None:
    """The view (snapshot, policy, revisions) is frozen: a step that tried to move the
    clock or the target for the steps after it fails loudly instead."""
    _, st = plan_pass(_snapshot())
    assert st is not None
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        st.view.now = st.view.now + timedelta(seconds=1)  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        st.view.target = "other"  # type: ignore[misc]
    # what the steps wrote is in the write-set: the two new Instances' rows
    assert sorted(st.rows) == [0, 1]


def test_waiting_reasons_are_omes_wire_strings() -> None:
    """``operation.waiting`` carries OME's reasons (plus PodGroupUnschedulable, Kubernetes'
    native gangs), spelled as the status stores them."""
    assert {w.value for w in Waiting} == {
        "QuotaExceeded", "Unschedulable", "PodGroupTerminating", "PodGroupUnschedulable",
        "NodeUnknown", "Paused", "SourceUnrouted",
    }


@pytest.mark.parametrize("reason", list(Waiting))
def test_every_wait_but_source_unrouted_parks_the_readiness_deadline(reason: Waiting) -> None:
    """OME's rule: a wait on something outside the revision stops the readiness clock
    (the deadline is cleared, to restart with a full window); SourceUnrouted does not."""
    deadline = datetime(2026, 1, 1, tzinfo=UTC)
    op = InstanceOperation(id="x", type="Create", step="CreatePods", target_revision="r",
                           deadline=deadline)
    parked = park(op, reason)
    assert parked.waiting == reason
    assert stops_clock(reason) is (reason != Waiting.SOURCE_UNROUTED)
    assert (parked.deadline is None) is stops_clock(reason)
    assert not stops_clock(None)

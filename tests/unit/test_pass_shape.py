"""The shape of a planner pass: a frozen view, a write-set, one waiting-reason rule."""

from __future__ import annotations

import ast
from datetime import UTC, datetime, timedelta
from pathlib import Path

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


WHOLE_PASS = {
    "lifecycle.py": {"advance"},
    "planner.py": {"_own_objects", "_advance_all", "_keep_targeted_blocks"},
    "steps/capacity.py": {"_node_facts", "_capacity", "check_nodes"},
    "steps/native_gang.py": {"_row_groups", "_orphans", "_unnamed_since", "cleanup"},
    "steps/repair.py": {"settled", "_steady"},
    "steps/revisions.py": {"group_pods", "_group_all", "_take", "load_rows"},
    "steps/status.py": {"finish", "_tallied", "_still_plain", "_serving", "_tally",
                        "_count_pods"},
    "steps/steady.py": {"find", "_match"},
    "steps/teardown.py": {"cleanup_orphan_pod_groups"},
}
"""The functions that take the whole ``PassState`` (they read the incremental cache or hand
on a named result; ``steps/step_pass.py`` says why); every other step takes ``StepPass``."""


def _takers(annotation: str) -> dict[str, set[str]]:
    core = Path(__file__).resolve().parents[2] / "src" / "omenative_core"
    found: dict[str, set[str]] = {}
    for path in [core / "lifecycle.py", core / "planner.py", *sorted(core.glob("steps/*.py"))]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any(
                a.annotation is not None and ast.unparse(a.annotation) == annotation
                for a in node.args.args
            ):
                found.setdefault(str(path.relative_to(core)), set()).add(node.name)
    return found


def test_steps_take_only_their_part_of_the_pass() -> None:
    """A step reads the view, writes the write-set and asks the pass's queries through
    ``StepPass``, so mypy refuses its read of the cache or of another step's named result;
    a new function that takes the whole ``PassState`` fails here until it is listed."""
    assert _takers("PassState") == WHOLE_PASS
    narrow = _takers("StepPass")
    assert sum(map(len, narrow.values())) >= 130
    assert not set(narrow) & {"steps/state.py", "steps/view.py"}

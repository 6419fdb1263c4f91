"""A cold pass over a fleet equals the full checks, and the memo it leaves serves the next.

A cold pass (no memo: after a restart, or after a spec change) over at least
``steady._BULK`` rows finds the steady rows in one bulk check, records them all at once,
and tallies the plain ones without reading them again (``steady.find``,
``planner._advance_all``, ``status._tallied``). The lifecycle machine's fleets (0-3
Instances) never reach that path, so this drives it on a settled fleet of 2 x ``_BULK``
Instances with random pod faults and row edits, on the settled spec or a new one: the
cold plan must equal the plan of the full checks (``fast=False``), and the memo it leaves
must give the full plan for the passes after it (the status as written, read back as new
objects or not, with a row lost or not, one second later; then one pod changed): the
plain rows' tallies it keeps as rows (``verdicts.tally_of``) are read there.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import cache

from attrs import evolve
from hypothesis import given, settings
from hypothesis import strategies as st

from omenative_core.incremental import plan_incremental
from omenative_core.model import LifecycleConfig, Snapshot
from omenative_core.model.status import InstanceStatus, InstanceTermination
from omenative_core.planner import plan, plan_pass
from omenative_core.steps import steady
from omenative_sim.world import ClusterSpec, World
from tests.unit.sim_helpers import engine_manifest, run_world
from tests.unit.test_steady import FAULTS

INSTANCES = 2 * steady._BULK
MIN_READY = 10


@cache
def _fleets() -> tuple[Snapshot, Snapshot]:
    """A settled fleet, and the same fleet just after a new image (every row to update)."""
    world = World(
        ClusterSpec(nodes=INSTANCES // 4 + 1, gpus_per_node=8, pod_start_seconds=1,
                    pod_ready_seconds=1),
        engine_manifest(replicas=INSTANCES, minReadySeconds=MIN_READY),
        config=LifecycleConfig(),
    )
    run_world(world, 30)
    settled = world.snapshot()
    world.patch_replica(engine_manifest(replicas=INSTANCES, image="img:2",
                                        minReadySeconds=MIN_READY))
    return settled, world.snapshot()


def _edits(snap: Snapshot) -> dict[str, Callable[[InstanceStatus], InstanceStatus]]:
    """Row edits a status read after a restart may carry: each makes the row not plain, or
    not steady, or changes what its tally must say."""
    now = snap.now
    return {
        "pod count": lambda r: evolve(r, pod_count=r.pod_count + 1),
        "serving count": lambda r: evolve(r, serving_pod_count=r.serving_pod_count - 1),
        "available count": lambda r: evolve(r, available_pod_count=0),
        "not admitted": lambda r: evolve(r, admitted=False),
        "window open": lambda r: evolve(r, ready_since=now - timedelta(seconds=1)),
        "window passed": lambda r: evolve(r, ready_since=now - timedelta(days=1)),
        "last failure": lambda r: evolve(
            r, last_failure=InstanceTermination(pod_name="p", reason="Error", time=now)
        ),
        "pending": lambda r: evolve(r, phase="Pending"),
        "failed": lambda r: evolve(r, phase="Failed"),
        "next incarnation": lambda r: evolve(r, incarnation=r.incarnation + 1),
        "unknown revision": lambda r: evolve(
            r, running_revision="chat-engine-0000000000", target_revision="chat-engine-0000000000"
        ),
    }


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    new_spec=st.booleans(),
    faults=st.lists(st.tuples(st.integers(0, 2 * INSTANCES - 1), st.sampled_from(sorted(FAULTS))),
                    max_size=4),
    edits=st.lists(st.tuples(st.integers(0, INSTANCES - 1), st.sampled_from(sorted(_edits(
        _fleets()[0])))), max_size=4),
    dropped=st.lists(st.integers(0, INSTANCES - 1), max_size=2),
)
def test_a_cold_pass_over_a_fleet_equals_the_full_checks(
    data: st.DataObject,
    new_spec: bool,
    faults: list[tuple[int, str]],
    edits: list[tuple[int, str]],
    dropped: list[int],
) -> None:
    snap = _fleets()[1 if new_spec else 0]
    pods = list(snap.pods)
    for at, fault in faults:
        pod = FAULTS[fault](pods[at])
        assert pod is not None
        pods[at] = pod
    pods = [p for k, p in enumerate(pods) if k // 2 not in dropped]  # an Instance's pods gone
    rows = list(snap.replica.status.instances)  # type: ignore[union-attr]
    edit = _edits(snap)
    for at, name in edits:
        rows[at] = edit[name](rows[at])
    status = evolve(snap.replica.status, instances=tuple(rows))
    snap = evolve(snap, pods=tuple(pods), replica=evolve(snap.replica, status=status))

    cold, memo = plan_incremental(snap, None)
    assert cold == plan_pass(snap, fast=False)[0], "the cold pass differs from the full checks"
    assert cold == plan(snap)

    # the next passes on the memo the cold pass left: the status as written, a second
    # later; read back as new objects (equal rows) or not, with one row lost or not
    written = cold.status
    rows = list(written.instances)
    if data.draw(st.booleans(), label="read back"):
        rows = [evolve(r) for r in rows]
    if rows and data.draw(st.booleans(), label="a row lost"):
        del rows[data.draw(st.integers(0, len(rows) - 1), label="lost row")]
    written = evolve(written, instances=tuple(rows))
    later = evolve(snap, replica=evolve(snap.replica, status=written),
                   now=snap.now + timedelta(seconds=1))
    got, memo = plan_incremental(later, memo)
    assert got == plan(later), "the pass after a cold pass differs from the full plan"
    # ... then one pod changed
    at = data.draw(st.integers(0, len(later.pods) - 1), label="changed pod")
    pods = list(later.pods)
    changed = FAULTS["unready"](pods[at])
    assert changed is not None
    pods[at] = changed
    again = evolve(later, pods=tuple(pods))
    got, _ = plan_incremental(again, memo)
    assert got == plan(again), "a changed pod after a cold pass differs from the full plan"

"""Status size benchmark (issue 14, target 1): bytes, not time, so the load does not matter.

1. Uniform Ready fleets of 2,000 / 5,000 / 20,000 Instances: the ColumnarV2 columns (OME's
   measure: ``json.Marshal`` of the columns) and the whole status, beside OME's 363 B.
2. A representative mix (``tests/status_states.representative``: 40% rolled, 2% surging,
   0.5% creating, 1% failed, 3% inside minReadySeconds) at 2,000 and 5,000 rows: now,
   and as it was written before readySince was dropped once Available, beside OME's own
   representative figures (25,058 B / 56,809 B: OME's fixture rows, not these).
3. The worst state the operations budget lets the planner reach at 20,000 Instances
   (``tests/status_states.worst_reachable``: every field at its longest, entries at random
   indexes), beside the 1.25 MiB target and etcd's 1.5 MiB request limit.
4. The planner itself, through the simulator, at 2,000 single-pod Instances (the budget's
   bound is below maxSurge 25% of them): scale-up from zero, a rollout with maxSurge 25%,
   and every pod failing at once: the most operations open at once and the largest status
   any pass wrote.

Run: ``.venv/bin/python benchmarks/bench_status.py`` (``--no-sim`` skips part 4).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "unit")]

from sim_helpers import engine_manifest  # noqa: E402
from tests import status_states as states  # noqa: E402
from tiny import pick  # noqa: E402

from omenative_core.model import LifecycleConfig, Plan  # noqa: E402
from omenative_core.model.status import InferenceReplicaStatus  # noqa: E402
from omenative_core.planner import plan  # noqa: E402
from omenative_core.status import budget  # noqa: E402
from omenative_core.status.wire import go_json_bytes, status_to_json  # noqa: E402
from omenative_sim.world import ClusterSpec, World  # noqa: E402

OME_UNIFORM = 363
OME_REPRESENTATIVE = {2000: 25_058, 5000: 56_809}


def _sizes(status: InferenceReplicaStatus) -> tuple[int, int]:
    """(rows as written: the columns or the dense list, the whole status) in bytes."""
    body = status_to_json(status)
    rows = body.get("instanceStatusColumns", body.get("instanceStatuses"))
    return len(go_json_bytes(rows)), len(go_json_bytes(body))


def uniform() -> None:
    print("1. uniform Ready, Available (columns = OME's measure)")
    print(f"   {'Instances':>9}  {'columns B':>9}  {'status B':>8}  {'OME columns B':>13}")
    for n in pick((2000, 5000, 20_000), (20, 50)):
        cols, whole = _sizes(states.uniform(n))
        print(f"   {n:>9,}  {cols:>9,}  {whole:>8,}  {OME_UNIFORM:>13,}")


def representative() -> None:
    print("2. representative mix", states.REPRESENTATIVE_MIX)
    print(f"   {'rows':>5}  {'columns B':>9}  {'before B':>9}  {'OME (its rows) B':>16}")
    for n in pick((2000, 5000), (20, 50)):
        now, _ = _sizes(states.representative(n))
        before, _ = _sizes(states.representative(n, ready_since_everywhere=True))
        print(f"   {n:>5,}  {now:>9,}  {before:>9,}  {OME_REPRESENTATIVE.get(n, 0):>16,}")


def worst() -> None:
    n = pick(20_000, 2000)
    print(
        f"3. worst reachable at {n:,} Instances: bound {budget.OPERATION_BOUND} operations "
        f"(charge {budget.OPERATION_ROW_BYTES:,} B each, Migrate {budget.MIGRATE_ROW_BYTES:,} B,"
        f" failure {budget.FAILURE_ROW_BYTES:,} B, readySince {budget.READY_SINCE_ROW_BYTES} B;"
        f" capacity {budget.ENTRIES_CAPACITY:,} B)"
    )
    cases: list[tuple[str, dict[str, Any]]] = [
        ("bound operations open", {"ops": budget.OPERATION_BOUND}),
        ("all readySince (after a mass restart)", {"ops": 0}),
        ("8 Migrates + 100 failed + operations", {"migrates": 8, "failed": 100}),
        ("half operations, rest readySince", {"ops": budget.OPERATION_BOUND // 2}),
    ]
    print(f"   {'state':<40}  {'status B':>9}  {'target B':>9}  {'limit B':>9}")
    for name, kw in cases:
        _, whole = _sizes(states.worst_reachable(n, **kw))
        print(
            f"   {name:<40}  {whole:>9,}  {budget.STATUS_TARGET:>9,}  "
            f"{budget.STATUS_REQUEST_LIMIT:>9,}"
        )


def _drive(world: World, passes: int) -> tuple[int, int, int]:
    """Plan and apply until at rest (or ``passes``): (passes, most ops open, largest status)."""
    most = largest = 0
    for k in range(passes):
        p: Plan = plan(world.snapshot())
        most = max(most, sum(1 for r in p.status.instances if r.operation is not None))
        largest = max(largest, len(go_json_bytes(status_to_json(p.status))))
        if p.actions:
            world.apply(p)
            continue
        nxt = world.next_event_time()
        if nxt is None:
            return k + 1, most, largest
        world.advance(nxt)
    return passes, most, largest


def simulated() -> None:
    n = pick(2000, 40)
    strategy = {"type": "SurgeThenDrain", "rollingUpdate": {"maxSurge": "25%"}}
    manifest = engine_manifest(workers=0, replicas=n, lifecycle={"updateStrategy": strategy})
    cluster = ClusterSpec(nodes=n, gpus_per_node=2, pod_start_seconds=2, pod_ready_seconds=2)
    world = World(cluster, manifest, config=LifecycleConfig())
    print(f"4. the planner at {n:,} single-pod Instances (bound {budget.OPERATION_BOUND})")
    print(f"   {'scenario':<28}  {'passes':>6}  {'most ops open':>13}  {'largest status B':>16}")
    rows = [("scale-up from zero", _drive(world, 2000))]
    runners = engine_manifest(workers=0, image="img:2")["spec"]["runners"]
    world.patch_replica({"spec": {"runners": runners}})
    rows.append((f"rollout maxSurge 25% ({n // 4})", _drive(world, 4000)))
    for name in list(world.pods):
        world.fail_pod(name)
    rows.append(("every pod fails at once", _drive(world, 4000)))
    for name, (passes, most, largest) in rows:
        print(f"   {name:<28}  {passes:>6}  {most:>13}  {largest:>16,}")
    status = world.status
    assert status is not None
    print(f"   at the end: {status.ready_replicas:,} Ready, {status.updated_replicas:,} updated")


def main() -> None:
    """Print every section (part 4 unless ``--no-sim``)."""
    uniform()
    representative()
    worst()
    if "--no-sim" not in sys.argv:
        simulated()


if __name__ == "__main__":
    main()

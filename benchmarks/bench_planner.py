"""Planner benchmarks (``make bench``).

1. Plan time for one InferenceReplica at 100, 1,000 and 10,000 Instances of 2 pods each,
   at rest (the plan must be empty) and in states needing work (a new revision just
   applied; mid-rollout), with the 10,000/1,000 ratio (linear scaling gives ~10).
2. Incremental planning at 10,000 Instances, side by side with the full pass and a bare
   loop that only proves "nothing to do": at rest (memo of the last pass), the status
   re-read (equal rows, new objects), one pod changed (the other Instances' verdicts
   and the plain rows' totals reused), 10 and 100 pods changed (a pass costs O(k)), the
   cold pass after a restart (no memo) and a new revision; then how long the event loop is
   held while the new-revision pass is planned on the loop, in a plain worker thread, and as
   the manager plans it (``planning.plan_replica``: a worker thread with the switch interval
   short meanwhile), in turn, with the pass's own time beside it.
3. Simulated wall time to roll 100 Instances of 8-pod gangs with maxSurge 10%, beside the
   lower bound ceil(100 / surge) x (pod start + ready time), as a ratio.

Timing lives here, never in pass/fail tests. Each figure is the median of several runs,
measured side by side in one process.
"""

from __future__ import annotations

import asyncio
import gc
import math
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from attrs import evolve
from callcount import function_calls
from loop_hold import loop_hold
from tiny import pick

from omenative_controller.planning import PLANNING_SWITCH_INTERVAL, plan_replica
from omenative_core.incremental import PlanMemo, plan_incremental
from omenative_core.labels import LABEL_INSTANCE_INDEX, LABEL_REVISION_HASH
from omenative_core.model import LifecycleConfig, Snapshot
from omenative_core.planner import plan
from omenative_core.revisions import hash_of
from omenative_sim.world import ClusterSpec, World

CONFIG = evolve(LifecycleConfig(), scale_up_pod_batch_size=None)
"""The chart's lifecycle values but OME's ``scaleUpPodBatchSize``: a pass here holds every
create it plans (the bound is the shell's, after planning, as before the key was honoured),
so the figures stay comparable with the earlier runs in docs/benchmarks-history.md."""


def _replica(n: int, image: str, *, workers: int = 1, max_surge: str = "25%") -> dict[str, Any]:
    tpl = {
        "spec": {
            "containers": [
                {
                    "name": "ome-container",
                    "image": image,
                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                }
            ]
        }
    }
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {"name": "bench", "namespace": "default"},
        "spec": {
            "component": "engine",
            "replicas": n,
            "runners": [
                {"name": "leader", "template": tpl},
                {"name": "worker", "size": workers, "template": tpl},
            ],
            "lifecycle": {
                "updateStrategy": {
                    "type": "SurgeThenDrain",
                    "rollingUpdate": {"maxSurge": max_surge},
                }
            },
        },
    }


def _image_patch(image: str, workers: int = 1) -> dict[str, Any]:
    tpl = {
        "spec": {
            "containers": [
                {
                    "name": "ome-container",
                    "image": image,
                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                }
            ]
        }
    }
    return {
        "spec": {
            "runners": [
                {"name": "leader", "template": tpl},
                {"name": "worker", "size": workers, "template": tpl},
            ]
        }
    }


def _settle(world: World, *, until: float | None = None, max_plans: int = 100000) -> float:
    """Run plan/apply/advance until the plan is empty and nothing is scheduled."""
    plans = 0
    while plans < max_plans:
        snap = world.snapshot()
        p = plan(snap)
        plans += 1
        if p.actions:
            world.apply(p)
            continue
        nxt = world.next_event_time()
        wake = world.now + p.requeue_after.total_seconds() if p.requeue_after else None
        candidates = [t for t in (nxt, wake) if t is not None]
        if not candidates:
            return world.now
        t = min(candidates)
        if until is not None and t > until:
            return world.now
        world.advance(max(t, world.now))
    raise RuntimeError("did not settle")


def _median_time(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    gc.collect()
    gc.freeze()  # the world's long-lived objects leave GC tracking, as in a warmed-up manager
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    gc.unfreeze()
    return statistics.median(samples)


def _converged_world(n: int) -> World:
    nodes = math.ceil(n * 2 * 1.3 / 8) + 1
    world = World(
        ClusterSpec(nodes=nodes, gpus_per_node=8, pod_start_seconds=1, pod_ready_seconds=1),
        _replica(n, "img:1"),
        config=CONFIG,
    )
    _settle(world)
    return world


def bench_scaling() -> dict[str, Snapshot]:
    print("== plan time, one InferenceReplica, Instances of 2 pods ==")
    print(f"{'instances':>10} {'at rest':>12} {'new revision':>14} {'mid-rollout':>13}")
    results: dict[int, tuple[float, float, float]] = {}
    calls: dict[int, list[int]] = {}
    kept: dict[str, Snapshot] = {}
    sizes = pick((100, 1000, 10000), (10, 20, 40))
    for n in sizes:
        t0 = time.perf_counter()
        world = _converged_world(n)
        build = time.perf_counter() - t0
        rest: Snapshot = world.snapshot()
        rest_plan = plan(rest)
        assert not rest_plan.actions, (
            f"at rest the plan must be empty, got {len(rest_plan.actions)}"
        )
        assert rest_plan.status == rest.replica.status
        repeat = pick(5 if n <= 1000 else 3, 1)
        t_rest = _median_time(lambda: plan(rest), repeat)  # noqa: B023 (called at once)
        calls[n] = [function_calls(lambda: plan(rest))]  # noqa: B023
        world.patch_replica(_image_patch("img:2"))
        work = world.snapshot()
        t_work = _median_time(lambda: plan(work), repeat)  # noqa: B023
        calls[n].append(function_calls(lambda: plan(work)))  # noqa: B023
        # mid-rollout: apply a few passes and let a quarter of the surges come up
        world.apply(plan(work))
        world.advance(world.now + 1.5)
        for _ in range(3):
            p = plan(world.snapshot())
            world.apply(p)
        mid = world.snapshot()
        kept.update(rest=rest, work=work, mid=mid)
        t_mid = _median_time(lambda: plan(mid), repeat)  # noqa: B023
        calls[n].append(function_calls(lambda: plan(mid)))  # noqa: B023
        results[n] = (t_rest, t_work, t_mid)
        print(
            f"{n:>10} {t_rest * 1000:>10.1f}ms {t_work * 1000:>12.1f}ms {t_mid * 1000:>11.1f}ms"
            f"   (world built in {build:.1f}s)",
            flush=True,
        )
    big, mid = sizes[-1], sizes[-2]
    r = [results[big][i] / results[mid][i] for i in range(3)]
    print(
        f"ratio {big:,}/{mid:,}: at rest {r[0]:.1f}x, new revision {r[1]:.1f}x, "
        f"mid-rollout {r[2]:.1f}x (linear = {big / mid:g})"
    )
    c = [calls[big][i] / calls[mid][i] for i in range(3)]
    print(
        f"function calls {big:,}/{mid:,} (noise-free work): at rest {c[0]:.2f}x, "
        f"new revision {c[1]:.2f}x, mid-rollout {c[2]:.2f}x"
    )
    return kept


def _nothing_to_do(snap: Snapshot) -> bool:
    """The bare loop: every row has its 2 pods, Ready, on the row's revision (no planner)."""
    pods: dict[str, list[Any]] = {}
    for pod in snap.pods:
        pods.setdefault(pod.labels.get(LABEL_INSTANCE_INDEX, ""), []).append(pod)
    for row in snap.replica.status.instances:
        mine = pods.get(str(row.index), ())
        want = hash_of(row.running_revision)
        if len(mine) != 2:
            return False
        for pod in mine:
            if pod.conditions.get("Ready") != "True" or pod.labels.get(LABEL_REVISION_HASH) != want:
                return False
    return True


def _pods_changed(snap: Snapshot, k: int = 1) -> Snapshot:
    """The same snapshot with ``k`` pods' readiness flipped (probes failing), spread out."""
    pods = list(snap.pods)
    for j in range(k):
        at = j * (len(pods) // k)
        pods[at] = evolve(pods[at], conditions={**pods[at].conditions, "Ready": "False"})
    return evolve(snap, pods=tuple(pods))


def _reread(snap: Snapshot) -> Snapshot:
    """The same snapshot with the status as read back after our write: equal, new objects."""
    status = snap.replica.status
    rows = tuple(evolve(r) for r in status.instances)
    return evolve(snap, replica=evolve(snap.replica, status=evolve(status, instances=rows)))


def _loop_holds(rest: Snapshot, work: Snapshot, repeat: int = pick(5, 1)) -> None:
    """The new-revision pass planned on the loop, in a plain worker thread, and as the
    manager plans it (``planning.plan_replica``: a worker thread, the switch interval
    short meanwhile, handed the memo of the pass before the new revision, which it frees
    in the thread), each ``repeat`` times in turn: the worst and the median gap, and the
    most CPU the process ran within one gap (on a loaded machine the rest of a wall gap
    is the OS running other processes)."""
    memos: list[PlanMemo] = []

    async def on_loop() -> object:
        return plan(work)

    async def in_thread() -> object:
        return await asyncio.to_thread(plan, work)

    async def manager() -> object:
        return await plan_replica(work, memos.pop())  # popped, as the manager does

    ways: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        ("on the event loop", on_loop),
        (f"in a worker thread (switch interval {sys.getswitchinterval() * 1000:.0f} ms)",
         in_thread),
        (f"plan_replica (worker thread, switch interval "
         f"{PLANNING_SWITCH_INTERVAL * 1000:.0f} ms)", manager),
    ]
    got: dict[str, list[tuple[float, float, float, dict[int, float]]]] = {
        name: [] for name, _ in ways}
    for _ in range(repeat):
        memos.append(plan_incremental(rest, None)[1])
        for name, run in ways:
            got[name].append(asyncio.run(loop_hold(run)))
    print(f"new-revision pass, longest event-loop gap over {repeat} runs each (in turn):")
    print(f"{'planned':<52} {'worst':>8} {'median':>8} {'CPU in gap':>11} {'pass took':>10}"
          f"  longest GC pause by generation")
    for name, runs in got.items():
        holds = [h for h, _, _, _ in runs]
        cpu = max(c for _, c, _, _ in runs)
        took = statistics.median(t for _, _, t, _ in runs)
        gcs = {g: max(r[3].get(g, 0.0) for r in runs) for g in (0, 1, 2)}
        print(
            f"{name:<52} {max(holds) * 1000:>6.1f}ms {statistics.median(holds) * 1000:>6.1f}ms "
            f"{cpu * 1000:>9.1f}ms {took * 1000:>8.0f}ms  "
            + " ".join(f"gen{g} {t * 1000:.1f}ms" for g, t in gcs.items())
        )
    print("(CPU in gap: the most CPU this process ran within one gap, over the runs; a GC "
          "pause never gives up the GIL)")


def bench_incremental(kept: dict[str, Snapshot]) -> None:
    rest, work = kept["rest"], kept["work"]
    n = len(rest.replica.status.instances) if rest.replica.status else 0
    print(f"\n== incremental planning, {n:,} Instances of 2 pods ==")
    assert _nothing_to_do(rest)
    _, memo0 = plan_incremental(rest, None)
    later = evolve(rest, now=rest.now + timedelta(seconds=1))
    reread, changed = _reread(later), _pods_changed(later)
    ten, hundred = _pods_changed(later, 10), _pods_changed(later, 100)

    for snap in (later, reread, changed, ten, hundred):
        got, m = plan_incremental(snap, memo0)
        assert got == plan(snap), "incremental and full plans differ"
        assert m.reused == (1 if snap is later or snap is reread else 0)
        if snap is changed:
            assert m.rederived == 1, "one pod changed: only its Instance is rederived"
    cases: list[tuple[str, Callable[[], object]]] = [
        ("bare 'nothing to do' loop", lambda: _nothing_to_do(later)),
        ("incremental, at rest", lambda: plan_incremental(later, memo0)),
        ("incremental, status re-read", lambda: plan_incremental(reread, memo0)),
        ("incremental, one pod changed", lambda: plan_incremental(changed, memo0)),
        ("incremental, 10 pods changed", lambda: plan_incremental(ten, memo0)),
        ("incremental, 100 pods changed", lambda: plan_incremental(hundred, memo0)),
        ("cold pass (no memo, after restart)", lambda: plan_incremental(later, None)),
        ("full pass at rest", lambda: plan(later)),
        ("full pass, new revision", lambda: plan(work)),
    ]
    base = 0.0
    print(
        "one pod changed: the pass rederives 1 Instance from its pods, reuses the other "
        f"{n - 1:,} Instances' verdicts (steps.verdicts) and reads only the rows that are not "
        "plain (steps.totals); 10 and 100 pods changed: the same, k Instances"
    )
    print(f"{'case':<36} {'time':>10} {'calls':>10} {'vs bare':>8} {'vs full':>8}")
    full_t = _median_time(lambda: plan(later), 5)
    for name, fn in cases:
        t = _median_time(fn, 5)
        base = base or t
        n_calls = function_calls(fn)
        print(
            f"{name:<36} {t * 1000:>8.2f}ms {n_calls:>10,} {t / base:>7.2f}x {t / full_t:>7.3f}x",
            flush=True,
        )
    _loop_holds(later, work)


def bench_gang_rollout() -> None:
    n, workers, start, ready = pick(100, 10), 7, 30.0, 30.0
    print(f"\n== simulated rollout: {n} Instances of 8-pod gangs, maxSurge 10% ==")
    surge = math.ceil(n * 10 / 100)
    nodes = math.ceil((n + surge) * 8 / 8)
    world = World(
        ClusterSpec(nodes=nodes, gpus_per_node=8, pod_start_seconds=start, pod_ready_seconds=ready),
        _replica(n, "img:1", workers=workers, max_surge="10%"),
        config=CONFIG,
    )
    _settle(world)
    t0 = world.now
    w0 = time.perf_counter()
    world.patch_replica(_image_patch("img:2", workers=workers))
    end = _settle(world)
    wall = time.perf_counter() - w0
    status = world.status
    assert status is not None and status.updated_replicas == n and status.ready_replicas == n
    took = end - t0
    bound = math.ceil(n / surge) * (start + ready)
    print(
        f"simulated rollout time {took:.0f}s; lower bound ceil({n}/{surge}) x "
        f"({start:.0f}s + {ready:.0f}s) = {bound:.0f}s; ratio {took / bound:.2f}"
    )
    print(f"(simulating it took {wall:.1f}s of wall time)")


def main() -> int:
    kept = bench_scaling()
    bench_incremental(kept)
    bench_gang_rollout()
    return 0


if __name__ == "__main__":
    sys.exit(main())

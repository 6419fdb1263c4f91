"""Planner benchmarks (``make bench``).

1. Plan time for one InferenceReplica at 100, 1,000 and 10,000 Instances of 2 pods each,
   at rest (the plan must be empty) and in states needing work (a new revision just
   applied; mid-rollout), with the 10,000/1,000 ratio (linear scaling gives ~10).
2. Simulated wall time to roll 100 Instances of 8-pod gangs with maxSurge 10%, beside the
   lower bound ceil(100 / surge) x (pod start + ready time), as a ratio.

Timing lives here, never in pass/fail tests. Each figure is the median of several runs,
measured side by side in one process.
"""

from __future__ import annotations

import gc
import math
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from callcount import function_calls

from omenative_core.model import LifecycleConfig, Snapshot
from omenative_core.planner import plan
from omenative_sim.world import ClusterSpec, World


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
        config=LifecycleConfig(),
    )
    _settle(world)
    return world


def bench_scaling() -> None:
    print("== plan time, one InferenceReplica, Instances of 2 pods ==")
    print(f"{'instances':>10} {'at rest':>12} {'new revision':>14} {'mid-rollout':>13}")
    results: dict[int, tuple[float, float, float]] = {}
    calls: dict[int, list[int]] = {}
    for n in (100, 1000, 10000):
        t0 = time.perf_counter()
        world = _converged_world(n)
        build = time.perf_counter() - t0
        rest: Snapshot = world.snapshot()
        rest_plan = plan(rest)
        assert not rest_plan.actions, (
            f"at rest the plan must be empty, got {len(rest_plan.actions)}"
        )
        assert rest_plan.status == rest.replica.status
        repeat = 5 if n <= 1000 else 3
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
        t_mid = _median_time(lambda: plan(mid), repeat)  # noqa: B023
        calls[n].append(function_calls(lambda: plan(mid)))  # noqa: B023
        results[n] = (t_rest, t_work, t_mid)
        print(
            f"{n:>10} {t_rest * 1000:>10.1f}ms {t_work * 1000:>12.1f}ms {t_mid * 1000:>11.1f}ms"
            f"   (world built in {build:.1f}s)",
            flush=True,
        )
    r = [results[10000][i] / results[1000][i] for i in range(3)]
    print(
        f"ratio 10,000/1,000: at rest {r[0]:.1f}x, new revision {r[1]:.1f}x, "
        f"mid-rollout {r[2]:.1f}x (linear = 10)"
    )
    c = [calls[10000][i] / calls[1000][i] for i in range(3)]
    print(
        f"function calls 10,000/1,000 (noise-free work): at rest {c[0]:.2f}x, "
        f"new revision {c[1]:.2f}x, mid-rollout {c[2]:.2f}x"
    )


def bench_gang_rollout() -> None:
    print("\n== simulated rollout: 100 Instances of 8-pod gangs, maxSurge 10% ==")
    n, workers, start, ready = 100, 7, 30.0, 30.0
    surge = math.ceil(n * 10 / 100)
    nodes = math.ceil((n + surge) * 8 / 8)
    world = World(
        ClusterSpec(nodes=nodes, gpus_per_node=8, pod_start_seconds=start, pod_ready_seconds=ready),
        _replica(n, "img:1", workers=workers, max_surge="10%"),
        config=LifecycleConfig(),
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
    bench_scaling()
    bench_gang_rollout()
    return 0


if __name__ == "__main__":
    sys.exit(main())

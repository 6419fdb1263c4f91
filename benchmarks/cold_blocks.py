"""Where a cold pass goes: each block's time and calls, on the 10,000-Instance world.

``bench_planner.py`` spends about two minutes building its 10,000-Instance world; this
builds the same world once, pickles its snapshot at rest (``--world``, default
``/tmp/omenative-bench-world.pkl``) and, on every run after, loads it and times each block
of ``plan_incremental(snapshot, None)`` (the least of ``--passes`` passes, process-wide
GC frozen as in ``bench_planner``) with its calls (``sys.setprofile``), beside the bare
"nothing to do" loop. The pods are kept as their fields and their views built on load,
so one file serves any checkout: compare two in turn (``PYTHONPATH=<checkout>/src``, its
``benchmarks/`` first on the path for ``bench_planner``); read the split and the calls,
and quote times from ``bench_planner.py``.

    .venv/bin/python benchmarks/cold_blocks.py [--passes 30] [--world PATH]
"""

from __future__ import annotations

import argparse
import gc
import pickle
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from attrs import evolve, fields
from bench_planner import _converged_world, _nothing_to_do

from omenative_core import incremental, planner
from omenative_core.model import PodView, Snapshot
from omenative_core.steps import revisions, steady


def _pods_out(snap: Snapshot) -> tuple[Snapshot, list[dict[str, Any]]]:
    """The snapshot without its pods, and each pod's init fields: a file any checkout reads
    (a view's derived slots differ between checkouts)."""
    init = [f.name for f in fields(PodView) if f.init]
    return evolve(snap, pods=()), [{n: getattr(p, n) for n in init} for p in snap.pods]


def _world(path: Path) -> Snapshot:
    sys.setrecursionlimit(100000)  # pickling 20,000 nested views
    if not path.exists():
        t0 = time.perf_counter()
        rest = _converged_world(10000).snapshot()
        later = evolve(rest, now=rest.now + timedelta(seconds=1))  # as bench_planner's
        print(f"world built in {time.perf_counter() - t0:.0f}s, kept in {path}")
        path.write_bytes(pickle.dumps(_pods_out(later)))
    snap, pods = pickle.loads(path.read_bytes())
    return evolve(snap, pods=tuple(PodView(**p) for p in pods))  # views of this checkout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=30)
    ap.add_argument("--world", type=Path, default=Path("/tmp/omenative-bench-world.pkl"))
    args = ap.parse_args()
    snap = _world(args.world)
    spent: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    label = ["(other)"]

    def timed(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
        def run(*a: Any, **k: Any) -> Any:
            outer, label[0] = label[0], name
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[name] += time.perf_counter() - t0
                label[0] = outer

        return run

    for mod, attr in ((revisions, "group_pods"), (revisions, "load_rows"),
                      (revisions, "prune_revisions"), (steady, "_match"), (steady, "find"),
                      (planner, "finish"), (incremental, "keep")):
        setattr(mod, attr, timed(getattr(mod, attr), f"{mod.__name__.rsplit('.', 1)[1]}.{attr}"))
    names = {"_advance_all": "_advance_all", "cleanup_orphan_pod_groups": "orphan PodGroups",
             "rebuilds": "repair.rebuilds"}
    planner.PASSES = tuple(timed(f, names.get(f.__name__, "other passes"))
                           for f in planner.PASSES)

    def cold() -> None:
        incremental.plan_incremental(snap, None)

    gc.collect()
    gc.freeze()  # the world's objects leave GC tracking, as in bench_planner
    cold()
    best: dict[str, float] = {}
    whole, bare = [], []
    for _ in range(args.passes):
        spent.clear()
        t0 = time.perf_counter()
        cold()
        whole.append(time.perf_counter() - t0)
        for k, v in spent.items():
            best[k] = min(best.get(k, v), v)
        t0 = time.perf_counter()
        _nothing_to_do(snap)
        bare.append(time.perf_counter() - t0)

    def count(frame: object, event: str, arg: object) -> None:
        if event in ("call", "c_call"):
            calls[label[0]] += 1

    sys.setprofile(count)
    cold()
    sys.setprofile(None)
    print(f"cold pass {min(whole) * 1000:.1f} ms (least of {args.passes}), "
          f"{sum(calls.values()):,} calls; bare loop {min(bare) * 1000:.1f} ms")
    print("(blocks nest: steady._match is inside steady.find, inside _advance_all)")
    for k in sorted(best, key=lambda k: -best[k]):
        print(f"| {k} | {best[k] * 1000:.1f} ms | {calls.get(k, 0):,} calls |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

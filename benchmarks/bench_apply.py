"""How long the executor holds the event loop while it applies a big plan.

Issue 14 target 2's last clause: a new revision of a 10,000-Instance replica plans
thousands of actions, and no single step of applying them may hold the event loop for more
than 10 ms (every watch, every other replica and the Lease renewal wait behind it).

The plans are the planner's own, for a converged replica of 10,000 Instances of 2 pods (the
world simulator): its deletion (``Teardown``: every pod's serving gate goes False and
every PodGroup is deleted, 30,000 actions in one pass), and a new image planned with
``SurgeThenDrain`` (maxSurge 25%: a PodGroup and 2 pods per surge) and with
``InPlaceIfPossible`` (serving gates False before the image patches); the last two are
bounded by the status budget, which caps the operations open at once. Each is applied
through the real :class:`Executor` with a stand-in client that answers each call after
``--latency`` (this measures our code, not an API server), while a ticker asks the loop
for a 1 ms sleep and records the longest gap.

Side by side in one run, for each plan:

* ``all at once``: every member of a run gathered in one step (the executor before
  bounded batches);
* ``bounded``: the executor as shipped (at most ``max_inflight`` lanes per run).

Also printed: the longest gap of the status write alone (encoding a 10,000-row status, in a
worker thread from ``STATUS_THREAD_ROWS`` rows) and of an idle loop (the noise floor of a
shared machine).
Timing lives here, never in tests. Run::

    .venv/bin/python benchmarks/bench_apply.py            # 10,000 Instances
    .venv/bin/python benchmarks/bench_apply.py --instances 2000 --latency 0.002
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from attrs import evolve
from bench_planner import _converged_world, _image_patch

from omenative_controller.executor import CreateErrorStore, Executor, PassContext
from omenative_controller.observability import configure_logging
from omenative_core.model.plan import Action, Plan, UpdateStatus
from omenative_core.planner import plan as make_plan


class StandInApi:
    """Answers every call after ``latency`` seconds, as an API server that is never slow."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.calls = 0

    async def _answer(self, body: Any) -> Any:
        self.calls += 1
        await asyncio.sleep(self.latency)
        return body

    async def create(self, res: Any, body: Any, ns: Any = None, **kw: Any) -> Any:
        return await self._answer(body)

    async def replace(self, res: Any, name: str, body: Any, ns: Any = None, **kw: Any) -> Any:
        return await self._answer(body)

    async def patch(self, res: Any, name: str, body: Any, ns: Any = None, **kw: Any) -> Any:
        return await self._answer({"metadata": {"name": name}})

    async def delete(self, res: Any, name: str, ns: Any = None, **kw: Any) -> None:
        await self._answer(None)


class AllAtOnce(Executor):
    """The executor before bounded batches: a run's members gathered in one step."""

    async def _apply_run(self, run: Sequence[Action], ctx: PassContext
                         ) -> dict[int, Exception | None]:
        errors = await asyncio.gather(*(self._apply_counted(a, ctx) for a in run))
        return dict(enumerate(errors))


async def longest_gap(work: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """(longest gap between 1 ms ticks of the event loop, wall time) while ``work`` runs."""
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    gc.collect()
    gc.freeze()  # the world's long-lived objects leave GC tracking, as in a warmed-up manager
    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    t0 = time.perf_counter()
    await work()
    took = time.perf_counter() - t0
    await asyncio.sleep(0.005)
    done.set()
    await task
    gc.unfreeze()
    return max(gaps), took


def _ctx() -> PassContext:
    raw = {"metadata": {"name": "bench", "namespace": "default", "uid": "u",
                        "resourceVersion": "1"}, "spec": {}}
    return PassContext(key="default/bench", namespace="default", name="bench", raw=raw)


async def measure(executor_type: type[Executor], plan: Plan, latency: float,
                  ) -> tuple[float, float, int]:
    """(longest loop gap, wall time, calls) applying ``plan`` with ``executor_type``."""
    api = StandInApi(latency)
    executor = executor_type(api, CreateErrorStore())  # type: ignore[arg-type]

    async def apply() -> None:
        result = await executor.apply(plan, _ctx())
        assert result.ok, result.message

    gap, took = await longest_gap(apply)
    return gap, took, api.calls


def _plans(instances: int) -> dict[str, Plan]:
    """The planner's plans for a new image of a converged replica, by update strategy."""
    world = _converged_world(instances)
    rest = world.snapshot()
    ir = rest.replica
    deleted = evolve(rest, replica=evolve(ir, metadata=evolve(ir.metadata,
                                                              deletion_timestamp=rest.now)))
    out: dict[str, Plan] = {"Teardown": make_plan(deleted)}
    for strategy in ("SurgeThenDrain", "InPlaceIfPossible"):
        lifecycle = {"updateStrategy": {"type": strategy}}
        if strategy == "SurgeThenDrain":
            lifecycle["updateStrategy"]["rollingUpdate"] = {"maxSurge": "25%"}
        patch = _image_patch("img:2" if strategy == "SurgeThenDrain" else "img:3")
        patch["spec"]["lifecycle"] = lifecycle
        world.patch_replica(patch)
        out[strategy] = make_plan(world.snapshot())
    return out


def _kinds(plan: Plan) -> str:
    counts: dict[str, int] = {}
    for a in plan.actions:
        counts[a.kind] = counts.get(a.kind, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


async def main_async(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    plans = _plans(args.instances)
    print(f"== applying a new revision of {args.instances:,} Instances of 2 pods "
          f"(stand-in API, {args.latency * 1000:.0f} ms a call; world built in "
          f"{time.perf_counter() - t0:.1f} s) ==")
    print(f"{'plan':<20} {'executor':<12} {'longest loop gap':>17} {'wall':>9} {'calls':>7}")
    idle, took = await longest_gap(lambda: asyncio.sleep(0.3))
    print(f"{'(nothing)':<20} {'idle loop':<12} {idle * 1000:>14.1f} ms {took:>7.2f} s {0:>7}"
          "   <- the machine's noise floor")
    worst = 0.0
    for name, plan in plans.items():
        print(f"{name}: {_kinds(plan)}")
        status_only = Plan(actions=tuple(a for a in plan.actions if isinstance(a, UpdateStatus)),
                           status=plan.status)
        gap, took, calls = await measure(Executor, status_only, args.latency)
        print(f"{'':<20} {'status only':<12} {gap * 1000:>14.1f} ms {took:>7.2f} s {calls:>7}")
        for label, kind in (("all at once", AllAtOnce), ("bounded", Executor)):
            gap, took, calls = await measure(kind, plan, args.latency)
            if kind is Executor:
                worst = max(worst, gap)
            print(f"{'':<20} {label:<12} {gap * 1000:>14.1f} ms {took:>7.2f} s {calls:>7}")
    verdict = "met" if worst <= 0.010 else "NOT met"
    print(f"longest event-loop gap of the shipped executor: {worst * 1000:.1f} ms "
          f"(target 10 ms: {verdict})")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=10000)
    parser.add_argument("--latency", type=float, default=0.005,
                        help="seconds the stand-in API takes to answer a call")
    args = parser.parse_args()
    # the manager's JSON logging, written to /dev/null: its cost per action is ours
    real_stdout = sys.stdout
    with open(os.devnull, "w") as sink:
        sys.stdout = sink
        configure_logging("info")
        sys.stdout = real_stdout
        return asyncio.run(main_async(args))


if __name__ == "__main__":
    raise SystemExit(main())

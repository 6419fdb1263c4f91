"""Where the manager plans: on the event loop when it is cheap, in a worker thread when not.

The core's pass is pure CPU. A full pass over a replica of thousands of pods takes tens of
milliseconds, and on the event loop nothing else moves meanwhile (no watch event, no other
replica's writes). ``plan_replica`` answers from the memo on the loop when it can (a
comparison), plans a small replica on the loop, and sends a pass over a big one to a
worker thread, where the interpreter hands the loop the GIL back every switch interval
(5 ms), so no pass holds the loop for long. Either way the pass gets the memo, so it
rederives only the Instances whose pods changed (``omenative_core.steps.verdicts``).
"""

from __future__ import annotations

import asyncio
from types import MappingProxyType

from attrs import evolve

from omenative_core.incremental import PlanMemo, plan_incremental, reuse
from omenative_core.model.observed import Snapshot
from omenative_core.model.plan import Plan

__all__ = ["OFF_LOOP_PODS", "plan_replica"]

OFF_LOOP_PODS = 1000
"""A full pass over a replica with at least this many pods runs in a worker thread
(about 10 ms of planning at the measured ~10 µs per pod)."""


async def plan_replica(snapshot: Snapshot, memo: PlanMemo | None) -> tuple[Plan, PlanMemo]:
    """``plan_incremental(snapshot, memo)``, a big full pass off the event loop."""
    got = reuse(snapshot, memo)
    if got is not None:
        return got
    if len(snapshot.pods) < OFF_LOOP_PODS:
        return plan_incremental(snapshot, memo)
    # the caches may change while the thread reads: a live view of the node map is copied
    # (the manager's is a frozen copy already; the other inputs are immutable tuples,
    # frozensets and frozen views, or built per pass; the memo's per-Instance verdicts are
    # only read, each pass copies what it changes)
    if isinstance(snapshot.nodes, MappingProxyType):
        snapshot = evolve(snapshot, nodes=dict(snapshot.nodes))
    return await asyncio.to_thread(plan_incremental, snapshot, memo)

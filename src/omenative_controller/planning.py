"""Where the manager plans: on the event loop when it is cheap, in a worker thread when not.

The core's pass is pure CPU. A full pass over a replica of thousands of pods takes tens of
milliseconds, and on the event loop nothing else moves meanwhile (no watch event, no other
replica's writes). ``plan_replica`` answers from the memo on the loop when it can (a
comparison), plans a small replica on the loop, and sends a pass over a big one to a
worker thread. Either way the pass gets the memo, so it rederives only the Instances whose
pods changed (``omenative_core.steps.verdicts``).

A worker thread alone does not free the loop: the two threads share the GIL, and a thread
that wants it back waits for the holder to give it up, which the interpreter asks for only
after the switch interval (5 ms by default). Each time the loop wakes (a 1 ms sleep, a
socket ready) it waited up to 5 ms, plus whatever the pass ran in one piece meanwhile (a
garbage collection of the pass's young objects: a few ms), and measured gaps reached
20 ms (``benchmarks/bench_planner.py``). While a pass runs in a worker thread the switch
interval is therefore ``PLANNING_SWITCH_INTERVAL`` (1 ms), and the default again once no
pass is running: the pass pays a few more GIL hand-overs, the loop waits about 1 ms. And the
last pass's memo is freed in the worker thread too (``plan_replica``), not on the loop,
and a big replica's new resourceVersion is decoded there (``decode_replica``).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Mapping
from functools import partial
from types import MappingProxyType
from typing import Any, TypeVar

from attrs import evolve, fields

from omenative_controller.decoded import ReplicaDecoder
from omenative_core.incremental import PlanMemo, plan_incremental, reuse
from omenative_core.model.observed import Snapshot
from omenative_core.model.plan import Plan
from omenative_core.model.spec import InferenceReplica
from omenative_core.status.wire import replica_from_json
from omenative_core.steps.verdicts import Verdicts

__all__ = [
    "OFF_LOOP_INSTANCES",
    "OFF_LOOP_PODS",
    "PLANNING_SWITCH_INTERVAL",
    "decode_replica",
    "free_in_pieces",
    "in_worker",
    "pass_pods",
    "plan_replica",
]

T = TypeVar("T")

OFF_LOOP_PODS = 200
"""A full pass over a replica with, or asking for, at least this many pods runs in a worker
thread. A pass at rest costs a few µs a pod, but one that renders the pods still to create
~50 µs a pod (a first pass over 50 Instances of 4 pods: ~10 ms; over 500: ~65 ms), and a
replica's first passes have no pods yet: the pods it asks for count."""

OFF_LOOP_INSTANCES = 500
"""A replica of at least this many Instances is decoded in a worker thread (about 5 ms of
decoding at the measured ~10 µs per status row)."""

PLANNING_SWITCH_INTERVAL = 0.001
"""The interpreter's switch interval (seconds) while a pass runs in a worker thread: how
long the event loop may wait for the GIL each time it wakes."""


class _Switching:
    """How many worker passes run now, and the switch interval to restore after the last.

    Only the event loop's thread changes it (``in_worker`` is a coroutine), so a plain
    counter is enough."""

    running = 0
    saved = 0.005


async def in_worker(fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)`` in a worker thread, the switch interval short while it runs."""
    if _Switching.running == 0:
        _Switching.saved = sys.getswitchinterval()
        sys.setswitchinterval(min(PLANNING_SWITCH_INTERVAL, _Switching.saved))
    _Switching.running += 1
    try:
        return await asyncio.to_thread(fn, *args)
    finally:
        _Switching.running -= 1
        if _Switching.running == 0:
            sys.setswitchinterval(_Switching.saved)


async def decode_replica(decoder: ReplicaDecoder, raw: Mapping[str, Any]) -> InferenceReplica:
    """``decoder.decode(raw)``, a big one decoded in a worker thread.

    A new resourceVersion of a big replica (every status write of a rollout makes one)
    is decoded again: about 10 µs per status row, so 100 ms at 10,000 rows, all of it on
    the loop. A replica whose spec asks for ``OFF_LOOP_INSTANCES`` or more is decoded in a
    worker thread (the cached object is immutable) and kept in the cache on the loop (its
    packed size says little: a uniform fleet's status packs to a few hundred bytes).
    Raises ``CodecError`` as ``decode`` does.
    """
    got = decoder.cached(raw)
    if got is not None:
        return got
    if _instances(raw) < OFF_LOOP_INSTANCES:
        return decoder.decode(raw)
    decode = partial(replica_from_json, max_decoded=decoder.max_decoded)
    return decoder.keep(raw, await in_worker(decode, raw))


def _instances(raw: Mapping[str, Any]) -> int:
    """``spec.replicas`` as sent (0 when absent or not a number: decoding will say why)."""
    spec = raw.get("spec")
    count = spec.get("replicas") if isinstance(spec, Mapping) else None
    return count if isinstance(count, int) else 0


async def plan_replica(snapshot: Snapshot, memo: PlanMemo | None) -> tuple[Plan, PlanMemo]:
    """``plan_incremental(snapshot, memo)``, a big full pass off the event loop.

    Hand over the last memo without keeping a reference to it (``dict.pop``): after a big
    pass it is freed in the worker thread. Freeing a 10,000-Instance memo (its plan, its
    rows, its pod lists) is one uninterruptible run of deallocations, about 10 ms, which on
    the loop would hold every other replica and watch.
    """
    got = reuse(snapshot, memo)
    if got is not None:
        return got
    if pass_pods(snapshot) < OFF_LOOP_PODS:
        return plan_incremental(snapshot, memo)
    # the caches may change while the thread reads: a live view of the node map is copied
    # (the manager's is a frozen copy already; the other inputs are immutable tuples,
    # frozensets and frozen views, or built per pass; the memo's per-Instance verdicts are
    # only read, each pass copies what it changes)
    if isinstance(snapshot.nodes, MappingProxyType):
        snapshot = evolve(snapshot, nodes=dict(snapshot.nodes))
    last = [memo]
    del memo  # only ``last`` holds it now: the worker empties it
    return await in_worker(_plan_then_drop, snapshot, last)


def pass_pods(snapshot: Snapshot) -> int:
    """The pods a pass over ``snapshot`` may read or render: those cached, or those its spec
    asks for (Instances times the runners' sizes), whichever is more."""
    spec = snapshot.replica.spec
    asked = (spec.replicas or 0) * sum(max(r.size, 0) for r in spec.runners)
    return max(len(snapshot.pods), asked)


def _plan_then_drop(snapshot: Snapshot, last: list[PlanMemo | None]) -> tuple[Plan, PlanMemo]:
    """``plan_incremental`` with the memo in ``last``, which it then empties: the memo is
    freed here, in the worker thread, when nothing else holds it."""
    try:
        return plan_incremental(snapshot, last[0])
    finally:
        free_in_pieces(last.pop())


def free_in_pieces(memo: PlanMemo | None) -> None:
    """Let go of ``memo`` one field at a time, its verdicts' fields first.

    Freeing a big memo is a run of deallocations in C that never gives up the GIL: at
    10,000 Instances about 10 ms in one piece. Dropped field by field, each piece (the pod
    lists, the attempts, the plan ...) takes a few ms at most, and between two of them
    the interpreter can hand the GIL to the loop. Nothing is changed: whatever another
    holder still references stays alive.
    """
    if memo is None:
        return
    pieces: list[object] = [getattr(memo, f.name) for f in fields(PlanMemo)]
    if memo.verdicts is not None:
        pieces += [getattr(memo.verdicts, f.name) for f in fields(Verdicts)]
    del memo
    while pieces:
        pieces.pop()

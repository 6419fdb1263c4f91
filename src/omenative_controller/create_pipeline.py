"""Pod creates sent behind a pass: the replica's next pass plans while they are answered.

Why: a pass holds its replica's key until every action answered. A 250-Instance bring-up
is 1,000 pod creates in chunks of ``creates_per_pass``; with every chunk answered before
the next pass could plan, each chunk ended with lanes of the in-flight budget idle while
its slowest creates finished, then waited for a new pass (queue, snapshot, plan, status
write) before the next chunk went out: 32 passes of 0.8-1.4 s, 1.3-1.7x the bare client
loop that keeps its 32 lanes busy (docs/benchmarks-history.md, runs Z and C).

How (the ReplicaSet controller's "expectations", made concrete): when a pass leaves
creates for the next one (``creates_per_pass``) and its last run holds pod creates, or
finds its replica full (below), the pass writes each pod it is about to create into the
pod cache as an *expected* pod (the body sent, created now, no UID, no resourceVersion),
hands the creates to a batch task and ends. The next pass of the replica sees those
Instances as created and plans the next chunk, never the same pods again; its status
write and its chunk queue for the budget slots that this batch frees, so the budget never
drains between chunks. A create's answer replaces its expected pod (the write-through of
the created pod, or its watch event, whichever comes first); a refusal or an error takes
the expected pod out again (only while it is still the one we put), and the replica is
queued again, rate limited, with the refusal carried to its next snapshot
(:class:`CreateErrorStore`).
A pass whose creates all fit answers them itself: with no next chunk to plan there is
nothing to gain, and 250 replicas of one gang each, ending their passes early, flooded
the budget with their status writes ahead of the creates (run M, docs/benchmarks-history.md).

Bounds and safety:

* a replica has at most ``depth`` batches out. A pass that finds that many sends none of
  its creates (the next pass plans them again) and does not wait: it ends, and the
  replica is queued again when its oldest batch ends (``on_free``). A pass that fills the
  last place is not queued at once either. So a replica holds its key only to plan, write
  its status and gates, never while its creates are answered: a gang whose pods turn
  ready gets its gates from a pass that starts at once, not after a chunk's creates;
* every create holds a slot of the executor's in-flight budget, exactly as in a pass;
* after a failure no batch of that replica sends another create (the next pass plans the
  rest again, as after a failed pass);
* before each create the write guard (the Lease) must agree; losing the Lease cancels every
  batch and a graceful stop waits for them (:meth:`CreatePipeline.drain`);
* expected pods are only ever added where the cache holds no pod of that name, and only
  ever removed while still the very view that was put: a watch event always wins. Each is
  taken out once its create answered (a no-op where the answer replaced it): after a 409
  AlreadyExists the pod of that name is not one we made, and only its watch event (if it
  is ours) may put it in the cache. The executor never deletes a pod without a UID, so
  no pass can delete by name a pod that is only expected.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

import structlog
from attrs import define, field

from omenative_controller.kube.client import JSON
from omenative_controller.kube.tasks import cancel_and_wait
from omenative_controller.pass_context import PassContext
from omenative_controller.slots import in_lanes
from omenative_core.labels import KUEUE_ADMISSION_GATE, LABEL_KUEUE_QUEUE
from omenative_core.model.plan import Action, CreatePod
from omenative_core.model.timefmt import format_time

__all__ = ["PIPELINE_DEPTH", "CreatePipeline", "expected_pod"]

log = structlog.get_logger("omenative.create_pipeline")

PIPELINE_DEPTH = 2
"""Batches of pod creates one replica may have out at once (``--pipeline-creates``)."""


def expected_pod(action: CreatePod, ctx: PassContext, now: datetime) -> JSON:
    """The pod a create is about to make, as the pod cache should hold it meanwhile: the
    body sent, in the pass's namespace, created ``now``, with no UID or resourceVersion (so
    the answer, or the watch event, always replaces it). A pod queued to Kueue (its
    ``kueue.x-k8s.io/queue-name`` label) is expected with Kueue's admission gate, as
    Kueue's webhook creates it: until then the core must not take it for admitted."""
    meta = dict(action.body.get("metadata") or {})
    meta.setdefault("namespace", ctx.namespace)
    meta["creationTimestamp"] = format_time(now)
    pod = {**action.body, "metadata": meta}
    if LABEL_KUEUE_QUEUE in (meta.get("labels") or {}):
        spec = dict(pod.get("spec") or {})
        gates = list(spec.get("schedulingGates") or ())
        if not any(g.get("name") == KUEUE_ADMISSION_GATE for g in gates):
            spec["schedulingGates"] = [*gates, {"name": KUEUE_ADMISSION_GATE}]
        pod["spec"] = spec
    return pod


@define(eq=False)
class _Batch:
    """One pass's creates on their way: what is still expected, and whether to go on."""

    key: str
    expected: list[tuple[JSON, object]]
    stopped: bool = False
    task: asyncio.Task[None] | None = None


@define
class CreatePipeline:
    """Sends pod creates behind their pass, at most ``depth`` batches per replica."""

    #: sends one action within the in-flight budget: its refusal, or None (the executor's)
    send: Callable[[Action, PassContext], Awaitable[Exception | None]]
    #: puts an expected pod into the pod cache; the view put (None: a pod was cached already)
    expect: Callable[[JSON], object | None]
    #: takes an expected pod out of the pod cache, if it is still that view
    unexpect: Callable[[JSON, object], None]
    #: the write guard: False stops every batch before its next create
    guard: Callable[[], bool] = lambda: True
    #: told of a batch's first failure (the key, the create, the refusal): requeue the key
    on_failed: Callable[[str, CreatePod, Exception], None] | None = None
    #: told that a replica found full (:meth:`full`) has a place again: queue the key
    on_free: Callable[[str], None] | None = None
    depth: int = PIPELINE_DEPTH
    #: lanes one batch sends through (the executor's ``max_inflight``)
    lanes: int = 32
    _batches: dict[str, list[_Batch]] = field(factory=dict)
    _waiting: set[str] = field(factory=set)

    def outstanding(self, key: str | None = None) -> int:
        """Batches still out (for ``key``, or for every replica)."""
        if key is not None:
            return len(self._batches.get(key, ()))
        return sum(len(b) for b in self._batches.values())

    def full(self, key: str) -> bool:
        """True while the replica has ``depth`` batches out (its creates wait)."""
        return len(self._batches.get(key, ())) >= self.depth

    def when_free(self, key: str) -> None:
        """Call ``on_free(key)`` once the replica, full now, has a place again."""
        self._waiting.add(key)

    def offer(self, creates: Sequence[CreatePod], ctx: PassContext) -> tuple[int, bool]:
        """A pass's last creates: send them behind it unless the replica is full; how many
        were sent (0 or all), and whether the replica is full now (then it is queued again
        through ``on_free`` when a batch ends, not at once)."""
        sent = len(creates) if self.launch(creates, ctx) else 0
        if self.full(ctx.key):
            self.when_free(ctx.key)
            return sent, True
        return sent, False

    def launch(self, creates: Sequence[CreatePod], ctx: PassContext) -> bool:
        """Send ``creates`` behind the pass: put the expected pods, start the batch; False
        (nothing sent, nothing put) while the replica is :meth:`full`."""
        if self.full(ctx.key):
            return False
        if not creates:
            return True
        now = datetime.now(UTC)
        expected: list[tuple[JSON, object]] = []
        for action in creates:
            body = expected_pod(action, ctx, now)
            view = self.expect(body)
            expected.append((body, view))
        batch = _Batch(ctx.key, expected)
        batch.task = asyncio.create_task(self._run(batch, creates, ctx),
                                         name=f"creates-{ctx.key}")
        batch.task.add_done_callback(lambda _: self._finish(batch))  # cancelled early too
        self._batches.setdefault(ctx.key, []).append(batch)
        return True

    async def _run(self, batch: _Batch, creates: Sequence[CreatePod], ctx: PassContext) -> None:
        async def step(i: int) -> bool:
            if batch.stopped or not self.guard():
                batch.stopped = True
                return False
            try:
                error = await self.send(creates[i], ctx)
            except Exception as exc:  # a transport error: as a failed pass would be
                error = exc
            body, view = batch.expected[i]
            if view is not None:  # still there after a 201: no answer came back; after
                self.unexpect(body, view)  # a 409: the pod is somebody's, not ours
            if error is None:
                return True
            if not batch.stopped:
                self._stop_key(batch.key)
                if self.on_failed is not None:
                    self.on_failed(batch.key, creates[i], error)
            return False

        await in_lanes(len(creates), self.lanes, step)

    def _finish(self, batch: _Batch) -> None:
        """A batch ended (or was cancelled): take out the pods it did not create."""
        for body, view in batch.expected:
            if view is not None:
                self.unexpect(body, view)  # a no-op where the answer replaced it
        batches = self._batches.get(batch.key)
        if batches is not None:
            with contextlib.suppress(ValueError):
                batches.remove(batch)
            if not batches:
                del self._batches[batch.key]
        if batch.key in self._waiting and not self.full(batch.key):
            self._waiting.discard(batch.key)
            if self.on_free is not None and not batch.stopped:  # a failure requeues itself
                self.on_free(batch.key)

    def _stop_key(self, key: str) -> None:
        for batch in self._batches.get(key, ()):
            batch.stopped = True

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait for every batch out to finish (a graceful stop); False on the timeout."""
        tasks = {b.task for bs in self._batches.values() for b in bs if b.task is not None}
        if not tasks:
            return True
        _, pending = await asyncio.wait(tasks, timeout=timeout)
        return not pending

    async def cancel(self) -> None:
        """Cancel every batch out (the Lease is lost): their expected pods are taken out."""
        tasks = [b.task for bs in self._batches.values() for b in bs if b.task is not None]
        await cancel_and_wait(tasks)
        if tasks:
            log.info("creates.cancelled", batches=len(tasks))

"""What omenative counted as serving, and when: the yardstick traffic answers are held to.

omenative counts an Instance as **serving** when the ``ome.io/serving`` readiness gate is
True on every one of its pods. ``ServingRecord`` keeps, per pod, every change of that gate
and of the pod's Ready condition, with the wall time the watch event arrived, and per
InferenceReplica status row the time its phase first read ``Ready``; ``ServingRecorder``
feeds it from two watches (pods and InferenceReplicas of one namespace), never by polling.

A pod's name outlives its incarnation (a restarted Instance reuses its names), so a pod is
looked up by name *at a time*: the object of that name last seen at or before the time.
An Instance is keyed by (InferenceReplica, index, incarnation, attempt): the first three
from the pod's labels, the attempt counted here, because a SurgeThenDrain replacement may
take an index that an Instance drained earlier, at incarnation 1 again. An attempt begins
when a pod of the key appears while none is alive.

The check a traffic test runs, ``unserving_answers``: an answer came from a pod whose
Instance was not yet counted serving when the answer arrived. Answers after the gate went
False are the drain (the server keeps answering until kube-proxy drops it) and are fine.
The watch sees the gate a little after the API server wrote it, and the answer can only
come after the kubelet, the EndpointSlice controller and kube-proxy have acted on that
write, so the check errs on the strict side.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import aiohttp
from attrs import define, field, frozen

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import INFERENCE_REPLICAS, PODS, Resource
from omenative_core import replica_from_json
from omenative_core.labels import (
    LABEL_INCARNATION,
    LABEL_INSTANCE_INDEX,
    LABEL_REPLICA,
    LABEL_RUNNER,
    SERVING_GATE,
)
from omenative_devcluster.traffic_report import Outcome
from omenative_devcluster.waiting import eventually

__all__ = ["InstanceKey", "PodSighting", "ServingRecord", "ServingRecorder", "listed_versions"]

InstanceKey = tuple[str, int, int, int]
"""(InferenceReplica name, Instance index, incarnation, attempt from 1)."""


@frozen
class PodSighting:
    """One watch event of a pod: when it arrived and what it said."""

    t: float
    uid: str
    key: InstanceKey | None
    runner: str
    gate: bool
    ready: bool
    deleted: bool
    #: the pod had a deletionTimestamp (evicted or deleted, still running its grace period)
    terminating: bool = False
    #: the node the pod was bound to ("" while unscheduled)
    node: str = ""


def _conditions(obj: Mapping[str, Any]) -> dict[str, str]:
    return {str(c.get("type")): str(c.get("status"))
            for c in (obj.get("status") or {}).get("conditions") or ()}


def _labels_key(labels: Mapping[str, str]) -> tuple[str, int, int] | None:
    try:
        return (labels[LABEL_REPLICA], int(labels[LABEL_INSTANCE_INDEX]),
                int(labels.get(LABEL_INCARNATION, "1")))
    except (KeyError, ValueError):
        return None


@define
class ServingRecord:
    """Pod gate and Ready history, Instance serving times and status-row Ready times."""

    sightings: dict[str, list[PodSighting]] = field(factory=dict)
    #: first time every live pod of the Instance had the gate True
    serving_since: dict[InstanceKey, float] = field(factory=dict)
    #: first time the gate went False again on a pod of the Instance (its drain began)
    unserving_since: dict[InstanceKey, float] = field(factory=dict)
    #: first time the InferenceReplica's status row for the Instance read phase Ready
    row_ready_since: dict[InstanceKey, float] = field(factory=dict)
    #: the most pods that existed at once (terminating ones included: they hold their GPUs)
    peak_pods: int = 0
    _live: dict[str, PodSighting] = field(factory=dict)
    _attempts: dict[tuple[str, int, int], int] = field(factory=dict)

    def _key(self, labels: Mapping[str, str], name: str, kind: str) -> InstanceKey | None:
        """The Instance attempt of a pod event (a new attempt if none of its pods is alive)."""
        base = _labels_key(labels)
        if base is None:
            return None
        attempt = self._attempts.get(base, 0)
        alive = any(s.key is not None and s.key[:3] == base
                    for n, s in self._live.items() if n != name)
        starts = kind != "DELETED" and not alive and self._live.get(name) is None
        if attempt == 0 or starts:
            attempt += 1
            self._attempts[base] = attempt
        return (*base, attempt)

    def observe_pod(self, kind: str, pod: Mapping[str, Any], t: float) -> None:
        """Take one pod watch event (ADDED / MODIFIED / DELETED) that arrived at ``t``."""
        meta = pod.get("metadata") or {}
        name = str(meta.get("name", ""))
        labels = meta.get("labels") or {}
        conds = _conditions(pod)
        seen = PodSighting(t=t, uid=str(meta.get("uid", "")), key=self._key(labels, name, kind),
                           runner=str(labels.get(LABEL_RUNNER, "")),
                           gate=conds.get(SERVING_GATE) == "True",
                           ready=conds.get("Ready") == "True", deleted=kind == "DELETED",
                           terminating=bool(meta.get("deletionTimestamp")),
                           node=str((pod.get("spec") or {}).get("nodeName") or ""))
        self.sightings.setdefault(name, []).append(seen)
        if seen.deleted:
            self._live.pop(name, None)
        else:
            self._live[name] = seen
        self.peak_pods = max(self.peak_pods, len(self._live))
        key = seen.key
        if key is None:
            return
        pods = [s for s in self._live.values() if s.key == key]
        if pods and all(s.gate for s in pods) and key not in self.serving_since:
            self.serving_since[key] = t
        if key in self.serving_since and not seen.gate and key not in self.unserving_since:
            self.unserving_since[key] = t

    def observe_replica(self, ir: Mapping[str, Any], t: float) -> None:
        """Take one InferenceReplica watch event: note rows that read ``Ready``."""
        if not ir.get("status"):
            return
        name = str((ir.get("metadata") or {}).get("name", ""))
        replica = replica_from_json(ir)
        for row in replica.status.instances if replica.status else ():
            attempt = self._attempts.get((name, row.index, row.incarnation), 0)
            if row.phase == "Ready" and attempt:
                self.row_ready_since.setdefault((name, row.index, row.incarnation, attempt), t)

    def pod_at(self, name: str, t: float) -> PodSighting | None:
        """The last sighting of the pod named ``name`` at or before ``t``."""
        found = None
        for s in self.sightings.get(name, ()):
            if s.t > t:
                break
            found = s
        return found

    def pod_ready_since(self, name: str, uid: str) -> float | None:
        """When the pod (this uid) first had its Ready condition True."""
        return next((s.t for s in self.sightings.get(name, ()) if s.uid == uid and s.ready),
                    None)

    def unserving_answers(self, answers: Iterable[Outcome],
                          wall: Callable[[float], float]) -> list[str]:
        """Answers from a pod whose Instance omenative did not count serving when they came.

        ``wall`` turns an outcome's offset into epoch seconds (``LoadGenerator.wall``). Each
        entry says which answer, which pod and Instance, and why.
        """
        problems = []
        for o in answers:
            at = wall(o.ended)
            pod = self.pod_at(o.pod, at)
            if pod is None or pod.key is None:
                problems.append(f"answer at {o.ended:.2f}s from {o.pod}: no such pod was seen")
                continue
            since = self.serving_since.get(pod.key)
            if since is None or since > at:
                problems.append(
                    f"answer at {o.ended:.2f}s from {o.pod} (Instance {pod.key}): not counted "
                    f"serving until "
                    + ("never" if since is None else f"{since - wall(0):.2f}s"))
        return problems

    def instances(self) -> list[InstanceKey]:
        """Every Instance attempt seen, in key order."""
        keys = {s.key for ss in self.sightings.values() for s in ss if s.key is not None}
        return sorted(keys)


@define
class ServingRecorder:
    """Feeds a ``ServingRecord`` from watches of one namespace's pods and InferenceReplicas.

    ``async with ServingRecorder(kube, ns) as rec:`` returns once both watches are open;
    leaving the block stops them and re-raises the first error either met (a test must not
    pass on a record with holes).
    """

    kube: KubeClient
    namespace: str
    record: ServingRecord = field(factory=ServingRecord)
    clock: Callable[[], float] = time.time
    _tasks: list[asyncio.Task[None]] = field(factory=list)
    _opened: list[asyncio.Event] = field(factory=list)
    #: per watched resource (plural): name -> the resourceVersion its watch last delivered
    _versions: dict[str, dict[str, str]] = field(factory=dict)

    async def __aenter__(self) -> ServingRecorder:
        feeds: tuple[tuple[Resource, Callable[[str, Mapping[str, Any], float], None]], ...] = (
            (PODS, self.record.observe_pod),
            (INFERENCE_REPLICAS, lambda _k, o, t: self.record.observe_replica(o, t)),
        )
        for res, feed in feeds:
            opened = asyncio.Event()
            self._opened.append(opened)
            self._tasks.append(asyncio.create_task(self._watch(res, feed, opened),
                                                   name=f"serving-record-{res.plural}"))
        async with asyncio.timeout(30):
            while not all(e.is_set() for e in self._opened):
                for task in self._tasks:
                    if task.done():
                        task.result()  # a watch that failed to open: raise its error
                await asyncio.sleep(0.05)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def caught_up(self, timeout: float = 30) -> None:
        """Until both watches have delivered every object as a LIST shows it now. A wait
        that read the cluster (``wait_converged``) can be ahead of the watches, so a check
        over the record right after it could miss the very changes it waited for."""

        async def caught() -> bool:
            self._raise_failed()
            behind = [res.plural for res in (PODS, INFERENCE_REPLICAS)
                      if await listed_versions(self.kube, res, self.namespace)
                      != self._versions.get(res.plural, {})]
            if behind:  # "not yet" to ``eventually``, which reports the last one
                raise AssertionError(f"the serving record's watches of {behind} are behind "
                                     "a LIST")
            return True

        await eventually(caught, timeout=timeout, interval=0.1,
                         what="the serving record's watches to catch up with a LIST")

    def _raise_failed(self) -> None:
        """Raise (at once: no waiting mends it) if a watch stopped: the record has a hole
        from there on. The watch's own error is the cause."""
        for task in self._tasks:
            error = task.exception() if task.done() and not task.cancelled() else None
            if error is not None:
                raise RuntimeError(f"the serving record's watch stopped: {error!r}") from error

    async def stop(self) -> None:
        """Stop watching; raise the first error a watch met."""
        errors: list[BaseException] = []
        for task in self._tasks:
            if task.done():
                if not task.cancelled() and task.exception() is not None:
                    errors.append(task.exception())  # type: ignore[arg-type]
                continue
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if errors:
            raise errors[0]

    async def _watch(self, res: Resource,
                     feed: Callable[[str, Mapping[str, Any], float], None],
                     opened: asyncio.Event) -> None:
        while True:
            try:
                page = await self.kube.list(res, self.namespace)
                break
            except ApiError as exc:
                # a CRD created a moment ago answers 429 while its storage initializes
                if exc.status not in (429, 503):
                    raise
                await asyncio.sleep(0.5)
        versions = self._versions.setdefault(res.plural, {})
        for obj in page.get("items") or ():
            feed("ADDED", obj, self.clock())
            _note(versions, "ADDED", obj)
        rv = str(page["metadata"]["resourceVersion"])
        while True:
            try:
                async with self.kube.watch(res, self.namespace, resource_version=rv,
                                           timeout_seconds=300, read_timeout=120) as events:
                    opened.set()
                    async for ev in events:
                        rv = self._take(ev, feed, rv)
                        _note(versions, str(ev.get("type")), ev.get("object") or {})
            except (aiohttp.ClientError, TimeoutError):
                await asyncio.sleep(0.2)  # the stream broke: resume from the last rv

    def _take(self, ev: Mapping[str, Any],
              feed: Callable[[str, Mapping[str, Any], float], None], rv: str) -> str:
        kind = ev.get("type")
        obj = ev.get("object") or {}
        if kind == "ERROR":
            raise ApiError.from_response(int(obj.get("code") or 0), obj)
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            feed(str(kind), obj, self.clock())
        return str((obj.get("metadata") or {}).get("resourceVersion") or rv)


async def listed_versions(kube: KubeClient, resource: Resource,
                          namespace: str) -> dict[str, str]:
    """{name: resourceVersion} of every ``resource`` in ``namespace`` as a LIST shows it now:
    what a recording watch has caught up with once it holds the same (the recorders'
    ``caught_up``), since a wait that read the cluster can be ahead of the watch."""
    page = await kube.list(resource, namespace)
    return {str(o["metadata"]["name"]): str(o["metadata"].get("resourceVersion"))
            for o in page.get("items") or ()}


def _note(versions: dict[str, str], kind: str, obj: Mapping[str, Any]) -> None:
    """Keep the resourceVersion a watch event delivered for its object (drop it on DELETED)."""
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if kind not in ("ADDED", "MODIFIED", "DELETED") or not name:
        return
    if kind == "DELETED":
        versions.pop(str(name), None)
    else:
        versions[str(name)] = str(meta.get("resourceVersion"))

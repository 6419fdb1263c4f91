"""Time passing in the simulated world: queued events (containers start and become ready,
pods finish terminating, endpoints drop pods, lost nodes), pod lifecycles and faults.
"""

from __future__ import annotations

import heapq

from omenative_core.model.spec import JSON
from omenative_sim.objects import SimNode, SimPod
from omenative_sim.scheduler import _Scheduler
from omenative_sim.state import (
    C_BACKOFF,
    C_PULL_ERROR,
    C_READY,
    C_START,
    NODE_EVICT,
    NODE_LOST,
    POD_GONE,
    UNROUTE,
    WorldError,
)

__all__: list[str] = []


class _Events(_Scheduler):
    """The event loop, pods coming and going, and injected faults."""

    def _valid(self, kind: int, a: str, b: str, c: int) -> bool:
        if kind in (NODE_LOST, NODE_EVICT):
            node = self.nodes.get(a)
            return node is not None and node.epoch == c
        pod = self._uids.get(a)
        if pod is None:
            return False
        if kind == POD_GONE:
            return True
        if kind == UNROUTE:
            return pod.route_epoch == c
        if pod.node is not None and self.nodes[pod.node].dead:
            return False  # the kubelet is gone
        return any(ct.name == b and ct.epoch == c for ct in pod.containers)

    def next_event_time(self) -> float | None:
        """When the world next changes by itself, or None when nothing is scheduled."""
        heap = self._heap
        while heap and not self._valid(*heap[0][2:]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def advance(self, t: float) -> None:
        """Run every event due at or before ``t`` (in time order), then schedule."""
        if t < self.now - 1e-9:
            raise ValueError(f"time goes forward only: at {self.now}s, asked for {t}s")
        heap = self._heap
        while heap and heap[0][0] <= t + 1e-9:
            et, _, kind, a, b, c = heapq.heappop(heap)
            self.now = max(self.now, et)
            if self._valid(kind, a, b, c):
                self._run_event(kind, a, b, c)
            if self._sched_dirty:
                self._schedule()
        self.now = max(self.now, t)
        if self._sched_dirty:
            self._schedule()

    def reschedule(self) -> None:
        """Try to place pending pods again: capacity changed outside this world (another
        replica's world sharing the same nodes freed GPUs)."""
        if self._pending:
            self._schedule()

    def _run_event(self, kind: int, a: str, b: str, c: int) -> None:
        now = self.now
        if kind == NODE_LOST:
            self._node_lost(self.nodes[a])
            return
        if kind == NODE_EVICT:
            for pod in self._pods_on(a):
                if not pod.terminating:
                    self._mark_deleted(pod, now, complete=False)
            return
        pod = self._uids[a]
        if kind == POD_GONE:
            self._remove(pod)
            return
        if kind == UNROUTE:
            pod.routed = False
            pod.unroute_at = None
            self._routed_cache = None
            self._changed(None)
            return
        ct = next(x for x in pod.containers if x.name == b)
        if kind == C_START:
            if ct.image in self.bad_images:
                self._pull_failed(pod, ct)
                return
            ct.state = "running"
            ct.started_once = True
            ct.status_image = ct.image
            ct.waiting_reason = None
            self._push(now + self.cluster.pod_ready_seconds, C_READY, pod.uid, ct.name, ct.epoch)
        elif kind == C_READY:
            ct.ready = True
        elif kind == C_PULL_ERROR:
            self._pull_failed(pod, ct)
            return
        elif kind == C_BACKOFF:
            ct.waiting_reason = "ImagePullBackOff"
            ct.waiting_message = f'Back-off pulling image "{ct.image}"'
        self._refresh(pod)

    def _add_pod(self, body: JSON) -> SimPod:
        pod = SimPod(body, self._new_uid("pod"), self._seq, self.now)
        pod.sched_reason = None
        self.pods[pod.name] = pod
        self._uids[pod.uid] = pod
        self._pending[pod.uid] = pod
        self._sched_dirty = True
        self._changed(pod)
        return pod

    def _remove(self, pod: SimPod) -> None:
        if self.pods.get(pod.name) is pod:
            del self.pods[pod.name]
        self._uids.pop(pod.uid, None)
        self._pending.pop(pod.uid, None)
        if pod.node is not None:
            self.nodes[pod.node].used -= pod.gpus
            self.gpus_in_use -= pod.gpus
            self._sched_dirty = True
            self._nodes_cache = None
        if pod.routed:
            pod.routed = False
            self._routed_cache = None
        self._changed(pod)

    def _mark_deleted(self, pod: SimPod, t: float, *, complete: bool = True) -> None:
        pod.deletion_at = t
        pod.deletion_timestamp = self._stamp(t + pod.grace_seconds)
        self._pending.pop(pod.uid, None)
        node = self.nodes.get(pod.node) if pod.node is not None else None
        if complete and (node is None or not node.dead):
            delay = 0.0 if pod.node is None else self.cluster.termination_seconds
            self._push(t + delay, POD_GONE, pod.uid)
        self._refresh(pod)

    def _pods_on(self, node: str) -> list[SimPod]:
        return [p for p in self.pods.values() if p.node == node]

    def pod(self, name: str) -> SimPod | None:
        """The pod of that name, if it exists."""
        return self.pods.get(name)

    @property
    def pod_count(self) -> int:
        """Pods that exist (Pending, Terminating and Failed ones included)."""
        return len(self.pods)

    def _node_lost(self, node: SimNode) -> None:
        node.ready = None
        node.not_ready_since = self._stamp(self.now)
        node.epoch += 1
        self._nodes_cache = None
        self._changed(None)
        for pod in self._pods_on(node.name):
            pod.node_lost = True
            self._refresh(pod)
        self._push(self.now + self.cluster.eviction_seconds, NODE_EVICT, node.name, "", node.epoch)

    def fail_node(self, name: str, now: float | None = None) -> None:
        """The node stops heartbeating now; it reads Unknown after the monitor grace period."""
        if now is not None:
            self.advance(now)
        node = self.nodes.get(name)
        if node is None:
            raise WorldError(f"no node {name!r} (nodes are node-0 .. node-{len(self.nodes) - 1})")
        if node.dead:
            return
        node.dead = True
        node.epoch += 1
        self._push(
            self.now + self.cluster.node_monitor_grace_seconds, NODE_LOST, name, "", node.epoch
        )

    def fail_pod(self, name: str, now: float | None = None) -> None:
        """The pod's main container exits with code 1 (reason Error); the pod turns Failed."""
        if now is not None:
            self.advance(now)
        pod = self.pods.get(name)
        if pod is None:
            raise WorldError(f"no pod {name!r}")
        if pod.node is not None and self.nodes[pod.node].dead:
            self.notes.append((self.now, f"failPod {name}: its node is lost, nothing is reported"))
            return
        if pod.failed:
            return
        main = pod.main_container()
        for ct in pod.containers:
            ct.epoch += 1
            ct.ready = False
            ct.state = "terminated"
            ct.started_once = True
            if ct is main:
                ct.term_reason, ct.term_exit = "Error", 1
            else:
                ct.term_reason, ct.term_exit = "Completed", 0
        pod.failed = True
        self._pending.pop(pod.uid, None)
        self._refresh(pod)

    def add_bad_image(self, image: str, now: float | None = None) -> None:
        """From now on, pulls of ``image`` fail; running containers are untouched."""
        if now is not None:
            self.advance(now)
        self.bad_images.add(image)

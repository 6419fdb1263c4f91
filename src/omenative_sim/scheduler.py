"""The simulated scheduler: binds Pending pods to Ready nodes with free GPUs.

Gangs (pods of one PodGroup) are placed all at once or not at all, once their PodGroup
exists and ``minMember`` pods are there; other pods one by one. Required node affinity,
nodeSelector and required pod (anti-)affinity are honoured, preferred node affinity
scores; among equals it bin-packs, then breaks ties with the world's seeded RNG.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from omenative_core.labels import (
    LABEL_POD_GROUP,
)
from omenative_sim.matching import node_fits, preferred_score, selector_matches
from omenative_sim.objects import SimNode, SimPod, pod_affinity_terms
from omenative_sim.state import _WorldState

__all__: list[str] = []


def _best_fit(gpus: int, free: Mapping[str, int], tie: Mapping[str, int]) -> str | None:
    """The node that fits ``gpus`` most tightly (ties: the seeded order), or None."""
    best: tuple[int, int] | None = None
    best_node: str | None = None
    for name, left in free.items():
        if left >= gpus:
            score = (left - gpus, tie[name])
            if best is None or score < best:
                best, best_node = score, name
    return best_node


class _Scheduler(_WorldState):
    """Placement of Pending pods (see the module docstring)."""

    def _schedule(self) -> None:
        self._sched_dirty = False
        if not self._pending:
            return
        gang = self.cluster.gang_scheduling and self.cluster.pod_group_crd
        order = list(self.nodes)
        self.rng.shuffle(order)
        tie = {name: i for i, name in enumerate(order)}
        done: set[str] = set()
        pending = list(self._pending.values())
        groups: dict[str, list[SimPod]] = {}
        if gang:
            for pod in pending:
                key = pod.labels.get(LABEL_POD_GROUP)
                if key:
                    groups.setdefault(key, []).append(pod)
        for pod in pending:
            if pod.uid in done:
                continue
            if pod.scheduling_gates:
                self._unschedulable(
                    [pod],
                    "SchedulingGated",
                    "Scheduling is blocked due to non-empty scheduling gates",
                )
                done.add(pod.uid)
                continue
            key = pod.labels.get(LABEL_POD_GROUP) if gang else None
            if key:
                members = groups[key]
                done.update(p.uid for p in members)
                self._schedule_gang(key, members, tie)
            else:
                done.add(pod.uid)
                placement = self._place([pod], tie)
                if placement is None:
                    self._unschedulable([pod], "Unschedulable", self._why([pod]))
                else:
                    self._bind(placement)

    def _schedule_gang(self, key: str, members: list[SimPod], tie: Mapping[str, int]) -> None:
        pg = self.pod_groups.get(key)
        if pg is None:
            self._unschedulable(members, "Unschedulable", f'podgroup "{key}" not found')
            return
        members = [p for p in members if not p.scheduling_gates]
        bound = sum(
            1
            for p in self.pods.values()
            if p.node is not None
            and not p.terminating
            and not p.failed
            and p.labels.get(LABEL_POD_GROUP) == key
        )
        if bound + len(members) < pg.min_member:
            self._unschedulable(
                members,
                "Unschedulable",
                f'pod group "{key}": {bound + len(members)} of minMember '
                f"{pg.min_member} pods exist",
            )
            return
        placement = self._place(sorted(members, key=SimPod.rank), tie)
        if placement is None:
            self._unschedulable(members, "Unschedulable", self._why(members, gang=key))
        else:
            self._bind(placement)

    def _why(self, pods: Sequence[SimPod], gang: str | None = None) -> str:
        need = sum(p.gpus for p in pods)
        ready = sum(1 for n in self.nodes.values() if n.ready is True and not n.dead)
        free = sum(n.capacity - n.used for n in self.nodes.values() if n.ready is True)
        what = f"gang {gang} ({len(pods)} pods, {need} GPUs)" if gang else f"{need} GPUs"
        return (
            f"0/{len(self.nodes)} nodes are available for {what}: {ready} Ready, "
            f"{free} GPUs free in total"
        )

    def _unschedulable(self, pods: Iterable[SimPod], reason: str, message: str) -> None:
        for pod in pods:
            if pod.sched_reason != reason or pod.sched_message != message:
                pod.sched_reason = reason
                pod.sched_message = message
                self._changed(pod)

    def _bind(self, placement: list[tuple[SimPod, str]]) -> None:
        for pod, node_name in placement:
            node = self.nodes[node_name]
            node.used += pod.gpus
            self.gpus_in_use += pod.gpus
            pod.node = node_name
            pod.sched_reason = None
            pod.sched_message = ""
            self._pending.pop(pod.uid, None)
            self._ip_seq += 1
            pod.ip = (
                f"10.{(self._ip_seq >> 16) & 255}.{(self._ip_seq >> 8) & 255}.{self._ip_seq & 255}"
            )
            for ct in pod.containers:
                self._start_container(pod, ct)
            self._refresh(pod)
        self._nodes_cache = None

    def _place(
        self, pods: Sequence[SimPod], tie: Mapping[str, int]
    ) -> list[tuple[SimPod, str]] | None:
        nodes = [n for n in self.nodes.values()
                 if n.ready is True and not n.dead and not n.cordoned]
        result = self._greedy(pods, nodes, tie)
        if result is not None:
            return result
        keys = sorted(
            {
                t.get("topologyKey", "")
                for p in pods
                for t in pod_affinity_terms(p.body, "podAffinity")
            }
            - {""}
        )
        for key in keys:  # gangs tied to one domain: try each domain whole
            domains = sorted({n.labels[key] for n in nodes if key in n.labels})
            for value in domains:
                subset = [n for n in nodes if n.labels.get(key) == value]
                result = self._greedy(pods, subset, tie)
                if result is not None:
                    return result
        return None

    def _greedy(
        self, pods: Sequence[SimPod], nodes: Sequence[SimNode], tie: Mapping[str, int]
    ) -> list[tuple[SimPod, str]] | None:
        """Place ``pods`` in order on ``nodes``, each on its best node; None when one does
        not fit."""
        free = {n.name: n.capacity - n.used for n in nodes}
        if sum(p.gpus for p in pods) > sum(free.values()):
            return None
        by_name = {n.name: n for n in nodes}
        placed: list[tuple[SimPod, str]] = []
        for pod in pods:
            if not pod.constrained:  # the common case: best fit, then the seeded tie order
                best_node = _best_fit(pod.gpus, free, tie)
            else:
                best_node = self._best_constrained(pod, free, by_name, tie, placed)
            if best_node is None:
                return None
            free[best_node] -= pod.gpus
            placed.append((pod, best_node))
        return placed

    def _best_constrained(
        self,
        pod: SimPod,
        free: Mapping[str, int],
        by_name: Mapping[str, SimNode],
        tie: Mapping[str, int],
        placed: Sequence[tuple[SimPod, str]],
    ) -> str | None:
        """The best node for a pod with a nodeName, affinity or nodeSelector: the most
        preferred, then the tightest fit, then the seeded tie order."""
        gpus = pod.gpus
        spec = pod.body.get("spec") or {}
        fixed = spec.get("nodeName")
        best: tuple[int, int, int] | None = None
        best_node: str | None = None
        for name, left in free.items():
            if left < gpus or (fixed and name != fixed):
                continue
            node = by_name[name]
            if not node_fits(spec, node):
                continue
            if pod.pod_affinity and not self._pod_affinity_ok(pod, node, placed):
                continue
            score = (-preferred_score(spec, node), left - gpus, tie[name])
            if best is None or score < best:
                best, best_node = score, name
        return best_node

    def _pod_affinity_ok(
        self, pod: SimPod, node: SimNode, placed: Sequence[tuple[SimPod, str]]
    ) -> bool:
        terms = pod.pod_affinity
        others: list[tuple[SimPod, str | None]] = [
            (p, p.node) for p in self.pods.values() if p.node is not None and not p.terminating
        ]
        others.extend(placed)
        for kind, term in terms:
            key = term.get("topologyKey", "")
            selector = term.get("labelSelector") or {}
            domain = node.labels.get(key)
            matched_any = False
            same_domain = False
            for other, other_node in others:
                if (
                    other is pod
                    or other_node is None
                    or not selector_matches(selector, other.labels)
                ):
                    continue
                matched_any = True
                if domain is not None and self.nodes[other_node].labels.get(key) == domain:
                    same_domain = True
                    break
            if kind == "podAffinity":
                if same_domain:
                    continue
                if not matched_any and selector_matches(selector, pod.labels):
                    continue  # the first pod of a set may go anywhere
                return False
            if same_domain:
                return False
        return True

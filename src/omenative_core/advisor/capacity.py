"""Free GPUs, topology domains and gang placement on a what-if copy of the cluster.

``Capacity`` is the advisor's scratch pad: free GPUs per schedulable node, which nodes
hold which Instance's pods, and the domains of a topology key. Moves are tried on it (an
Instance's pods released, its replacement placed elsewhere) before anything is
recommended, so every recommendation has been shown to fit. Placement is best fit: each
pod goes to the node whose free GPUs exceed its request by the least, which keeps whole
nodes whole. Every loop runs in sorted order, so the same view always gives the same
answer.

A trial is undone, not copied: every change is journalled, ``mark()`` returns a point in
the journal and ``rollback(mark)`` restores it, so trying a move costs what the move
touches, not the size of the cluster.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from omenative_core.advisor.model import ClusterView, DomainReport, GpuNode, InstanceKey

__all__ = ["Capacity", "node_is_sound"]


def node_is_sound(node: GpuNode, bad_conditions: Iterable[str]) -> str | None:
    """None for a node that may hold work, else the reason it should be emptied."""
    if not node.ready:
        return "UnhealthyNode"
    if any(c in node.conditions for c in bad_conditions):
        return "UnhealthyNode"
    if node.cordoned:
        return "Cordoned"
    return None


class Capacity:
    """Free GPUs per node and Instance placement, mutable for what-if moves."""

    def __init__(self, view: ClusterView, bad_conditions: Iterable[str]) -> None:
        bad = tuple(bad_conditions)
        self.nodes: dict[str, GpuNode] = {n.name: n for n in view.nodes}
        self.usable: frozenset[str] = frozenset(
            n.name for n in view.nodes
            if n.schedulable and node_is_sound(n, bad) is None and n.gpus > 0
        )
        self.free: dict[str, int] = {n.name: n.gpus for n in view.nodes}
        self.held: dict[InstanceKey, dict[str, int]] = defaultdict(dict)
        for pod in view.pods:
            if pod.node not in self.free:
                continue
            self.free[pod.node] -= pod.gpus
            if pod.owner is not None:
                on = self.held[pod.owner]
                on[pod.node] = on.get(pod.node, 0) + pod.gpus
        self.pod_gpus: dict[InstanceKey, list[int]] = defaultdict(list)
        self.by_node: dict[str, set[InstanceKey]] = defaultdict(set)
        for pod in view.pods:
            if pod.owner is not None and pod.node in self.free:
                self.pod_gpus[pod.owner].append(pod.gpus)
                self.by_node[pod.node].add(pod.owner)
        self._journal: list[tuple[str, str, int]] = []
        self._held_journal: list[tuple[InstanceKey, dict[str, int] | None]] = []
        self._domains: dict[str | None, dict[str | None, list[str]]] = {}

    # ------------------------------------------------------------------ journal

    def mark(self) -> tuple[int, int]:
        """A point to ``rollback`` to."""
        return len(self._journal), len(self._held_journal)

    def rollback(self, mark: tuple[int, int]) -> None:
        """Undo every change made since ``mark``."""
        free_mark, held_mark = mark
        while len(self._journal) > free_mark:
            _, node, old = self._journal.pop()
            self.free[node] = old
        while len(self._held_journal) > held_mark:
            key, old_held = self._held_journal.pop()
            self._set_held(key, old_held)

    def take(self, node: str, gpus: int) -> None:
        """Take ``gpus`` from ``node``'s free GPUs (negative gives them back)."""
        self._journal.append(("free", node, self.free[node]))
        self.free[node] -= gpus

    def _set_held(self, key: InstanceKey, on: dict[str, int] | None) -> None:
        for node in self.held.get(key, {}):
            self.by_node[node].discard(key)
        if on is None:
            self.held.pop(key, None)
            return
        self.held[key] = on
        for node in on:
            self.by_node[node].add(key)

    def _record_held(self, key: InstanceKey, on: dict[str, int] | None) -> None:
        old = self.held.get(key)
        self._held_journal.append((key, None if old is None else dict(old)))
        self._set_held(key, on)

    # ------------------------------------------------------------------ domains

    def domains(self, key: str | None) -> dict[str | None, list[str]]:
        """Usable nodes per value of node label ``key`` (one domain, None, without a key)."""
        if key not in self._domains:
            out: dict[str | None, list[str]] = defaultdict(list)
            for name in sorted(self.usable):
                if key is None:
                    out[None].append(name)
                elif key in self.nodes[name].labels:
                    out[self.nodes[name].labels[key]].append(name)
            self._domains[key] = dict(sorted(out.items(), key=lambda kv: str(kv[0])))
        return self._domains[key]

    def whole_free(self, names: Iterable[str]) -> list[str]:
        """The nodes among ``names`` that hold nothing at all."""
        return [n for n in names if n in self.usable and self.free[n] == self.nodes[n].gpus]

    def report(self, key: str | None) -> list[DomainReport]:
        """Free GPUs and fragmentation of each domain of ``key``."""
        out = []
        for value, names in self.domains(key).items():
            free = sum(max(self.free[n], 0) for n in names)
            whole = sum(self.nodes[n].gpus for n in self.whole_free(names))
            out.append(DomainReport(
                key=key, value=value, nodes=len(names), free_gpus=free,
                free_on_whole_nodes=whole,
                fragmentation=round(1 - whole / free, 4) if free else 0.0,
                largest_placeable_gang=whole,
            ))
        return out

    def free_whole_nodes(self) -> int:
        """Usable nodes with nothing on them, cluster-wide."""
        return len(self.whole_free(self.usable))

    def largest_placeable_gang(self, key: str | None) -> int:
        """GPUs on whole free nodes of the best domain of ``key``."""
        return max((r.largest_placeable_gang for r in self.report(key)), default=0)

    # ---------------------------------------------------------------- placement

    def place(self, pod_gpus: Iterable[int], candidates: Iterable[str],
              avoid: frozenset[str] = frozenset()) -> dict[str, int] | None:
        """Best-fit the pods onto ``candidates`` (minus ``avoid``); None when they do not fit.

        On success the GPUs are taken from the free map and the per-node use is returned.
        """
        names = [n for n in candidates if n in self.usable and n not in avoid]
        taken: dict[str, int] = {}
        start = self.mark()
        for gpus in sorted(pod_gpus, reverse=True):
            best = None
            for n in names:
                left = self.free[n] - gpus
                if left >= 0 and (best is None or left < best[0]):
                    best = (left, n)
                    if left == 0:
                        break
            if best is None:
                self.rollback(start)
                return None
            self.take(best[1], gpus)
            taken[best[1]] = taken.get(best[1], 0) + gpus
        return taken

    def place_in_one_domain(self, pod_gpus: tuple[int, ...], key: str | None,
                            avoid: frozenset[str] = frozenset()
                            ) -> tuple[str | None, dict[str, int]] | None:
        """Place a gang wholly inside one domain of ``key`` (the first that fits)."""
        for value, names in self.domains(key).items():
            taken = self.place(pod_gpus, names, avoid)
            if taken is not None:
                return value, taken
        return None

    def release(self, instance: InstanceKey) -> Mapping[str, int]:
        """Free the GPUs an Instance holds; return where they were."""
        on = dict(self.held.get(instance, {}))
        for node, gpus in on.items():
            self.take(node, -gpus)
        self._record_held(instance, None)
        return on

    def occupy(self, instance: InstanceKey, taken: Mapping[str, int]) -> None:
        """Record that ``instance`` now holds ``taken`` (already taken from the free map)."""
        self._record_held(instance, dict(taken))

    def instances_on(self, node: str) -> list[InstanceKey]:
        """The Instances with pods on ``node``, most GPUs there first."""
        here = [(self.held[key][node], key) for key in self.by_node.get(node, ())]
        return [key for _, key in sorted(here, key=lambda t: (-t[0], t[1]))]

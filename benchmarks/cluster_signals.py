"""What the cluster itself reported while a contender ran: the scheduler's Events on its pods,
and nodes losing Ready.

A run in which nodes lost Ready is not a figure: kube-controller-manager marks the pods on
such a node NotReady, a controller repairs or waits for them, and the timings measure the
flap, not the controller (the 10,000-pod re-run of 2026-12-07 lost KWOK nodes under load).
``NodeHealth`` watches every Node through the whole run and names the contender that was
running when one lost Ready, so the report can say which rows do not count.
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter

from watching import Tracker

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import EVENTS, NODES
from omenative_core.views import node_view_from_json


async def scheduling_events(kube: KubeClient, namespace: str) -> Counter[str]:
    """The scheduler's Events on the namespace's pods, by reason and message (what a gang
    waited for: ``FailedScheduling`` with the plugin's message), counted."""
    out: Counter[str] = Counter()
    with contextlib.suppress(ApiError):
        for ev in (await kube.list(EVENTS, namespace)).get("items") or ():
            if (ev.get("involvedObject") or {}).get("kind") == "Pod":  # names left out
                message = re.sub(r"[\w.-]+/[\w.-]+|node-\d+|bench-[\w-]+", "*",
                                 str(ev.get("message") or ""))[:110]
                out[f"{ev.get('reason')}: {message}"] += int(ev.get("count") or 1)
    return out


def node_ready(node: JSON) -> bool:
    """Ready as the manager reads it (``node_view_from_json``: the Ready condition True)."""
    return node_view_from_json(node).ready is True


class NodeHealth:
    """Every Node's Ready condition through the run; each loss of Ready is counted against
    the contender running then (``phase``). A node never yet Ready (still starting) is not
    a loss; a deleted node is."""

    def __init__(self, kube: KubeClient) -> None:
        self._tracker = Tracker(kube, NODES, None, node_ready, target=1 << 30,
                                on_event=self._see)
        self._ready: dict[str, bool] = {}
        self._phase: str | None = None
        self.lost: dict[str, Counter[str]] = {}  # phase -> node name -> times it lost Ready

    async def start(self) -> NodeHealth:
        """Open the watch (returns once it is open)."""
        await self._tracker.start()
        return self

    def phase(self, name: str | None) -> None:
        """From now on, a loss counts against ``name`` (None: between contenders)."""
        self._phase = name
        if name is not None:
            self.lost.setdefault(name, Counter())

    def _see(self, kind: str, node: JSON) -> None:
        name = str(node["metadata"]["name"])
        was = self._ready.get(name, False)
        now = kind != "DELETED" and node_ready(node)
        self._ready[name] = now
        if was and not now and self._phase is not None:
            self.lost[self._phase][name] += 1

    def line(self, phase: str) -> str:
        """``phase``'s nodes that lost Ready, and whether its figures count."""
        lost = self.lost.get(phase) or Counter()
        if not lost:
            return f"no node lost Ready ({len(self._ready)} nodes)"
        return (f"{len(lost)} of {len(self._ready)} nodes lost Ready ({lost.total()} times): "
                "NOT COMPARABLE, pods on them were marked NotReady")

    async def stop(self) -> None:
        """Close the watch."""
        await self._tracker.stop()

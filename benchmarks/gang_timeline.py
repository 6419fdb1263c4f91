"""Where a gang's time goes between its pods created and its gates open, from a pod watch.

The controller benchmark watches every pod it times; :class:`PodMilestones` (fed by that
watch) keeps, per pod, when the watch first showed each step a pod takes on the way to
Ready:

* ``created``: the pod exists (first watch event),
* ``scheduled``: ``spec.nodeName`` is set (kube-scheduler bound it; with native gang
  scheduling, once the gang's Workload and PodGroup let it),
* ``running``: phase ``Running`` (the kubelet stand-in started its containers),
* ``containers``: ``ContainersReady`` True (the stand-in's second write),
* ``gated``: the ``ome.io/serving`` condition True (the controller's gate patch),
* ``ready``: ``Ready`` True (the stand-in's write after the gate).

A gang is ready for its gates when its *last* pod has its containers ready, and its gates
are on their way once the *first* gate shows, so :func:`gang_steps` reduces the pods of a
gang to one time per step (the last pod for every step but the gate) and reports the
steps one after another: the scheduler's share, the stand-in's, the controller's (watch
delivery, its queue, the pass, the in-flight slot, the patch and its watch event back to
us) and the rest. All times are the benchmark's own monotonic clock, so the steps of the
manager and of the bare loop compare side by side in one run.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["STEPS", "PodMilestones", "gang_steps", "print_breakdown", "rates"]

JSON = Mapping[str, Any]
MILESTONES = ("created", "scheduled", "running", "containers", "gated", "ready")
STEPS = (
    ("created", "scheduled", "created -> scheduled (kube-scheduler)"),
    ("scheduled", "containers", "scheduled -> containers ready (kubelet stand-in)"),
    ("containers", "gated", "containers ready -> first gate (the controller)"),
    ("gated", "ready", "first gate -> all Ready (gates, stand-in)"),
)
"""(from, to, label) of each step of a gang, in order."""
SERVING_GATE = "ome.io/serving"


def _true(pod: JSON, type_: str) -> bool:
    return any(c.get("type") == type_ and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def _reached(pod: JSON) -> dict[str, bool]:
    status = pod.get("status") or {}
    return {
        "created": True,
        "scheduled": bool((pod.get("spec") or {}).get("nodeName")),
        "running": status.get("phase") == "Running",
        "containers": _true(pod, "ContainersReady"),
        "gated": _true(pod, SERVING_GATE),
        "ready": _true(pod, "Ready"),
    }


class PodMilestones:
    """Per pod, when a watch first showed each milestone (``see`` is the watch callback)."""

    def __init__(self, group_of: Callable[[JSON], str | None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.group_of = group_of
        self.clock = clock
        self.at: dict[str, dict[str, float]] = {}
        self.group: dict[str, str] = {}

    def see(self, kind: str, pod: JSON) -> None:
        """One watch event (ADDED, MODIFIED or DELETED) of a pod."""
        if kind == "DELETED":
            return
        meta = pod.get("metadata") or {}
        name = str(meta.get("name"))
        group = self.group_of(pod)
        if group is None:
            return
        self.group[name] = group
        now = self.clock()
        seen = self.at.setdefault(name, {})
        for step, done in _reached(pod).items():
            if done:
                seen.setdefault(step, now)

    def gangs(self) -> dict[str, dict[str, float]]:
        """Per gang, one time per milestone: the last pod's, the first pod's for the gate
        (absent when a pod of the gang never reached it)."""
        pods: dict[str, list[dict[str, float]]] = defaultdict(list)
        for name, seen in self.at.items():
            pods[self.group[name]].append(seen)
        out: dict[str, dict[str, float]] = {}
        for group, members in pods.items():
            times: dict[str, float] = {}
            for step in MILESTONES:
                got = [m[step] for m in members if step in m]
                if len(got) == len(members):
                    times[step] = max(got)
                if step == "gated" and got:
                    times[step] = min(got)
            out[group] = times
        return out


def gang_steps(gangs: Mapping[str, Mapping[str, float]]) -> dict[str, list[float]]:
    """Per step label, the sorted durations over the gangs that made that step."""
    out: dict[str, list[float]] = {}
    for start, end, label in STEPS:
        out[label] = sorted(g[end] - g[start] for g in gangs.values()
                            if start in g and end in g)
    return out


def _pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(len(values) * q))] if values else float("nan")


def rates(milestones: PodMilestones, t0: float, width: float = 5.0
          ) -> list[tuple[float, dict[str, int]]]:
    """Pods reaching each milestone per ``width`` seconds since ``t0`` (where the pipeline
    is throughput-bound, the counts of one step stay flat while the step before piles up)."""
    bins: dict[int, dict[str, int]] = defaultdict(lambda: dict.fromkeys(MILESTONES, 0))
    for seen in milestones.at.values():
        for step, at in seen.items():
            bins[int((at - t0) // width)][step] += 1
    return [(b * width, bins[b]) for b in range(max(bins, default=-1) + 1)]


def print_breakdown(columns: Iterable[tuple[str, PodMilestones]], t0s: Mapping[str, float]
                    ) -> None:
    """Per step, median / p90 seconds of each column (omenative, bare loop), then the
    pods reaching each milestone per 5 s of each column."""
    cols = list(columns)
    steps = {name: gang_steps(m.gangs()) for name, m in cols}
    print("  per gang, step by step (median / p90 s, from the benchmark's pod watch):")
    print(f"    {'':52}" + "".join(f"{name:>20}" for name, _ in cols))
    for _, _, label in STEPS:
        cells = []
        for name, _ in cols:
            v = steps[name][label]
            cells.append(f"{_pct(v, 0.5):9.2f} / {_pct(v, 0.9):6.2f}" if v else f"{'-':>20}")
        print(f"    {label:52}" + "".join(f"{c:>20}" for c in cells))
    for name, m in cols:
        print(f"  {name}: pods per 5 s reaching " + " / ".join(MILESTONES))
        for at, counts in rates(m, t0s[name]):
            print(f"    {at:5.0f} s " + " ".join(f"{counts[s]:5d}" for s in MILESTONES))

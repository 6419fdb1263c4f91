"""Instances and pods per revision over time, counted from the API server (not from the
manager's status): what a rollout did while its manager crashed, sample by sample.

A sample is one consistent pod list of the namespace (single-pod Instances: each pod's
``ome.io/instance-index`` is its Instance, its ``MODEL_REVISION`` its revision). ``problems``
reads the samples against the lifecycle guarantees a user can see: every Instance present
all the time and none extra (lost, duplicated), never two pods of one revision in an
Instance, the surge ceiling, and (with maxUnavailable 0) a Ready pod in every Instance.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import attrs

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import PODS
from omenative_core.labels import LABEL_INSTANCE_INDEX

__all__ = ["Census", "Sample", "census"]


@attrs.frozen
class Sample:
    """One pod list: each live pod as (Instance index, revision, Ready)."""

    at: float
    pods: tuple[tuple[str, str, bool], ...]

    def by_revision(self) -> dict[str, int]:
        """Live pods per revision."""
        out: dict[str, int] = {}
        for _, rev, _ready in self.pods:
            out[rev] = out.get(rev, 0) + 1
        return out

    def counts(self) -> str:
        """``rev-1 3 (3 Ready)  rev-2 1 (0 Ready)``."""
        parts = []
        for rev, n in sorted(self.by_revision().items()):
            ready = sum(1 for _, r, ok in self.pods if r == rev and ok)
            parts.append(f"{rev} {n} ({ready} Ready)")
        return "  ".join(parts)


def _sample(at: float, items: list[JSON]) -> Sample:
    pods = []
    for pod in items:
        if pod["metadata"].get("deletionTimestamp"):
            continue
        env = {v["name"]: v.get("value") for v in pod["spec"]["containers"][0].get("env") or ()}
        conds = {c["type"]: c["status"]
                 for c in (pod.get("status") or {}).get("conditions") or ()}
        pods.append((str(pod["metadata"].get("labels", {}).get(LABEL_INSTANCE_INDEX)),
                     str(env.get("MODEL_REVISION")), conds.get("Ready") == "True"))
    return Sample(at, tuple(sorted(pods)))


@attrs.define
class Census:
    """The samples taken so far, and what they break."""

    instances: int
    max_surge: int
    samples: list[Sample] = attrs.Factory(list)

    def problems(self) -> list[str]:
        """Every sample that lost, duplicated or over-surged an Instance, or left one with
        no Ready pod, in words (empty: none)."""
        want = {str(i) for i in range(self.instances)}
        out = []
        for s in self.samples:
            indexes = [i for i, _, _ in s.pods]
            revs = [(i, r) for i, r, _ in s.pods]
            if lost := want - set(indexes):
                out.append(f"{s.at:.1f} s: Instances {sorted(lost)} have no pod")
            if extra := set(indexes) - want:
                out.append(f"{s.at:.1f} s: Instances {sorted(extra)} beyond {self.instances}")
            if doubled := sorted({x for x in revs if revs.count(x) > 1}):
                out.append(f"{s.at:.1f} s: two pods of one revision in {doubled}")
            if len(s.pods) > self.instances + self.max_surge:
                out.append(f"{s.at:.1f} s: {len(s.pods)} pods, over the surge ceiling "
                           f"{self.instances} + {self.max_surge}")
            if unready := want - {i for i, _, ok in s.pods if ok}:
                out.append(f"{s.at:.1f} s: Instances {sorted(unready)} with no Ready pod")
        return out

    def timeline(self) -> str:
        """One line per sample that differs from the one before."""
        lines, last = [], ""
        for s in self.samples:
            if (text := s.counts()) != last:
                lines.append(f"{s.at:6.1f} s  {text}")
                last = text
        return "\n".join(lines)


@contextlib.asynccontextmanager
async def census(kube: KubeClient, namespace: str, *, instances: int, max_surge: int,
                 interval: float = 0.25) -> AsyncIterator[Census]:
    """Sample the namespace's pods every ``interval`` seconds while the block runs."""
    result = Census(instances, max_surge)
    loop = asyncio.get_running_loop()
    t0 = loop.time()

    async def run() -> None:
        while True:
            page = await kube.list(PODS, namespace)
            result.samples.append(_sample(loop.time() - t0, list(page.get("items") or ())))
            await asyncio.sleep(interval)

    task = asyncio.create_task(run())
    try:
        yield result
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

"""The manager's PlanMemos, kept the way decoded replicas are kept.

A ``PlanMemo`` (``omenative_core.incremental``) lets the next pass of a replica reuse its
last plan, or rederive only the Instances whose pods changed. It holds what the pass read
(the decoded spec and status, the pods, the plan, the per-Instance verdicts): about 25 KB
for a replica of 2 Instances with its decoded replica, so 2,500 small replicas kept ~62 MB
of memos (``benchmarks/bench_memory.py``) that each save well under a millisecond. A big
replica's memo saves a pass of tens to hundreds of milliseconds. So, as
``decoded.ReplicaDecoder`` keeps decoded replicas, ``PlanMemos`` keeps the memo of a
replica of ``ReplicaDecoder.LARGE``+ Instances for as long as it exists, and of smaller
ones only the ``ReplicaDecoder.SMALL_KEPT`` most recently planned. A replica whose memo
was dropped gets a full pass, which plans the same (``plan_incremental`` with no memo
equals ``plan``, property-tested).
"""

from __future__ import annotations

from omenative_controller.decoded import RecentSmall, ReplicaDecoder
from omenative_core.incremental import PlanMemo

__all__ = ["PlanMemos"]


class PlanMemos:
    """One ``PlanMemo`` per replica key: large replicas' always, small ones' most recent."""

    def __init__(self, *, large: int = ReplicaDecoder.LARGE,
                 small_kept: int = ReplicaDecoder.SMALL_KEPT) -> None:
        self.large = large
        self._memos: dict[str, PlanMemo] = {}
        self._recent = RecentSmall(small_kept)

    def get(self, key: str) -> PlanMemo | None:
        """The memo of the last pass of ``key``, if kept."""
        return self._memos.get(key)

    def put(self, key: str, memo: PlanMemo, instances: int) -> None:
        """Keep ``memo`` for ``key``, a replica of ``instances`` Instances."""
        self._memos[key] = memo
        for oldest in self._recent.put(key, large=instances >= self.large):
            self._memos.pop(oldest, None)

    def pop(self, key: str) -> PlanMemo | None:
        """Take ``key``'s memo out (the replica is gone, or its next pass takes it)."""
        self._recent.forget(key)
        return self._memos.pop(key, None)

    def __len__(self) -> int:
        return len(self._memos)

"""Decoded InferenceReplicas, kept by uid and resourceVersion.

Decoding an InferenceReplica with its per-Instance status rows is the costliest step of an
InferenceService pass at fleet scale (about 0.1 s for 10,000 rows, linear), while the
service and rollout layers that read the result cost well under a millisecond
(``benchmarks/bench_service.py``). A pass used to decode each replica up to three times, and
every pass decoded again what had not changed. ``ReplicaDecoder`` decodes an object once per
resourceVersion and hands the same immutable ``InferenceReplica`` to every reader.

What it keeps is bounded by what decoding costs: a replica of at least ``LARGE`` Instances
is kept for as long as it exists (its decode is the costly one), while small ones (about
0.2 ms to decode, ~18 KB each decoded) are kept for the ``SMALL_KEPT`` most recently used:
2,500 small replicas kept decoded cost ~46 MB, 256 of them ~4 MB, 64 of them ~1 MB
(``benchmarks/bench_memory.py``; ``memos.PlanMemos`` keeps the plan memos alike).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Iterator, Mapping
from typing import Any, Protocol

from omenative_core import codec
from omenative_core.model import spec as model_spec
from omenative_core.model import status as model_status
from omenative_core.model.spec import InferenceReplica
from omenative_core.status import columnar
from omenative_core.status.wire import replica_from_json

__all__ = ["LiveReplicas", "ReplicaDecoder"]


class LiveReplicas(Protocol):
    """What ``trim`` reads of an informer: its size and its (key, object) pairs."""

    def __len__(self) -> int: ...

    def items(self) -> Iterator[tuple[str, Mapping[str, Any]]]: ...


def _identity(obj: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(uid, resourceVersion), or (None, None) when either is missing."""
    meta = obj.get("metadata") or {}
    uid, rv = meta.get("uid"), meta.get("resourceVersion")
    if isinstance(uid, str) and isinstance(rv, str):
        return uid, rv
    return None, None


class RecentSmall:
    """Which small entries a size-bounded cache keeps: a large entry stays for as long as
    it exists, small ones only the ``bound`` most recently used. ``ReplicaDecoder`` and
    ``memos.PlanMemos`` share this rule; the cache drops the keys ``put`` returns."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self._small: OrderedDict[str, None] = OrderedDict()  # keys, least recent first

    def used(self, key: str) -> None:
        """``key`` was read: a small one becomes the most recent."""
        if key in self._small:
            self._small.move_to_end(key)

    def put(self, key: str, *, large: bool) -> list[str]:
        """``key`` was stored; return the small keys now over the bound, oldest first."""
        if large:
            self._small.pop(key, None)
            return []
        self._small[key] = None
        self._small.move_to_end(key)
        over = len(self._small) - self.bound
        return [self._small.popitem(last=False)[0] for _ in range(max(over, 0))]

    def forget(self, key: str) -> None:
        """``key`` left the cache."""
        self._small.pop(key, None)


class ReplicaDecoder:
    """``replica_from_json`` with a cache keyed by ``metadata.uid``, valid for one
    ``metadata.resourceVersion`` (the API server changes it on every write, so a hit is
    the same object). Objects without either are decoded every time. Raises ``CodecError``
    like ``replica_from_json``; failures are not cached."""

    SLACK = 64
    """Deleted replicas tolerated in the cache before ``trim`` scans."""
    LARGE = 32
    """Instances from which a decoded replica is kept for as long as it exists."""
    SMALL_KEPT = 64
    """Smaller decoded replicas kept, the most recently used (as many as the manager's
    default workers: a burst of passes over small replicas finds theirs)."""

    def __init__(self, *, max_decoded: int = 20000) -> None:
        # cattrs generates its decode and encode code for the model on first use, 30-40 ms
        # in all: at construction (the manager's start), not in the first passes on the loop
        codec.warm(model_spec, model_status, columnar)
        self.max_decoded = max_decoded
        self._cache: dict[str, tuple[str, InferenceReplica]] = {}
        self._recent = RecentSmall(self.SMALL_KEPT)
        self.decodes = 0
        """Objects actually decoded (cache misses), for tests and metrics."""

    def decode(self, obj: Mapping[str, Any]) -> InferenceReplica:
        """The decoded ``obj``, from the cache when its resourceVersion is the one held."""
        hit = self.cached(obj)
        if hit is not None:
            return hit
        return self.keep(obj, replica_from_json(obj, max_decoded=self.max_decoded))

    def cached(self, obj: Mapping[str, Any]) -> InferenceReplica | None:
        """The decoded ``obj`` if the cache holds its resourceVersion, else None (no decode:
        the caller may decode elsewhere, e.g. in a worker thread, and ``keep`` the result)."""
        uid, rv = _identity(obj)
        if uid is not None:
            hit = self._cache.get(uid)
            if hit is not None and hit[0] == rv:
                self._recent.used(uid)
                return hit[1]
        return None

    def keep(self, obj: Mapping[str, Any], replica: InferenceReplica) -> InferenceReplica:
        """Cache ``replica`` as ``obj`` decoded (counted in ``decodes``), and return it."""
        self.decodes += 1
        uid, rv = _identity(obj)
        if uid is not None and rv is not None:
            self._keep(uid, rv, replica)
        return replica

    def _keep(self, uid: str, rv: str, replica: InferenceReplica) -> None:
        self._cache[uid] = (rv, replica)
        for oldest in self._recent.put(uid, large=(replica.spec.replicas or 0) >= self.LARGE):
            self._cache.pop(oldest, None)

    def retain(self, uids: Collection[str]) -> None:
        """Forget every replica whose uid is not in ``uids`` (deleted ones)."""
        for uid in [u for u in self._cache if u not in uids]:
            del self._cache[uid]
            self._recent.forget(uid)

    def trim(self, live: LiveReplicas) -> None:
        """Forget replicas no longer in ``live`` (the informer's cache), once the cache holds
        ``SLACK`` more than it: deleted replicas go without a scan on every pass."""
        if len(self._cache) > len(live) + self.SLACK:
            self.retain({str((obj.get("metadata") or {}).get("uid")) for _k, obj in live.items()})

    def __len__(self) -> int:
        return len(self._cache)

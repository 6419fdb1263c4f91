"""Decoded InferenceReplicas, kept by uid and resourceVersion.

Decoding an InferenceReplica with its per-Instance status rows is the costliest step of an
InferenceService pass at fleet scale (about 0.1 s for 10,000 rows, linear), while the
service and rollout layers that read the result cost well under a millisecond
(``benchmarks/bench_service.py``). A pass used to decode each replica up to three times, and
every pass decoded again what had not changed. ``ReplicaDecoder`` decodes an object once per
resourceVersion and hands the same immutable ``InferenceReplica`` to every reader.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Any, Protocol

from omenative_core.model.spec import InferenceReplica
from omenative_core.status.wire import replica_from_json

__all__ = ["LiveReplicas", "ReplicaDecoder"]


class LiveReplicas(Protocol):
    """What ``trim`` reads of an informer: its size and its (key, object) pairs."""

    def __len__(self) -> int: ...

    def items(self) -> Iterator[tuple[str, Mapping[str, Any]]]: ...


class ReplicaDecoder:
    """``replica_from_json`` with a cache keyed by ``metadata.uid``, valid for one
    ``metadata.resourceVersion`` (the API server changes it on every write, so a hit is
    the same object). Objects without either are decoded every time. Raises ``CodecError``
    like ``replica_from_json``; failures are not cached."""

    SLACK = 64
    """Deleted replicas tolerated in the cache before ``trim`` scans."""

    def __init__(self, *, max_decoded: int = 20000) -> None:
        self.max_decoded = max_decoded
        self._cache: dict[str, tuple[str, InferenceReplica]] = {}
        self.decodes = 0
        """Objects actually decoded (cache misses), for tests and metrics."""

    def decode(self, obj: Mapping[str, Any]) -> InferenceReplica:
        """The decoded ``obj``, from the cache when its resourceVersion is the one held."""
        meta = obj.get("metadata") or {}
        uid, rv = meta.get("uid"), meta.get("resourceVersion")
        if isinstance(uid, str) and isinstance(rv, str):
            hit = self._cache.get(uid)
            if hit is not None and hit[0] == rv:
                return hit[1]
        self.decodes += 1
        replica = replica_from_json(obj, max_decoded=self.max_decoded)
        if isinstance(uid, str) and isinstance(rv, str):
            self._cache[uid] = (rv, replica)
        return replica

    def retain(self, uids: Collection[str]) -> None:
        """Forget every replica whose uid is not in ``uids`` (deleted ones)."""
        for uid in [u for u in self._cache if u not in uids]:
            del self._cache[uid]

    def trim(self, live: LiveReplicas) -> None:
        """Forget replicas no longer in ``live`` (the informer's cache), once the cache holds
        ``SLACK`` more than it: deleted replicas go without a scan on every pass."""
        if len(self._cache) > len(live) + self.SLACK:
            self.retain({str((obj.get("metadata") or {}).get("uid")) for _k, obj in live.items()})

    def __len__(self) -> int:
        return len(self._cache)

"""ReplicaDecoder: one decode per InferenceReplica resourceVersion, the same result reused."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from omenative_controller.decoded import ReplicaDecoder
from omenative_core.codec import CodecError


def replica(rv: str | None, uid: str | None = "u-1", replicas: int = 2) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "chat-engine", "namespace": "llm"}
    if uid is not None:
        meta["uid"] = uid
    if rv is not None:
        meta["resourceVersion"] = rv
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "metadata": meta,
            "spec": {"component": "engine", "replicas": replicas,
                     "runners": [{"name": "default", "template": {"spec": {"containers": [
                         {"name": "ome-container", "image": "x:1"}]}}}]},
            "status": {"replicas": replicas, "readyReplicas": 1}}


def test_an_unchanged_object_is_decoded_once_and_a_new_version_again() -> None:
    d = ReplicaDecoder()
    first = d.decode(replica("10"))
    assert d.decode(replica("10")) is first
    assert d.decodes == 1
    newer = d.decode(replica("11", replicas=3))
    assert d.decodes == 2 and newer.spec.replicas == 3
    assert newer.status is not None and newer.status.ready_replicas == 1


def test_objects_without_uid_or_resource_version_are_never_cached() -> None:
    d = ReplicaDecoder()
    d.decode(replica(None))
    d.decode(replica(None))
    d.decode(replica("5", uid=None))
    assert d.decodes == 3 and len(d) == 0


def test_retain_forgets_deleted_replicas_and_errors_are_not_cached() -> None:
    d = ReplicaDecoder()
    d.decode(replica("1", uid="a"))
    d.decode(replica("1", uid="b"))
    d.retain({"b"})
    assert len(d) == 1
    bad = replica("2", uid="c")
    del bad["spec"]
    for _ in range(2):
        with pytest.raises(CodecError):
            d.decode(bad)
    assert len(d) == 1


def test_trim_scans_only_once_the_cache_outgrows_the_live_replicas() -> None:
    d = ReplicaDecoder()
    for i in range(ReplicaDecoder.SLACK + 2):  # large ones: kept whatever SMALL_KEPT is
        d.decode(replica("1", uid=f"u{i}", replicas=ReplicaDecoder.LARGE))
    class Live:
        """An informer's cache as trim reads it; counts the scans."""

        def __init__(self, uids: list[str]) -> None:
            self.objs = {u: {"metadata": {"uid": u}} for u in uids}
            self.scans = 0

        def __len__(self) -> int:
            return len(self.objs)

        def items(self) -> Iterator[tuple[str, Mapping[str, Any]]]:
            self.scans += 1
            return iter(self.objs.items())

    everyone = Live([f"u{i}" for i in range(ReplicaDecoder.SLACK + 2)])
    d.trim(everyone)  # as many live as cached: nothing to forget, no scan
    assert everyone.scans == 0 and len(d) == ReplicaDecoder.SLACK + 2
    one = Live(["u0"])
    d.trim(one)
    assert one.scans == 1 and len(d) == 1


def test_small_replicas_are_kept_for_the_most_recently_used_only_large_ones_always() -> None:
    d = ReplicaDecoder()
    large = d.decode(replica("1", uid="big", replicas=ReplicaDecoder.LARGE))
    first = d.decode(replica("1", uid="s0"))
    for i in range(1, ReplicaDecoder.SMALL_KEPT):
        d.decode(replica("1", uid=f"s{i}"))
    assert d.decode(replica("1", uid="s0")) is first  # used again: now the most recent
    d.decode(replica("1", uid="one-more"))  # pushes out the least recent small one, s1
    assert len(d) == ReplicaDecoder.SMALL_KEPT + 1
    before = d.decodes
    assert d.decode(replica("1", uid="s0")) is first
    assert d.decode(replica("1", uid="big", replicas=ReplicaDecoder.LARGE)) is large
    assert d.decodes == before
    d.decode(replica("1", uid="s1"))
    assert d.decodes == before + 1

"""Packed cache objects read back as the JSON they were, and views built on them still work."""

from __future__ import annotations

from typing import Any

from omenative_controller.cache_views import replica_view, revision_view
from omenative_controller.packed import PackedJSON
from omenative_core.revisions import pairing_from_revision, runners_from_revision


def test_a_packed_object_reads_back_equal_and_hands_out_fresh_copies() -> None:
    obj = {"kind": "X", "spec": {"runners": [{"name": "a", "size": 2}]}, "empty": {}, "n": 3}
    packed = PackedJSON(obj)
    assert packed == obj and dict(packed) == obj and packed == PackedJSON(obj)
    got = packed["spec"]
    got["runners"].clear()  # a caller changing what it read changes no cached state
    assert packed["spec"] == {"runners": [{"name": "a", "size": 2}]}
    assert packed != PackedJSON({**obj, "n": 4}) and "spec" in packed and len(packed) == 4


def test_the_replica_view_drops_managed_fields_and_keeps_the_rest() -> None:
    obj: dict[str, Any] = {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
        "metadata": {"name": "r", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                     "managedFields": [{"manager": "m"}]},
        "spec": {"replicas": 2}, "status": {"readyReplicas": 2},
    }
    view = replica_view(obj)
    assert view["metadata"] == {"name": "r", "namespace": "ns", "uid": "u",
                                "resourceVersion": "7"}
    assert view.get("spec") == {"replicas": 2} and view.get("status") == {"readyReplicas": 2}


def test_a_packed_revision_still_gives_the_core_its_runners_and_pairing() -> None:
    obj = {"metadata": {"name": "r-abc", "uid": "u", "labels": {"ome.io/inferencereplica": "r"}},
           "revision": 3,
           "data": {"runners": [{"name": "leader", "size": 1, "template": {"spec": {}}}],
                    "pairingProtocol": "nixl"}}
    view = revision_view(obj)
    assert isinstance(view.data, PackedJSON) and view.revision == 3
    assert [r.name for r in runners_from_revision(view)] == ["leader"]
    assert pairing_from_revision(view) == "nixl"

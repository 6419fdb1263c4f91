"""The watch cache's indexes follow each object (``Informer.index_keys``/``by_index``).

The manager finds a replica's pods by the ``owner`` index and a node's pods by the ``node``
index: a wrong bucket wakes the wrong replica after a node change, or hides a pod from its
replica. The informer keeps no copy of each object's index values (at 10,000 pods that copy
cost ~4 MB): it computes the old view's values again when the view changes, so these tests
pin that the buckets still move with binding, relabelling, replacement and deletion.
"""

from __future__ import annotations

from typing import Any, cast

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.informer import Informer
from omenative_controller.kube.resources import PODS


def _pod(name: str, rv: int, *, owner: str | None = "chat", node: str | None = None,
         uid: str = "u1") -> JSON:
    labels = {"ome.io/inferencereplica": owner} if owner else {}
    return {"metadata": {"name": name, "namespace": "llm", "uid": uid, "labels": labels,
                         "resourceVersion": str(rv)},
            "spec": {"nodeName": node} if node else {}}


def _owner(namespace: str | None, view: Any) -> list[str]:
    owner = view["metadata"]["labels"].get("ome.io/inferencereplica")
    return [f"{namespace}/{owner}"] if owner else []


def _node(_: str | None, view: Any) -> list[str]:
    return [view["spec"].get("nodeName") or ""]  # "" is not indexed


def _informer() -> Informer[JSON]:
    return Informer(cast(KubeClient, None), PODS, dict,
                    indexers={"owner": _owner, "node": _node})


def _buckets(inf: Informer[JSON]) -> dict[str, dict[str, set[str]]]:
    return {name: {v: set(keys) for v, keys in idx.items()} for name, idx in
            inf._indices.items()}


def test_a_pod_moves_between_node_buckets_as_it_binds_and_moves() -> None:
    inf = _informer()
    inf._apply("ADDED", _pod("p0", 1))
    assert inf.index_keys("owner", "llm/chat") == ["llm/p0"]
    assert _buckets(inf)["node"] == {}, "an unbound pod is on no node"
    inf._apply("MODIFIED", _pod("p0", 2, node="n1"))
    assert inf.index_keys("node", "n1") == ["llm/p0"]
    inf._apply("MODIFIED", _pod("p0", 3, node="n2", uid="u2"))  # re-created elsewhere
    assert inf.index_keys("node", "n1") == []
    assert inf.index_keys("node", "n2") == ["llm/p0"]
    assert _buckets(inf)["node"] == {"n2": {"llm/p0"}}, "the emptied bucket is gone"


def test_a_relabelled_pod_changes_owner_and_a_deleted_one_leaves_no_bucket() -> None:
    inf = _informer()
    inf._apply("ADDED", _pod("p0", 1, node="n1"))
    inf._apply("ADDED", _pod("p1", 1, node="n1"))
    inf._apply("MODIFIED", _pod("p0", 2, owner="other", node="n1"))
    assert inf.index_keys("owner", "llm/chat") == ["llm/p1"]
    assert inf.index_keys("owner", "llm/other") == ["llm/p0"]
    inf._apply("MODIFIED", _pod("p1", 2, owner=None, node="n1"))  # label taken off
    assert inf.index_keys("owner", "llm/chat") == []
    assert [p["metadata"]["name"] for p in inf.by_index("node", "n1")] == ["p0", "p1"]
    inf._apply("DELETED", _pod("p0", 3, owner="other", node="n1"))
    inf._apply("DELETED", _pod("p1", 3, owner=None, node="n1"))
    assert _buckets(inf) == {"owner": {}, "node": {}}


def test_an_expected_create_that_did_not_happen_is_taken_out_of_its_buckets() -> None:
    inf = _informer()
    obj = _pod("p0", 0, node="n1")
    view = inf.expect(obj)
    assert inf.index_keys("owner", "llm/chat") == ["llm/p0"]
    inf.unexpect(obj, view)
    assert _buckets(inf) == {"owner": {}, "node": {}}

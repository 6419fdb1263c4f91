"""The watch cache never resurrects what the watch deleted, and a gone namespace ends a key.

A write's answer can arrive after the watch already reported the object deleted (a namespace
deleted right after its InferenceService). Written back into the cache, it would bring the
object back, and the manager would retry creates in a namespace that no longer exists.
"""

from __future__ import annotations

from typing import Any, cast

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.informer import Informer
from omenative_controller.kube.resources import INFERENCE_REPLICAS
from omenative_controller.kube.workqueue import WorkQueue


def _obj(name: str, rv: int, uid: str = "u1", namespace: str = "llm") -> JSON:
    return {"metadata": {"name": name, "namespace": namespace, "uid": uid,
                         "resourceVersion": str(rv)}, "spec": {"rv": rv}}


def _informer(changes: list[tuple[Any, Any]] | None = None) -> Informer[JSON]:
    def on_change(_ns: str | None, old: Any, new: Any) -> None:
        if changes is not None:
            changes.append((old, new))

    return Informer(cast(KubeClient, None), INFERENCE_REPLICAS, dict, on_change=on_change)


def test_a_write_answer_after_the_watch_delete_does_not_resurrect_the_object() -> None:
    changes: list[tuple[Any, Any]] = []
    inf = _informer(changes)
    inf._apply("ADDED", _obj("chat", 10))
    inf._apply("DELETED", _obj("chat", 12))
    inf.upsert_if_newer(_obj("chat", 11))  # our status write, answered late
    assert inf.get("llm/chat") is None
    assert inf.deleted("llm/chat")
    assert [new is None for _, new in changes] == [False, True], "no add after the delete"


def test_the_same_uid_is_never_resurrected_even_with_a_newer_resourceversion() -> None:
    inf = _informer()
    inf._apply("ADDED", _obj("chat", 10))
    inf._apply("DELETED", _obj("chat", 12))
    inf.upsert_if_newer(_obj("chat", 13))
    assert inf.get("llm/chat") is None


def test_a_delete_the_cache_never_saw_still_blocks_the_write_back() -> None:
    inf = _informer()
    inf._apply("DELETED", _obj("chat", 12))
    inf.upsert_if_newer(_obj("chat", 11))
    assert inf.get("llm/chat") is None


def test_a_new_object_under_the_same_name_is_written_through() -> None:
    inf = _informer()
    inf._apply("ADDED", _obj("chat", 10))
    inf._apply("DELETED", _obj("chat", 12))
    inf.upsert_if_newer(_obj("chat", 20, uid="u2"))  # we re-created it
    got = inf.get("llm/chat")
    assert got is not None and got["metadata"]["uid"] == "u2"
    assert not inf.deleted("llm/chat")


def test_the_watch_adding_the_name_again_clears_the_tombstone() -> None:
    inf = _informer()
    inf._apply("ADDED", _obj("chat", 10))
    inf._apply("DELETED", _obj("chat", 12))
    inf._apply("ADDED", _obj("chat", 14, uid="u2"))
    inf.upsert_if_newer(_obj("chat", 15, uid="u2"))
    got = inf.get("llm/chat")
    assert got is not None and got["metadata"]["resourceVersion"] == "15"


def test_write_through_still_skips_an_older_answer() -> None:
    inf = _informer()
    inf._apply("ADDED", _obj("chat", 10))
    inf.upsert_if_newer(_obj("chat", 15))
    inf.upsert_if_newer(_obj("chat", 14))
    got = inf.get("llm/chat")
    assert got is not None and got["metadata"]["resourceVersion"] == "15"


def test_a_missing_or_terminating_namespace_is_recognised() -> None:
    missing = ApiError.from_response(404, {
        "kind": "Status", "reason": "NotFound", "message": 'namespaces "llm" not found',
        "details": {"name": "llm", "kind": "namespaces"}})
    terminating = ApiError.from_response(403, {
        "kind": "Status", "reason": "Forbidden",
        "message": 'pods "x" is forbidden: unable to create new content in namespace llm '
                   "because it is being terminated",
        "details": {"name": "x", "kind": "pods",
                    "causes": [{"reason": "NamespaceTerminating", "field": "llm"}]}})
    object_missing = ApiError.from_response(404, {
        "kind": "Status", "reason": "NotFound", "message": 'pods "x" not found',
        "details": {"name": "x", "kind": "pods"}})
    assert missing.namespace_gone and terminating.namespace_gone
    assert not object_missing.namespace_gone
    assert not ApiError(403, "Forbidden", "exceeded quota").namespace_gone


async def test_discard_takes_a_waiting_key_out_of_the_queue_but_not_one_in_flight() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    q.add_rate_limited("c")
    q.discard("a")
    q.discard("c")
    assert not q.holds("a") and not q.holds("c")
    assert len(q) == 1
    assert await q.get() == "b"
    q.add("b")  # changed during the pass: the change must still be looked at
    q.discard("b")
    q.done("b")
    assert q.holds("b") and await q.get() == "b"


class _ListOnce:
    """A client whose LIST answers one page, as an API server would have before our write."""

    def __init__(self, items: list[JSON], rv: int) -> None:
        self.page = {"metadata": {"resourceVersion": str(rv)}, "items": items}

    async def list(self, *_args: Any, **_kwargs: Any) -> JSON:
        return self.page


def _listing(items: list[JSON], rv: int) -> Informer[JSON]:
    return Informer(cast(KubeClient, _ListOnce(items, rv)), INFERENCE_REPLICAS, dict)


async def test_a_relist_taken_before_our_write_does_not_undo_it() -> None:
    # The LIST's snapshot (rv 20) predates our patch (rv 21) written through meanwhile:
    # the pass after the re-list must still see the patch (a serving gate we set True).
    inf = _listing([_obj("chat", 20)], rv=20)
    inf._apply("ADDED", _obj("chat", 10))
    inf.upsert_if_newer(_obj("chat", 21))
    await inf._list("llm")
    got = inf.get("llm/chat")
    assert got is not None and got["metadata"]["resourceVersion"] == "21"


async def test_a_relist_taken_before_our_create_does_not_drop_the_new_object() -> None:
    inf = _listing([], rv=20)
    inf.upsert_if_newer(_obj("chat", 21))  # created after the LIST's snapshot
    await inf._list("llm")
    assert inf.get("llm/chat") is not None
    assert not inf.deleted("llm/chat")


async def test_a_relist_still_drops_what_was_deleted_before_its_snapshot() -> None:
    inf = _listing([], rv=20)
    inf._apply("ADDED", _obj("chat", 10))
    await inf._list("llm")
    assert inf.get("llm/chat") is None
    assert inf.deleted("llm/chat")


def test_a_watch_event_older_than_our_write_through_does_not_regress_the_cache() -> None:
    # After a re-list at rv 20, the watch replays rv 20..: our write at 21 is already cached.
    inf = _informer()
    inf._apply("ADDED", _obj("chat", 10))
    inf.upsert_if_newer(_obj("chat", 21))
    inf._apply("MODIFIED", _obj("chat", 20))
    got = inf.get("llm/chat")
    assert got is not None and got["metadata"]["resourceVersion"] == "21"
    inf._apply("MODIFIED", _obj("chat", 22))
    got = inf.get("llm/chat")
    assert got is not None and got["metadata"]["resourceVersion"] == "22"

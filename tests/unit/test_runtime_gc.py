"""Runtime-revision garbage collection as OME v1.3 describes it (ome-docs
``concepts/runtimes/runtime-revisions.md`` "Garbage collection" and
``guides/operate-ome/configure-the-controller.md`` "Tune runtime-revision garbage
collection", at 7f641a34): per runtime name the ten newest and every revision in use are
kept, others are marked ``ome.io/gc-eligible-since`` and deleted 24 hours later."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from omenative_controller.kube.errors import ApiError
from omenative_controller.runtime_gc import RevisionCollector
from omenative_core.service.runtime_gc import collect, revisions_in_use

NOW = datetime(2026, 9, 29, 12, 0, 0, tzinfo=UTC)


def rev(name: str, runtime: str, minute: int, marked: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name, "namespace": "ome", "uid": f"uid-{name}",
        "labels": {"ome.io/runtime-of": runtime},
        "creationTimestamp": (NOW - timedelta(days=2) + timedelta(minutes=minute)).strftime(
            "%Y-%m-%dT%H:%M:%SZ")}
    if marked is not None:
        meta["annotations"] = {"ome.io/gc-eligible-since": marked}
    return {"metadata": meta, "data": {"spec": {}}}


def isvc(revision: str | None = None, pinned: str | None = None) -> dict[str, Any]:
    runtime: dict[str, Any] = {"name": "srt", "autoSync": False}
    if revision is not None:
        runtime["revision"] = revision
    return {"metadata": {"name": "chat", "namespace": "prod"}, "spec": {"runtime": runtime},
            "status": {"pinnedRevisionName": pinned} if pinned else {}}


TWELVE = [rev(f"cr-srt-{i:08x}", "srt", i) for i in range(12)]


def test_the_ten_newest_per_runtime_name_are_kept_the_rest_marked() -> None:
    other = [rev("cr-other-00000001", "other", 0)]
    plan = collect([*TWELVE, *other], [], NOW)
    assert plan.mark == ("cr-srt-00000000", "cr-srt-00000001")
    assert plan.delete == () and plan.stamp == "2026-09-29T12:00:00Z"


def test_revisions_in_use_are_never_marked_or_deleted() -> None:
    old = "2026-09-27T00:00:00Z"
    revs = [rev("cr-srt-00000000", "srt", 0, old), rev("cr-srt-00000001", "srt", 1, old),
            *TWELVE[2:]]
    users = [isvc(revision="cr-srt-00000000"), isvc(pinned="cr-srt-00000001")]
    assert revisions_in_use(users) == {"cr-srt-00000000", "cr-srt-00000001"}
    plan = collect(revs, users, NOW)
    assert plan.delete == () and plan.mark == ()
    assert plan.unmark == ("cr-srt-00000000", "cr-srt-00000001")  # kept again: unmarked


def test_a_marked_revision_is_deleted_only_after_the_grace_period() -> None:
    revs = [rev("cr-srt-00000000", "srt", 0, "2026-09-28T12:00:00Z"),
            rev("cr-srt-00000001", "srt", 1, "2026-09-28T12:00:01Z"), *TWELVE[2:]]
    plan = collect(revs, [], NOW)
    assert plan.delete == ("cr-srt-00000000",)  # 24h since the mark; the other is 1s short
    assert collect(revs, [], NOW, grace=timedelta(hours=72)).delete == ()


def test_retention_is_a_setting_and_a_bad_mark_restarts_the_grace() -> None:
    revs = [rev("cr-srt-00000000", "srt", 0, "yesterday"), rev("cr-srt-00000001", "srt", 1)]
    plan = collect(revs, [], NOW, retention=0)
    assert plan.mark == ("cr-srt-00000000", "cr-srt-00000001") and plan.delete == ()
    assert collect(revs, [], NOW, retention=2).unmark == ("cr-srt-00000000",)


class Cache:
    def __init__(self, objs: list[dict[str, Any]]) -> None:
        self.objs = {f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}": o
                     for o in objs}
        self.synced = asyncio.Event()
        self.synced.set()

    def items(self) -> list[tuple[str, dict[str, Any]]]:
        return list(self.objs.items())

    def get(self, key: str) -> dict[str, Any] | None:
        return self.objs.get(key)


class Client:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def patch(self, res: Any, name: str, body: Any, namespace: str,
                    **kw: Any) -> None:
        self.calls.append(("patch", name, body, namespace))

    async def delete(self, res: Any, name: str, namespace: str, **kw: Any) -> None:
        self.calls.append(("delete", name, namespace, kw["uid"]))


async def test_the_collector_writes_marks_and_deletes_with_the_uid_as_precondition() -> None:
    revs = [rev("cr-srt-00000000", "srt", 0, "2026-09-27T00:00:00Z"), *TWELVE[1:]]
    client, isvcs = Client(), Cache([isvc(pinned="cr-srt-00000005")])
    gc = RevisionCollector(client, Cache(revs), isvcs, "ome",  # type: ignore[arg-type]
                           now=lambda: NOW)
    await gc.sync()
    assert ("delete", "cr-srt-00000000", "ome", "uid-cr-srt-00000000") in client.calls
    # A JSON patch: a merge patch makes the API server re-encode the immutable ``data``.
    assert ("patch", "cr-srt-00000001",
            [{"op": "add", "path": "/metadata/annotations",
              "value": {"ome.io/gc-eligible-since": "2026-09-29T12:00:00Z"}}],
            "ome") in client.calls
    assert len(client.calls) == 2


async def test_a_kept_revision_loses_its_mark_by_a_guarded_remove() -> None:
    revs = [rev("cr-srt-00000000", "srt", 0, "2026-09-29T11:00:00Z")]
    client = Client()
    gc = RevisionCollector(client, Cache(revs), Cache([]), "ome",  # type: ignore[arg-type]
                           now=lambda: NOW)
    await gc.sync()
    path = "/metadata/annotations/ome.io~1gc-eligible-since"
    assert client.calls == [("patch", "cr-srt-00000000",
                             [{"op": "test", "path": path, "value": "2026-09-29T11:00:00Z"},
                              {"op": "remove", "path": path}], "ome")]


async def test_nothing_is_collected_before_the_caches_list_or_while_not_leading() -> None:
    client, isvcs = Client(), Cache([])
    isvcs.synced.clear()  # an unlisted ISVC cache could hide a user of the revision
    gc = RevisionCollector(client, Cache(TWELVE), isvcs, "ome",  # type: ignore[arg-type]
                           now=lambda: NOW)
    assert await gc.sync() is None
    isvcs.synced.set()
    gc.guard = lambda: False
    assert await gc.sync() is None and client.calls == []


class RefusingClient(Client):
    async def patch(self, res: Any, name: str, body: Any, namespace: str,
                    **kw: Any) -> None:
        raise ApiError(422, "Invalid", "data: Invalid value: ...: field is immutable")


async def test_a_refused_mark_is_held_in_memory_and_still_deletes_after_the_grace() -> None:
    clock = [NOW]
    client = RefusingClient()
    gc = RevisionCollector(client, Cache(TWELVE), Cache([]), "ome",  # type: ignore[arg-type]
                           now=lambda: clock[0])
    first = await gc.sync()
    assert first is not None and first.mark == ("cr-srt-00000000", "cr-srt-00000001")
    clock[0] = NOW + timedelta(hours=23)
    later = await gc.sync()
    assert later is not None and later.mark == () and later.delete == ()
    clock[0] = NOW + timedelta(hours=24)
    await gc.sync()
    assert sorted(c[1] for c in client.calls if c[0] == "delete") == [
        "cr-srt-00000000", "cr-srt-00000001"]

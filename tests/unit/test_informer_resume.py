"""A broken watch stream resumes after the last event the cache applied, and history from
before a delete never brings the object back.

Resumed from where it started, the stream replays events the cache already applied: the
adds and updates of a pod deleted since show it again, alive, until the replay reaches its
delete. A pass planned meanwhile saw a scaled-down gang's pods as unrecorded and re-created
a deleted leader (``test_manager_faults``, watches dropped while scaling down)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, cast

import aiohttp
import pytest

from omenative_controller.kube import informer as informer_module
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.informer import Informer
from omenative_controller.kube.resources import INFERENCE_REPLICAS


def _event(kind: str, name: str, rv: int, uid: str = "u1") -> JSON:
    return {"type": kind, "object": {"metadata": {
        "name": name, "namespace": "llm", "uid": uid, "resourceVersion": str(rv)}}}


class BreakingWatch:
    """LIST answers nothing at rv 5; the first watch hands out two events then breaks; every
    later watch records where it started and waits."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.resumed = asyncio.Event()

    async def list(self, *_: Any, **__: Any) -> JSON:
        return {"items": [], "metadata": {"resourceVersion": "5"}}

    @contextlib.asynccontextmanager
    async def watch(self, _resource: Any, _scope: Any, *, resource_version: str,
                    **__: Any) -> AsyncIterator[AsyncIterator[JSON]]:
        self.started.append(resource_version)
        first = len(self.started) == 1

        async def events() -> AsyncIterator[JSON]:
            if first:
                yield _event("ADDED", "a", 6)
                yield _event("MODIFIED", "a", 7)
                raise aiohttp.ClientPayloadError("Response payload is not completed")
            self.resumed.set()
            await asyncio.Event().wait()
            yield {}  # pragma: no cover

        yield events()


async def test_a_broken_stream_resumes_after_the_last_event_applied(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(informer_module.Backoff, "next", lambda _self: 0.0)
    client = BreakingWatch()
    inf: Informer[JSON] = Informer(cast(KubeClient, client), INFERENCE_REPLICAS, dict,
                                   namespaces=["llm"])
    task = asyncio.create_task(inf.run())
    try:
        await asyncio.wait_for(client.resumed.wait(), 5)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert client.started == ["5", "7"]  # not "5" again: that replays 6 and 7
    assert inf.get("llm/a") is not None


def test_a_replayed_update_from_before_the_delete_does_not_resurrect() -> None:
    changes: list[tuple[Any, Any]] = []
    inf: Informer[JSON] = Informer(cast(KubeClient, None), INFERENCE_REPLICAS, dict,
                                   on_change=lambda _ns, old, new: changes.append((old, new)))
    for kind, rv in (("ADDED", 10), ("MODIFIED", 11), ("DELETED", 12)):
        event = _event(kind, "leader", rv)
        inf._apply(kind, event["object"])
    seen = len(changes)
    for kind, rv in (("ADDED", 10), ("MODIFIED", 11)):  # the same history, replayed
        event = _event(kind, "leader", rv)
        inf._apply(kind, event["object"])
    assert inf.get("llm/leader") is None
    assert len(changes) == seen  # nobody was woken by a pod that is not there
    inf._apply("DELETED", _event("DELETED", "leader", 12)["object"])  # replayed too
    assert inf.get("llm/leader") is None


def test_an_object_created_again_after_the_delete_is_seen() -> None:
    inf: Informer[JSON] = Informer(cast(KubeClient, None), INFERENCE_REPLICAS, dict)
    inf._apply("ADDED", _event("ADDED", "leader", 10)["object"])
    inf._apply("DELETED", _event("DELETED", "leader", 12)["object"])
    inf._apply("ADDED", _event("ADDED", "leader", 14, uid="u2")["object"])
    got = inf.get("llm/leader")
    assert got is not None and got["metadata"]["uid"] == "u2"

"""The shell's shared mechanisms: one Event recorder, one condition merge, one CRD watcher."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any, cast

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.crdwatch import CrdPresence
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.events import EventRecorder
from omenative_core.conditions import merge_condition_json

NOW = datetime(2026, 12, 3, 22, 0, 5, 123456, tzinfo=UTC)
IR = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": "chat",
      "namespace": "llm", "uid": "u1"}


class FakeApi:
    """Records calls; ``crd`` is what a CRD GET answers (an ApiError is raised)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.crd: JSON | ApiError = ApiError(404, "NotFound")

    async def create(self, _res: Any, body: JSON, _ns: str | None = None) -> JSON:
        self.calls.append(("create", body))
        return body

    async def patch(self, _res: Any, name: str, body: JSON, _ns: str | None = None,
                    **_: Any) -> JSON:
        self.calls.append(("patch", (name, body)))
        return body

    async def get(self, _res: Any, _name: str, _ns: str | None = None) -> JSON:
        if isinstance(self.crd, ApiError):
            raise self.crd
        return self.crd


def _client(api: FakeApi) -> KubeClient:
    return cast(KubeClient, api)


async def test_repeats_within_the_window_bump_the_count_of_one_event() -> None:
    api = FakeApi()
    rec = EventRecorder(_client(api), identity="mgr-1", now=lambda: NOW, clock=lambda: 100.0)
    for _ in range(3):
        assert await rec.record(IR, "Warning", "InvalidSpec", "spec.replicas: must be >= 0")
    kinds = [k for k, _ in api.calls]
    assert kinds == ["create", "patch", "patch"]
    body = api.calls[0][1]
    assert body["involvedObject"] == IR and body["reportingInstance"] == "mgr-1"
    assert body["lastTimestamp"] == "2026-12-03T22:00:05Z"
    assert api.calls[2][1][1]["count"] == 3


async def test_window_zero_creates_every_event_and_the_guard_stops_all() -> None:
    api = FakeApi()
    allowed = [True]
    rec = EventRecorder(_client(api), window=0, guard=lambda: allowed[0])
    await rec.record(IR, "Normal", "RolloutStarted", "group g")
    await rec.record(IR, "Normal", "RolloutStarted", "group g")
    allowed[0] = False
    assert not await rec.record(IR, "Normal", "RolloutStarted", "group g")
    assert [k for k, _ in api.calls] == ["create", "create"]


def _cond(type_: str, status: str, reason: str, message: str, **more: Any) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message, **more}


def test_the_condition_merge_moves_the_transition_time_only_when_the_status_changes() -> None:
    old = [{"type": "Progressing", "status": "True"},
           {"type": "Ready", "status": "False", "reason": "A", "message": "a",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    same = merge_condition_json(old, [_cond("Ready", "False", "B", "b", observedGeneration=4)],
                                NOW)
    assert same[0] == old[0]
    assert same[1] == {"type": "Ready", "status": "False", "reason": "B", "message": "b",
                       "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 4}
    flipped = merge_condition_json(old, [_cond("Ready", "True", "R", "")], NOW)
    assert flipped[1]["lastTransitionTime"] == "2026-12-03T22:00:05Z"
    added = merge_condition_json(None, [_cond("SpecValid", "False", "X", "x")], NOW)
    assert [c["type"] for c in added] == ["SpecValid"]


def test_the_condition_merge_removes_and_sorts_but_keeps_what_it_sets() -> None:
    old = [{"type": "SpecValid", "status": "False"}, {"type": "Ready", "status": "True"},
           {"type": "DecoderReady", "status": "True"}]
    merged = merge_condition_json(old, [_cond("EngineReady", "True", "Ready", "")], NOW,
                                  remove={"SpecValid", "DecoderReady", "EngineReady"},
                                  sort=True)
    assert [c["type"] for c in merged] == ["EngineReady", "Ready"]


async def test_crd_presence_without_an_informer_follows_established() -> None:
    api = FakeApi()
    changes: list[bool] = []
    watch = CrdPresence(_client(api), "leaderworkersets.leaderworkerset.x-k8s.io",
                        interval=0.01, on_change=changes.append)
    task = asyncio.create_task(watch.run())

    async def until(value: bool) -> None:
        while watch.present is not value or not watch.checked.is_set():
            await asyncio.sleep(0.01)

    try:
        await asyncio.wait_for(until(False), 5)
        api.crd = {"spec": {"versions": [{"name": "v1", "served": True, "storage": True}]},
                   "status": {"conditions": []}}
        await asyncio.sleep(0.05)
        assert not watch.present, "a CRD that is not Established yet is not present"
        api.crd = {**api.crd, "status": {"conditions": [{"type": "Established",
                                                          "status": "True"}]}}
        await asyncio.wait_for(until(True), 5)
        api.crd = ApiError(500, "InternalError")
        await asyncio.sleep(0.05)
        assert watch.present, "an API error keeps the last known state"
        api.crd = ApiError(404, "NotFound")
        await asyncio.wait_for(until(False), 5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert changes == [True, False]

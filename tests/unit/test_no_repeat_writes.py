"""No duplicate writes for one thing (issue 30 item 8).

A pod whose delete the API server accepted is not deleted again by a pass planned before
the watch shows it terminating (an API server restart keeps the watch down for a while);
one repeated Warning is one Event whose count grows, as Kubernetes' event series, even
across concurrent passes, a lost answer or a manager restart.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from omenative_controller.executor import CreateErrorStore, Executor, PassContext
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.events import EventRecorder
from omenative_core.model.plan import DeletePod, Plan
from omenative_core.model.status import InferenceReplicaStatus

IR = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": "chat",
      "namespace": "llm", "uid": "u1"}


class Api:
    """A namespace's Events by name, and every DELETE sent; ``down`` fails every call."""

    def __init__(self) -> None:
        self.events: dict[str, JSON] = {}
        self.deletes: list[tuple[str, str | None, int | None]] = []
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise ApiError(503, "ServiceUnavailable", "the API server is restarting")

    async def delete(self, _res: Any, name: str, _ns: str | None = None, **kw: Any) -> JSON:
        self._check()
        self.deletes.append((name, kw.get("uid"), kw.get("grace_period_seconds")))
        return {}

    async def create(self, _res: Any, body: JSON, _ns: str | None = None) -> JSON:
        self._check()
        await asyncio.sleep(0.01)  # a create in flight while other passes record
        name = body["metadata"]["name"]
        if name in self.events:
            raise ApiError(409, "AlreadyExists", f"events {name!r} already exists")
        self.events[name] = dict(body)
        return body

    async def get(self, _res: Any, name: str, _ns: str | None = None) -> JSON:
        self._check()
        if name not in self.events:
            raise ApiError(404, "NotFound", name)
        return self.events[name]

    async def patch(self, _res: Any, name: str, body: JSON, _ns: str | None = None,
                    **_: Any) -> JSON:
        self._check()
        if name not in self.events:
            raise ApiError(404, "NotFound", name)
        self.events[name].update(body)
        return self.events[name]


def _ctx() -> PassContext:
    raw = {"metadata": {"name": "chat", "uid": "u1", "resourceVersion": "1"}, "spec": {}}
    return PassContext(key="llm/chat", namespace="llm", name="chat", raw=raw)


def _plan(*actions: Any) -> Plan:
    return Plan(actions=tuple(actions), status=InferenceReplicaStatus())


def test_a_pod_delete_the_server_accepted_is_not_sent_again() -> None:
    api = Api()
    ex = Executor(cast(KubeClient, api), CreateErrorStore())

    async def passes() -> None:
        drain = _plan(DeletePod(name="chat-0-leader-0", uid="uid-a"))
        api.down = True  # the API server restarts: the delete fails, nothing is remembered
        assert not (await ex.apply(drain, _ctx())).ok
        api.down = False
        for _ in range(3):  # the watch is still down: each pass plans the delete again
            assert (await ex.apply(drain, _ctx())).ok
        # a force delete of the same pod is another request; a new pod's delete goes too
        await ex.apply(_plan(DeletePod(name="chat-0-leader-0", uid="uid-a", force=True)), _ctx())
        await ex.apply(_plan(DeletePod(name="chat-0-leader-0", uid="uid-b")), _ctx())

    asyncio.run(passes())
    assert api.deletes == [("chat-0-leader-0", "uid-a", None), ("chat-0-leader-0", "uid-a", 0),
                           ("chat-0-leader-0", "uid-b", None)]


def test_concurrent_repeats_of_a_warning_are_one_event_with_a_series() -> None:
    api = Api()
    rec = EventRecorder(cast(KubeClient, api))

    async def three() -> None:
        await asyncio.gather(*(rec.record(IR, "Warning", "TeardownBlocked", "pods stuck")
                               for _ in range(3)))

    asyncio.run(three())
    assert len(api.events) == 1
    event = next(iter(api.events.values()))
    assert event["count"] == 3 and event["series"]["count"] == 3
    assert event["series"]["lastObservedTime"].endswith("Z")


def test_a_restarted_manager_counts_on_the_event_it_finds() -> None:
    api = Api()

    async def run() -> None:
        await EventRecorder(cast(KubeClient, api)).record(IR, "Warning", "X", "same words")
        # a new process (no memo): the same Warning finds its Event by name and counts on
        again = EventRecorder(cast(KubeClient, api))
        await again.record(IR, "Warning", "X", "same words")
        await again.record(IR, "Warning", "X", "same words")
        await again.record(IR, "Warning", "X", "other words")

    asyncio.run(run())
    assert sorted(e["count"] for e in api.events.values()) == [1, 3]

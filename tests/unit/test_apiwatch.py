"""ApiPresence: the native gang API is used only while served and once its caches synced."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from omenative_controller.kube.apiwatch import NATIVE_POD_GROUPS, WORKLOADS, ApiPresence
from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.informer import Informer


class _Discovery:
    """Answers ``GET /apis/scheduling.k8s.io/v1alpha2`` with what ``served`` says."""

    def __init__(self) -> None:
        self.served: list[str] | None = None  # None: 404
        self.broken = False
        self.calls = 0
        self.called = asyncio.Condition()

    async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        assert (method, path) == ("GET", "/apis/scheduling.k8s.io/v1alpha2")
        async with self.called:
            self.calls += 1
            self.called.notify_all()
        if self.broken:
            raise ApiError(503, "ServiceUnavailable")
        if self.served is None:
            raise ApiError(404, "NotFound")
        return {"resources": [{"name": n} for n in self.served]}


class _Informer:
    def __init__(self, name: str) -> None:
        self.name = name
        self.synced = asyncio.Event()
        self.cleared = False

    async def run(self) -> None:
        await asyncio.Event().wait()

    def clear(self) -> None:
        self.cleared = True


async def _scenario() -> list[tuple[str, bool, int]]:
    api = _Discovery()
    made: list[dict[str, _Informer]] = []

    def make() -> dict[str, Informer[Any]]:
        made.append({"PodGroup": _Informer("podgroups"), "Workload": _Informer("workloads")})
        return cast(dict[str, Informer[Any]], made[-1])

    watch = ApiPresence(cast(KubeClient, api), (NATIVE_POD_GROUPS, WORKLOADS), make,
                        interval=0.01)
    seen: list[tuple[str, bool, int]] = []

    async def look(what: str) -> None:
        """Record the state once two more probes have been answered (a whole poll after
        the change, whatever the machine's speed)."""
        async with api.called:
            target = api.calls + 2
            await api.called.wait_for(lambda: api.calls >= target)
        seen.append((what, watch.present, len(watch.informers)))

    task = asyncio.create_task(watch.run())
    await look("not served")
    api.served = ["podgroups"]
    await look("only podgroups served")
    api.served = ["podgroups", "workloads", "podgroups/status"]
    await look("served, caches not synced")
    for informer in made[-1].values():
        informer.synced.set()
    await look("served and synced")
    api.broken = True
    await look("discovery failing")
    api.broken, api.served = False, None
    await look("gone")
    assert all(i.cleared for i in made[-1].values())
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return seen


def test_native_gang_api_presence_follows_discovery_and_cache_sync() -> None:
    assert asyncio.run(_scenario()) == [
        ("not served", False, 0),
        ("only podgroups served", False, 0),
        ("served, caches not synced", False, 2),
        ("served and synced", True, 2),
        ("discovery failing", True, 2),  # an API error keeps the last known state
        ("gone", False, 0),
    ]

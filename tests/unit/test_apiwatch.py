"""ApiPresence: the native gang API is used only while served and once its caches synced."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from omenative_controller.kube.apiwatch import NATIVE_GANG_VERSIONS, ApiPresence
from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.informer import Informer


class _Discovery:
    """Answers ``GET /apis/scheduling.k8s.io/<version>`` with what ``served`` says for it
    (``v1alpha2`` unless ``version`` is changed; the other version: 404)."""

    def __init__(self) -> None:
        self.served: list[str] | None = None  # None: 404
        self.version = "v1alpha2"
        self.broken = False
        self.calls = 0
        self.called = asyncio.Condition()

    async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        assert method == "GET" and path.startswith("/apis/scheduling.k8s.io/")
        async with self.called:
            self.calls += 1
            self.called.notify_all()
        if self.broken:
            raise ApiError(503, "ServiceUnavailable")
        if self.served is None or path != f"/apis/scheduling.k8s.io/{self.version}":
            raise ApiError(404, "NotFound")
        return {"resources": [{"name": n} for n in self.served]}


class _Informer:
    def __init__(self, name: str, version: str = "") -> None:
        self.name = name
        self.version = version
        self.synced = asyncio.Event()
        self.cleared = False
        self.list_failures = 0
        self.list_error = ""

    async def run(self) -> None:
        await asyncio.Event().wait()

    def clear(self) -> None:
        self.cleared = True


async def _scenario() -> list[tuple[str, bool, int, str | None]]:
    api = _Discovery()
    made: list[dict[str, _Informer]] = []

    def make(version: str) -> dict[str, Informer[Any]]:
        made.append({"PodGroup": _Informer("podgroups", version),
                     "Workload": _Informer("workloads", version)})
        return cast(dict[str, Informer[Any]], made[-1])

    watch = ApiPresence(cast(KubeClient, api), NATIVE_GANG_VERSIONS, make, interval=0.01)
    seen: list[tuple[str, bool, int, str | None]] = []

    async def look(what: str) -> None:
        """Record the state once four more probes have been answered (a whole poll of both
        versions after the change, whatever the machine's speed)."""
        async with api.called:
            target = api.calls + 4
            await api.called.wait_for(lambda: api.calls >= target)
        seen.append((what, watch.present, len(watch.informers), watch.served))

    task = asyncio.create_task(watch.run())
    try:
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
        api.broken = False
        api.version = "v1beta1"  # the cluster upgraded to 1.37
        await look("upgraded, new caches not synced")
        assert all(i.cleared for i in made[-2].values())
        assert {i.version for i in made[-1].values()} == {"scheduling.k8s.io/v1beta1"}
        for informer in made[-1].values():
            informer.list_failures, informer.list_error = 3, "500 InternalError: decode"
        await look("upgraded, its objects unreadable")
        assert watch.failing == (
            "LIST scheduling.k8s.io/v1beta1 podgroups: 500 InternalError: decode")
        for informer in made[-1].values():
            informer.synced.set()
        await look("upgraded and synced")
        assert watch.failing == ""
        api.served = None
        await look("gone")
        assert all(i.cleared for i in made[-1].values())
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return seen


def test_native_gang_api_presence_follows_discovery_and_cache_sync() -> None:
    alpha, beta = "scheduling.k8s.io/v1alpha2", "scheduling.k8s.io/v1beta1"
    assert asyncio.run(_scenario()) == [
        ("not served", False, 0, None),
        ("only podgroups served", False, 0, None),
        ("served, caches not synced", False, 2, alpha),
        ("served and synced", True, 2, alpha),
        ("discovery failing", True, 2, alpha),  # an API error keeps the last known state
        ("upgraded, new caches not synced", False, 2, beta),
        ("upgraded, its objects unreadable", False, 2, beta),
        ("upgraded and synced", True, 2, beta),
        ("gone", False, 0, None),
    ]

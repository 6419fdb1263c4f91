"""The InferenceService controller lists its own kinds only while their CRDs are served.

The manager runs the controller by default, also on clusters without the InferenceService
CRDs; it used to LIST those collections anyway and retry every 404 (74 of them in one
controller benchmark). Now discovery says what is served and only those informers run.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, cast

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import Resource
from omenative_controller.service_controller import ServiceController

_OME = "/apis/ome.io/v1beta1"


class _Cluster:
    """Discovery of ``ome.io/v1beta1`` from ``served``; every LIST recorded; 404 for the
    rest (no optional CRD, no native gang API); watches that stay open and quiet."""

    def __init__(self) -> None:
        self.served = ["inferencereplicas"]
        self.lists: list[str] = []
        self.probes = 0

    async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        if path != _OME:
            raise ApiError(404, "NotFound")
        self.probes += 1
        return {"resources": [{"name": n} for n in self.served]}

    async def get(self, *_: Any, **__: Any) -> dict[str, Any]:
        raise ApiError(404, "NotFound")  # the optional CRDs (LWS, PodMonitor, PodGroup)

    async def list(self, res: Resource, *_: Any, **__: Any) -> dict[str, Any]:
        self.lists.append(res.plural)
        if res.group == "ome.io" and res.plural not in self.served:
            raise ApiError(404, "NotFound")
        return {"items": [], "metadata": {"resourceVersion": "1"}}

    @contextlib.asynccontextmanager
    async def watch(self, *_: Any, **__: Any) -> AsyncIterator[AsyncIterator[Any]]:
        async def quiet() -> AsyncIterator[Any]:
            await asyncio.Event().wait()
            yield {}

        yield quiet()


async def _until(check: Any, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_isvc_informers_list_only_while_their_crds_are_served() -> None:
    cluster = _Cluster()
    controller = ServiceController(cast(KubeClient, cluster), ["prod"],
                                   crd_poll_seconds=0.02, sync_timeout=30.0)
    task = asyncio.create_task(controller.run())
    try:
        await _until(lambda: cluster.probes >= 5)  # several polls without the CRDs
        isvc_kinds = {"inferenceservices", "servingruntimes", "clusterservingruntimes"}
        assert not isvc_kinds & set(cluster.lists), cluster.lists
        assert {"inferencereplicas", "deployments"} <= set(cluster.lists)
        # the workers run at once: an absent CRD does not stall the start for sync_timeout
        await _until(lambda: any(t.get_name() == "isvc-worker-0" for t in asyncio.all_tasks()))

        cluster.served += sorted(isvc_kinds)  # the CRDs are installed
        await _until(lambda: isvc_kinds <= set(cluster.lists))
        await _until(controller.isvcs.synced.is_set)
        listed, probes = len(cluster.lists), cluster.probes
        await _until(lambda: cluster.probes >= probes + 3)
        assert len(cluster.lists) == listed, "served and synced: polls list nothing again"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

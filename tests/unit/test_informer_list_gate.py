"""Informers sharing a list gate LIST one at a time, and every one still syncs."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.informer import Informer
from omenative_controller.kube.resources import NODES, PODS


class PagedClient:
    """Three pages per LIST, each a scheduling point; records how many LISTs overlap."""

    def __init__(self) -> None:
        self.open = 0
        self.most_open = 0

    async def list(self, res: Any, namespace: str | None = None, **kw: Any) -> dict[str, Any]:
        page = int(kw.get("continue_token") or 0)
        if page == 0:
            self.open += 1
            self.most_open = max(self.most_open, self.open)
        await asyncio.sleep(0)
        last = page == 2
        if last:
            self.open -= 1
        items = [{"metadata": {"name": f"{res.plural}-{page}", "namespace": "ns",
                               "resourceVersion": "1"}}]
        return {"items": items,
                "metadata": {"resourceVersion": "5", **({} if last else {"continue": page + 1})}}

    def watch(self, *_: Any, **__: Any) -> Any:
        raise asyncio.CancelledError  # the test ends once listed


def test_gated_informers_list_one_at_a_time_and_all_sync() -> None:
    async def run(gate: asyncio.Semaphore | None) -> tuple[int, list[int]]:
        client = PagedClient()
        infs = [Informer(cast(KubeClient, client), res, dict, list_gate=gate)
                for res in (PODS, NODES)]
        tasks = [asyncio.create_task(i.run()) for i in infs]
        await asyncio.wait_for(asyncio.gather(*(i.wait_synced() for i in infs)), 5)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return client.most_open, [len(i) for i in infs]

    assert asyncio.run(run(asyncio.Semaphore(1))) == (1, [3, 3])
    assert asyncio.run(run(None))[0] == 2  # without the gate their pages interleave

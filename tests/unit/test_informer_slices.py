"""A burst of watch events already buffered is applied in slices: other tasks (a pass, a
Lease renewal, the answers of other requests) run between them, and every event still
lands, in order."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from test_client_env import CountedTurns

from omenative_controller.kube import informer as informer_module
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.informer import Informer
from omenative_controller.kube.resources import INFERENCE_REPLICAS


class BufferedWatch:
    """A client whose watch stream hands out ``n`` events without ever suspending, as
    lines already in the stream's buffer are read, then ends."""

    def __init__(self, n: int) -> None:
        self.n = n

    @contextlib.asynccontextmanager
    async def watch(self, *_: Any, **__: Any) -> AsyncIterator[AsyncIterator[JSON]]:
        async def events() -> AsyncIterator[JSON]:
            for i in range(self.n):
                yield {"type": "ADDED", "object": {"metadata": {
                    "name": f"r{i}", "namespace": "llm", "uid": f"u{i}",
                    "resourceVersion": str(10 + i)}}}

        yield events()


def test_a_buffered_burst_lets_other_tasks_run_and_applies_every_event(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(informer_module, "WATCH_SLICE", 0.0, raising=False)  # a slice an event
    seen: list[tuple[str, int]] = []  # (event applied, other task's steps so far)
    steps = 0

    async def main() -> str:
        nonlocal steps
        inf: Informer[JSON] = Informer(cast(KubeClient, BufferedWatch(20)), INFERENCE_REPLICAS,
                                       dict, on_change=lambda _ns, _old, new: seen.append(
                                           (str(new["metadata"]["name"]), steps)))
        watch = asyncio.create_task(inf._watch_once("llm", "1"))
        while not watch.done():
            steps += 1
            await asyncio.sleep(0)
        return await watch

    last_rv = asyncio.run(main())
    assert [name for name, _ in seen] == [f"r{i}" for i in range(20)]
    assert last_rv == "29"
    other = [at for _, at in seen]
    assert other[-1] > other[0]  # the other task ran while the burst was applied


class TurnedWatch(BufferedWatch):
    """The buffered burst, on a client that hands out turns (as the manager's does)."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.turns = CountedTurns(0.0)  # one section per loop iteration


def test_a_burst_on_a_turned_client_waits_for_turns_between_slices(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(informer_module, "WATCH_SLICE", 0.0, raising=False)  # a slice an event
    seen: list[str] = []
    client = TurnedWatch(5)

    async def main() -> str:
        inf: Informer[JSON] = Informer(cast(KubeClient, client), INFERENCE_REPLICAS, dict,
                                       on_change=lambda _ns, _old, new: seen.append(
                                           str(new["metadata"]["name"])))
        return await inf._watch_once("llm", "1")

    assert asyncio.run(main()) == "14"
    assert seen == [f"r{i}" for i in range(5)]  # every event, in order
    assert client.turns.taken == 5  # each slice ended by waiting for a turn, not a bare yield

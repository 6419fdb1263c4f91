"""A /metrics scrape renders its text in a worker thread: at 500 replicas the exposition is
~100-160 ms of CPU, which on the event loop held every watch and pass for all of it."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, cast

import pytest
from aiohttp import web

from omenative_controller import observability
from omenative_controller.observability import Metrics, ProbeServer


def test_a_scrape_renders_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    rendered_on: list[str] = []
    real = observability.generate_latest

    def render(registry: Any) -> bytes:
        rendered_on.append(threading.current_thread().name)
        return real(registry)

    monkeypatch.setattr(observability, "generate_latest", render)
    metrics = Metrics()
    metrics.queue_depth.set(7)
    server = ProbeServer(metrics=metrics, ready=lambda: (True, "ok"))
    resp = asyncio.run(server._metrics(cast(web.Request, None)))
    assert resp.status == 200 and resp.body is not None
    assert b"omenative_queue_depth 7.0" in cast(bytes, resp.body)
    assert rendered_on and rendered_on[0] != threading.main_thread().name

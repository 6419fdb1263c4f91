"""The analysis Prometheus client: one number, or why there is none (against a fake server)."""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from omenative_controller.prometheus import PrometheusClient, parse_response


def _vector(*values: str) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"instance": f"i{n}"}, "value": [1.0, v]} for n, v in enumerate(values)]}}


@pytest.mark.parametrize(("body", "kind", "value", "detail"), [
    (_vector("0.25"), "value", 0.25, ""),
    ({"status": "success", "data": {"resultType": "scalar", "result": [1.0, "3"]}},
     "value", 3.0, ""),
    (_vector(), "inconclusive", None, "no data"),
    (_vector("1", "2"), "inconclusive", None, "2 series"),
    (_vector("NaN"), "inconclusive", None, "NaN"),
    (_vector("+Inf"), "inconclusive", None, "inf"),
    ({"status": "error", "errorType": "bad_data", "error": "parse error"}, "error", None,
     "bad_data: parse error"),
])
def test_an_answer_is_a_value_only_when_it_is_one_finite_number(
    body: dict[str, Any], kind: str, value: float | None, detail: str
) -> None:
    result = parse_response(body)
    assert result.kind == kind
    assert result.value == value
    assert detail in result.detail


def test_no_value_reaches_decide_as_a_measurement_with_the_reason() -> None:
    m = parse_response(_vector()).measurement("q1")
    assert m.id == "q1" and m.value is None and m.error == "inconclusive: no data"
    ok = parse_response(_vector("0.5")).measurement("q2")
    assert ok.value == 0.5 and not ok.error


@contextlib.asynccontextmanager
async def fake_prometheus() -> AsyncIterator[tuple[str, dict[str, Any]]]:
    seen: dict[str, Any] = {}

    async def query(request: web.Request) -> web.Response:
        seen["query"] = request.query.get("query")
        seen["auth"] = request.headers.get("Authorization")
        q = seen["query"]
        if q == "slow":
            await asyncio.sleep(2)
        if q == "broken":
            return web.Response(status=502, text="bad gateway")
        return web.json_response(_vector("0.01"))

    app = web.Application()
    app.router.add_get("/prom/api/v1/query", query)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/prom", seen
    finally:
        await runner.cleanup()


async def test_a_query_is_sent_with_its_headers_and_read_back() -> None:
    client = PrometheusClient(timeout=1)
    async with fake_prometheus() as (url, seen):
        try:
            result = await client.query(url, 'sum(rate(errors[1m]))',
                                        headers={"Authorization": "Bearer t"})
        finally:
            await client.close()
    assert result.kind == "value" and result.value is not None
    assert math.isclose(result.value, 0.01)
    assert seen == {"query": "sum(rate(errors[1m]))", "auth": "Bearer t"}


async def test_timeouts_http_errors_and_dead_servers_are_errors() -> None:
    client = PrometheusClient(timeout=0.5)
    async with fake_prometheus() as (url, _):
        try:
            slow = await client.query(url, "slow")
            broken = await client.query(url, "broken")
            dead = await client.query("http://127.0.0.1:9", "up")
        finally:
            await client.close()
    assert slow.kind == "error" and "within 0.5s" in slow.detail
    assert broken.kind == "error" and "HTTP 502" in broken.detail
    assert dead.kind == "error"

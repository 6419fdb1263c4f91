"""A small async Prometheus client for canary analysis (``GET /api/v1/query``).

Rollout analysis asks one instant query per metric and needs one number back. Anything
else is not a number to compare: no series, more than one series, NaN or an infinity is
*inconclusive* (the round follows ``onInconclusive``); an unreachable server, a timeout, a
non-2xx answer or ``status: error`` is an *error*. Both reach ``decide`` as an
``AnalysisMeasurement`` with no value and the reason, so the round's history says why.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from typing import Any, Final

import aiohttp
from attrs import frozen

from omenative_core.rollout import AnalysisMeasurement

__all__ = ["DEFAULT_TIMEOUT", "PrometheusClient", "QueryResult", "parse_response"]

DEFAULT_TIMEOUT: Final = 10.0
"""Seconds one query may take (connect and read) before it counts as an error."""


@frozen(kw_only=True)
class QueryResult:
    """One query's outcome: ``value``, or why there is none.

    ``kind`` is ``value``, ``inconclusive`` (the server answered but not with one number)
    or ``error`` (no usable answer); ``detail`` says why for the last two.
    """

    kind: str
    value: float | None = None
    detail: str = ""

    def measurement(self, id: str) -> AnalysisMeasurement:
        """The answer for ``decide``: the value, or None with the reason."""
        if self.kind == "value" and self.value is not None:
            return AnalysisMeasurement(id=id, value=self.value)
        prefix = "inconclusive" if self.kind == "inconclusive" else "error"
        return AnalysisMeasurement(id=id, value=None, error=f"{prefix}: {self.detail}")


def _inconclusive(detail: str) -> QueryResult:
    return QueryResult(kind="inconclusive", detail=detail)


def _error(detail: str) -> QueryResult:
    return QueryResult(kind="error", detail=detail)


def _number(raw: object) -> QueryResult:
    """A sample ``[timestamp, "value"]`` as a result."""
    if not isinstance(raw, list | tuple) or len(raw) != 2:
        return _error(f"malformed sample {raw!r}"[:200])
    try:
        value = float(raw[1])
    except (TypeError, ValueError):
        return _error(f"sample value {raw[1]!r} is not a number"[:200])
    if math.isnan(value):
        return _inconclusive("value is NaN")
    if math.isinf(value):
        return _inconclusive(f"value is {value}")
    return QueryResult(kind="value", value=value)


def parse_response(body: object) -> QueryResult:
    """Read a ``/api/v1/query`` JSON answer (exposed for tests)."""
    if not isinstance(body, Mapping):
        return _error("answer is not a JSON object")
    if body.get("status") != "success":
        kind = body.get("errorType") or "error"
        return _error(f"{kind}: {body.get('error') or 'query failed'}"[:300])
    data = body.get("data")
    if not isinstance(data, Mapping):
        return _error("answer has no data")
    kind = data.get("resultType")
    result: Any = data.get("result")
    if kind == "scalar":
        return _number(result)
    if kind == "vector":
        if not isinstance(result, list):
            return _error("vector result is not a list")
        if not result:
            return _inconclusive("no data")
        if len(result) > 1:
            return _inconclusive(f"{len(result)} series, expected one")
        sample = result[0].get("value") if isinstance(result[0], Mapping) else None
        return _number(sample)
    if kind == "matrix":
        return _inconclusive("range vector result, expected an instant value")
    return _error(f"unsupported resultType {kind!r}")


class PrometheusClient:
    """Instant queries against Prometheus servers, one shared aiohttp session.

    ``timeout`` bounds each query; the session is opened on first use and closed by
    ``close``.
    """

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    async def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return self._session

    async def query(
        self, address: str, query: str, *, headers: Mapping[str, str] | None = None
    ) -> QueryResult:
        """Run ``query`` at ``address`` (``http://host:port``, a path prefix allowed)."""
        url = address.rstrip("/") + "/api/v1/query"
        session = await self._client()
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        try:
            async with session.get(
                url, params={"query": query}, headers=dict(headers or {}), timeout=timeout
            ) as resp:
                try:
                    body = await resp.json(content_type=None)
                except ValueError:
                    text = (await resp.text())[:200]
                    return _error(f"HTTP {resp.status}: {text or 'not JSON'}")
                if resp.status >= 300 and not (
                    isinstance(body, Mapping) and body.get("status") == "error"
                ):
                    return _error(f"HTTP {resp.status}")
                return parse_response(body)
        except TimeoutError:
            return _error(f"no answer from {address} within {self.timeout:g}s")
        except aiohttp.ClientError as exc:
            return _error(f"{address}: {exc}"[:300])
        except asyncio.CancelledError:
            raise

    async def close(self) -> None:
        """Close the session (a later query opens a new one)."""
        if self._session is not None:
            await self._session.close()
            self._session = None

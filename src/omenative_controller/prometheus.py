"""A small async Prometheus client for canary analysis (``GET /api/v1/query``).

Rollout analysis asks one instant query per metric and needs one number back. Anything
else is not a number to compare: no series, more than one series, NaN or an infinity is
*inconclusive* (the round follows ``onInconclusive``); an unreachable server, a timeout, a
non-2xx answer or ``status: error`` is an *error*. Both reach ``decide`` as an
``AnalysisMeasurement`` with no value and the reason, so the round's history says why.

``auth_headers`` turns the Secret named by ``canary.prometheus.authRef`` into the
``Authorization`` header (``token`` -> Bearer, else ``username`` + ``password`` -> Basic).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import math
from collections.abc import Callable, Mapping
from typing import Any, Final

import aiohttp
from attrs import frozen

from omenative_core.rollout import AnalysisMeasurement

__all__ = [
    "ANALYSIS_CREDENTIALS_LABEL",
    "DEFAULT_TIMEOUT",
    "AuthSecretError",
    "PrometheusClient",
    "QueryResult",
    "auth_headers",
    "parse_response",
]

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


class AuthSecretError(ValueError):
    """The authRef Secret cannot make an ``Authorization`` header; the message names the
    Secret and what is missing or wrong (never a value)."""


def _secret_value(data: Mapping[str, Any], string_data: Mapping[str, Any], key: str,
                  name: str) -> str | None:
    """``key``'s value: base64 in ``data`` (what the API returns), else plain in
    ``stringData``; None when absent or empty."""
    raw = data.get(key)
    if raw is not None:
        if not isinstance(raw, str):
            raise AuthSecretError(f"authRef secret {name}: key {key} is not a string")
        try:
            value = base64.b64decode(raw, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise AuthSecretError(
                f"authRef secret {name}: key {key} is not base64-encoded UTF-8") from None
        return value or None
    plain = string_data.get(key)
    if plain is not None and not isinstance(plain, str):
        raise AuthSecretError(f"authRef secret {name}: key {key} is not a string")
    return plain or None


ANALYSIS_CREDENTIALS_LABEL: Final = "omenative.io/analysis-credentials"
"""A Secret the manager may send to a Prometheus carries this label with value ``"true"``.

The manager can read every Secret of the namespaces it manages, and whoever writes an
InferenceService picks the ``serverAddress``; without this opt-in, write access to
InferenceServices would be read access to the namespace's Secrets."""


def auth_headers(secret: Mapping[str, Any]) -> dict[str, str]:
    """The ``Authorization`` header an authRef Secret gives (pure; exposed for tests).

    The Secret must be labelled ``ANALYSIS_CREDENTIALS_LABEL: "true"``, else it is refused.
    Key ``token``: ``Bearer <token>``; else keys ``username`` and ``password``:
    ``Basic base64(username:password)``. Values are read from ``data`` (base64, as the API
    returns them) or ``stringData``; surrounding whitespace of a token (a trailing newline
    from ``echo``) is dropped. Raises ``AuthSecretError`` naming the Secret and the missing
    keys; the message never holds a value.
    """
    meta = secret.get("metadata")
    name = str(meta.get("name") or "?") if isinstance(meta, Mapping) else "?"
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    if not isinstance(labels, Mapping) or labels.get(ANALYSIS_CREDENTIALS_LABEL) != "true":
        raise AuthSecretError(
            f"authRef secret {name} is not marked for analysis: label it "
            f"{ANALYSIS_CREDENTIALS_LABEL}=true to let the manager send it to Prometheus")
    data = secret.get("data") or {}
    string_data = secret.get("stringData") or {}
    if not isinstance(data, Mapping) or not isinstance(string_data, Mapping):
        raise AuthSecretError(f"authRef secret {name}: data is not a map of keys")
    token = _secret_value(data, string_data, "token", name)
    if token is not None and token.strip():
        return {"Authorization": f"Bearer {token.strip()}"}
    username = _secret_value(data, string_data, "username", name)
    password = _secret_value(data, string_data, "password", name)
    if username is None or password is None:
        missing = [k for k, v in (("username", username), ("password", password)) if v is None]
        raise AuthSecretError(
            f"authRef secret {name} has no token and no {' and '.join(missing)} "
            "(set key token, or keys username and password)")
    if ":" in username:
        raise AuthSecretError(f"authRef secret {name}: username must not contain ':'")
    basic = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
    return {"Authorization": f"Basic {basic}"}


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
    reader = _READERS.get(kind) if isinstance(kind, str) else None
    if reader is None:
        return _error(f"unsupported resultType {kind!r}")
    return reader(data.get("result"))


def _vector(result: Any) -> QueryResult:
    """An instant vector: exactly one series, or why the answer is inconclusive."""
    if not isinstance(result, list):
        return _error("vector result is not a list")
    if not result:
        return _inconclusive("no data")
    if len(result) > 1:
        return _inconclusive(f"{len(result)} series, expected one")
    sample = result[0].get("value") if isinstance(result[0], Mapping) else None
    return _number(sample)


_READERS: dict[str, Callable[[Any], QueryResult]] = {
    "scalar": _number,
    "vector": _vector,
    "matrix": lambda _: _inconclusive("range vector result, expected an instant value"),
}
"""How each ``resultType`` becomes a ``QueryResult``."""


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

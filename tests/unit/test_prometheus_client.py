"""The analysis Prometheus client: one number, or why there is none (against a fake server);
the authRef Secret's ``Authorization`` header."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import math
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web

from omenative_controller.kube.errors import ApiError
from omenative_controller.prometheus import (
    ANALYSIS_CREDENTIALS_LABEL,
    AuthSecretError,
    PrometheusClient,
    auth_headers,
    parse_response,
)
from omenative_controller.rollout_controller import RolloutController


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


# ---------------------------------------------------------------------------- authRef


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _secret(data: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret",
                            "metadata": {"name": "prom-auth", "namespace": "llm",
                                         "labels": {ANALYSIS_CREDENTIALS_LABEL: "true"}}}
    if data is not None:
        body["data"] = {k: _b64(v) for k, v in data.items()}
    body.update(extra)
    return body


def test_a_token_is_a_bearer_header_and_wins_over_a_username() -> None:
    assert auth_headers(_secret({"token": "abc.def\n"})) == {"Authorization": "Bearer abc.def"}
    both = _secret({"token": "t", "username": "u", "password": "p"})
    assert auth_headers(both) == {"Authorization": "Bearer t"}


@pytest.mark.parametrize("labels", [None, {}, {ANALYSIS_CREDENTIALS_LABEL: "yes"}])
def test_a_secret_not_marked_for_analysis_is_never_sent(labels: dict[str, str] | None) -> None:
    secret = _secret({"token": "hunter2"})
    if labels is None:
        del secret["metadata"]["labels"]
    else:
        secret["metadata"]["labels"] = labels
    with pytest.raises(AuthSecretError) as err:
        auth_headers(secret)
    assert "prom-auth is not marked for analysis" in str(err.value)
    assert f"{ANALYSIS_CREDENTIALS_LABEL}=true" in str(err.value)
    assert "hunter2" not in str(err.value)


def test_username_and_password_are_a_basic_header() -> None:
    got = auth_headers(_secret({"username": "ome", "password": "s3cr:t"}))
    assert got == {"Authorization": "Basic " + _b64("ome:s3cr:t")}
    # stringData (a manifest not yet through the API server) is read as plain text
    plain = _secret(stringData={"username": "ome", "password": "s3cr:t"})
    assert auth_headers(plain) == got


@pytest.mark.parametrize(("secret", "missing"), [
    (_secret({}), "no token and no username and password"),
    (_secret(), "no token and no username and password"),
    (_secret({"username": "ome"}), "no token and no password"),
    (_secret({"password": "p", "token": ""}), "no token and no username"),
    (_secret({"user": "ome", "pass": "p"}), "no token and no username and password"),
])
def test_a_secret_without_usable_keys_names_itself_and_the_missing_keys(
    secret: dict[str, Any], missing: str
) -> None:
    with pytest.raises(AuthSecretError) as err:
        auth_headers(secret)
    assert str(err.value).startswith("authRef secret prom-auth has ")
    assert missing in str(err.value)


@pytest.mark.parametrize("secret", [
    _secret(data={"password": "p"}) | {"data": {"username": "%%not base64%%",
                                                "password": _b64("hunter2")}},
    _secret() | {"data": {"token": 7}},
    _secret({"username": "a:b", "password": "hunter2"}),
    _secret() | {"data": ["token"]},
])
def test_bad_content_is_an_error_that_never_shows_a_value(secret: dict[str, Any]) -> None:
    with pytest.raises(AuthSecretError) as err:
        auth_headers(secret)
    assert "authRef secret prom-auth" in str(err.value)
    assert "hunter2" not in str(err.value) and _b64("hunter2") not in str(err.value)


class _Secrets:
    """A KubeClient stand-in answering ``get`` on Secrets only."""

    def __init__(self, answer: dict[str, Any] | ApiError) -> None:
        self.answer = answer
        self.calls: list[tuple[str, str, str | None]] = []

    async def get(self, res: Any, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.calls.append((res.plural, name, namespace))
        if isinstance(self.answer, ApiError):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(("answer", "expected"), [
    (_secret({"username": "ome", "password": "pw"}),
     {"Authorization": "Basic " + _b64("ome:pw")}),
    (ApiError(404, "NotFound", 'secrets "prom-auth" not found'),
     "authRef secret prom-auth not found"),
    (ApiError(403, "Forbidden", 'secrets "prom-auth" is forbidden: User "x" cannot get'),
     'reading authRef secret prom-auth is forbidden: secrets "prom-auth" is forbidden: '
     'User "x" cannot get'),
    (ApiError(0, "Timeout", "no answer"), "reading authRef secret prom-auth failed: "
     "0 Timeout: no answer"),
    (_secret({"username": "ome"}),
     "authRef secret prom-auth has no token and no password (set key token, or keys "
     "username and password)"),
])
async def test_the_controller_reads_the_secret_in_the_isvc_namespace_and_never_raises(
    answer: dict[str, Any] | ApiError, expected: dict[str, str] | str
) -> None:
    client = _Secrets(answer)
    rc = RolloutController(client, guard=lambda: True,  # type: ignore[arg-type]
                           now=lambda: datetime.now(UTC))
    try:
        assert await rc._auth_header("llm", "prom-auth") == expected
    finally:
        await rc.close()
    assert client.calls == [("secrets", "prom-auth", "llm")]

"""Canary analysis against a Prometheus that wants basic auth, credentials from the Secret
named by ``canary.prometheus.authRef``.

Same setup as ``test_rollout_groups.py`` (in-process manager and ServiceController, a real
Prometheus scraping a metrics endpoint the test controls), but Prometheus runs with a
``--web.config.file`` that accepts one user. The right Secret lets the analysis pass and
promote the canary; a missing Secret or a wrong password is an error round, which
``decide`` counts as inconclusive: with ``onInconclusive: Rollback`` the canary rolls back,
and the reason is in the ``CanaryAnalysisInconclusive`` Event.
"""

from __future__ import annotations

import asyncio
import base64
import copy
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import SECRETS
from omenative_controller.prometheus import ANALYSIS_CREDENTIALS_LABEL
from omenative_core.revisions import hash_of
from omenative_devcluster.prometheus import (
    BasicAuth,
    PrometheusServer,
    fetch_prometheus,
)

pytest.register_assert_rewrite("manager_fixtures")
from test_rollout_groups import (  # noqa: E402
    ANALYSIS_STEPS,
    MEMBERS,
    Metrics,
    assert_canary_at_zero,
    back_on_stable,
    change_image,
    group,
    isvc_body,
    posted,
    stable_on_canary,
    start_stable,
    traffic,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

# The one user the test Prometheus accepts. The hash is bcrypt (cost 4) of PASSWORD,
# computed once (libxcrypt's crypt(3) with a $2b$ salt); nothing here depends on bcrypt.
USERNAME = "omenative"
PASSWORD = "omenative-test-pass"
PASSWORD_BCRYPT = "$2b$04$kbWBwgcculc2ZFM61YKax.ao0diikJC3JPYHB6l05FpKe1fAAtZgu"
AUTH = BasicAuth(USERNAME, PASSWORD, PASSWORD_BCRYPT)
SECRET = "prom-auth"


@pytest.fixture
async def prometheus_with_auth() -> AsyncIterator[tuple[PrometheusServer, Metrics]]:
    """A real Prometheus behind basic auth scraping a test-controlled ``error_rate``."""
    binary = await asyncio.to_thread(fetch_prometheus)
    metrics = await Metrics().start()
    server = PrometheusServer(metrics.url, binary=binary, basic_auth=AUTH)
    server.spawn()
    try:
        await server.ready(60)  # the readiness check sends the credentials
        yield server, metrics
    finally:
        await asyncio.to_thread(server.stop)
        await metrics.stop()


def auth_body(namespace: str, address: str, steps: list[JSON]) -> JSON:
    """The rollout-groups ISVC with ``authRef`` on its canary's Prometheus."""
    body = isvc_body(namespace, 2, steps, prometheus=address)
    canary = body["spec"]["rollout"]["groups"][0]["canary"]
    canary["prometheus"]["authRef"] = {"name": SECRET}
    return body


async def create_secret(kube: KubeClient, namespace: str, username: str,
                        password: str, *, marked: bool = True) -> None:
    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    labels = {ANALYSIS_CREDENTIALS_LABEL: "true"} if marked else {}
    await kube.create(SECRETS, {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/basic-auth",
        "metadata": {"name": SECRET, "namespace": namespace, "labels": labels},
        "data": {"username": b64(username), "password": b64(password)},
    }, namespace)


async def status_without(server: PrometheusServer, headers: dict[str, str]) -> int:
    async with aiohttp.ClientSession() as s, s.get(
            f"{server.url}/api/v1/query", params={"query": "up"}, headers=headers) as resp:
        return resp.status


async def test_the_authref_secret_s_credentials_let_a_passing_analysis_promote_the_canary(
    kube: KubeClient, namespace: str, start_manager: Any,
    service_crds_applied: list[str], prometheus_with_auth: tuple[PrometheusServer, Metrics],
) -> None:
    server, metrics = prometheus_with_auth
    assert await status_without(server, {}) == 401  # the analysis needs the Secret
    assert await status_without(server, {"Authorization": AUTH.header()}) == 200
    metrics.error_rate = 0.01  # below the 0.05 threshold
    await create_secret(kube, namespace, USERNAME, PASSWORD)
    await start_manager()
    old = await start_stable(kube, namespace, auth_body(namespace, server.url, ANALYSIS_STEPS),
                             2)
    await change_image(kube, namespace, "example.com/llm:2")

    isvc = await stable_on_canary(kube, namespace, old)
    for c in MEMBERS:
        assert traffic(isvc, c) == {f"pd-{c}-rev-{hash_of(group(isvc)['stable'][c])}": 100}
    reasons = await posted(kube, namespace, {"CanaryAnalysisPassed": 1})
    assert any("errors=0.01 LT 0.05" in m for m in reasons.get("CanaryAnalysisPassed", [])), \
        sorted(reasons)
    # a round before Prometheus's first scrape may be "no data"; none failed on credentials
    held = reasons.get("CanaryAnalysisInconclusive", [])
    assert not any("authRef" in m or "HTTP 401" in m for m in held), held


# an error round is inconclusive: roll back on the first one (the default, Hold, would wait)
ROLLBACK_STEPS = copy.deepcopy(ANALYSIS_STEPS)
ROLLBACK_STEPS[0]["analysis"]["onInconclusive"] = "Rollback"


@pytest.mark.parametrize(("password", "marked", "why"), [
    (None, True, f"errors: error: authRef secret {SECRET} not found"),
    ("not-the-password", True, "errors: error: HTTP 401: Unauthorized"),
    # the right password, but the Secret's owner never let the manager send it anywhere
    (PASSWORD, False, f"errors: error: authRef secret {SECRET} is not marked for analysis"),
], ids=["missing-secret", "wrong-password", "unmarked-secret"])
async def test_an_analysis_prometheus_refuses_rolls_the_canary_back_and_says_why(
    kube: KubeClient, namespace: str, start_manager: Any,
    service_crds_applied: list[str], prometheus_with_auth: tuple[PrometheusServer, Metrics],
    password: str | None, marked: bool, why: str,
) -> None:
    server, metrics = prometheus_with_auth
    metrics.error_rate = 0.01  # would pass, were the query let in
    if password is not None:
        await create_secret(kube, namespace, USERNAME, password, marked=marked)
    await start_manager()
    old = await start_stable(kube, namespace, auth_body(namespace, server.url, ROLLBACK_STEPS),
                             2)
    await change_image(kube, namespace, "example.com/llm:2")

    isvc = await back_on_stable(kube, namespace, old, 2)
    assert group(isvc)["failure"] == "AnalysisInconclusive"
    assert_canary_at_zero(isvc, old)
    reasons = await posted(kube, namespace, {"RolloutRolledBack": 1,
                                             "CanaryAnalysisInconclusive": 1})
    assert "RolloutRolledBack" in reasons and "CanaryAnalysisPassed" not in reasons, \
        sorted(reasons)
    messages = reasons.get("CanaryAnalysisInconclusive", [])
    assert any(why in m for m in messages), messages
    assert not any(PASSWORD in m or "not-the-password" in m for ms in reasons.values()
                   for m in ms)

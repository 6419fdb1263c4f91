"""The API client reads the proxy environment once, not on every request.

kubernetes-asyncio's aiohttp session trusts the environment, so aiohttp looked up
``~/.netrc`` and the proxy variables in a worker thread for every call the manager made.
"""

from __future__ import annotations

from typing import Any

import aiohttp.client
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client as k8s_client

from omenative_controller.kube.client import KubeClient, env_read_once


def _config(host: str) -> k8s_client.Configuration:
    cfg = k8s_client.Configuration()
    cfg.host = host
    return cfg


async def test_requests_make_no_environment_lookups(monkeypatch: pytest.MonkeyPatch) -> None:
    looked: list[str] = []

    def lookup(*args: Any, **_: Any) -> Any:
        looked.append(str(args[0]) if args else "netrc")
        raise LookupError

    monkeypatch.setattr(aiohttp.client, "get_env_proxy_for_url", lookup)
    monkeypatch.setattr(aiohttp.client, "netrc_from_env", lambda: looked.append("netrc"))

    async def api(_: web.Request) -> web.Response:
        return web.json_response({"kind": "APIVersions"})

    app = web.Application()
    app.router.add_get("/api", api)
    async with TestServer(app) as server:
        client = KubeClient(env_read_once(_config(str(server.make_url("")).rstrip("/"))))
        looked.clear()  # what connecting did
        try:
            for _ in range(3):
                assert (await client.request("GET", "/api", verb="get",
                                             resource="discovery"))["kind"] == "APIVersions"
        finally:
            await client.close()
    assert looked == []


async def test_the_environments_proxy_for_the_api_server_is_still_used(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    api = env_read_once(_config("https://kube.example:6443"))
    assert api.configuration.proxy == "http://proxy.example:3128"
    await api.close()
    bypassed = env_read_once(_config("https://api.internal.example:6443"))
    assert not bypassed.configuration.proxy
    await bypassed.close()

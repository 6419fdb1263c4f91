"""The API client reads the proxy environment once, not on every request.

kubernetes-asyncio's aiohttp session trusts the environment, so aiohttp looked up
``~/.netrc`` and the proxy variables in a worker thread for every call the manager made.
"""

from __future__ import annotations

import json
import ssl
from asyncio import sslproto
from pathlib import Path
from typing import Any

import aiohttp.client
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client as k8s_client
from test_webhook import self_signed

from omenative_controller.kube.client import TLS_READ_BUFFER, KubeClient, env_read_once
from omenative_controller.kube.turns import Turns


def _config(host: str) -> k8s_client.Configuration:
    cfg = k8s_client.Configuration()
    cfg.host = host
    return cfg


def _discovery_app() -> web.Application:
    """An API server that answers ``GET /api`` only."""
    async def api(_: web.Request) -> web.Response:
        return web.json_response({"kind": "APIVersions"})

    app = web.Application()
    app.router.add_get("/api", api)
    return app


async def test_requests_make_no_environment_lookups(monkeypatch: pytest.MonkeyPatch) -> None:
    looked: list[str] = []

    def lookup(*args: Any, **_: Any) -> Any:
        looked.append(str(args[0]) if args else "netrc")
        raise LookupError

    monkeypatch.setattr(aiohttp.client, "get_env_proxy_for_url", lookup)
    monkeypatch.setattr(aiohttp.client, "netrc_from_env", lambda: looked.append("netrc"))

    async with TestServer(_discovery_app()) as server:
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


async def test_tls_connections_keep_small_read_buffers_and_still_read_big_bodies(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 36: asyncio keeps a zeroed 256 KiB read buffer per TLS connection (46 of them:
    # 11.5 MB of the manager's peak on KWOK); the manager's client asks for 32 KiB
    monkeypatch.setattr(sslproto.SSLProtocol, "max_size", 256 * 1024)  # asyncio's default
    buffers: list[int] = []
    made = sslproto.SSLProtocol.__init__

    def spy(self: sslproto.SSLProtocol, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        buffers.append(len(self._ssl_buffer))  # type: ignore[attr-defined]

    monkeypatch.setattr(sslproto.SSLProtocol, "__init__", spy)
    items = [{"metadata": {"name": f"pod-{i}"}, "spec": {"x": "y" * 100}} for i in range(8000)]

    async def pods(_: web.Request) -> web.Response:
        return web.json_response({"kind": "PodList", "items": items})

    app = web.Application()
    app.router.add_get("/api/v1/pods", pods)
    cert, key = self_signed(tmp_path)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(str(cert), str(key))
    server = TestServer(app, host="127.0.0.1")
    await server.start_server(ssl=tls)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": f"https://127.0.0.1:{server.port}",
                                               "certificate-authority": str(cert)}}],
        "users": [{"name": "t", "user": {"token": "x"}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}]}))
    try:
        client = await KubeClient.connect(str(kubeconfig))
        try:
            got = await client.request("GET", "/api/v1/pods", verb="list", resource="pods")
        finally:
            await client.close()
    finally:
        await server.close()
    assert len(json.dumps(got)) > 1_000_000 and got["items"] == items
    assert buffers and set(buffers) == {TLS_READ_BUFFER}


class CountedTurns(Turns):
    """Turns that count the sections given one."""

    def __init__(self, budget: float = 0.002) -> None:
        super().__init__(budget)
        self.taken = 0

    async def take(self, *, alone: bool = False) -> None:
        self.taken += 1
        await super().take(alone=alone)


async def test_answers_resume_their_callers_in_turns_but_the_lease_never_waits() -> None:
    async with TestServer(_discovery_app()) as server:
        client = KubeClient(env_read_once(_config(str(server.make_url("")).rstrip("/"))))
        turns = client.turns = CountedTurns()
        try:
            for _ in range(3):  # the reconcilers' calls: rate limited, resumed in a turn
                assert (await client.request("GET", "/api", verb="get",
                                             resource="discovery"))["kind"] == "APIVersions"
            assert turns.taken == 3
            # a Lease renewal (not rate limited) answers without waiting for a turn
            await client.request("GET", "/api", verb="get", resource="leases",
                                 rate_limited=False)
            assert turns.taken == 3
        finally:
            await client.close()

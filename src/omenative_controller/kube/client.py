"""A thin, typed, raw-JSON client over kubernetes-asyncio's ``ApiClient``.

Every call goes through :meth:`KubeClient.request`: it waits for the rate limiter, always
sets a request timeout, reads the body as JSON (``_preload_content=False``: no generated
models), checks the status code itself (the 36.1.0 wheel does not raise on non-2xx when
content is not preloaded) and raises :class:`ApiError`, and reports every call (reads
included) to the observer for the ``omenative_api_requests_total`` and
``omenative_api_writes_total`` metrics.

Create clients inside the running loop (the aiohttp session binds to it).
"""

from __future__ import annotations

import asyncio.sslproto
import contextlib
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal, Protocol, cast

import aiohttp
import aiohttp.helpers
import yarl

from omenative_controller.kube import lazy_import, wire_json
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.ratelimit import TokenBucket
from omenative_controller.kube.resources import Resource
from omenative_controller.kube.turns import Turns

lazy_import.install()  # before the first import of kubernetes-asyncio

from kubernetes_asyncio import client as k8s_client  # noqa: E402
from kubernetes_asyncio import config as k8s_config  # noqa: E402

__all__ = [
    "JSON",
    "ApiObserver",
    "KubeClient",
    "PatchType",
    "env_read_once",
    "load_configuration",
    "small_tls_buffers",
]

JSON = dict[str, Any]
"""A JSON object as read from the API server."""

PatchType = Literal["merge", "strategic", "json"]
"""Patch flavours: JSON merge patch, strategic merge patch (built-in kinds), JSON patch."""

_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}
_WRITE_VERBS = frozenset({"create", "update", "patch", "delete"})
USER_AGENT = "omenative-manager/0.1"

TLS_READ_BUFFER = 32 * 1024
"""Bytes asyncio's TLS protocol reads at a time, and keeps as a buffer per connection.

asyncio's default is 256 KiB, allocated zeroed (resident) for every TLS connection: the
manager's pool of up to 64 connections (its watches and up to ``--max-inflight`` calls)
held 12-16 MiB of such buffers (issue 36, measured on KWOK: 46 connections, 11.5 MB). A TLS
record is at most 16 KiB, so 32 KiB still takes two records a read; a 1 MB LIST page is 32
reads instead of 4."""


def small_tls_buffers(size: int = TLS_READ_BUFFER) -> None:
    """Make the TLS connections opened from now on keep ``size``-byte read buffers (a
    process-wide setting of asyncio's ``SSLProtocol``; never raised, only lowered)."""
    asyncio.sslproto.SSLProtocol.max_size = min(asyncio.sslproto.SSLProtocol.max_size, size)


class ApiObserver(Protocol):
    """Receives one call per API request (metrics)."""

    def api_request(self, verb: str, resource: str, code: str, seconds: float) -> None:
        """A request finished with HTTP ``code`` (or ``timeout`` / ``error``)."""


class _NullObserver:
    def api_request(self, verb: str, resource: str, code: str, seconds: float) -> None:
        return None


async def load_configuration(
    kubeconfig: str | None = None, context: str | None = None
) -> k8s_client.Configuration:
    """A client Configuration from ``kubeconfig`` (if given), else in-cluster, else default.

    With no path: the in-cluster service account when ``KUBERNETES_SERVICE_HOST`` is set,
    otherwise ``$KUBECONFIG`` / ``~/.kube/config``.
    """
    cfg = k8s_client.Configuration()
    if kubeconfig:
        await k8s_config.load_kube_config(
            config_file=kubeconfig, context=context, client_configuration=cfg,
            persist_config=False,
        )
        return cfg
    try:
        k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        return cfg
    except k8s_config.ConfigException:
        pass
    await k8s_config.load_kube_config(
        context=context, client_configuration=cfg, persist_config=False
    )
    return cfg


def env_read_once(cfg: k8s_client.Configuration) -> k8s_client.ApiClient:
    """An ``ApiClient`` that reads the proxy environment once, here, not on every request.

    kubernetes-asyncio opens its aiohttp session with ``trust_env=True``, so aiohttp looks
    up ``~/.netrc`` and the proxy variables for *every* request, each time in a worker
    thread (two thread hand-offs and two file lookups per call: ~5 % of the manager's CPU
    under the controller benchmark, and a wait on the thread pool on the way to every
    write). The API server's proxy, if the environment names one, is set on the
    configuration instead; netrc credentials never applied (the client authenticates with
    its own header, which aiohttp refuses to combine with netrc's).
    """
    if not cfg.proxy and cfg.host:
        with contextlib.suppress(LookupError, ValueError):
            proxy, auth = aiohttp.helpers.get_env_proxy_for_url(yarl.URL(cfg.host))
            cfg.proxy = str(proxy)
            if auth is not None:
                cfg.proxy_headers = {"Proxy-Authorization": auth.encode()}
    api = k8s_client.ApiClient(cfg)
    session = api.rest_client.pool_manager
    session._trust_env = False  # no public setter; the proxy was read once above
    return api


def _resource_label(res: Resource, subresource: str | None) -> str:
    return f"{res.plural}/{subresource}" if subresource else res.plural


class KubeClient:
    """Raw-JSON API calls with a rate limit, timeouts, metrics and :class:`ApiError`."""

    def __init__(
        self,
        api: k8s_client.ApiClient,
        *,
        limiter: TokenBucket | None = None,
        timeout: float = 30.0,
        observer: ApiObserver | None = None,
    ) -> None:
        self.api = api
        self.limiter = limiter or TokenBucket(0, 1)
        self.timeout = timeout
        self.observer: ApiObserver = observer or _NullObserver()
        #: when set, a rate-limited call's answer is parsed and its caller resumed in a turn
        #: (``kube/turns.py``): answers arriving together do not resume together
        self.turns: Turns | None = None
        api.user_agent = USER_AGENT

    @classmethod
    async def connect(
        cls,
        kubeconfig: str | None = None,
        *,
        context: str | None = None,
        qps: float = 50.0,
        burst: int = 100,
        timeout: float = 30.0,
        observer: ApiObserver | None = None,
    ) -> KubeClient:
        """Load the configuration and open a client (call inside the running loop)."""
        small_tls_buffers()
        cfg = await load_configuration(kubeconfig, context)
        # Several watches hold a connection each: keep room for ordinary calls.
        cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, 64)
        return cls(
            env_read_once(cfg),
            limiter=TokenBucket(qps, burst),
            timeout=timeout,
            observer=observer,
        )

    async def close(self) -> None:
        """Close the HTTP session."""
        await self.api.close()

    # ------------------------------------------------------------------ the one call path

    async def _send(
        self,
        method: str,
        path: str,
        *,
        verb: str,
        resource: str,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str | None = None,
        timeout: aiohttp.ClientTimeout | None = None,
        rate_limited: bool = True,
    ) -> aiohttp.ClientResponse:
        if rate_limited:
            await self.limiter.acquire()
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        started = time.monotonic()
        try:
            resp = await self.api.call_api(
                path,
                method,
                query_params=list(query),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout or aiohttp.ClientTimeout(total=self.timeout),
            )
        except TimeoutError as exc:
            self.observer.api_request(verb, resource, "timeout", time.monotonic() - started)
            raise ApiError(0, "Timeout", f"{method} {path}: no answer in time") from exc
        except aiohttp.ClientError as exc:
            self.observer.api_request(verb, resource, "error", time.monotonic() - started)
            raise ApiError(0, "ConnectionError", f"{method} {path}: {exc}") from exc
        self.observer.api_request(verb, resource, str(resp.status), time.monotonic() - started)
        return cast(aiohttp.ClientResponse, resp)

    async def request(
        self,
        method: str,
        path: str,
        *,
        verb: str,
        resource: str,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str | None = None,
        timeout: float | None = None,
        rate_limited: bool = True,
    ) -> JSON:
        """Send one request; return the JSON body of a 2xx answer, raise ApiError otherwise."""
        client_timeout = aiohttp.ClientTimeout(total=timeout or self.timeout)
        resp = await self._send(
            method, path, verb=verb, resource=resource, query=query, body=body,
            content_type=content_type, timeout=client_timeout, rate_limited=rate_limited,
        )
        try:
            raw = await resp.read()
        except TimeoutError as exc:
            raise ApiError(0, "Timeout", f"{method} {path}: body not read in time") from exc
        except aiohttp.ClientError as exc:
            raise ApiError(0, "ConnectionError", f"{method} {path}: {exc}") from exc
        finally:
            resp.release()
        if rate_limited and self.turns is not None:
            await self.turns.take()  # the parse and the caller's next steps share the loop
        data: Any
        try:
            data = wire_json.loads(raw) if raw else {}
        except ValueError:
            data = raw.decode("utf-8", "replace")
        if not 200 <= resp.status <= 299:
            raise ApiError.from_response(resp.status, data)
        if not isinstance(data, dict):
            raise ApiError(resp.status, "BadResponse", f"{method} {path}: not a JSON object")
        return data

    # ------------------------------------------------------------------ typed verbs

    async def get(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        timeout: float | None = None,
        rate_limited: bool = True,
    ) -> JSON:
        """GET one object."""
        return await self.request(
            "GET", res.path(namespace, name, subresource), verb="get",
            resource=_resource_label(res, subresource), timeout=timeout,
            rate_limited=rate_limited,
        )

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        timeout: float | None = None,
    ) -> JSON:
        """One page of a LIST (``metadata.continue`` names the next page)."""
        query: list[tuple[str, str]] = []
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        if limit:
            query.append(("limit", str(limit)))
        if continue_token:
            query.append(("continue", continue_token))
        if resource_version is not None:
            query.append(("resourceVersion", resource_version))
        return await self.request(
            "GET", res.path(namespace), verb="list", resource=res.plural, query=query,
            timeout=timeout,
        )

    async def create(
        self, res: Resource, body: Mapping[str, Any], namespace: str | None = None,
        *, timeout: float | None = None, rate_limited: bool = True,
    ) -> JSON:
        """POST a new object."""
        return await self.request(
            "POST", res.path(namespace), verb="create", resource=res.plural, body=dict(body),
            content_type="application/json", timeout=timeout, rate_limited=rate_limited,
        )

    async def replace(
        self,
        res: Resource,
        name: str,
        body: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        timeout: float | None = None,
        rate_limited: bool = True,
    ) -> JSON:
        """PUT an object (its ``metadata.resourceVersion`` is the precondition)."""
        return await self.request(
            "PUT", res.path(namespace, name, subresource), verb="update",
            resource=_resource_label(res, subresource), body=dict(body),
            content_type="application/json", timeout=timeout, rate_limited=rate_limited,
        )

    async def patch(
        self,
        res: Resource,
        name: str,
        body: Any,
        namespace: str | None = None,
        *,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
        timeout: float | None = None,
        dry_run: bool = False,
    ) -> JSON:
        """PATCH with an explicit content type (never the client's guess); ``dry_run``: the
        API server validates and admits it (webhooks included) but stores nothing."""
        return await self.request(
            "PATCH", res.path(namespace, name, subresource), verb="patch",
            resource=_resource_label(res, subresource), body=body,
            query=(("dryRun", "All"),) if dry_run else (),
            content_type=_CONTENT_TYPES[patch_type], timeout=timeout,
        )

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        grace_period_seconds: int | None = None,
        propagation: str | None = "Background",
        timeout: float | None = None,
    ) -> JSON:
        """DELETE, with UID / resourceVersion preconditions when given."""
        options: JSON = {"kind": "DeleteOptions", "apiVersion": "v1"}
        pre: JSON = {}
        if uid:
            pre["uid"] = uid
        if resource_version:
            pre["resourceVersion"] = resource_version
        if pre:
            options["preconditions"] = pre
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if propagation:
            options["propagationPolicy"] = propagation
        return await self.request(
            "DELETE", res.path(namespace, name), verb="delete", resource=res.plural,
            body=options, content_type="application/json", timeout=timeout,
        )

    @contextlib.asynccontextmanager
    async def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
        read_timeout: float = 120.0,
    ) -> AsyncIterator[AsyncIterator[JSON]]:
        """Open a WATCH from ``resource_version`` with bookmarks; yield its event iterator.

        The server ends the stream after ``timeout_seconds``; ``read_timeout`` bounds the
        silence between two lines (bookmarks arrive about once a minute), so a half-open
        connection cannot hang the informer. A non-200 answer raises :class:`ApiError`
        (410 included); errors inside the stream reach the caller as ERROR events or
        aiohttp exceptions.
        """
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        if label_selector:
            query.append(("labelSelector", label_selector))
        resp = await self._send(
            "GET", res.path(namespace), verb="watch", resource=res.plural, query=query,
            timeout=aiohttp.ClientTimeout(
                sock_connect=self.timeout, sock_read=read_timeout,
                total=timeout_seconds + read_timeout,
            ),
        )
        try:
            if resp.status != 200:
                raw = await resp.read()
                try:
                    data: Any = wire_json.loads(raw) if raw else {}
                except ValueError:
                    data = raw.decode("utf-8", "replace")
                raise ApiError.from_response(resp.status, data)
            yield _events(resp)
        finally:
            resp.close()


async def _events(resp: aiohttp.ClientResponse) -> AsyncIterator[JSON]:
    async for raw in resp.content:
        line = raw.strip()
        if not line:
            continue
        try:
            event = wire_json.loads(line)
        except ValueError:
            text = line[:200].decode("utf-8", "replace")
            event = {"type": "ERROR", "object": {"kind": "Status", "code": 0, "message": text}}
        if isinstance(event, dict):
            yield event

"""A small fault-injecting reverse proxy between a client (the manager) and the real API server.

The proxy listens on plain HTTP on a free port of 127.0.0.1 and forwards every request over
TLS to the kube-apiserver named in a kubeconfig, with that kubeconfig's CA and credentials
(bearer token, or client certificate). Responses are streamed, so watches work. The client
gets a kubeconfig of its own pointing at the proxy (:meth:`FaultProxy.write_kubeconfig`);
whatever credentials it sends are replaced by the proxy's.

On command it can:

* answer matching requests (by verb and path regex, all of them or a fraction) with a
  Kubernetes ``Status`` error (500, 409, ...) for a while, without forwarding them, or
  *after* forwarding them (the write happened; the client only sees the error):
  :meth:`FaultProxy.inject`;
* drop every open watch stream, abruptly (the TCP connection is cut mid-stream, possibly
  mid-line: the client sees a broken chunked body) or cleanly (after the last whole event,
  as on a server timeout): :meth:`FaultProxy.drop_watches`;
* end every open watch stream with an ``ERROR`` event carrying a 410 ``Expired`` Status, as
  the API server does when the watch's resourceVersion was compacted:
  :meth:`FaultProxy.expire_watches` (a 410 at the start of a watch is an ordinary
  :meth:`FaultProxy.inject` rule with ``verbs={"watch"}``);
* count requests by verb (``counts``), errors injected by (verb, status) (``injected``), and
  keep a short record of every request (``log``).

Verbs are the API server's: ``get``, ``list``, ``watch``, ``create``, ``update``, ``patch``,
``delete``, ``deletecollection``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import random
import re
import ssl
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web
from attrs import define, field
from yarl import URL

__all__ = ["FaultProxy", "FaultRule", "RequestRecord", "fault_proxy", "request_verb"]

_HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
    "trailers", "transfer-encoding", "upgrade", "host", "content-length", "authorization",
    "accept-encoding", "content-encoding",
})

_REASONS = {
    400: "BadRequest", 403: "Forbidden", 404: "NotFound", 409: "Conflict", 410: "Expired",
    422: "Invalid", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
    504: "Timeout",
}


def request_verb(method: str, path: str, query: dict[str, str] | Any) -> str:
    """The API server's verb for a request (``watch`` for ``GET ...?watch=true``)."""
    method = method.upper()
    segments = [s for s in path.split("/") if s]
    if segments[:1] == ["api"]:
        rest = segments[2:]
    elif segments[:1] == ["apis"]:
        rest = segments[3:]
    else:
        rest = []
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    named = len(rest) >= 2
    if method == "GET":
        if str(query.get("watch", "")).lower() in ("true", "1"):
            return "watch"
        return "get" if named else "list"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if named else "deletecollection"
    return method.lower()


@define
class FaultRule:
    """Answer matching requests with ``status`` until ``until`` (monotonic; None: forever)."""

    status: int
    verbs: frozenset[str] | None = None
    path: re.Pattern[str] | None = None
    fraction: float = 1.0
    until: float | None = None
    #: forward the request first (the server applies it), then answer the error
    after_forward: bool = False
    reason: str = ""
    message: str = ""
    #: answer at most this many requests (None: no limit)
    times: int | None = None
    hits: int = 0

    def active(self, now: float) -> bool:
        """Still in force."""
        return (self.until is None or now < self.until) and (
            self.times is None or self.hits < self.times)

    def matches(self, verb: str, path: str) -> bool:
        """The request is one this rule is about (before the fraction is drawn)."""
        if self.verbs is not None and verb not in self.verbs:
            return False
        return self.path is None or self.path.search(path) is not None

    def body(self) -> dict[str, Any]:
        """The ``Status`` object sent back."""
        reason = self.reason or _REASONS.get(self.status, "InternalError")
        return _status(self.status, reason,
                       self.message or f"injected by the fault proxy: {self.status} {reason}")


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


@define
class RequestRecord:
    """One request seen by the proxy."""

    at: float
    verb: str
    method: str
    path: str
    status: int
    injected: bool


@define(eq=False)
class _Watch:
    upstream: aiohttp.ClientResponse
    request: web.Request
    abrupt: bool = True
    expire: bool = False
    dropped: bool = False


@define
class FaultProxy:
    """Reverse proxy in front of the API server of ``kubeconfig`` (see the module doc)."""

    kubeconfig: Path
    seed: int = 0
    #: every request, in arrival order (verb, path, status, injected)
    log: list[RequestRecord] = field(factory=list)
    counts: Counter[str] = field(factory=Counter)
    injected: Counter[tuple[str, int]] = field(factory=Counter)
    watches_dropped: int = 0
    watches_expired: int = 0
    rules: list[FaultRule] = field(factory=list)
    upstream_url: str = ""
    port: int = 0
    _rng: random.Random = field(factory=random.Random)
    _headers: dict[str, str] = field(factory=dict)
    _session: aiohttp.ClientSession | None = None
    _runner: web.AppRunner | None = None
    _watches: set[_Watch] = field(factory=set)
    _tmp: tempfile.TemporaryDirectory[str] | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> FaultProxy:
        """Read the kubeconfig, open the upstream session, listen on a free port."""
        self._rng.seed(self.seed)
        cfg = yaml.safe_load(self.kubeconfig.read_text())
        ctx_name = cfg.get("current-context")
        ctx = next(c["context"] for c in cfg["contexts"]
                   if ctx_name is None or c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
        user = next((u["user"] for u in cfg.get("users") or () if u["name"] == ctx.get("user")),
                    {})
        self.upstream_url = str(cluster["server"]).rstrip("/")
        self._tmp = tempfile.TemporaryDirectory(prefix="faultproxy-")
        tmp = Path(self._tmp.name)
        sslctx = ssl.create_default_context()
        if cluster.get("certificate-authority-data"):
            sslctx.load_verify_locations(
                cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        elif cluster.get("certificate-authority"):
            sslctx.load_verify_locations(cafile=self._rel(cluster["certificate-authority"]))
        if cluster.get("insecure-skip-tls-verify"):
            sslctx.check_hostname = False
            sslctx.verify_mode = ssl.CERT_NONE
        cert = self._material(user, "client-certificate", tmp / "client.crt")
        key = self._material(user, "client-key", tmp / "client.key")
        if cert and key:
            sslctx.load_cert_chain(cert, key)
        token = user.get("token")
        if not token and user.get("tokenFile"):
            token = Path(self._rel(user["tokenFile"])).read_text().strip()
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        elif user.get("username"):
            basic = base64.b64encode(f"{user['username']}:{user.get('password', '')}".encode())
            self._headers["Authorization"] = f"Basic {basic.decode()}"
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=sslctx, limit=0),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            auto_decompress=True,
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server  # the only way aiohttp exposes the bound port
        assert server is not None
        self.port = int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]
        return self

    def _rel(self, path: str) -> str:
        p = Path(path)
        return str(p if p.is_absolute() else self.kubeconfig.parent / p)

    def _material(self, user: dict[str, Any], key: str, dest: Path) -> str | None:
        if user.get(f"{key}-data"):
            dest.write_bytes(base64.b64decode(user[f"{key}-data"]))
            dest.chmod(0o600)
            return str(dest)
        if user.get(key):
            return self._rel(user[key])
        return None

    async def stop(self) -> None:
        """Close every stream, stop listening, close the upstream session."""
        self.rules.clear()
        for w in list(self._watches):
            w.upstream.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    async def __aenter__(self) -> FaultProxy:
        return await self.start()

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    def write_kubeconfig(self, path: Path) -> Path:
        """A kubeconfig for the client, pointing at the proxy (plain HTTP)."""
        cfg = {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "faultproxy", "cluster": {"server": self.url}}],
            "users": [{"name": "via-proxy", "user": {"token": "replaced-by-the-proxy"}}],
            "contexts": [{"name": "faultproxy",
                          "context": {"cluster": "faultproxy", "user": "via-proxy"}}],
            "current-context": "faultproxy",
        }
        path.write_text(json.dumps(cfg, indent=2) + "\n")
        return path

    # ------------------------------------------------------------------ commands

    def inject(
        self,
        status: int,
        *,
        verbs: Iterable[str] | None = None,
        path: str | None = None,
        fraction: float = 1.0,
        duration: float | None = None,
        times: int | None = None,
        after_forward: bool = False,
        reason: str = "",
        message: str = "",
    ) -> FaultRule:
        """Answer matching requests with ``status`` for ``duration`` seconds and at most
        ``times`` times (None: until :meth:`clear`). ``path`` is a regex searched in the URL
        path (no query); ``fraction`` of the matching requests are answered."""
        rule = FaultRule(
            status=status, verbs=frozenset(verbs) if verbs is not None else None,
            path=re.compile(path) if path else None, fraction=fraction,
            until=None if duration is None else time.monotonic() + duration,
            after_forward=after_forward, reason=reason, message=message, times=times,
        )
        self.rules.append(rule)
        return rule

    def clear(self, rule: FaultRule | None = None) -> None:
        """Remove one rule, or every rule."""
        if rule is None:
            self.rules.clear()
        elif rule in self.rules:
            self.rules.remove(rule)

    def faults_active(self) -> bool:
        """Any rule still in force."""
        now = time.monotonic()
        return any(r.active(now) for r in self.rules)

    def drop_watches(self, *, abrupt: bool = True) -> int:
        """Close every open watch stream now; return how many. ``abrupt`` cuts the client's
        connection mid-body; otherwise the stream ends cleanly (as a server timeout)."""
        return self._end_watches(abrupt=abrupt, expire=False)

    def expire_watches(self) -> int:
        """End every open watch stream with an ERROR 410 Expired event; return how many."""
        return self._end_watches(abrupt=False, expire=True)

    def _end_watches(self, *, abrupt: bool, expire: bool) -> int:
        n = 0
        for w in list(self._watches):
            if w.dropped:
                continue
            w.dropped = True
            w.abrupt = abrupt
            w.expire = expire
            w.upstream.close()
            n += 1
        if expire:
            self.watches_expired += n
        else:
            self.watches_dropped += n
        return n

    @property
    def open_watches(self) -> int:
        """Watch streams being forwarded now."""
        return sum(1 for w in self._watches if not w.dropped)

    def count(self, verb: str, path: str | None = None, *, injected: bool | None = None) -> int:
        """Requests of ``verb`` (and matching ``path`` regex / injected flag) seen so far."""
        pat = re.compile(path) if path else None
        return sum(1 for r in self.log if r.verb == verb
                   and (pat is None or pat.search(r.path))
                   and (injected is None or r.injected == injected))

    # ------------------------------------------------------------------ forwarding

    def _pick_rule(self, verb: str, path: str) -> FaultRule | None:
        now = time.monotonic()
        self.rules[:] = [r for r in self.rules if r.active(now)]
        for rule in self.rules:
            if rule.matches(verb, path) and (
                    rule.fraction >= 1.0 or self._rng.random() < rule.fraction):
                return rule
        return None

    def _record(self, verb: str, request: web.Request, status: int, injected: bool) -> None:
        self.log.append(RequestRecord(time.monotonic(), verb, request.method, request.path,
                                      status, injected))
        if injected:
            self.injected[(verb, status)] += 1

    def _error(self, rule: FaultRule, verb: str, request: web.Request) -> web.Response:
        rule.hits += 1
        self._record(verb, request, rule.status, True)
        return web.json_response(rule.body(), status=rule.status)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        verb = request_verb(request.method, request.path, request.query)
        self.counts[verb] += 1
        rule = self._pick_rule(verb, request.path)
        if rule is not None and not rule.after_forward:
            return self._error(rule, verb, request)
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        headers.update(self._headers)
        url = URL(self.upstream_url + request.raw_path, encoded=True)
        timeout = (aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=None)
                   if verb == "watch" else aiohttp.ClientTimeout(total=60, sock_connect=10))
        try:
            upstream = await self._session.request(
                request.method, url, headers=headers, data=body or None, timeout=timeout,
                allow_redirects=False,
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            self._record(verb, request, 502, False)
            return web.json_response(
                {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 502,
                 "reason": "BadGateway", "message": f"fault proxy: upstream: {exc!r}"},
                status=502)
        if rule is not None:  # after_forward: the server did it; the client hears an error
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                await upstream.read()
            upstream.release()
            return self._error(rule, verb, request)
        out_headers = {k: v for k, v in upstream.headers.items()
                       if k.lower() not in _HOP_BY_HOP}
        if verb != "watch" or upstream.status != 200:
            try:
                data = await upstream.read()
            except (aiohttp.ClientError, TimeoutError) as exc:
                self._record(verb, request, 502, False)
                return web.json_response(
                    {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 502,
                     "reason": "BadGateway", "message": f"fault proxy: upstream: {exc!r}"},
                    status=502)
            finally:
                upstream.release()
            self._record(verb, request, upstream.status, False)
            return web.Response(body=data, status=upstream.status, headers=out_headers)
        return await self._stream(verb, request, upstream, out_headers)

    async def _stream(self, verb: str, request: web.Request, upstream: aiohttp.ClientResponse,
                      headers: dict[str, str]) -> web.StreamResponse:
        self._record(verb, request, upstream.status, False)
        resp = web.StreamResponse(status=upstream.status, headers=headers)
        resp.enable_chunked_encoding()
        watch = _Watch(upstream, request)
        self._watches.add(watch)
        try:
            await resp.prepare(request)
            pending = b""  # the start of an event line not yet forwarded
            try:
                async for chunk in upstream.content.iter_any():
                    if watch.dropped:
                        break
                    whole, newline, pending = (pending + chunk).rpartition(b"\n")
                    if newline:
                        await resp.write(whole + newline)
            except (aiohttp.ClientError, TimeoutError, ConnectionError):
                pass  # upstream closed (by drop_watches, or the server went away)
            if watch.dropped and watch.abrupt:
                with contextlib.suppress(ConnectionError, RuntimeError):
                    if pending:
                        await resp.write(pending)  # half an event, then the cut
                transport = request.transport
                if transport is not None:
                    transport.abort()  # cut mid-body: the client sees a broken stream
                return resp
            with contextlib.suppress(ConnectionError, RuntimeError):
                if pending and not watch.dropped:
                    await resp.write(pending)  # the server's own last bytes
                if watch.expire:
                    event = {"type": "ERROR", "object": _status(
                        410, "Expired", "too old resource version (expired by the fault proxy)")}
                    await resp.write(json.dumps(event).encode() + b"\n")
                await resp.write_eof()
            return resp
        except (ConnectionError, asyncio.CancelledError):
            # the client went away (or the proxy is stopping)
            raise
        finally:
            self._watches.discard(watch)
            upstream.close()


@contextlib.asynccontextmanager
async def fault_proxy(kubeconfig: Path, *, seed: int = 0) -> AsyncIterator[FaultProxy]:
    """``async with fault_proxy(path) as proxy:`` (started, stopped at the end)."""
    proxy = FaultProxy(kubeconfig, seed=seed)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()

"""A load generator that measures what users of a rollout see: answers and failed requests.

Theory of operation:

1. Requests leave on a fixed schedule (``rate`` per second, request *k* at ``k / rate``
   seconds), whatever the answers do, so a slow or dead backend shows as failures, not as
   a lower send rate. The run is bounded twice: ``duration`` seconds and ``max_requests``.
2. Half of the requests (``keepalive_share``) use a small pool of kept-alive connections, the
   others open a new connection each (``Connection: close``). Through a ClusterIP, kube-proxy
   picks a backend per connection, so the new ones follow the Service's endpoints at once and
   the kept-alive ones stay on their pod until it closes them: both are what clients do.
3. A **failed request** gets no answer in ``timeout`` seconds (``no-answer``), a connection
   error (``connection-error``: refused, reset, closed without an answer) or a non-2xx status
   (``status``). The only retry is the one an HTTP client makes: a request on a *reused*
   connection that the server closed before any byte of the answer came is sent once more on
   a new connection (it cannot tell whether the server saw it; Go's net/http, aiohttp and
   curl all do this for idempotent requests).
4. Every outcome keeps its start, its end and which connection kind carried it; an answer
   keeps what the server said it is (revision, Instance index, pod), parsed from its JSON
   body. The report (``omenative_devcluster.traffic_report``) is computed from them.
5. Targets are IP literals on loopback or in the networks the caller names (our own
   cluster's Service and pod ranges): this tool never sends a request anywhere else.

The HTTP/1.1 client is a few lines on asyncio streams rather than aiohttp's: the rule of
point 3 needs to know whether a connection was reused and whether any answer byte arrived,
which aiohttp does not expose.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import socket
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from attrs import define, field, frozen

from omenative_devcluster.traffic_report import Outcome, TrafficReport

__all__ = [
    "DEVCLUSTER_SERVICE_CIDR",
    "LoadGenerator",
    "Outcome",
    "TargetNotAllowed",
    "TrafficReport",
    "parse_answer",
]

DEVCLUSTER_SERVICE_CIDR = "10.0.0.0/24"
"""The local control plane's ``--service-cluster-ip-range``: its ClusterIPs are allowed."""

_MAX_HEADER_BYTES = 16 * 1024
_MAX_BODY_BYTES = 64 * 1024


class TargetNotAllowed(ValueError):
    """The URL's host is not loopback nor in an allowed network (no traffic leaves the machine)."""


class _RetryOnFresh(ConnectionError):
    """A reused connection ended before the first byte of the answer: send once more."""


def parse_answer(body: bytes) -> tuple[str, str, str]:
    """(revision, instance, pod) from the model server's JSON answer; ``?`` for what is missing.

    Accepts ``instance`` or ``index`` for the Instance index, and ``pod`` or ``podName``.
    """
    try:
        data = json.loads(body)
    except ValueError:
        return ("?", "?", "?")
    if not isinstance(data, dict):
        return ("?", "?", "?")

    def pick(*keys: str) -> str:
        for key in keys:
            if data.get(key) not in (None, ""):
                return str(data[key])
        return "?"

    return (pick("revision"), pick("instance", "index", "instanceIndex"), pick("pod", "podName"))


def _check_target(host: str, allowed: tuple[str, ...]) -> None:
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        raise TargetNotAllowed(
            f"target host {host!r} must be an IP literal (loopback or one of {allowed})"
        ) from None
    if addr.is_loopback or any(addr in ipaddress.ip_network(n) for n in allowed):
        return
    raise TargetNotAllowed(f"target {host} is not loopback nor in {', '.join(allowed)}")


@frozen
class _Target:
    host: str
    port: int
    path: str

    @classmethod
    def of(cls, url: str, allowed: tuple[str, ...]) -> _Target:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise TargetNotAllowed(f"target {url!r}: only http://IP:port/path URLs are sent to")
        _check_target(parts.hostname, allowed)
        return cls(parts.hostname, parts.port or 80, parts.path or "/")


@define
class _Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    used: int = 0

    def close(self) -> None:
        self.writer.close()


async def _send_and_read_status(conn: _Conn, request: bytes, reused: bool) -> bytes:
    """Send the request, return the answer's status line; a reused connection that ends
    before any answer byte raises ``_RetryOnFresh``."""
    try:
        conn.writer.write(request)
        await conn.writer.drain()
        first = await conn.reader.readline()
    except (ConnectionResetError, BrokenPipeError) as exc:
        if reused:
            raise _RetryOnFresh(str(exc)) from exc
        raise
    if not first:
        if reused:
            raise _RetryOnFresh("kept-alive connection closed before the answer")
        raise ConnectionError("connection closed before the answer")
    return first


async def _read_answer(conn: _Conn, first: bytes) -> tuple[int, bytes, bool]:
    """(status, body, server keeps the connection) of one HTTP/1.1 answer."""
    head = [first]
    while True:
        line = await conn.reader.readline()
        if not line:
            raise ConnectionError("connection closed inside the answer's headers")
        if line in (b"\r\n", b"\n"):
            break
        head.append(line)
        if sum(map(len, head)) > _MAX_HEADER_BYTES:
            raise ConnectionError("answer headers too long")
    status = int(first.split()[1])
    headers = {}
    for raw in head[1:]:
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    if length > _MAX_BODY_BYTES:
        raise ConnectionError(f"answer body of {length} bytes is too long")
    body = await conn.reader.readexactly(length) if length else b""
    keep = headers.get("connection", "").lower() != "close"
    return status, body, keep


@define
class LoadGenerator:
    """Steady HTTP GETs to ``url``, run in the background; ``report()`` once stopped.

    Use as ``async with LoadGenerator(url) as gen: ...``: it starts sending on entry and
    stops on exit (or earlier, at ``duration`` or ``max_requests``).
    """

    url: str
    rate: float = 25.0
    duration: float = 300.0
    max_requests: int = 100_000
    timeout: float = 5.0
    keepalive_share: float = 0.5
    pool_size: int = 4
    allowed_networks: tuple[str, ...] = (DEVCLUSTER_SERVICE_CIDR,)
    parse: Callable[[bytes], tuple[str, str, str]] = parse_answer
    outcomes: list[Outcome] = field(factory=list)
    _target: _Target | None = None
    _idle: list[_Conn] = field(factory=list)
    _task: asyncio.Task[None] | None = None
    _inflight: set[asyncio.Task[None]] = field(factory=set)
    _t0: float = 0.0
    _wall0: float = 0.0

    def __attrs_post_init__(self) -> None:
        if self.rate <= 0 or self.duration <= 0 or self.max_requests <= 0:
            raise ValueError("rate, duration and max_requests must be positive")
        if not 0.0 <= self.keepalive_share <= 1.0:
            raise ValueError("keepalive_share must be within [0, 1]")
        self._target = _Target.of(self.url, self.allowed_networks)

    @property
    def started_wall(self) -> float:
        """Epoch seconds at which the first request was scheduled."""
        return self._wall0

    def wall(self, offset: float) -> float:
        """Epoch seconds of an outcome's offset (to compare with cluster timestamps)."""
        return self._wall0 + offset

    def now(self) -> float:
        """Seconds since the run started (the offsets outcomes carry)."""
        return time.monotonic() - self._t0

    async def __aenter__(self) -> LoadGenerator:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def start(self) -> None:
        """Begin sending (in a task of the running loop)."""
        self._t0 = time.monotonic()
        self._wall0 = time.time()
        self._task = asyncio.create_task(self._schedule(), name="load-generator")

    async def stop(self) -> None:
        """Stop sending, let requests in flight finish (each is bounded by ``timeout``)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        elif self._task is not None:
            self._task.result()
        if self._inflight:
            await asyncio.gather(*self._inflight, return_exceptions=True)
        for conn in self._idle:
            conn.close()
        self._idle.clear()

    async def wait(self) -> None:
        """Until the schedule ends by itself (``duration`` or ``max_requests``)."""
        if self._task is not None:
            await asyncio.shield(self._task)

    def report(self) -> TrafficReport:
        """The outcomes so far, summarised."""
        done = sorted(self.outcomes, key=lambda o: o.started)
        return TrafficReport(outcomes=tuple(done), rate=self.rate)

    async def _schedule(self) -> None:
        period = 1.0 / self.rate
        kept_every = 0.0
        for k in range(self.max_requests):
            due = k * period
            if due >= self.duration:
                break
            delay = due - self.now()
            if delay > 0:
                await asyncio.sleep(delay)
            kept_every += self.keepalive_share
            kept = kept_every >= 1.0
            if kept:
                kept_every -= 1.0
            task = asyncio.create_task(self._one(kept))
            self._inflight.add(task)
            task.add_done_callback(self._inflight.discard)

    async def _one(self, kept: bool) -> None:
        started = self.now()
        via = "kept" if kept else "new"
        retried = False
        try:
            async with asyncio.timeout(self.timeout):
                try:
                    status, body = await self._exchange(kept)
                except _RetryOnFresh:
                    retried = True
                    status, body = await self._exchange(kept, fresh=True)
        except TimeoutError:
            self._fail(started, via, "no-answer", f"no answer in {self.timeout:g}s", retried)
            return
        except (OSError, ValueError, IndexError, asyncio.IncompleteReadError) as exc:
            self._fail(started, via, "connection-error", f"{type(exc).__name__}: {exc}", retried)
            return
        if not 200 <= status < 300:
            self._fail(started, via, "status", f"HTTP {status}", retried)
            return
        revision, instance, pod = self.parse(body)
        self.outcomes.append(Outcome(started=started, ended=self.now(), via=via,
                                     retried=retried, revision=revision, instance=instance,
                                     pod=pod, status=status))

    def _fail(self, started: float, via: str, kind: str, detail: str, retried: bool) -> None:
        self.outcomes.append(Outcome(started=started, ended=self.now(), via=via, retried=retried,
                                     failure=kind, detail=detail))

    async def _exchange(self, kept: bool, fresh: bool = False) -> tuple[int, bytes]:
        """One request and its answer (status, body), on a kept-alive or a new connection."""
        assert self._target is not None
        conn = None if fresh or not kept or not self._idle else self._idle.pop()
        reused = conn is not None
        if conn is None:
            reader, writer = await _connect(self._target.host, self._target.port)
            conn = _Conn(reader, writer)
        request = (f"GET {self._target.path} HTTP/1.1\r\nHost: {self._target.host}:"
                   f"{self._target.port}\r\nUser-Agent: omenative-traffic\r\n"
                   f"Connection: {'keep-alive' if kept else 'close'}\r\n\r\n").encode()
        try:
            first = await _send_and_read_status(conn, request, reused)
            status, body, server_keeps = await _read_answer(conn, first)
        except BaseException:
            conn.close()
            raise
        conn.used += 1
        if kept and server_keeps and len(self._idle) < self.pool_size:
            self._idle.append(conn)
        else:
            conn.close()
        return status, body


CONNTRACK = Path("/proc/net/nf_conntrack")


async def _connect(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A new connection; when it fails, the error names where kube-proxy's DNAT sent it
    (the connection tracking entry of its local port), so a failure says which endpoint."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    local = 0
    try:
        sock.bind(("", 0))
        local = int(sock.getsockname()[1])
        await asyncio.get_running_loop().sock_connect(sock, (host, port))
    except OSError as exc:
        sock.close()
        where = _dnat_target(local) if local else None
        if where:
            exc.args = (*exc.args[:-1], f"{exc.args[-1]} (sent to {where})")
        raise
    return await asyncio.open_connection(sock=sock)


def _dnat_target(local_port: int) -> str | None:
    """The address the connection from ``local_port`` was translated to, if tracked."""
    try:
        lines = CONNTRACK.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if f"sport={local_port}" in fields:
            replies = [f for f in fields if f.startswith("src=")]
            ports = [f for f in fields if f.startswith("sport=")]
            if len(replies) >= 2 and len(ports) >= 2:
                return f"{replies[1][4:]}:{ports[1][6:]} ({fields[5] if len(fields) > 5 else ''})"
    return None


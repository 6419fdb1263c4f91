"""The load generator against small HTTP servers on loopback (random ports), and its report."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from attrs import define, field

from omenative_devcluster.traffic import LoadGenerator, TargetNotAllowed, parse_answer
from omenative_devcluster.traffic_report import Outcome, TrafficReport


@define
class Server:
    """A tiny HTTP/1.1 server: answers JSON naming ``revision``; behaviours switchable."""

    revision: str = "rev-a"
    status: int = 200
    #: close each connection right after its answer, without saying so (an idle-close race)
    close_after_answer: bool = False
    #: accept, read the request, never answer
    silent: bool = False
    connections: int = 0
    requests: int = 0
    port: int = 0
    _writers: list[asyncio.StreamWriter] = field(factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.requests += 1
                if self.silent:
                    await asyncio.sleep(3600)
                body = json.dumps({"revision": self.revision, "instance": 0,
                                   "pod": f"pod-{self.revision}"}).encode()
                close = b"connection: close" in head.lower()
                writer.write(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n%s\r\n" % (
                                 self.status, len(body),
                                 b"Connection: close\r\n" if close else b"") + body)
                await writer.drain()
                if close or self.close_after_answer:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def serving(server: Server) -> AsyncIterator[Server]:
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    server.port = srv.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        srv.close()
        for w in server._writers:
            w.close()


async def run(url: str, **kw: object) -> TrafficReport:
    gen = LoadGenerator(url, **kw)  # type: ignore[arg-type]
    async with gen:
        await gen.wait()
    return gen.report()


async def test_steady_answers_mix_new_and_kept_alive_connections() -> None:
    async with serving(Server()) as server:
        report = await run(f"http://127.0.0.1:{server.port}/", rate=40, duration=1.0)
    assert report.sent == 40
    assert report.failed == 0
    assert report.answers_by_revision() == {"rev-a": 40}
    vias = {o.via for o in report.outcomes}
    assert vias == {"new", "kept"}
    # the kept-alive half shares a few connections: fewer connections than requests
    assert server.connections < 40
    assert server.requests == 40


async def test_bounded_by_count() -> None:
    async with serving(Server()) as server:
        report = await run(f"http://127.0.0.1:{server.port}/", rate=50, duration=60,
                           max_requests=7)
    assert report.sent == 7


async def test_server_closing_kept_alive_connections_costs_one_retry_not_a_failure() -> None:
    async with serving(Server(close_after_answer=True)) as server:
        report = await run(f"http://127.0.0.1:{server.port}/", rate=40, duration=1.0,
                           keepalive_share=1.0)
    assert report.failed == 0, report.table()
    assert report.retried > 0
    assert report.answered == 40


async def test_refused_connections_are_connection_errors() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    report = await run(f"http://127.0.0.1:{port}/", rate=20, duration=0.5)
    assert report.sent == 10
    assert report.failures_by_kind() == {"connection-error": 10}
    windows = report.failure_windows()
    assert len(windows) == 1 and windows[0].count == 10


async def test_non_2xx_is_a_failed_request() -> None:
    async with serving(Server(status=503)) as server:
        report = await run(f"http://127.0.0.1:{server.port}/", rate=20, duration=0.5)
    assert report.failures_by_kind() == {"status": 10}
    assert report.failures[0].detail == "HTTP 503"


async def test_silence_is_no_answer() -> None:
    async with serving(Server(silent=True)) as server:
        report = await run(f"http://127.0.0.1:{server.port}/", rate=20, duration=0.25,
                           timeout=0.3)
    assert report.failures_by_kind() == {"no-answer": 5}


async def test_answers_switch_revision_when_the_server_does() -> None:
    async with serving(Server()) as server:
        gen = LoadGenerator(f"http://127.0.0.1:{server.port}/", rate=40, duration=1.0,
                            keepalive_share=0.0)
        async with gen:
            await asyncio.sleep(0.5)
            server.revision = "rev-b"
            await gen.wait()
    report = gen.report()
    assert report.revision_order() == ["rev-a", "rev-b"]
    last_a = report.last_answer("rev-a")
    first_b = report.first_answer("rev-b")
    assert last_a is not None and first_b is not None and last_a < first_b
    assert "rev-b" in report.table()


async def test_stop_ends_the_run_early() -> None:
    async with serving(Server()) as server:
        gen = LoadGenerator(f"http://127.0.0.1:{server.port}/", rate=20, duration=600)
        async with gen:
            await asyncio.sleep(0.3)
    assert 0 < gen.report().sent < 20


@pytest.mark.parametrize("url", ["http://8.8.8.8/", "http://example.com/",
                                 "https://127.0.0.1/", "http://192.168.1.1:80/"])
def test_only_loopback_or_our_cluster_is_a_target(url: str) -> None:
    with pytest.raises(TargetNotAllowed):
        LoadGenerator(url)


def test_our_service_range_and_named_networks_are_targets() -> None:
    LoadGenerator("http://10.0.0.17:8080/")
    LoadGenerator("http://10.244.1.5:8080/", allowed_networks=("10.244.0.0/16",))


def test_parse_answer_tolerates_other_bodies() -> None:
    assert parse_answer(b'{"revision": "r", "index": 2, "podName": "p"}') == ("r", "2", "p")
    assert parse_answer(b"not json") == ("?", "?", "?")
    assert parse_answer(b"[1]") == ("?", "?", "?")


def _o(started: float, failure: str = "", revision: str = "r") -> Outcome:
    return Outcome(started=started, ended=started + 0.01, via="new", failure=failure,
                   revision="" if failure else revision)


def test_report_windows_and_per_second() -> None:
    report = TrafficReport(outcomes=(
        _o(0.1), _o(0.5, "connection-error"), _o(0.9, "no-answer"), _o(1.2, revision="s"),
        _o(3.0, "status"), _o(3.1)), rate=2)
    windows = report.failure_windows(gap=1.0)
    assert [(w.count, w.kinds) for w in windows] == [
        (2, ("connection-error", "no-answer")), (1, ("status",))]
    assert report.per_second() == [{"r": 1, "failed": 2}, {"s": 1}, {}, {"failed": 1, "r": 1}]
    assert report.answered_per_second() == [1, 1, 0, 1]
    assert report.failed_started_before(1.0) == 2
    assert report.summary("x") == (
        "x: sent 6, answered 3, failed 3 (connection-error 1, no-answer 1, status 1)")

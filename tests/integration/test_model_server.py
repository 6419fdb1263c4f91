"""The test model server, run on this host (loopback, random ports): what real nodes rely on.

Its readiness must be the truth the traffic tests compare omenative with: not ready while
loading or while a leader misses a worker, a worker gone turns its leader not-ready, a
worker leaves with its leader, SIGTERM drains before it stops. The binary comes from the
shared builder (this test builds it if needed, and fails when Go is missing); no cluster.
The assertions are about order and content (what the server answered before and after
each log event), never about how long something took.
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from omenative_devcluster import images, oci
from omenative_devcluster.components import MODEL_SERVER, build_local

Event = dict[str, Any]
WAIT = 15.0


@pytest.fixture(scope="module")
def binary() -> Path:
    """The model server, built through the shared builder (fails, never skips, without Go)."""
    return build_local(MODEL_SERVER)


class Server:
    """One model server process and the JSON events it printed, in order."""

    def __init__(self, binary: Path, env: dict[str, str], *args: str) -> None:
        base = {"PATH": os.environ.get("PATH", ""), "HOST": "127.0.0.1", "PORT": "0",
                "HEARTBEAT_SECONDS": "0.2", "DRAIN_SECONDS": "0.2"}
        self.proc = subprocess.Popen([str(binary), *args], env={**base, **env},
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.events: list[Event] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        self.addr = ""
        if args[:1] != ("pause",):
            self.addr = self.wait_for("listening")["addr"]

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = json.loads(line)
            event["seen"] = time.monotonic()
            with self._cond:
                self.events.append(event)
                self._cond.notify_all()

    def wait_for(self, name: str, when: Callable[[Event], bool] = lambda e: True) -> Event:
        """The first event ``name`` (for which ``when`` holds), waiting for it to come."""
        def found() -> Event | None:
            return next((e for e in self.events if e["event"] == name and when(e)), None)
        with self._cond:
            self._cond.wait_for(lambda: found() is not None or self.proc.poll() is not None, WAIT)
            event = found()
        assert event is not None, f"no {name!r} event; got {self.events}, rc={self.proc.poll()}"
        return event

    def exit_code(self) -> int:
        """Wait for the process to end and return its exit code."""
        return self.proc.wait(WAIT)

    def call(self, path: str, method: str = "GET") -> tuple[int, dict[str, Any], dict[str, str]]:
        """(status, JSON body, headers) of one request on a new connection."""
        host, port = self.addr.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=WAIT)
        try:
            conn.request(method, path)
            resp = conn.getresponse()
            body = resp.read()
            return resp.status, json.loads(body) if body.strip() else {}, dict(resp.headers)
        finally:
            conn.close()


@pytest.fixture
def start(binary: Path) -> Iterator[Callable[..., Server]]:
    """Start servers; every one still running at the end is killed."""
    started: list[Server] = []

    def _start(env: dict[str, str], *args: str) -> Server:
        server = Server(binary, env, *args)
        started.append(server)
        return server

    yield _start
    for server in started:
        if server.proc.poll() is None:
            server.proc.kill()
        server.proc.wait(WAIT)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ts(event: Event) -> float:
    return datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()


def _ready(server: Server) -> tuple[int, str]:
    status, body, _ = server.call("/ready")
    return status, str(body["reason"])


def test_a_leader_is_ready_only_once_loaded_and_joined_by_all_its_workers(
    start: Callable[..., Server],
) -> None:
    port = _free_port()
    group = {"OME_INSTANCE_POD_COUNT": "3", "OME_INSTANCE_INDEX": "1", "MODEL_REVISION": "rev-a"}
    worker_env = {**group, "OME_LEADER_ADDRESS": "127.0.0.1", "LEADER_PORT": str(port)}
    # a worker that starts before its leader retries until the leader is up
    w1 = start({**worker_env, "OME_INSTANCE_POD_RANK": "1", "POD_NAME": "x-engine-1-worker-0"})
    w1.wait_for("join-retrying")
    assert _ready(w1) == (503, "not joined to its leader")

    leader = start({**group, "PORT": str(port), "OME_INSTANCE_POD_RANK": "0",
                    "POD_NAME": "x-engine-1-leader-0", "LOAD_SECONDS": "1"})
    assert _ready(leader)[0] == 503
    leader.wait_for("loaded")
    leader.wait_for("worker-joined", lambda e: e["rank"] == 1)
    assert _ready(leader) == (503, "1 of 2 workers joined")
    w1.wait_for("joined")
    assert _ready(w1) == (200, "ready")

    w2 = start({**worker_env, "OME_INSTANCE_POD_RANK": "2", "POD_NAME": "x-engine-1-worker-1"})
    leader.wait_for("worker-joined", lambda e: e["joined"] == 2)
    assert _ready(leader) == (200, "ready")
    first = leader.wait_for("first-ready")
    assert first["revision"] == "rev-a" and first["instance"] == "1"
    # the server's own record: never ready before its load time was over
    assert leader.events.index(first) > leader.events.index(leader.wait_for("loaded"))
    assert _ts(first) - _ts(leader.wait_for("listening")) >= 1.0

    status, body, _ = leader.call("/v1/completions", "POST")
    assert status == 200
    assert {k: body[k] for k in ("revision", "instance", "pod", "role")} == {
        "revision": "rev-a", "instance": "1", "pod": "x-engine-1-leader-0", "role": "leader"}
    assert w2.call("/")[1]["pod"] == "x-engine-1-worker-1"

    # a worker that dies turns its leader not-ready
    w2.proc.kill()
    leader.wait_for("worker-left", lambda e: e["rank"] == 2)
    assert _ready(leader) == (503, "1 of 2 workers joined")

    # a leader that goes away takes its workers with it
    leader.proc.send_signal(signal.SIGTERM)
    assert leader.exit_code() == 0
    assert w1.exit_code() == 1
    assert w1.wait_for("leader-gone")


def test_the_lws_variables_form_the_same_gang(start: Callable[..., Server]) -> None:
    leader = start({"LWS_GROUP_SIZE": "2", "LWS_WORKER_INDEX": "0", "INSTANCE_INDEX": "4"})
    worker = start({"LWS_GROUP_SIZE": "2", "LWS_WORKER_INDEX": "1",
                    "LWS_LEADER_ADDRESS": leader.addr})
    worker.wait_for("joined")
    leader.wait_for("worker-joined")
    leader.wait_for("loaded")
    assert _ready(leader) == (200, "ready")
    assert leader.call("/")[1]["instance"] == "4"
    assert worker.call("/")[1]["role"] == "worker"


def test_an_engine_reports_its_component_mode_and_expanded_command_line(
    start: Callable[..., Server],
) -> None:
    # what a runtime's SGLang flags become once the kubelet expanded $(MODEL_PATH) etc.
    flags = ("--model-path", "/models/llama", "--tp-size", "2", "--disaggregation-mode",
             "prefill")
    server = start({"OME_COMPONENT": "engine", "POD_NAME": "pd-engine-0-default-0"}, *flags)
    assert server.wait_for("listening")["args"] == list(flags)
    server.wait_for("loaded")
    status, body, _ = server.call("/v1/chat/completions", "POST")
    assert (status, body["component"], body["mode"]) == (200, "engine", "prefill")


class _PodsApi(http.server.ThreadingHTTPServer):
    """A stand-in for the API server's pod list: ``pods`` by label selector."""

    def __init__(self) -> None:
        self.pods: dict[str, list[dict[str, Any]]] = {}
        self.asked: list[str] = []
        super().__init__(("127.0.0.1", 0), _PodsHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @staticmethod
    def pod(name: str, ip: str) -> dict[str, Any]:
        """A ready pod as the API lists it."""
        return {"metadata": {"name": name}, "status": {
            "podIP": ip, "conditions": [{"type": "Ready", "status": "True"}]}}


class _PodsHandler(http.server.BaseHTTPRequestHandler):
    server: _PodsApi

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        selector = parse_qs(url.query)["labelSelector"][0]
        self.server.asked.append(f"{url.path}?{selector}")
        body = json.dumps({"items": self.server.pods.get(selector, [])}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_router_sends_each_request_to_a_prefill_and_a_decode_pod_found_by_label(
    start: Callable[..., Server],
) -> None:
    port = _free_port()  # one discovery port for every pod, as sglang_router has it
    start({"PORT": str(port), "OME_COMPONENT": "engine", "POD_NAME": "pd-engine-0"},
          "--disaggregation-mode", "prefill")
    decoder = start({"HOST": "127.0.0.2", "PORT": str(port), "OME_COMPONENT": "decoder",
                     "POD_NAME": "pd-decoder-0"}, "--disaggregation-mode", "decode")
    api = _PodsApi()
    prefill_sel, decode_sel = ("component=engine,ome.io/inferenceservice=pd",
                               "component=decoder,ome.io/inferenceservice=pd")
    api.pods[prefill_sel] = [_PodsApi.pod("pd-engine-0", "127.0.0.1")]
    try:
        router = start(
            {"DISCOVERY_API": f"http://127.0.0.1:{api.server_address[1]}",
             "POD_NAME": "pd-router-0", "OME_COMPONENT": "router"},
            "router", "--host", "0.0.0.0", "--port", "8080", "--pd-disaggregation",
            "--service-discovery", "--service-discovery-namespace", "llm",
            "--service-discovery-port", str(port),
            "--prefill-selector", "component=engine ome.io/inferenceservice=pd",
            "--decode-selector", "component=decoder", "ome.io/inferenceservice=pd")
        router.wait_for("loaded")
        router.wait_for("discovered")
        assert _ready(router) == (503, "no ready prefill and decode pods")
        assert router.call("/v1/chat/completions", "POST")[0] == 503
        assert f"/api/v1/namespaces/llm/pods?{prefill_sel}" in api.asked

        api.pods[decode_sel] = [_PodsApi.pod("pd-decoder-0", "127.0.0.2")]
        router.wait_for("discovered", lambda e: bool(e["decode"]))
        assert _ready(router) == (200, "ready")
        status, body, _ = router.call("/v1/chat/completions", "POST")
        assert status == 200, body
        assert (body["pod"], body["role"], body["path"]) == (
            "pd-router-0", "router", "/v1/chat/completions")
        assert {k: body["prefill"][k] for k in ("pod", "component", "mode", "path")} == {
            "pod": "pd-engine-0", "component": "engine", "mode": "prefill",
            "path": "/v1/chat/completions"}
        assert {k: body["decode"][k] for k in ("pod", "component", "mode")} == {
            "pod": "pd-decoder-0", "component": "decoder", "mode": "decode"}

        decoder.proc.kill()  # a decode pod that does not answer fails the request
        decoder.exit_code()
        status, body, _ = router.call("/v1/chat/completions", "POST")
        assert status == 502 and "decode pod 127.0.0.2" in body["error"], body
    finally:
        api.shutdown()
        api.server_close()


def test_sigterm_keeps_answering_for_the_drain_delay_then_finishes_in_flight(
    start: Callable[..., Server],
) -> None:
    server = start({"DRAIN_SECONDS": "2", "MODEL_REVISION": "v7"})
    server.wait_for("loaded")
    assert _ready(server) == (200, "ready")
    server.proc.send_signal(signal.SIGTERM)
    server.wait_for("draining")
    # while draining: answers go on (asking clients to reconnect), the probe fails
    status, body, headers = server.call("/v1/completions", "POST")
    assert (status, body["revision"]) == (200, "v7")
    assert headers.get("Connection") == "close"
    assert _ready(server) == (503, "draining")
    # a request taking longer than the rest of the drain is finished, not cut
    slow: dict[str, Any] = {}

    def _slow() -> None:
        slow["status"], slow["body"], _ = server.call("/?delay=3")
        slow["done"] = time.monotonic()

    t = threading.Thread(target=_slow)
    t.start()
    assert not any(e["event"] == "shutting-down" for e in server.events), (
        "inconclusive: the drain was over before the requests above were sent")
    stopping = server.wait_for("shutting-down")
    with pytest.raises(ConnectionRefusedError):
        server.call("/")
    t.join(WAIT)
    assert slow["status"] == 200 and slow["body"]["revision"] == "v7"
    assert slow["done"] > stopping["seen"], "the slow answer came after the listener closed"
    assert server.exit_code() == 0
    server.wait_for("stopped")


def test_it_crashes_or_fails_its_probe_when_told(start: Callable[..., Server]) -> None:
    server = start({"POD_NAME": "p"})
    server.wait_for("loaded")
    assert server.call("/fail-ready", "POST")[0] == 200
    assert _ready(server) == (503, "told to fail its probe")
    assert server.call("/fail-ready", "DELETE")[0] == 200
    assert _ready(server) == (200, "ready")
    assert server.call("/crash")[0] == 405, "only a POST crashes it"
    assert server.call("/crash", "POST")[0] == 202
    assert server.exit_code() == 1
    timed = start({"CRASH_AFTER_SECONDS": "0.3", "FAIL_READY": "true"})
    assert _ready(timed) == (503, "told to fail its probe")
    assert timed.exit_code() == 1
    assert timed.wait_for("crash")["why"] == "CRASH_AFTER_SECONDS"


@pytest.mark.parametrize(("env", "named"), [
    ({"OME_INSTANCE_POD_COUNT": "2", "OME_INSTANCE_POD_RANK": "1"}, "OME_LEADER_ADDRESS"),
    ({"LOAD_SECONDS": "soon"}, "LOAD_SECONDS"),
    ({"OME_INSTANCE_POD_COUNT": "2", "OME_INSTANCE_POD_RANK": "2"}, "OME_INSTANCE_POD_RANK"),
])
def test_a_bad_variable_is_named_and_the_server_does_not_start(
    binary: Path, env: dict[str, str], named: str,
) -> None:
    proc = subprocess.run([str(binary)], env={"PORT": "0", **env}, capture_output=True,
                          text=True, timeout=WAIT, check=False)
    assert proc.returncode == 2
    assert named in proc.stderr and "bad configuration" in proc.stderr


def test_pause_mode_waits_and_exits_cleanly_on_sigterm(start: Callable[..., Server]) -> None:
    pause = start({}, "pause")
    with pytest.raises(subprocess.TimeoutExpired):
        pause.proc.wait(0.2)  # it holds on (a sandbox must not end by itself)
    pause.proc.send_signal(signal.SIGTERM)
    assert pause.exit_code() == 0


def _children(pid: int) -> dict[int, tuple[str, str]]:
    """pid -> (command, state) of the processes whose parent is ``pid``."""
    out: dict[int, tuple[str, str]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        comm, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:]
        state, ppid = rest.split()[:2]
        if int(ppid) == pid:
            out[int(stat.parent.name)] = (comm, state)
    return out


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, f"not within {WAIT} s: {what}"
        time.sleep(0.05)


def test_pause_reaps_the_orphans_of_its_pid_namespace(binary: Path) -> None:
    # as PID 1 of a new PID namespace, as in a pod sandbox
    outer = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", str(binary), "pause"])
    try:
        _until(lambda: bool(_children(outer.pid)), "pause started")
        (pause_pid,) = _children(outer.pid)
        # a process that leaves an orphan behind inside the namespace
        subprocess.run(["nsenter", "-t", str(pause_pid), "-p", "--", "sh", "-c",
                        "sleep 1 & exit 0"], check=True, timeout=WAIT)
        _until(lambda: ("sleep", "S") in _children(pause_pid).values(),
               "the orphan re-parented to pause")
        _until(lambda: not _children(pause_pid), "the orphan reaped (no zombie left)")
        os.kill(pause_pid, signal.SIGTERM)
        assert outer.wait(WAIT) == 0
    finally:
        if outer.poll() is None:
            outer.kill()
            outer.wait(WAIT)


def test_the_image_archives_hold_this_binary_reproducibly(binary: Path) -> None:
    archives = images.build_image_archives()
    assert set(archives) == {images.PAUSE_IMAGE, images.MODEL_SERVER_IMAGE}
    for ref, path in archives.items():
        image = next(oci.pack(s) for s in images.image_specs(binary.read_bytes()) if s.ref == ref)
        assert path.read_bytes() == image.archive()
        assert image.manifest_digest.removeprefix("sha256:")[:12] in path.name

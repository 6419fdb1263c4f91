"""Kubelet stand-in: fake GPU nodes and pod lifecycles against a real kube-apiserver.

What a kubelet (or KWOK) would do, for tests of the manager: register Nodes with
``nvidia.com/gpu`` capacity and keep them Ready (node status + a Lease in ``kube-node-lease``);
move pods bound to those nodes from Pending to Running with a pod IP, then ContainersReady,
then Ready once every readiness gate holds a True condition; finish graceful deletion the way
a kubelet does: a deleted pod's containers are stopped and the pod is moved to a terminal
phase (``Succeeded`` when every container exited cleanly, ``Failed`` otherwise) before the
stand-in removes it. Controllers such as Kueue react to that terminal phase, not only to the
deletion.

Faults come from a JSON file (checked twice a second; each version applied is acknowledged in
``<name>.applied.json`` with the file's ``generation``) and from Python (``set_fault``):

* ``badImages``: containers with such an image never pull (ErrImagePull, then
  ImagePullBackOff; the pod stays Pending),
* ``crashImages``: containers crash-loop (terminated exit code 1, restartCount grows,
  waiting CrashLoopBackOff),
* ``deadNodes``: these nodes stop heartbeating and their pods get no more transitions (so the
  node-lifecycle controller marks the node Unknown/NotReady, as with a dead kubelet).

Image entries are shell-style patterns (``fnmatch``), so a plain image name matches itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import fnmatch
import hashlib
import json
import math
import random
import sys
import time
from collections.abc import Awaitable, Iterable
from pathlib import Path
from typing import Any, cast

import aiohttp
import attrs
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

#: (connect, read) timeouts of ordinary requests, seconds
REQUEST_TIMEOUT = (10.0, 30.0)
#: server-side watch window; the read timeout must be longer
WATCH_SECONDS = 240
WATCH_TIMEOUT = (10.0, WATCH_SECONDS + 30.0)
LEASE_NAMESPACE = "kube-node-lease"
GPU = "nvidia.com/gpu"
#: seconds between checks of the fault file's mtime
FAULT_FILE_POLL = 0.5

Json = dict[str, Any]


def _log(msg: str) -> None:
    print(f"[kubelet {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _now_micro() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _rv(obj: Json) -> int:
    try:
        return int(obj.get("metadata", {}).get("resourceVersion", "0"))
    except ValueError:
        return 0


class RequestError(RuntimeError):
    """An API request returned an unexpected HTTP status."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}: {str(body)[:300]}")
        self.status = status
        self.body = body


async def raw_call(request: Awaitable[Any], ok: Iterable[int] = (200, 201)) -> tuple[int, Json]:
    """Await a kubernetes-asyncio call made with ``_preload_content=False``; return JSON.

    kubernetes-asyncio 36.1.0 does not raise on a non-2xx status in this mode, so the status
    is returned for the caller to check; a status outside ``ok`` raises ``RequestError``.
    ``ApiException`` (raised on some paths) is turned into ``RequestError`` too.
    """
    try:
        resp = cast(aiohttp.ClientResponse, await request)
    except ApiException as exc:
        raise RequestError(int(exc.status or 0), exc.body) from exc
    try:
        text = await resp.text()
    finally:
        resp.release()
    try:
        body = json.loads(text) if text else {}
    except ValueError:
        body = {"raw": text}
    if resp.status not in set(ok):
        raise RequestError(resp.status, body)
    return resp.status, body if isinstance(body, dict) else {"raw": body}


@attrs.frozen
class Faults:
    """The injected faults in force (union of the fault file and the Python API)."""

    bad_images: frozenset[str] = frozenset()
    crash_images: frozenset[str] = frozenset()
    dead_nodes: frozenset[str] = frozenset()

    def union(self, other: Faults) -> Faults:
        """Both sets of faults at once."""
        return Faults(
            self.bad_images | other.bad_images,
            self.crash_images | other.crash_images,
            self.dead_nodes | other.dead_nodes,
        )

    @staticmethod
    def from_json(data: Any) -> Faults:
        """Parse the fault file's object (``badImages``, ``crashImages``, ``deadNodes``)."""
        if not isinstance(data, dict):
            raise ValueError("the fault file must hold a JSON object")

        def strings(key: str) -> frozenset[str]:
            val = data.get(key, [])
            if not isinstance(val, list) or not all(isinstance(v, str) for v in val):
                raise ValueError(f"{key} must be a list of strings")
            return frozenset(val)

        return Faults(strings("badImages"), strings("crashImages"), strings("deadNodes"))

    def to_json(self) -> Json:
        """The fault file's format."""
        return {
            "badImages": sorted(self.bad_images),
            "crashImages": sorted(self.crash_images),
            "deadNodes": sorted(self.dead_nodes),
        }


def applied_path(fault_file: Path) -> Path:
    """Where the stand-in acknowledges the fault file it applied (``faults.applied.json``)."""
    return fault_file.with_name(fault_file.stem + ".applied.json")


def image_matches(image: str, patterns: Iterable[str]) -> bool:
    """Whether ``image`` is listed (exact name or shell pattern)."""
    return any(image == p or fnmatch.fnmatchcase(image, p) for p in patterns)


@attrs.define
class StandInConfig:
    """Settings of the stand-in: which API, how many nodes, the delays, the fault file."""

    kubeconfig: Path | None = None
    nodes: int = 4
    gpus_per_node: int = 8
    node_prefix: str = "node-"
    start_delay: float = 0.5
    ready_delay: float = 0.5
    delete_delay: float = 0.2
    heartbeat_seconds: float = 4.0
    lease_seconds: int = 40
    fault_file: Path | None = None
    #: at most this many API writes in flight (the connection pool is bigger)
    max_inflight: int = 32
    cpu: str = "64"
    memory: str = "512Gi"
    pods: str = "250"
    kubelet_version: str = "v1.36.3"


_PULL_ERROR = "pull-error"
_PULL_BACKOFF = "pull-backoff"
_CRASH = "crash"
_RUNNING = "running"
_READY = "ready"
_TERMINATE = "terminate"
_DELETE = "delete"
_TERMINAL_PHASES = ("Succeeded", "Failed")


@attrs.define(eq=False)
class _PodState:
    uid: str
    pod: Json
    changed: asyncio.Event
    seen_at: float
    stage: str = ""
    stage_at: float = 0.0
    delete_seen_at: float | None = None
    #: the final delete (grace period 0) was accepted; a finalizer may still hold the pod
    removed: bool = False
    restarts: int = 0
    next_restart_at: float = 0.0
    ip: str | None = None
    gone: bool = False
    last_action: str = ""
    last_action_at: float = 0.0
    task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.pod["metadata"]["namespace"])

    @property
    def node(self) -> str:
        return str(self.pod.get("spec", {}).get("nodeName") or "")


def _conditions(pod: Json) -> dict[str, str]:
    return {
        str(c.get("type")): str(c.get("status"))
        for c in pod.get("status", {}).get("conditions") or []
    }


def _gates(pod: Json) -> list[str]:
    return [
        str(g["conditionType"])
        for g in pod.get("spec", {}).get("readinessGates") or []
        if "conditionType" in g
    ]


def readiness_gates_met(pod: Json) -> bool:
    """True when every ``spec.readinessGates`` entry has a True condition in the status."""
    conds = _conditions(pod)
    return all(conds.get(g) == "True" for g in _gates(pod))


def _containers(pod: Json) -> list[Json]:
    return list(pod.get("spec", {}).get("containers") or [])


def _image_id(image: str) -> str:
    return f"docker.io/fake@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


def _container_id(uid: str, name: str, restarts: int) -> str:
    digest = hashlib.sha256(f"{uid}/{name}/{restarts}".encode()).hexdigest()
    return f"containerd://{digest}"


def _running_since(pod: Json, name: str) -> str | None:
    """When container ``name`` started running, from the pod's last status (None if not)."""
    prior = next(
        (x for x in pod.get("status", {}).get("containerStatuses") or []
         if x.get("name") == name and "running" in (x.get("state") or {})),
        None,
    )
    since = (prior or {}).get("state", {}).get("running", {}).get("startedAt")
    return str(since) if since else None


def _pod_conditions(pod: Json, *, ready: bool, ts: str, terminated: bool = False) -> list[Json]:
    """The kubelet-owned pod conditions; a condition whose status holds keeps its time."""

    def cond(type_: str, ok: bool, reason: str = "", message: str = "") -> Json:
        c: Json = {"type": type_, "status": "True" if ok else "False",
                   "lastProbeTime": None, "lastTransitionTime": ts}
        if not ok and reason:
            c["reason"] = reason
            if message:
                c["message"] = message
        return c

    names = " ".join(str(c["name"]) for c in _containers(pod))
    not_ready = f"containers with unready status: [{names}]"
    if terminated:
        ready_cond = cond("Ready", False, "PodCompleted")
        containers_ready = cond("ContainersReady", False, "PodCompleted")
    else:
        reason = "ContainersNotReady"
        containers_ready = cond("ContainersReady", ready, reason, not_ready)
        if ready:
            missing = [g for g in _gates(pod) if _conditions(pod).get(g) != "True"]
            ready_cond = cond(
                "Ready", readiness_gates_met(pod), "ReadinessGatesNotReady",
                f"the status of pod readiness gate(s) {missing} is not True",
            )
        else:
            ready_cond = cond("Ready", False, reason, not_ready)
    conds = [
        cond("PodReadyToStartContainers", not terminated),
        cond("Initialized", True),
        containers_ready,
        ready_cond,
    ]
    # keep lastTransitionTime when a condition's status does not change
    old = {c.get("type"): c for c in pod.get("status", {}).get("conditions") or []}
    for c in conds:
        prev = old.get(c["type"])
        if prev and prev.get("status") == c["status"] and prev.get("lastTransitionTime"):
            c["lastTransitionTime"] = prev["lastTransitionTime"]
    return conds


def _init_statuses(pod: Json, started_at: str, ts: str) -> list[Json]:
    """Init containers, all completed (the stand-in runs nothing before the main ones)."""
    return [
        {
            "name": c["name"], "image": c.get("image", ""), "imageID": "",
            "ready": True, "restartCount": 0, "started": False,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                     "startedAt": started_at, "finishedAt": ts}},
            "lastState": {},
        }
        for c in pod.get("spec", {}).get("initContainers") or []
    ]


class KubeletStandIn:
    """Fake kubelet for N GPU nodes; see the module docstring for what it does.

    Use ``await start()`` / ``await stop()`` (or ``async with``) inside a running loop.
    ``set_fault`` changes faults at runtime from the same process; the fault file (if
    configured) is checked twice a second and both are in force together.
    """

    def __init__(self, cfg: StandInConfig, api_client: client.ApiClient | None = None) -> None:
        self.cfg = cfg
        self.node_names = [f"{cfg.node_prefix}{i}" for i in range(cfg.nodes)]
        self._node_index = {n: i for i, n in enumerate(self.node_names)}
        self._api: client.ApiClient | None = api_client
        self._own_api = api_client is None
        self._pods: dict[str, _PodState] = {}
        self._used_ips: dict[str, set[int]] = {n: set() for n in self.node_names}
        self._api_faults = Faults()
        self._file_faults = Faults()
        self._file_mtime: tuple[int, int, int] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._sem = asyncio.Semaphore(cfg.max_inflight)
        self._nodes_registered = asyncio.Event()
        self._synced = asyncio.Event()
        self._heartbeats: dict[str, float] = {}
        self._ready_since: dict[str, str] = {}
        #: the exception that stopped a background loop, if any (checked by the supervisor)
        self.failed: BaseException | None = None
        #: counters, for tests and logs
        self.stats: dict[str, int] = {}

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> KubeletStandIn:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Register the nodes and start heartbeats, the pod watch and the fault reader."""
        if self._api is None:
            cfg = client.Configuration()
            await config.load_kube_config(
                config_file=str(self.cfg.kubeconfig) if self.cfg.kubeconfig else None,
                client_configuration=cfg,
            )
            cfg.connection_pool_maxsize = self.cfg.max_inflight + 8
            self._api = client.ApiClient(cfg)
            self._api.user_agent = "omenative-devcluster-kubelet/0.1"
        self._read_fault_file()
        await self._register_nodes()
        self._nodes_registered.set()
        for coro in (self._heartbeat_loop(), self._pod_loop(), self._fault_file_loop()):
            self._tasks.append(asyncio.create_task(self._guard(coro)))

    async def stop(self) -> None:
        """Cancel every task (node heartbeats stop too) and close our API client."""
        tasks = [*self._tasks, *(s.task for s in self._pods.values() if s.task)]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
        self._pods.clear()
        if self._own_api and self._api is not None:
            await self._api.close()
            self._api = None

    async def _guard(self, coro: Awaitable[None]) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.failed = exc
            _log(f"background loop failed: {exc!r}")
            raise

    @property
    def api(self) -> client.ApiClient:
        """The API client in use (after ``start``)."""
        if self._api is None:
            raise RuntimeError("KubeletStandIn not started")
        return self._api

    # ------------------------------------------------------------------ faults

    @property
    def faults(self) -> Faults:
        """The faults in force now."""
        return self._api_faults.union(self._file_faults)

    def set_fault(
        self,
        *,
        bad_images: Iterable[str] | None = None,
        crash_images: Iterable[str] | None = None,
        dead_nodes: Iterable[str] | None = None,
    ) -> None:
        """Replace the Python-side fault lists that are given (``None`` keeps a list as is)."""
        f = self._api_faults
        self._api_faults = Faults(
            frozenset(bad_images) if bad_images is not None else f.bad_images,
            frozenset(crash_images) if crash_images is not None else f.crash_images,
            frozenset(dead_nodes) if dead_nodes is not None else f.dead_nodes,
        )
        self._faults_changed(f.union(self._file_faults))

    def clear_faults(self) -> None:
        """Drop every fault set through ``set_fault`` (the file's faults stay)."""
        self.set_fault(bad_images=(), crash_images=(), dead_nodes=())

    def _faults_changed(self, before: Faults) -> None:
        after = self.faults
        if after == before:
            return
        _log(f"faults now {after.to_json()}")
        revived = before.dead_nodes - after.dead_nodes
        for node in revived:
            self._heartbeats.pop(node, None)  # beat at once
            self._ready_since.pop(node, None)  # Ready again from now
        for st in self._pods.values():
            st.changed.set()

    def _read_fault_file(self) -> None:
        path = self.cfg.fault_file
        if path is None:
            return
        try:
            st = path.stat()
            # inode too: an atomic replace within one mtime tick still shows as a change
            mtime: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            mtime = None
        if mtime == self._file_mtime:
            return
        self._file_mtime = mtime
        before = self.faults
        generation: Any = None
        if mtime is None:
            self._file_faults = Faults()
        else:
            try:
                data = json.loads(path.read_text())
                self._file_faults = Faults.from_json(data)
                generation = data.get("generation")
            except (OSError, ValueError) as exc:
                _log(f"ignoring fault file {path}: {exc}")
                return
        self._faults_changed(before)
        # acknowledge, so a writer in another process knows the faults are in force
        ack = applied_path(path)
        with contextlib.suppress(OSError):
            tmp = ack.with_suffix(".tmp")
            tmp.write_text(json.dumps(
                {"generation": generation, "faults": self._file_faults.to_json()}) + "\n")
            tmp.replace(ack)

    async def _fault_file_loop(self) -> None:
        while True:
            await asyncio.sleep(FAULT_FILE_POLL)
            self._read_fault_file()

    # ------------------------------------------------------------------ nodes

    def _node_ip(self, node: str) -> str:
        i = self._node_index[node]
        return f"172.18.{i // 250}.{i % 250 + 2}"

    def _pod_subnet(self, node: str) -> str:
        i = self._node_index[node]
        return f"10.{244 + i // 256}.{i % 256}"

    def _node_status(self, node: str) -> Json:
        cfg = self.cfg
        now = _now()
        since = self._ready_since.setdefault(node, now)
        resources = {
            "cpu": cfg.cpu,
            "memory": cfg.memory,
            "pods": cfg.pods,
            "ephemeral-storage": "1Ti",
            GPU: str(cfg.gpus_per_node),
        }

        def cond(type_: str, status: str, reason: str, message: str) -> Json:
            return {
                "type": type_,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": since,
            }

        return {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "ok"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "ok"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "ok"),
                cond("Ready", "True", "KubeletReady", "kubelet stand-in is posting ready status"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": self._node_ip(node)},
                {"type": "Hostname", "address": node},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": hashlib.md5(node.encode()).hexdigest(),
                "systemUUID": hashlib.md5(node.encode()).hexdigest(),
                "bootID": hashlib.md5(f"boot-{node}".encode()).hexdigest(),
                "kernelVersion": "6.1.0-devcluster",
                "osImage": "omenative devcluster kubelet stand-in",
                "containerRuntimeVersion": "containerd://fake",
                "kubeletVersion": cfg.kubelet_version,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        }

    def _node_labels(self, node: str) -> dict[str, str]:
        i = self._node_index[node]
        return {
            "kubernetes.io/hostname": node,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "topology.kubernetes.io/region": "local",
            "topology.kubernetes.io/zone": "zone-a" if i % 2 == 0 else "zone-b",
            "nvidia.com/gpu.present": "true",
            "omenative.io/devcluster": "true",
        }

    async def _register_nodes(self) -> None:
        core = client.CoreV1Api(self.api)
        await asyncio.gather(*(self._register_node(core, n) for n in self.node_names))
        _log(f"registered {len(self.node_names)} nodes with {self.cfg.gpus_per_node} GPUs each")

    async def _register_node(self, core: client.CoreV1Api, node: str) -> None:
        body: Json = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node, "labels": self._node_labels(node)},
            "spec": {"podCIDR": f"{self._pod_subnet(node)}.0/24"},
            "status": self._node_status(node),
        }
        async with self._sem:
            try:
                await raw_call(
                    core.create_node(
                        body=cast(Any, body), _preload_content=False,
                        _request_timeout=REQUEST_TIMEOUT,
                    )
                )
            except RequestError as exc:
                if exc.status != 409:
                    raise
                await raw_call(
                    core.patch_node(
                        node, {"metadata": {"labels": self._node_labels(node)}},
                        _preload_content=False, _request_timeout=REQUEST_TIMEOUT,
                    )
                )
        await self._beat(node)

    async def _beat(self, node: str) -> None:
        """One heartbeat: node status (conditions, capacity) and the node's Lease."""
        core = client.CoreV1Api(self.api)
        coord = client.CoordinationV1Api(self.api)
        async with self._sem:
            await raw_call(
                core.patch_node_status(
                    node, {"status": self._node_status(node)},
                    _preload_content=False, _request_timeout=REQUEST_TIMEOUT,
                )
            )
            lease: Json = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": node, "namespace": LEASE_NAMESPACE},
                "spec": {
                    "holderIdentity": node,
                    "leaseDurationSeconds": self.cfg.lease_seconds,
                    "renewTime": _now_micro(),
                },
            }
            try:
                await raw_call(
                    coord.patch_namespaced_lease(
                        node, LEASE_NAMESPACE, {"spec": lease["spec"]},
                        _preload_content=False, _request_timeout=REQUEST_TIMEOUT,
                    )
                )
            except RequestError as exc:
                if exc.status != 404:
                    raise
                await raw_call(
                    coord.create_namespaced_lease(
                        LEASE_NAMESPACE, cast(Any, lease),
                        _preload_content=False, _request_timeout=REQUEST_TIMEOUT,
                    ),
                    ok=(200, 201, 409),
                )
        self._heartbeats[node] = time.monotonic()
        self.stats["heartbeats"] = self.stats.get("heartbeats", 0) + 1

    async def _heartbeat_loop(self) -> None:
        while True:
            now = time.monotonic()
            dead = self.faults.dead_nodes
            due = [
                n for n in self.node_names
                if n not in dead
                and now - self._heartbeats.get(n, -math.inf) >= self.cfg.heartbeat_seconds
            ]
            results = await asyncio.gather(*(self._beat(n) for n in due), return_exceptions=True)
            for n, r in zip(due, results, strict=True):
                if isinstance(r, BaseException):
                    _log(f"heartbeat of {n} failed: {r!r}")
            await asyncio.sleep(0.5)

    async def wait_nodes_ready(self, timeout: float = 60.0) -> None:
        """Wait until the API shows every node Ready (raise TimeoutError at the deadline)."""
        core = client.CoreV1Api(self.api)
        deadline = time.monotonic() + timeout
        names = set(self.node_names)
        while True:
            _, body = await raw_call(
                core.list_node(
                    label_selector="omenative.io/devcluster=true",
                    _preload_content=False, _request_timeout=REQUEST_TIMEOUT,
                )
            )
            ready = {
                n["metadata"]["name"] for n in body.get("items", [])
                if _conditions(n).get("Ready") == "True"
            }
            if names <= ready and self._synced.is_set():
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"nodes not Ready after {timeout}s: {sorted(names - ready)}")
            await asyncio.sleep(0.2)

    # ------------------------------------------------------------------ pods: watch

    async def _pod_loop(self) -> None:
        """List + watch pods bound to a node (relist on 410 and on errors, with backoff)."""
        core = client.CoreV1Api(self.api)
        backoff = 0.5
        while True:
            try:
                rv = await self._list_pods(core)
                self._synced.set()
                backoff = 0.5
                while True:
                    rv = await self._watch_pods(core, rv)
            except asyncio.CancelledError:
                raise
            except _Gone:
                _log("watch expired (410): relisting")
            except (RequestError, aiohttp.ClientError, TimeoutError, ValueError) as exc:
                _log(f"pod watch error, relisting in {backoff:.1f}s: {exc!r}")
                await asyncio.sleep(backoff * (1 + random.random() / 2))
                backoff = min(backoff * 2, 10.0)

    async def _list_pods(self, core: client.CoreV1Api) -> str:
        seen: set[str] = set()
        cont: str | None = None
        rv = ""
        while True:
            kwargs: dict[str, Any] = {"limit": 500}
            if cont:
                kwargs["_continue"] = cont
            _, body = await raw_call(
                core.list_pod_for_all_namespaces(
                    field_selector="spec.nodeName!=",
                    _preload_content=False, _request_timeout=REQUEST_TIMEOUT, **kwargs,
                )
            )
            for pod in body.get("items", []):
                uid = pod["metadata"]["uid"]
                seen.add(uid)
                self._observe(pod)
            meta = body.get("metadata", {})
            rv = str(meta.get("resourceVersion", ""))
            cont = meta.get("continue") or None
            if not cont:
                break
        for uid in [u for u in self._pods if u not in seen]:
            self._forget(uid)
        return rv

    async def _watch_pods(self, core: client.CoreV1Api, rv: str) -> str:
        resp = cast(
            aiohttp.ClientResponse,
            await core.list_pod_for_all_namespaces(
                field_selector="spec.nodeName!=",
                watch=True,
                resource_version=rv,
                allow_watch_bookmarks=True,
                timeout_seconds=WATCH_SECONDS,
                _preload_content=False,
                _request_timeout=WATCH_TIMEOUT,
            ),
        )
        try:
            if resp.status == 410:
                raise _Gone
            if resp.status != 200:
                raise RequestError(resp.status, await resp.text())
            async for line in resp.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                etype = event.get("type")
                obj = event.get("object") or {}
                if etype == "ERROR":
                    if obj.get("code") == 410:
                        raise _Gone
                    raise RequestError(int(obj.get("code") or 0), obj)
                new_rv = obj.get("metadata", {}).get("resourceVersion")
                if new_rv:
                    rv = str(new_rv)
                if etype == "BOOKMARK":
                    continue
                if etype == "DELETED":
                    self._forget(obj["metadata"]["uid"])
                else:
                    self._observe(obj)
        finally:
            resp.release()
        return rv

    def _observe(self, pod: Json) -> None:
        node = pod.get("spec", {}).get("nodeName")
        uid = pod["metadata"]["uid"]
        if node not in self._node_index:
            return
        st = self._pods.get(uid)
        if st is None:
            st = _PodState(uid=uid, pod=pod, changed=asyncio.Event(), seen_at=time.monotonic())
            self._adopt(st)
            self._pods[uid] = st
            st.task = asyncio.create_task(self._pod_worker(st))
        elif _rv(pod) >= _rv(st.pod):
            st.pod = pod
        st.changed.set()

    def _adopt(self, st: _PodState) -> None:
        """Take over a pod that already has a status (the stand-in was restarted)."""
        status = st.pod.get("status", {})
        ip = status.get("podIP")
        if ip and ip.startswith(self._pod_subnet(st.node) + "."):
            st.ip = ip
            self._used_ips[st.node].add(int(ip.rsplit(".", 1)[1]))
        conds = _conditions(st.pod)
        if status.get("phase") == "Running":
            st.stage = _READY if conds.get("ContainersReady") == "True" else _RUNNING
            st.stage_at = time.monotonic()

    def _forget(self, uid: str) -> None:
        st = self._pods.pop(uid, None)
        if st is None:
            return
        st.gone = True
        st.changed.set()
        if st.ip:
            self._used_ips.get(st.node, set()).discard(int(st.ip.rsplit(".", 1)[1]))

    # ------------------------------------------------------------------ pods: transitions

    def _plan(self, st: _PodState, now: float) -> tuple[str | None, float]:
        """Next action for a pod and when it is due (None: wait for a change)."""
        pod = st.pod
        if st.node in self.faults.dead_nodes:
            return None, math.inf
        if pod["metadata"].get("deletionTimestamp"):
            return self._plan_deletion(st, now)
        return self._plan_faults(st) or self._plan_healthy(st, now)

    def _plan_healthy(self, st: _PodState, now: float) -> tuple[str | None, float]:
        """The next step of a pod without faults: Running, then Ready, then kept in sync."""
        pod = st.pod
        if st.stage in ("", _PULL_ERROR, _PULL_BACKOFF, _CRASH):
            return _RUNNING, st.seen_at + self.cfg.start_delay if st.stage == "" else now
        if st.stage == _RUNNING:
            return _READY, st.stage_at + self.cfg.ready_delay
        conds = _conditions(pod)
        want_ready = "True" if readiness_gates_met(pod) else "False"
        if (
            conds.get("ContainersReady") != "True"
            or conds.get("Ready") != want_ready
            or pod.get("status", {}).get("phase") != "Running"
        ):
            return "sync-ready", now
        return None, math.inf

    def _plan_deletion(self, st: _PodState, now: float) -> tuple[str | None, float]:
        """A deleted pod: stop its containers (terminal phase), then remove it once.

        The terminal status comes first, as with a kubelet; the delete with grace period 0
        follows. A finalizer (Kueue's) may keep the pod after that: the stand-in then waits
        for the next change instead of deleting it again.
        """
        if st.delete_seen_at is None:
            st.delete_seen_at = now
        due = st.delete_seen_at + self.cfg.delete_delay
        if st.pod.get("status", {}).get("phase") not in _TERMINAL_PHASES:
            return _TERMINATE, due
        if not st.removed:
            return _DELETE, due
        return None, math.inf

    def _plan_faults(self, st: _PodState) -> tuple[str | None, float] | None:
        """The next step of a finished pod or one whose image is faulted; None otherwise."""
        if st.pod.get("status", {}).get("phase") in _TERMINAL_PHASES:
            return None, math.inf
        images = [str(c.get("image", "")) for c in _containers(st.pod)]
        pull = self._plan_bad_image(st, images)
        if pull is not None:
            return pull
        if any(image_matches(i, self.faults.crash_images) for i in images):
            if st.stage != _CRASH:
                return _CRASH, st.seen_at + self.cfg.start_delay
            return "restart", st.next_restart_at
        return None

    def _plan_bad_image(self, st: _PodState, images: list[str]) -> tuple[str | None, float] | None:
        """ErrImagePull, then ImagePullBackOff, for a pod not started whose image is bad."""
        # a bad image only matters before the pull; a started pod has its image already
        not_started = st.stage in ("", _PULL_ERROR, _PULL_BACKOFF)
        if not not_started or not any(image_matches(i, self.faults.bad_images) for i in images):
            return None
        if st.stage == _PULL_ERROR:
            return _PULL_BACKOFF, st.stage_at + 1.0
        if st.stage == _PULL_BACKOFF:
            return None, math.inf
        return _PULL_ERROR, st.seen_at + self.cfg.start_delay

    async def _pod_worker(self, st: _PodState) -> None:
        while not st.gone:
            now = time.monotonic()
            action, due = self._plan(st, now)
            if action is not None and action == st.last_action:
                due = max(due, st.last_action_at + 0.5)  # never spin on one action
            if action is None or due > now:
                st.changed.clear()
                timeout = None if math.isinf(due) else max(0.0, due - now)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(st.changed.wait(), timeout=timeout)
                continue
            st.last_action, st.last_action_at = action, now
            try:
                await self._act(st, action)
            except RequestError as exc:
                if exc.status == 404:
                    self._forget(st.uid)
                    return
                _log(f"{st.namespace}/{st.name}: {action} failed: {exc}")
            except (aiohttp.ClientError, TimeoutError) as exc:
                _log(f"{st.namespace}/{st.name}: {action} failed: {exc!r}")
            self.stats[action] = self.stats.get(action, 0) + 1

    def _alloc_ip(self, st: _PodState) -> str:
        if st.ip is None:
            used = self._used_ips.setdefault(st.node, set())
            host = next((h for h in range(2, 255) if h not in used), None)
            if host is None:
                raise RuntimeError(f"no pod IPs left on {st.node}")
            used.add(host)
            st.ip = f"{self._pod_subnet(st.node)}.{host}"
        return st.ip

    async def _act(self, st: _PodState, action: str) -> None:
        if action == _DELETE:
            await self._delete(st)
            st.removed = True
            return
        if action == _TERMINATE:
            await self._patch_status(st, self._terminal_status(st))
            return
        now = time.monotonic()
        if action == _CRASH:
            st.next_restart_at = now + self._crash_backoff(st.restarts)
        elif action == "restart":
            st.restarts += 1
            st.next_restart_at = now + self._crash_backoff(st.restarts)
        status = self._status_for(st, action)
        await self._patch_status(st, status)
        if action == "sync-ready":
            return
        st.stage = {"restart": _CRASH}.get(action, action)
        st.stage_at = now

    @staticmethod
    def _crash_backoff(restarts: int) -> float:
        return float(min(10.0, 2.0**restarts))

    def _status_for(self, st: _PodState, action: str) -> Json:
        pod = st.pod
        ts = _now()
        ip = self._alloc_ip(st)
        host_ip = self._node_ip(st.node)
        started_at = pod.get("status", {}).get("startTime") or ts
        statuses = [self._container_status(st, c, action, ts) for c in _containers(pod)]
        status: Json = {
            "phase": "Pending" if action in (_PULL_ERROR, _PULL_BACKOFF) else "Running",
            "conditions": _pod_conditions(pod, ready=action in (_READY, "sync-ready"), ts=ts),
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": started_at,
            "containerStatuses": statuses,
        }
        init = _init_statuses(pod, started_at, ts)
        if init:
            status["initContainerStatuses"] = init
        return status

    def _container_status(self, st: _PodState, c: Json, action: str, ts: str) -> Json:
        """One container's status for ``action`` (pull error, crash, running, ready)."""
        uid = st.uid
        name = str(c["name"])
        image = str(c.get("image", ""))
        running = action in (_RUNNING, _READY, "sync-ready")
        cs: Json = {
            "name": name,
            "image": image,
            "imageID": "",
            "ready": action in (_READY, "sync-ready"),
            "restartCount": st.restarts,
            "started": running,
            "lastState": {},
        }
        if action in (_PULL_ERROR, _PULL_BACKOFF):
            reason = "ErrImagePull" if action == _PULL_ERROR else "ImagePullBackOff"
            msg = (
                f'failed to pull image "{image}": not found (kubelet stand-in fault)'
                if action == _PULL_ERROR
                else f'Back-off pulling image "{image}"'
            )
            cs["state"] = {"waiting": {"reason": reason, "message": msg}}
            return cs
        cs["imageID"] = _image_id(image)
        cs["containerID"] = _container_id(uid, name, st.restarts)
        if action in (_CRASH, "restart"):
            terminated = {
                "exitCode": 1, "reason": "Error", "startedAt": ts, "finishedAt": ts,
                "containerID": _container_id(uid, name, max(0, st.restarts - 1)),
            }
            if action == _CRASH:
                cs["state"] = {"terminated": terminated}
            else:
                cs["state"] = {"waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": f"back-off restarting failed container {name} in pod "
                               f"{st.name}_{st.namespace}({uid})",
                }}
                cs["lastState"] = {"terminated": terminated}
            return cs
        since = _running_since(st.pod, name) or ts
        cs["state"] = {"running": {"startedAt": since}}
        return cs

    def _terminal_status(self, st: _PodState) -> Json:
        """The status a kubelet writes once a deleted pod's containers have stopped.

        A container that was running exits cleanly on SIGTERM (exit code 0, ``Completed``);
        one that never started or was crash-looping is reported as killed (exit code 137).
        The pod is ``Succeeded`` when every container exited cleanly, else ``Failed``;
        ``Ready`` and ``ContainersReady`` turn False.
        """
        pod = st.pod
        ts = _now()
        clean = st.stage in (_RUNNING, _READY)
        statuses: list[Json] = []
        for c in _containers(pod):
            name = str(c["name"])
            image = str(c.get("image", ""))
            since = _running_since(pod, name) or ts
            terminated: Json = (
                {"exitCode": 0, "reason": "Completed", "startedAt": since, "finishedAt": ts}
                if clean else
                {"exitCode": 137, "reason": "ContainerStatusUnknown", "finishedAt": ts,
                 "message": "The container was stopped because the pod was deleted"}
            )
            if clean:
                terminated["containerID"] = _container_id(st.uid, name, st.restarts)
            statuses.append({
                "name": name, "image": image,
                "imageID": _image_id(image) if clean else "",
                "ready": False, "restartCount": st.restarts, "started": False,
                "state": {"terminated": terminated}, "lastState": {},
            })
        status: Json = {
            "phase": "Succeeded" if clean else "Failed",
            "conditions": _pod_conditions(pod, ready=False, ts=ts, terminated=True),
            "containerStatuses": statuses,
        }
        return status

    async def _patch_status(self, st: _PodState, status: Json) -> None:
        core = client.CoreV1Api(self.api)
        async with self._sem:
            _, body = await raw_call(
                core.patch_namespaced_pod_status(
                    st.name, st.namespace, {"status": status},
                    _preload_content=False, _request_timeout=REQUEST_TIMEOUT,
                )
            )
        if body.get("metadata", {}).get("uid") == st.uid and _rv(body) >= _rv(st.pod):
            st.pod = body

    async def _delete(self, st: _PodState) -> None:
        core = client.CoreV1Api(self.api)
        opts = client.V1DeleteOptions(
            grace_period_seconds=0, preconditions=client.V1Preconditions(uid=st.uid)
        )
        async with self._sem:
            await raw_call(
                core.delete_namespaced_pod(
                    st.name, st.namespace, grace_period_seconds=0, body=opts,
                    _preload_content=False, _request_timeout=REQUEST_TIMEOUT,
                ),
                ok=(200, 202, 404, 409),
            )


class _Gone(Exception):
    """The watch's resourceVersion is too old (HTTP 410): list again."""

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

The pieces live next to this module: ``kubelet_api`` (API calls), ``kubelet_config``
(settings, faults), ``kubelet_nodes`` (node status), ``kubelet_pods`` (pod status); this one
runs the loops (registration and heartbeats, the pod watch, one worker per pod).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import time
from collections.abc import Awaitable, Iterable
from typing import Any, cast

import aiohttp
from kubernetes_asyncio import client, config

from omenative_devcluster.kubelet_api import (
    FAULT_FILE_POLL,
    GPU,
    LEASE_NAMESPACE,
    REQUEST_TIMEOUT,
    WATCH_SECONDS,
    WATCH_TIMEOUT,
    Json,
    RequestError,
    _log,
    _now,
    _now_micro,
    _rv,
    raw_call,
)
from omenative_devcluster.kubelet_config import (
    STAND_IN_TAINT,
    Faults,
    StandInConfig,
    acknowledge_faults,
    applied_path,
    image_matches,
)
from omenative_devcluster.kubelet_nodes import node_labels, node_status
from omenative_devcluster.kubelet_pods import (
    _CRASH,
    _DELETE,
    _READY,
    _RUNNING,
    _TERMINATE,
    _conditions,
    _PodState,
    crash_backoff,
    plan_pod,
    pod_status,
    readiness_gates_met,
    terminal_status,
)

__all__ = [
    "GPU",
    "LEASE_NAMESPACE",
    "REQUEST_TIMEOUT",
    "Faults",
    "KubeletStandIn",
    "RequestError",
    "StandInConfig",
    "applied_path",
    "image_matches",
    "raw_call",
    "readiness_gates_met",
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
        # one budget per node, as each node has its own kubelet (and its own client)
        self._sems = {n: asyncio.Semaphore(cfg.max_inflight) for n in self.node_names}
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
            cfg.connection_pool_maxsize = self.cfg.max_inflight * self.cfg.nodes + 8
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
        acknowledge_faults(path, generation, self._file_faults)

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
        now = _now()
        since = self._ready_since.setdefault(node, now)
        return node_status(self.cfg, node, self._node_ip(node), now, since)

    async def _register_nodes(self) -> None:
        core = client.CoreV1Api(self.api)
        await asyncio.gather(*(self._register_node(core, n) for n in self.node_names))
        _log(f"registered {len(self.node_names)} nodes with {self.cfg.gpus_per_node} GPUs each")

    async def _register_node(self, core: client.CoreV1Api, node: str) -> None:
        body: Json = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node, "labels": node_labels(node, self._node_index[node])},
            "spec": {"podCIDR": f"{self._pod_subnet(node)}.0/24",
                     **({"taints": [dict(STAND_IN_TAINT)]} if self.cfg.tainted else {})},
            "status": self._node_status(node),
        }
        async with self._sems[node]:
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
                        node, {"metadata": {"labels": node_labels(node, self._node_index[node])}},
                        _preload_content=False, _request_timeout=REQUEST_TIMEOUT,
                    )
                )
        await self._beat(node)

    async def _beat(self, node: str) -> None:
        """One heartbeat: node status (conditions, capacity) and the node's Lease."""
        core = client.CoreV1Api(self.api)
        coord = client.CoordinationV1Api(self.api)
        async with self._sems[node]:
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

    async def _pod_worker(self, st: _PodState) -> None:
        while not st.gone:
            now = time.monotonic()
            action, due = plan_pod(st, now, self.cfg, self.faults)
            if action is not None and action == st.last_action:
                due = max(due, st.last_action_at + 0.5)  # never spin on one action
            if action is None or due > now:
                st.changed.clear()
                timeout = None if math.isinf(due) else max(0.0, due - now)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await st.changed.wait()
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
            await self._patch_status(st, terminal_status(st))
            return
        now = time.monotonic()
        if action == _CRASH:
            st.next_restart_at = now + crash_backoff(st.restarts)
        elif action == "restart":
            st.restarts += 1
            st.next_restart_at = now + crash_backoff(st.restarts)
        status = pod_status(st, action, self._alloc_ip(st), self._node_ip(st.node))
        await self._patch_status(st, status)
        if action == "sync-ready":
            return
        st.stage = {"restart": _CRASH}.get(action, action)
        st.stage_at = now

    async def _patch_status(self, st: _PodState, status: Json) -> None:
        core = client.CoreV1Api(self.api)
        async with self._sems[st.node]:
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
        async with self._sems[st.node]:
            await raw_call(
                core.delete_namespaced_pod(
                    st.name, st.namespace, grace_period_seconds=0, body=opts,
                    _preload_content=False, _request_timeout=REQUEST_TIMEOUT,
                ),
                ok=(200, 202, 404, 409),
            )


class _Gone(Exception):
    """The watch's resourceVersion is too old (HTTP 410): list again."""

"""The controller benchmark's baseline: a bare kubernetes-asyncio loop doing the gang's work.

It creates the same pods as the manager (``copied_pod``: copies of the manager's pods and
``copied_service``: its headless Service; or, with ``--bare-pods minimal``, ``bare_pod``:
the same container and ``ome.io/serving`` readiness gate only) and, once every pod of a
group of 4 has its containers ready (seen on a watch), patches each pod's status to set
the gate True: 2 writes per pod, under the same client limits as the manager (one token
bucket, at most ``inflight`` calls at once).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from kubernetes_asyncio import client as k8s

from omenative_controller.kube.client import JSON
from omenative_controller.kube.ratelimit import TokenBucket
from omenative_core.labels import LABEL_INSTANCE_INDEX, LABEL_REPLICA
from omenative_devcluster.kubelet import REQUEST_TIMEOUT, RequestError, raw_call

IMAGE = "example.com/llm:1"
PODS_PER_REPLICA = 4  # leader + 3 workers

SERVING_GATE = "ome.io/serving"


def bare_pod(i: int) -> JSON:
    """The same container and ``ome.io/serving`` readiness gate as the manager's pods."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"bare-{i // PODS_PER_REPLICA}-{i % PODS_PER_REPLICA}",
                     "labels": {"app": "bench-bare",
                                "group": f"bare-{i // PODS_PER_REPLICA}"}},
        "spec": {"terminationGracePeriodSeconds": 1,
                 "readinessGates": [{"conditionType": SERVING_GATE}],
                 "containers": [{"name": "ome-container", "image": IMAGE}]},
    }


def copied_pod(pod: JSON) -> JSON:
    """One of the manager's pods as the bare loop creates it with ``--bare-pods same``:
    the same spec (labels, env, hostname, affinity, spread, readiness gate), minus what
    the API server or its admission filled in for that one object (node, token volume,
    status), plus the bare loop's ``group`` label (its InferenceReplica and Instance)."""
    meta = pod["metadata"]
    labels = dict(meta.get("labels") or {})
    labels["group"] = "bare-{}-{}".format(labels.get(LABEL_REPLICA, ""),
                                         labels.get(LABEL_INSTANCE_INDEX, meta["name"]))
    spec = {k: v for k, v in pod["spec"].items() if k != "nodeName"}
    token = {v["name"] for v in spec.get("volumes") or ()
             if v["name"].startswith("kube-api-access")}
    spec["volumes"] = [v for v in spec.get("volumes") or () if v["name"] not in token]
    spec["containers"] = [
        {**c, "volumeMounts": [m for m in c.get("volumeMounts") or () if m["name"] not in token]}
        for c in spec["containers"]]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": meta["name"], "labels": labels,
                         "annotations": dict(meta.get("annotations") or {})},
            "spec": spec}


def copied_object(obj: JSON, api_version: str, kind: str) -> JSON:
    """One of the manager's gang objects (a native Workload or PodGroup) as the bare loop
    creates it: the same name, labels and spec, no owner (no InferenceReplica here). A
    LIST's items carry no ``apiVersion`` or ``kind``: the caller names them."""
    meta = obj["metadata"]
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": meta["name"], "labels": dict(meta.get("labels") or {})},
            "spec": obj["spec"]}


def copied_service(svc: JSON) -> JSON:
    """One of the manager's Services (the headless one) as the bare loop creates it."""
    meta = svc["metadata"]
    spec = {k: v for k, v in svc["spec"].items() if k not in ("clusterIP", "clusterIPs")}
    if svc["spec"].get("clusterIP") == "None":
        spec["clusterIP"] = "None"
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": meta["name"], "labels": dict(meta.get("labels") or {})},
            "spec": spec}


def containers_ready(pod: JSON) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "ContainersReady" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ())


async def bounded(n: int, concurrency: int, call: Callable[[int], Awaitable[None]]) -> None:
    """``call(0..n-1)`` with at most ``concurrency`` in flight."""
    items = iter(range(n))

    async def worker() -> None:
        for i in items:  # one shared iterator: each index is taken once
            await call(i)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


class BareLoop:
    """The baseline: kubernetes-asyncio's CoreV1Api, one token bucket, ``inflight`` calls.

    Creates the pods, and patches each group's serving gate True once all of the group's
    pods have their containers ready (fed by :meth:`see`, from a watch of the namespace).
    """

    def __init__(self, api: k8s.ApiClient, namespace: str, qps: float, burst: int,
                 inflight: int, pods: list[JSON] | None = None) -> None:
        self.core = k8s.CoreV1Api(api)
        #: the pods to create (``copied_pod``); None: ``bare_pod(i)``
        self.pods = pods
        self.namespace = namespace
        self.bucket = TokenBucket(qps, burst)
        self.slots = asyncio.Semaphore(inflight)
        self.inflight = inflight
        self.latencies: list[float] = []
        self.requests = 0
        self.groups: dict[str, dict[str, bool]] = {}
        self.gated: set[str] = set()
        self.tasks: set[asyncio.Task[None]] = set()

    async def _call(self, make: Callable[[], Awaitable[Any]], ok: tuple[int, ...]) -> None:
        for attempt in range(5):
            async with self.slots:
                await self.bucket.acquire()
                started = time.monotonic()
                self.requests += 1
                try:
                    await raw_call(make(), ok=ok)
                    self.latencies.append(time.monotonic() - started)
                    return
                except (RequestError, aiohttp.ClientError, TimeoutError):
                    if attempt == 4:
                        raise
            await asyncio.sleep(0.1 * 2 ** attempt)

    async def create_services(self, services: list[JSON]) -> None:
        """Create Services (copies of the manager's with ``--bare-pods same``),
        ``inflight`` at a time as every other write of the loop."""
        async def create(i: int) -> None:
            await self._call(lambda: self.core.create_namespaced_service(
                self.namespace, services[i], _preload_content=False,  # type: ignore[arg-type]
                _request_timeout=REQUEST_TIMEOUT), (201, 409))

        await bounded(len(services), self.inflight, create)

    async def create_objects(self, objects: list[JSON], plural: dict[str, str]) -> None:
        """Create copies of the manager's gang objects (``--bare-pods same`` under native
        gang scheduling: Workloads first, then PodGroups, ``inflight`` at a time), before
        any pod, as the manager sends a gang's objects before its pods."""
        custom = k8s.CustomObjectsApi(self.core.api_client)
        for kind in ("Workload", "PodGroup"):
            batch = [o for o in objects if o["kind"] == kind]

            async def create(i: int, batch: list[JSON] = batch) -> None:
                body = batch[i]
                group, _, version = body["apiVersion"].rpartition("/")
                await self._call(lambda: custom.create_namespaced_custom_object(
                    group, version, self.namespace, plural[body["kind"]], body,
                    _preload_content=False, _request_timeout=REQUEST_TIMEOUT), (201, 409))

            await bounded(len(batch), self.inflight, create)

    async def create_service(self) -> None:
        """A headless Service selecting every bare pod, as the manager makes one per
        replica: kube-controller-manager then keeps EndpointSlices of the bare pods too
        (``--bare-service``), the same cluster work the manager's pods cause."""
        await self.create_services([{
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "bench-bare-headless"},
            "spec": {"clusterIP": "None", "selector": {"app": "bench-bare"},
                     "publishNotReadyAddresses": True}}])

    async def create_pods(self, n: int) -> None:
        """Create ``n`` pods, ``inflight`` at a time."""
        async def create(i: int) -> None:
            await self._call(lambda: self.core.create_namespaced_pod(
                self.namespace, self.pods[i] if self.pods else bare_pod(i),
                _preload_content=False,  # type: ignore[arg-type]
                _request_timeout=REQUEST_TIMEOUT), (201, 409))

        await bounded(n, self.inflight, create)

    def see(self, kind: str, pod: JSON) -> None:
        """A watch event: when a whole group is container-ready, open its gates."""
        meta = pod["metadata"]
        group = (meta.get("labels") or {}).get("group")
        if not group or kind == "DELETED" or group in self.gated:
            return
        members = self.groups.setdefault(group, {})
        members[meta["name"]] = containers_ready(pod)
        if len(members) == PODS_PER_REPLICA and all(members.values()):
            self.gated.add(group)
            for name in members:
                task = asyncio.create_task(self._open_gate(name))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)

    async def _open_gate(self, name: str) -> None:
        body = {"status": {"conditions": [{
            "type": SERVING_GATE, "status": "True", "reason": "GroupReady",
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}]}}
        await self._call(lambda: self.core.patch_namespaced_pod_status(
            name, self.namespace, body, _preload_content=False,
            _content_type="application/strategic-merge-patch+json",
            _request_timeout=REQUEST_TIMEOUT), (200,))

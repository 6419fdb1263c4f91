"""The model-server engine the traffic tests and ``demo`` roll out, and waits on what
omenative reports about it.

An InferenceReplica of the test model server (``images.MODEL_SERVER_IMAGE``): a leader and
its workers per Instance, each answering with its ``MODEL_REVISION``; a ClusterIP Service in
front of the leaders (what clients call, like OME's engine Service); and ``wait_converged``,
which waits until omenative reports the rollout done and nothing else is left.
"""

from __future__ import annotations

import asyncio
import json
import time

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import (
    ENDPOINT_SLICES,
    INFERENCE_REPLICAS,
    PODS,
    SERVICES,
    Resource,
)
from omenative_devcluster.images import MODEL_SERVER_IMAGE
from omenative_devcluster.traffic import LoadGenerator

__all__ = [
    "DRAIN_SECONDS",
    "LOAD_SECONDS",
    "leader_service",
    "live_pods",
    "model_replica",
    "ready_endpoints",
    "revision_patch",
    "server_container",
    "wait_answering",
    "wait_converged",
]

DRAIN_SECONDS = 5
"""The server keeps answering this long after SIGTERM. omenative deletes a pod once the
EndpointSlices show its gate False (docs/lifecycle.md), which is also when kube-proxy starts
to drop it; kube-proxy's sync (its min-sync-period, 1 s, plus iptables-restore) must end
before the server stops taking connections. 5 s leaves room on a busy 2-core machine."""

LOAD_SECONDS = 1
"""The server's model load time: its /ready fails this long after start."""

def server_container(revision: str, load_seconds: float = LOAD_SECONDS,
                     env: dict[str, str] | None = None) -> JSON:
    """The model server's container: ``revision``, its load time, the drain delay, a
    readiness probe on ``/ready`` every second."""
    variables = [{"name": "MODEL_REVISION", "value": revision},
                 {"name": "LOAD_SECONDS", "value": str(load_seconds)},
                 {"name": "DRAIN_SECONDS", "value": str(DRAIN_SECONDS)},
                 {"name": "POD_NAME",
                  "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    variables += [{"name": k, "value": v} for k, v in (env or {}).items()]
    return {
        "name": "ome-container", "image": MODEL_SERVER_IMAGE, "imagePullPolicy": "Never",
        "ports": [{"containerPort": 8080, "name": "http"}],
        "env": variables,
        # one failed probe takes the pod out of its Services at once (a quick, exact
        # signal for the tests), so only a real failure may fail it: a 503 or a refused
        # connection comes at once, while a busy 2-core machine can hold a sound answer
        # past the default 1 s timeout (the lone router of a prefill-decode guide then
        # leaves its Service with no endpoint, and a new connection is refused)
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080},
                           "periodSeconds": 1, "failureThreshold": 1, "timeoutSeconds": 5},
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
    }


def model_replica(name: str, *, replicas: int = 2, revision: str = "rev-1",
                  worker_size: int = 1, load_seconds: float = LOAD_SECONDS,
                  env: dict[str, str] | None = None) -> JSON:
    """An InferenceReplica of the model server: a leader and ``worker_size`` workers per
    Instance (0: one default pod), each answering with ``revision``."""

    def template() -> JSON:
        # the grace period covers the drain delay and the in-flight requests after it
        return {"spec": {"terminationGracePeriodSeconds": DRAIN_SECONDS + 25,
                         "containers": [server_container(revision, load_seconds, env)]}}

    runners = ([{"name": "default", "size": 1, "template": template()}] if worker_size == 0
               else [{"name": "leader", "size": 1, "template": template()},
                     {"name": "worker", "size": worker_size, "template": template()}])
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
            "metadata": {"name": name},
            "spec": {"component": "engine", "replicas": replicas, "runners": runners}}


def revision_patch(body: JSON, revision: str) -> JSON:
    """A merge patch that sets MODEL_REVISION in every runner: a new revision to roll out."""
    runners = json.loads(json.dumps(body["spec"]["runners"]))
    for runner in runners:
        for var in runner["template"]["spec"]["containers"][0]["env"]:
            if var["name"] == "MODEL_REVISION":
                var["value"] = revision
    return {"spec": {"runners": runners}}


async def leader_service(kube: KubeClient, namespace: str, replica: str,
                         worker_size: int = 1, selector: dict[str, str] | None = None) -> str:
    """A ClusterIP Service on port 8080 in front of the Instances' leaders (what clients
    call, like OME's engine Service); returns its ClusterIP."""
    selector = selector or {"ome.io/inferencereplica": replica,
                            "ome.io/runner": "default" if worker_size == 0 else "leader"}
    svc = await kube.create(SERVICES, {
        "metadata": {"name": f"{replica}-serve"},
        "spec": {"type": "ClusterIP", "selector": selector,
                 "ports": [{"name": "http", "port": 8080, "targetPort": 8080}]},
    }, namespace)
    return str(svc["spec"]["clusterIP"])


async def ready_endpoints(kube: KubeClient, namespace: str, service: str) -> set[str]:
    """Pod names the Service's EndpointSlices route to (ready endpoints)."""
    page = await kube.list(ENDPOINT_SLICES, namespace,
                           label_selector=f"kubernetes.io/service-name={service}")
    return {str((ep.get("targetRef") or {}).get("name"))
            for s in page.get("items") or () for ep in s.get("endpoints") or ()
            if (ep.get("conditions") or {}).get("ready")}


async def live_pods(kube: KubeClient, namespace: str) -> dict[str, JSON]:
    """Pods of the namespace that are not terminating, by name."""
    page = await kube.list(PODS, namespace)
    return {p["metadata"]["name"]: p for p in page.get("items") or ()
            if not p["metadata"].get("deletionTimestamp")}


async def _convergence(kube: KubeClient, namespace: str, name: str, replicas: int,
                       pods_per_instance: int, revision: str, resource: Resource,
                       ) -> tuple[bool, str]:
    """(converged, what was seen) for ``wait_converged``."""
    ir = await kube.get(resource, name, namespace)
    st = ir.get("status") or {}
    items = (await kube.list(PODS, namespace)).get("items") or ()
    revs = {v.get("value") for p in items for v in p["spec"]["containers"][0].get("env") or ()
            if v.get("name") == "MODEL_REVISION"}
    routed = await ready_endpoints(kube, namespace, f"{name}-serve")
    ok = (st.get("readyReplicas") == replicas and st.get("updatedReplicas") == replicas
          and len(items) == replicas * pods_per_instance and revs == {revision}
          and len(routed) == replicas)
    seen = (f"ready {st.get('readyReplicas')}, updated {st.get('updatedReplicas')}, "
            f"{len(items)} pods on {sorted(map(str, revs))}, Service routes to "
            f"{sorted(routed)}")
    return ok, seen


async def wait_converged(kube: KubeClient, namespace: str, name: str, *, replicas: int,
                         pods_per_instance: int, revision: str, timeout: float = 180,
                         resource: Resource = INFERENCE_REPLICAS) -> None:
    """Until omenative reports every Instance Ready and updated, only the desired pods are
    left (all running ``revision``), and the Service routes to exactly the leaders.

    ``resource`` may name another workload kind whose status has ``readyReplicas`` and
    ``updatedReplicas`` (a LeaderWorkerSet, for the side-by-side benchmark)."""
    deadline = time.monotonic() + timeout
    while True:
        ok, seen = await _convergence(kube, namespace, name, replicas, pods_per_instance,
                                      revision, resource)
        if ok:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name}: not {replicas} Instances Ready on {revision} with "
                               f"nothing else left after {timeout:.0f}s; last seen: {seen}")
        await asyncio.sleep(0.5)


async def wait_answering(url: str, pods: int, *, timeout: float = 30.0) -> None:
    """Until a burst of requests on new connections through ``url`` (a Service) is answered
    in full, by ``pods`` different pods: kube-proxy has programmed the Service.

    The EndpointSlices can list a new Service's pods a moment before kube-proxy's rules do
    (its connections are refused meanwhile): a traffic run starts after this, so its
    failures are the lifecycle's, not the Service's first sync.
    """
    deadline = time.monotonic() + timeout
    seen: set[str] = set()
    while True:
        gen = LoadGenerator(url, rate=50, duration=0.4, keepalive_share=0.0)
        async with gen:
            await gen.wait()
        report = gen.report()
        seen = {o.pod for o in report.answers}
        if report.failed == 0 and len(seen) >= pods:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url}: not answered by {pods} pods without a failure after "
                               f"{timeout:.0f}s; last burst: {report.summary('burst')}, "
                               f"pods {sorted(seen)}")
        await asyncio.sleep(0.2)

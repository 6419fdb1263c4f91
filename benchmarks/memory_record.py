"""Record real objects for ``bench_memory.py`` from a local control plane.

Starts ``python -m omenative_devcluster up`` (GPU nodes of the kubelet stand-in), runs the
real manager (``omenative-manager``) on one InferenceReplica of 2 Instances x (leader +
worker), 8 GPUs a pod, until it reports both Instances Ready, then saves what the API server
holds, as its JSON: the InferenceReplica, its pods, ControllerRevisions, headless Service,
EndpointSlices, nodes, and the native gang objects (``scheduling.k8s.io/v1beta1`` or
``v1alpha2``: the control plane serves them, so the manager gives the replica one Workload
and each Instance one PodGroup). ``bench_memory.py`` replays them, renamed, at fleet scale.
The cluster and the manager are removed at the end, also on error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path
from typing import Any

from bench_controller import (
    DevCluster,
    ManagerProcess,
    apply_crd,
    cleanup_namespaces,
    create_namespace,
)
from watching import say

from omenative_controller.kube.apiwatch import NATIVE_GANG_VERSIONS, served_resources
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import (
    CONTROLLER_REVISIONS,
    ENDPOINT_SLICES,
    INFERENCE_REPLICAS,
    NODES,
    PODS,
    SERVICES,
)
from omenative_core.labels import LABEL_REPLICA

NAME = "rec"
INSTANCES = 2
IMAGE = "registry.example.com/ome/vllm-openai:v0.9.2"


def recorded_replica() -> JSON:
    """A realistic multi-node replica: leader + 1 worker, 8 GPUs each, env, probes, mounts."""

    def template(role: str) -> JSON:
        env = [{"name": f"OME_{k}", "value": v} for k, v in (
            ("MODEL", "meta-llama/Llama-3.1-405B-Instruct"), ("ROLE", role),
            ("TP_SIZE", "8"), ("PP_SIZE", "2"), ("NCCL_DEBUG", "WARN"),
            ("HF_HOME", "/mnt/models/cache"), ("PORT", "8080"))]
        return {"spec": {"terminationGracePeriodSeconds": 1, "containers": [{
            "name": "ome-container", "image": IMAGE,
            "args": ["--model", "/mnt/models", "--tensor-parallel-size", "8",
                     "--pipeline-parallel-size", "2", "--port", "8080"],
            "env": env,
            "resources": {"limits": {"nvidia.com/gpu": "8", "cpu": "100m", "memory": "1Gi"},
                          "requests": {"nvidia.com/gpu": "8", "cpu": "100m",
                                       "memory": "1Gi"}},
            "ports": [{"name": "http", "containerPort": 8080}],
            "readinessProbe": {"httpGet": {"path": "/health", "port": 8080},
                               "periodSeconds": 10},
            "volumeMounts": [{"name": "models", "mountPath": "/mnt/models"},
                             {"name": "shm", "mountPath": "/dev/shm"}],
        }], "volumes": [{"name": "models", "emptyDir": {}},
                        {"name": "shm", "emptyDir": {"medium": "Memory"}}]}}

    return {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
        "metadata": {"name": NAME, "labels": {"app.kubernetes.io/name": "llama-405b"}},
        "spec": {"component": "engine", "replicas": INSTANCES, "runners": [
            {"name": "leader", "size": 1, "template": template("leader")},
            {"name": "worker", "size": 1, "template": template("worker")},
        ]},
    }


async def _wait_ready(kube: KubeClient, namespace: str, timeout: float = 240.0) -> JSON:
    deadline = time.monotonic() + timeout
    while True:
        ir = await kube.get(INFERENCE_REPLICAS, NAME, namespace)
        status = ir.get("status") or {}
        if status.get("readyReplicas") == INSTANCES and status.get("availableReplicas",
                                                                    INSTANCES) == INSTANCES:
            return ir
        if time.monotonic() > deadline:
            raise RuntimeError(f"{NAME} not Ready within {timeout:.0f}s: {status}")
        await asyncio.sleep(1.0)


async def _items(kube: KubeClient, res: Any, namespace: str | None,
                 selector: str | None = None) -> list[JSON]:
    page = await kube.list(res, namespace, label_selector=selector)
    return list(page.get("items") or ())


MANAGER_FLAGS: dict[str, object] = {"workers": 2, "max_inflight": 16, "status_coalesce": 0.0}
"""The manager's options for the recording (by its own option names; the rest at its
defaults): every status written, so the recorded status is the final one."""


async def record(path: Path, workdir: Path, kubeconfig: Path | None = None) -> None:
    """Record the objects into ``path`` (JSON), on the cluster of ``kubeconfig`` (it must
    run the kubelet stand-in with room for 4 pods of 8 GPUs), else on one started here."""
    cluster = DevCluster(workdir / "devcluster", nodes=INSTANCES * 2)
    manager = ManagerProcess(workdir)
    kube: KubeClient | None = None
    namespaces: list[str] = []
    try:
        if kubeconfig is None:
            say(f"recording: starting the local control plane in {workdir}")
            kubeconfig = await cluster.start()
        else:
            say(f"recording on the cluster of {kubeconfig}")
        kube = await KubeClient.connect(str(kubeconfig), qps=0, burst=1, timeout=30)
        await apply_crd(kube)
        ns = await create_namespace(kube, "bench-mem", namespaces)
        await manager.start(kubeconfig, ns, MANAGER_FLAGS)
        await kube.create(INFERENCE_REPLICAS, recorded_replica(), ns)
        await _wait_ready(kube, ns)
        await asyncio.sleep(2.0)  # the last status write and EndpointSlice update
        ir = await kube.get(INFERENCE_REPLICAS, NAME, ns)
        selector = f"{LABEL_REPLICA}={NAME}"
        objects = {
            "replica": ir,
            "pods": await _items(kube, PODS, ns, selector),
            "revisions": await _items(kube, CONTROLLER_REVISIONS, ns, selector),
            "services": await _items(kube, SERVICES, ns),
            "slices": await _items(kube, ENDPOINT_SLICES, ns, LABEL_REPLICA),
            "nodes": await _items(kube, NODES, None),
        }
        for pod_groups, workloads in NATIVE_GANG_VERSIONS:  # the version served, 1.37's first
            if isinstance(await served_resources(kube, workloads.api_version), frozenset):
                objects["workloads"] = await _items(kube, workloads, ns, selector)
                objects["pod_groups"] = await _items(kube, pod_groups, ns, selector)
                break
        if not objects.get("workloads") or not objects.get("pod_groups"):
            raise RuntimeError("no native Workload/PodGroup recorded: does the control plane "
                               "serve scheduling.k8s.io/v1beta1 or v1alpha2?")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(objects, indent=1))
        counts = ", ".join(f"{len(v)} {k}" for k, v in objects.items() if isinstance(v, list))
        say(f"recorded {counts} into {path}")
    finally:
        with contextlib.suppress(Exception):
            await manager.stop()
        if kube is not None:
            with contextlib.suppress(Exception):
                await cleanup_namespaces(kube, namespaces)
            await kube.close()
        await cluster.stop()

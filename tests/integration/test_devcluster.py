"""The local control plane works: real scheduler, kubelet stand-in transitions and faults."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
from kubernetes_asyncio import client

from omenative_devcluster.kubelet import GPU, REQUEST_TIMEOUT, raw_call

if TYPE_CHECKING:
    from conftest import FaultControl

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

T = TypeVar("T")
Json = dict[str, Any]


async def eventually(
    probe: Callable[[], Awaitable[T | None]], what: str, timeout: float = 30.0
) -> T:
    """Poll ``probe`` until it returns something but None/False; fail at the deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = await probe()
        if last is not None and last is not False:
            return last
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.2)


def conditions(obj: Json) -> dict[str, str]:
    """type -> status of an object's status.conditions."""
    return {c["type"]: c["status"] for c in obj.get("status", {}).get("conditions") or []}


async def read_pod(api: client.ApiClient, ns: str, name: str) -> Json:
    """The pod as raw JSON."""
    core = client.CoreV1Api(api)
    _, pod = await raw_call(
        core.read_namespaced_pod(name, ns, _preload_content=False,
                                 _request_timeout=REQUEST_TIMEOUT)
    )
    return pod


async def create_pod(
    api: client.ApiClient, ns: str, *, image: str = "registry.local/app:1",
    gpus: int = 0, gates: tuple[str, ...] = (), grace: int = 5,
) -> str:
    """Create a one-container pod and return its name."""
    name = f"p-{uuid.uuid4().hex[:8]}"
    container: Json = {"name": "main", "image": image}
    if gpus:
        container["resources"] = {"limits": {GPU: str(gpus)}}
    spec: Json = {"containers": [container], "terminationGracePeriodSeconds": grace}
    if gates:
        spec["readinessGates"] = [{"conditionType": g} for g in gates]
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
    core = client.CoreV1Api(api)
    await raw_call(core.create_namespaced_pod(
        ns, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT))  # type: ignore[arg-type]
    return name


async def test_nodes_ready_with_gpus(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    _, nodes = await raw_call(
        core.list_node(label_selector="omenative.io/devcluster=true",
                       _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
    )
    items = nodes["items"]
    assert items, "no devcluster nodes registered"
    zones = set()
    for node in items:
        labels = node["metadata"]["labels"]
        assert conditions(node).get("Ready") == "True", node["metadata"]["name"]
        assert int(node["status"]["allocatable"][GPU]) >= 1
        assert int(node["status"]["capacity"][GPU]) == int(node["status"]["allocatable"][GPU])
        assert labels["nvidia.com/gpu.present"] == "true"
        assert labels["kubernetes.io/hostname"] == node["metadata"]["name"]
        zones.add(labels["topology.kubernetes.io/zone"])
    if len(items) > 1:
        assert zones == {"zone-a", "zone-b"}
    # heartbeats: every node has a fresh Lease
    coord = client.CoordinationV1Api(api_client)
    _, leases = await raw_call(
        coord.list_namespaced_lease("kube-node-lease", _preload_content=False,
                                    _request_timeout=REQUEST_TIMEOUT)
    )
    held = {lease["spec"].get("holderIdentity") for lease in leases["items"]}
    assert {n["metadata"]["name"] for n in items} <= held


async def test_gpu_pod_scheduled_running_with_ip(
    api_client: client.ApiClient, namespace: str
) -> None:
    name = await create_pod(api_client, namespace, gpus=1)

    async def running() -> Json | None:
        pod = await read_pod(api_client, namespace, name)
        st = pod.get("status", {})
        ok = st.get("phase") == "Running" and st.get("podIP")
        return pod if ok and conditions(pod).get("Ready") == "True" else None

    pod = await eventually(running, f"pod {name} Running and Ready")
    assert pod["spec"]["nodeName"].startswith("node-")
    assert conditions(pod)["PodScheduled"] == "True"  # bound by the real scheduler
    st = pod["status"]
    assert st["podIP"].startswith("10.24")
    assert st["podIPs"] == [{"ip": st["podIP"]}]
    assert st["hostIP"]
    cs = st["containerStatuses"][0]
    assert "running" in cs["state"]
    assert cs["ready"] is True


async def test_readiness_gate_holds_ready_until_condition_true(
    api_client: client.ApiClient, namespace: str
) -> None:
    gate = "ome.io/serving"
    name = await create_pod(api_client, namespace, gates=(gate,))

    async def containers_ready() -> Json | None:
        pod = await read_pod(api_client, namespace, name)
        return pod if conditions(pod).get("ContainersReady") == "True" else None

    pod = await eventually(containers_ready, f"pod {name} ContainersReady")
    # the stand-in writes ContainersReady and Ready together: the gate keeps Ready False
    assert conditions(pod).get("Ready") == "False"
    assert pod["status"]["phase"] == "Running"

    core = client.CoreV1Api(api_client)
    patch = {"status": {"conditions": [{"type": gate, "status": "True",
                                         "lastTransitionTime": None}]}}
    await raw_call(core.patch_namespaced_pod_status(
        name, namespace, patch, _preload_content=False, _request_timeout=REQUEST_TIMEOUT))

    async def ready() -> Json | None:
        pod = await read_pod(api_client, namespace, name)
        return pod if conditions(pod).get("Ready") == "True" else None

    pod = await eventually(ready, f"pod {name} Ready after the gate turned True")
    assert conditions(pod)[gate] == "True"

    # the gate going False again takes Ready away again
    patch["status"]["conditions"][0]["status"] = "False"
    await raw_call(core.patch_namespaced_pod_status(
        name, namespace, patch, _preload_content=False, _request_timeout=REQUEST_TIMEOUT))

    async def not_ready() -> Json | None:
        pod = await read_pod(api_client, namespace, name)
        return pod if conditions(pod).get("Ready") == "False" else None

    await eventually(not_ready, f"pod {name} not Ready after the gate turned False")


async def test_bad_image_stays_pending(
    api_client: client.ApiClient, namespace: str, faults: FaultControl
) -> None:
    image = f"registry.local/broken-{uuid.uuid4().hex[:6]}:1"
    await faults.set(bad_images=[image])
    name = await create_pod(api_client, namespace, image=image)

    async def pull_failed() -> Json | None:
        pod = await read_pod(api_client, namespace, name)
        for cs in pod.get("status", {}).get("containerStatuses") or []:
            reason = (cs.get("state", {}).get("waiting") or {}).get("reason")
            if reason == "ImagePullBackOff":
                return pod
        return None

    pod = await eventually(pull_failed, f"pod {name} in ImagePullBackOff")
    assert pod["status"]["phase"] == "Pending"
    assert conditions(pod).get("Ready") == "False"
    assert pod["spec"]["nodeName"]


async def test_crash_image_crash_loops(
    api_client: client.ApiClient, namespace: str, faults: FaultControl
) -> None:
    image = f"registry.local/crashy-{uuid.uuid4().hex[:6]}:1"
    await faults.set(crash_images=[image])
    name = await create_pod(api_client, namespace, image=image)

    async def looping() -> Json | None:
        pod = await read_pod(api_client, namespace, name)
        for cs in pod.get("status", {}).get("containerStatuses") or []:
            waiting = (cs.get("state", {}).get("waiting") or {}).get("reason")
            if waiting == "CrashLoopBackOff" and cs["restartCount"] >= 2:
                return cs
        return None

    cs = await eventually(looping, f"pod {name} crash-looping with 2 restarts")
    assert cs["lastState"]["terminated"]["exitCode"] == 1
    assert cs["ready"] is False


async def test_graceful_delete_completes(api_client: client.ApiClient, namespace: str) -> None:
    name = await create_pod(api_client, namespace, grace=120)

    async def running() -> bool:
        pod = await read_pod(api_client, namespace, name)
        return pod.get("status", {}).get("phase") == "Running"

    await eventually(running, f"pod {name} Running")
    core = client.CoreV1Api(api_client)
    await raw_call(core.delete_namespaced_pod(
        name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT))

    async def gone() -> bool:
        status, _ = await raw_call(
            core.read_namespaced_pod(name, namespace, _preload_content=False,
                                     _request_timeout=REQUEST_TIMEOUT),
            ok=(200, 404),
        )
        return status == 404

    # without a kubelet nothing else removes it (grace is 120 s): the stand-in finished it
    await eventually(gone, f"pod {name} deleted", timeout=30.0)


FINALIZER = "omenative.io/test-hold"


async def _delete_held_pod(api: client.ApiClient, ns: str, name: str) -> Json:
    """Delete a pod a finalizer holds; return it once the stand-in wrote a terminal phase."""
    core = client.CoreV1Api(api)
    await raw_call(core.patch_namespaced_pod(
        name, ns, {"metadata": {"finalizers": [FINALIZER]}},
        _preload_content=False, _request_timeout=REQUEST_TIMEOUT))
    await raw_call(core.delete_namespaced_pod(
        name, ns, _preload_content=False, _request_timeout=REQUEST_TIMEOUT))

    async def terminal() -> Json | None:
        pod = await read_pod(api, ns, name)
        return pod if pod["status"].get("phase") in ("Succeeded", "Failed") else None

    try:
        return await eventually(terminal, f"deleted pod {name} in a terminal phase")
    finally:
        await raw_call(core.patch_namespaced_pod(
            name, ns, {"metadata": {"finalizers": None}},
            _preload_content=False, _request_timeout=REQUEST_TIMEOUT), ok=(200, 404))


async def test_a_deleted_pod_ends_in_a_terminal_phase_as_with_a_kubelet(
    api_client: client.ApiClient, namespace: str, faults: FaultControl
) -> None:
    # a running pod stops cleanly: Succeeded, its container terminated with exit code 0
    name = await create_pod(api_client, namespace)

    async def ready() -> bool:
        return conditions(await read_pod(api_client, namespace, name)).get("Ready") == "True"

    await eventually(ready, f"pod {name} Ready")
    pod = await _delete_held_pod(api_client, namespace, name)
    assert pod["status"]["phase"] == "Succeeded"
    (cs,) = pod["status"]["containerStatuses"]
    assert cs["state"]["terminated"]["exitCode"] == 0 and cs["ready"] is False
    assert conditions(pod)["Ready"] == "False"

    # a crash-looping pod is killed: Failed
    image = f"registry.local/crashy-{uuid.uuid4().hex[:6]}:1"
    await faults.set(crash_images=[image])
    crashing = await create_pod(api_client, namespace, image=image)

    async def crashed() -> bool:
        statuses = (await read_pod(api_client, namespace, crashing)
                    )["status"].get("containerStatuses") or []
        return any(cs["restartCount"] >= 1 for cs in statuses)

    await eventually(crashed, f"pod {crashing} crash-looping")
    pod = await _delete_held_pod(api_client, namespace, crashing)
    assert pod["status"]["phase"] == "Failed"
    (cs,) = pod["status"]["containerStatuses"]
    assert cs["state"]["terminated"]["exitCode"] == 137


async def test_dead_node_goes_not_ready_and_recovers(
    api_client: client.ApiClient, faults: FaultControl
) -> None:
    core = client.CoreV1Api(api_client)
    node = "node-0"
    await faults.set(dead_nodes=[node])

    async def node_ready(want: str) -> Json | None:
        _, n = await raw_call(core.read_node(node, _preload_content=False,
                                             _request_timeout=REQUEST_TIMEOUT))
        return n if conditions(n).get("Ready") == want else None

    async def unreachable() -> Json | None:
        # the node-lifecycle controller writes the condition first and the taint after it
        n = await node_ready("Unknown")
        taints = {t["key"] for t in (n or {}).get("spec", {}).get("taints") or []}
        return n if "node.kubernetes.io/unreachable" in taints else None

    await eventually(unreachable, f"{node} Ready=Unknown and tainted unreachable", timeout=120)
    await faults.set(dead_nodes=[])

    async def healthy() -> Json | None:
        n = await node_ready("True")
        if n is None:
            return None
        keys = {t["key"] for t in n.get("spec", {}).get("taints") or []}
        return None if keys & {"node.kubernetes.io/unreachable",
                               "node.kubernetes.io/not-ready"} else n

    await eventually(healthy, f"{node} Ready again without taints", timeout=60)


async def test_deployment_of_many_pods_becomes_ready(
    api_client: client.ApiClient, namespace: str
) -> None:
    replicas = 150
    apps = client.AppsV1Api(api_client)
    labels = {"app": "many"}
    body: Json = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "many"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "registry.local/app:1"}]},
            },
        },
    }
    await raw_call(apps.create_namespaced_deployment(
        namespace, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT))  # type: ignore[arg-type]

    async def all_ready() -> bool:
        _, d = await raw_call(apps.read_namespaced_deployment(
            "many", namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT))
        return bool(d.get("status", {}).get("readyReplicas") == replicas)

    await eventually(all_ready, f"{replicas} replicas Ready", timeout=120)
    core = client.CoreV1Api(api_client)
    _, pods = await raw_call(core.list_namespaced_pod(
        namespace, label_selector="app=many", _preload_content=False,
        _request_timeout=REQUEST_TIMEOUT))
    ips = [p["status"]["podIP"] for p in pods["items"]]
    assert len(ips) == replicas
    assert len(set(ips)) == replicas, "pod IPs must be distinct"

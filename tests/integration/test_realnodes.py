"""Real nodes: containers run, probes are answered, Services and cluster DNS work.

On real kubelets with containerd (``realnode_fixtures``): a leader + worker pair of the
test model server, on two different nodes. The worker finds its leader by the Service's
DNS name (``OME_LEADER_ADDRESS``, as omenative sets it) and joins through the ClusterIP;
the leader's httpGet readinessProbe passes only once the worker has joined. Then the host
sends a request through the ClusterIP. A second test runs up, down, up, down and checks
the host is left as it was.
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from datetime import datetime
from typing import Any

import pytest

pytest.register_assert_rewrite("realnode_fixtures")
from realnode_fixtures import REAL_NODES, RealCluster  # noqa: E402

from omenative_devcluster import build  # noqa: E402
from omenative_devcluster.images import MODEL_SERVER_IMAGE  # noqa: E402
from omenative_devcluster.kubelet_api import GPU  # noqa: E402
from omenative_devcluster.realnodes_host import host_snapshot  # noqa: E402

pytest_plugins = ["realnode_fixtures"]
pytestmark = [pytest.mark.integration, pytest.mark.realnodes, pytest.mark.component("coredns")]

PORT = 8080


def _server(name: str, node: str, rank: int, extra_env: dict[str, str]) -> dict[str, Any]:
    env = {"OME_INSTANCE_POD_COUNT": "2", "OME_INSTANCE_POD_RANK": str(rank),
           "MODEL_REVISION": "rev-a", "OME_INSTANCE_INDEX": "0", **extra_env}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "terminationGracePeriodSeconds": 5,
            # no docker-link variables: a Service named `leader` would set LEADER_PORT
            "enableServiceLinks": False,
            "containers": [{
                "name": "server", "image": MODEL_SERVER_IMAGE, "imagePullPolicy": "Never",
                "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {
                    "fieldPath": "metadata.name"}}},
                        *({"name": k, "value": v} for k, v in env.items())],
                "ports": [{"containerPort": PORT}],
                "readinessProbe": {"httpGet": {"path": "/ready", "port": PORT},
                                   "periodSeconds": 1, "failureThreshold": 1},
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi", GPU: "1"},
                              "limits": {GPU: "1"}},
            }],
        },
    }


def _ready_at(pod: dict[str, Any]) -> float | None:
    """Seconds from the pod's creation to its Ready condition (None while not Ready)."""
    for cond in pod["status"].get("conditions", []):
        if cond["type"] == "Ready" and cond["status"] == "True":
            ready = datetime.fromisoformat(cond["lastTransitionTime"])
            created = datetime.fromisoformat(pod["metadata"]["creationTimestamp"])
            return (ready - created).total_seconds()
    return None


def _wait_ready(
    rc: RealCluster, ns: str, names: list[str], timeout: float = 90,
) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    while True:
        pods = {p["metadata"]["name"]: p for p in rc.get("pods", "-n", ns)["items"]}
        ready = {n: _ready_at(pods[n]) for n in names if n in pods}
        if all(ready.get(n) is not None for n in names):
            return {n: float(v) for n, v in ready.items() if v is not None}
        if time.monotonic() > deadline:
            logs = {n: rc.kubectl("logs", "-n", ns, n, check=False)[-800:] for n in names}
            pytest.fail(f"pods not Ready after {timeout:.0f} s: "
                        f"{json.dumps({n: p['status'] for n, p in pods.items()})[:3000]}\n"
                        f"logs: {logs}", pytrace=False)
        time.sleep(0.2)


def _log_with(rc: RealCluster, ns: str, pod: str, *events: str,
              timeout: float = 30) -> list[dict[str, Any]]:
    """The pod's JSON log lines once they hold every one of ``events`` (or at the timeout):
    the runtime copies what the server wrote into the log file on its own time, so a read
    right after the pod turned Ready can come before the line that led to it."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [json.loads(line) for line in rc.kubectl("logs", "-n", ns, pod).splitlines()
                 if line.startswith("{")]
        if set(events) <= {ln["event"] for ln in lines} or time.monotonic() > deadline:
            return lines
        time.sleep(0.2)


def test_nodes_are_real_gpu_nodes_with_the_stand_in_labels(real_cluster: RealCluster) -> None:
    nodes = real_cluster.get("nodes")["items"]
    assert sorted(n["metadata"]["name"] for n in nodes) == [f"node-{i}" for i in range(REAL_NODES)]
    for node in nodes:
        info = node["status"]["nodeInfo"]
        assert info["containerRuntimeVersion"].startswith("containerd://2.4.2")
        assert info["kubeletVersion"] == build.K8S_VERSION  # the release under test
        assert node["status"]["allocatable"][GPU] == "8"
        assert node["metadata"]["labels"]["topology.kubernetes.io/zone"] in ("zone-a", "zone-b")
        assert not node["spec"].get("taints"), "real nodes must take pods"


def test_probe_service_and_dns_between_pods_on_two_nodes(real_cluster: RealCluster) -> None:
    rc = real_cluster
    ns = rc.namespace()
    service = {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "engine"},
        # the leader is not ready until its worker joined: the worker must reach it anyway
        "spec": {"selector": {"app": "leader"}, "publishNotReadyAddresses": True,
                 "ports": [{"port": PORT, "targetPort": PORT}]},
    }
    rc.kubectl("apply", "-n", ns, "-f", "-", stdin=json.dumps(service))
    leader = _server("leader", "node-0", 0, {})
    # a DNS name only the cluster DNS answers (the pod's search path completes it)
    worker = _server("worker", "node-1", 1, {"OME_LEADER_ADDRESS": f"engine.{ns}"})
    for pod in (leader, worker):
        rc.kubectl("apply", "-n", ns, "-f", "-", stdin=json.dumps(pod))
    ready = _wait_ready(rc, ns, ["leader", "worker"])
    print(f"pod Ready after create: {ready}")

    # the leader turned ready only because the worker joined it by DNS name + ClusterIP
    events = _log_with(rc, ns, "leader", "worker-joined", "first-ready")
    joined = [e for e in events if e["event"] == "worker-joined"]
    assert joined and joined[0]["worker"] == "worker", events
    first_ready = next(e for e in events if e["event"] == "first-ready")
    assert datetime.fromisoformat(first_ready["ts"].replace("Z", "+00:00")) >= \
        datetime.fromisoformat(joined[0]["ts"].replace("Z", "+00:00"))

    # from the host, through the ClusterIP (kube-proxy's rules)
    ip = rc.get("service", "engine", "-n", ns)["spec"]["clusterIP"]
    with urllib.request.urlopen(f"http://{ip}:{PORT}/v1/completions", timeout=5) as resp:
        answer = json.loads(resp.read())
    assert answer["pod"] == "leader"
    assert answer["revision"] == "rev-a"
    assert answer["ready"] is True
    rc.kubectl("delete", "namespace", ns, "--wait=false")


def test_kubelets_refuse_anonymous_requests_from_the_address_pods_reach(
        real_cluster: RealCluster) -> None:
    """Pods reach the host address the kubelets listen on: without the API server's client
    certificate, a kubelet answers 401 (no pod list, logs or exec for a curious pod), while
    the API server still reaches it (``kubectl logs`` in the test above)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    for node in real_cluster.get("nodes")["items"]:
        address = next(a["address"] for a in node["status"]["addresses"]
                       if a["type"] == "InternalIP")
        port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        for path in ("/pods", "/runningpods/", "/logs/"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(f"https://{address}:{port}{path}", timeout=5,
                                       context=ctx)
            assert refused.value.code == 401, (node["metadata"]["name"], path)


def test_up_down_twice_leaves_the_host_as_it_was(real_cluster: RealCluster) -> None:
    # one real-node cluster per machine: the session's goes down first, and comes back up
    # at the end for the tests after this one
    assert not real_cluster.stop()
    before = host_snapshot()
    ours = {k: v for k, v in before.items() if k != "paths"}  # paths: shared, maybe not ours
    assert not any(ours.values()), f"host not clean after down: {before}"
    try:
        for _ in range(2):
            real_cluster.start()
            during = host_snapshot()
            assert during["links"] and during["iptables"] and during["cgroups"], during
            assert not real_cluster.stop()
            assert host_snapshot() == before
    finally:
        if real_cluster.cluster is None:
            real_cluster.start()

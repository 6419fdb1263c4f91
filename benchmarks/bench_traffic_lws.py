"""LWS v0.7.0 and omenative side by side: one leader + worker rollout, the same traffic.

Issue 27 item 4. On a real-node cluster (2 nodes), the same model server engine (2 groups
of a leader and a worker, the same image, probes and drain delay) is rolled out from
``rev-1`` to ``rev-2`` twice, while the load generator sends the same steady requests
through a ClusterIP Service in front of the leaders:

* as a LeaderWorkerSet, with LWS v0.7.0 and its default rollout (RollingUpdate,
  maxUnavailable 1, maxSurge 0: a group is deleted, then recreated);
* as an InferenceReplica, with omenative's default (SurgeThenDrain: a whole new gang
  serves before the old one drains).

Printed in one table: requests sent and failed, failure windows, time to complete the
rollout, peak pods, and the lowest number of leaders the Service routed to. Run as root
(real nodes change iptables, cgroups, mounts) on a quiet machine; LWS must be built
(``python -m omenative_devcluster build --with lws``).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_traffic_lws.py [--rate 25]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from attrs import frozen

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import INFERENCE_REPLICAS, NAMESPACES, Resource
from omenative_controller.manager import Manager, ManagerOptions
from omenative_devcluster.cluster import Cluster, ClusterOptions
from omenative_devcluster.loopback import kubectl
from omenative_devcluster.lws import LwsProcess
from omenative_devcluster.model_engine import (
    leader_service,
    model_replica,
    ready_endpoints,
    revision_patch,
    server_container,
    wait_answering,
    wait_converged,
)
from omenative_devcluster.realnodes import start_with_real_nodes, stop_with_real_nodes
from omenative_devcluster.serving_record import ServingRecorder
from omenative_devcluster.traffic import LoadGenerator
from omenative_devcluster.traffic_report import TrafficReport

REPO = Path(__file__).resolve().parents[1]
LWS = Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet")
LWS_LEADER = {"leaderworkerset.sigs.k8s.io/name": "llm",
              "leaderworkerset.sigs.k8s.io/worker-index": "0"}


@frozen
class Row:
    """One side's figures."""

    name: str
    report: TrafficReport
    rollout_seconds: float
    peak_pods: int
    min_routed: int


def lws_body(revision: str) -> JSON:
    """The engine as a LeaderWorkerSet: 2 groups of a leader and one worker."""

    def template() -> JSON:
        c = server_container(revision)
        c["env"].append({"name": "INSTANCE_INDEX", "valueFrom": {"fieldRef": {
            "fieldPath": "metadata.labels['leaderworkerset.sigs.k8s.io/group-index']"}}})
        return {"spec": {"terminationGracePeriodSeconds": 30, "containers": [c]}}

    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "llm"},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {
                "size": 2, "leaderTemplate": template(), "workerTemplate": template()}}}


async def measure(kube: KubeClient, ns: str, ip: str, name: str, rate: float,
                  update: Callable[[], Awaitable[Any]], resource: Resource) -> Row:
    """Traffic on, ``update()``, wait until the rollout is done, traffic off."""
    ip_routed: list[int] = []
    async with ServingRecorder(kube, ns) as recorder, LoadGenerator(
            f"http://{ip}:8080/", rate=rate, duration=900) as gen:
        await asyncio.sleep(5)
        t0 = time.monotonic()
        await update()
        done = asyncio.create_task(wait_converged(
            kube, ns, "llm", replicas=2, pods_per_instance=2, revision="rev-2", timeout=600,
            resource=resource))
        while not done.done():
            ip_routed.append(len(await ready_endpoints(kube, ns, "llm-serve")))
            await asyncio.sleep(0.25)
        done.result()
        took = time.monotonic() - t0
        await asyncio.sleep(5)
    return Row(name, gen.report(), took, recorder.record.peak_pods, min(ip_routed))


async def new_namespace(kube: KubeClient, name: str) -> str:
    """A namespace whose default ServiceAccount exists."""
    await kube.create(NAMESPACES, {"metadata": {"name": name}})
    sa = Resource("", "v1", "serviceaccounts", "ServiceAccount")
    for _ in range(120):
        try:
            await kube.get(sa, "default", name)
            return name
        except ApiError:
            await asyncio.sleep(0.25)
    raise TimeoutError(f"namespace {name}: no default ServiceAccount")


async def run_lws(kube: KubeClient, rate: float) -> Row:
    """The LeaderWorkerSet side."""
    ns = await new_namespace(kube, "bench-lws")
    body = lws_body("rev-1")
    await kube.create(LWS, body, ns)
    ip = await leader_service(kube, ns, "llm", selector=LWS_LEADER)
    await wait_converged(kube, ns, "llm", replicas=2, pods_per_instance=2, revision="rev-1",
                         timeout=300, resource=LWS)
    await wait_answering(f"http://{ip}:8080/", pods=2)
    new = lws_body("rev-2")["spec"]["leaderWorkerTemplate"]
    return await measure(kube, ns, ip, "LWS v0.7.0 RollingUpdate", rate,
                         lambda: kube.patch(LWS, "llm", {"spec": {"leaderWorkerTemplate": new}},
                                            ns), LWS)


async def run_omenative(kube: KubeClient, kubeconfig: Path, rate: float) -> Row:
    """The InferenceReplica side, with the manager in this process."""
    ns = await new_namespace(kube, "bench-omenative")
    manager = Manager(ManagerOptions(
        kubeconfig=str(kubeconfig), namespaces=(ns,), config_namespace=ns, lease_namespace=ns,
        lease_duration=3.0, renew_deadline=2.0, retry_period=0.5, bind_address="127.0.0.1",
        metrics_port=0, probe_port=0))
    task = asyncio.create_task(manager.run())
    try:
        body = model_replica("llm", replicas=2, revision="rev-1")
        await kube.create(INFERENCE_REPLICAS, body, ns)
        ip = await leader_service(kube, ns, "llm")
        await wait_converged(kube, ns, "llm", replicas=2, pods_per_instance=2,
                             revision="rev-1", timeout=300)
        await wait_answering(f"http://{ip}:8080/", pods=2)
        return await measure(kube, ns, ip, "omenative SurgeThenDrain", rate,
                             lambda: kube.patch(INFERENCE_REPLICAS, "llm",
                                                revision_patch(body, "rev-2"), ns),
                             INFERENCE_REPLICAS)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


async def compare(kubeconfig: Path, rate: float) -> list[Row]:
    """Both sides, LWS first."""
    kube = await KubeClient.connect(str(kubeconfig), qps=0, burst=1, timeout=30)
    try:
        kubectl(kubeconfig, "apply", "-f",
                str(REPO / "config" / "crd" / "ome.io_inferencereplicas.yaml"))
        return [await run_lws(kube, rate), await run_omenative(kube, kubeconfig, rate)]
    finally:
        await kube.close()


def table(rows: list[Row], rate: float) -> str:
    """The side-by-side table."""
    lines = [f"leader+worker engine, 2 groups, rollout rev-1 -> rev-2 under {rate:g} req/s",
             f"  {'':<26} {'sent':>6} {'failed':>6} {'rollout':>8} {'peak pods':>9} "
             f"{'min leaders routed':>18}  failure windows"]
    for r in rows:
        windows = ", ".join(f"{w.start:.1f}-{w.end:.1f}s ({w.count})"
                            for w in r.report.failure_windows()) or "-"
        lines.append(f"  {r.name:<26} {r.report.sent:>6} {r.report.failed:>6} "
                     f"{r.rollout_seconds:>7.1f}s {r.peak_pods:>9} {r.min_routed:>18}  {windows}")
    return "\n".join(lines)


def main() -> int:
    """Start real nodes and LWS, measure both sides, print, clean up."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=25.0)
    args = parser.parse_args()
    state = Path(tempfile.mkdtemp(prefix="bench-traffic-lws-"))
    cluster = Cluster(ClusterOptions(state_dir=state, nodes=0, real_nodes=2))
    real = start_with_real_nodes(cluster)
    try:
        with LwsProcess(cluster.kubeconfig_path, state / "lws").running():
            rows = asyncio.run(compare(cluster.kubeconfig_path, args.rate))
    finally:
        left = stop_with_real_nodes(cluster, real)
        if left:
            print("left behind: " + "; ".join(left), file=sys.stderr)
    print(table(rows, args.rate))
    for r in rows:
        print(f"\n{r.report.table(r.name)}\n{r.report.timeline()}")
        print("FIGURES " + json.dumps({"name": r.name, "sent": r.report.sent,
                                       "failed": r.report.failed,
                                       "rollout_s": round(r.rollout_seconds, 1),
                                       "peak_pods": r.peak_pods, "min_routed": r.min_routed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

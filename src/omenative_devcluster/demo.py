"""``python -m omenative_devcluster demo`` (``make demo``): omenative on real nodes, one command.

It starts the local control plane with real nodes (kubelet + containerd each), runs the
manager as a process (``omenative-manager``, as a user runs it out of cluster), applies a
leader + worker engine of the test model server with 2 Instances behind a ClusterIP
Service, rolls it out from ``rev-1`` to ``rev-2`` (SurgeThenDrain, the default) while the
load generator sends steady requests through the Service, prints the answers per revision
and the failed requests, saves the run (``traffic-demo.json``) and its picture
(``traffic-demo.svg``) in the state folder, and removes everything it started. The exit
status is 0 when no request failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import INFERENCE_REPLICAS, NAMESPACES
from omenative_devcluster.cluster import Cluster, ClusterError, ClusterOptions
from omenative_devcluster.loopback import kubectl
from omenative_devcluster.model_engine import (
    leader_service,
    model_replica,
    revision_patch,
    wait_answering,
    wait_converged,
)
from omenative_devcluster.realnodes import start_with_real_nodes, stop_with_real_nodes
from omenative_devcluster.serving_record import ServingRecorder
from omenative_devcluster.traffic import LoadGenerator
from omenative_devcluster.traffic_picture import save_traffic, serving_intervals, traffic_data
from omenative_devcluster.traffic_report import TrafficReport

__all__ = ["run_demo"]

REPO = Path(__file__).resolve().parents[2]
IR_CRD_FILE = REPO / "config" / "crd" / "ome.io_inferencereplicas.yaml"
NAMESPACE = "omenative-demo"
NAME = "llm"


def say(msg: str) -> None:
    """A progress line of the demo (stderr, so stdout holds only the result table)."""
    print(f"[demo {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_demo(*, real_nodes: int = 2, rate: float = 25.0, state_dir: Path) -> int:
    """Start, roll out under traffic, print, clean up; 0 when no request failed."""
    cluster = Cluster(ClusterOptions(state_dir=state_dir.resolve(), nodes=0,
                                     real_nodes=real_nodes))
    say(f"starting the control plane and {real_nodes} real node(s) in {state_dir}")
    try:
        real = start_with_real_nodes(cluster)
    except ClusterError as exc:
        say(f"FAILED: the real nodes did not start: {exc}")
        return 2
    try:
        kubectl(cluster.kubeconfig_path, "apply", "-f", str(IR_CRD_FILE))
        log_path = cluster.state_dir / "manager.log"
        with log_path.open("w") as log:
            manager = _start_manager(cluster.kubeconfig_path, log)
            say(f"manager running (pid {manager.pid}, log {log_path})")
            try:
                return asyncio.run(_rollout(cluster.kubeconfig_path, rate, manager,
                                            cluster.state_dir))
            finally:
                _stop(manager)
    finally:
        say("removing the cluster and the real nodes")
        left = stop_with_real_nodes(cluster, real)
        if left:
            say("left behind: " + "; ".join(left))


def _start_manager(kubeconfig: Path, log: TextIO) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.Popen(
        [sys.executable, "-m", "omenative_controller.cli.manager",
         "--kubeconfig", str(kubeconfig), "--namespace", NAMESPACE,
         "--config-namespace", NAMESPACE, "--bind-address", "127.0.0.1",
         "--metrics-port", "0", "--probe-port", "0",
         "--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "0.5s"],
        stdout=log, stderr=subprocess.STDOUT, env=env)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def _rollout(kubeconfig: Path, rate: float, manager: subprocess.Popen[bytes],
                   out_dir: Path) -> int:
    kube = await KubeClient.connect(str(kubeconfig), qps=0, burst=1, timeout=30)
    try:
        with contextlib.suppress(ApiError):
            await kube.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
        body = model_replica(NAME, replicas=2, revision="rev-1")
        await kube.create(INFERENCE_REPLICAS, body, NAMESPACE)
        ip = await leader_service(kube, NAMESPACE, NAME)
        say(f"InferenceReplica {NAME}: 2 Instances of a leader and a worker (model server "
            f"rev-1), Service {NAME}-serve at {ip}:8080")
        await wait_converged(kube, NAMESPACE, NAME, replicas=2, pods_per_instance=2,
                             revision="rev-1", timeout=300)
        await wait_answering(f"http://{ip}:8080/", pods=2)
        say(f"serving; sending {rate:g} requests/s, then rolling out rev-2")
        async with ServingRecorder(kube, NAMESPACE) as recorder, LoadGenerator(
                f"http://{ip}:8080/v1/completions", rate=rate, duration=900) as gen:
            await asyncio.sleep(5)
            t0 = time.monotonic()
            marks = [(gen.now(), "patch: rev-2")]
            await kube.patch(INFERENCE_REPLICAS, NAME, revision_patch(body, "rev-2"), NAMESPACE)
            await wait_converged(kube, NAMESPACE, NAME, replicas=2, pods_per_instance=2,
                                 revision="rev-2", timeout=300)
            took = time.monotonic() - t0
            marks.append((gen.now(), "converged"))
            say(f"rollout done in {took:.1f}s; 5 more seconds of traffic")
            await asyncio.sleep(5)
            if manager.poll() is not None:
                say(f"the manager exited ({manager.returncode}) during the demo")
        report = gen.report()
        unserving = recorder.record.unserving_answers(report.answers, gen.wall)
        _print_result(report, took, len(unserving))
        data = traffic_data(report, title="make demo: SurgeThenDrain rev-1 -> rev-2",
                            intervals=serving_intervals(recorder.record, gen.started_wall),
                            marks=marks)
        data_path, picture = save_traffic(data, out_dir, "traffic-demo")
        print(f"recorded run: {data_path}; picture: "
              f"{picture or 'not drawn (needs matplotlib: pip install omenative[plot])'}")
        return 0 if report.failed == 0 and not unserving else 1
    finally:
        with contextlib.suppress(ApiError):
            await kube.delete(NAMESPACES, NAMESPACE)
        await kube.close()


def _print_result(report: TrafficReport, took: float, unserving: int) -> None:
    print(report.table(f"SurgeThenDrain rollout rev-1 -> rev-2 ({took:.1f}s) under traffic"))
    print("answers per revision, every 5 s:")
    print(report.timeline())
    print(f"failed requests: {report.failed}; answers from an Instance not yet counted "
          f"serving: {unserving}")

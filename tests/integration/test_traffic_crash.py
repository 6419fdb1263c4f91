"""A worker crashes in a Ready Instance, under traffic, on real nodes.

The leader whose worker went away turns not-ready; omenative restarts the Instance whole
(RecreateInstanceOnPodRestart, the default for multi-pod Instances: a new incarnation of
every pod). Requests may fail only while that Instance leaves the Service (the window is
reported), and the other Instance keeps answering throughout.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from manager_fixtures import eventually
from traffic_checks import print_figures, serving_engine

from omenative_controller.kube.client import KubeClient
from omenative_devcluster.model_engine import (
    live_pods,
    wait_converged,
)
from omenative_devcluster.serving_record import ServingRecorder
from omenative_devcluster.traffic import LoadGenerator

pytest_plugins = ["realnode_fixtures", "traffic_fixtures"]
pytestmark = [pytest.mark.integration, pytest.mark.realnodes, pytest.mark.component("coredns"),
              pytest.mark.asyncio(loop_scope="session")]

RATE = 25.0


async def test_worker_crash_restarts_its_instance_whole(
    real_kube: KubeClient, real_namespace: str, real_manager: Any,
) -> None:
    kube, ns = real_kube, real_namespace
    await real_manager()
    ip = await serving_engine(kube, ns, replicas=2)
    pods = await live_pods(kube, ns)
    worker = next(p for p in pods.values()
                  if p["metadata"]["labels"]["ome.io/runner"] == "worker"
                  and p["metadata"]["labels"]["ome.io/instance-index"] == "0")
    other_leader = next(n for n, p in pods.items()
                        if p["metadata"]["labels"]["ome.io/runner"] == "leader"
                        and p["metadata"]["labels"]["ome.io/instance-index"] == "1")

    async with ServingRecorder(kube, ns) as recorder, LoadGenerator(
            f"http://{ip}:8080/", rate=RATE, duration=600) as gen:
        await asyncio.sleep(3)
        t_crash = gen.now()
        async with aiohttp.ClientSession() as http, http.post(
                f"http://{worker['status']['podIP']}:8080/crash") as resp:
            assert resp.status == 202

        async def restarted() -> bool:
            now = await live_pods(kube, ns)
            labels = [p["metadata"]["labels"] for p in now.values()]
            inc0 = {lb["ome.io/instance-incarnation"] for lb in labels
                    if lb["ome.io/instance-index"] == "0"}
            return inc0 == {"2"}

        await eventually(restarted, timeout=120, what="Instance 0 recreated at incarnation 2")
        await wait_converged(kube, ns, "llm", replicas=2, pods_per_instance=2,
                             revision="rev-1", timeout=180)
        t_back = gen.now()
        await asyncio.sleep(3)
    report = gen.report()
    windows = report.failure_windows()
    print_figures("worker crash in a Ready Instance", report,
                  crash_at_s=round(t_crash, 1), back_after_s=round(t_back - t_crash, 1))

    # the whole Instance came back as a new incarnation: both its pods are new
    assert recorder.record.serving_since.get(("llm", 0, 2, 1)) is not None
    assert all(w.start >= t_crash and w.end <= t_back for w in windows), windows
    # the other Instance answered in every 3 s of the run (new connections pick a leader
    # at random: ~19 of them in 3 s)
    per_3s_other = [
        sum(1 for o in report.answers if o.pod == other_leader and int(o.started) // 3 == s)
        for s in range(int(report.outcomes[-1].started) // 3)]
    assert all(per_3s_other), per_3s_other
    assert recorder.record.unserving_answers(report.answers, gen.wall) == []

"""Scale-down 3 -> 1 under traffic, on real nodes: omenative drains the two Instances it
removes (gate False, unrouted, then delete), so no request started before the drain fails,
and the server's drain delay lets kube-proxy drop the pods before they stop answering."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from traffic_checks import print_figures, serving_engine

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS
from omenative_devcluster.model_engine import (
    wait_converged,
)
from omenative_devcluster.serving_record import ServingRecorder
from omenative_devcluster.traffic import LoadGenerator

pytest_plugins = ["realnode_fixtures", "traffic_fixtures"]
pytestmark = [pytest.mark.integration, pytest.mark.realnodes, pytest.mark.component("coredns"),
              pytest.mark.asyncio(loop_scope="session")]

RATE = 25.0


async def test_scale_down_drains_before_it_deletes(
    real_kube: KubeClient, real_namespace: str, real_manager: Any,
) -> None:
    kube, ns = real_kube, real_namespace
    await real_manager()
    ip = await serving_engine(kube, ns, replicas=3)

    async with ServingRecorder(kube, ns) as recorder, LoadGenerator(
            f"http://{ip}:8080/", rate=RATE, duration=600) as gen:
        await asyncio.sleep(3)
        t_drain = gen.now()
        await kube.patch(INFERENCE_REPLICAS, "llm", {"spec": {"replicas": 1}}, ns)
        await wait_converged(kube, ns, "llm", replicas=1, pods_per_instance=2,
                             revision="rev-1", timeout=180)
        t_done = gen.now()
        await asyncio.sleep(3)
    report = gen.report()
    print_figures("scale-down 3 -> 1", report,
                  drain_started_s=round(t_drain, 1), scale_down_seconds=round(t_done - t_drain, 1),
                  failed_started_before_drain=report.failed_started_before(t_drain))

    assert report.failed_started_before(t_drain) == 0, report.table()
    assert report.failed == 0, report.table()
    pods_before = {o.pod for o in report.answers if o.ended < t_drain}
    pods_after = {o.pod for o in report.answers if o.started > t_done}
    assert len(pods_before) == 3 and len(pods_after) == 1, (pods_before, pods_after)
    assert recorder.record.unserving_answers(report.answers, gen.wall) == []

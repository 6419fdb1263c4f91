"""SurgeThenDrain under traffic, on real nodes: a leader + worker engine with 2 Instances
rolls out a new revision while 25 requests a second go through its ClusterIP Service.

What users of a rollout care about: no request fails, the answers move from the old
revision to the new one, and no answer ever comes from a pod whose Instance omenative had
not yet counted serving (the ``ome.io/serving`` gate True on all of its pods).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from traffic_checks import print_figures, serving_engine

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS
from omenative_devcluster.model_engine import (
    model_replica,
    revision_patch,
    wait_converged,
)
from omenative_devcluster.serving_record import ServingRecorder
from omenative_devcluster.traffic import LoadGenerator
from omenative_devcluster.traffic_picture import serving_intervals

pytest_plugins = ["realnode_fixtures", "traffic_fixtures"]
pytestmark = [pytest.mark.integration, pytest.mark.realnodes, pytest.mark.component("coredns"),
              pytest.mark.asyncio(loop_scope="session")]

RATE = 25.0


async def test_surge_then_drain_rollout_fails_no_request(
    real_kube: KubeClient, real_namespace: str, real_manager: Any,
) -> None:
    kube, ns = real_kube, real_namespace
    await real_manager()
    ip = await serving_engine(kube, ns, replicas=2)
    body = model_replica("llm", replicas=2, revision="rev-1")  # what serving_engine created

    async with ServingRecorder(kube, ns) as recorder, LoadGenerator(
            f"http://{ip}:8080/v1/completions", rate=RATE, duration=600) as gen:
        await asyncio.sleep(3)  # steady traffic on rev-1 first
        t_patch = gen.now()
        await kube.patch(INFERENCE_REPLICAS, "llm", revision_patch(body, "rev-2"), ns)
        await wait_converged(kube, ns, "llm", replicas=2, pods_per_instance=2,
                             revision="rev-2", timeout=240)
        t_done = gen.now()
        # the old pods are gone: every answer from here on must be rev-2
        await asyncio.sleep(3)
    report = gen.report()
    print_figures("SurgeThenDrain leader+worker, 2 Instances", report,
                  marks=[(t_patch, "patch: rev-2"), (t_done, "converged")],
                  intervals=serving_intervals(recorder.record, gen.started_wall),
                  rollout_seconds=round(t_done - t_patch, 1), rate=RATE)

    assert report.failed == 0, report.table()
    assert report.revision_order() == ["rev-1", "rev-2"], report.timeline()
    late = [o for o in report.answers if o.started > t_done]
    assert late and {o.revision for o in late} == {"rev-2"}, report.timeline()
    early = [o for o in report.answers if o.ended < t_patch]
    assert early and {o.revision for o in early} == {"rev-1"}
    problems = recorder.record.unserving_answers(report.answers, gen.wall)
    assert problems == [], "\n".join(problems[:20])
    # both old Instances were replaced by new ones: four Instances served in this test
    assert len(recorder.record.serving_since) >= 4, recorder.record.serving_since

"""Deleting the InferenceReplica under traffic, on real nodes: omenative drains every
Instance before its pods go (the ``ome.io/ir-teardown`` finalizer), so the requests
started before the delete all get their answers; after it, the Service has no endpoint
and refuses connections, which is what a deleted service does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from manager_fixtures import eventually
from traffic_checks import print_figures, serving_engine

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import INFERENCE_REPLICAS
from omenative_devcluster.model_engine import (
    live_pods,
)
from omenative_devcluster.traffic import LoadGenerator

pytest_plugins = ["realnode_fixtures", "traffic_fixtures"]
pytestmark = [pytest.mark.integration, pytest.mark.realnodes, pytest.mark.component("coredns"),
              pytest.mark.asyncio(loop_scope="session")]

RATE = 25.0


async def test_delete_drains_before_the_pods_go(
    real_kube: KubeClient, real_namespace: str, real_manager: Any,
) -> None:
    kube, ns = real_kube, real_namespace
    await real_manager()
    ip = await serving_engine(kube, ns, replicas=2)

    async with LoadGenerator(f"http://{ip}:8080/", rate=RATE, duration=600) as gen:
        await asyncio.sleep(3)
        t_delete = gen.now()
        await kube.delete(INFERENCE_REPLICAS, "llm", ns)

        async def gone() -> bool:
            try:
                await kube.get(INFERENCE_REPLICAS, "llm", ns)
            except ApiError as exc:
                if exc.not_found:
                    return not await live_pods(kube, ns)
                raise
            return False

        await eventually(gone, timeout=120, what="the InferenceReplica and its pods gone")
        t_gone = gen.now()
        await asyncio.sleep(2)
    report = gen.report()
    print_figures("InferenceReplica delete", report, delete_at_s=round(t_delete, 1),
                  gone_after_s=round(t_gone - t_delete, 1),
                  failed_started_before_delete=report.failed_started_before(t_delete))

    assert report.failed_started_before(t_delete) == 0, report.table()
    # answers went on while the Instances drained, and stopped once they were gone
    assert any(o.started > t_delete for o in report.answers), report.timeline()
    assert not any(o.started > t_gone for o in report.answers), report.timeline()

"""Migration of a Ready Instance off its node, under traffic, on real nodes: the
replacement gang serves before the source drains, so no request fails."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from manager_fixtures import eventually
from traffic_checks import print_figures, serving_engine

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS
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
KEY = "ome.io/migration-request-v1-7d4e2a10-2222-4c1e-9c61-3f1d2b9a7e02"


async def test_migration_off_a_node_fails_no_request(
    real_kube: KubeClient, real_namespace: str, real_manager: Any,
) -> None:
    kube, ns = real_kube, real_namespace
    await real_manager()
    ip = await serving_engine(kube, ns, replicas=2)
    pods = await live_pods(kube, ns)
    source_leader = "llm-engine-0-leader-0"
    request = {"schemaVersion": "v1", "instance": 0,
               "from_node": pods[source_leader]["spec"]["nodeName"], "hint_target_nodes": [],
               "reason": "traffic test", "requested_by": "pytest"}

    async with ServingRecorder(kube, ns) as recorder, LoadGenerator(
            f"http://{ip}:8080/", rate=RATE, duration=600) as gen:
        await asyncio.sleep(3)
        t_request = gen.now()
        await kube.patch(INFERENCE_REPLICAS, "llm",
                         {"metadata": {"annotations": {KEY: json.dumps(request)}}}, ns)

        async def completed() -> JSON | None:
            ir = await kube.get(INFERENCE_REPLICAS, "llm", ns)
            migrations = (ir.get("status") or {}).get("migrations") or []
            if migrations and migrations[0].get("phase") == "Failed":
                raise AssertionError(f"migration failed: {migrations[0]}")
            done = migrations and migrations[0].get("phase") == "Completed"
            return ir if done else None

        ir = await eventually(completed, timeout=180, what="the migration to complete")
        await wait_converged(kube, ns, "llm", replicas=2, pods_per_instance=2,
                             revision="rev-1", timeout=120)
        t_done = gen.now()
        await asyncio.sleep(3)
    report = gen.report()
    (migration,) = ir["status"]["migrations"]
    print_figures("migration of a Ready Instance off its node", report,
                  migration_seconds=round(t_done - t_request, 1),
                  surge_instance=migration.get("surgeInstance"))

    assert report.failed == 0, report.table()
    assert migration["sourceInstance"] == 0 and migration["succeeded"] is True
    before = {o.pod for o in report.answers if o.ended < t_request}
    after = {o.pod for o in report.answers if o.started > t_done}
    assert source_leader in before and source_leader not in after, (before, after)
    assert recorder.record.unserving_answers(report.answers, gen.wall) == []

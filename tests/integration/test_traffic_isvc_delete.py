"""Deleting an InferenceService under traffic, on real nodes: its InferenceReplicas go by
garbage collection, and omenative's ``ome.io/ir-teardown`` finalizer drains each Instance
(readiness gate False, then the pod) before the pods go. Every request started before the
delete gets its answer; every pod's gate is False before it is deleted; in the end the
InferenceService, its InferenceReplicas, its pods and its Services are gone.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from manager_fixtures import apply_crd, eventually
from test_traffic_canary import runtime_body
from traffic_checks import answering_service, print_figures

from omenative_controller import service_crds
from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS, SERVICES
from omenative_controller.service_controller import INFERENCE_SERVICES, SERVING_RUNTIMES
from omenative_devcluster.model_engine import live_pods
from omenative_devcluster.serving_record import ServingRecorder
from omenative_devcluster.traffic import LoadGenerator

pytest_plugins = ["realnode_fixtures", "traffic_fixtures"]
pytestmark = [pytest.mark.integration, pytest.mark.realnodes, pytest.mark.component("coredns"),
              pytest.mark.asyncio(loop_scope="session")]

REPO = Path(__file__).resolve().parents[2]
RATE = 25.0
INSTANCES = 2


async def _names(kube: KubeClient, res: Any, ns: str) -> list[str]:
    return [str(o["metadata"]["name"]) for o in (await kube.list(res, ns)).get("items") or ()]


async def test_isvc_delete_drains_every_instance_before_its_pods_go(
    real_kube: KubeClient, real_namespace: str, real_manager: Any,
) -> None:
    kube, ns = real_kube, real_namespace
    for crd in service_crds.SERVICE_CRDS:
        await apply_crd(kube, REPO / crd.file)
    await real_manager()
    await kube.create(SERVING_RUNTIMES, runtime_body("rev-1"), ns)
    await kube.create(INFERENCE_SERVICES, {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "llm"},
        "spec": {"deploymentMode": "OMENative", "model": {"name": "llama"},
                 "runtime": {"name": "srt-llm", "kind": "ServingRuntime"},
                 "engine": {"minReplicas": INSTANCES, "maxReplicas": INSTANCES}}}, ns)
    url = await answering_service(kube, ns, "llm-engine", pods=INSTANCES)

    async with ServingRecorder(kube, ns) as recorder, LoadGenerator(
            f"{url}/", rate=RATE, duration=600) as gen:
        await asyncio.sleep(3)
        t_delete = gen.now()
        await kube.delete(INFERENCE_SERVICES, "llm", ns)

        async def gone() -> bool:
            return not (await _names(kube, INFERENCE_SERVICES, ns)
                        or await _names(kube, INFERENCE_REPLICAS, ns)
                        or await live_pods(kube, ns))

        await eventually(gone, timeout=120, what="the InferenceService, its replicas and pods gone")
        t_gone = gen.now()
        await asyncio.sleep(2)
    report = gen.report()
    record = recorder.record
    print_figures("InferenceService delete", report, delete_at_s=round(t_delete, 1),
                  gone_after_s=round(t_gone - t_delete, 1),
                  failed_started_before_delete=report.failed_started_before(t_delete))

    assert report.failed_started_before(t_delete) == 0, report.table()
    assert any(o.started < t_delete for o in report.answers), report.timeline()
    served = {o.pod for o in report.answers}
    assert len(served) == INSTANCES, served
    for pod in served:
        seen = record.sightings[pod]
        first_terminating = next(i for i, s in enumerate(seen) if s.terminating or s.deleted)
        # the drain: the gate went False (the Instance left the endpoints) before the delete
        gates = [s.gate for s in seen[:first_terminating]]
        assert True in gates and gates[-1] is False, (pod, seen)

    async def services_gone() -> bool:
        return not [n for n in await _names(kube, SERVICES, ns) if n.startswith("llm")]

    await eventually(services_gone, timeout=60, what="the InferenceService's Services gone")

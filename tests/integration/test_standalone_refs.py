"""OME's "Run a standalone InferenceReplica" (ome-projects/ome-docs@8c764098,
guides/omenative/run-a-standalone-inferencereplica.md) with a runtime reference: the
replica renders its pods from ``spec.runtimeRef`` in memory, ``replicas: 0`` runs one
Instance, and a runtime it cannot render from is ``Ready=False`` with OME's reason and a
Warning Event (issue 28, item 3). The test model server stands in for the engine image."""

from __future__ import annotations

from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS
from omenative_controller.service_controller import SERVING_RUNTIMES

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    eventually,
    get_replica,
    list_pods,
    warning_events,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]


def _pool(name: str, runtime: str, replicas: int) -> JSON:
    return {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
        "metadata": {"name": name},
        "spec": {"component": "engine", "replicas": replicas,
                 "runtimeRef": {"name": runtime, "kind": "ServingRuntime"}},
    }


async def test_a_standalone_replica_runs_from_its_runtime_ref(
    kube: KubeClient, namespace: str, start_manager: Any, service_crds_applied: list[str]
) -> None:
    await start_manager()
    runtime: JSON = {
        "apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime",
        "metadata": {"name": "srt-pool", "namespace": namespace},
        "spec": {"engineConfig": {"terminationGracePeriodSeconds": 1,
                                  "runner": {"image": "example.com/llm:1"}}},
    }
    await kube.create(SERVING_RUNTIMES, runtime, namespace)
    await kube.create(INFERENCE_REPLICAS, _pool("llama-pool", "srt-pool", 0), namespace)

    async def ready() -> JSON | None:
        ir = await get_replica(kube, namespace, "llama-pool")
        return ir if (ir.get("status") or {}).get("readyReplicas") == 1 else None

    ir = await eventually(ready, timeout=90, what="the runtimeRef replica Ready")
    assert ir["spec"]["replicas"] == 0 and "runners" not in ir["spec"]  # never written
    assert ir["status"]["replicas"] == 1  # OME: 0 runs one Instance
    pods = [p for p in (await list_pods(kube, namespace)).values()
            if p["metadata"]["labels"].get("ome.io/inferencereplica") == "llama-pool"]
    assert len(pods) == 1
    images = [c["image"] for c in pods[0]["spec"]["containers"]]
    assert "example.com/llm:1" in images

    # a runtime that does not exist: Ready=False RuntimeNotFound and a Warning Event
    await kube.create(INFERENCE_REPLICAS, _pool("orphan-pool", "srt-missing", 1), namespace)

    async def blocked() -> JSON | None:
        got = await get_replica(kube, namespace, "orphan-pool")
        conds = {c["type"]: c for c in (got.get("status") or {}).get("conditions") or ()}
        ready_cond = conds.get("Ready")
        return got if ready_cond is not None and ready_cond["reason"] == "RuntimeNotFound" \
            else None

    orphan = await eventually(blocked, timeout=30, what="RuntimeNotFound on the replica")
    ready_cond = next(c for c in orphan["status"]["conditions"] if c["type"] == "Ready")
    assert ready_cond["status"] == "False"
    assert "ServingRuntime 'srt-missing' not found" in ready_cond["message"]
    events = await warning_events(kube, namespace, "orphan-pool")
    assert any(e["reason"] == "RuntimeNotFound" for e in events)

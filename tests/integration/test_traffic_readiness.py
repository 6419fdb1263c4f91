"""Readiness truth, on real nodes: no Instance is counted serving (the ``ome.io/serving``
gate) or reported Ready in the InferenceReplica's status before every one of its pods'
servers answered its readiness probe with 200, as the server's own log records it.

The model server loads for 3 s, and a leader is ready only once its worker has joined it,
so a gang is ready only when all of it is: exactly what a multi-node engine does.
"""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from traffic_checks import log_time, server_log_with

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS
from omenative_devcluster.model_engine import (
    leader_service,
    live_pods,
    model_replica,
    wait_converged,
)
from omenative_devcluster.serving_record import ServingRecorder

pytest_plugins = ["realnode_fixtures", "traffic_fixtures"]
pytestmark = [pytest.mark.integration, pytest.mark.realnodes, pytest.mark.component("coredns"),
              pytest.mark.asyncio(loop_scope="session")]


async def test_no_instance_serves_before_its_pods_servers_are_ready(
    real_kube: KubeClient, real_namespace: str, real_manager: Any,
    real_kubeconfig: Path,
) -> None:
    kube, ns = real_kube, real_namespace
    await real_manager()
    async with ServingRecorder(kube, ns) as recorder:
        await kube.create(INFERENCE_REPLICAS,
                          model_replica("llm", replicas=2, load_seconds=3), ns)
        await leader_service(kube, ns, "llm")
        await wait_converged(kube, ns, "llm", replicas=2, pods_per_instance=2,
                             revision="rev-1")
        await recorder.caught_up()  # the record holds what wait_converged read
    record = recorder.record
    pods = await live_pods(kube, ns)
    rows = []
    for key in record.instances():
        names = [n for n, p in pods.items()
                 if p["metadata"]["labels"]["ome.io/instance-index"] == str(key[1])]
        first_ready = []
        for name in names:
            lines = await server_log_with(real_kubeconfig, ns, name, "first-ready")
            ready = [ln for ln in lines if ln.get("event") == "first-ready"]
            assert ready, f"{name} never logged its first ready answer: {lines[-5:]}"
            first_ready.append(log_time(ready[0]["ts"]))
        last_pod_ready = max(first_ready)
        serving = record.serving_since[key]
        row_ready = record.row_ready_since[key]
        rows.append((key, len(names), serving - last_pod_ready, row_ready - last_pod_ready))
        assert len(names) == 2
        assert serving > last_pod_ready, (key, serving, first_ready)
        assert row_ready > last_pod_ready, (key, row_ready, first_ready)
        # and by the API's own record: the gate's lastTransitionTime (whole seconds) is not
        # in an earlier second than the last server's first ready answer
        for name in names:
            cond = next(c for c in pods[name]["status"]["conditions"]
                        if c["type"] == "ome.io/serving")
            assert cond["status"] == "True"
            gate_at = datetime.fromisoformat(cond["lastTransitionTime"].replace("Z", "+00:00"))
            assert gate_at.timestamp() >= math.floor(last_pod_ready), (name, cond, first_ready)
    print("\nreadiness truth (seconds after the Instance's last server logged ready):")
    for key, n, serving_after, row_after in rows:
        print(f"  Instance {key[1]} ({n} pods): gate True +{serving_after:.2f}s, "
              f"status row Ready +{row_after:.2f}s")

"""Quiescent at rest: with every Instance Ready, the manager makes no write calls."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    eventually,
    gate,
    get_replica,
    list_pods,
    replica_body,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

WINDOW = 30.0


async def test_zero_writes_at_steady_state(
    kube: KubeClient, namespace: str, start_manager: Any
) -> None:
    handle = await start_manager()
    await kube.create(INFERENCE_REPLICAS, replica_body("st", replicas=2), namespace)

    async def converged() -> bool:
        ir = await get_replica(kube, namespace, "st")
        status = ir.get("status") or {}
        pods = await list_pods(kube, namespace)
        return (status.get("readyReplicas") == 2 and status.get("availableReplicas") == 2
                and len(pods) == 4 and all(gate(p) == "True" for p in pods.values()))

    await eventually(converged, timeout=90, what="2 Instances Ready and available")

    # Settled: the last trailing write (a status after the endpoints caught up) is done.
    last = {"writes": handle.writes(), "at": time.monotonic()}

    async def quiet_for_5s() -> bool:
        now = handle.writes()
        if now != last["writes"]:
            last["writes"], last["at"] = now, time.monotonic()
        return time.monotonic() - last["at"] >= 5.0

    await eventually(quiet_for_5s, timeout=60, interval=0.5, what="no write for 5 s")

    writes0, leases0 = handle.writes(), handle.lease_writes()
    requests0 = handle.metrics.sample("omenative_api_requests_total")
    passes0 = handle.metrics.sample("omenative_reconcile_duration_seconds_count")
    await asyncio.sleep(WINDOW)  # the measurement window itself, not a wait for a condition
    writes = handle.writes() - writes0
    leases = handle.lease_writes() - leases0
    requests = handle.metrics.sample("omenative_api_requests_total") - requests0
    passes = handle.metrics.sample("omenative_reconcile_duration_seconds_count") - passes0
    print(f"STEADY-STATE {WINDOW:.0f}s: writes={writes:.0f} (leases excluded), "
          f"lease_writes={leases:.0f}, api_requests={requests:.0f}, reconciles={passes:.0f}")
    assert writes == 0, f"{writes} write calls at steady state"
    ir = await get_replica(kube, namespace, "st")
    assert ir["status"]["readyReplicas"] == 2

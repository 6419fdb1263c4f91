"""Quiescent at rest: with every Instance Ready, the manager makes no write calls, for a
bare InferenceReplica and for an InferenceService whose engine and decoder are a rollout
group that has just finished a canary (the ISVC controller, the rollout shell and the IR
manager must not keep rewriting each other's objects); and a pass of that InferenceService
at rest, which applies every object it owns, writes none of them."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS
from omenative_controller.service_autoscalers import HPAS

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    ManagerHandle,
    eventually,
    gate,
    get_replica,
    list_pods,
    replica_body,
)
from test_rollout_groups import (  # noqa: E402
    MEMBERS,
    change_image,
    group,
    isvc_body,
    stable_on_canary,
    start_stable,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

WINDOW = 30.0
ISVC_WINDOW = 15.0


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
    await assert_no_writes(handle, WINDOW)
    ir = await get_replica(kube, namespace, "st")
    assert ir["status"]["readyReplicas"] == 2


async def test_zero_writes_after_a_rollout_group_finished_its_canary(
    kube: KubeClient, namespace: str, start_manager: Any, service_crds_applied: list[str]
) -> None:
    handle = await start_manager()  # the IR manager and its InferenceService controller
    steps = [{"capacity": "100%", "traffic": 100}]
    old = await start_stable(kube, namespace, isvc_body(namespace, 2, steps), 2)
    await change_image(kube, namespace, "example.com/llm:2")
    isvc = await stable_on_canary(kube, namespace, old)
    assert all(group(isvc)["stable"][c] != f"pd-{c}-{old[c]}" for c in MEMBERS)
    await hpas_settled(kube, namespace)
    await assert_no_writes(handle, ISVC_WINDOW)
    await assert_isvc_pass_writes_nothing(handle)


async def assert_isvc_pass_writes_nothing(handle: ManagerHandle) -> None:
    """A pass of every InferenceService at rest renders and applies every object it owns
    (InferenceReplicas, Services, HPAs, PDBs, the router's RBAC...): none is written, since
    each is the body last applied and its cached object still carries what that left."""
    isvc_ctl = handle.manager._isvc
    assert isvc_ctl is not None
    keys = isvc_ctl.isvcs.key_list()
    assert keys
    writes0, by_resource0 = handle.writes(), _writes_by_resource(handle)
    for key in keys:
        assert await isvc_ctl.reconcile(key)
    writes = handle.writes() - writes0
    grew = {k: v - by_resource0.get(k, 0.0) for k, v in _writes_by_resource(handle).items()
            if v != by_resource0.get(k, 0.0)}
    print(f"ISVC PASS AT REST: {len(keys)} InferenceService(s), writes={writes:.0f} {grew}, "
          f"applies remembered={len(isvc_ctl.repeats)}")
    assert writes == 0, f"{writes} write calls in one pass at rest: {grew}"


async def hpas_settled(kube: KubeClient, namespace: str) -> None:
    """Until kube-controller-manager's HPA controller has left every HPA alone for longer
    than its 15 s sync period. It learns the InferenceReplica's scale subresource some
    seconds after the CRD appears and then fills in the HPA status; each of those changes is
    mirrored into the ISVC status (``status.components.<c>.autoscaler``), as it must be, so
    until then the state is not steady: it waits for that first success too."""
    seen: dict[str, object] = {"versions": None, "since": time.monotonic()}

    async def settled() -> bool:
        hpas = (await kube.list(HPAS, namespace)).get("items") or ()
        versions = sorted(h["metadata"]["resourceVersion"] for h in hpas)
        if versions != seen["versions"]:
            seen["versions"], seen["since"] = versions, time.monotonic()
        return bool(hpas) and all(_got_scale(h) for h in hpas) and \
            time.monotonic() - float(seen["since"]) >= 17.0  # type: ignore[arg-type]

    await eventually(settled, timeout=120, interval=0.5,
                     what="the HPA controller to read every target's scale and then leave "
                          "every HPA alone for 17 s")


def _got_scale(hpa: dict[str, Any]) -> bool:
    """The HPA controller has read the target's scale (``AbleToScale=True``). Until then it
    retries about every 30 s, longer than the 17 s quiet, and its first success changes the
    HPA status the ISVC mirrors (seen: FailedGetScale at :59, SucceededGetScale at :29, the
    ISVC status written twice in the window; on main as well)."""
    return any(c.get("type") == "AbleToScale" and c.get("status") == "True"
               for c in (hpa.get("status") or {}).get("conditions") or ())


async def assert_no_writes(handle: ManagerHandle, window: float) -> None:
    """Once writes have stopped for 5 s, none happen in ``window`` seconds."""
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
    by_resource0 = _writes_by_resource(handle)
    await asyncio.sleep(window)  # the measurement window itself, not a wait for a condition
    writes = handle.writes() - writes0
    leases = handle.lease_writes() - leases0
    requests = handle.metrics.sample("omenative_api_requests_total") - requests0
    passes = handle.metrics.sample("omenative_reconcile_duration_seconds_count") - passes0
    print(f"STEADY-STATE {window:.0f}s: writes={writes:.0f} (leases excluded), "
          f"lease_writes={leases:.0f}, api_requests={requests:.0f}, reconciles={passes:.0f}")
    grew = {k: v - by_resource0.get(k, 0.0) for k, v in _writes_by_resource(handle).items()
            if v != by_resource0.get(k, 0.0)}
    assert writes == 0, f"{writes} write calls at steady state: {grew}"


def _writes_by_resource(handle: ManagerHandle) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in handle.manager.metrics.registry.collect():
        for sample in family.samples:
            if sample.name == "omenative_api_writes_total":
                key = f"{sample.labels.get('verb')} {sample.labels.get('resource')}"
                out[key] = out.get(key, 0.0) + sample.value
    return out

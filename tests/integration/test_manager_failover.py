"""Crash in the middle of an update and restart; two managers sharing one Lease.

What is asserted is who leads and who writes, never how fast: the hand-over times are
measured by ``benchmarks/bench_failover.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import attrs
import pytest
from tests.pod_history import assert_no_duplicates

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS, LEASES
from omenative_controller.leader import LeaderConfig, LeaderElector

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    PodRecorder,
    eventually,
    gate,
    get_replica,
    list_pods,
    live_instances,
    patch_replica,
    replica_body,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

LEASE = 3.0
RETRY = 0.5


async def wait_ready(kube: KubeClient, namespace: str, name: str, count: int) -> JSON:
    """Until ``count`` Instances are Ready, all pods serving."""
    async def check() -> JSON | None:
        ir = await get_replica(kube, namespace, name)
        status = ir.get("status") or {}
        pods = await list_pods(kube, namespace)
        ok = (status.get("readyReplicas") == count and status.get("replicas") == count
              and len(live_instances(pods)) == count
              and all(gate(p) == "True" for p in pods.values()))
        return ir if ok else None

    return await eventually(check, timeout=90, what=f"{count} Instance(s) of {name} Ready")


def image_patch(image: str) -> JSON:
    body = replica_body("x", image=image)
    return {"spec": {"runners": body["spec"]["runners"]}}


async def test_killed_mid_update_and_restarted_finishes_without_duplicates(
    kube: KubeClient, namespace: str, start_manager: Any
) -> None:
    first = await start_manager(identity="first", lease_duration=LEASE,
                                renew_deadline=LEASE * 2 / 3, retry_period=RETRY)
    await kube.create(INFERENCE_REPLICAS, replica_body("up", replicas=2), namespace)
    ir = await wait_ready(kube, namespace, "up", 2)
    old_rev = ir["status"]["currentRevision"]
    old_hash = old_rev.rsplit("-", 1)[1]
    recorder = await PodRecorder(kube, namespace).start()
    await patch_replica(kube, namespace, "up", image_patch("example.com/llm:2"))

    async def surge_started() -> bool:
        pods = await list_pods(kube, namespace)
        return any(p["metadata"]["labels"].get("ome.io/revision-hash") != old_hash
                   for p in pods.values())

    await eventually(surge_started, timeout=60, interval=0.05,
                     what="the first pod of the new revision")
    await first.kill()  # hard: no drain, no Lease release

    second = await start_manager(identity="second", write_config=False, lease_duration=LEASE,
                                 renew_deadline=LEASE * 2 / 3, retry_period=RETRY)

    async def finished() -> JSON | None:
        ir = await get_replica(kube, namespace, "up")
        status = ir.get("status") or {}
        pods = await list_pods(kube, namespace)
        live = live_instances(pods)
        new_rev = status.get("updateRevision")
        ok = (
            new_rev and new_rev != old_rev and status.get("currentRevision") == new_rev
            and status.get("updatedReplicas") == 2 and status.get("readyReplicas") == 2
            and status.get("replicas") == 2 and len(live) == 2 and len(pods) == 4
            and all(p["metadata"]["labels"]["ome.io/revision-hash"] == new_rev.rsplit("-", 1)[1]
                    and gate(p) == "True" for p in pods.values())
        )
        return ir if ok else None

    await eventually(finished, timeout=120, what="the update finished by the new manager")
    await recorder.caught_up()  # the checks below read its history to now
    await recorder.stop()
    peak_live = 0
    serving_floor = 2
    for _, _, state in recorder.replay():
        live = live_instances(state)
        peak_live = max(peak_live, len(live))
        serving = sum(1 for pods in live.values()
                      if len(pods) == 2 and all(gate(p) == "True" for p in pods))
        serving_floor = min(serving_floor, serving)
    print(f"KILL-RESTART: peak live Instances {peak_live}, lowest serving {serving_floor}")
    assert peak_live <= 3, f"{peak_live} live Instances: more than desired 2 + maxSurge 1"
    assert serving_floor >= 2, "serving Instances dropped below the desired count"
    assert_no_duplicates(recorder.replay(), max_live=3)
    assert second.writes() > 0


async def test_two_managers_one_lease_only_the_leader_writes(
    kube: KubeClient, namespace: str, start_manager: Any
) -> None:
    timing = {"lease_duration": LEASE, "renew_deadline": LEASE * 2 / 3, "retry_period": RETRY}
    a = await start_manager(identity="a", **timing)
    b = await start_manager(identity="b", write_config=False, wait_leader=False, **timing)
    await eventually(lambda: _synced(b), timeout=30, what="the standby's caches synced")
    await kube.create(INFERENCE_REPLICAS, replica_body("le", replicas=2), namespace)
    await wait_ready(kube, namespace, "le", 2)
    assert a.manager.is_leader and not b.manager.is_leader
    assert a.writes() > 0
    assert b.writes() == 0 and b.lease_writes() == 0, "the standby wrote"

    held = (await lease(kube, namespace))["spec"]
    assert held["holderIdentity"] == "a"

    await a.kill()  # hard: the Lease stays a's until it runs out, then b takes it
    await b.wait_leader(timeout=60)
    taken = (await lease(kube, namespace))["spec"]
    assert taken["holderIdentity"] == "b"
    assert taken["leaseTransitions"] == held.get("leaseTransitions", 0) + 1

    await patch_replica(kube, namespace, "le", {"spec": {"replicas": 1}}, subresource="scale")
    await wait_ready(kube, namespace, "le", 1)
    assert b.writes() > 0

    # A graceful stop releases the Lease (no holder, 1 s), so the next manager need not
    # wait out b's Lease.
    await b.stop()
    released = (await lease(kube, namespace))["spec"]
    assert not released.get("holderIdentity"), f"the Lease was not released: {released}"
    assert released["leaseDurationSeconds"] == 1
    c = await start_manager(identity="c", write_config=False, **timing)
    assert (await lease(kube, namespace))["spec"]["holderIdentity"] == "c"
    await patch_replica(kube, namespace, "le", {"spec": {"replicas": 2}}, subresource="scale")
    await wait_ready(kube, namespace, "le", 2)
    assert c.writes() > 0


async def lease(kube: KubeClient, namespace: str) -> JSON:
    """The managers' Lease (``omenative-manager`` in the test's namespace)."""
    return await kube.get(LEASES, "omenative-manager", namespace)


async def _synced(handle: Any) -> bool:
    return bool(handle.manager.caches_synced())


async def test_a_slow_start_keeps_renewing_so_no_rival_takes_the_lease(
    kube: KubeClient, namespace: str
) -> None:
    """Caches that take longer to sync than the Lease lasts must not hand leadership over:
    the new leader renews while its start-up callback is still running."""
    config = LeaderConfig(name="slow-start", namespace=namespace, identity="slow",
                          lease_duration=LEASE, renew_deadline=LEASE * 2 / 3,
                          retry_period=RETRY)
    starting, started = asyncio.Event(), asyncio.Event()

    async def slow_start() -> None:
        starting.set()
        await asyncio.sleep(LEASE * 3)  # three Lease durations of "cache sync"
        started.set()

    stop_a, stop_b = asyncio.Event(), asyncio.Event()
    a = LeaderElector(kube, config, on_started=slow_start)
    rival = LeaderElector(kube, attrs.evolve(config, identity="rival"))
    task_a = asyncio.create_task(a.run(stop_a))
    await asyncio.wait_for(starting.wait(), timeout=30)
    task_b = asyncio.create_task(rival.run(stop_b))
    try:
        await asyncio.wait_for(started.wait(), timeout=LEASE * 10)
        assert a.is_leader and not rival.is_leader, "the rival took over during a slow start"
        lease = await kube.get(LEASES, "slow-start", namespace)
        assert lease["spec"]["holderIdentity"] == "slow"
    finally:
        stop_a.set()
        stop_b.set()
        await asyncio.wait_for(asyncio.gather(task_a, task_b, return_exceptions=True), 30)

"""Create and ready: pods, labels, env, gang gating, the headless Service, PodGroups, names.

Behaviour is checked as a user sees it in the cluster (objects, status, a recorded history
of the namespace's pods), never as a sequence of API calls.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import (
    INFERENCE_REPLICAS,
    SERVICES,
    pod_groups,
    resource_for,
)

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    PodRecorder,
    apply_crd,
    conditions,
    delete_crd,
    eventually,
    gate,
    get_replica,
    list_pods,
    pod_group_crd_file,
    replica_body,
    replica_condition,
    warning_events,
)

if TYPE_CHECKING:
    from conftest import FaultControl

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

def env_of(pod: JSON) -> dict[str, str]:
    """The first container's env vars."""
    container = pod["spec"]["containers"][0]
    return {e["name"]: e.get("value", "") for e in container.get("env") or ()}


def assert_gangs_gated(recorder: PodRecorder) -> None:
    """Whenever a pod entered rotation, every pod of its Instance had ready containers."""
    checked = 0
    previous: dict[str, str | None] = {}
    for _kind, obj, state in recorder.replay():
        name = obj["metadata"]["name"]
        now = gate(obj) if _kind != "DELETED" else None
        if now == "True" and previous.get(name) != "True":
            labels = obj["metadata"]["labels"]
            gang = [p for p in state.values()
                    if p["metadata"]["labels"].get("ome.io/instance-index")
                    == labels["ome.io/instance-index"]
                    and p["metadata"]["labels"].get("ome.io/instance-incarnation")
                    == labels["ome.io/instance-incarnation"]]
            assert len(gang) == 2, f"{name} entered rotation with {len(gang)} pod(s) in its gang"
            for p in gang:
                assert conditions(p).get("ContainersReady") == "True", (
                    f"{name} entered rotation while {p['metadata']['name']} was not ready")
            checked += 1
        previous[name] = now
    assert checked >= 2, "no pod was seen entering rotation"


async def test_standalone_replica_two_instances_become_ready(
    kube: KubeClient, namespace: str, start_manager: Any, no_pod_group_crd: None
) -> None:
    recorder = await PodRecorder(kube, namespace).start()
    handle = await start_manager()
    await kube.create(INFERENCE_REPLICAS, replica_body("demo", replicas=2), namespace)

    async def ready() -> JSON | None:
        ir = await get_replica(kube, namespace, "demo")
        status = ir.get("status") or {}
        return ir if status.get("readyReplicas") == 2 and status.get("availableReplicas") == 2 \
            else None

    ir = await eventually(ready, timeout=90, what="readyReplicas == 2")
    await recorder.caught_up()  # the checks below read its history to now
    await recorder.stop()
    status = ir["status"]
    assert status["replicas"] == 2 and status["servingReplicas"] == 2
    assert status["updatedReplicas"] == 2
    assert status["labelSelector"]
    assert "ome.io/ir-teardown" in ir["metadata"].get("finalizers", [])

    pods = await list_pods(kube, namespace)
    assert sorted(pods) == ["demo-engine-0-leader-0", "demo-engine-0-worker-0",
                            "demo-engine-1-leader-0", "demo-engine-1-worker-0"]
    revision = status["currentRevision"]
    for name, pod in pods.items():
        index, runner = name.split("-")[2], name.split("-")[3]
        labels = pod["metadata"]["labels"]
        assert labels["ome.io/inferenceservice"] == "demo"
        assert labels["component"] == "engine"
        assert labels["ome.io/managed-by"] == "OMENative"
        assert labels["ome.io/instance-index"] == index
        assert labels["ome.io/instance-incarnation"] == "1"
        assert labels["ome.io/runner"] == runner
        assert labels["ome.io/pod-ordinal"] == "0"
        assert revision.endswith(labels["ome.io/revision-hash"])
        assert pod["spec"]["subdomain"] == "demo-engine-headless"
        assert {"conditionType": "ome.io/serving"} in pod["spec"]["readinessGates"]
        assert gate(pod) == "True"
        env = env_of(pod)
        assert env["OME_INFERENCESERVICE_NAME"] == "demo"
        assert env["OME_COMPONENT"] == "engine"
        assert env["OME_INSTANCE_INDEX"] == index
        assert env["OME_RUNNER"] == runner
        assert env["OME_LEADER_ADDRESS"] == f"demo-engine-{index}-leader-0.demo-engine-headless"
        assert env["OME_INSTANCE_POD_COUNT"] == "2"
        assert env["OME_INSTANCE_POD_RANK"] == ("0" if runner == "leader" else "1")

    service = await kube.get(SERVICES, "demo-engine-headless", namespace)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"].get("publishNotReadyAddresses") is True

    scale = await kube.get(INFERENCE_REPLICAS, "demo", namespace, subresource="scale")
    assert scale["spec"]["replicas"] == 2 and scale["status"]["replicas"] == 2
    assert scale["status"]["selector"] == status["labelSelector"]

    gang = replica_condition(ir, "GangSchedulingUnavailable")
    assert gang is not None and gang["status"] == "True"
    assert gang["reason"] == "PodGroupCRDNotInstalled"
    assert_gangs_gated(recorder)
    assert handle.metrics.sample("omenative_api_requests_total", {"verb": "list"}) >= 6
    # one serving-gate patch per pod: later passes plan from what we wrote, not a stale cache
    assert handle.metrics.sample("omenative_actions_total", {"kind": "SetServingGate"}) == 4


async def three_gangs_ready_each_pod_created_once(
    kube: KubeClient, namespace: str, name: str, recorder: PodRecorder
) -> None:
    """Wait for 3 Ready Instances of a leader and a worker; then every pod was created
    exactly once (ADDED once, never re-created) and entered rotation with its whole gang."""

    async def ready() -> bool:
        ir = await get_replica(kube, namespace, name)
        return (ir.get("status") or {}).get("readyReplicas") == 3

    await eventually(ready, timeout=90, what=f"{name}: readyReplicas == 3")
    await recorder.caught_up()  # the checks below read its history to now
    await recorder.stop()
    pods = await list_pods(kube, namespace)
    assert sorted(pods) == [f"{name}-engine-{i}-{r}-0"
                            for i in range(3) for r in ("leader", "worker")]
    added = [obj["metadata"]["name"] for kind, obj, _ in recorder.replay() if kind == "ADDED"]
    assert sorted(added) == sorted(pods), "a pod was created twice, or deleted and re-created"
    assert_gangs_gated(recorder)


async def test_a_bring_up_bigger_than_one_pass_comes_up_in_chunks_each_pod_created_once(
    kube: KubeClient, namespace: str, start_manager: Any, no_pod_group_crd: None
) -> None:
    """A pass sends at most ``creates_per_pass`` pod creates (whole gangs) and the next pass
    comes at once for the rest: 3 gangs of 2 pods at 2 a pass take 3 passes, and every pod
    is created exactly once and enters rotation only with its whole gang."""
    recorder = await PodRecorder(kube, namespace).start()
    handle = await start_manager(creates_per_pass=2)
    await kube.create(INFERENCE_REPLICAS, replica_body("chunks", replicas=3), namespace)

    await three_gangs_ready_each_pod_created_once(kube, namespace, "chunks", recorder)
    assert handle.metrics.sample("omenative_actions_total", {"kind": "CreatePod"}) == 6


async def test_creates_sent_behind_their_pass_meet_a_real_quota_then_each_pod_is_made_once(
    kube: KubeClient, namespace: str, start_manager: Any, no_pod_group_crd: None
) -> None:
    """Pod creates go out behind their pass (the next pass plans while they are answered,
    the pods expected in the cache). A real ResourceQuota refuses the 4th pod: the refusal
    reaches the replica (its Instance waits ``QuotaExceeded``, a failure is counted), no
    refused pod lingers as expected, and once the quota allows, every pod is created
    exactly once and enters rotation only with its whole gang."""
    quota = resource_for("v1", "ResourceQuota")
    await kube.create(quota, {"apiVersion": "v1", "kind": "ResourceQuota",
                              "metadata": {"name": "pods"},
                              "spec": {"hard": {"pods": "3"}}}, namespace)

    async def quota_counted() -> bool:
        got = await kube.get(quota, "pods", namespace)
        return "pods" in ((got.get("status") or {}).get("hard") or {})

    await eventually(quota_counted, timeout=60, what="kube-controller-manager to count the quota")
    recorder = await PodRecorder(kube, namespace).start()
    handle = await start_manager(creates_per_pass=2)
    await kube.create(INFERENCE_REPLICAS, replica_body("quota", replicas=3), namespace)

    async def refused() -> JSON | None:
        ir = await get_replica(kube, namespace, "quota")
        rows = (ir.get("status") or {}).get("instanceStatuses") or ()
        waiting = [r for r in rows if (r.get("operation") or {}).get("waiting")
                   == "QuotaExceeded"]
        return waiting[0] if waiting and len(await list_pods(kube, namespace)) == 3 else None

    await eventually(refused, timeout=90, what="an Instance waiting QuotaExceeded, 3 pods")
    assert handle.metrics.sample("omenative_action_failures_total",
                                 {"kind": "CreatePod", "reason": "QuotaExceeded"}) >= 1
    manager_pods = handle.manager.pods
    assert manager_pods is not None
    await asyncio.sleep(1.0)  # a refused create's expected pod is gone, not left behind
    assert all(view.uid for _, view in manager_pods.items()), "an expected pod lingers"

    await kube.patch(quota, "pods", {"spec": {"hard": {"pods": "10"}}}, namespace)

    await three_gangs_ready_each_pod_created_once(kube, namespace, "quota", recorder)


async def test_gate_waits_for_the_whole_gang(
    kube: KubeClient, namespace: str, start_manager: Any, faults: FaultControl,
    no_pod_group_crd: None,
) -> None:
    slow = f"example.com/{namespace}/worker:slow"
    await faults.set(bad_images=[slow])
    pods_seen = await PodRecorder(kube, namespace).start()
    replicas_seen = await PodRecorder(kube, namespace, INFERENCE_REPLICAS).start()
    handle = await start_manager()
    await kube.create(INFERENCE_REPLICAS, replica_body("gang", replicas=1, worker_image=slow),
                      namespace)

    async def leader_ready_worker_pulling() -> bool:
        pods = await list_pods(kube, namespace)
        leader, worker = pods.get("gang-engine-0-leader-0"), pods.get("gang-engine-0-worker-0")
        if leader is None or worker is None:
            return False
        waiting = [((c.get("state") or {}).get("waiting") or {}).get("reason")
                   for c in (worker.get("status") or {}).get("containerStatuses") or ()]
        return conditions(leader).get("ContainersReady") == "True" and any(
            r in ("ErrImagePull", "ImagePullBackOff") for r in waiting)

    await eventually(leader_ready_worker_pulling, timeout=60,
                     what="leader ready while the worker cannot pull")
    # Four more passes of the manager (requeue 1s) over the half-ready gang, every change
    # of the pods and the replica recorded meanwhile.
    passes = handle.metrics.sample("omenative_reconcile_duration_seconds_count")

    async def four_more_passes() -> bool:
        return bool(handle.metrics.sample("omenative_reconcile_duration_seconds_count")
                    >= passes + 4)

    await eventually(four_more_passes, timeout=60, what="four more reconcile passes")
    await replicas_seen.caught_up()
    before_clear = [obj for _, obj in replicas_seen.history]
    await faults.clear()

    async def both_serving() -> bool:
        pods = await list_pods(kube, namespace)
        ir = await get_replica(kube, namespace, "gang")
        return (all(gate(p) == "True" for p in pods.values()) and len(pods) == 2
                and (ir.get("status") or {}).get("readyReplicas") == 1)

    await eventually(both_serving, timeout=60, what="both pods serving once the worker pulls")
    await pods_seen.caught_up()
    await pods_seen.stop()
    await replicas_seen.stop()

    def leader_alone(pods: dict[str, JSON]) -> str | None:
        leader, worker = pods.get("gang-engine-0-leader-0"), pods.get("gang-engine-0-worker-0")
        if leader is None or gate(leader) != "True":
            return None
        if worker is not None and conditions(worker).get("ContainersReady") == "True":
            return None
        return "the leader is in rotation, its worker not ready"

    # at no moment, before or after the worker could pull, was the leader serving alone
    assert pods_seen.assert_never(leader_alone, "the gate waits for the whole gang") > 4
    ready = [(o.get("status") or {}).get("readyReplicas") for o in before_clear]
    assert not any(ready), f"readyReplicas while the worker could not pull: {ready}"


async def test_pod_group_crd_noticed_without_restart_and_created_first(
    kube: KubeClient, namespace: str, start_manager: Any, no_pod_group_crd: None,
) -> None:
    await start_manager()
    await kube.create(INFERENCE_REPLICAS, replica_body("early", replicas=1), namespace)

    async def gang_condition(name: str, status: str) -> bool:
        ir = await get_replica(kube, namespace, name)
        cond = replica_condition(ir, "GangSchedulingUnavailable")
        return cond is not None and cond["status"] == status

    await eventually(lambda: gang_condition("early", "True"), timeout=60,
                     what="GangSchedulingUnavailable=True without the CRD")
    crd_name = await apply_crd(kube, await asyncio.to_thread(pod_group_crd_file))
    try:
        await eventually(lambda: gang_condition("early", "False"), timeout=30,
                         what="GangSchedulingUnavailable=False once the CRD appears")
        recorder = await PodRecorder(kube, namespace).start()
        await kube.create(INFERENCE_REPLICAS, replica_body("late", replicas=1), namespace)

        async def ready() -> bool:
            ir = await get_replica(kube, namespace, "late")
            return (ir.get("status") or {}).get("readyReplicas") == 1

        await eventually(ready, timeout=90, what="the late replica ready")
        await recorder.caught_up()  # the checks below read its history to now
        await recorder.stop()
        group = await kube.get(pod_groups(), "late-0-1", namespace)  # {prefix}-{index}-{inc}
        assert group["spec"]["minMember"] == 2
        assert group["metadata"]["labels"]["ome.io/instance-index"] == "0"
        pod_rvs = [int(obj["metadata"]["resourceVersion"]) for kind, obj in recorder.history
                   if kind == "ADDED" and obj["metadata"]["name"].startswith("late-")]
        assert len(pod_rvs) == 2
        # resourceVersions are etcd revisions: the PodGroup (never modified since) was
        # written before either pod of its Instance.
        assert int(group["metadata"]["resourceVersion"]) < min(pod_rvs)
        pods = await list_pods(kube, namespace)
        assert pods["late-engine-0-leader-0"]["metadata"]["labels"][
            "scheduling.x-k8s.io/pod-group"] == "late-0-1"
    finally:
        await delete_crd(kube, crd_name)
    await eventually(lambda: gang_condition("late", "True"), timeout=60,
                     what="GangSchedulingUnavailable=True again once the CRD is gone")


async def test_names_too_long_are_rejected_with_a_reason(
    kube: KubeClient, namespace: str, start_manager: Any,
) -> None:
    await start_manager()
    name = "x" * 60  # pods would be x...x-engine-0-leader-0: longer than 63 characters
    await kube.create(INFERENCE_REPLICAS, replica_body(name, replicas=1), namespace)

    async def rejected() -> JSON | None:
        ir = await get_replica(kube, namespace, name)
        cond = replica_condition(ir, "Ready")
        return cond if cond and cond["status"] == "False" and cond["reason"] == "InvalidSpec" \
            else None

    cond = await eventually(rejected, timeout=30, what="Ready=False InvalidSpec")
    assert "NameTooLong" in cond["message"]
    events = await eventually(lambda: warning_events(kube, namespace, name), timeout=15,
                              what="a Warning event")
    assert any(e["reason"] == "InvalidSpec" and "NameTooLong" in e["message"] for e in events)
    assert await list_pods(kube, namespace) == {}
    ir = await get_replica(kube, namespace, name)
    assert "ome.io/ir-teardown" not in ir["metadata"].get("finalizers", [])

"""Gang mechanisms: the ``gangScheduling`` setting, Kubernetes' own Workload and PodGroup,
and one PodGroup per Instance attempt."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from sim_helpers import engine_manifest as _manifest
from sim_helpers import run_world as _run

from omenative_controller.cli import ome_output as out
from omenative_core.gang import (
    NATIVE_API_V1ALPHA2,
    NATIVE_API_V1BETA1,
    choose_mechanism,
    gang_condition,
    native_api_of,
    pod_group_name,
    workload_name,
)
from omenative_core.incremental import plan_incremental
from omenative_core.model import (
    ConfigError,
    CreateObject,
    CreatePod,
    CreatePodGroup,
    LifecycleConfig,
    Snapshot,
    parse_lifecycle_config,
)
from omenative_core.model.observed import PodGroupView
from omenative_core.model.plan import Plan
from omenative_core.model.status import InferenceReplicaStatus, InstanceStatus
from omenative_core.planner import plan
from omenative_sim.world import ClusterSpec, World

NATIVE = LifecycleConfig(gang_scheduling="Native")


def _world(manifest: dict[str, Any]) -> World:
    return World(ClusterSpec(nodes=8, gpus_per_node=2, pod_start_seconds=2,
                             pod_ready_seconds=2), manifest, config=LifecycleConfig())


def _native(snap: Snapshot, api: str = NATIVE_API_V1ALPHA2, **kw: Any) -> Snapshot:
    """The snapshot of a cluster that serves ``api`` (1.36's scheduling.k8s.io/v1alpha2
    unless told), no PodGroup CRD."""
    return attrs.evolve(snap, native_gang_api=api, pod_group_crd=False, pod_groups={},
                        config=kw.pop("config", NATIVE), **kw)


def _creates(p: Plan, kind: type) -> list[dict[str, Any]]:
    return [a.body for a in p.actions if isinstance(a, kind)]


def _condition(p: Plan, ctype: str) -> dict[str, Any]:
    status = p.status
    assert status is not None
    (cond,) = [c for c in status.conditions if c.type == ctype]
    return {"status": cond.status, "reason": cond.reason, "message": cond.message}


# ---------------------------------------------------------------------------- the setting


@pytest.mark.parametrize("value", ["Auto", "Native", "PodGroup", "None"])
def test_gang_scheduling_setting_is_read(value: str) -> None:
    assert parse_lifecycle_config({"gangScheduling": value}).gang_scheduling == value


def test_gang_scheduling_defaults_to_auto_and_a_bad_value_names_the_key() -> None:
    assert LifecycleConfig().gang_scheduling == "Auto"
    with pytest.raises(ConfigError) as err:
        parse_lifecycle_config({"gangScheduling": "Volcano"})
    assert err.value.problems == (
        "lifecycle.gangScheduling: expected one of Auto, Native, PodGroup, None, "
        "got 'Volcano'",)


@pytest.mark.parametrize(
    ("setting", "native", "crd", "scheduler", "expected"),
    [
        ("Auto", True, True, None, "Native"),
        ("Auto", True, True, "scheduler-plugins-scheduler", "PodGroup"),
        ("Auto", False, True, "scheduler-plugins-scheduler", "PodGroup"),
        ("Auto", False, True, None, "None"),  # PodGroups nobody reads are not made
        ("Auto", True, False, "my-scheduler", "None"),
        ("Auto", False, False, None, "None"),
        ("Native", True, True, "my-scheduler", "Native"),
        ("Native", False, True, None, "None"),
        ("PodGroup", True, True, None, "PodGroup"),
        ("PodGroup", True, False, None, "None"),
        ("None", True, True, None, "None"),
    ],
)
def test_mechanism_choice(setting: str, native: bool, crd: bool, scheduler: str | None,
                          expected: str) -> None:
    for api in (NATIVE_API_V1BETA1, NATIVE_API_V1ALPHA2) if native else ("",):
        got = choose_mechanism(setting, multi_pod=True, native_api=api, pod_group_crd=crd,
                               scheduler=scheduler)
        assert got == expected
        assert choose_mechanism(setting, multi_pod=False, native_api=api, pod_group_crd=crd,
                                scheduler=scheduler) == "None"


def test_auto_prefers_v1beta1_when_a_cluster_serves_both() -> None:
    assert native_api_of({NATIVE_API_V1ALPHA2, NATIVE_API_V1BETA1}) == NATIVE_API_V1BETA1
    assert native_api_of({NATIVE_API_V1ALPHA2, "podgroups.scheduling.x-k8s.io"}) == (
        NATIVE_API_V1ALPHA2)
    assert native_api_of({"podgroups.scheduling.x-k8s.io"}) == ""


def test_no_native_api_names_the_versions_and_gates_to_enable() -> None:
    status, reason, message = gang_condition("Native", multi_pod=True, native_api="",
                                             pod_group_crd=False, scheduler=None)
    assert (status, reason) == ("True", "PodGroupCRDNotInstalled")
    assert "scheduling.k8s.io/v1beta1 and scheduling.k8s.io/v1alpha2 not served" in message
    assert "GenericWorkload (1.37), --runtime-config=scheduling.k8s.io/v1beta1=true" in message
    assert "GenericWorkload and GangScheduling (1.36)" in message


# ---------------------------------------------------------------------------- native


def test_native_gang_creates_workload_then_pod_groups_then_pods() -> None:
    world = _world(_manifest(workers=3, topologyKey="nvlink.example.com/domain"))
    p = plan(_native(world.snapshot()))
    kinds = [a.kind for a in p.actions]
    assert kinds.index("CreateObject") < kinds.index("CreatePodGroup") < kinds.index("CreatePod")
    workloads = [b for b in _creates(p, CreateObject) if b["kind"] == "Workload"]
    assert len(workloads) == 1  # one per revision, not per Instance
    (workload,) = workloads
    rev_hash = workload["metadata"]["labels"]["ome.io/revision-hash"]
    assert workload["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    assert workload["metadata"]["name"] == workload_name("chat-engine", rev_hash)
    assert workload["spec"]["podGroupTemplates"] == [{
        "name": "instance",
        "schedulingPolicy": {"gang": {"minCount": 4}},
        "schedulingConstraints": {"topology": [{"key": "nvlink.example.com/domain"}]},
    }]
    groups = _creates(p, CreatePodGroup)
    assert [g["metadata"]["name"] for g in groups] == ["chat-engine-0-1", "chat-engine-1-1"]
    group = groups[0]
    assert group["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    assert group["spec"] == {
        "podGroupTemplateRef": {"workload": {
            "workloadName": f"chat-engine-{rev_hash}", "podGroupTemplateName": "instance"}},
        "schedulingPolicy": {"gang": {"minCount": 4}},
        "schedulingConstraints": {"topology": [{"key": "nvlink.example.com/domain"}]},
    }
    for pod in _creates(p, CreatePod):
        index = pod["metadata"]["labels"]["ome.io/instance-index"]
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": f"chat-engine-{index}-1"}
        assert "scheduling.x-k8s.io/pod-group" not in pod["metadata"]["labels"]
        # the PodGroup's topology constraint replaces the worker's affinity to its leader
        assert "podAffinity" not in pod["spec"].get("affinity", {})
    cond = _condition(p, "GangSchedulingUnavailable")
    assert cond["status"] == "False" and cond["reason"] == "GangSchedulingAvailable"
    assert "Native" in cond["message"] and "scheduling.k8s.io/v1alpha2" in cond["message"]


def test_v1beta1_gang_is_disrupted_whole_refers_to_its_workload_and_carries_priority() -> None:
    manifest = _manifest(workers=1, replicas=1, topologyKey="rack")
    for runner in manifest["spec"]["runners"]:
        runner["template"]["spec"]["priorityClassName"] = "inference-high"
    world = _world(manifest)
    p = plan(_native(world.snapshot(), NATIVE_API_V1BETA1))
    (workload,) = [b for b in _creates(p, CreateObject) if b["kind"] == "Workload"]
    rev_hash = workload["metadata"]["labels"]["ome.io/revision-hash"]
    gang = {
        "schedulingPolicy": {"gang": {"minCount": 2}},
        "schedulingConstraints": {"topology": [{"key": "rack"}]},
        "disruptionMode": {"all": {}},
        "priorityClassName": "inference-high",
    }
    assert workload["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert workload["spec"] == {
        "controllerRef": {"apiGroup": "ome.io", "kind": "InferenceReplica",
                          "name": "chat-engine"},
        "podGroupTemplates": [{"name": "instance", **gang}],
    }
    (group,) = _creates(p, CreatePodGroup)
    assert group["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert group["spec"] == {
        "workloadRef": {"workloadName": f"chat-engine-{rev_hash}", "templateName": "instance"},
        **gang,
    }
    cond = _condition(p, "GangSchedulingUnavailable")
    assert "scheduling.k8s.io/v1beta1 Workload and PodGroups are used" in cond["message"]


def test_native_objects_are_deleted_through_the_version_served() -> None:
    world = _world(_manifest(workers=1, replicas=1))
    snap = _native(world.snapshot(), NATIVE_API_V1BETA1, native_pod_groups={
        "chat-engine-0-7": PodGroupView(name="chat-engine-0-7", uid="old",
                                        labels={"ome.io/instance-index": "0"})})
    (delete,) = [a for a in plan(snap).actions if a.kind == "DeletePodGroup"]
    assert (delete.name, delete.api_version) == ("chat-engine-0-7", "scheduling.k8s.io/v1beta1")


def test_scheduler_plugins_pods_keep_the_leader_affinity() -> None:
    world = _world(_manifest(workers=1, replicas=1, topologyKey="rack"))
    snap = attrs.evolve(world.snapshot(), config=LifecycleConfig(gang_scheduling="PodGroup"))
    p = plan(snap)
    (worker,) = [b for b in _creates(p, CreatePod) if b["metadata"]["name"].endswith("worker-0")]
    assert worker["spec"]["affinity"]["podAffinity"]
    assert "schedulingGroup" not in worker["spec"]
    assert worker["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "chat-engine-0-1"


def _after_first_pass(world: World, snap: Snapshot) -> Snapshot:
    """Apply the first plan, then show the native objects it created as observed."""
    first = plan(snap)
    world.apply(first)
    groups = {b["metadata"]["name"]: PodGroupView(
        name=b["metadata"]["name"], uid="pg", labels=b["metadata"]["labels"],
        scheduled="False", scheduled_reason="Unschedulable",
        scheduled_message="0/2 placements are available")
        for b in _creates(first, CreatePodGroup)}
    workloads = {b["metadata"]["name"]: PodGroupView(
        name=b["metadata"]["name"], uid="wl", labels=b["metadata"]["labels"])
        for b in _creates(first, CreateObject) if b["kind"] == "Workload"}
    return _native(world.snapshot(), native_pod_groups=groups, workloads=workloads)


def test_an_unschedulable_native_gang_waits_with_its_deadline_parked() -> None:
    world = _world(_manifest(workers=1, replicas=1))
    p = plan(_after_first_pass(world, _native(world.snapshot())))
    assert p.status is not None
    (row,) = p.status.instances
    assert row.operation is not None
    assert row.operation.waiting == "PodGroupUnschedulable"
    assert row.operation.deadline is None
    assert not [a for a in p.actions if a.kind in ("CreatePodGroup", "CreateObject")]


def test_native_objects_nothing_uses_are_deleted() -> None:
    world = _world(_manifest(workers=1, replicas=1))
    snap = _native(world.snapshot(), native_pod_groups={
        "chat-engine-0-7": PodGroupView(name="chat-engine-0-7", uid="old",
                                        labels={"ome.io/instance-index": "0"}),
    }, workloads={"chat-engine-deadbeef": PodGroupView(
        name="chat-engine-deadbeef", uid="w", labels={"ome.io/revision-hash": "deadbeef"})})
    p = plan(snap)
    deleted = {(a.kind, a.name) for a in p.actions if a.kind in ("DeletePodGroup", "DeleteObject")}
    assert deleted == {("DeletePodGroup", "chat-engine-0-7"),
                      ("DeleteObject", "chat-engine-deadbeef")}


def test_no_mechanism_keeps_omes_reason_and_says_why() -> None:
    world = _world(_manifest(workers=1, replicas=1))
    snap = attrs.evolve(world.snapshot(), pod_group_crd=True, native_gang_api="",
                        config=LifecycleConfig())
    p = plan(snap)
    assert not _creates(p, CreatePodGroup)
    cond = _condition(p, "GangSchedulingUnavailable")
    assert cond["status"] == "True" and cond["reason"] == "PodGroupCRDNotInstalled"
    assert cond["message"].startswith("gang mechanism None (lifecycle.gangScheduling Auto;")
    assert "PodGroup CRD installed" in cond["message"]


# ---------------------------------------------------------------------------- per attempt


def test_a_whole_instance_restart_gets_a_fresh_pod_group_and_the_old_one_goes() -> None:
    world = _world(_manifest(replicas=1))
    _run(world, 60)
    assert set(world.pod_groups) == {"chat-engine-0-1"}
    world.fail_pod("chat-engine-engine-0-worker-0")
    _run(world, 60)
    status = world.status
    assert status is not None
    (row,) = status.instances
    assert row.phase == "Ready" and row.incarnation == 2
    assert set(world.pod_groups) == {"chat-engine-0-2"}
    assert {p.labels["scheduling.x-k8s.io/pod-group"] for p in world.pods.values()} == {
        "chat-engine-0-2"}


def test_pod_group_names_stay_valid_label_values() -> None:
    long_prefix = "x" * 70
    a, b = pod_group_name(long_prefix, 3, 1), pod_group_name(long_prefix, 3, 2)
    assert len(a) <= 63 and a.endswith("-3-1") and a != b


# ---------------------------------------------------------------------------- kubectl ome


def _pod(index: int, runner: str, *, native: str | None = None,
         label: str | None = None) -> dict[str, Any]:
    labels = {"ome.io/instance-index": str(index), "ome.io/runner": runner}
    if label:
        labels["scheduling.x-k8s.io/pod-group"] = label
    spec = {"schedulingGroup": {"podGroupName": native}} if native else {}
    return {"metadata": {"labels": labels}, "spec": spec}


def test_instance_list_wide_shows_each_instances_gang() -> None:
    pods = [_pod(0, "leader", native="demo-0-1"), _pod(0, "worker", native="demo-0-1"),
            _pod(1, "leader", label="demo-1-2"), _pod(1, "worker", label="demo-1-2"),
            _pod(2, "leader"), _pod(2, "worker"), _pod(3, "default")]
    gangs = out.gang_by_instance(pods, NATIVE_API_V1BETA1)
    assert gangs == {0: "Native/v1beta1:demo-0-1", 1: "PodGroup/v1alpha1:demo-1-2", 2: "None",
                     3: "-"}
    assert out.gang_by_instance(pods[:1], NATIVE_API_V1ALPHA2) == {0: "Native/v1alpha2:demo-0-1"}
    assert out.gang_by_instance(pods[:1]) == {0: "Native:demo-0-1"}  # not served (any more)
    status = InferenceReplicaStatus(instances=(
        InstanceStatus(index=0, incarnation=1, phase="Ready"),
        InstanceStatus(index=4, incarnation=1, phase="Pending")))
    lines = out.format_instance_table("engine", status, gangs).splitlines()
    assert lines[0].split()[-1] == "GANG"
    assert lines[1].split()[-1] == "Native/v1beta1:demo-0-1"
    assert lines[2].split()[-1] == "-"  # no pods yet
    assert "GANG" not in out.format_instance_table("engine", status)


def test_a_changed_native_pod_group_is_planned_again_not_answered_from_the_memo() -> None:
    world = _world(_manifest(workers=1, replicas=1))
    snap = _after_first_pass(world, _native(world.snapshot()))
    first, memo = plan_incremental(snap, None)
    assert first.status is not None
    assert first.status.instances[0].operation.waiting == "PodGroupUnschedulable"
    scheduled = {n: attrs.evolve(g, scheduled="True", scheduled_reason="Scheduled")
                 for n, g in snap.native_pod_groups.items()}
    again, _ = plan_incremental(attrs.evolve(snap, native_pod_groups=scheduled), memo)
    assert again.status is not None
    operation = again.status.instances[0].operation
    assert operation is not None and operation.waiting != "PodGroupUnschedulable"

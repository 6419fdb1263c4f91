"""World simulator mechanics, driven by hand-written actions (no planner), and the scenario
loader's errors. The runner loop is exercised with a tiny stand-in planner at the end."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from omenative_core.model.observed import PodView, Snapshot
from omenative_core.model.plan import (
    CreateObject,
    CreatePod,
    CreatePodGroup,
    CreateRevision,
    DeletePod,
    DeletePodGroup,
    DeleteRevision,
    Event,
    PatchPodImages,
    Plan,
    RecordAudit,
    RemoveAnnotations,
    SetFinalizer,
    SetServingGate,
    UpdateStatus,
)
from omenative_core.model.status import InferenceReplicaStatus, InstanceStatus
from omenative_core.policy import desired_instances
from omenative_sim import (
    ClusterSpec,
    ScenarioError,
    World,
    WorldError,
    merge_patch,
    migration_request_uuid,
    parse_scenario,
    pod_gpus,
    run_scenario,
)

GROUP = "scheduling.x-k8s.io/pod-group"

REPLICA: dict[str, Any] = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceReplica",
    "metadata": {"name": "m", "namespace": "default"},
    "spec": {
        "component": "engine",
        "replicas": 1,
        "runners": [
            {
                "name": "default",
                "template": {"spec": {"containers": [{"name": "ome-container", "image": "img:1"}]}},
            }
        ],
    },
}


def body(
    name: str,
    gpus: int = 8,
    *,
    group: str | None = None,
    image: str = "img:1",
    labels: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
    requests: bool = False,
) -> dict[str, Any]:
    all_labels = {"app": "t", **(labels or {})}
    if group:
        all_labels[GROUP] = group
    res_key = "requests" if requests else "limits"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": all_labels},
        "spec": {
            "readinessGates": [{"conditionType": "ome.io/serving"}],
            "containers": [
                {
                    "name": "ome-container",
                    "image": image,
                    "resources": {res_key: {"nvidia.com/gpu": gpus}} if gpus else {},
                },
                {"name": "sidecar", "image": "side:1"},
            ],
            **(spec or {}),
        },
    }


def pod_group(name: str, min_member: int) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"minMember": min_member}}


def world(**kw: Any) -> World:
    defaults: dict[str, Any] = {
        "nodes": 2,
        "gpus_per_node": 8,
        "pod_start_seconds": 10,
        "pod_ready_seconds": 5,
    }
    defaults.update(kw)
    return World(ClusterSpec(**defaults), REPLICA)


def view(w: World, name: str) -> PodView:
    for p in w.snapshot().pods:
        if p.name == name:
            return p
    raise AssertionError(f"no pod {name}")


def bound(w: World) -> dict[str, str | None]:
    return {p.name: p.node_name for p in w.snapshot().pods}


# ------------------------------------------------------------------ scheduling


def test_gpu_request_is_summed_from_requests_or_limits() -> None:
    b = body("a", 4)
    b["spec"]["containers"][1]["resources"] = {"requests": {"nvidia.com/gpu": "2"}}
    assert pod_gpus(b) == 6
    assert pod_gpus(body("r", 3, requests=True)) == 3
    assert pod_gpus(body("z", 0)) == 0


def test_scheduler_respects_gpu_capacity() -> None:
    w = world()
    w.apply([CreatePod(body=body(n, 8)) for n in ("a", "b", "c")], 0)
    nodes = bound(w)
    assert sorted(n for n in nodes.values() if n) == ["node-0", "node-1"]
    assert nodes["c"] is None
    c = view(w, "c")
    assert c.unschedulable and c.phase == "Pending"
    assert w.gpus_in_use == 16
    # zero-GPU pods always fit
    w.apply([CreatePod(body=body("router", 0))], 0)
    assert bound(w)["router"] is not None


def test_bin_packing_puts_small_pods_together() -> None:
    w = world()
    w.apply([CreatePod(body=body("a", 4)), CreatePod(body=body("b", 4))], 0)
    nodes = bound(w)
    assert nodes["a"] == nodes["b"]
    w.apply([CreatePod(body=body("c", 8))], 0)
    assert bound(w)["c"] not in (None, nodes["a"])


def test_gang_is_all_or_none_and_needs_its_pod_group() -> None:
    w = world()
    gang = [CreatePod(body=body(f"g-{i}", 8, group="pg")) for i in range(3)]
    w.apply(gang, 0)
    # no PodGroup yet: nothing is placed
    assert set(bound(w).values()) == {None}
    assert "not found" in w.pods["g-0"].sched_message
    w.apply([CreatePodGroup(body=pod_group("pg", 3))], 0)
    # 3 x 8 GPUs does not fit in 16: still none of them
    assert set(bound(w).values()) == {None}
    assert all(view(w, f"g-{i}").unschedulable for i in range(3))
    # a smaller gang that fits is placed whole
    w.apply([CreatePodGroup(body=pod_group("small", 2))], 0)
    w.apply([CreatePod(body=body(f"s-{i}", 8, group="small")) for i in range(2)], 0)
    nodes = bound(w)
    assert nodes["s-0"] and nodes["s-1"] and nodes["s-0"] != nodes["s-1"]


def test_gang_waits_for_min_member() -> None:
    w = world()
    w.apply([CreatePodGroup(body=pod_group("pg", 2)), CreatePod(body=body("l", 4, group="pg"))], 0)
    assert bound(w)["l"] is None
    assert "minMember" in w.pods["l"].sched_message
    w.apply([CreatePod(body=body("w", 4, group="pg"))], 0)
    assert bound(w)["l"] is not None and bound(w)["w"] is not None


def test_gang_scheduling_off_places_pods_one_by_one() -> None:
    w = world(gang_scheduling=False)
    w.apply([CreatePod(body=body(f"g-{i}", 8, group="pg")) for i in range(3)], 0)
    placed = [n for n in bound(w).values() if n]
    assert len(placed) == 2  # partial placement: no gang, no PodGroup needed


def test_without_the_pod_group_crd_pod_groups_are_refused() -> None:
    w = world(pod_group_crd=False)
    assert w.snapshot().pod_group_crd is False
    result = w.apply(
        [CreatePodGroup(body=pod_group("pg", 2)), CreatePod(body=body("a", 8, group="pg"))], 0
    )
    assert result.applied == 0 and result.error is not None  # stops at the first failure
    assert not w.pods
    w.apply([CreatePod(body=body(f"g-{i}", 8, group="pg")) for i in range(3)], 0)
    assert len([n for n in bound(w).values() if n]) == 2  # scheduled pod by pod


def test_node_selector_and_required_node_affinity() -> None:
    w = World(ClusterSpec(nodes=3, gpus_per_node=8, node_labels={"node-2": {"zone": "b"}}), REPLICA)
    w.apply([CreatePod(body=body("sel", 1, spec={"nodeSelector": {"zone": "b"}}))], 0)
    assert bound(w)["sel"] == "node-2"
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "kubernetes.io/hostname",
                                "operator": "NotIn",
                                "values": ["node-0", "node-2"],
                            }
                        ]
                    }
                ]
            }
        }
    }
    w.apply([CreatePod(body=body("away", 1, spec={"affinity": affinity}))], 0)
    assert bound(w)["away"] == "node-1"
    prefer = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "preference": {
                        "matchExpressions": [
                            {
                                "key": "kubernetes.io/hostname",
                                "operator": "In",
                                "values": ["node-0"],
                            }
                        ]
                    },
                }
            ]
        }
    }
    w.apply([CreatePod(body=body("pref", 8, spec={"affinity": prefer}))], 0)
    assert bound(w)["pref"] == "node-0"


def test_required_pod_affinity_keeps_a_gang_in_one_domain() -> None:
    w = World(
        ClusterSpec(
            nodes=4,
            gpus_per_node=8,
            node_labels={
                "node-0": {"rack": "a"},
                "node-1": {"rack": "a"},
                "node-2": {"rack": "b"},
                "node-3": {"rack": "b"},
            },
        ),
        REPLICA,
    )
    # fill rack a partly, so the leader's best fit is there but the gang does not fit
    w.apply([CreatePod(body=body("filler", 6))], 0)
    rack = w.nodes[bound(w)["filler"] or ""].labels["rack"]
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"role": "leader"}}, "topologyKey": "rack"}
            ]
        }
    }
    pods = [
        CreatePodGroup(body=pod_group("pg", 3)),
        CreatePod(body=body("leader", 2, group="pg", labels={"role": "leader"})),
        CreatePod(body=body("w0", 8, group="pg", spec={"affinity": affinity})),
        CreatePod(body=body("w1", 6, group="pg", spec={"affinity": affinity})),
    ]
    w.apply(pods, 0)
    nodes = bound(w)
    racks = {w.nodes[nodes[n] or ""].labels["rack"] for n in ("leader", "w0", "w1")}
    assert len(racks) == 1 and racks != {rack}


# ------------------------------------------------------------------ kubelet and gates


def test_kubelet_timing_and_serving_gate() -> None:
    w = world()
    w.apply([CreatePod(body=body("a", 8))], 0)
    a = view(w, "a")
    assert a.phase == "Pending" and a.pod_ip is not None
    assert a.conditions["PodScheduled"] == "True"
    assert [c.waiting_reason for c in a.containers] == ["ContainerCreating"] * 2
    assert w.next_event_time() == 10
    w.advance(9.9)
    assert view(w, "a").phase == "Pending"
    w.advance(10)
    a = view(w, "a")
    assert a.phase == "Running" and all(c.running for c in a.containers)
    assert not a.containers_ready
    w.advance(15)
    a = view(w, "a")
    assert a.containers_ready and not a.ready  # the gate is still unset
    assert a.condition_reasons["Ready"] == "ReadinessGatesNotReady"
    assert "a" not in w.snapshot().routed_pods
    w.apply([SetServingGate(name="a", uid=a.uid, value=True)], 15)
    a = view(w, "a")
    assert a.ready and a.serving_gate
    assert w.snapshot().routed_pods == frozenset({"a"})
    # gate False: not Ready at once, out of the endpoints one second later
    w.apply([SetServingGate(name="a", uid=a.uid, value=False)], 20)
    assert not view(w, "a").ready
    assert "a" in w.snapshot(20.5).routed_pods
    assert "a" not in w.snapshot(21).routed_pods


def test_back_in_rotation_cancels_the_endpoint_removal() -> None:
    w = world()
    w.apply([CreatePod(body=body("a", 8))], 0)
    uid = w.pods["a"].uid
    w.apply([SetServingGate(name="a", uid=uid, value=True)], 15)
    w.apply([SetServingGate(name="a", uid=uid, value=False)], 20)
    w.apply([SetServingGate(name="a", uid=uid, value=True)], 20.5)
    assert "a" in w.snapshot(25).routed_pods


def test_serving_gate_with_a_stale_uid_is_a_no_op() -> None:
    w = world()
    w.apply([CreatePod(body=body("a", 8))], 15)
    w.advance(30)
    before = w.version
    w.apply([SetServingGate(name="a", uid="someone-else", value=True)])
    assert w.version == before and not view(w, "a").ready


def test_graceful_delete_frees_gpus_after_termination() -> None:
    w = world(nodes=1)
    w.apply([CreatePod(body=body("a", 8)), CreatePod(body=body("b", 8))], 0)
    assert bound(w)["b"] is None
    uid = w.pods["a"].uid
    w.apply([DeletePod(name="a", uid=uid)], 20)
    a = view(w, "a")
    assert a.terminating and a.deletion_timestamp is not None
    assert w.gpus_in_use == 8 and bound(w)["b"] is None
    w.advance(21.9)
    assert "a" in w.pods
    w.advance(22)
    assert "a" not in w.pods
    assert bound(w)["b"] == "node-0"
    assert w.gpus_in_use == 8


def test_force_delete_removes_at_once_and_uid_mismatch_is_a_no_op() -> None:
    w = world(nodes=1)
    w.apply([CreatePod(body=body("a", 8))], 0)
    w.apply([DeletePod(name="a", uid="stale")], 1)
    assert "a" in w.pods and not w.pods["a"].terminating
    w.apply([DeletePod(name="a", uid=w.pods["a"].uid, force=True)], 1)
    assert "a" not in w.pods and w.gpus_in_use == 0
    w.apply([DeletePod(name="gone", uid="x")], 1)  # NotFound is success


def test_create_of_an_existing_name_is_already_exists() -> None:
    w = world()
    w.apply([CreatePod(body=body("a", 8))], 0)
    uid = w.pods["a"].uid
    result = w.apply([CreatePod(body=body("a", 8, image="other"))], 1)
    assert result.applied == 1 and result.changed == 0
    assert w.pods["a"].uid == uid
    # also while it terminates: the name is still taken
    w.apply([DeletePod(name="a", uid=uid)], 2)
    w.apply([CreatePod(body=body("a", 8))], 2.5)
    assert w.pods["a"].uid == uid
    w.advance(4)
    w.apply([CreatePod(body=body("a", 8))], 4)
    assert w.pods["a"].uid != uid


def test_in_place_image_patch_restarts_the_container() -> None:
    w = world()
    w.apply([CreatePod(body=body("a", 8))], 0)
    uid = w.pods["a"].uid
    w.apply([SetServingGate(name="a", uid=uid, value=True)], 15)
    assert view(w, "a").ready
    w.apply(
        [
            PatchPodImages(
                name="a",
                uid=uid,
                images={"ome-container": "img:2"},
                labels={"ome.io/revision-hash": "h2"},
            )
        ],
        20,
    )
    a = view(w, "a")
    assert not a.ready and a.images["ome-container"] == "img:2"
    assert a.labels["ome.io/revision-hash"] == "h2"
    main = next(c for c in a.containers if c.name == "ome-container")
    side = next(c for c in a.containers if c.name == "sidecar")
    assert main.restart_count == 1 and not main.ready and side.ready
    w.advance(34.9)
    assert not view(w, "a").containers_ready
    w.advance(35)
    assert view(w, "a").ready  # gate still True


# ------------------------------------------------------------------ faults


def test_fail_pod_turns_it_failed_and_keeps_its_gpus() -> None:
    w = world()
    w.apply([CreatePod(body=body("a", 8))], 0)
    w.fail_pod("a", 20)
    a = view(w, "a")
    assert a.phase == "Failed" and not a.ready
    main = next(c for c in a.containers if c.name == "ome-container")
    assert main.terminated_reason == "Error" and main.terminated_exit_code == 1
    assert w.gpus_in_use == 8
    with pytest.raises(WorldError):
        w.fail_pod("nope")


def test_fail_node_goes_unknown_then_evicts_and_never_finishes_terminating() -> None:
    w = world(nodes=1, node_monitor_grace_seconds=40, eviction_seconds=300)
    w.apply([CreatePod(body=body("a", 8))], 0)
    uid = w.pods["a"].uid
    w.apply([SetServingGate(name="a", uid=uid, value=True)], 15)
    w.fail_node("node-0", 100)
    assert w.snapshot(139).nodes["node-0"].ready is True  # not noticed yet
    assert view(w, "a").ready  # and still routed
    snap = w.snapshot(140)
    assert snap.nodes["node-0"].ready is None
    assert snap.nodes["node-0"].not_ready_since is not None
    a = view(w, "a")
    assert not a.ready and a.condition_reasons["Ready"] == "NodeNotReady"
    assert "a" not in w.snapshot(141).routed_pods
    assert view(w, "a").terminating is False
    w.advance(440)
    assert view(w, "a").terminating  # the taint manager evicted it
    w.advance(2000)
    assert "a" in w.pods  # the kubelet is gone: it never finishes
    w.apply([CreatePod(body=body("b", 8))])
    assert bound(w)["b"] is None  # no Ready node
    w.apply([DeletePod(name="a", uid=uid, force=True)])
    assert "a" not in w.pods
    with pytest.raises(WorldError):
        w.fail_node("node-7")


def test_bad_image_fails_new_pulls_only() -> None:
    w = world()
    w.apply([CreatePod(body=body("old", 8, image="img:bad"))], 0)
    w.advance(20)
    w.add_bad_image("img:bad")
    assert view(w, "old").containers_ready  # running pods are untouched
    w.apply([CreatePod(body=body("new", 8, image="img:bad"))])
    w.advance(21)
    new = view(w, "new")
    main = next(c for c in new.containers if c.name == "ome-container")
    assert main.waiting_reason == "ErrImagePull" and new.phase == "Pending"
    w.advance(26)
    main = next(c for c in view(w, "new").containers if c.name == "ome-container")
    assert main.waiting_reason == "ImagePullBackOff"
    w.advance(500)
    assert view(w, "new").phase == "Pending"
    # an in-place patch to the bad image fails to pull too
    w.apply(
        [PatchPodImages(name="old", uid=w.pods["old"].uid, images={"ome-container": "img:bad2"})]
    )
    w.add_bad_image("img:bad2")
    w.advance(520)
    main = next(c for c in view(w, "old").containers if c.name == "ome-container")
    assert main.waiting_reason in ("ErrImagePull", "ImagePullBackOff")


# ------------------------------------------------------------------ other objects


def test_status_revisions_pod_groups_and_replica_metadata() -> None:
    w = world()
    status = InferenceReplicaStatus(
        replicas=1, update_revision="m-abc", instances=(InstanceStatus(index=0),)
    )
    rv = w.replica.metadata.resource_version
    w.apply([UpdateStatus(status=status)], 0)
    assert w.status == status
    seen = w.snapshot().replica.status
    assert seen is not None and seen.update_revision == "m-abc"
    assert w.replica.metadata.resource_version != rv
    before = w.version
    assert w.apply([UpdateStatus(status=status)]).changed == 0  # an identical write
    assert w.version == before
    assert w.status_json() is not None

    w.apply(
        [
            CreateRevision(
                body={
                    "metadata": {"name": "m-abc", "labels": {"x": "y"}},
                    "revision": 3,
                    "data": {"a": 1},
                }
            )
        ]
    )
    (rev,) = w.snapshot().revisions
    assert rev.revision == 3 and rev.data == {"a": 1} and rev.uid
    w.apply([DeleteRevision(name="m-abc", uid="stale")])
    assert w.snapshot().revisions
    w.apply([DeleteRevision(name="m-abc", uid=rev.uid)])
    assert not w.snapshot().revisions

    w.apply([CreatePodGroup(body=pod_group("pg", 2))])
    assert "pg" in w.snapshot().pod_groups
    w.apply([DeletePodGroup(name="pg")])
    assert "pg" not in w.snapshot().pod_groups

    assert not w.snapshot().headless_service_exists
    w.apply(
        [
            CreateObject(
                body={
                    "kind": "Service",
                    "metadata": {"name": "m-engine-headless"},
                    "spec": {"clusterIP": "None"},
                }
            )
        ]
    )
    assert w.snapshot().headless_service_exists

    w.apply([SetFinalizer(present=True)])
    assert w.replica.metadata.finalizers == ("ome.io/ir-teardown",)
    w.apply([SetFinalizer(present=False)])
    assert w.replica.metadata.finalizers == ()

    w.set_annotation("ome.io/reset-instances", "all")
    assert w.replica.metadata.annotations["ome.io/reset-instances"] == "all"
    w.apply([RemoveAnnotations(keys=("ome.io/reset-instances",))])
    assert "ome.io/reset-instances" not in w.replica.metadata.annotations

    w.apply([RecordAudit(config_map="m-ome-migration-audit", entries=({"a": 1},))])
    assert w.audit["m-ome-migration-audit"] == [{"a": 1}]


def test_patch_bumps_generation_only_for_spec_changes() -> None:
    w = world()
    gen = w.replica.metadata.generation
    w.patch_replica({"metadata": {"labels": {"a": "b"}}})
    assert w.replica.metadata.generation == gen
    w.patch_replica({"spec": {"replicas": 3}})
    assert w.replica.metadata.generation == gen + 1 and w.replica.spec.replicas == 3


def test_merge_patch() -> None:
    assert merge_patch({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"b": None, "d": 3}, "l": [2]}) == {
        "a": {"c": 2, "d": 3},
        "l": [2],
    }


def test_snapshots_are_cached_until_something_changes() -> None:
    w = world()
    w.apply([CreatePod(body=body("a", 8))], 0)
    w.apply([CreatePod(body=body("b", 0))], 5)
    s1 = w.snapshot()
    s2 = w.snapshot()
    assert s1.pods is s2.pods and s1.nodes is s2.nodes
    w.advance(10)  # a starts, b does not
    s3 = w.snapshot()
    assert s3.pods is not s1.pods
    assert s3.pods[0] is not s1.pods[0]
    assert s3.pods[1] is s1.pods[1]  # an unchanged pod's view is reused


def test_time_only_moves_forward() -> None:
    w = world()
    w.advance(10)
    with pytest.raises(ValueError, match="forward"):
        w.advance(5)


def test_placement_is_deterministic_for_a_seed() -> None:
    def placements(seed: int) -> list[str | None]:
        w = World(ClusterSpec(nodes=8, gpus_per_node=8), REPLICA, seed=seed)
        w.apply([CreatePod(body=body(f"p{i}", 8)) for i in range(4)], 0)
        return [w.pods[f"p{i}"].node for i in range(4)]

    assert placements(1) == placements(1)
    assert len({tuple(placements(s)) for s in range(6)}) > 1


# ------------------------------------------------------------------ scenarios

SCENARIO = """
replica:
  apiVersion: ome.io/v1beta1
  kind: InferenceReplica
  metadata: {name: m}
  spec:
    component: engine
    replicas: 1
    runners:
      - name: leader
        template: {spec: {containers: [{name: ome-container, image: "img:1"}]}}
      - name: worker
        size: 1
        template: {spec: {containers: [{name: ome-container, image: "img:1"}]}}
cluster: {nodes: 2, gpusPerNode: 8}
events:
  - at: 1m
    patch: {spec: {replicas: 2}}
  - at: 2m
    failNode: node-1
  - at: 3m
    failPod: {instance: 0, runner: worker, ordinal: 0}
"""


def _scenario_with(path_edit: str, old: str, new: str) -> str:
    assert old in SCENARIO, path_edit
    return SCENARIO.replace(old, new)


def test_parse_scenario_defaults() -> None:
    sc = parse_scenario(SCENARIO)
    assert sc.cluster.nodes == 2 and sc.cluster.pod_start_seconds == 30
    assert [e.kind for e in sc.events] == ["patch", "failNode", "failPod"]
    assert sc.until == 180 + 3600
    assert sc.start == "empty"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "cluster: {nodes: 2, gpusPerNode: 8}",
            "cluster: {nodes: 2, gpuPerNode: 8}",
            "cluster.gpuPerNode: unknown key",
        ),
        (
            "cluster: {nodes: 2, gpusPerNode: 8}",
            "cluster: {nodes: two}",
            "cluster.nodes: expected an integer",
        ),
        (
            "runner: worker, ordinal: 0",
            "runner: 3, ordinal: 0",
            "events[2].failPod.runner: expected a string",
        ),
        (
            "runner: worker, ordinal: 0",
            "runner: default",
            "events[2].failPod.runner: the replica has no 'default'",
        ),
        ("failNode: node-1", "failNode: node-9", "events[1].failNode: no node 'node-9'"),
        ("at: 1m", "at: 60", "events[0].at: invalid duration"),
        ("at: 1m", "at: 1m\n    badImage: x", "events[0]: expected exactly one of"),
        ("at: 1m", "at: 1m\n    explode: true", "events[0].explode: unknown key"),
        (
            "patch: {spec: {replicas: 2}}",
            "patch: {spec: {replicas: '2'}}",
            "events[0].patch.spec.replicas",
        ),
        ("component: engine", "component: engine\n    bogus: 1\n  bogus2: 1", "yaml:"),
        ("cluster: {", "start: later\ncluster: {", "start: expected one of empty, converged"),
        (
            "cluster: {",
            "lifecycle: {requeue: {operation: 5}}\ncluster: {",
            "lifecycle.requeue.operation:",
        ),
        ("cluster: {", "lifecycle: {bogus: 1}\ncluster: {", "lifecycle: unknown key(s) bogus"),
        ("cluster: {", "until: 1m\ncluster: {", "until: 1m is before the last event"),
        ("cluster: {", "cluster: {nodes: 1}\ncluster: {", "duplicate key 'cluster'"),
        ("events:", "bogus: 1\nevents:", "bogus: unknown key"),
    ],
)
def test_bad_scenarios_name_the_key(old: str, new: str, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(SCENARIO.replace(old, new, 1))
    assert message in str(info.value)


def test_migrate_event_shape() -> None:
    text = SCENARIO.replace(
        "  - at: 3m\n    failPod: {instance: 0, runner: worker, ordinal: 0}\n",
        "  - at: 3m\n    migrate: {instance: 0, fromNode: node-0, hintTargetNodes: [node-1]}\n",
    )
    sc = parse_scenario(text)
    mig = sc.events[2].value
    assert mig.instance == 0 and mig.from_node == "node-0" and mig.hint_target_nodes == ("node-1",)
    assert migration_request_uuid(0, 2) == migration_request_uuid(0, 2)
    assert migration_request_uuid(0, 2) != migration_request_uuid(1, 2)
    with pytest.raises(ScenarioError, match=r"events\[2\]\.migrate\.fromNode: no node"):
        parse_scenario(text.replace("fromNode: node-0", "fromNode: node-5"))


# ------------------------------------------------------------------ the runner loop


def toy_planner(snap: Snapshot) -> Plan:
    """A stand-in planner: one single pod per Instance, gate on when ready, counts in status.

    Enough to drive the runner's loop without depending on the real planner's policies.
    """
    replica = snap.replica
    desired = desired_instances(replica.spec.replicas)
    image = replica.spec.runners[0].template["spec"]["containers"][0]["image"]
    rev = f"m-{image}"
    pods = {p.name: p for p in snap.pods}
    actions: list[Any] = []
    events: list[Event] = []
    rows = []
    for i in range(desired):
        name = f"m-{i}-default-0"
        pod = pods.get(name)
        if pod is None:
            b = body(
                name,
                0,
                image=image,
                labels={
                    "ome.io/instance-index": str(i),
                    "ome.io/runner": "default",
                    "ome.io/pod-ordinal": "0",
                },
            )
            actions.append(CreatePod(body=b))
            events.append(Event(type="Normal", reason="Created", message=name, instance=i))
        elif pod.phase == "Failed" and not pod.terminating:
            actions.append(DeletePod(name=name, uid=pod.uid, force=True))
        elif pod.containers_ready and not pod.serving_gate:
            actions.append(SetServingGate(name=name, uid=pod.uid, value=True))
        ready = pod is not None and pod.ready
        rows.append(
            InstanceStatus(
                index=i,
                phase="Ready" if ready else "Creating",
                running_revision=rev if ready else "",
            )
        )
    n_ready = sum(1 for r in rows if r.phase == "Ready")
    status = InferenceReplicaStatus(
        observed_generation=replica.metadata.generation,
        replicas=desired,
        ready_replicas=n_ready,
        serving_replicas=n_ready,
        updated_replicas=n_ready,
        update_revision=rev,
        current_revision=rev,
        instances=tuple(rows),
    )
    if status != replica.status:
        actions.insert(0, UpdateStatus(status=status))
    pending = any(r.phase != "Ready" for r in rows)
    return Plan(
        actions=tuple(actions),
        status=status,
        events=tuple(events),
        requeue_after=timedelta(seconds=5) if pending else None,
    )


TOY = """
replica:
  apiVersion: ome.io/v1beta1
  kind: InferenceReplica
  metadata: {name: m}
  spec:
    component: router
    replicas: 1
    runners:
      - name: default
        template: {spec: {containers: [{name: ome-container, image: "img:1"}]}}
cluster: {nodes: 1, gpusPerNode: 8, podStartSeconds: 10, podReadySeconds: 5}
events:
  - at: 0s
    patch: {spec: {replicas: 2}}
  - at: 1m
    failPod: {instance: 1}
until: 5m
"""


def test_runner_records_timeline_events_and_convergence() -> None:
    result = run_scenario(parse_scenario(TOY), planner=toy_planner).to_json()
    timeline = result["timeline"]
    # events at 0s apply before the first plan: two Instances from the start
    assert timeline[0]["t"] == 0 and timeline[0]["replicas"] == 2 and timeline[0]["pods"] == 2
    assert timeline[-1]["t"] == 300
    assert any(s["readyReplicas"] == 2 for s in timeline)
    assert result["converged"] is True
    # the failed pod is recreated at 60s and ready 15s later
    assert result["convergedAtSeconds"] == 75
    assert result["summary"]["peakPods"] == 2
    assert result["summary"]["minServingReplicas"] == 1
    kinds = [(e["source"], e["reason"]) for e in result["events"]]
    assert ("scenario", "patch") in kinds and ("scenario", "failPod") in kinds
    assert ("planner", "Created") in kinds


def test_runner_converged_start_and_bad_event_target() -> None:
    text = TOY.replace("start:", "").replace("cluster:", "start: converged\ncluster:", 1)
    result = run_scenario(parse_scenario(text), planner=toy_planner).to_json()
    first = result["timeline"][0]
    assert first["t"] == 0 and first["readyReplicas"] == 1  # ready before the clock starts
    assert not any(e["reason"] == "Created" and e["t"] < 0 for e in result["events"])
    bad = TOY.replace("failPod: {instance: 1}", "failPod: {instance: 7}")
    with pytest.raises(ScenarioError, match=r"events\[1\]\.failPod: no pod of instance 7"):
        run_scenario(parse_scenario(bad), planner=toy_planner)


def test_runner_reports_a_stall_when_not_converged() -> None:
    text = TOY.replace("events:", "events:\n  - at: 30s\n    badImage: img:1")
    result = run_scenario(parse_scenario(text), planner=toy_planner).to_json()
    # the pod killed at 1m is recreated and its image no longer pulls
    assert result["converged"] is False and result["convergedAtSeconds"] is None
    assert "gate" in result["stall"]


def test_runner_is_deterministic() -> None:
    a = run_scenario(parse_scenario(TOY), seed=3, planner=toy_planner).to_json()
    b = run_scenario(parse_scenario(TOY), seed=3, planner=toy_planner).to_json()
    assert a == b


def test_migrate_event_adds_the_request_annotation() -> None:
    import json

    seen: dict[str, str] = {}

    def recording(snap: Snapshot) -> Plan:
        seen.update(snap.replica.metadata.annotations)
        return toy_planner(snap)

    text = TOY.replace(
        "failPod: {instance: 1}",
        "migrate: {instance: 1, fromNode: node-0, hintTargetNodes: [node-0]}",
    )
    run_scenario(parse_scenario(text), seed=5, planner=recording)
    key = f"ome.io/migration-request-v1-{migration_request_uuid(5, 1)}"
    assert json.loads(seen[key]) == {
        "schemaVersion": "v1",
        "instance": 1,
        "from_node": "node-0",
        "hint_target_nodes": ["node-0"],
        "reason": "simulated",
        "requested_by": "omenative-simulate",
    }
    bad = TOY.replace("failPod: {instance: 1}", "migrate: {instance: 9}")
    with pytest.raises(ScenarioError, match=r"events\[1\]\.migrate\.instance: no Instance 9"):
        run_scenario(parse_scenario(bad), planner=toy_planner)

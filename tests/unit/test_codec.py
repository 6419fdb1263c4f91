"""The JSON codec on real-looking objects: manifests, statuses, and the cluster's pods/nodes.

What users see: a manifest written for OME loads with the values they wrote; a typo in it
is reported with the JSON path and the bad value; a status we write reads back; a corrupt
columnar status is refused with the reason OME would give.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from omenative_core.codec import CodecError, spec_from_json, spec_to_json
from omenative_core.model.spec import LifecycleSpec, Runner
from omenative_core.model.status import (
    InferenceReplicaStatus,
    InstanceOperation,
    InstanceStatus,
)
from omenative_core.status import ColumnarDecodeError, encode_columns
from omenative_core.status.wire import (
    replica_from_json,
    replica_to_json,
    status_from_json,
    status_to_json,
)
from omenative_core.views import (
    node_view_from_json,
    pod_group_view_from_json,
    pod_view_from_json,
    revision_view_from_json,
    routed_pods_from_endpoint_slices,
)

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)

MANIFEST: dict[str, Any] = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceReplica",
    "metadata": {
        "name": "llama-engine",
        "namespace": "serving",
        "uid": "0b6c7c1e-1111-4a5b-9c3d-2e8f00000001",
        "generation": 7,
        "resourceVersion": "123456",
        "labels": {"ome.io/inferenceservice": "llama", "component": "engine"},
        "annotations": {"ome.io/parent-generation": "3"},
        "finalizers": ["ome.io/ir-teardown"],
        "creationTimestamp": "2026-03-01T12:00:00Z",
        "managedFields": [{"manager": "kubectl"}],  # not modelled: ignored
    },
    "spec": {
        "parentRef": {"name": "llama"},
        "component": "engine",
        "replicas": 4,
        "minReadySeconds": 30,
        "topologyKey": "cloud.provider/rack",
        "pairingProtocol": "nixl-v1",
        "runners": [
            {
                "name": "leader",
                "size": 1,
                "template": {
                    "metadata": {"labels": {"ome.io/runner": "leader"}},
                    "spec": {"containers": [{"name": "ome-container", "image": "vllm:0.9"}]},
                },
            },
            {
                "name": "worker",
                "size": 3,
                "template": {
                    "spec": {"containers": [{"name": "ome-container", "image": "vllm:0.9"}]}
                },
            },
        ],
        "lifecycle": {
            "restartPolicy": "RecreateInstanceOnPodRestart",
            "readyPolicy": "AllPodReady",
            "instanceReadyTimeout": "45m",
            "migrationPolicy": {"mode": "Auto"},
            "updateStrategy": {
                "type": "SurgeThenDrain",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1, "partition": 0},
                "inPlaceUpdateStrategy": {
                    "gracePeriodSeconds": 30,
                    "markNotReadyDuringLifecycle": False,
                },
            },
        },
        "pacing": {
            "partition": 2,
            "maxUnavailable": "10%",
            "rollbackToRevision": "llama-engine-5d8f",
        },
        "paused": True,
        "pauseMode": "Freeze",
        "revisionHistoryLimit": 5,
        # OME fields the core does not model: ignored, not an error
        "autoscaler": {"class": "hpa"},
        "placementReplicaLimit": 8,
        "modelRef": {"name": "llama-3"},
    },
}


def test_a_realistic_manifest_loads_with_the_values_written() -> None:
    replica = replica_from_json(MANIFEST)
    meta, spec = replica.metadata, replica.spec
    assert (meta.name, meta.namespace, meta.generation, meta.resource_version) == (
        "llama-engine",
        "serving",
        7,
        "123456",
    )
    assert meta.labels["component"] == "engine"
    assert meta.finalizers == ("ome.io/ir-teardown",)
    assert meta.creation_timestamp == T0
    assert meta.deletion_timestamp is None
    assert replica.prefix == "llama-engine" and replica.isvc_name == "llama"
    assert spec.replicas == 4 and spec.min_ready_seconds == 30
    assert spec.topology_key == "cloud.provider/rack"
    assert spec.pairing_protocol == "nixl-v1"
    assert [(r.name, r.size) for r in spec.runners] == [("leader", 1), ("worker", 3)]
    assert spec.runners[0].template["spec"]["containers"][0]["image"] == "vllm:0.9"
    lc = spec.lifecycle
    assert isinstance(lc, LifecycleSpec)
    assert lc.instance_ready_timeout == timedelta(minutes=45)
    assert lc.restart_policy == "RecreateInstanceOnPodRestart"
    assert lc.migration_policy is not None and lc.migration_policy.mode == "Auto"
    us = lc.update_strategy
    assert us is not None and us.type == "SurgeThenDrain"
    assert us.rolling_update is not None
    assert (us.rolling_update.max_surge, us.rolling_update.max_unavailable) == ("25%", 1)
    assert us.rolling_update.partition == 0
    assert us.in_place_update_strategy is not None
    assert us.in_place_update_strategy.mark_not_ready_during_lifecycle is False
    assert spec.pacing is not None
    assert (spec.pacing.partition, spec.pacing.max_unavailable) == (2, "10%")
    assert spec.pacing.rollback_to_revision == "llama-engine-5d8f"
    assert spec.paused is True and spec.pause_mode == "Freeze"
    assert spec.revision_history_limit == 5
    assert replica.status is None


def test_written_spec_uses_ome_names_and_go_durations() -> None:
    out = spec_to_json(replica_from_json(MANIFEST).spec)
    assert out["lifecycle"]["instanceReadyTimeout"] == "45m0s"
    assert out["lifecycle"]["updateStrategy"]["inPlaceUpdateStrategy"] == {
        "gracePeriodSeconds": 30,
        "markNotReadyDuringLifecycle": False,
    }
    assert out["parentRef"] == {"name": "llama"}
    assert "autoscaler" not in out  # not modelled, so not written back
    assert "topologySpread" not in out  # None is omitted
    assert spec_from_json(json.loads(json.dumps(out))) == replica_from_json(MANIFEST).spec


def test_replica_to_json_writes_api_version_kind_and_rfc3339_seconds() -> None:
    replica = replica_from_json(MANIFEST)
    out = replica_to_json(replica)
    assert (out["apiVersion"], out["kind"]) == ("ome.io/v1beta1", "InferenceReplica")
    assert out["metadata"]["creationTimestamp"] == "2026-03-01T12:00:00Z"
    assert "deletionTimestamp" not in out["metadata"]
    assert "status" not in out


def test_a_minimal_spec_gets_the_model_defaults() -> None:
    spec = spec_from_json({"component": "router", "runners": [{"name": "default"}]})
    assert spec.runners == (Runner(name="default", size=1, template={}),)
    assert spec.replicas is None and spec.lifecycle is None and spec.paused is False


def test_zero_duration_is_kept_so_policy_can_treat_it_as_unset() -> None:
    spec = spec_from_json({"lifecycle": {"instanceReadyTimeout": "0s"}})
    assert spec.lifecycle is not None
    assert spec.lifecycle.instance_ready_timeout == timedelta(0)


def _broken(path: list[str | int], value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(MANIFEST)
    node: Any = obj
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return obj


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            ["spec", "lifecycle", "instanceReadyTimeout"],
            "30",
            "spec.lifecycle.instanceReadyTimeout: invalid duration '30': expected a number "
            "with a unit",
        ),
        (
            ["spec", "lifecycle", "instanceReadyTimeout"],
            30,
            "spec.lifecycle.instanceReadyTimeout: invalid duration 30: expected a string",
        ),
        (["spec", "replicas"], "4", "spec.replicas: expected an integer, got '4'"),
        (["spec", "replicas"], 4.0, "spec.replicas: expected an integer, got 4.0"),
        (
            ["spec", "runners", 1, "size"],
            True,
            "spec.runners[1].size: expected an integer, got True",
        ),
        (["spec", "runners", 0, "name"], None, "spec.runners[0].name: expected a string, got None"),
        (["spec", "runners"], {"name": "leader"}, "spec.runners: expected a list, got {'name'"),
        (["spec", "paused"], "true", "spec.paused: expected true or false, got 'true'"),
        (
            ["spec", "lifecycle", "updateStrategy", "rollingUpdate", "maxSurge"],
            2.5,
            "spec.lifecycle.updateStrategy.rollingUpdate.maxSurge: expected an integer or a "
            "string such as '25%', got 2.5",
        ),
        (["spec", "pacing"], "2", "spec.pacing: expected an object, got '2'"),
        (["spec", "runners", 0, "template"], [], "spec.runners[0].template: expected an object"),
        (
            ["metadata", "labels", "component"],
            3,
            "metadata.labels['component']: expected a string, got 3",
        ),
        (
            ["metadata", "creationTimestamp"],
            "yesterday",
            "metadata.creationTimestamp: invalid timestamp 'yesterday': expected RFC 3339",
        ),
        (
            ["metadata", "creationTimestamp"],
            "2026-03-01T12:00:00",
            "metadata.creationTimestamp: invalid timestamp '2026-03-01T12:00:00': RFC 3339 "
            "needs a zone",
        ),
    ],
)
def test_bad_values_are_reported_with_the_json_path(
    path: list[str | int], value: Any, message: str
) -> None:
    with pytest.raises(CodecError) as info:
        replica_from_json(_broken(path, value))
    assert str(info.value).startswith(message)
    assert not isinstance(info.value, BaseExceptionGroup)  # never a cattrs ExceptionGroup
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_a_missing_required_field_is_named() -> None:
    obj = copy.deepcopy(MANIFEST)
    del obj["spec"]["runners"][1]["name"]
    with pytest.raises(CodecError, match=r"^spec\.runners\[1\]\.name: required field missing$"):
        replica_from_json(obj)
    with pytest.raises(CodecError, match=r"^metadata\.name: required field missing$"):
        replica_from_json({"metadata": {}, "spec": {}})
    with pytest.raises(CodecError, match=r"^spec: required field missing$"):
        replica_from_json({"metadata": {"name": "x"}})


def test_every_problem_is_listed_not_just_the_first() -> None:
    obj = _broken(["spec", "replicas"], "4")
    obj["spec"]["lifecycle"]["instanceReadyTimeout"] = "soon"
    with pytest.raises(CodecError) as info:
        replica_from_json(obj)
    assert sorted(info.value.errors) == [
        "spec.lifecycle.instanceReadyTimeout: invalid duration 'soon': expected a number "
        "with a unit (ns, us, ms, s, m, h), such as '90s' or '1h30m'",
        "spec.replicas: expected an integer, got '4'",
    ]


# ------------------------------------------------------------------------------- status


def _fleet(n: int) -> InferenceReplicaStatus:
    rows = tuple(
        InstanceStatus(
            index=i,
            phase="Ready",
            running_revision="llama-engine-5d8f",
            target_revision="llama-engine-5d8f",
            pod_count=4,
            serving_pod_count=4,
            available_pod_count=4,
            admitted=True,
            ready_since=T0 if i == 0 else None,
        )
        for i in range(n)
    )
    return InferenceReplicaStatus(replicas=n, ready_replicas=n, instances=rows)


def test_a_large_uniform_fleet_is_written_as_columns_and_read_back() -> None:
    status = _fleet(1000)
    out = status_to_json(status)
    assert out["instanceStatusEncoding"] == "ColumnarV2"
    assert "instanceStatuses" not in out
    columns = out["instanceStatusColumns"]
    assert columns["members"] == "0-999"
    assert columns["phases"] == [{"value": "Ready", "indexes": "0-999"}]
    assert columns["entries"] == [{"index": 0, "readySince": "2026-03-01T12:00:00Z"}]
    assert status_from_json(json.loads(json.dumps(out))) == status


def test_dense_v1_writes_the_row_list() -> None:
    out = status_to_json(_fleet(3), encoding="DenseV1")
    assert "instanceStatusEncoding" not in out
    assert [row["index"] for row in out["instanceStatuses"]] == [0, 1, 2]
    assert out["instanceStatuses"][0]["readySince"] == "2026-03-01T12:00:00Z"


def test_an_empty_status_has_no_rows_at_all() -> None:
    out = status_to_json(InferenceReplicaStatus())
    assert not {"instanceStatuses", "instanceStatusEncoding", "instanceStatusColumns"} & set(out)
    assert status_from_json(out) == InferenceReplicaStatus()


def test_operation_fields_keep_ome_spelling() -> None:
    op = InstanceOperation(
        id="op-1",
        type="Migrate",
        request_uuid="9f0c",
        deadline=T0,
        replaces=3,
        unschedulable_since=T0,
    )
    status = InferenceReplicaStatus(instances=(InstanceStatus(index=0, operation=op),))
    row = status_to_json(status, encoding="DenseV1")["instanceStatuses"][0]
    assert row["operation"]["requestUUID"] == "9f0c"
    assert row["operation"]["replaces"] == 3
    assert row["operation"]["unschedulableSince"] == "2026-03-01T12:00:00Z"
    assert "surgeIndex" not in row["operation"]


def test_unknown_status_fields_are_ignored() -> None:
    status = status_from_json({"replicas": 2, "placementObservedGeneration": 4})
    assert status.replicas == 2


def test_dense_rows_must_have_distinct_indexes() -> None:
    with pytest.raises(
        CodecError, match=r"status\.instanceStatuses\[1\]\.index: duplicate index 0"
    ):
        status_from_json({"instanceStatuses": [{"index": 0}, {"index": 0}]})


def test_the_cel_rules_on_the_encoding_are_enforced() -> None:
    cols = encode_columns(_fleet(2).instances)
    with pytest.raises(ColumnarDecodeError, match="requires instanceStatusEncoding") as info:
        status_from_json({"instanceStatusColumns": cols})
    assert info.value.reason == "representation_union"
    with pytest.raises(ColumnarDecodeError, match="required with instanceStatusEncoding"):
        status_from_json({"instanceStatusEncoding": "ColumnarV2"})
    with pytest.raises(ColumnarDecodeError, match="not allowed with instanceStatusEncoding"):
        status_from_json(
            {
                "instanceStatusEncoding": "ColumnarV2",
                "instanceStatusColumns": cols,
                "instanceStatuses": [{"index": 0}],
            }
        )
    with pytest.raises(ColumnarDecodeError, match="expected 'ColumnarV2'"):
        status_from_json({"instanceStatusEncoding": "DenseV2"})


BASE: dict[str, Any] = {
    "members": "0-4",
    "phases": [
        {"value": "Pending", "indexes": "0-1"},
        {"value": "Ready", "indexes": "2-4"},
    ],
}


@pytest.mark.parametrize(
    ("change", "reason", "message"),
    [
        (
            {"members": "0-99999"},
            "cardinality_limit",
            "members: 100000 Instances exceed maxDecodedInstances (20000)",
        ),
        (
            {"members": "0-2,3-4"},
            "canonical_order",
            "members: invalid index set '0-2,3-4': term '3-4' is adjacent",
        ),
        ({"admitted": "1,1"}, "range_order", "admitted: invalid index set '1,1'"),
        (
            {
                "phases": [
                    {"value": "Pending", "indexes": "0"},
                    {"value": "Ready", "indexes": "2-4"},
                ]
            },
            "coverage",
            "phases: members in no phase group: [1]",
        ),
        (
            {
                "phases": [
                    {"value": "Pending", "indexes": "0-2"},
                    {"value": "Ready", "indexes": "2-4"},
                ]
            },
            "coverage",
            "phases[1].indexes: index 2 is already in the group with value 'Pending'",
        ),
        (
            {
                "phases": [
                    {"value": "Pending", "indexes": "0-1"},
                    {"value": "Ready", "indexes": "2-5"},
                ]
            },
            "coverage",
            "phases[1].indexes: index 5 is not a member",
        ),
        (
            {
                "phases": [
                    {"value": "Ready", "indexes": "2-4"},
                    {"value": "Pending", "indexes": "0-1"},
                ]
            },
            "canonical_order",
            "phases[1].value: 'Pending' is out of order",
        ),
        (
            {"incarnations": [{"value": 0, "indexes": "0"}]},
            "value_domain",
            "incarnations[0].value: must not be 0",
        ),
        (
            {"podCounts": [{"value": -1, "indexes": "0"}]},
            "value_domain",
            "podCounts[0].value: must be between 1 and 2147483647",
        ),
        (
            {"podCounts": [{"value": "2", "indexes": "0"}]},
            "value_domain",
            "podCounts[0].value: expected an integer",
        ),
        (
            {"runningRevisions": [{"value": "", "indexes": "0"}]},
            "value_domain",
            "runningRevisions[0].value: must not be empty",
        ),
        (
            {"servingPodCounts": [{"value": 2, "indexes": "0-3"}, {"value": 1, "indexes": "4"}]},
            "canonical_order",
            "servingPodCounts[1].value: 1 is out of order",
        ),
        (
            {"targetRevisions": [{"value": "a", "indexes": "0"}, {"value": "b", "indexes": "0"}]},
            "coverage",
            "targetRevisions[1].indexes: index 0 is already in the group with value 'a'",
        ),
        (
            {"entries": [{"index": 1, "announced": ["a@1"]}, {"index": 1, "announced": ["b@1"]}]},
            "coverage",
            "entries[1].index: index 1 has a second entry",
        ),
        (
            {"entries": [{"index": 7, "announced": ["a@1"]}]},
            "coverage",
            "entries[0].index: index 7 is not a member",
        ),
        ({"entries": [{"index": 1}]}, "coverage", "entries[0]: an entry needs at least one record"),
        (
            {
                "entries": [
                    {"index": 1, "operation": {"id": "x", "type": "Create", "deadline": "soon"}}
                ]
            },
            "value_domain",
            "entries[0].operation.deadline: invalid timestamp 'soon'",
        ),
        ({"rowOrder": [4, 3, 2, 1]}, "coverage", "rowOrder: has 4 indexes for 5 members"),
        ({"rowOrder": [4, 3, 2, 1, 1]}, "coverage", "rowOrder[4]: index 1 appears twice"),
        ({"phases": None}, "coverage", "phases: required field missing"),
    ],
)
def test_corrupt_columns_are_refused_with_ome_reasons(
    change: dict[str, Any], reason: str, message: str
) -> None:
    obj = {"instanceStatusEncoding": "ColumnarV2", "instanceStatusColumns": {**BASE, **change}}
    with pytest.raises(ColumnarDecodeError) as info:
        status_from_json(obj)
    assert info.value.reason == reason
    assert str(info.value).startswith(f"status.instanceStatusColumns.{message}")


def test_the_decode_bound_is_configurable() -> None:
    obj = {"instanceStatusEncoding": "ColumnarV2", "instanceStatusColumns": BASE}
    assert len(status_from_json(obj, max_decoded=5).instances) == 5
    with pytest.raises(ColumnarDecodeError) as info:
        status_from_json(obj, max_decoded=4)
    assert info.value.reason == "cardinality_limit"


def test_rows_not_in_a_group_take_the_column_default() -> None:
    rows = status_from_json(
        {"instanceStatusEncoding": "ColumnarV2", "instanceStatusColumns": BASE}
    ).instances
    assert rows[0] == InstanceStatus(index=0, incarnation=0, phase="Pending")
    assert [r.phase for r in rows] == ["Pending", "Pending", "Ready", "Ready", "Ready"]


# ------------------------------------------------------------------------ observed views

POD: dict[str, Any] = {
    "metadata": {
        "name": "llama-engine-0-leader-0",
        "uid": "pod-uid-1",
        "labels": {"ome.io/instance-index": "0", "ome.io/runner": "leader"},
        "annotations": {"internal.ome.io/in-place-image-transition": "vllm:1.0"},
        "creationTimestamp": "2026-03-01T12:00:00Z",
        "deletionTimestamp": "2026-03-01T12:10:00Z",
    },
    "spec": {
        "nodeName": "gpu-node-7",
        "containers": [
            {"name": "ome-container", "image": "vllm:0.9"},
            {"name": "sidecar", "image": "envoy:1.30"},
        ],
        "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
    },
    "status": {
        "phase": "Running",
        "podIP": "10.1.2.3",
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "ContainersReady", "status": "False", "reason": "ContainersNotReady"},
            {"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
            {"type": "ome.io/serving", "status": "True"},
        ],
        "containerStatuses": [
            {
                "name": "ome-container",
                "image": "vllm:0.9",
                "ready": False,
                "restartCount": 4,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
            },
            {
                "name": "sidecar",
                "image": "envoy:1.30",
                "ready": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": "2026-03-01T12:00:05Z"}},
            },
        ],
    },
}


def test_pod_json_becomes_the_view_the_planner_reads() -> None:
    pod = pod_view_from_json(POD)
    assert (pod.name, pod.uid, pod.node_name, pod.phase) == (
        "llama-engine-0-leader-0",
        "pod-uid-1",
        "gpu-node-7",
        "Running",
    )
    assert pod.labels["ome.io/runner"] == "leader"
    assert pod.annotations == {"internal.ome.io/in-place-image-transition": "vllm:1.0"}
    assert pod.conditions == {
        "PodScheduled": "True",
        "ContainersReady": "False",
        "Ready": "False",
        "ome.io/serving": "True",
    }
    assert pod.condition_reasons == {
        "ContainersReady": "ContainersNotReady",
        "Ready": "ContainersNotReady",
    }
    assert pod.serving_gate and not pod.ready and not pod.containers_ready
    assert pod.images == {"ome-container": "vllm:0.9", "sidecar": "envoy:1.30"}
    assert pod.scheduling_gates == ("kueue.x-k8s.io/admission",)
    assert pod.pod_ip == "10.1.2.3"
    assert pod.creation_timestamp == T0
    assert pod.deletion_timestamp == T0 + timedelta(minutes=10) and pod.terminating
    main, sidecar = pod.containers
    assert main.name == "ome-container" and main.restart_count == 4 and not main.ready
    assert (main.waiting_reason, main.waiting_message) == ("CrashLoopBackOff", "back-off 40s")
    assert (main.terminated_reason, main.terminated_exit_code) == ("OOMKilled", 137)
    assert not main.running
    assert sidecar.running and sidecar.ready and sidecar.waiting_reason is None
    assert sidecar.terminated_reason is None and sidecar.terminated_exit_code is None


def test_current_termination_wins_over_last_state() -> None:
    pod = copy.deepcopy(POD)
    pod["status"]["containerStatuses"][0]["state"] = {
        "terminated": {"reason": "Error", "exitCode": 1}
    }
    main = pod_view_from_json(pod).containers[0]
    assert (main.terminated_reason, main.terminated_exit_code) == ("Error", 1)
    assert main.waiting_reason is None


def test_a_fresh_pending_pod_has_empty_fields() -> None:
    pod = pod_view_from_json(
        {
            "metadata": {"name": "p", "uid": "u"},
            "status": {
                "phase": "Pending",
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
                ],
            },
        }
    )
    assert pod.node_name is None and pod.pod_ip is None and pod.containers == ()
    assert pod.labels == {} and pod.scheduling_gates == ()
    assert pod.unschedulable


@pytest.mark.parametrize(
    ("ready", "expected"),
    [("True", True), ("False", False), ("Unknown", None), (None, None)],
)
def test_node_ready_condition(ready: str | None, expected: bool | None) -> None:
    conditions = [{"type": "MemoryPressure", "status": "False"}]
    if ready is not None:
        conditions.append(
            {"type": "Ready", "status": ready, "lastTransitionTime": "2026-03-01T12:00:00Z"}
        )
    node = node_view_from_json(
        {
            "metadata": {"name": "gpu-node-7", "labels": {"zone": "a"}},
            "spec": {"unschedulable": True},
            "status": {"conditions": conditions},
        }
    )
    assert node.name == "gpu-node-7" and node.labels == {"zone": "a"} and node.unschedulable
    assert node.ready is expected
    assert node.not_ready_since == (T0 if ready in ("False", "Unknown") else None)


def test_node_without_spec_is_schedulable() -> None:
    assert node_view_from_json({"metadata": {"name": "n"}}).unschedulable is False


def test_pod_group_and_revision_views() -> None:
    group = pod_group_view_from_json(
        {
            "metadata": {
                "name": "llama-engine-0",
                "uid": "g1",
                "labels": {"ome.io/instance-index": "0"},
                "deletionTimestamp": "2026-03-01T12:00:00Z",
            },
            "spec": {"minMember": 4},
        }
    )
    assert (group.name, group.uid, group.deleting) == ("llama-engine-0", "g1", True)
    assert group.labels == {"ome.io/instance-index": "0"}
    assert not pod_group_view_from_json({"metadata": {"name": "g"}}).deleting

    revision = revision_view_from_json(
        {
            "metadata": {"name": "llama-engine-5d8f", "uid": "r1", "labels": {"a": "b"}},
            "revision": 3,
            "data": {"runners": [{"name": "default"}]},
        }
    )
    assert (revision.name, revision.uid, revision.revision) == ("llama-engine-5d8f", "r1", 3)
    assert revision.data == {"runners": [{"name": "default"}]}
    assert revision.labels == {"a": "b"}


def test_routed_pods_are_the_ready_pod_endpoints() -> None:
    slices = [
        {
            "endpoints": [
                {"targetRef": {"kind": "Pod", "name": "a"}, "conditions": {"ready": True}},
                {"targetRef": {"kind": "Pod", "name": "b"}, "conditions": {}},  # nil = ready
                {"targetRef": {"kind": "Pod", "name": "c"}},
                {
                    "targetRef": {"kind": "Pod", "name": "draining"},
                    "conditions": {"ready": False, "serving": True, "terminating": True},
                },
                {"targetRef": {"kind": "Pod", "name": "d"}, "conditions": {"ready": False}},
                {
                    # publishNotReadyAddresses: ready stays true, serving says it left
                    "targetRef": {"kind": "Pod", "name": "gated-off"},
                    "conditions": {"ready": True, "serving": False},
                },
                {"conditions": {"ready": True}},  # no targetRef
                {"targetRef": {"kind": "Node", "name": "node-1"}},
            ]
        },
        {"endpoints": [{"targetRef": {"name": "e"}}]},
        {"endpoints": None},
        {},
    ]
    assert routed_pods_from_endpoint_slices(slices) == frozenset({"a", "b", "c", "e"})

"""Admission: each of OME's rejection reasons, and what passes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from omenative_core.service import (
    Rejection,
    isvc_from_json,
    isvc_warnings,
    runtime_from_json,
    validate_isvc,
    validate_isvc_partitions,
    validate_standalone_replica,
)
from omenative_core.service.migration_request import MigrationTarget, migration_request_problem
from omenative_core.service.validate_replica import (
    replica_warnings,
    validate_replica_annotations,
)

UUID = "0b6e8f43-3c1d-4a0e-9f1a-2b3c4d5e6f70"
KEY = f"ome.io/migration-request-v1-{UUID}"
LW = {"leader": {}, "worker": {"size": 1}}


def isvc(spec: dict[str, Any], annotations: dict[str, str] | None = None) -> Any:
    meta: dict[str, Any] = {"name": "chat", "namespace": "prod"}
    if annotations:
        meta["annotations"] = annotations
    return isvc_from_json({"metadata": meta, "spec": spec})


def reasons(rejections: list[Rejection]) -> list[str]:
    return [r.reason for r in rejections]


def test_a_plain_omenative_service_is_admitted() -> None:
    service = isvc(
        {
            "deploymentMode": "OMENative",
            "engine": {**LW, "minReplicas": 2, "maxReplicas": 4},
            "decoder": LW,
            "router": {},
        }
    )
    assert validate_isvc(service) == []


# ---------------------------------------------------------------------------- modes


def test_engine_and_decoder_modes_must_match_when_either_is_omenative() -> None:
    service = isvc(
        {"engine": {"annotations": {"ome.io/deploymentMode": "OMENative"}}, "decoder": {}}
    )
    (rej,) = validate_isvc(service)
    assert rej.reason == "InvalidDeploymentModeCombination"
    assert rej.message == (
        'InvalidDeploymentModeCombination: engine deploymentMode="OMENative" does not match '
        'decoder deploymentMode=""; when either is OMENative, both must use the same value'
    )
    assert rej.field == "spec.decoder"


def test_mode_combination_reads_the_isvc_not_the_runtime() -> None:
    service = isvc(
        {
            "engine": {"annotations": {"ome.io/deploymentMode": "OMENative"}},
            "decoder": {"annotations": {"ome.io/deploymentMode": "OMENative"}},
        }
    )
    rt = runtime_from_json(
        {
            "metadata": {"name": "rt"},
            "spec": {"decoderConfig": {"annotations": {"ome.io/deploymentMode": "MultiNode"}}},
        }
    )
    assert validate_isvc(service, runtime=rt) == []
    mixed = isvc(
        {
            "engine": {"annotations": {"ome.io/deploymentMode": "MultiNode"}},
            "decoder": {"annotations": {"ome.io/deploymentMode": "RawDeployment"}},
        }
    )
    assert validate_isvc(mixed) == []  # neither is OMENative


def test_spec_mode_counts_for_both() -> None:
    service = isvc(
        {
            "deploymentMode": "OMENative",
            "engine": {},
            "decoder": {"annotations": {"ome.io/deploymentMode": "MultiNode"}},
        }
    )
    assert reasons(validate_isvc(service)) == ["InvalidDeploymentModeCombination"]


# ---------------------------------------------------------------------------- leader / worker


@pytest.mark.parametrize(
    ("engine", "reason", "field"),
    [
        ({"leader": {}}, "LeaderRequiresWorker", "spec.engine.leader"),
        ({"worker": {"size": 1}}, "WorkerRequiresLeader", "spec.engine.worker"),
        (
            {"leader": {}, "worker": {"size": 0}},
            "WorkerSizeMustBePositive",
            "spec.engine.worker.size",
        ),
    ],
)
def test_leader_worker_pairing(engine: dict[str, Any], reason: str, field: str) -> None:
    (rej,) = validate_isvc(isvc({"engine": engine}))
    assert (rej.reason, rej.group, rej.field) == (reason, "InvalidLeaderWorkerPairing", field)
    assert rej.message.startswith(f"InvalidLeaderWorkerPairing: {reason}: engine:")


def test_pairing_sees_the_runtime_when_given() -> None:
    service = isvc({"decoder": {"leader": {}}})
    rt = runtime_from_json(
        {"metadata": {"name": "rt"}, "spec": {"decoderConfig": {"worker": {"size": 2}}}}
    )
    assert validate_isvc(service, runtime=rt) == []
    assert reasons(validate_isvc(service)) == ["LeaderRequiresWorker"]


# ---------------------------------------------------------------------------- readyPolicy


def _ready_none(**extra: Any) -> Any:
    return isvc(
        {
            "deploymentMode": "OMENative",
            "engine": {**LW, "lifecycle": {"readyPolicy": "None"}, **extra},
        }
    )


def test_ready_policy_none_is_rejected_on_multi_pod_omenative() -> None:
    (rej,) = validate_isvc(_ready_none())
    assert (rej.reason, rej.field) == ("InvalidReadyPolicy", "spec.engine.lifecycle.readyPolicy")


def test_ready_policy_none_is_ratcheted_on_update() -> None:
    assert validate_isvc(_ready_none(minReplicas=3), old=_ready_none()) == []
    fresh = isvc({"deploymentMode": "OMENative", "engine": LW})
    assert reasons(validate_isvc(_ready_none(), old=fresh)) == ["InvalidReadyPolicy"]


def test_ready_policy_none_is_fine_on_single_pod_or_other_modes() -> None:
    single = isvc({"deploymentMode": "OMENative", "engine": {"lifecycle": {"readyPolicy": "None"}}})
    assert validate_isvc(single) == []
    raw = isvc(
        {
            "engine": {
                **LW,
                "annotations": {"ome.io/deploymentMode": "RawDeployment"},
                "lifecycle": {"readyPolicy": "None"},
            }
        }
    )
    assert validate_isvc(raw) == []


def test_ready_policy_from_the_runtime_counts() -> None:
    service = isvc({"engine": {}})
    rt = runtime_from_json(
        {
            "metadata": {"name": "rt"},
            "spec": {"engineConfig": {**LW, "lifecycle": {"readyPolicy": "None"}}},
        }
    )
    assert reasons(validate_isvc(service, runtime=rt)) == ["InvalidReadyPolicy"]


# ---------------------------------------------------------------------------- replicas


def test_scale_to_zero_needs_keda_on_the_component() -> None:
    (rej,) = validate_isvc(isvc({"engine": {"minReplicas": 0}}))
    assert rej.reason == "InvalidScaleToZero"
    assert rej.message.startswith("InvalidScaleToZero: engine.minReplicas=0 requires KEDA")
    keda = {"minReplicas": 0, "autoscaler": {"class": "KEDA", "keda": {"triggers": [{}]}}}
    assert validate_isvc(isvc({"engine": keda})) == []
    legacy = isvc({"engine": {"minReplicas": 0}}, {"ome.io/autoscalerClass": "keda"})
    assert validate_isvc(legacy) == []


def test_replica_bounds() -> None:
    assert reasons(validate_isvc(isvc({"router": {"minReplicas": 3, "maxReplicas": 2}}))) == [
        "InvalidReplicaBounds"
    ]
    assert reasons(validate_isvc(isvc({"router": {"maxReplicas": -1}}))) == ["InvalidReplicaBounds"]
    assert validate_isvc(isvc({"router": {"minReplicas": 3, "maxReplicas": 0}})) == []


def test_unknown_lifecycle_values_are_rejected() -> None:
    service = isvc(
        {
            "engine": {
                "lifecycle": {
                    "restartPolicy": "Always",
                    "updateStrategy": {"type": "BlueGreen"},
                    "migrationPolicy": {"mode": "Sometimes"},
                }
            }
        }
    )
    rejections = validate_isvc(service)
    assert reasons(rejections) == ["InvalidLifecycle"] * 3
    assert [r.field for r in rejections] == [
        "spec.engine.lifecycle.restartPolicy",
        "spec.engine.lifecycle.updateStrategy.type",
        "spec.engine.lifecycle.migrationPolicy.mode",
    ]


# ---------------------------------------------------------------------------- PDB


@pytest.mark.parametrize(
    "pdb",
    [
        {"minAvailable": 1, "maxUnavailable": 1},
        {"maxUnavailable": "150%"},
        {"minAvailable": -1},
        {"maxUnavailable": "1"},
        {"minAvailable": True},
    ],
)
def test_bad_pod_disruption_budget(pdb: dict[str, Any]) -> None:
    rejections = validate_isvc(isvc({"engine": {"podDisruptionBudget": pdb}}))
    assert rejections and set(reasons(rejections)) == {"InvalidPodDisruptionBudget"}


def test_omes_inline_budget_fields_are_checked_at_their_own_path() -> None:
    (rejection,) = validate_isvc(isvc({"engine": {"minAvailable": 1, "maxUnavailable": 1}}))
    assert rejection.reason == "InvalidPodDisruptionBudget"
    assert rejection.field == "spec.engine"
    assert "engine sets both minAvailable and maxUnavailable" in rejection.message


def test_good_pod_disruption_budget() -> None:
    for pdb in ({"minAvailable": "50%"}, {"maxUnavailable": 0}, {"maxUnavailable": "100%"}):
        assert validate_isvc(isvc({"engine": {"podDisruptionBudget": pdb}})) == []


# ---------------------------------------------------------------------------- migrations


def _migration(value: object, key: str = KEY, **spec: Any) -> Any:
    text = value if isinstance(value, str) else json.dumps(value)
    return isvc({"deploymentMode": "OMENative", "engine": LW, **spec}, {key: text})


GOOD = {
    "schemaVersion": "v1",
    "component": "engine",
    "instance": 1,
    "from_node": "gpu-7",
    "hint_target_nodes": ["gpu-1", "gpu-2"],
    "reason": "drain",
    "requested_at": "2025-06-01T10:00:00Z",
    "requested_by": "alice",
}


def test_well_formed_migration_request_is_admitted() -> None:
    assert validate_isvc(_migration(GOOD)) == []
    assert (
        validate_isvc(_migration({"schemaVersion": "v1", "component": "engine", "instance": 0}))
        == []
    )


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("not json", "not JSON"),
        ([1, 2], "JSON object"),
        ({**GOOD, "schemaVersion": "v2"}, "schemaVersion"),
        ({**GOOD, "component": "decoder"}, "not a component"),
        ({**GOOD, "instance": -1}, "instance must be an integer >= 0"),
        ({**GOOD, "instance": "1"}, "instance must be an integer >= 0"),
        ({**GOOD, "instance": True}, "instance must be an integer >= 0"),
        ({**GOOD, "hint_target_nodes": [f"n{i}" for i in range(9)]}, "at most 8"),
        ({**GOOD, "hint_target_nodes": "gpu-1"}, "list of node names"),
        ({**GOOD, "from_node": ""}, "from_node must not be empty"),
        ({**GOOD, "requested_by": 7}, "requested_by must be a string"),
        ({**GOOD, "requested_at": "yesterday"}, "RFC 3339"),
        ({**GOOD, "hint_target_node": ["x"]}, "unknown field"),
    ],
)
def test_malformed_migration_request(value: object, needle: str) -> None:
    (rej,) = validate_isvc(_migration(value))
    assert rej.reason == "InvalidMigrationRequest"
    assert rej.message.startswith(f"InvalidMigrationRequest: migration request {KEY}:")
    assert needle in rej.message
    assert rej.field == f"metadata.annotations[{KEY}]"


def test_migration_key_must_end_in_a_uuid() -> None:
    (rej,) = validate_isvc(_migration(GOOD, key="ome.io/migration-request-v1-abc"))
    assert "UUID" in rej.message


def test_migration_of_a_non_omenative_component_is_rejected() -> None:
    service = isvc({"router": {}}, {KEY: json.dumps({**GOOD, "component": "router"})})
    (rej,) = validate_isvc(service)
    assert "runs as RawDeployment" in rej.message


def test_unchanged_migration_request_passes_on_update() -> None:
    bad = _migration({**GOOD, "instance": -1})
    assert validate_isvc(bad, old=bad) == []


# ---------------------------------------------------------------------------- standalone IR


def _ir(spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    runners = [
        {"name": "default", "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}
    ]
    return {
        "metadata": {"name": "solo", **meta},
        "spec": {"component": "engine", "runners": runners, **spec},
    }


def test_plain_standalone_replica_is_admitted() -> None:
    assert validate_standalone_replica(_ir({"replicas": 2})) == []


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"parentRef": {"name": "chat"}}, "ParentRefWithoutOwner"),
        ({"placementExecution": {}}, "ControllerOnlyField"),
        ({"placementReplicaLimit": 2}, "ControllerOnlyField"),
        ({"autoscaler": {"class": "HPA"}}, "AutoscalerClassNotAllowed"),
        ({"lifecycle": {"minReadySeconds": 30}}, "LifecycleMinReadySecondsNotAllowed"),
        ({"runtimeRef": {"name": "srt"}}, "RunnersWithRefs"),
        ({"replicas": -1}, "InvalidReplicas"),
        ({"replicas": "2"}, "InvalidSpec"),
    ],
)
def test_standalone_replica_rejections(spec: dict[str, Any], reason: str) -> None:
    assert reason in reasons(validate_standalone_replica(_ir(spec)))


def test_parent_ref_with_its_owner_reference_passes() -> None:
    owner = [
        {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "name": "chat", "uid": "u"}
    ]
    assert (
        validate_standalone_replica(_ir({"parentRef": {"name": "chat"}}, ownerReferences=owner))
        == []
    )


def test_pinned_runtime_ref_is_rejected() -> None:
    obj = {
        "metadata": {"name": "solo"},
        "spec": {"component": "engine", "runtimeRef": {"name": "srt", "autoSync": False}},
    }
    assert reasons(validate_standalone_replica(obj)) == ["PinnedRuntimeRef"]


# ---------------------------------------------------------------------------- issue 15: budgets

RU = "lifecycle.updateStrategy.rollingUpdate"


@pytest.mark.parametrize(
    ("value", "reason", "words"),
    [
        ("150%", "InvalidRollingUpdatePercent", "above 100%"),
        (-1, "InvalidRollingUpdateInteger", "negative"),
        ("2", "InvalidRollingUpdateInteger", "quoted number"),
        ("lots", "InvalidRollingUpdatePercent", "neither a count nor a percentage"),
    ],
)
@pytest.mark.parametrize("key", ["maxSurge", "maxUnavailable"])
def test_a_component_budget_without_a_valid_form_is_rejected_naming_the_field(
    key: str, value: object, reason: str, words: str
) -> None:
    engine = {**LW, "lifecycle": {"updateStrategy": {"rollingUpdate": {key: value}}}}
    (rej,) = validate_isvc(isvc({"deploymentMode": "OMENative", "engine": engine}))
    assert rej.reason == reason
    assert rej.field == f"spec.engine.{RU}.{key}"
    assert f"spec.engine.{RU}.{key} is" in rej.message and words in rej.message


@pytest.mark.parametrize("value", [0, 3, "0%", "25%", "100%"])
def test_valid_component_budgets_are_admitted(value: object) -> None:
    engine = {**LW, "lifecycle": {"updateStrategy": {"rollingUpdate": {"maxSurge": value}}}}
    assert validate_isvc(isvc({"deploymentMode": "OMENative", "engine": engine})) == []


def _partitioned(partition: int, **bounds: int) -> Any:
    engine = {**LW, **bounds, "lifecycle": {"updateStrategy": {"rollingUpdate": {
        "partition": partition}}}}
    return isvc({"deploymentMode": "OMENative", "engine": engine})


def test_a_component_partition_above_its_replicas_is_rejected_at_admission() -> None:
    (rej,) = validate_isvc_partitions(_partitioned(5, minReplicas=2, maxReplicas=3))
    assert rej.reason == "PartitionAboveReplicas"
    assert f"spec.engine.{RU}.partition is 5" in rej.message and "(3)" in rej.message
    assert validate_isvc_partitions(_partitioned(3, minReplicas=2, maxReplicas=3)) == []
    # the service controller (no old object) never blocks a component on it
    assert validate_isvc(_partitioned(5, minReplicas=2, maxReplicas=3)) == []


def test_lowering_replicas_below_a_kept_partition_only_warns() -> None:
    old, new = _partitioned(3, minReplicas=3), _partitioned(3, minReplicas=2)
    assert validate_isvc_partitions(new, old) == []
    (w,) = [w for w in isvc_warnings(new, old) if w.reason == "PartitionAboveReplicas"]
    assert w.warning and "no Instance is updated" in w.message


def test_no_runtime_and_no_model_warns_that_no_runtime_can_be_selected() -> None:
    warnings = isvc_warnings(isvc({"deploymentMode": "OMENative", "engine": LW}))
    (w,) = [w for w in warnings if w.reason == "RuntimeNotNamed"]
    assert w.warning and w.field == "spec.runtime"
    assert "names no runtime" in w.message
    assert "spec.model names no model to select one for" in w.message
    named = isvc({"runtime": {"name": "srt"}, "engine": LW})
    assert [w.reason for w in isvc_warnings(named)] == []
    auto = isvc({"model": {"name": "llama"}, "engine": LW})  # OME selects the runtime
    assert [w.reason for w in isvc_warnings(auto)] == []


def test_replica_bounds_above_the_decode_limit_warn() -> None:
    service = isvc({"runtime": {"name": "srt"}, "engine": {**LW, "maxReplicas": 20_001}})
    (w,) = isvc_warnings(service)
    assert w.reason == "TooManyInstances" and "spec.engine.maxReplicas is 20001" in w.message
    assert "maxDecodedInstances (20,000)" in w.message
    at_limit = isvc({"runtime": {"name": "srt"}, "engine": {**LW, "maxReplicas": 20_000}})
    assert isvc_warnings(at_limit) == []


# ---------------------------------------------------------------------------- issue 15: migration


@pytest.mark.parametrize(
    ("value", "ome_reason"),
    [
        ({**GOOD, "schemaVersion": "v2"}, "UnsupportedSchemaVersion"),
        ({k: v for k, v in GOOD.items() if k != "schemaVersion"}, "UnsupportedSchemaVersion"),
        ("{not json", "MigrationRequestRejected"),
        ({**GOOD, "instance": -3}, "MigrationRequestRejected"),
        ({k: v for k, v in GOOD.items() if k != "instance"}, "MigrationRequestRejected"),
    ],
)
def test_malformed_requests_carry_omes_reason(value: object, ome_reason: str) -> None:
    (rej,) = validate_isvc(_migration(value))
    assert f"migration request {KEY}: {ome_reason}: " in rej.message


def test_a_missing_instance_says_what_to_give() -> None:
    value = {k: v for k, v in GOOD.items() if k != "instance"}
    (rej,) = validate_isvc(_migration(value))
    assert "instance is missing" in rej.message and "integer >= 0" in rej.message


def test_a_key_that_is_not_a_uuid_is_rejected_with_omes_reason() -> None:
    (rej,) = validate_isvc(_migration(GOOD, key="ome.io/migration-request-v1-move-it"))
    assert "MigrationRequestRejected: the key must end in a UUID" in rej.message


def _ir_with(annotations: dict[str, str], **spec: Any) -> dict[str, Any]:
    body = _ir(spec)
    body["metadata"]["annotations"] = annotations
    return body


BAD_REQUESTS: list[object] = [
    {**GOOD, "schemaVersion": "v2"},
    "{not json",
    {**GOOD, "instance": -1},
    {k: v for k, v in GOOD.items() if k != "instance"},
    {**GOOD, "hint_target_node": ["x"]},
    {**GOOD, "requested_at": "yesterday"},
]


@pytest.mark.parametrize("value", BAD_REQUESTS)
def test_a_standalone_replica_judges_a_request_exactly_as_an_inference_service(
    value: object,
) -> None:
    text = value if isinstance(value, str) else json.dumps(value)
    (on_isvc,) = validate_isvc(_migration(text))
    (on_ir,) = validate_replica_annotations(_ir_with({KEY: text}))
    assert on_ir == on_isvc


def test_a_request_on_a_standalone_replica_may_leave_out_its_component() -> None:
    value = {k: v for k, v in GOOD.items() if k != "component"}
    assert validate_replica_annotations(_ir_with({KEY: json.dumps(value)})) == []
    other = json.dumps({**GOOD, "component": "decoder"})
    (rej,) = validate_replica_annotations(_ir_with({KEY: other}))
    assert "component 'decoder' is not a component of this InferenceReplica (engine)" in (
        rej.message
    )


def test_requests_on_a_projected_replica_are_left_to_the_inference_service() -> None:
    body = _ir_with({KEY: "{not json"})
    assert validate_replica_annotations(body, projected=True) == []


def test_one_function_judges_both_paths() -> None:
    target = MigrationTarget(modes={"engine": "OMENative"})
    assert migration_request_problem(KEY, json.dumps(GOOD), target) is None
    reason, text = migration_request_problem(KEY, '{"schemaVersion": 2}', target) or ("", "")
    assert reason == "UnsupportedSchemaVersion" and "got 2" in text


# ---------------------------------------------------------------------------- issue 15: replicas

RELEASE = "ome.io/release-held-revision"


def test_an_empty_release_held_revision_is_rejected() -> None:
    (rej,) = validate_replica_annotations(_ir_with({RELEASE: ""}))
    assert rej.reason == "InvalidReleaseHeldRevision"
    assert f"{RELEASE} is empty" in rej.message and "hash" in rej.message
    assert validate_replica_annotations(_ir_with({RELEASE: "solo-5f7c9d2a1b"})) == []
    # on a projected replica too: the manager consumes it there as well
    assert reasons(validate_replica_annotations(_ir_with({RELEASE: " "}), projected=True)) == [
        "InvalidReleaseHeldRevision"
    ]


@pytest.mark.parametrize(
    ("keys", "value", "reason"),
    [
        (("lifecycle", "updateStrategy", "rollingUpdate", "maxSurge"), "101%",
         "InvalidRollingUpdatePercent"),
        (("lifecycle", "updateStrategy", "rollingUpdate", "maxUnavailable"), -2,
         "InvalidRollingUpdateInteger"),
        (("pacing", "maxUnavailable"), "half", "InvalidRollingUpdatePercent"),
    ],
)
def test_a_standalone_replica_budget_names_the_field(
    keys: tuple[str, ...], value: object, reason: str
) -> None:
    spec: dict[str, Any] = {}
    node = spec
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    node[keys[-1]] = value
    found = [r for r in validate_standalone_replica(_ir(spec)) if r.reason == reason]
    path = "spec." + ".".join(keys)
    assert [r.field for r in found] == [path]
    assert f"{path} is {value!r}" in found[0].message or f"{path} is {value}" in found[0].message


@pytest.mark.parametrize(
    "spec",
    [
        {"replicas": 2, "pacing": {"partition": 3}},
        {"replicas": 2, "lifecycle": {"updateStrategy": {"rollingUpdate": {"partition": 5}}}},
        {"pacing": {"partition": 2}},  # replicas defaults to 1
    ],
)
def test_a_standalone_replica_partition_above_replicas_is_rejected(spec: dict[str, Any]) -> None:
    (rej,) = validate_standalone_replica(_ir(spec))
    assert rej.reason == "PartitionAboveReplicas"
    assert "above spec.replicas" in rej.message and "lower the partition" in rej.message


def test_scaling_below_a_kept_partition_is_admitted_with_a_warning() -> None:
    old = _ir({"replicas": 4, "pacing": {"partition": 3}})
    new = _ir({"replicas": 2, "pacing": {"partition": 3}})
    assert validate_standalone_replica(new, old) == []
    (w,) = replica_warnings(new, old)
    assert w.reason == "PartitionAboveReplicas" and w.warning


def test_replicas_above_the_decode_limit_warn() -> None:
    (w,) = replica_warnings(_ir({"replicas": 25_000}))
    assert w.reason == "TooManyInstances" and "spec.replicas is 25000" in w.message
    assert replica_warnings(_ir({"replicas": 20_000})) == []


def test_a_rollback_to_an_unknown_revision_warns_naming_the_stored_ones() -> None:
    body = _ir({"pacing": {"rollbackToRevision": "solo-deadbeef00"}})
    stored = ["solo-5f7c9d2a1b", "solo-0a1b2c3d4e"]
    (w,) = replica_warnings(body, None, stored)
    assert w.reason == "RollbackRevisionNotFound"
    assert "'solo-deadbeef00'" in w.message
    assert "Stored: solo-0a1b2c3d4e, solo-5f7c9d2a1b" in w.message
    # a stored name, or its hash, is fine; so is not knowing (the list failed)
    assert replica_warnings(_ir({"pacing": {"rollbackToRevision": "solo-5f7c9d2a1b"}}),
                            None, stored) == []
    assert replica_warnings(_ir({"pacing": {"rollbackToRevision": "5f7c9d2a1b"}}),
                            None, stored) == []
    assert replica_warnings(body, None, None) == []
    # an unchanged value is not warned about again
    assert replica_warnings(body, body, stored) == []


# ---------------------------------------------------------------------------- autoscaler


@pytest.mark.parametrize(("autoscaler", "annotations", "reason", "field"), [
    ({"class": "Knative"}, {}, "AutoscalerClassUnknown", "spec.engine.autoscaler.class"),
    ({"class": "KEDA"}, {}, "KedaTriggersRequired", "spec.engine.autoscaler.keda.triggers"),
    ({"class": "KEDA", "keda": {"triggers": [{"type": "cpu"}], "idleReplicaCount": 2}}, {},
     "KedaIdleBelowMin", "spec.engine.autoscaler.keda.idleReplicaCount"),
    ({"hpa": {"metrics": [{"type": "Resource"}]}}, {}, "HPAMetricMalformed",
     "spec.engine.autoscaler.hpa.metrics[0]"),
    ({"hpa": {"metrics": [{"type": "Bananas", "bananas": {}}]}}, {}, "HPAMetricMalformed",
     "spec.engine.autoscaler.hpa.metrics[0]"),
    ({"class": "External"}, {"ome.io/autoscalerClass": "keda"},
     "AutoscalerAnnotationConflict", "spec.engine.autoscaler.class"),
])
def test_omes_autoscaler_admission_reasons(autoscaler: dict[str, Any],
                                           annotations: dict[str, str], reason: str,
                                           field: str) -> None:
    (rej,) = validate_isvc(isvc({"engine": {"minReplicas": 2, "autoscaler": autoscaler}},
                                annotations))
    assert (rej.reason, rej.field) == (reason, field)
    assert rej.message.startswith(f"{reason}: engine")


def test_valid_autoscalers_are_admitted() -> None:
    cpu = {"type": "Resource",
           "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                  "averageUtilization": 70}}}
    for autoscaler in ({"class": "HPA", "hpa": {"metrics": [cpu]}}, {"class": "External"},
                       {"class": "None"}, {"class": "hpa"},
                       {"class": "KEDA", "keda": {"triggers": [{"type": "cpu"}],
                                                  "idleReplicaCount": 1}}):
        assert validate_isvc(isvc({"engine": {"minReplicas": 2,
                                              "autoscaler": autoscaler}})) == [], autoscaler

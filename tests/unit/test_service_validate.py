"""Admission: each of OME's rejection reasons, and what passes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from omenative_core.service import (
    Rejection,
    isvc_from_json,
    runtime_from_json,
    validate_isvc,
    validate_standalone_replica,
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

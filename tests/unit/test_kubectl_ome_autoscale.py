"""``kubectl ome autoscale status|explain`` judged on plain objects (no cluster): OME's states,
issue aliases, live rows, layers, WHY reasons and tables (reference/kubectl-ome/autoscale.md)."""

from __future__ import annotations

from typing import Any

from attrs import evolve

from omenative_controller.cli import autoscale_explain as ae
from omenative_controller.cli import autoscale_output as ao
from omenative_core.service import isvc_from_json, runtime_from_json

HPA_STATUS = {
    "autoscaler": {"class": "HPA", "managedBy": "ome", "specSource": "default",
                   "currentReplicas": 2, "desiredReplicas": 3,
                   "lastScaleTime": "2026-08-31T18:20:00Z",
                   "conditions": [{"type": "AbleToScale", "status": "True"},
                                  {"type": "ScalingActive", "status": "True"}]},
    "scaleTargetRef": {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
                       "name": "chat-engine"}}


def _cells(text: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split()[1:] for line in text.splitlines()}


def test_omes_status_example_reads_reported() -> None:
    engine = ao.component_report("engine", HPA_STATUS, "prod")
    assert engine.state == "Reported" and engine.issues == ()
    state = ao.service_state([engine], [])
    text = ao.status_table(state, [engine], [])
    rows = _cells(text)
    assert rows["FIELD"] == ["SERVICE", "ENGINE", "DECODER", "ROUTER"]
    assert rows["STATE"] == ["Reported", "Reported", "-", "-"]
    assert rows["TARGET-KIND"][1] == "IR" and rows["TARGET-NAME"][1] == "chat-engine"
    assert (rows["CURRENT"][1], rows["DESIRED"][1]) == ("2", "3")
    assert rows["LAST-SCALE"][1:3] == ["Aug31", "18:20Z"]
    assert rows["ABLE-TO-SCALE"][1] == "True" and "READY" not in rows
    doc = ao.status_json("prod", "chat", state, [engine], [], "2026-08-31T18:30:00Z")
    assert doc["kind"] == "AutoscaleStatusReport" and doc["warnings"] == []
    comp = doc["content"]["components"][0]
    assert comp["target"]["kind"] == "InferenceReplica" and \
        comp["replicas"]["desiredReplicas"] == 3


def test_issue_states_follow_omes_table() -> None:
    missing = ao.component_report("decoder", {}, "prod")
    assert (missing.state, missing.issues) == ("NotReported", ("AutoscalerNotReported",))
    assert ao.service_state([missing], []) == "Unavailable"
    zero = {**HPA_STATUS, "autoscaler": {**HPA_STATUS["autoscaler"], "class": "KEDA",
                                         "currentReplicas": 0, "conditions": []}}
    keda = ao.component_report("engine", zero, "prod")
    assert keda.state == "Partial" and "ReplicaEvidenceAmbiguous" in keda.issues
    external = {**HPA_STATUS, "autoscaler": {**HPA_STATUS["autoscaler"], "class": "External",
                                             "managedBy": "external"}}
    ext = ao.component_report("engine", external, "prod")
    assert ext.state == "Invalid" and "UnexpectedScalerEvidence" in ext.issues
    owner = ao.component_report("engine", {**HPA_STATUS, "autoscaler": {
        **HPA_STATUS["autoscaler"], "managedBy": "external"}}, "prod")
    assert "OwnershipMismatch" in owner.issues
    no_target = ao.component_report("engine", {"autoscaler": HPA_STATUS["autoscaler"]}, "p")
    assert no_target.state == "Partial" and no_target.issues == ("ScaleTargetNotReported",)
    assert ao.service_state([ao.component_report("engine", HPA_STATUS, "p")], ["gpu"]) == \
        "Invalid"
    text = ao.status_table("Partial", [keda, missing], [])
    assert "ReplicaAmbig" in text and "NoAutoscaler" in text


def test_live_rows_compare_the_replica_and_the_scaler() -> None:
    engine = ao.component_report("engine", HPA_STATUS, "prod")
    ir = {"metadata": {"name": "chat-engine", "generation": 4},
          "spec": {"replicas": 3}, "status": {"observedGeneration": 4, "replicas": 2}}
    live = ao.live_scale(engine, ir)
    assert (live.evidence, live.spec, live.current) == ("Reported", 3, 2)
    stale = ao.live_scale(engine, {**ir, "status": {"observedGeneration": 3}})
    assert stale.evidence == "Stale"
    hpa = {"metadata": {"generation": 2}, "status": {
        "observedGeneration": 2, "currentReplicas": 2, "desiredReplicas": 3,
        "conditions": [{"type": "ScalingActive", "status": "True"}]}}
    scaler = ao.live_scaler("HPA", hpa)
    assert (scaler.evidence, scaler.generation, scaler.desired) == ("Reported", "Matched", 3)
    rows = _cells(ao.status_table("Reported", [evolve(engine, live=live, scaler=scaler)], []))
    assert rows["LIVE-COUNT"][1] == "Equal" and rows["SCALER-GEN"][1] == "Matched"
    assert rows["SCALER-SCALING"][1] == "True"
    drift = evolve(engine, live=ao.LiveScale(evidence="Reported", spec=5, current=2))
    assert _cells(ao.status_table("Reported", [drift], []))["LIVE-COUNT"][1] == "Drift"
    assert ao.live_scaler("External", None).evidence == "NotSelected"
    assert ao.live_scaler("KEDA", None).evidence == "NotFound"


def _isvc(engine: dict[str, Any], *, mode: str | None = None,
          status: dict[str, Any] | None = None, annotations: dict[str, str] | None = None
          ) -> Any:
    spec: dict[str, Any] = {"engine": engine}
    if mode:
        spec["deploymentMode"] = mode
    return isvc_from_json({"kind": "InferenceService",
                           "metadata": {"name": "chat", "namespace": "prod", "generation": 2,
                                        "annotations": annotations or {}},
                           "spec": spec, "status": status or {}})


RAW_REPORTED = {"components": {"engine": {
    "autoscaler": {"class": "HPA", "managedBy": "ome", "specSource": "default",
                   "currentReplicas": 2, "desiredReplicas": 2,
                   "conditions": [{"type": "AbleToScale", "status": "True"}]},
    "scaleTargetRef": {"kind": "Deployment", "name": "chat-engine"}}}}


def test_omes_explain_example_is_consistent() -> None:
    isvc = _isvc({"minReplicas": 1, "maxReplicas": 4})
    col = ae.expect(isvc, None, "engine", RAW_REPORTED)
    assert (col.mode, col.desired, col.target, col.check, col.state) == (
        "Raw", "HPA/default", "Deployment/chat-engine", "match", "OK")
    rows = _cells(ae.explain_table([col]))
    assert rows["RANGE"] == ["1..4"] and rows["REPORTED"] == ["HPA/default/ome"]
    assert rows["CUR/DES"] == ["2/2"] and rows["WHY"] == ["-"]
    assert ae.explain_json("prod", "chat", [col], "t")["content"]["summary"]["state"] == \
        "Consistent"


def test_explain_layers_and_reasons() -> None:
    runtime = runtime_from_json({"kind": "ClusterServingRuntime", "metadata": {"name": "rt"},
                                 "spec": {"engineConfig": {"autoscaler": {"class": "External"}}}})
    native = _isvc({"minReplicas": 1, "leader": {}, "worker": {}}, mode="OMENative")
    col = ae.expect(native, runtime, "engine", {})
    assert (col.desired, col.target, col.check) == (
        "External/runtime", "InferenceReplica/chat-engine", "missing")
    assert col.why[0][0] == "status-missing" and col.state == "Partial"
    no_triggers = _isvc({"autoscaler": {"class": "KEDA", "keda": {}}})
    bad = ae.expect(no_triggers, None, "engine", {})
    assert bad.desired == "invalid" and bad.state == "Invalid"
    assert bad.why[0][:2] == ("keda-triggers", "KEDATriggersRequired")
    zero = ae.expect(_isvc({"minReplicas": 0}), None, "engine", {})
    assert zero.zero == "invalid" and "zero-invalid" in {w[0] for w in zero.why}
    virtual = ae.expect(_isvc({}, annotations={"ome.io/deploymentMode": "VirtualDeployment"}),
                        None, "engine", {})
    assert virtual.state == "Unsupported" and virtual.desired == "unsupported"
    legacy = ae.expect(_isvc({}, annotations={"ome.io/autoscalerClass": "none"}), None,
                       "engine", RAW_REPORTED)
    assert legacy.desired == "None/legacy" and legacy.state == "Mismatch"
    assert {w[0] for w in legacy.why} >= {"class-mismatch", "owner-mismatch",
                                          "source-mismatch"}
    policy = ae.expect(_isvc({"autoscalerPolicyRef": {"name": "p"}}), None, "engine", {})
    assert policy.desired == "?/policy" and "policy-unavailable" in {w[0] for w in policy.why}
    stale = ae.expect(_isvc({}, status={**RAW_REPORTED, "observedGeneration": 1}), None,
                      "engine", {**RAW_REPORTED, "observedGeneration": 1})
    assert stale.why[0][0] == "status-stale"


def _keda(**keda: Any) -> dict[str, Any]:
    return {"minReplicas": 1, "maxReplicas": 4, "autoscaler": {"class": "KEDA", "keda": {
        "triggers": [{"type": "prometheus", "metadata": {"query": "q"}}], **keda}}}


def test_keda_blocks_that_would_fail_the_scaled_object_are_invalid() -> None:
    ok = ae.expect(_isvc(_keda()), None, "engine", {})
    assert ok.desired == "KEDA/isvc" and not {w[0] for w in ok.why} & {
        "keda-config-invalid", "keda-name-conflict"}
    conflict = ae.expect(_isvc(_keda(advanced={"horizontalPodAutoscalerConfig": {
        "name": "chat-engine"}})), None, "engine", {})
    assert conflict.why[0][:2] == ("keda-name-conflict", "ReservedHPANameCollision")
    assert conflict.desired == "invalid" and conflict.state == "Invalid"
    for bad in (_keda(pollingInterval=0), _keda(cooldownPeriod=-1),
                _keda(triggers=[{"metadata": {}}]),
                _keda(triggers=[{"type": "cpu", "name": "a"}, {"type": "memory", "name": "a"}]),
                _keda(fallback={"failureThreshold": 3}),
                _keda(advanced={"horizontalPodAutoscalerConfig": {"name": "Not_A_Name"}})):
        col = ae.expect(_isvc(bad), None, "engine", {})
        assert col.why[0][:2] == ("keda-config-invalid", "KEDAConfigurationInvalid"), bad
        assert _cells(ae.explain_table([col]))["WHY"][0].startswith("keda-config-invalid")


def test_service_level_reasons_add_a_service_column() -> None:
    assert ae.service_issues(["InheritanceUnavailable", "LiveRuntimeUnavailable"],
                             "NotApplicable", False) == ["InheritanceUnavailable"]
    assert ae.service_issues([], "RevisionInvalid", True) == ["ActiveRevisionInconsistent"]
    assert ae.service_issues([], "Resolved", True) == []
    col = ae.expect(_isvc({"minReplicas": 1, "maxReplicas": 4}), None, "engine",
                    RAW_REPORTED)
    service = ["InheritanceUnavailable", "ActiveRevisionInconsistent"]
    rows = _cells(ae.explain_table([col], service))
    assert rows["FIELD"] == ["ENGINE", "SERVICE"]
    assert rows["STATE"] == ["Partial", "Partial"]
    assert rows["WHY"] == ["-", "inheritance-unavailable,revision-inconsistent"]
    assert rows["DESIRED"] == ["HPA/default", "-"]
    doc = ae.explain_json("prod", "chat", [col], "t", service)
    assert doc["content"]["summary"]["state"] == "Partial"
    assert doc["content"]["issues"] == [{"code": "InheritanceUnavailable"},
                                        {"code": "ActiveRevisionInconsistent"}]


def test_the_legacy_annotation_is_a_rawdeployment_layer_only() -> None:
    annotations = {"ome.io/autoscalerClass": "external"}
    raw = ae.expect(_isvc({}, annotations=annotations), None, "engine", {})
    assert raw.desired == "External/legacy"
    native = ae.expect(_isvc({"leader": {}, "worker": {}}, mode="OMENative",
                             annotations=annotations), None, "engine", {})
    assert native.desired == "HPA/default"

"""OME's AutoscalerPolicy (``autoscaler_policy.py``, ``policy_resolve.py``): a component's
``autoscalerPolicyRef`` rendered into its HPA / ScaledObject, inline precedence, the
fail-closed holds and their status, through ``plan_service`` as the shell runs it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from omenative_core.service import CRD_SCALED_OBJECT, ServiceConfig, ServiceSnapshot, plan_service
from omenative_core.service.autoscaler_policy import (
    PolicyProblem,
    RenderContext,
    parse_metric_providers,
    policy_problems,
    render_policy,
    render_template,
)
from omenative_core.service.cluster_config import parse_service_config
from omenative_core.service.policy_status import policy_status

NOW = datetime(2026, 1, 1, tzinfo=UTC)
OWNER = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "name": "chat",
         "uid": "u", "controller": True, "blockOwnerDeletion": True}
PROVIDERS = {"cluster-prometheus": {"serverAddress": "http://prom.ome.svc:9090"}}
QUERY = ('sum(vllm:num_requests_waiting{namespace="{{ .Namespace }}",'
         'inferenceservice="{{ .ISVCName }}",component="{{ .Component }}"})')
QUEUE_DEPTH = {
    "class": "KEDA",
    "keda": {
        "triggers": [{"type": "prometheus", "providerRef": {"name": "cluster-prometheus"},
                      "metricType": "AverageValue",
                      "metadata": {"query": QUERY, "threshold": "5",
                                   "ignoreNullValues": "false"}}],
        "fallback": {"failureThreshold": 3, "replicas": {"fromComponent": "MaxReplicas"}},
    },
}
CPU_60 = {"class": "HPA", "hpa": {
    "metrics": [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}],
    "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300}}}}


def _policy(name: str, spec: dict[str, Any], generation: int = 1) -> dict[str, Any]:
    return {"apiVersion": "ome.io/v1beta1", "kind": "AutoscalerPolicy",
            "metadata": {"name": name, "namespace": "prod", "generation": generation},
            "spec": spec}


def _raw(status: dict[str, Any] | None = None, **engine: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": "prod", "uid": "u", "generation": 1},
        "spec": {"deploymentMode": "OMENative",
                 "engine": {"minReplicas": 1, "maxReplicas": 4, "runner": {"image": "x"},
                            **engine}}}
    if status is not None:
        raw["status"] = status
    return raw


def _snap(raw: dict[str, Any], policies: tuple[dict[str, Any], ...] | None,
          autoscalers: tuple[dict[str, Any], ...] = (), keda: bool = True) -> ServiceSnapshot:
    return ServiceSnapshot(isvc=raw, now=NOW, policies=policies, autoscalers=autoscalers,
                           crds=frozenset({CRD_SCALED_OBJECT}) if keda else frozenset(),
                           config=ServiceConfig(metric_providers=PROVIDERS))


def _scalers(sp: Any) -> list[dict[str, Any]]:
    return [o for c, o in sp.applies
            if c == "engine" and o["kind"] in ("ScaledObject", "HorizontalPodAutoscaler")]


def _autoscaler(sp: Any) -> dict[str, Any]:
    assert sp.status is not None and sp.rejection is None
    out: dict[str, Any] = sp.status["components"]["engine"]["autoscaler"]
    return out


def _resolved(sp: Any) -> dict[str, Any]:
    return next(c for c in _autoscaler(sp)["conditions"] if c["type"] == "AutoscalerResolved")


def _live(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    api = "keda.sh/v1alpha1" if kind == "ScaledObject" else "autoscaling/v2"
    return {"apiVersion": api, "kind": kind,
            "metadata": {"name": name, "namespace": "prod", "uid": f"uid-{name}",
                         "ownerReferences": [OWNER],
                         "labels": {"ome.io/inferenceservice": "chat", "component": "engine"}},
            "spec": spec}


def test_a_keda_policy_renders_the_scaledobject_omes_guide_shows() -> None:
    sp = plan_service(_snap(_raw(autoscalerPolicyRef={"name": "queue-depth"}),
                            (_policy("queue-depth", QUEUE_DEPTH),)))
    (so,) = _scalers(sp)
    assert so["kind"] == "ScaledObject"
    assert so["metadata"]["name"] == "scaledobject-chat-engine"
    trigger = so["spec"]["triggers"][0]
    assert trigger["metadata"]["serverAddress"] == "http://prom.ome.svc:9090"
    assert trigger["metadata"]["query"] == (
        'sum(vllm:num_requests_waiting{namespace="prod",inferenceservice="chat",'
        'component="engine"})')
    assert trigger["metricType"] == "AverageValue"
    assert so["spec"]["fallback"] == {"failureThreshold": 3, "replicas": 4}
    status = _autoscaler(sp)
    assert status["class"] == "KEDA" and status["specSource"] == "policy"
    assert status["policy"]["name"] == "queue-depth"
    assert status["policy"]["observedGeneration"] == 1
    assert _resolved(sp)["status"] == "True"
    assert _resolved(sp)["reason"] == "RenderedFromPolicy"


def test_an_hpa_policy_renders_its_metrics_and_behavior() -> None:
    sp = plan_service(_snap(_raw(autoscalerPolicyRef={"name": "cpu-60"}),
                            (_policy("cpu-60", CPU_60),)))
    (hpa,) = _scalers(sp)
    assert hpa["kind"] == "HorizontalPodAutoscaler"
    assert hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 60
    assert hpa["spec"]["behavior"] == {"scaleDown": {"stabilizationWindowSeconds": 300}}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 4)


def test_a_policy_outranks_the_runtimes_block_as_a_whole() -> None:
    raw = _raw(autoscalerPolicyRef={"name": "cpu"})
    raw["spec"]["runtime"] = {"name": "rt", "kind": "ServingRuntime"}
    runtime = {"apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime",
               "metadata": {"name": "rt", "namespace": "prod"},
               "spec": {"engineConfig": {"autoscaler": {"class": "HPA", "hpa": {
                   "behavior": {"scaleUp": {"stabilizationWindowSeconds": 9}}}}}}}
    from omenative_core.service.model import runtime_from_json
    snap = _snap(raw, (_policy("cpu", {"class": "HPA"}),))
    sp = plan_service(ServiceSnapshot(**{**_fields(snap),
                                         "runtimes": (runtime_from_json(runtime),)}))
    (hpa,) = _scalers(sp)
    assert "behavior" not in hpa["spec"]  # the runtime's behavior does not leak in
    assert hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 80


def _fields(snap: ServiceSnapshot) -> dict[str, Any]:
    return {k: getattr(snap, k) for k in ("isvc", "now", "config", "crds", "policies",
                                          "autoscalers")}


def test_a_policy_change_changes_the_rendered_scaler() -> None:
    raw = _raw(autoscalerPolicyRef={"name": "cpu"})
    first = _scalers(plan_service(_snap(raw, (_policy("cpu", CPU_60),))))[0]
    edited = {"class": "HPA", "hpa": {"metrics": [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 30}}}]}}
    sp = plan_service(_snap(raw, (_policy("cpu", edited, generation=2),)))
    second = _scalers(sp)[0]
    assert first["spec"]["metrics"] != second["spec"]["metrics"]
    assert second["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 30
    assert _autoscaler(sp)["policy"]["observedGeneration"] == 2


def test_inline_autoscaler_wins_and_the_ref_is_reported_shadowed() -> None:
    raw = _raw(autoscalerPolicyRef={"name": "queue-depth"}, autoscaler={"class": "HPA"})
    sp = plan_service(_snap(raw, (_policy("queue-depth", QUEUE_DEPTH),)))
    (hpa,) = _scalers(sp)
    assert hpa["kind"] == "HorizontalPodAutoscaler"
    status = _autoscaler(sp)
    assert status["specSource"] == "isvc"
    assert status["shadowedPolicyRef"]["name"] == "queue-depth"
    assert status["shadowedPolicyRef"]["wouldRenderDigest"].startswith("sha256:")
    assert _resolved(sp)["reason"] == "InlinePrecedence"


def test_a_missing_policy_holds_the_live_scaler_and_warns_once() -> None:
    live = _live("ScaledObject", "scaledobject-chat-engine",
                 {"scaleTargetRef": {"name": "chat-engine"}, "minReplicaCount": 1,
                  "maxReplicaCount": 4, "triggers": [{"type": "cpu"}]})
    raw = _raw(autoscalerPolicyRef={"name": "queue-depth"}, maxReplicas=6)
    sp = plan_service(_snap(raw, (), autoscalers=(live,)))
    (held,) = _scalers(sp)
    assert held["kind"] == "ScaledObject"
    assert held["spec"]["triggers"] == [{"type": "cpu"}]  # frozen as it was
    assert held["spec"]["maxReplicaCount"] == 6  # bounds still flow
    assert sp.deletes == ()
    resolved = _resolved(sp)
    assert (resolved["status"], resolved["reason"]) == ("False", "PolicyNotFound")
    assert resolved["message"].startswith("holding last-known-good scaler:")
    assert _autoscaler(sp)["class"] == "KEDA"
    (event,) = [e for e in sp.events if e.reason == "AutoscalerPolicyHold"]
    assert event.type == "Warning"
    assert event.message == ('engine autoscaler is holding last-known-good (PolicyNotFound): '
                             'AutoscalerPolicy \'queue-depth\' not found in namespace prod')
    again = plan_service(_snap({**raw, "status": sp.status}, (), autoscalers=(live,)))
    assert not [e for e in again.events if e.reason == "AutoscalerPolicyHold"]


def test_a_hold_with_no_scaler_creates_none_and_keeps_the_count() -> None:
    raw = _raw(autoscalerPolicyRef={"name": "gone"})
    owned = {"engine": {"spec": {"replicas": 3}}}
    snap = _snap(raw, ())
    sp = plan_service(ServiceSnapshot(**{**_fields(snap), "owned": owned}))
    assert _scalers(sp) == []
    replica = next(o for c, o in sp.applies if o["kind"] == "InferenceReplica")
    assert replica["spec"]["replicas"] == 3


def test_an_unbound_provider_holds_policy_invalid() -> None:
    snap = _snap(_raw(autoscalerPolicyRef={"name": "q"}), (_policy("q", QUEUE_DEPTH),))
    sp = plan_service(ServiceSnapshot(**{**_fields(snap), "config": ServiceConfig()}))
    assert _resolved(sp)["reason"] == "PolicyInvalid"
    assert "not bound" in _resolved(sp)["message"]


def test_a_keda_policy_without_kedas_crd_holds_class_unavailable() -> None:
    sp = plan_service(_snap(_raw(autoscalerPolicyRef={"name": "q"}),
                            (_policy("q", QUEUE_DEPTH),), keda=False))
    assert _resolved(sp)["reason"] == "ClassUnavailable"


def test_with_the_feature_off_the_ref_is_ignored() -> None:
    sp = plan_service(_snap(_raw(autoscalerPolicyRef={"name": "q"}), None))
    (hpa,) = _scalers(sp)
    assert hpa["kind"] == "HorizontalPodAutoscaler"
    status = _autoscaler(sp)
    assert status["specSource"] == "default" and "conditions" not in status


def test_templates_allow_only_the_closed_variables() -> None:
    variables = RenderContext("ns", "chat", "engine", 1, 4).variables()
    assert render_template("{{ .TargetName }}/{{.MaxReplicas}}", variables) == "chat-engine/4"
    assert render_template("a  {{- .Component -}}  b", variables) == "aengineb"
    bad = render_template("{{ .Namespace | upper }}", variables)
    assert isinstance(bad, PolicyProblem) and bad.reason == "ForbiddenTemplateNode"
    unknown = render_template("{{ .Secret }}", variables)
    assert isinstance(unknown, PolicyProblem) and unknown.reason == "ForbiddenTemplateNode"
    unclosed = render_template("{{ .Namespace", variables)
    assert isinstance(unclosed, PolicyProblem) and unclosed.reason == "ParseError"


def test_policy_validation_names_omes_reasons() -> None:
    trigger = QUEUE_DEPTH["keda"]["triggers"][0]  # type: ignore[index]
    forbidden = {"class": "KEDA", "keda": {"triggers": [
        {**trigger, "metadata": {**trigger["metadata"], "serverAddress": "http://x"}}]}}
    assert [p.reason for p in policy_problems(forbidden)] == ["ForbiddenMetadataKey"]
    implicit = {"class": "KEDA", "keda": {"triggers": [
        {**trigger, "metadata": {"query": "up", "threshold": "1"}}]}}
    assert [p.reason for p in policy_problems(implicit)] == ["IgnoreNullValuesMustBeExplicit"]
    unbalanced = {"class": "KEDA", "keda": {"triggers": [
        {**trigger, "metadata": {**trigger["metadata"], "query": "sum(up"}}]}}
    assert [p.reason for p in policy_problems(unbalanced)] == ["PromQLInvalid"]
    assert [p.reason for p in policy_problems({"class": "External"})] == \
        ["ClassTemplateMismatch"]
    assert policy_problems(QUEUE_DEPTH, PROVIDERS) == []
    assert [p.reason for p in policy_problems(QUEUE_DEPTH, {})] == ["ProviderUnknown"]


def test_fallback_from_min_and_fixed_values() -> None:
    ctx = RenderContext("ns", "chat", "engine", 2, 5)
    spec = {"class": "KEDA", "keda": {"triggers": [{"type": "cpu", "metadata": {"value": "50"}}],
                                      "fallback": {"failureThreshold": 1,
                                                   "replicas": {"fromComponent": "MinReplicas"}}}}
    out = render_policy(spec, "p", {}, ctx)
    assert not isinstance(out, PolicyProblem)
    assert out.block["keda"]["fallback"] == {"failureThreshold": 1, "replicas": 2}
    spec["keda"]["fallback"]["replicas"] = {"value": 7}  # type: ignore[index]
    out = render_policy(spec, "p", {}, ctx)
    assert not isinstance(out, PolicyProblem)
    assert out.block["keda"]["fallback"]["replicas"] == 7


def test_metric_providers_top_level_wins_over_the_deprecated_alias() -> None:
    alias = {"metricProviders": {"a": {"serverAddress": "http://a"}}}
    assert parse_metric_providers(None, alias) == {"a": {"serverAddress": "http://a"}}
    assert parse_metric_providers({}, alias) == {}
    config = parse_service_config(
        {"metricProviders": '{"p": {"serverAddress": "http://p"}}',
         "autoscalerPolicy": '{"enabled": true, "memberGetTimeoutSeconds": 0}'})
    assert config.metric_providers == {"p": {"serverAddress": "http://p"}}


def test_policy_status_reports_ready_in_use_and_attached_components() -> None:
    isvcs = [_raw(autoscalerPolicyRef={"name": "q"}),
             {**_raw(), "metadata": {"name": "other", "namespace": "prod"}},
             {**_raw(autoscalerPolicyRef={"name": "q"}),
              "metadata": {"name": "elsewhere", "namespace": "dev"}}]
    isvcs[1]["spec"]["decoder"] = {"autoscalerPolicyRef": {"name": "q"}}
    status = policy_status(_policy("q", QUEUE_DEPTH), isvcs, PROVIDERS, NOW)
    assert status["attachedComponents"] == 2
    assert status["observedGeneration"] == 1
    conditions = {c["type"]: c for c in status["conditions"]}
    assert (conditions["Ready"]["status"], conditions["Ready"]["reason"]) == \
        ("True", "TemplatesValid")
    assert conditions["InUse"]["reason"] == "Attached"
    unused = policy_status(_policy("q", QUEUE_DEPTH), [], {}, NOW)
    conditions = {c["type"]: c for c in unused["conditions"]}
    assert conditions["Ready"]["reason"] == "ProviderUnknown"
    assert conditions["InUse"]["reason"] == "NoConsumers"
    assert "attachedComponents" not in unused

"""OME's ``status.components.<c>.autoscaler`` / ``scaleTargetRef`` and the removal of the
autoscaler a class change leaves behind (``autoscaler_status.py``), through ``plan_service``
as the shell runs it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from omenative_core.service import CRD_SCALED_OBJECT, ServiceSnapshot, plan_service
from omenative_core.service.model import runtime_from_json

NOW = datetime(2026, 1, 1, tzinfo=UTC)
KEDA = {"class": "KEDA", "keda": {"triggers": [{"type": "cpu", "metadata": {"value": "50"}}]}}
TARGET = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": "chat-engine"}
OWNER = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "name": "chat",
         "uid": "u", "controller": True, "blockOwnerDeletion": True}


def _raw(mode: str = "OMENative", annotations: dict[str, str] | None = None,
         **engine: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": "prod", "uid": "u", "generation": 1,
                     "annotations": annotations or {}},
        "spec": {"deploymentMode": mode,
                 "engine": {"minReplicas": 1, "maxReplicas": 4, "runner": {"image": "x"},
                            **engine}},
    }


def _engine(sp: Any) -> dict[str, Any]:
    assert sp.status is not None and sp.rejection is None
    entry: dict[str, Any] = sp.status["components"]["engine"]
    return entry


def _hpa(name: str = "chat-engine", owner: dict[str, Any] | None = OWNER,
         status: dict[str, Any] | None = None, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "prod", "uid": f"uid-{name}",
                            "labels": {"ome.io/inferenceservice": "chat",
                                       "component": "engine", **labels}}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": meta, "status": status or {}}


def _scaled_object(status: dict[str, Any] | None = None) -> dict[str, Any]:
    body = _hpa("scaledobject-chat-engine", status=status)
    body.update(apiVersion="keda.sh/v1alpha1", kind="ScaledObject")
    return body


def test_the_default_hpa_is_reported_as_ome_and_mirrors_the_live_hpa() -> None:
    raw = _raw()
    del raw["spec"]["engine"]["maxReplicas"]
    hpa = _hpa(status={
        "currentReplicas": 2, "desiredReplicas": 3, "lastScaleTime": "2026-01-01T00:00:00Z",
        "conditions": [{"type": "ScalingActive", "status": "False",
                        "reason": "FailedGetResourceMetric", "lastTransitionTime": "t0",
                        "message": "missing request for cpu in container c of Pod chat-a-1"}]})
    sp = plan_service(ServiceSnapshot(isvc=raw, now=NOW, autoscalers=(hpa,)))
    entry = _engine(sp)
    assert entry["autoscaler"] == {
        "class": "HPA", "managedBy": "ome", "specSource": "default",
        "currentReplicas": 2, "desiredReplicas": 3, "lastScaleTime": "2026-01-01T00:00:00Z",
        "conditions": [{"type": "ScalingActive", "status": "False",
                        "reason": "FailedGetResourceMetric", "lastTransitionTime": "t0",
                        "message": "missing request for cpu in container c of Pod <pod>"}]}
    assert entry["scaleTargetRef"] == TARGET
    assert sp.deletes == ()


def test_an_hpa_not_seen_yet_reports_no_counts() -> None:
    entry = _engine(plan_service(ServiceSnapshot(isvc=_raw(), now=NOW)))
    assert entry["autoscaler"] == {"class": "HPA", "managedBy": "ome", "specSource": "default"}


def test_external_is_reported_as_omes_guide_prints_it() -> None:
    entry = _engine(plan_service(ServiceSnapshot(
        isvc=_raw(autoscaler={"class": "External"}), now=NOW, autoscalers=(_hpa(status={
            "currentReplicas": 2}),))))
    assert entry["autoscaler"] == {"class": "External", "managedBy": "external",
                                   "specSource": "isvc"}
    assert entry["scaleTargetRef"]["kind"] == "InferenceReplica"


def test_none_is_managed_by_none_and_still_publishes_its_target() -> None:
    entry = _engine(plan_service(ServiceSnapshot(
        isvc=_raw(mode="RawDeployment", autoscaler={"class": "None"}), now=NOW)))
    assert entry["autoscaler"] == {"class": "None", "managedBy": "none", "specSource": "isvc"}
    assert entry["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                       "name": "chat-engine"}


def test_the_source_is_the_runtime_or_the_legacy_annotation() -> None:
    runtime = runtime_from_json({
        "apiVersion": "ome.io/v1beta1", "kind": "ClusterServingRuntime",
        "metadata": {"name": "srt"},
        "spec": {"engineConfig": {"runner": {"image": "x"}, "autoscaler": {"class": "None"}}}})
    raw = _raw()
    raw["spec"]["runtime"] = {"name": "srt"}
    entry = _engine(plan_service(ServiceSnapshot(isvc=raw, now=NOW, runtimes=(runtime,))))
    assert entry["autoscaler"]["specSource"] == "runtime"
    assert entry["autoscaler"]["class"] == "None"
    legacy = _raw("RawDeployment", annotations={"ome.io/autoscalerClass": "external"})
    entry = _engine(plan_service(ServiceSnapshot(isvc=legacy, now=NOW)))
    assert entry["autoscaler"] == {"class": "External", "managedBy": "external",
                                   "specSource": "legacy"}


def test_an_omenative_component_ignores_the_legacy_annotation_as_in_ome() -> None:
    """OME resolves an OMENative component's autoscaler with ``ResolveComponentAutoscaler``
    (no legacy layer; the annotation is RawDeployment-only): HPA from the default."""
    native = _raw(annotations={"ome.io/autoscalerClass": "external"})
    sp = plan_service(ServiceSnapshot(isvc=native, now=NOW))
    assert _engine(sp)["autoscaler"]["class"] == "HPA"
    assert _engine(sp)["autoscaler"]["specSource"] == "default"
    assert any(o["kind"] == "HorizontalPodAutoscaler" for _c, o in sp.applies)


def test_keda_mirrors_the_scaled_object_and_the_hpa_keda_derives() -> None:
    so = _scaled_object(status={
        "hpaName": "keda-hpa-scaledobject-chat-engine",
        "lastActiveTime": "2026-01-01T00:00:00Z",
        "conditions": [{"type": "Ready", "status": "True", "reason": "ScaledObjectReady",
                        "message": "ok"}, {"type": "Paused", "status": "False"}]})
    derived = _hpa("keda-hpa-scaledobject-chat-engine", owner={
        "kind": "ScaledObject", "name": "scaledobject-chat-engine", "controller": True},
        status={"currentReplicas": 3, "desiredReplicas": 4})
    snap = ServiceSnapshot(isvc=_raw(autoscaler=KEDA), now=NOW,
                           crds=frozenset({CRD_SCALED_OBJECT}), autoscalers=(so, derived))
    sp = plan_service(snap)
    auto = _engine(sp)["autoscaler"]
    assert auto["class"] == "KEDA" and auto["managedBy"] == "ome"
    assert (auto["currentReplicas"], auto["desiredReplicas"]) == (3, 4)
    assert auto["lastScaleTime"] == "2026-01-01T00:00:00Z"
    assert [(c["type"], c["reason"], c["lastTransitionTime"]) for c in auto["conditions"]] == [
        ("Ready", "ScaledObjectReady", "2026-01-01T00:00:00Z"),
        ("Paused", "Paused", "2026-01-01T00:00:00Z")]
    assert sp.deletes == ()  # KEDA's own HPA is never ours to delete
    # a later pass with the same KEDA state keeps the times, so the status does not churn
    later = plan_service(ServiceSnapshot(
        isvc={**snap.isvc, "status": sp.status}, now=NOW + timedelta(hours=1),
        crds=snap.crds, autoscalers=snap.autoscalers))
    assert _engine(later)["autoscaler"] == auto


def test_a_class_change_names_our_old_autoscaler_and_never_a_users() -> None:
    ours, users = _hpa(), _hpa("chat-engine-byo", owner=None)
    sp = plan_service(ServiceSnapshot(isvc=_raw(autoscaler={"class": "External"}), now=NOW,
                                      autoscalers=(ours, users)))
    assert sp.deletes == ({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                           "name": "chat-engine", "uid": "uid-chat-engine",
                           "component": "engine"},)
    # a user's object under OME's name (no owner reference of ours) is never named
    mine = _hpa(owner={**OWNER, "uid": "someone-else"})
    sp = plan_service(ServiceSnapshot(isvc=_raw(autoscaler={"class": "None"}), now=NOW,
                                      autoscalers=(mine,)))
    assert sp.deletes == ()


def test_keda_replaces_the_hpa_only_once_its_scaled_object_renders() -> None:
    without_crd = plan_service(ServiceSnapshot(isvc=_raw(autoscaler=KEDA), now=NOW,
                                               autoscalers=(_hpa(),)))
    assert without_crd.deletes == ()
    with_crd = plan_service(ServiceSnapshot(isvc=_raw(autoscaler=KEDA), now=NOW,
                                            crds=frozenset({CRD_SCALED_OBJECT}),
                                            autoscalers=(_hpa(),)))
    assert [d["kind"] for d in with_crd.deletes] == ["HorizontalPodAutoscaler"]
    back = plan_service(ServiceSnapshot(isvc=_raw(), now=NOW,
                                        autoscalers=(_scaled_object(), _hpa())))
    assert [(d["kind"], d["name"]) for d in back.deletes] == [
        ("ScaledObject", "scaledobject-chat-engine")]


def test_a_blocked_component_keeps_its_autoscaler_and_its_status() -> None:
    raw = _raw(autoscaler={"class": "External"}, leader={"runner": {"image": "x"}})
    raw["status"] = {"components": {"engine": {"autoscaler": {"class": "HPA"}}}}
    sp = plan_service(ServiceSnapshot(isvc=raw, now=NOW, autoscalers=(_hpa(),)))
    assert sp.deletes == ()
    assert sp.status is not None
    assert sp.status["components"]["engine"]["autoscaler"] == {"class": "HPA"}


def test_both_autoscalers_carry_the_scale_target_bounds_and_owner() -> None:
    keda = {**KEDA, "keda": {**KEDA["keda"], "cooldownPeriod": 60}}
    sp = plan_service(ServiceSnapshot(isvc=_raw(autoscaler=keda), now=NOW,
                                      crds=frozenset({CRD_SCALED_OBJECT})))
    (so,) = [o for _c, o in sp.applies if o["kind"] == "ScaledObject"]
    assert so["apiVersion"] == "keda.sh/v1alpha1"
    assert so["metadata"]["name"] == "scaledobject-chat-engine"
    assert so["metadata"]["ownerReferences"][0]["uid"] == "u"
    assert so["spec"] == {"scaleTargetRef": TARGET, "minReplicaCount": 1, "maxReplicaCount": 4,
                          "triggers": KEDA["keda"]["triggers"], "cooldownPeriod": 60}
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 300}}
    sp = plan_service(ServiceSnapshot(
        isvc=_raw(mode="RawDeployment", autoscaler={"class": "HPA", "hpa": {
            "behavior": behavior}}), now=NOW))
    (hpa,) = [o for _c, o in sp.applies if o["kind"] == "HorizontalPodAutoscaler"]
    assert hpa["apiVersion"] == "autoscaling/v2" and hpa["metadata"]["name"] == "chat-engine"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                             "name": "chat-engine"}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 4)
    assert hpa["spec"]["behavior"] == behavior
    assert hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 80

"""``kubectl ome autoscale status``: each component's autoscaler as OME v1.3's plugin reports it
(``reference/kubectl-ome/autoscale.md``), pure: the command reads, this module judges.

The evidence is ``status.components.<c>.autoscaler`` and ``.scaleTargetRef`` when the
InferenceService's status carries them (OME's fields). A status without them is judged as OME
judges it (``NotReported``, ``NoAutoscaler``); the command then also reads the autoscaler OME's
naming gives the component (the HPA ``<isvc>-<c>``, the ScaledObject ``scaledobject-<isvc>-<c>``)
and shows it in the SCALER rows, as ``--live-scaler`` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from attrs import frozen

from omenative_controller.cli.output_basics import table
from omenative_controller.cli.runtime_output import COMPONENTS, report
from omenative_core.model.timefmt import parse_time

__all__ = ["HPA_CONDITIONS", "KEDA_CONDITIONS", "ComponentReport", "LiveScale", "LiveScaler",
           "component_report", "live_scale", "live_scaler", "service_state", "status_json",
           "status_table", "status_wide"]

CLASSES = ("HPA", "KEDA", "External", "None")
_MANAGER = {"HPA": "ome", "KEDA": "ome", "External": "external", "None": "none"}
_SOURCES = ("isvc", "policy", "runtime", "legacy", "default")
HPA_CONDITIONS = {"AbleToScale": "ABLE-TO-SCALE", "ScalingActive": "SCALING-ACTIVE",
                  "ScalingLimited": "SCALING-LIMITED"}
"""An HPA's conditions and their rows."""
KEDA_CONDITIONS = {"Ready": "READY", "Active": "ACTIVE", "Fallback": "FALLBACK",
                   "Paused": "PAUSED"}
"""A ScaledObject's conditions and their rows."""
_ALIAS = {"UnknownComponentStatus": "UnknownComp", "AutoscalerNotReported": "NoAutoscaler",
          "ScaleTargetNotReported": "NoTarget", "ClassInvalid": "BadClass",
          "ManagedByInvalid": "BadManager", "OwnershipMismatch": "OwnerMismatch",
          "SpecSourceInvalid": "BadSpecSource", "UnexpectedScalerEvidence": "UnexpectedEv",
          "ReplicaEvidenceAmbiguous": "ReplicaAmbig", "ReplicaEvidenceInvalid": "BadReplica",
          "ScaleTargetInvalid": "BadTarget", "ConditionInvalid": "BadCondition",
          "ConditionConflict": "CondConflict"}
_PARTIAL = {"ScaleTargetNotReported", "ReplicaEvidenceAmbiguous", "ConditionInvalid",
            "ConditionConflict"}
_TARGET_KINDS = {"InferenceReplica": "IR", "Deployment": "Deployment"}


def _obj(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@frozen(kw_only=True)
class LiveScale:
    """``--live-scale``: the InferenceReplica's own counts (its scale subresource)."""

    evidence: str
    spec: int | None = None
    current: int | None = None


@frozen(kw_only=True)
class LiveScaler:
    """``--live-scaler``: the HPA or ScaledObject itself."""

    kind: str
    evidence: str
    generation: str = "Unproven"
    current: int | None = None
    desired: int | None = None
    conditions: tuple[tuple[str, str], ...] = ()


@frozen(kw_only=True)
class ComponentReport:
    """One component's column: its state, the reported fields and the issue codes."""

    component: str
    state: str
    klass: str = "Unknown"
    managed_by: str = "Unknown"
    spec_source: str = "Unknown"
    target_kind: str = ""
    target_name: str = ""
    target_namespace: str = ""
    target_evidence: str = "NotReported"
    current: int | None = None
    desired: int | None = None
    replica_evidence: str = "NotReported"
    last_scale: str = ""
    condition_evidence: str = "NotReported"
    conditions: tuple[tuple[str, str], ...] = ()
    issues: tuple[str, ...] = ()
    live: LiveScale | None = None
    scaler: LiveScaler | None = None


def _conditions(klass: str, raw: object) -> tuple[str, tuple[tuple[str, str], ...], list[str]]:
    """(COND-EVIDENCE, (type, status) pairs, issues) of the reported conditions."""
    if klass not in ("HPA", "KEDA"):
        return ("Unavailable" if not raw else "Invalid"), (), []
    if not raw:
        return "NotReported", (), []
    if not isinstance(raw, list):
        return "Invalid", (), ["ConditionInvalid"]
    allowed = HPA_CONDITIONS if klass == "HPA" else KEDA_CONDITIONS
    seen: dict[str, str] = {}
    issues: list[str] = []
    for cond in raw:
        kind, status = _obj(cond).get("type"), _obj(cond).get("status")
        if kind not in allowed or status not in ("True", "False", "Unknown"):
            issues.append("ConditionInvalid")
            continue
        if kind in seen and seen[kind] != status:
            issues.append("ConditionConflict")
        seen.setdefault(str(kind), str(status))
    return "Reported", tuple(seen.items()), issues


def _target(ref: Mapping[str, Any], namespace: str) -> tuple[dict[str, Any], list[str]]:
    if not ref:
        return {"target_evidence": "NotReported"}, ["ScaleTargetNotReported"]
    kind, name = ref.get("kind"), ref.get("name")
    if kind not in _TARGET_KINDS or not isinstance(name, str) or not name:
        return {"target_evidence": "Invalid"}, ["ScaleTargetInvalid"]
    return {"target_kind": str(kind), "target_name": name, "target_namespace": namespace,
            "target_evidence": "Reported"}, []


def _replicas(klass: str, auto: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    current, desired = auto.get("currentReplicas"), auto.get("desiredReplicas")
    stamp = auto.get("lastScaleTime")
    fields: dict[str, Any] = {"current": _count(current), "desired": _count(desired)}
    if stamp is not None:
        try:
            parse_time(str(stamp))
            fields["last_scale"] = str(stamp)
        except (TypeError, ValueError):
            return {**fields, "replica_evidence": "Invalid"}, ["ReplicaEvidenceInvalid"]
    if _MANAGER.get(klass) != "ome":
        unexpected = current is not None or desired is not None or stamp is not None
        return ({**fields, "replica_evidence": "Unavailable"},
                ["UnexpectedScalerEvidence"] if unexpected else [])
    if (current is not None and _count(current) is None) or \
            (desired is not None and _count(desired) is None):
        return {**fields, "replica_evidence": "Invalid"}, ["ReplicaEvidenceInvalid"]
    if not current or not desired:  # OME's status leaves a 0 out: it cannot be told apart
        return {**fields, "replica_evidence": "Ambiguous"}, ["ReplicaEvidenceAmbiguous"]
    return {**fields, "replica_evidence": "Reported"}, []


def component_report(comp: str, body: Mapping[str, Any], namespace: str) -> ComponentReport:
    """The column of ``comp`` from its ``status.components.<comp>`` entry."""
    auto = body.get("autoscaler")
    if not isinstance(auto, Mapping) or not auto:
        return ComponentReport(component=comp, state="NotReported",
                               issues=("AutoscalerNotReported",))
    issues: list[str] = []
    klass, manager, source = auto.get("class"), auto.get("managedBy"), auto.get("specSource")
    if klass not in CLASSES:
        issues.append("ClassInvalid")
    if manager not in ("ome", "external", "none"):
        issues.append("ManagedByInvalid")
    elif klass in CLASSES and _MANAGER[str(klass)] != manager:
        issues.append("OwnershipMismatch")
    if source not in _SOURCES:
        issues.append("SpecSourceInvalid")
    target, target_issues = _target(_obj(body.get("scaleTargetRef")), namespace)
    replicas, replica_issues = _replicas(str(klass), auto)
    evidence, conditions, cond_issues = _conditions(str(klass), auto.get("conditions"))
    if evidence == "Invalid" and not cond_issues:
        cond_issues = ["UnexpectedScalerEvidence"]
    issues += target_issues + replica_issues + cond_issues
    issues = list(dict.fromkeys(issues))
    state = "Invalid" if any(i not in _PARTIAL for i in issues) else (
        "Partial" if issues else "Reported")
    return ComponentReport(
        component=comp, state=state, klass=str(klass) if klass in CLASSES else "Unknown",
        managed_by=str(manager) if isinstance(manager, str) else "Unknown",
        spec_source=str(source) if isinstance(source, str) else "Unknown",
        condition_evidence=evidence, conditions=conditions, issues=tuple(issues),
        **target, **replicas)


def service_state(components: Sequence[ComponentReport], unknown: Sequence[str]) -> str:
    """The SERVICE column's STATE: the first of Invalid, Unavailable, Partial, Reported."""
    if unknown or any(c.state == "Invalid" for c in components):
        return "Invalid"
    if not components or all(c.state == "NotReported" for c in components):
        return "Unavailable"
    if any(c.state in ("Partial", "NotReported") for c in components):
        return "Partial"
    return "Reported"


def live_scale(report_: ComponentReport, ir: Mapping[str, Any] | None, error: str = ""
               ) -> LiveScale:
    """``--live-scale`` of one component from its InferenceReplica (None: not found)."""
    if report_.target_kind != "InferenceReplica":
        return LiveScale(evidence="Unsupported" if report_.target_kind else "NotSelected")
    if error or ir is None:
        return LiveScale(evidence=error or "NotFound")
    meta, status = _obj(ir.get("metadata")), _obj(ir.get("status"))
    if meta.get("name") != report_.target_name:
        return LiveScale(evidence="Invalid")
    if meta.get("deletionTimestamp"):
        return LiveScale(evidence="Deleting")
    if status.get("observedGeneration") != meta.get("generation"):
        return LiveScale(evidence="Stale")
    return LiveScale(evidence="Reported", spec=_count(_obj(ir.get("spec")).get("replicas")),
                     current=_count(status.get("replicas")) or 0)


def live_scaler(klass: str, obj: Mapping[str, Any] | None, error: str = "") -> LiveScaler:
    """``--live-scaler`` from the HPA or ScaledObject OME names for the component."""
    if klass not in ("HPA", "KEDA"):
        return LiveScaler(kind=klass, evidence="NotSelected")
    if error or obj is None:
        return LiveScaler(kind=klass, evidence=error or "NotFound")
    meta, status = _obj(obj.get("metadata")), _obj(obj.get("status"))
    if meta.get("deletionTimestamp"):
        return LiveScaler(kind=klass, evidence="Deleting")
    conds = tuple((str(c.get("type")), str(c.get("status")))
                  for c in status.get("conditions") or () if isinstance(c, Mapping))
    if klass == "KEDA":
        return LiveScaler(kind=klass, evidence="Reported", conditions=conds)
    matched = status.get("observedGeneration") == meta.get("generation")
    return LiveScaler(kind=klass, evidence="Reported" if matched else "Stale",
                      generation="Matched" if matched else "Unproven",
                      current=_count(status.get("currentReplicas")),
                      desired=_count(status.get("desiredReplicas")), conditions=conds)


# ---------------------------------------------------------------------------- output


def _short_time(stamp: str) -> str:
    try:
        when: datetime = parse_time(stamp)
    except (TypeError, ValueError):
        return stamp
    return when.strftime("%b%d %H:%MZ")


def _live_count(c: ComponentReport) -> str:
    live = c.live
    if live is None or live.evidence != "Reported" or c.replica_evidence != "Reported":
        return "Unknown"
    return "Equal" if (live.spec, live.current) == (c.desired, c.current) else "Drift"


def _text(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def _rows(c: ComponentReport) -> dict[str, str]:
    rows = {"STATE": c.state, "CLASS": c.klass, "MANAGED-BY": c.managed_by,
            "SPEC-SOURCE": c.spec_source,
            "TARGET-KIND": _TARGET_KINDS.get(c.target_kind, ""), "TARGET-NAME": c.target_name,
            "TARGET-EVIDENCE": c.target_evidence, "CURRENT": _text(c.current),
            "DESIRED": _text(c.desired), "REPLICA-EVIDENCE": c.replica_evidence}
    if c.state == "NotReported":
        rows = {"STATE": c.state}
    if c.live is not None:
        rows |= {"LIVE-EVIDENCE": c.live.evidence, "LIVE-SPEC": _text(c.live.spec),
                 "LIVE-CURRENT": _text(c.live.current), "LIVE-COUNT": _live_count(c)}
    if c.scaler is not None:
        s = c.scaler
        rows |= {"SCALER-KIND": s.kind, "SCALER-EVIDENCE": s.evidence,
                 "SCALER-GEN": s.generation if s.kind in ("HPA", "KEDA") else "",
                 "SCALER-CURRENT": _text(s.current) if s.current is not None else "",
                 "SCALER-DESIRED": _text(s.desired) if s.desired is not None else ""}
        rows |= {_SCALER_ROWS[k]: v for k, v in s.conditions if k in _SCALER_ROWS}
    if c.last_scale:
        rows["LAST-SCALE"] = _short_time(c.last_scale)
    if c.state != "NotReported":
        rows["COND-EVIDENCE"] = c.condition_evidence
        names = HPA_CONDITIONS if c.klass == "HPA" else KEDA_CONDITIONS
        rows |= {names[k]: v for k, v in c.conditions if k in names}
    return {k: v for k, v in rows.items() if v}


_SCALER_ROWS = {"AbleToScale": "SCALER-ABLE", "ScalingActive": "SCALER-SCALING",
                "ScalingLimited": "SCALER-LIMITED", "Ready": "SCALER-READY",
                "Active": "SCALER-ACTIVE", "Fallback": "SCALER-FALLBACK",
                "Paused": "SCALER-PAUSED"}
_ORDER = ("STATE", "CLASS", "MANAGED-BY", "SPEC-SOURCE", "TARGET-KIND", "TARGET-NAME",
          "TARGET-EVIDENCE", "CURRENT", "DESIRED", "REPLICA-EVIDENCE", "LIVE-EVIDENCE",
          "LIVE-SPEC", "LIVE-CURRENT", "LIVE-COUNT", "SCALER-KIND", "SCALER-EVIDENCE",
          "SCALER-GEN", "SCALER-CURRENT", "SCALER-DESIRED", "SCALER-ABLE", "SCALER-SCALING",
          "SCALER-LIMITED", "SCALER-READY", "SCALER-ACTIVE", "SCALER-FALLBACK",
          "SCALER-PAUSED", "LAST-SCALE",
          "COND-EVIDENCE", "ABLE-TO-SCALE", "SCALING-ACTIVE", "SCALING-LIMITED", "READY",
          "ACTIVE", "FALLBACK", "PAUSED")


def status_table(state: str, components: Sequence[ComponentReport],
                 unknown: Sequence[str]) -> str:
    """OME's FIELD/SERVICE/ENGINE/DECODER/ROUTER table, ISSUES last (one per row)."""
    by = {c.component: _rows(c) for c in components}
    rows = []
    for key in _ORDER:
        if key != "STATE" and not any(key in r for r in by.values()):
            continue
        rows.append([key, state if key == "STATE" else "-",
                     *(by.get(comp, {}).get(key, "-") for comp in COMPONENTS)])
    issues = {c.component: [_ALIAS[i] for i in c.issues] for c in components}
    service_issues = ["UnknownComp"] if unknown else []
    depth = max([len(service_issues), *(len(v) for v in issues.values())], default=0)
    for i in range(depth):
        rows.append(["ISSUES", service_issues[i] if i < len(service_issues) else "-",
                     *(issues.get(comp, [])[i] if i < len(issues.get(comp, [])) else "-"
                       for comp in COMPONENTS)])
    return table(("FIELD", "SERVICE", "ENGINE", "DECODER", "ROUTER"), rows)


def status_wide(state: str, components: Sequence[ComponentReport]) -> str:
    """One row per component with full values and exact issue codes."""
    rows = []
    for c in components:
        target = f"{c.target_kind}/{c.target_namespace}/{c.target_name}" if c.target_name \
            else "-"
        rows.append([state, c.component, c.state, c.klass, c.managed_by, c.spec_source, target,
                     c.target_evidence, _text(c.current), _text(c.desired), c.replica_evidence,
                     c.last_scale or "-", c.condition_evidence,
                     ",".join(f"{k}={v}" for k, v in c.conditions) or "-",
                     ",".join(c.issues) or "-"])
    return table(("STATE", "COMPONENT", "COMPONENT-STATE", "CLASS", "MANAGED-BY",
                  "SPEC-SOURCE", "TARGET", "TARGET-EVIDENCE", "CURRENT", "DESIRED",
                  "REPLICA-EVIDENCE", "LAST-SCALE", "CONDITION-EVIDENCE", "CONDITIONS",
                  "ISSUES"), rows)


def _component_json(c: ComponentReport) -> dict[str, Any]:
    out: dict[str, Any] = {"type": c.component, "state": c.state}
    if c.state == "NotReported":
        out["issues"] = [{"code": i} for i in c.issues]
        return out
    out |= {"class": c.klass, "managedBy": c.managed_by, "specSource": c.spec_source}
    target: dict[str, Any] = {"state": c.target_evidence}
    if c.target_name:
        target |= {"apiVersion": "ome.io/v1beta1" if c.target_kind == "InferenceReplica"
                   else "apps/v1", "kind": c.target_kind, "namespace": c.target_namespace,
                   "name": c.target_name}
    replicas: dict[str, Any] = {"state": c.replica_evidence}
    for key, value in (("currentReplicas", c.current), ("desiredReplicas", c.desired),
                       ("lastScaleTime", c.last_scale or None)):
        if value is not None:
            replicas[key] = value
    out |= {"target": target, "replicas": replicas,
            "conditions": {"state": c.condition_evidence,
                           "items": [{"type": k, "status": v} for k, v in c.conditions]}}
    if c.issues:
        out["issues"] = [{"code": i} for i in c.issues]
    if c.live is not None:
        out["liveScale"] = {"evidence": c.live.evidence, "specReplicas": c.live.spec,
                            "currentReplicas": c.live.current, "count": _live_count(c)}
    if c.scaler is not None:
        out["liveScaler"] = {"kind": c.scaler.kind, "evidence": c.scaler.evidence,
                             "generation": c.scaler.generation,
                             "currentReplicas": c.scaler.current,
                             "desiredReplicas": c.scaler.desired,
                             "conditions": [{"type": k, "status": v}
                                            for k, v in c.scaler.conditions]}
    return out


def status_json(namespace: str, name: str, state: str, components: Sequence[ComponentReport],
                unknown: Sequence[str], collected_at: str) -> dict[str, Any]:
    """OME's ``AutoscaleStatusReport``."""
    content = {"summary": {"state": state},
               "components": [_component_json(c) for c in components],
               "issues": [{"code": "UnknownComponentStatus", "component": u} for u in unknown]}
    return report("AutoscaleStatusReport", namespace, name, collected_at, content,
                  [] if state == "Reported" else ["PartialData"])

"""``kubectl ome autoscale explain``: which autoscaler each component should have, from the
InferenceService and its runtime (the active one: the pinned revision's spec when pinned),
compared with what the status reports (pure; OME v1.3 ``reference/kubectl-ome/autoscale.md``).

The layer is the first of ``isvc`` (the component's ``autoscaler``), ``policy`` (an
``autoscalerPolicyRef``: not read, ``?/policy``), ``runtime`` (the runtime's ``*Config``
``autoscaler``), ``legacy`` (``ome.io/autoscalerClass``, RawDeployment only as in OME) and
``default`` (HPA). The admission reasons are the core's (``validate_autoscaler``), named by
OME's WHY codes; ``keda-name-conflict`` / ``keda-config-invalid`` check the winning KEDA
block as OME's ``validKEDADispatch`` does, and the service-level ``inheritance-unavailable``
/ ``revision-inconsistent`` come from the ``runtime effective`` report (a SERVICE column).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from attrs import frozen

from omenative_controller.cli.output_basics import table
from omenative_controller.cli.runtime_output import report
from omenative_core.service import (
    InferenceService,
    ServingRuntime,
    effective_component,
    explain_mode,
)
from omenative_core.service.render import ANNOTATION_AUTOSCALER_CLASS
from omenative_core.service.validate_autoscaler import autoscaler_rejections

__all__ = ["SERVICE_WHY", "STATE_JSON", "Expectation", "expect", "explain_json",
           "explain_table", "service_issues"]

_MODES = {"RawDeployment": "Raw", "OMENative": "Native", "MultiNode": "Multi",
          "VirtualDeployment": "Virtual"}
_CLASSES = {"hpa": "HPA", "keda": "KEDA", "external": "External", "none": "None"}
_WHY = {"AutoscalerClassUnknown": ("class-invalid", "AutoscalerClassInvalid"),
        "KedaTriggersRequired": ("keda-triggers", "KEDATriggersRequired"),
        "HPAMetricMalformed": ("hpa-metric-invalid", "HPAMetricMalformed"),
        "KedaIdleBelowMin": ("keda-idle-invalid", "KEDAIdleNotBelowMinimum"),
        "AutoscalerAnnotationConflict": ("legacy-invalid", "LegacyAutoscalerInvalid")}
_SEVERITY = ("Invalid", "Unsupported", "Mismatch", "Partial", "OK")
STATE_JSON = {"Invalid": "Invalid", "Unsupported": "Unsupported", "Mismatch": "ReportedMismatch",
              "Partial": "Partial", "OK": "Consistent"}
"""The table's STATE and its JSON value."""


def _obj(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@frozen(kw_only=True)
class Expectation:
    """One component's column: expected and reported autoscaler, the check and its reasons
    (``why``: (short, code, state) most severe first)."""

    component: str
    mode: str
    desired: str
    low: int | None
    high: int | None
    zero: str
    target: str
    reported: str
    reported_target: str
    counts: str
    last_scale: str
    condition_evidence: str
    conditions: str
    check: str
    why: tuple[tuple[str, str, str], ...]
    policy: str = "Independent"

    @property
    def state(self) -> str:
        """The most severe state among the reasons (``OK`` without any)."""
        states = {w[2] for w in self.why}
        return next((s for s in _SEVERITY if s in states), "OK")


def _layer(isvc: InferenceService, runtime: ServingRuntime | None, comp: str, mode: str
           ) -> tuple[str, Mapping[str, Any] | None]:
    own = isvc.component(comp)
    if own is not None and isinstance(own.autoscaler, Mapping):
        return "isvc", own.autoscaler
    if own is not None and own.raw.get("autoscalerPolicyRef"):
        return "policy", None
    config = runtime.config(comp) if runtime is not None else None
    if config is not None and isinstance(config.autoscaler, Mapping):
        return "runtime", config.autoscaler
    if mode == "Raw" and isvc.annotations.get(ANNOTATION_AUTOSCALER_CLASS):
        return "legacy", {"class": isvc.annotations[ANNOTATION_AUTOSCALER_CLASS]}
    return "default", {"class": "HPA"}


def _zero(isvc: InferenceService, comp: str, mode: str, low: int | None, klass: str,
          block: Mapping[str, Any] | None) -> tuple[str, list[tuple[str, str, str]]]:
    keda = _obj((block or {}).get("keda"))
    idle = keda.get("idleReplicaCount")
    if low != 0 and idle != 0:
        return "-", []
    if mode not in ("Raw", "Native"):
        return "unsupported", [("zero-unsupported", "ScaleToZeroUnsupported", "Unsupported")]
    own = isvc.component(comp)
    inline_keda = own is not None and isinstance(own.autoscaler, Mapping) and \
        str(own.autoscaler.get("class", "")).lower() == "keda"
    if not inline_keda or klass != "KEDA" or not keda.get("triggers"):
        return "invalid", [("zero-invalid", "ScaleToZeroInvalid", "Invalid")]
    if mode == "Native" and low == 0 and idle != 0:
        return "unsupported", [("zero-unsupported", "ScaleToZeroUnsupported", "Unsupported")]
    return "yes", []


_DNS = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _keda_triggers_invalid(triggers: Sequence[Any]) -> bool:
    """KEDA's ``ValidateTriggers`` as far as it reads the spec: every trigger an object with a
    ``type``, trigger names unique."""
    names = [t.get("name") for t in triggers if isinstance(t, Mapping) and t.get("name")]
    return len(names) != len(set(names)) or \
        any(not isinstance(t, Mapping) or not t.get("type") for t in triggers)


def _keda_dispatch_invalid(keda: Mapping[str, Any], low: int | None, target: str) -> bool:
    """Whether the ScaledObject OME would create from ``keda`` fails KEDA's own checks (OME's
    ``validKEDADispatch``): polling interval < 1, cooldown or idle count < 0, bad triggers,
    a fallback that is malformed or on cpu/memory triggers only, cpu/memory triggers only
    with ``minReplicas`` 0, an HPA name that is not a DNS name of at most 63 characters."""
    if any(v is not None and v < floor for v, floor in (
            (_int(keda.get("pollingInterval")), 1), (_int(keda.get("cooldownPeriod")), 0),
            (_int(keda.get("idleReplicaCount")), 0))):
        return True
    triggers = list(keda.get("triggers") or ())
    if _keda_triggers_invalid(triggers):
        return True
    resource_only = bool(triggers) and all(t.get("type") in ("cpu", "memory")
                                           for t in triggers)
    fallback = keda.get("fallback")
    if fallback is not None:
        fb = _obj(fallback)
        counts = (_int(fb.get("failureThreshold")), _int(fb.get("replicas")))
        if resource_only or any(c is None or c < 0 for c in counts):
            return True
    if resource_only and low == 0:
        return True
    config = _obj(_obj(keda.get("advanced")).get("horizontalPodAutoscalerConfig"))
    hpa = str(config.get("name") or f"keda-hpa-scaledobject-{target[-50:]}")
    return len(hpa) > 63 or not _DNS.match(hpa)


def _keda_why(block: Mapping[str, Any] | None, klass: str, low: int | None, target: str
              ) -> list[tuple[str, str, str]]:
    """``keda-name-conflict`` / ``keda-config-invalid`` for the winning KEDA block."""
    keda = _obj((block or {}).get("keda"))
    if klass != "KEDA" or not keda.get("triggers"):
        return []
    config = _obj(_obj(keda.get("advanced")).get("horizontalPodAutoscalerConfig"))
    if config.get("name") == target:
        return [("keda-name-conflict", "ReservedHPANameCollision", "Invalid")]
    if _keda_dispatch_invalid(keda, low, target):
        return [("keda-config-invalid", "KEDAConfigurationInvalid", "Invalid")]
    return []


SERVICE_WHY = {"InheritanceUnavailable": ("inheritance-unavailable", "InheritanceUnavailable"),
               "ActiveRevisionInconsistent": ("revision-inconsistent",
                                              "ActiveRevisionInconsistent")}
"""The service-level reasons (code -> (WHY alias, code)); both are ``Partial``."""


def service_issues(issues: Sequence[str], pin_state: str, pinned: bool) -> list[str]:
    """The service-level reason codes from the ``runtime effective`` report of the
    InferenceService: ``InheritanceUnavailable`` when its runtime's chain could not be
    resolved, ``ActiveRevisionInconsistent`` when it is pinned to a revision that cannot be
    checked against its runtime (the revision fails the checks, is missing or disabled, or
    the live runtime is unavailable)."""
    out = []
    if "InheritanceUnavailable" in issues:
        out.append("InheritanceUnavailable")
    if pinned and pin_state not in ("Resolved", "AwaitingPin", "NotApplicable",
                                    "InvalidIntent"):
        out.append("ActiveRevisionInconsistent")
    return out


def _reported(body: Mapping[str, Any]) -> tuple[str, str, str, str, str, str, str]:
    """(REPORTED, REPORTED-TARGET, CUR/DES, LAST-SCALE, CONDITION-EVIDENCE, CONDITIONS,
    class/layer/manager key) of the status entry."""
    auto = _obj(body.get("autoscaler"))
    if not auto:
        return "-", "-", "-", "-", "missing", "-", ""
    key = f"{auto.get('class')}/{auto.get('specSource')}/{auto.get('managedBy')}"
    ref = _obj(body.get("scaleTargetRef"))
    target = f"{ref.get('kind')}/{ref.get('name')}" if ref.get("name") else "-"
    cur, des = auto.get("currentReplicas") or 0, auto.get("desiredReplicas") or 0
    counts = f"{cur}/{des}" + ("?" if not cur or not des else "")
    conds = [c for c in auto.get("conditions") or () if isinstance(c, Mapping)]
    evidence = "reported" if conds else "missing"
    text = ",".join(f"{c.get('type')}={c.get('status')}" for c in conds) or "-"
    return key, target, counts, str(auto.get("lastScaleTime") or "-"), evidence, text, key


def _compare(desired: str, target: str, body: Mapping[str, Any], layer: str,
             stale: bool) -> tuple[str, list[tuple[str, str, str]]]:
    auto = _obj(body.get("autoscaler"))
    if not auto:
        return "missing", [("status-missing", "StatusNotReported", "Partial")]
    if stale:
        return "unknown", [("status-stale", "StatusStale", "Partial")]
    if layer == "policy" or "/" not in desired:
        return "unknown", []
    klass, source = desired.split("/", 1)
    manager = {"HPA": "ome", "KEDA": "ome", "External": "external", "None": "none"}.get(klass)
    why = []
    if auto.get("class") != klass:
        why.append(("class-mismatch", "ReportedClassMismatch", "Mismatch"))
    if auto.get("managedBy") != manager:
        why.append(("owner-mismatch", "ReportedOwnershipMismatch", "Mismatch"))
    if auto.get("specSource") != source:
        why.append(("source-mismatch", "ReportedSpecSourceMismatch", "Mismatch"))
    ref = _obj(body.get("scaleTargetRef"))
    if f"{ref.get('kind')}/{ref.get('name')}" != target:
        why.append(("target-mismatch", "ReportedTargetMismatch", "Mismatch"))
    return ("mismatch" if why else "match"), why


def expect(isvc: InferenceService, runtime: ServingRuntime | None, comp: str,
           status: Mapping[str, Any]) -> Expectation:
    """The column of ``comp``; ``status``: the InferenceService's whole status."""
    mode = _MODES.get(explain_mode(isvc, runtime, comp).mode, "Raw")
    merged = effective_component(isvc, runtime, comp)
    layer, block = _layer(isvc, runtime, comp, mode)
    why: list[tuple[str, str, str]] = []
    raw_class = str((block or {}).get("class") or "HPA")
    klass = _CLASSES.get(raw_class.lower(), raw_class)
    for rej in autoscaler_rejections(isvc):
        if rej.field.startswith(f"spec.{comp}.") and rej.reason in _WHY:
            short, code = _WHY[rej.reason]
            why.append((short, code, "Invalid"))
    low = merged.min_replicas if merged is not None else None
    high_set = merged.max_replicas if merged is not None else None
    if low is not None and high_set is not None and low > high_set:
        why.append(("bounds-invalid", "ReplicaBoundsInvalid", "Invalid"))
    zero, zero_why = _zero(isvc, comp, mode, low, klass, block)
    why += zero_why
    name = f"{isvc.name}-{comp}"
    if mode in ("Raw", "Native") and layer != "policy" and \
            not any(w[2] == "Invalid" for w in why):
        why += _keda_why(block, klass, low, name)
    if mode not in ("Raw", "Native"):
        why.append(("mode-unsupported", "DeploymentModeUnsupported", "Unsupported"))
        desired, target = "unsupported", "unsupported"
    elif layer == "policy":
        why.append(("policy-unavailable", "PolicyResolutionUnavailable", "Partial"))
        desired, target = "?/policy", "?"
    else:
        desired = "invalid" if any(w[2] == "Invalid" for w in why) else f"{klass}/{layer}"
        target = ("Deployment/" if mode == "Raw" else "InferenceReplica/") + name
    body = _obj(_obj(status.get("components")).get(comp))
    gen = status.get("observedGeneration")
    stale = isinstance(gen, int) and gen < (isvc.metadata.get("generation") or 0)
    check, compare_why = _compare(desired, target, body, layer, stale)
    reported, rtarget, counts, last, cond_ev, conds, _key = _reported(body)
    high = high_set if high_set is not None else max(low or 1, 1)
    order = {s: i for i, s in enumerate(_SEVERITY)}
    all_why = sorted([*why, *compare_why], key=lambda w: order[w[2]])
    return Expectation(component=comp, mode=mode, desired=desired, low=low,
                       high=None if layer == "policy" else high, zero=zero, target=target,
                       reported=reported, reported_target=rtarget, counts=counts,
                       last_scale=last, condition_evidence=cond_ev, conditions=conds,
                       check="invalid" if desired == "invalid" else check,
                       why=tuple(all_why), policy=_scaling_policy(isvc, runtime))


def _scaling_policy(isvc: InferenceService, runtime: ServingRuntime | None) -> str:
    """``spec.scalingPolicy.mode`` of the InferenceService, else of the runtime, else
    ``Independent``."""
    for spec in (isvc.spec, runtime.spec if runtime is not None else {}):
        mode = _obj(spec.get("scalingPolicy")).get("mode")
        if isinstance(mode, str) and mode:
            return mode
    return "Independent"


def _state(columns: Sequence[Expectation], service: Sequence[str] = ()) -> str:
    states = {c.state for c in columns} | ({"Partial"} if service else set())
    return next((s for s in _SEVERITY if s in states), "OK")


def explain_table(columns: Sequence[Expectation], service: Sequence[str] = ()) -> str:
    """OME's FIELD table, one column per component, STATE repeated in each; a SERVICE column
    when there are service-level reasons (``service``: their codes)."""
    state = _state(columns, service)

    def why(c: Expectation) -> str:
        if not c.why:
            return "-"
        return c.why[0][0] + (f",+{len(c.why) - 1}" if len(c.why) > 1 else "")

    def rng(c: Expectation) -> str:
        if c.high is None:
            return "?"
        return "invalid" if any(w[0] == "bounds-invalid" for w in c.why) else \
            f"{c.low if c.low is not None else 1}..{c.high}"

    rows: list[tuple[str, Callable[[Expectation], str]]] = [
            ("STATE", lambda c: state), ("MODE", lambda c: c.mode),
            ("POLICY", lambda c: c.policy), ("DESIRED", lambda c: c.desired),
            ("RANGE", rng), ("ZERO", lambda c: c.zero),
            ("EXPECTED-TARGET", lambda c: c.target), ("REPORTED", lambda c: c.reported),
            ("REPORTED-TARGET", lambda c: c.reported_target), ("CUR/DES", lambda c: c.counts),
            ("LAST-SCALE", lambda c: c.last_scale),
            ("CONDITION-EVIDENCE", lambda c: c.condition_evidence),
            ("CONDITIONS", lambda c: c.conditions), ("CHECK", lambda c: c.check),
            ("WHY", why)]
    body = [[label, *(cell(c) for c in columns)] for label, cell in rows]
    if not service:
        return table(("FIELD", *(c.component.upper() for c in columns)), body)
    policy = columns[0].policy if columns else "Independent"
    extra = {"STATE": state, "POLICY": policy,
             "WHY": ",".join(SERVICE_WHY[code][0] for code in service)}
    return table(("FIELD", *(c.component.upper() for c in columns), "SERVICE"),
                 [[*row, extra.get(row[0], "-")] for row in body])


def explain_json(namespace: str, name: str, columns: Sequence[Expectation],
                 collected_at: str, service: Sequence[str] = ()) -> dict[str, Any]:
    """OME's ``AutoscaleExplainReport``: every reason, not only the first (``service``: the
    service-level codes, in ``content.issues``)."""
    state = _state(columns, service)
    content = {"summary": {"state": STATE_JSON[state]},
               "components": [{"type": c.component, "mode": c.mode, "desired": c.desired,
                               "range": {"min": c.low, "max": c.high}, "zero": c.zero,
                               "expectedTarget": c.target, "reported": c.reported,
                               "reportedTarget": c.reported_target, "check": c.check,
                               "state": STATE_JSON[c.state],
                               "reasons": [{"why": w[0], "code": w[1], "state": w[2]}
                                           for w in c.why]} for c in columns],
               "issues": [{"code": code} for code in service]}
    return report("AutoscaleExplainReport", namespace, name, collected_at, content,
                  [] if state == "OK" else ["PartialData"])

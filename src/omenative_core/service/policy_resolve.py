"""``spec.<component>.autoscalerPolicyRef``: which autoscaler a component gets from its policy.

As OME v1.3 (ome-docs ``concepts/serving/autoscaler-policy.md``; ome-projects/ome
``pkg/controller/v1beta1/inferenceservice/components/base.go``
``resolveComponentAutoscaling`` / ``dispatchIRAutoscaler`` / ``emitHoldEvent``):

* An inline ``autoscaler`` outranks the reference (``InlinePrecedence``, the reference
  reported as ``shadowedPolicyRef``); otherwise the policy, rendered for the component's
  effective bounds (``autoscaler_policy.render_policy``), outranks the runtime's block and
  the default (``RenderedFromPolicy``, ``specSource: policy``, ``policy`` provenance).
* Fail-closed holds: the policy is missing (``PolicyNotFound``), does not render
  (``PolicyInvalid``), or is ``KEDA`` while KEDA's CRD is absent (``ClassUnavailable``).
  The component keeps its workload and its live autoscaler, re-applied as it is with the
  current replica bounds; with none, none is created; nothing falls back to the runtime's
  block or the default HPA, and nothing is deleted. ``AutoscalerResolved`` is False with
  the reason and a message starting ``holding last-known-good scaler:``; a Warning
  ``AutoscalerPolicyHold`` is raised when the hold starts (not again while the status
  already reports the same reason).
* A MultiNode component gets no autoscaler: ``UnsupportedDeploymentMode`` (False).

The policies are an input of the snapshot (None: the feature is off, references are kept
and ignored). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from attrs import evolve, frozen

from omenative_core.labels import LABEL_COMPONENT, LABEL_ISVC
from omenative_core.service.autoscaler_policy import (
    AUTOSCALER_POLICY_KIND,
    PolicyProblem,
    RenderContext,
    policy_problems,
    portable_digest,
    render_policy,
)
from omenative_core.service.merge import effective_component
from omenative_core.service.model import InferenceService, ServingRuntime
from omenative_core.service.modes import MODE_MULTI_NODE
from omenative_core.service.plan import (
    CRD_SCALED_OBJECT,
    ComponentPlan,
    ServiceConfig,
    ServiceEvent,
    ServicePlan,
)

__all__ = [
    "CONDITION_AUTOSCALER_RESOLVED",
    "EVENT_POLICY_HOLD",
    "HOLD_REASONS",
    "PolicyOutcome",
    "hold_events",
    "policy_ref",
    "resolve_policies",
    "with_policy_outcomes",
]

CONDITION_AUTOSCALER_RESOLVED: Final = "AutoscalerResolved"
"""Per-component condition under ``status.components.<c>.autoscaler.conditions``, only on
components with a reference."""
EVENT_POLICY_HOLD: Final = "AutoscalerPolicyHold"
"""Warning Event on the InferenceService when a component starts holding."""
HOLD_REASONS: Final = frozenset({"PolicyNotFound", "PolicyInvalid", "ClassUnavailable"})
"""``AutoscalerResolved`` reasons that hold the component's last autoscaler."""
HOLD_PREFIX: Final = "holding last-known-good scaler: "

_SCALER_KINDS: Final = ("ScaledObject", "HorizontalPodAutoscaler")
_BOUNDS: Final = {"ScaledObject": ("minReplicaCount", "maxReplicaCount"),
                  "HorizontalPodAutoscaler": ("minReplicas", "maxReplicas")}
_CLASS_OF_KIND: Final = {"ScaledObject": "KEDA", "HorizontalPodAutoscaler": "HPA"}


@frozen(kw_only=True)
class PolicyOutcome:
    """One referencing component's resolution: ``reason`` (``AutoscalerResolved``'s),
    ``block`` the ``autoscaler`` block to render with (the policy's, or on a hold the class
    of the held scaler), ``held`` the live scaler to keep (hold only)."""

    component: str
    name: str
    reason: str
    message: str
    block: dict[str, Any] | None = None
    provenance: dict[str, Any] | None = None
    shadowed: dict[str, Any] | None = None
    held: dict[str, Any] | None = None
    low: int = 0
    high: int = 0

    @property
    def hold(self) -> bool:
        """The component keeps its last autoscaler (fail-closed)."""
        return self.reason in HOLD_REASONS

    @property
    def status(self) -> str:
        """``AutoscalerResolved``'s status."""
        return "True" if self.reason in ("RenderedFromPolicy", "InlinePrecedence") else "False"


def policy_ref(isvc: InferenceService, component: str) -> Mapping[str, Any] | None:
    """The component's ``autoscalerPolicyRef`` when it names a policy."""
    comp = isvc.component(component)
    ref = comp.raw.get("autoscalerPolicyRef") if comp is not None else None
    return ref if isinstance(ref, Mapping) and ref.get("name") else None


def _bounds(isvc: InferenceService, runtime: ServingRuntime | None, component: str,
            config: ServiceConfig) -> tuple[int, int]:
    """The effective (defaulted) bounds, as ``scale.resolve_scale`` computes them."""
    merged = effective_component(isvc, runtime, component)
    low_raw = merged.min_replicas if merged is not None else None
    low = max(low_raw if low_raw is not None else config.default_min_replicas, 1)
    high = (merged.max_replicas if merged is not None else None) or \
        config.default_max_replicas.get(component, 0)
    return low, max(high, low)


def _ours(obj: Mapping[str, Any], isvc: InferenceService, component: str) -> bool:
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    if labels.get(LABEL_ISVC) != isvc.name or labels.get(LABEL_COMPONENT) != component:
        return False
    return bool(isvc.uid) and any(
        r.get("kind") == "InferenceService" and r.get("controller") and r.get("uid") == isvc.uid
        for r in meta.get("ownerReferences") or ())


def _held_scaler(isvc: InferenceService, component: str, live: Iterable[Mapping[str, Any]],
                 low: int, high: int) -> dict[str, Any] | None:
    """Our live ScaledObject (else HPA) of ``component``, as it is, with today's bounds."""
    mine = [o for o in live if o.get("kind") in _SCALER_KINDS and _ours(o, isvc, component)
            and not (o.get("metadata") or {}).get("deletionTimestamp")]
    mine.sort(key=lambda o: _SCALER_KINDS.index(str(o.get("kind"))))
    if not mine:
        return None
    obj = mine[0]
    meta = obj.get("metadata") or {}
    kind = str(obj["kind"])
    spec = dict(obj.get("spec") or {})
    low_key, high_key = _BOUNDS[kind]
    spec[low_key], spec[high_key] = low, high
    keep = {k: meta[k] for k in ("name", "namespace", "labels", "annotations",
                                 "ownerReferences") if meta.get(k) is not None}
    return {"apiVersion": obj.get("apiVersion"), "kind": kind, "metadata": keep, "spec": spec}


def _hold(component: str, name: str, reason: str, detail: str, isvc: InferenceService,
          live: Iterable[Mapping[str, Any]], low: int, high: int) -> PolicyOutcome:
    held = _held_scaler(isvc, component, live, low, high)
    klass = _CLASS_OF_KIND[str(held["kind"])] if held is not None else "External"
    return PolicyOutcome(component=component, name=name, reason=reason, message=detail,
                         block={"class": klass}, held=held, low=low, high=high)


def _shadowed(isvc: InferenceService, component: str, name: str,
              policy: Mapping[str, Any] | None, spec: Mapping[str, Any],
              providers: Mapping[str, Mapping[str, Any]], low: int, high: int) -> PolicyOutcome:
    """An inline ``autoscaler`` outranks the reference: what the policy would render."""
    shadowed: dict[str, Any] = {"name": name}
    if policy is not None:
        shadowed["portableDigest"] = portable_digest(spec)
        ctx = RenderContext(isvc.namespace, isvc.name, component, low, high)
        would = render_policy(spec, name, providers, ctx)
        if not isinstance(would, PolicyProblem):
            shadowed["wouldRenderDigest"] = would.resolved_digest
    return PolicyOutcome(component=component, name=name, reason="InlinePrecedence",
                         message=f"inline autoscaler outranks AutoscalerPolicy {name!r}",
                         shadowed=shadowed, low=low, high=high)


def _hold_cause(isvc: InferenceService, name: str, kind: object,
                policy: Mapping[str, Any] | None, spec: Mapping[str, Any],
                crds: frozenset[str]) -> tuple[str, str] | None:
    """Why the referenced policy cannot render here (reason, detail), before rendering."""
    if kind != AUTOSCALER_POLICY_KIND:
        return "PolicyInvalid", f"policy kind {kind} is reserved"
    if policy is None:
        return "PolicyNotFound", f"AutoscalerPolicy {name!r} not found in namespace " \
            f"{isvc.namespace}"
    problems = policy_problems(spec)
    if problems:
        return "PolicyInvalid", f"AutoscalerPolicy {name!r}: {problems[0].reason}: " \
            f"{problems[0].detail}"
    if spec.get("class") == "KEDA" and CRD_SCALED_OBJECT not in crds:
        return "ClassUnavailable", f"AutoscalerPolicy {name!r} is class KEDA and KEDA's " \
            "ScaledObject CRD is not installed"
    return None


def _resolve_one(isvc: InferenceService, component: str, ref: Mapping[str, Any],
                 policies: Mapping[str, Mapping[str, Any]],
                 providers: Mapping[str, Mapping[str, Any]], crds: frozenset[str],
                 bounds: tuple[int, int], live: tuple[Mapping[str, Any], ...]) -> PolicyOutcome:
    name = str(ref["name"])
    low, high = bounds
    policy = policies.get(name)
    spec = (policy or {}).get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    inline = isvc.component(component)
    if inline is not None and inline.autoscaler is not None:
        return _shadowed(isvc, component, name, policy, spec, providers, low, high)
    cause = _hold_cause(isvc, name, ref.get("kind") or AUTOSCALER_POLICY_KIND, policy, spec,
                        crds)
    if cause is not None:
        return _hold(component, name, *cause, isvc, live, low, high)
    result = render_policy(spec, name, providers,
                           RenderContext(isvc.namespace, isvc.name, component, low, high))
    if isinstance(result, PolicyProblem):
        return _hold(component, name, "PolicyInvalid", f"{result.reason}: {result.detail}",
                     isvc, live, low, high)
    provenance: dict[str, Any] = {"name": name}
    generation = ((policy or {}).get("metadata") or {}).get("generation")
    if isinstance(generation, int):
        provenance["observedGeneration"] = generation
    provenance.update(portableDigest=result.portable_digest,
                      resolvedDigest=result.resolved_digest)
    return PolicyOutcome(component=component, name=name, reason="RenderedFromPolicy",
                         message=f"rendered from AutoscalerPolicy {name!r}",
                         block=result.block, provenance=provenance, low=low, high=high)


def resolve_policies(isvc: InferenceService, runtime: ServingRuntime | None,
                     policies: Iterable[Mapping[str, Any]],
                     providers: Mapping[str, Mapping[str, Any]], crds: frozenset[str],
                     config: ServiceConfig, live: Iterable[Mapping[str, Any]] = (),
                     ) -> dict[str, PolicyOutcome]:
    """Each referencing component's outcome. ``policies``: the AutoscalerPolicies of the
    ISVC's namespace; ``providers``: the metric provider bindings; ``live``: the ISVC's
    HPAs and ScaledObjects."""
    by_name = {str((p.get("metadata") or {}).get("name")): p for p in policies
               if not (p.get("metadata") or {}).get("deletionTimestamp")}
    scalers = tuple(live)
    out: dict[str, PolicyOutcome] = {}
    for component in isvc.declared_components:
        ref = policy_ref(isvc, component)
        if ref is None:
            continue
        out[component] = _resolve_one(isvc, component, ref, by_name, providers, crds,
                                      _bounds(isvc, runtime, component, config), scalers)
    return out


def _previous_policy(isvc: InferenceService, component: str) -> object:
    entry = ((isvc.status.get("components") or {}).get(component) or {})
    return ((entry.get("autoscaler") or {}) if isinstance(entry, Mapping) else {}).get("policy")


def _with_outcome(cp: ComponentPlan, isvc: InferenceService, o: PolicyOutcome) -> ComponentPlan:
    if cp.mode == MODE_MULTI_NODE:
        o = evolve(o, reason="UnsupportedDeploymentMode", block=None, held=None,
                   message="MultiNode components get no autoscaler")
    autoscaler = dict(cp.autoscaler or {})
    objects = cp.objects
    if o.reason == "RenderedFromPolicy":
        autoscaler.update({"class": (o.block or {}).get("class", "HPA"),
                           "specSource": "policy", "policy": o.provenance})
    elif o.reason == "InlinePrecedence":
        autoscaler["shadowedPolicyRef"] = o.shadowed
    elif o.hold:
        objects = tuple(x for x in cp.objects if x.get("kind") not in _SCALER_KINDS)
        if o.held is not None:
            objects = (*objects, o.held)
        autoscaler.update({"class": (o.block or {}).get("class", "External"),
                           "specSource": "policy", "hold": True})
        previous = _previous_policy(isvc, cp.component)
        if isinstance(previous, Mapping) and previous.get("name"):
            autoscaler["policy"] = dict(previous)
    message = HOLD_PREFIX + o.message if o.hold else o.message
    autoscaler["resolved"] = {"type": CONDITION_AUTOSCALER_RESOLVED, "status": o.status,
                              "reason": o.reason, "message": message}
    return evolve(cp, objects=objects, autoscaler=autoscaler)


def with_policy_outcomes(plan: ServicePlan, isvc: InferenceService,
                         outcomes: Mapping[str, PolicyOutcome]) -> ServicePlan:
    """``plan`` with each referencing component's outcome applied: the status fields
    (``specSource``, ``policy``, ``shadowedPolicyRef``, the ``AutoscalerResolved``
    condition) and, on a hold, its scaler objects replaced by the held one."""
    if not outcomes:
        return plan
    comps = tuple(_with_outcome(cp, isvc, outcomes[cp.component])
                  if cp.component in outcomes and not cp.blocked else cp
                  for cp in plan.components)
    return evolve(plan, components=comps)


def _already_held(isvc: InferenceService, component: str, reason: str) -> bool:
    entry = (isvc.status.get("components") or {}).get(component) or {}
    conditions = ((entry.get("autoscaler") or {}) if isinstance(entry, Mapping)
                  else {}).get("conditions") or ()
    return any(isinstance(c, Mapping) and c.get("type") == CONDITION_AUTOSCALER_RESOLVED
               and c.get("status") == "False" and c.get("reason") == reason
               for c in conditions)


def hold_events(isvc: InferenceService, plan: ServicePlan) -> tuple[ServiceEvent, ...]:
    """A Warning ``AutoscalerPolicyHold`` per component whose hold starts in this pass."""
    out: list[ServiceEvent] = []
    for cp in plan.components:
        resolved = (cp.autoscaler or {}).get("resolved")
        if not isinstance(resolved, Mapping) or resolved.get("reason") not in HOLD_REASONS:
            continue
        if _already_held(isvc, cp.component, str(resolved["reason"])):
            continue
        detail = str(resolved.get("message", "")).removeprefix(HOLD_PREFIX)
        out.append(ServiceEvent(
            type="Warning", reason=EVENT_POLICY_HOLD,
            message=f"{cp.component} autoscaler is holding last-known-good "
                    f"({resolved['reason']}): {detail}"))
    return tuple(out)

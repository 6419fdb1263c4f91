"""An AutoscalerPolicy's ``status``: ``Ready``, ``InUse``, ``attachedComponents``.

As OME v1.3 (ome-projects/ome ``pkg/apis/ome/v1beta1/autoscalerpolicy_types.go`` at
3731e1e7, ``AutoscalerPolicyStatus``; ome-docs ``concepts/serving/autoscaler-policy.md``,
"Conditions and status"):

* ``Ready``: True ``TemplatesValid`` when the policy is valid and its providers are bound,
  otherwise False with ``ProviderUnknown`` or the first validation problem's reason.
* ``InUse``: True ``Attached`` while a component of an InferenceService in the policy's
  namespace references it, otherwise False ``NoConsumers``.
* ``attachedComponents``: how many components reference it (an engine and a decoder count
  two), left out at 0; ``observedGeneration`` and ``portableDigest``.

Pure: the policy and the InferenceServices' JSON in, the status out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from omenative_core.conditions import merge_condition_json
from omenative_core.service.autoscaler_policy import (
    AUTOSCALER_POLICY_KIND,
    CONDITION_IN_USE,
    CONDITION_READY,
    policy_problems,
    portable_digest,
)

__all__ = ["attached", "policy_status", "referencing"]

_COMPONENTS = ("engine", "decoder", "router")


def _name_ns(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def referencing(isvc: Mapping[str, Any]) -> set[str]:
    """The names of the AutoscalerPolicies an InferenceService's components reference."""
    spec = isvc.get("spec") or {}
    out: set[str] = set()
    for c in _COMPONENTS:
        comp = spec.get(c)
        ref = comp.get("autoscalerPolicyRef") if isinstance(comp, Mapping) else None
        if isinstance(ref, Mapping) and ref.get("name") and \
                (ref.get("kind") or AUTOSCALER_POLICY_KIND) == AUTOSCALER_POLICY_KIND:
            out.add(str(ref["name"]))
    return out


def attached(policy: Mapping[str, Any], isvcs: Iterable[Mapping[str, Any]]) -> list[str]:
    """``isvc/component`` of each component in the policy's namespace that references it."""
    namespace, name = _name_ns(policy)
    out: list[str] = []
    for isvc in isvcs:
        ns, isvc_name = _name_ns(isvc)
        if ns != namespace or (isvc.get("metadata") or {}).get("deletionTimestamp"):
            continue
        spec = isvc.get("spec") or {}
        for c in _COMPONENTS:
            comp = spec.get(c)
            ref = comp.get("autoscalerPolicyRef") if isinstance(comp, Mapping) else None
            if isinstance(ref, Mapping) and ref.get("name") == name and \
                    (ref.get("kind") or AUTOSCALER_POLICY_KIND) == AUTOSCALER_POLICY_KIND:
                out.append(f"{isvc_name}/{c}")
    return sorted(out)


def policy_status(policy: Mapping[str, Any], isvcs: Iterable[Mapping[str, Any]],
                  providers: Mapping[str, Mapping[str, Any]], now: datetime) -> dict[str, Any]:
    """The whole ``status`` to write for ``policy``."""
    spec = policy.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    problems = policy_problems(spec, providers)
    users = attached(policy, isvcs)
    ready: dict[str, Any] = ({"type": CONDITION_READY, "status": "True", "reason": "TemplatesValid",
              "message": "the policy renders and its metric providers are bound"}
             if not problems else
             {"type": CONDITION_READY, "status": "False", "reason": problems[0].reason,
              "message": problems[0].detail})
    in_use: dict[str, Any] = ({"type": CONDITION_IN_USE, "status": "True", "reason": "Attached",
               "message": f"referenced by {len(users)} component(s)"}
              if users else
              {"type": CONDITION_IN_USE, "status": "False", "reason": "NoConsumers",
               "message": "no component references the policy"})
    generation = (policy.get("metadata") or {}).get("generation")
    old = policy.get("status")
    out: dict[str, Any] = {}
    if isinstance(generation, int):
        for c in (ready, in_use):
            c["observedGeneration"] = generation
        out["observedGeneration"] = generation
    out["portableDigest"] = portable_digest(spec)
    if users:
        out["attachedComponents"] = len(users)
    out["conditions"] = merge_condition_json(
        old.get("conditions") if isinstance(old, Mapping) else None, [ready, in_use], now)
    return out

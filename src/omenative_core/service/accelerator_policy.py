"""OME's accelerator selection by policy, when a component names no AcceleratorClass.

OME@cfa05c69 ``pkg/acceleratorclassselector/selector.go`` ``GetAcceleratorClass``: with no
class named (``acceleratorOverride.acceleratorClass``, else
``spec.acceleratorSelector.acceleratorClass``), the policy (``acceleratorOverride.policy``
of the component, else ``spec.acceleratorSelector.policy``) picks one among the runtime's
``acceleratorRequirements.acceleratorClasses``: the candidates are those classes that exist,
in the runtime's order without repeats (``candidatesFromNames``), kept when they meet
``spec.acceleratorSelector.constraints`` (``policy_helpers.go`` ``meetsRequirements``: not in
``excludedClasses``; ``architectureFamilies`` matched against ``<vendor>-<family>`` when the
entry has a ``-``, else against the family, case-insensitively; ``memoryGB`` in whole GiB
within ``minMemory`` / ``maxMemory``; every ``requiredFeatures`` entry among the features,
case-insensitively; ``computeCapability`` >= ``minArchitectureVersion`` compared as text).

``FirstAvailable`` takes the first candidate left; ``BestFit``, ``Cheapest`` and
``MostCapable`` score them (``accelerator_scores``); a single candidate is taken by any
policy. Where OME goes wrong this module does not crash:

* ``BestFit`` without ``spec.acceleratorSelector.constraints`` and two or more candidates
  dereferences a nil pointer in OME, so the InferenceService is never rendered (ome-docs
  ``guides/deploy-models/select-accelerators.md`` "BestFit doesn't create or update the
  workload"): here the same outcome is an ``AcceleratorClassError`` that names the field.
* A policy that picks nothing leaves the component without a class, as in OME, which
  records nothing; here a Warning Event and the ``AcceleratorClassSelected=False``
  condition (reason ``NoAcceleratorClassMatched``) say which listed class failed and why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from attrs import frozen

from omenative_core.service.accelerator_scores import best_fit, cheapest, most_capable
from omenative_core.service.accelerators import AcceleratorClass
from omenative_core.service.model import InferenceService, ServingRuntime

__all__ = ["NO_MATCH", "POLICIES", "PolicyChoice", "meets_constraints", "policy_choice",
           "quantity_gib"]

POLICIES: Final = ("BestFit", "Cheapest", "MostCapable", "FirstAvailable")
"""OME's ``AcceleratorSelectionPolicy`` values."""

_SUFFIX: Final = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
                  "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "": 1}
_QUANTITY: Final = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P|)$")


def _obj(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def quantity_gib(value: object) -> int | None:
    """A Kubernetes quantity (``80Gi``, ``96G``, a number) in whole GiB, rounded down as
    OME's ``Value() / (1024*1024*1024)``; None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return int(value) // 2**30
    m = _QUANTITY.match(str(value))
    if m is None:
        return None
    return int(float(m.group(1)) * _SUFFIX[m.group(2)]) // 2**30


def _strings(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _families_ok(spec: Mapping[str, Any], wanted: list[str]) -> bool:
    vendor = str(spec.get("vendor") or "").lower()
    family = str(spec.get("family") or "").lower()
    return any(w.lower() == (f"{vendor}-{family}" if "-" in w else family) for w in wanted)


def meets_constraints(cls: AcceleratorClass, constraints: Mapping[str, Any]) -> bool:
    """OME's ``meetsRequirements``: ``cls`` passes every constraint that is set."""
    spec = _obj(cls.raw.get("spec"))
    caps = _obj(spec.get("capabilities"))
    if cls.name in _strings(constraints.get("excludedClasses")):
        return False
    families = _strings(constraints.get("architectureFamilies"))
    if families and not _families_ok(spec, families):
        return False
    low, high = constraints.get("minMemory"), constraints.get("maxMemory")
    if low is not None or high is not None:
        mem = quantity_gib(caps.get("memoryGB"))
        if mem is None or (isinstance(low, int) and mem < low) or (
                isinstance(high, int) and mem > high):
            return False
    have = {f.lower() for f in _strings(caps.get("features"))}
    if any(f.lower() not in have for f in _strings(constraints.get("requiredFeatures"))):
        return False
    minimum = constraints.get("minArchitectureVersion")
    if isinstance(minimum, str):
        version = caps.get("computeCapability")
        if not isinstance(version, str) or not version or version < minimum:
            return False
    return True


def _policy(isvc: InferenceService, component: str) -> tuple[str, str]:
    """The policy for ``component`` and the field that sets it."""
    override = _obj(_obj(isvc.spec.get(component)).get("acceleratorOverride")).get("policy")
    if isinstance(override, str) and override:
        return override, f"spec.{component}.acceleratorOverride.policy"
    policy = _obj(isvc.spec.get("acceleratorSelector")).get("policy")
    return (policy if isinstance(policy, str) else ""), "spec.acceleratorSelector.policy"


@frozen
class PolicyChoice:
    """What a selection policy gives ``component``: the class ``name`` (None: no class), or
    ``blocked`` (reason, message) when OME would not render the InferenceService at all,
    and ``warning`` (reason, message) when the policy picked nothing (OME: silently no
    class; here a Warning Event and the ``AcceleratorClassSelected`` condition)."""

    name: str | None = None
    blocked: tuple[str, str] | None = None
    warning: tuple[str, str] | None = None


NO_MATCH: Final = "NoAcceleratorClassMatched"
"""Reason of the Warning Event and the ``AcceleratorClassSelected=False`` condition when a
policy picks no class (an omenative extension: OME records nothing)."""


def _excluded(listed: list[str], by_name: Mapping[str, AcceleratorClass],
              constraints: Mapping[str, Any]) -> str:
    """Why each listed class is out, for the warning."""
    why = []
    for name in dict.fromkeys(listed):
        cls = by_name.get(name)
        if cls is None:
            why.append(f"{name} (no such AcceleratorClass)")
        elif not meets_constraints(cls, constraints):
            why.append(f"{name} (fails spec.acceleratorSelector.constraints)")
        else:
            why.append(f"{name} (no spec.cost)")
    return "; ".join(why) or "none listed"


def _pick(policy: str, valid: list[AcceleratorClass],
          constraints: Mapping[str, Any]) -> str | None:
    if policy == "FirstAvailable" or len(valid) == 1:
        return valid[0].name
    if policy == "BestFit":
        return best_fit(valid, constraints)
    if policy == "Cheapest":
        return cheapest(valid)
    return most_capable(valid, constraints)


def policy_choice(isvc: InferenceService, runtime: ServingRuntime, component: str,
                  classes: Sequence[AcceleratorClass]) -> PolicyChoice:
    """The class OME's policy picks for ``component`` (module docstring)."""
    policy, where = _policy(isvc, component)
    if not policy:
        return PolicyChoice()
    if policy not in POLICIES:
        return PolicyChoice(warning=(NO_MATCH, (
            f"{where}: {policy!r} is not one of {', '.join(POLICIES)}; "
            f"the {component} gets no accelerator class")))
    listed = _strings(_obj(runtime.spec.get("acceleratorRequirements")).get(
        "acceleratorClasses"))
    by_name = {c.name: c for c in classes}
    selector = _obj(isvc.spec.get("acceleratorSelector"))
    constraints = _obj(selector.get("constraints"))
    valid = [by_name[n] for n in dict.fromkeys(listed)
             if n in by_name and meets_constraints(by_name[n], constraints)]
    if policy == "BestFit" and len(valid) > 1 and not isinstance(
            selector.get("constraints"), Mapping):
        return PolicyChoice(blocked=("AcceleratorClassError", (
            f"{where}: BestFit needs spec.acceleratorSelector.constraints when two or more "
            f"classes qualify ({', '.join(c.name for c in valid)}); set constraints such "
            f"as minMemory, or name a class")))
    name = _pick(policy, valid, constraints) if valid else None
    if name is None:
        return PolicyChoice(warning=(NO_MATCH, (
            f"{where}: {policy} found no class for the {component} among {runtime.kind} "
            f"{runtime.name}'s spec.acceleratorRequirements.acceleratorClasses: "
            f"{_excluded(listed, by_name, constraints)}; the {component} runs without an "
            f"accelerator class")))
    return PolicyChoice(name=name)

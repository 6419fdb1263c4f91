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

``FirstAvailable`` takes the first candidate left. ``BestFit``, ``Cheapest`` and
``MostCapable`` (OME's scoring of memory, TFLOPS, cost and bandwidth) are not implemented:
with one of them the component gets no class, as before (docs/ome-compatibility.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from omenative_core.service.accelerators import AcceleratorClass
from omenative_core.service.model import InferenceService, ServingRuntime

__all__ = ["meets_constraints", "policy_class", "quantity_gib"]

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


def _policy(isvc: InferenceService, component: str) -> str:
    override = _obj(_obj(isvc.spec.get(component)).get("acceleratorOverride")).get("policy")
    if isinstance(override, str) and override:
        return override
    policy = _obj(isvc.spec.get("acceleratorSelector")).get("policy")
    return policy if isinstance(policy, str) else ""


def policy_class(isvc: InferenceService, runtime: ServingRuntime, component: str,
                 classes: Sequence[AcceleratorClass]) -> str | None:
    """The class OME's policy picks for ``component`` (module docstring), or None."""
    if _policy(isvc, component) != "FirstAvailable":
        return None
    listed = _strings(_obj(runtime.spec.get("acceleratorRequirements")).get(
        "acceleratorClasses"))
    by_name = {c.name: c for c in classes}
    constraints = _obj(_obj(isvc.spec.get("acceleratorSelector")).get("constraints"))
    for name in dict.fromkeys(listed):
        cls = by_name.get(name)
        if cls is not None and meets_constraints(cls, constraints):
            return name
    return None

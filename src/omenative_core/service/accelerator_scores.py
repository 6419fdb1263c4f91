"""OME's scoring policies for AcceleratorClasses: ``BestFit``, ``Cheapest``, ``MostCapable``.

Each takes the candidates that passed the constraints, in the runtime's order, and returns
the name of the one it picks (OME@cfa05c69 ``pkg/acceleratorclassselector/selector.go``
``selectBestFit``, ``selectCheapest``, ``selectMostCapable``; ``policy_helpers.go``):

* ``BestFit``: 0.7 x memory fit + 0.3 x compute. Memory fit is 1 without ``minMemory``,
  else ``minMemory / memoryGB`` (1 on an exact fit: over-provisioning costs). Compute is the
  TFLOPS of the first ``preferredPrecisions`` entry the class has (each later entry halves
  the score, ``fp16`` tried last), or the class's highest TFLOPS without a preference;
  scored ``min(1, tflops / minComputePerformanceTFLOPS)``, 1 for any TFLOPS without that
  bound, 0 without TFLOPS.
* ``Cheapest``: classes without ``cost`` are left out; the hourly group first (``spotPerHour``,
  else ``perHour``, compared as the same unit), then ``perMillionTokens``, then ``tier``
  (``low`` < ``medium`` < ``high``, anything else ``medium``); none with a cost: no class.
* ``MostCapable``: 0.5 x memory + 0.3 x bandwidth + 0.2 x TFLOPS, each divided by the
  largest among the candidates; TFLOPS of the first preferred precision (``fp16`` without
  one), falling back to later ones.

Ties: the first in the runtime's list wins. OME's ``Cheapest`` keeps the first on equal
cost; its ``BestFit`` and ``MostCapable`` sort with ``sort.Slice``, which is an insertion
sort (so stable) for up to 12 classes, the same answer.

Quantities (``memoryGB``, ``memoryBandwidthGBps``, costs) are Kubernetes quantities, read
exactly (``quantity``); memory and bandwidth as OME's ``Value()``, rounded up to a whole unit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any, Final

from omenative_core.service.accelerators import AcceleratorClass, quantity

__all__ = ["best_fit", "cheapest", "most_capable"]

_PRECISION_FIELD: Final = {"fp32": "fp32Tflops", "fp16": "fp16Tflops", "int8": "int8Tops",
                           "fp8": "int8Tops", "int4": "int4Tops"}
_TIERS: Final = {"low": 1, "medium": 2, "high": 3}
_GIB: Final = 2**30


def _obj(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _value(value: object) -> int | None:
    """OME's ``Quantity.Value()``: rounded up to a whole unit."""
    q = quantity(value)
    return None if q is None else math.ceil(q)


def _caps(cls: AcceleratorClass) -> Mapping[str, Any]:
    return _obj(_obj(cls.raw.get("spec")).get("capabilities"))


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _tflops(perf: Mapping[str, Any], precision: str) -> int:
    key = _PRECISION_FIELD.get(precision.lower())
    return _int(perf.get(key)) if key is not None else 0


def _max_tflops(perf: Mapping[str, Any]) -> int:
    return max([0, *(_int(perf.get(k)) for k in ("fp32Tflops", "fp16Tflops", "int8Tops",
                                                  "int4Tops"))])


def _precisions(constraints: Mapping[str, Any]) -> list[str]:
    value = constraints.get("preferredPrecisions")
    return [p for p in value if isinstance(p, str)] if isinstance(value, list) else []


def _mem_gib(cls: AcceleratorClass) -> float:
    value = _value(_caps(cls).get("memoryGB"))
    return 0.0 if value is None else value / _GIB


def _first(candidates: Sequence[AcceleratorClass],
           score: Callable[[AcceleratorClass], float]) -> str:
    best, best_score = candidates[0], score(candidates[0])
    for c in candidates[1:]:
        s = score(c)
        if s > best_score:
            best, best_score = c, s
    return best.name


# ---------------------------------------------------------------------------- BestFit


def _memory_fit(cls: AcceleratorClass, constraints: Mapping[str, Any]) -> float:
    need = constraints.get("minMemory")
    if not isinstance(need, int) or isinstance(need, bool):
        return 1.0
    if _value(_caps(cls).get("memoryGB")) is None:
        return 0.0
    have = _mem_gib(cls)
    if have < need:
        return 0.0
    return 1.0 if have == need else need / have


def _from_tflops(tflops: int, required: int) -> float:
    if tflops == 0:
        return 0.0
    if required == 0:
        return 1.0
    return min(1.0, tflops / required)


def _compute(cls: AcceleratorClass, constraints: Mapping[str, Any]) -> float:
    perf = _caps(cls).get("performance")
    if not isinstance(perf, Mapping):
        return 0.0
    required = _int(constraints.get("minComputePerformanceTFLOPS"))
    preferred = _precisions(constraints)
    if not preferred:
        return _from_tflops(_max_tflops(perf), required)
    penalty = 1.0
    for precision in preferred:
        tflops = _tflops(perf, precision)
        if tflops > 0:
            return _from_tflops(tflops, required) * penalty
        penalty *= 0.5
    if "fp16" not in (p.lower() for p in preferred):
        tflops = _tflops(perf, "fp16")
        if tflops > 0:
            return _from_tflops(tflops, required) * penalty
    return 0.0


def best_fit(candidates: Sequence[AcceleratorClass], constraints: Mapping[str, Any]) -> str:
    """OME's ``selectBestFit`` over non-empty ``candidates`` (module docstring)."""
    return _first(candidates, lambda c: 0.7 * _memory_fit(c, constraints)
                  + 0.3 * _compute(c, constraints))


# ---------------------------------------------------------------------------- Cheapest


def _hourly(cost: Mapping[str, Any]) -> Fraction | None:
    spot = quantity(cost.get("spotPerHour"))
    return spot if spot is not None else quantity(cost.get("perHour"))


def _lowest(candidates: Sequence[AcceleratorClass],
            price: Callable[[Mapping[str, Any]], Fraction | int | None]) -> str | None:
    best: tuple[Fraction | int, str] | None = None
    for c in candidates:
        cost = _obj(c.raw.get("spec")).get("cost")
        p = price(cost) if isinstance(cost, Mapping) else None
        if p is not None and (best is None or p < best[0]):
            best = (p, c.name)
    return None if best is None else best[1]


def _tier(cost: Mapping[str, Any]) -> int | None:
    tier = cost.get("tier")
    return _TIERS.get(tier.lower(), 2) if isinstance(tier, str) and tier else None


def cheapest(candidates: Sequence[AcceleratorClass]) -> str | None:
    """OME's ``selectCheapest`` (module docstring); None when no candidate has a cost."""
    if len(candidates) == 1:
        return candidates[0].name
    for price in (_hourly, lambda cost: quantity(cost.get("perMillionTokens")), _tier):
        name = _lowest(candidates, price)
        if name is not None:
            return name
    return None


# ---------------------------------------------------------------------------- MostCapable


def _raw(cls: AcceleratorClass, preferred: list[str]) -> tuple[float, float, float]:
    caps = _caps(cls)
    perf = _obj(caps.get("performance"))
    tflops = _tflops(perf, preferred[0] if preferred else "fp16")
    if tflops == 0:
        tflops = next((t for t in (_tflops(perf, p) for p in preferred[1:]) if t > 0), 0)
    bandwidth = _value(caps.get("memoryBandwidthGBps"))
    return float(tflops), _mem_gib(cls), float(bandwidth or 0)


def most_capable(candidates: Sequence[AcceleratorClass],
                 constraints: Mapping[str, Any]) -> str:
    """OME's ``selectMostCapable`` over non-empty ``candidates`` (module docstring)."""
    preferred = _precisions(constraints)
    raws = {c.name: _raw(c, preferred) for c in candidates}
    tops = [max(r[i] for r in raws.values()) for i in range(3)]

    def score(c: AcceleratorClass) -> float:
        norm = [v / top if top > 0 else 0.0 for v, top in zip(raws[c.name], tops, strict=True)]
        return 0.5 * norm[1] + 0.3 * norm[2] + 0.2 * norm[0]
    return _first(candidates, score)

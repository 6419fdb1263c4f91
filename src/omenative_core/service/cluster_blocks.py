"""The OME blocks of ``inferenceservice-config`` that OME added for OMENative, read as OME's
binary reads them (ome-projects/ome@4ff3b6e3, ``pkg/controller/v1beta1/controllerconfig``):

- ``deploy.replicas``: ``{defaultMinReplicas, defaultMaxReplicas: {engine, decoder,
  router}}``, each > 0; an absent field is unconfigured (the component keeps what it
  authored). omenative also takes its older spelling, a bare integer (the min default).
- ``deploy.updateStrategy.<component>``: OME's flat ``{type, maxSurge, maxUnavailable}``
  (omenative's nested ``rollingUpdate`` spelling is still read); a budget that resolves to 0
  is refused, as it denies every Instance and the rollout never starts.
- ``podMonitor``: ``labels`` (merged into each PodMonitor's metadata labels),
  ``relabelings`` and ``metricRelabelings`` (appended to every endpoint).
- ``omenativeStatus``: ``instanceStatusEncoding`` (``DenseV1`` | ``ColumnarV2``) and
  ``maxDecodedInstances`` (> 0, required with ``ColumnarV2``).

``OME_UNUSED_KEYS`` are the ConfigMap keys OME's chart writes that omenative does not read:
accepted, reported once at start-up. Pure: JSON values in, settings out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from attrs import field, frozen

from omenative_core.model.config import ConfigError
from omenative_core.model.spec import COMPONENTS, RollingUpdate, UpdateStrategy

__all__ = [
    "OME_UNUSED_KEYS",
    "PodMonitorConfig",
    "ReplicaDefaults",
    "StatusEncoding",
    "parse_pod_monitor",
    "parse_replica_defaults",
    "parse_status_encoding",
    "parse_update_strategy",
]

OME_UNUSED_KEYS: Final = (
    "acceleratorResources",
    "benchmarkjob",
    "canaryAnalysis",
    "inferenceReplica",
    "ingress",
    "kedaConfig",
    "metricsAggregator",
    "modelInit",
    "multicluster",
    "multinodeProber",
    "omeAgent",
    "servingSidecar",
    "tpuSliceProvisioning",
)
"""Keys of OME's ``inferenceservice-config`` (its chart's ``ome-controller/configmap.yaml``
and its ``controllerconfig`` loaders at 4ff3b6e3; ``benchmarkjob``, ``kedaConfig`` and
``multinodeProber`` from its earlier chart, at cfa05c69) that omenative accepts and does
not use."""

UPDATE_STRATEGY_TYPES: Final = ("SurgeThenDrain", "RecreatePod", "InPlaceIfPossible",
                                "InPlaceOnly")
"""The strategies OME's ``deploy.updateStrategy`` accepts."""


def _positive(path: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{path}: must be > 0, got {value!r}")
    return value


def _object(path: str, value: object, allowed: set[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{path}: expected an object, got {value!r}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}")
    return value


@frozen(kw_only=True)
class ReplicaDefaults:
    """``deploy.replicas``: what an unset ``minReplicas`` / ``maxReplicas`` becomes (None:
    unconfigured, the component keeps what it authored)."""

    min_replicas: int | None = None
    max_replicas: Mapping[str, int] = field(factory=dict)


def parse_replica_defaults(value: object) -> ReplicaDefaults:
    """OME's object, or omenative's older integer (a min default of 0 or more)."""
    if value is None:
        return ReplicaDefaults()
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ConfigError(f"deploy.replicas: expected an integer >= 0, got {value!r}")
        return ReplicaDefaults(min_replicas=value)
    obj = _object("deploy.replicas", value, {"defaultMinReplicas", "defaultMaxReplicas"})
    low = obj.get("defaultMinReplicas")
    highs = obj.get("defaultMaxReplicas")
    maxes: dict[str, int] = {}
    if highs is not None:
        for component, high in _object(
            "deploy.replicas.defaultMaxReplicas", highs, set(COMPONENTS)
        ).items():
            if high is not None:
                maxes[component] = _positive(
                    f"deploy.replicas.defaultMaxReplicas.{component}", high)
    return ReplicaDefaults(
        min_replicas=None if low is None else _positive(
            "deploy.replicas.defaultMinReplicas", low),
        max_replicas=maxes,
    )


def _budget(path: str, value: object) -> int | str:
    """An int-or-percent budget that resolves above 0 (OME scales it against 100)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if (isinstance(value, str) and value.endswith("%") and value[:-1].isdigit()
            and int(value[:-1]) > 0):
        return value
    raise ConfigError(
        f"{path}: must be an integer or percentage > 0, got {value!r}: a zero budget denies "
        "every Instance and the rollout never starts")


def parse_update_strategy(component: str, value: object) -> UpdateStrategy | None:
    """One component's ``deploy.updateStrategy`` entry (None: unconfigured)."""
    if value is None:
        return None
    path = f"deploy.updateStrategy.{component}"
    obj = _object(path, value, {"type", "maxSurge", "maxUnavailable", "rollingUpdate"})
    kind = obj.get("type")
    if kind is not None and kind not in UPDATE_STRATEGY_TYPES:
        raise ConfigError(f"{path}.type: {kind!r} is not a supported update strategy "
                          f"({', '.join(UPDATE_STRATEGY_TYPES)})")
    nested = obj.get("rollingUpdate")
    flat = {k: obj[k] for k in ("maxSurge", "maxUnavailable") if obj.get(k) is not None}
    if nested is not None and flat:
        raise ConfigError(f"{path}: set maxSurge/maxUnavailable or rollingUpdate, not both")
    if nested is not None:
        flat = {k: v for k, v in _object(
            f"{path}.rollingUpdate", nested, {"maxSurge", "maxUnavailable"}
        ).items() if v is not None}
        path = f"{path}.rollingUpdate"
    budgets = {k: _budget(f"{path}.{k}", v) for k, v in flat.items()}
    rolling = RollingUpdate(max_surge=budgets.get("maxSurge"),
                            max_unavailable=budgets.get("maxUnavailable"))
    return UpdateStrategy(type=kind, rolling_update=None if not budgets else rolling)


@frozen(kw_only=True)
class PodMonitorConfig:
    """``podMonitor``: labels merged into every generated PodMonitor's metadata (never its
    selector), and relabelings / metric relabelings appended to every endpoint."""

    labels: Mapping[str, str] = field(factory=dict)
    relabelings: tuple[Mapping[str, Any], ...] = ()
    metric_relabelings: tuple[Mapping[str, Any], ...] = ()


_RELABEL_KEYS: Final = {"sourceLabels", "separator", "targetLabel", "regex", "replacement",
                        "action"}


def _relabelings(path: str, value: object) -> tuple[Mapping[str, Any], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{path}: expected a list, got {value!r}")
    out = []
    for n, item in enumerate(value):
        obj = _object(f"{path}[{n}]", item, _RELABEL_KEYS)
        labels = obj.get("sourceLabels")
        if labels is not None and not (
            isinstance(labels, list) and all(isinstance(x, str) for x in labels)
        ):
            raise ConfigError(f"{path}[{n}].sourceLabels: expected a list of strings")
        for key in _RELABEL_KEYS - {"sourceLabels"}:
            if obj.get(key) is not None and not isinstance(obj[key], str):
                raise ConfigError(f"{path}[{n}].{key}: expected a string, got {obj[key]!r}")
        out.append({k: v for k, v in obj.items() if v not in (None, "", [])})
    return tuple(out)


def parse_pod_monitor(value: object) -> PodMonitorConfig:
    """The ``podMonitor`` block (null or ``{}``: PodMonitors carry only omenative's labels)."""
    if value is None:
        return PodMonitorConfig()
    obj = _object("podMonitor", value, {"labels", "relabelings", "metricRelabelings"})
    labels = obj.get("labels") or {}
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise ConfigError(f"podMonitor.labels: expected a map of strings, got {labels!r}")
    return PodMonitorConfig(
        labels=dict(labels),
        relabelings=_relabelings("podMonitor.relabelings", obj.get("relabelings")),
        metric_relabelings=_relabelings(
            "podMonitor.metricRelabelings", obj.get("metricRelabelings")),
    )


@frozen(kw_only=True)
class StatusEncoding:
    """``omenativeStatus``: the status encoding to write and the ColumnarV2 row bound
    (None: not set; omenative then keeps decoding up to its default bound)."""

    encoding: str
    max_decoded_instances: int | None = None


def parse_status_encoding(value: object) -> StatusEncoding:
    """The ``omenativeStatus`` block, with OME's rules."""
    obj = _object("omenativeStatus", value, {"instanceStatusEncoding", "maxDecodedInstances"})
    encoding = obj.get("instanceStatusEncoding")
    if encoding not in ("DenseV1", "ColumnarV2"):
        raise ConfigError(
            "omenativeStatus.instanceStatusEncoding: expected DenseV1 or ColumnarV2, "
            f"got {encoding!r}")
    bound = obj.get("maxDecodedInstances")
    if bound is not None:
        bound = _positive("omenativeStatus.maxDecodedInstances", bound)
    elif encoding == "ColumnarV2":
        raise ConfigError("omenativeStatus.maxDecodedInstances: required when "
                          "instanceStatusEncoding is ColumnarV2")
    return StatusEncoding(encoding=str(encoding), max_decoded_instances=bound)

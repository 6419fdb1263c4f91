"""``kubectl ome get``: OME's columns for InferenceServices, InferenceReplicas and serving
runtimes (pure: rows from the objects the command listed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from omenative_controller.cli.output_basics import table
from omenative_core.model.timefmt import parse_time

__all__ = ["KINDS", "format_get", "human_duration", "kind_of"]

KINDS = {
    "inferenceservices": ("inferenceservice", "isvc", "isvcs"),
    "inferencereplicas": ("inferencereplica", "ir"),
    "runtimes": ("runtime",),
    "servingruntimes": ("servingruntime", "srt"),
    "clusterservingruntimes": ("clusterservingruntime", "csrt"),
}
"""The resources omenative's plugin lists, with the names OME also accepts."""


def kind_of(resource: str) -> str | None:
    """The canonical resource for ``resource`` in any letter case (None: not listed here)."""
    wanted = resource.lower()
    for kind, aliases in KINDS.items():
        if wanted == kind or wanted in aliases:
            return kind
    return None


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or ()
                 if isinstance(c, Mapping) and c.get("type") == kind), None)


def _two(big: int, unit: str, small: int, small_unit: str) -> str:
    return f"{big}{unit}" + (f"{small}{small_unit}" if small else "")


def human_duration(seconds: int) -> str:
    """A duration as kubectl's AGE column prints it (``45s``, ``7m30s``, ``3h``, ``2d5h``)."""
    sec = max(seconds, 0)
    minutes, hours, days = sec // 60, sec // 3600, sec // 86400
    years = days // 365
    steps = ((sec < 120, f"{sec}s"),
             (minutes < 10, _two(minutes, "m", sec % 60, "s")),
             (minutes < 180, f"{minutes}m"),
             (hours < 8, _two(hours, "h", minutes % 60, "m")),
             (hours < 48, f"{hours}h"),
             (hours < 24 * 8, _two(days, "d", hours % 24, "h")),
             (days < 365 * 2, f"{days}d"),
             (years < 8, _two(years, "y", days % 365, "d")))
    return next((text for holds, text in steps if holds), f"{years}y")


def _age(obj: Mapping[str, Any], now: datetime) -> str:
    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    try:
        then = parse_time(stamp) if stamp else None
    except (ValueError, TypeError):
        return "-"
    return "-" if then is None else human_duration(int((now - then).total_seconds()))


def _text(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


def _isvc_row(obj: Mapping[str, Any], wide: bool) -> list[str]:
    spec = obj.get("spec") or {}
    ready = _condition(obj, "Ready")
    return [_text((spec.get("model") or {}).get("name")),
            _text((spec.get("runtime") or {}).get("name")),
            str(ready.get("status")) if ready else "Unknown",
            _text((obj.get("status") or {}).get("url"))]


def _lifecycle(obj: Mapping[str, Any]) -> tuple[str, str]:
    stalled = _condition(obj, "RolloutStalled")
    if stalled is not None and stalled.get("status") == "True":
        return "RolloutStalled=True", _text(stalled.get("reason"))
    main = _condition(obj, "Ready") or stalled
    if main is None:
        return "Unavailable", "-"
    return f"{main.get('type')}={main.get('status')}", _text(main.get("reason"))


def _ir_row(obj: Mapping[str, Any], wide: bool) -> list[str]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    lifecycle, reason = _lifecycle(obj)
    row = [_text(spec.get("component")), _text((spec.get("parentRef") or {}).get("name")),
           _text(spec.get("replicas")), str(status.get("replicas") or 0),
           str(status.get("readyReplicas") or 0)]
    if wide:
        row.append(str(status.get("availableReplicas") or 0))
    row.append(lifecycle)
    if wide:
        encoding = _text(status.get("instanceStatusEncoding")) if \
            "instanceStatusColumns" in status else (
                "DenseV1" if "instanceStatuses" in status else "-")
        row += [reason, str(status.get("servingReplicas") or 0),
                str(status.get("updatedReplicas") or 0), encoding,
                _text(status.get("currentRevision")), _text(status.get("updateRevision")),
                str(len(status.get("migrations") or ())),
                "true" if spec.get("paused") else "false",
                _text(status.get("coordinationGroupRef"))]
    return row


def _formats(spec: Mapping[str, Any]) -> str:
    names = [str(f.get("name")) for f in spec.get("supportedModelFormats") or ()
             if isinstance(f, Mapping) and f.get("name")]
    shown = ",".join(names[:3])
    return (shown + f",+{len(names) - 3}" if len(names) > 3 else shown) or "-"


def _runtime_row(obj: Mapping[str, Any], wide: bool) -> list[str]:
    spec = obj.get("spec") or {}
    return ["true" if spec.get("disabled") is True else "false", _formats(spec)]


_HEADS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "inferenceservices": (("MODEL", "RUNTIME", "READY", "URL"), ()),
    "inferencereplicas": (("COMPONENT", "PARENT", "DESIRED", "CURRENT", "READY", "LIFECYCLE"),
                          ("COMPONENT", "PARENT", "DESIRED", "CURRENT", "READY", "AVAILABLE",
                           "LIFECYCLE", "REASON", "SERVING", "UPDATED", "ENCODING",
                           "CURRENT-REVISION", "UPDATE-REVISION", "MIGRATIONS", "PAUSED",
                           "COORDINATION")),
    "runtimes": (("SCOPE", "DISABLED", "FORMATS"), ()),
    "servingruntimes": (("DISABLED", "FORMATS"), ()),
    "clusterservingruntimes": (("DISABLED", "FORMATS"), ()),
}
_ROWS = {"inferenceservices": _isvc_row, "inferencereplicas": _ir_row,
         "runtimes": _runtime_row, "servingruntimes": _runtime_row,
         "clusterservingruntimes": _runtime_row}


def format_get(kind: str, objects: Sequence[Mapping[str, Any]], now: datetime, *,
               wide: bool = False, all_namespaces: bool = False) -> str:
    """The table: NAME, the kind's columns (wide: OME's Wide ones too), AGE; with ``-A`` a
    NAMESPACE column first (``-`` for cluster-scoped rows)."""
    narrow, wide_head = _HEADS[kind]
    head = wide_head if wide and wide_head else narrow
    rows = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        cells = _ROWS[kind](obj, wide)
        if kind == "runtimes":
            cells = ["Cluster" if obj.get("kind") == "ClusterServingRuntime" else "Namespaced",
                     *cells]
        row = [_text(meta.get("name")), *cells, _age(obj, now)]
        if all_namespaces:
            row.insert(0, _text(meta.get("namespace")))
        rows.append(row)
    headers = ("NAME", *head, "AGE")
    if all_namespaces:
        headers = ("NAMESPACE", *headers)
    return table(headers, rows)

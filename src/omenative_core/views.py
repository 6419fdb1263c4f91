"""Observed views from Kubernetes JSON: pods, nodes, PodGroups, revisions, EndpointSlices.

Each ``*_view_from_json`` builds the slim view the planner reads from an object as the API
server sends it. They are lenient about absent fields, as watch events are, and strict about
timestamps (a bad one is a ``CodecError`` naming its path).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from omenative_core.codec import CodecError
from omenative_core.gpus import GPU_RESOURCE, gpu_quantity
from omenative_core.model.observed import (
    ContainerView,
    NodeView,
    PodGroupView,
    PodView,
    RevisionView,
)
from omenative_core.model.timefmt import parse_time, to_second

__all__ = [
    "node_view_from_json",
    "pod_group_view_from_json",
    "pod_view_fields",
    "pod_view_from_json",
    "revision_view_from_json",
    "routed_pods_from_endpoint_slices",
]

UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
"""The taint the node lifecycle controller adds when a node stops heartbeating."""


def _obj(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _str_map(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in _obj(value).items()}


def _time(value: object, path: str) -> datetime | None:
    if value is None or value == "":
        return None
    try:
        return to_second(parse_time(value))
    except ValueError as exc:
        raise CodecError(f"{path}: {exc}", path=path) from None


def _int(value: object, default: int = 0) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return default


def _container_view(status: Mapping[str, Any]) -> ContainerView:
    state = _obj(status.get("state"))
    last = _obj(status.get("lastState"))
    waiting = state.get("waiting")
    terminated = state.get("terminated")
    if not isinstance(terminated, Mapping):
        terminated = last.get("terminated")
    waiting_obj = _obj(waiting)
    term_obj = _obj(terminated)
    exit_code = term_obj.get("exitCode")
    return ContainerView(
        name=str(status.get("name", "")),
        image=str(status.get("image") or ""),
        ready=status.get("ready") is True,
        restart_count=_int(status.get("restartCount")),
        running=isinstance(state.get("running"), Mapping),
        waiting_reason=(waiting_obj.get("reason") or "") if isinstance(waiting, Mapping) else None,
        waiting_message=str(waiting_obj.get("message") or ""),
        terminated_reason=(
            str(term_obj.get("reason") or "") if isinstance(terminated, Mapping) else None
        ),
        terminated_exit_code=(
            exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None
        ),
    )


def pod_view_from_json(obj: Mapping[str, Any]) -> PodView:
    """Build a ``PodView`` from a Pod object (``metadata``, ``spec``, ``status``)."""
    return PodView(**pod_view_fields(obj))


def pod_view_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of a Pod object's ``PodView``: a caller that slims them (the
    shell's pod cache) builds one view instead of a view and its copy, and a ``PodView``
    works out its derived facts when built."""
    meta = _obj(obj.get("metadata"))
    spec = _obj(obj.get("spec"))
    status = _obj(obj.get("status"))
    conditions: dict[str, str] = {}
    reasons: dict[str, str] = {}
    for cond in _list(status.get("conditions")):
        cond_obj = _obj(cond)
        ctype = cond_obj.get("type")
        if not isinstance(ctype, str):
            continue
        conditions[ctype] = str(cond_obj.get("status", "Unknown"))
        reason = cond_obj.get("reason")
        if isinstance(reason, str) and reason:
            reasons[ctype] = reason
    images = {
        str(c.get("name", "")): str(c.get("image") or "")
        for c in map(_obj, _list(spec.get("containers")))
    }
    gates = tuple(str(g.get("name", "")) for g in map(_obj, _list(spec.get("schedulingGates"))))
    node_name = spec.get("nodeName")
    pod_ip = status.get("podIP")
    return {
        "name": str(meta.get("name", "")),
        "uid": str(meta.get("uid", "")),
        "labels": _str_map(meta.get("labels")),
        "annotations": _str_map(meta.get("annotations")),
        "node_name": node_name if isinstance(node_name, str) and node_name else None,
        "phase": str(status.get("phase") or "Pending"),
        "conditions": conditions,
        "condition_reasons": reasons,
        "containers": tuple(
            _container_view(_obj(c)) for c in _list(status.get("containerStatuses"))
        ),
        "images": images,
        "deletion_timestamp": _time(meta.get("deletionTimestamp"), "metadata.deletionTimestamp"),
        "creation_timestamp": _time(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        "scheduling_gates": gates,
        "pod_ip": pod_ip if isinstance(pod_ip, str) and pod_ip else None,
        "finalizers": tuple(f for f in _list(meta.get("finalizers")) if isinstance(f, str)),
    }


def node_view_from_json(obj: Mapping[str, Any]) -> NodeView:
    """Build a ``NodeView`` from a Node: Ready True/False, or None when Unknown or missing.

    ``not_ready_since`` is the Ready condition's lastTransitionTime while it is not True;
    ``gpus`` is allocatable ``nvidia.com/gpu`` (0 when absent, None with no allocatable);
    ``unreachable_since`` is the ``timeAdded`` of the ``node.kubernetes.io/unreachable`` taint.
    """
    meta = _obj(obj.get("metadata"))
    spec = _obj(obj.get("spec"))
    status = _obj(obj.get("status"))
    ready: bool | None = None
    since: datetime | None = None
    for cond in map(_obj, _list(status.get("conditions"))):
        if cond.get("type") != "Ready":
            continue
        value = cond.get("status")
        ready = True if value == "True" else False if value == "False" else None
        if ready is not True:
            since = _time(
                cond.get("lastTransitionTime"), "status.conditions[Ready].lastTransitionTime"
            )
        break
    tainted: datetime | None = None
    for taint in map(_obj, _list(spec.get("taints"))):
        if taint.get("key") == UNREACHABLE_TAINT:
            tainted = _time(taint.get("timeAdded"), "spec.taints[unreachable].timeAdded")
    return NodeView(
        name=str(meta.get("name", "")),
        ready=ready,
        unschedulable=spec.get("unschedulable") is True,
        labels=_str_map(meta.get("labels")),
        not_ready_since=since,
        gpus=_allocatable_gpus(status.get("allocatable")),
        unreachable_since=tainted,
    )


def _allocatable_gpus(allocatable: object) -> int | None:
    """Allocatable ``nvidia.com/gpu`` (a Node without ``status.allocatable``: unknown)."""
    if not isinstance(allocatable, Mapping):
        return None
    return gpu_quantity(allocatable.get(GPU_RESOURCE))


_SCHEDULED_TYPES = frozenset({"PodGroupScheduled", "PodGroupInitiallyScheduled"})


def _failed_phase(obj: Mapping[str, Any]) -> str:
    """OME's words for a scheduler-plugins PodGroup in phase ``Failed`` ("" otherwise)."""
    status = _obj(obj.get("status"))
    if status.get("phase") != "Failed":
        return ""
    name = _obj(obj.get("metadata")).get("name", "")
    minimum = _int(_obj(obj.get("spec")).get("minMember"))
    return (f"PodGroup {name} reported phase Failed: {_int(status.get('failed'))} of "
            f"{minimum} members failed")


def pod_group_view_from_json(obj: Mapping[str, Any]) -> PodGroupView:
    """Build a ``PodGroupView`` from a PodGroup (either API) or a native Workload.

    ``deleting``: being deleted; ``scheduled``: the native ``PodGroupScheduled`` condition
    (``v1alpha2``) or ``PodGroupInitiallyScheduled`` (its name in ``v1beta1``).
    """
    meta = _obj(obj.get("metadata"))
    scheduled: Mapping[str, Any] = {}
    conditions = _obj(obj.get("status")).get("conditions")
    for cond in conditions if isinstance(conditions, list) else ():
        if isinstance(cond, Mapping) and cond.get("type") in _SCHEDULED_TYPES:
            scheduled = cond
    status = scheduled.get("status")
    return PodGroupView(
        failed=_failed_phase(obj),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        deleting=bool(meta.get("deletionTimestamp")),
        labels=_str_map(meta.get("labels")),
        scheduled=str(status) if status is not None else None,
        scheduled_reason=str(scheduled.get("reason") or ""),
        scheduled_message=str(scheduled.get("message") or ""),
    )


def revision_view_from_json(obj: Mapping[str, Any]) -> RevisionView:
    """Build a ``RevisionView`` from a ControllerRevision (its ``data`` and ``revision``)."""
    meta = _obj(obj.get("metadata"))
    data = obj.get("data")
    return RevisionView(
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        revision=_int(obj.get("revision")),
        data=data if isinstance(data, Mapping) else {},
        labels=_str_map(meta.get("labels")),
    )


def routed_pods_from_endpoint_slices(slices: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """Names of the pods a Service routes to: endpoints that are ready.

    Rule: an endpoint counts when its ``targetRef`` is a Pod (or has no kind) with a name,
    and neither ``conditions.ready`` nor ``conditions.serving`` is False (absent counts as
    true, as the EndpointSlice API defines). ``serving`` matters for a Service with
    ``publishNotReadyAddresses`` (our headless Service): there ``ready`` stays true for a
    pod that is not Ready, and only ``serving`` says it left rotation.
    """
    names: set[str] = set()
    for slc in slices:
        for endpoint in map(_obj, _list(_obj(slc).get("endpoints"))):
            ref = _obj(endpoint.get("targetRef"))
            name = ref.get("name")
            if not isinstance(name, str) or not name or ref.get("kind", "Pod") != "Pod":
                continue
            conditions = _obj(endpoint.get("conditions"))
            if conditions.get("ready") is False or conditions.get("serving") is False:
                continue
            names.add(name)
    return frozenset(names)

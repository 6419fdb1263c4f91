"""``kubectl ome wait --for=rollout=...`` and ``--for=runtime-sync=acknowledged``: one check
of the InferenceService each (pure; ``wait_output`` parses the flags and prints the report).

* ``rollout=stable|failed|rolled-back`` matches the REPORTED state of ``rollout status``:
  the first of ``Failed``, ``RollingBack``, ``RolledBack``, ``Paused``, ``Unknown``,
  ``InProgress``, ``Staged``, ``Succeeded`` that applies to a rollout group
  (``status.rollout.groups[].phase``) or to a component outside every group (its
  ``status.components.<c>.lifecycle`` current and update revisions); ``NotConfigured`` when
  the status records neither, which never matches (OME).
* ``runtime-sync=acknowledged --request-id=UUID`` matches once ``ome.io/runtime-sync`` and
  ``status.lastRuntimeSyncToken`` both hold ``cli-runtime-sync-<UUID>``, the pin is managed
  (``autoSync: false``, no ``revision``, ``status.pinnedRevisionName`` set) and there is no
  ``RuntimeDrifted`` condition.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omenative_core.rollout.state import RolloutStateError, state_from_json
from omenative_core.service.runtime_pin import ANNOTATION_RUNTIME_SYNC, CONDITION_RUNTIME_DRIFTED

__all__ = ["ROLLOUT_WANTS", "TOKEN_PREFIX", "check_rollout", "check_runtime_sync",
           "reported_rollout"]

TOKEN_PREFIX = "cli-runtime-sync-"
"""``kubectl ome runtime sync`` writes this prefix and the request's UUID."""
ROLLOUT_WANTS = {"stable": ("Rollout=Stable", "Succeeded"),
                 "failed": ("Rollout=Failed", "Failed"),
                 "rolled-back": ("Rollout=RolledBack", "RolledBack")}
"""Per ``--for=rollout=X``: the report's spelling and the REPORTED state it waits for."""
_PRECEDENCE = ("Failed", "RollingBack", "RolledBack", "Paused", "Unknown", "InProgress",
               "Staged", "Succeeded")
_GROUP_REPORTED = {"Pending": "InProgress", "Canarying": "InProgress", "Promoting": "InProgress",
                   "Paused": "Paused", "Stable": "Succeeded", "Failed": "Failed",
                   "RollingBack": "RollingBack", "RolledBack": "RolledBack"}


def _obj(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def reported_rollout(isvc: Mapping[str, Any]) -> tuple[str, str]:
    """(REPORTED state, validity: ``Valid``, ``Unavailable`` or ``Invalid``)."""
    status = _obj(isvc.get("status"))
    seen: list[str] = []
    grouped: set[str] = set()
    raw = status.get("rollout")
    if raw:
        try:
            state = state_from_json(raw)
        except (RolloutStateError, ValueError, TypeError):
            return "Unknown", "Invalid"
        for group in state.groups:
            grouped.update(group.components)
            phase = "Failed" if group.failure else group.phase.value
            seen.append(_GROUP_REPORTED.get(phase, "Unknown"))
    for comp, body in sorted(_obj(status.get("components")).items()):
        lifecycle = _obj(_obj(body).get("lifecycle"))
        if comp in grouped or not lifecycle:
            continue
        current, update = lifecycle.get("currentRevision"), lifecycle.get("updateRevision")
        if not current and not update:
            continue
        seen.append("Succeeded" if current == update else "InProgress")
    if not seen:
        return "NotConfigured", "Unavailable"
    return next(s for s in _PRECEDENCE if s in seen), "Valid"


def check_rollout(isvc: Mapping[str, Any], want: str) -> tuple[bool, str, tuple[
        tuple[str, str], ...], dict[str, Any]]:
    """(matched, reason, report rows, JSON detail) of ``rollout=...`` waiting for ``want``."""
    reported, validity = reported_rollout(isvc)
    if validity == "Invalid":
        reason = "InvalidRollout"
    elif validity == "Unavailable":
        reason = "RolloutNotRecorded"
    else:
        reason = "RolloutMatched" if reported == want else "RolloutNotMatched"
    coordination = next((str(c.get("status")) for c in
                         _obj(isvc.get("status")).get("conditions") or ()
                         if isinstance(c, Mapping) and c.get("type") ==
                         "RolloutCoordinationReady"), "NotApplicable")
    rows = (("Reported rollout", reported), ("Rollout state", "Unknown"),
            ("Rollout validity", validity), ("Rollout epoch", "Unverifiable"),
            ("Coordination Ready", coordination), ("Rollout issue", "EpochUnverifiable"))
    detail = {"rollout": {"reportedState": reported, "state": "Unknown", "validity": validity,
                          "epoch": "Unverifiable", "coordinationReady": coordination,
                          "issues": [{"code": "EpochUnverifiable"}]}}
    return reason == "RolloutMatched", reason, rows, detail


def _token_state(isvc: Mapping[str, Any], token: str) -> str:
    annotation = _obj(_obj(isvc.get("metadata")).get("annotations")).get(ANNOTATION_RUNTIME_SYNC)
    last = _obj(isvc.get("status")).get("lastRuntimeSyncToken")
    if annotation is not None and not isinstance(annotation, str):
        return "Invalid"
    if annotation == token:
        return "Acknowledged" if last == token else "Pending"
    if annotation:
        return "Superseded"
    return "StatusOnly" if last == token else "Absent"


def _drift(isvc: Mapping[str, Any]) -> str:
    found = [c for c in _obj(isvc.get("status")).get("conditions") or ()
             if isinstance(c, Mapping) and c.get("type") == CONDITION_RUNTIME_DRIFTED]
    if not found:
        return "Clear"
    status = found[0].get("status")
    if len(found) > 1 or status not in ("True", "False", "Unknown"):
        return "Invalid"
    return f"Reported{status}"


def _managed(isvc: Mapping[str, Any]) -> str:
    ref = _obj(_obj(isvc.get("spec")).get("runtime"))
    if ref.get("autoSync") is not False or ref.get("revision") or not ref.get("name"):
        return "NotApplicable"
    if ref.get("kind", "ClusterServingRuntime") not in ("ServingRuntime",
                                                         "ClusterServingRuntime"):
        return "Invalid"
    return "Managed" if _obj(isvc.get("status")).get("pinnedRevisionName") else "Unavailable"


def _placed(isvc: Mapping[str, Any]) -> bool:
    meta = _obj(isvc.get("metadata"))
    return bool(_obj(isvc.get("spec")).get("placement") or
                "ome.io/placement" in (meta.get("finalizers") or ()))


def check_runtime_sync(isvc: Mapping[str, Any], request_id: str) -> tuple[
        bool, str, tuple[tuple[str, str], ...], dict[str, Any]]:
    """(matched, reason, report rows, JSON detail) of ``runtime-sync=acknowledged``."""
    token, drift, managed = _token_state(isvc, TOKEN_PREFIX + request_id), _drift(isvc), \
        _managed(isvc)
    placement = "UnsupportedPlacement" if _placed(isvc) else "Direct"
    if placement != "Direct":
        reason, validity = "UnsupportedPlacement", "Invalid"
    elif "Invalid" in (token, drift, managed):
        reason, validity = "InvalidCondition", "Invalid"
    elif token == "Acknowledged" and drift == "Clear" and managed == "Managed":
        reason, validity = "RuntimeSyncObserved", "Valid"
    else:
        reason = "RuntimeSyncNotAcknowledged"
        validity = "Unavailable" if managed == "Unavailable" else "Valid"
    matched = reason == "RuntimeSyncObserved"
    rows = (("Token state", token), ("Drift state", drift), ("Managed pin", managed),
            ("Placement", placement), ("Validity", validity),
            ("Interpretation", "Token acknowledged in bound parent snapshot" if matched
             else "No verified exact acknowledgment"))
    detail = {"runtimeSync": {"tokenState": token, "driftState": drift, "managedPin": managed,
                              "placement": placement, "validity": validity}}
    return matched, reason, rows, detail

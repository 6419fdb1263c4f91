"""``kubectl ome wait``: OME's predicates, one check of a snapshot, and the WaitReport
(pure: the command reads the objects, this module judges and formats them).

A check never raises on odd status: what cannot be read is a reason (``InvalidStatus``,
``MigrationNotRecorded``, ...) and the wait goes on, as in OME."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from attrs import field, frozen

from omenative_controller.cli.instance_output import ANNOTATION_RELEASE_HELD
from omenative_controller.cli.output_basics import decode_status, table
from omenative_controller.cli.wait_predicates import (
    ROLLOUT_WANTS,
    check_rollout,
    check_runtime_sync,
)
from omenative_core.codec import CodecError
from omenative_core.model.status import InferenceReplicaStatus

__all__ = ["MAX_TIMEOUT_SECONDS", "OUTCOME_EXIT", "Check", "WaitSpec", "check",
           "parse_duration", "parse_wait", "report_json", "report_table"]

MAX_TIMEOUT_SECONDS = 24 * 3600.0
"""OME's cap on ``--timeout``: 24 hours."""
OUTCOME_EXIT = {"Matched": 0, "TimedOut": 2, "NotFound": 2, "Deleted": 2, "Replaced": 2}
"""Exit code per outcome: 0 the state was seen, 2 the wait ended without it."""
_TERMINAL_MIGRATION = ("Completed", "Failed", "Relocated")
_COMPONENTS = ("engine", "decoder", "router")


@frozen(kw_only=True)
class WaitSpec:
    """One parsed ``--for`` with the flags its predicate takes."""

    kind: str  # condition | rollout | migration | replicas-ready | replicas-current |
    #            runtime-sync | held-revision
    requested: str  # OME's spelling in the report: Ready=True, HeldRevision=Unheld, ...
    want: str = ""  # condition: True | False | Unknown; rollout: the REPORTED state
    component: str = ""
    replicas: int = 0
    request_id: str = ""
    revision: str = ""
    ir_name: str = ""
    ir_uid: str = ""

    def flag_rows(self) -> list[tuple[str, str]]:
        """The report rows that echo the flags (Request ID, Component, Revision, ...)."""
        rows: list[tuple[str, str]] = []
        if self.request_id:
            rows.append(("Request ID", self.request_id))
        if self.component:
            rows.append(("Component", self.component))
        if self.kind == "replicas-ready":
            rows.append(("Target ready", str(self.replicas)))
        if self.kind == "replicas-current":
            rows.append(("Target replicas", str(self.replicas)))
        if self.revision:
            rows.append(("Revision", self.revision))
        return rows


@frozen(kw_only=True)
class Check:
    """One check of a snapshot: did it match, why, and the predicate's report rows."""

    matched: bool
    reason: str
    evidence: str = "Reported"
    rows: tuple[tuple[str, str], ...] = ()
    detail: Mapping[str, Any] = field(factory=dict)


# ---------------------------------------------------------------------------- parsing

_PREDICATE_FLAGS = {
    "condition": frozenset(),
    "rollout": frozenset(),
    "runtime-sync": frozenset({"request_id"}),
    "migration": frozenset({"request_id"}),
    "replicas-ready": frozenset({"component", "replicas"}),
    "replicas-current": frozenset({"component", "replicas", "ir_name", "ir_uid"}),
    "held-revision": frozenset({"component", "revision", "ir_name", "ir_uid"}),
}
_FLAG_NAMES = {"request_id": "--request-id", "component": "--component",
               "replicas": "--replicas", "revision": "--revision", "ir_name": "--ir-name",
               "ir_uid": "--ir-uid"}


def _kind_of(predicate: str) -> tuple[str, str, str]:
    """(kind, requested spelling, wanted condition status) of a ``--for`` value."""
    m = re.fullmatch(r"condition=Ready(?:=(True|False|Unknown))?", predicate)
    if m:
        want = m.group(1) or "True"
        return "condition", f"Ready={want}", want
    m = re.fullmatch(r"rollout=(stable|failed|rolled-back)", predicate)
    if m:
        requested, reported = ROLLOUT_WANTS[m.group(1)]
        return "rollout", requested, reported
    fixed = {"migration=terminal": ("migration", "Migration=Terminal"),
             "replicas=ready": ("replicas-ready", "Replicas=Ready"),
             "replicas=current": ("replicas-current", "Replicas=Current"),
             "held-revision=unheld": ("held-revision", "HeldRevision=Unheld"),
             "runtime-sync=acknowledged": ("runtime-sync", "RuntimeSync=Acknowledged")}
    if predicate in fixed:
        kind, requested = fixed[predicate]
        return kind, requested, ""
    raise ValueError(f"--for={predicate!r} is not supported: use condition=Ready"
                     "[=True|False|Unknown], rollout=stable|failed|rolled-back, "
                     "migration=terminal, replicas=ready, replicas=current, "
                     "runtime-sync=acknowledged or held-revision=unheld")


def parse_wait(predicate: str, given: Mapping[str, Any]) -> WaitSpec:
    """The WaitSpec of ``--for`` and the other flags (``given``: flag -> value, None when not
    set); ValueError names the flag and the rule, as OME refuses them."""
    kind, requested, want = _kind_of(predicate)
    allowed = _PREDICATE_FLAGS[kind]
    extra = sorted(_FLAG_NAMES[k] for k, v in given.items() if v is not None and k not in allowed)
    if extra:
        raise ValueError(f"--for={predicate} does not take {', '.join(extra)}")
    values = {k: v for k, v in given.items() if v is not None}
    needs = {"migration": ("request_id",), "runtime-sync": ("request_id",),
             "replicas-ready": ("component", "replicas"),
             "replicas-current": ("component", "replicas"),
             "held-revision": ("component", "revision", "ir_name", "ir_uid")}.get(kind, ())
    missing = [_FLAG_NAMES[k] for k in needs if k not in values]
    if missing:
        raise ValueError(f"--for={predicate} needs {', '.join(missing)}")
    if ("ir_name" in values) != ("ir_uid" in values):
        raise ValueError("--ir-name and --ir-uid go together")
    comp = values.get("component")
    if comp is not None and comp not in _COMPONENTS:
        raise ValueError(f"--component must be one of {', '.join(_COMPONENTS)} (got {comp!r})")
    replicas = values.get("replicas", 0)
    if replicas < (1 if kind == "replicas-current" else 0):
        rule = "at least 1" if kind == "replicas-current" else "at least 0"
        raise ValueError(f"--replicas must be {rule} for --for={predicate} (got {replicas})")
    request_id = values.get("request_id", "")
    if request_id and str(_uuid_or_none(request_id)) != request_id:
        raise ValueError(f"--request-id must be a canonical lower-case UUID (got {request_id!r})")
    parsed = _uuid_or_none(request_id) if request_id else None
    if kind == "runtime-sync" and (parsed is None or parsed.version != 4):
        raise ValueError(f"--request-id must be a canonical v4 UUID for --for={predicate} "
                         f"(got {request_id!r})")
    revision = values.get("revision", "")
    if revision and comp and f"-{comp}-" not in revision:
        raise ValueError(f"--revision must be the full ISVC-{comp}-HASH name (got {revision!r})")
    return WaitSpec(kind=kind, requested=requested, want=want, component=comp or "",
                    replicas=replicas, request_id=request_id, revision=revision,
                    ir_name=values.get("ir_name", ""), ir_uid=values.get("ir_uid", ""))


def _uuid_or_none(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: str) -> float:
    """Seconds of a Go duration (``90s``, ``2m``, ``1m0s``, ``1h30m``), positive and at most
    24h as OME's ``--timeout``; ValueError otherwise."""
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if not text or pos != len(text):
        raise ValueError(f"--timeout {text!r} is not a duration such as 90s, 2m or 1h30m")
    if total <= 0 or total > MAX_TIMEOUT_SECONDS:
        raise ValueError(f"--timeout must be positive and at most 24h (got {text})")
    return total


# ---------------------------------------------------------------------------- checks


def _decoded(ir: Mapping[str, Any]) -> InferenceReplicaStatus | None:
    try:
        return decode_status(ir)
    except (CodecError, ValueError, TypeError):
        return None


def _stale(ir: Mapping[str, Any], status: InferenceReplicaStatus) -> bool:
    generation = (ir.get("metadata") or {}).get("generation")
    return isinstance(generation, int) and status.observed_generation < generation


def check_condition(isvc: Mapping[str, Any], spec: WaitSpec) -> Check:
    """``condition=Ready[=S]``: the InferenceService's Ready condition has status S."""
    ready = [c for c in (isvc.get("status") or {}).get("conditions") or ()
             if isinstance(c, dict) and c.get("type") == "Ready"]
    seen = {str(c.get("status")) for c in ready}
    if not ready:
        observed, reason, matched = "NotRecorded", "ConditionNotRecorded", False
    elif len(seen) > 1 or not seen <= {"True", "False", "Unknown"}:
        observed, reason, matched = "Invalid", "InvalidCondition", False
    else:
        observed = seen.pop()
        matched = observed == spec.want
        reason = "ConditionMatched" if matched else "ConditionNotMatched"
    validity = "Invalid" if reason == "InvalidCondition" else (
        "Unavailable" if not ready else "Valid")
    return Check(matched=matched, reason=reason,
                 rows=(("Observed Ready", observed), ("Condition validity", validity),
                       ("Generation freshness", "Unverifiable")),
                 detail={"observed": {"status": observed, "validity": validity,
                                      "generationFreshness": "Unverifiable"}})


def check_migration(irs: Sequence[Mapping[str, Any]], spec: WaitSpec) -> Check:
    """``migration=terminal``: the record of ``--request-id`` in an InferenceReplica of the
    service has ended (Completed, Failed or Relocated)."""
    for ir in irs:
        status = _decoded(ir)
        if status is None:
            continue
        record = next((m for m in status.migrations if m.request_uuid == spec.request_id), None)
        if record is None:
            continue
        comp = str((ir.get("spec") or {}).get("component") or "")
        terminal = record.phase in _TERMINAL_MIGRATION
        outcome = record.phase if terminal else "InProgress"
        if record.phase == "Relocated" and record.succeeded:
            outcome = "RelocationConfirmed"
        if _stale(ir, status):
            return _migration_check(False, "InvalidMigration", record.phase, outcome, comp,
                                    "Invalid")
        reason = "MigrationMatched" if terminal else "MigrationInProgress"
        return _migration_check(terminal, reason, record.phase, outcome, comp, "Valid")
    return _migration_check(False, "MigrationNotRecorded", "Unknown", "Unknown", "",
                            "Unavailable")


def _migration_check(matched: bool, reason: str, phase: str, outcome: str, comp: str,
                     validity: str) -> Check:
    attribution = "Exact request ID in live IR status" if matched else "Unverified"
    return Check(matched=matched, reason=reason,
                 evidence="Reported" if validity == "Valid" else "Unavailable",
                 rows=(("Migration phase", phase), ("Migration outcome", outcome),
                       ("Component", comp or "-"), ("Migration validity", validity),
                       ("Attribution", attribution)),
                 detail={"migration": {"phase": phase, "migrationOutcome": outcome,
                                       "component": comp, "validity": validity}})


def check_replicas(ir: Mapping[str, Any] | None, spec: WaitSpec) -> Check:
    """``replicas=ready`` (status.readyReplicas) or ``replicas=current`` (spec.replicas and
    status.replicas) equal ``--replicas`` on the component's InferenceReplica."""
    ready_kind = spec.kind == "replicas-ready"
    prefix = "ReplicaReady" if ready_kind else "ReplicaScale"
    invalid = "InvalidReplicaReadyEvidence" if ready_kind else "InvalidReplicaScaleEvidence"
    if ir is None or (spec.ir_uid and (ir.get("metadata") or {}).get("uid") != spec.ir_uid):
        reason = f"{prefix}NotRecorded" if ir is None else invalid
        return Check(matched=False, reason=reason, evidence="Unavailable",
                     rows=(("Validity", "Unavailable"),))
    status = _decoded(ir)
    if status is None or (ir.get("metadata") or {}).get("deletionTimestamp"):
        return Check(matched=False, reason=invalid, evidence="Unavailable",
                     rows=(("Validity", "Invalid"),))
    stale = _stale(ir, status)
    want_spec = (ir.get("spec") or {}).get("replicas")
    if ready_kind:
        matched = not stale and status.ready_replicas == spec.replicas
        rows: tuple[tuple[str, str], ...] = (("Observed ready", str(status.ready_replicas)),)
    else:
        matched = not stale and want_spec == spec.replicas and status.replicas == spec.replicas
        rows = (("Spec replicas", str(want_spec)), ("Current replicas", str(status.replicas)),
                ("Ready replicas", str(status.ready_replicas)))
    reason = f"{prefix}NotRecorded" if stale else (
        f"{prefix}Matched" if matched else f"{prefix}NotMatched")
    freshness = "Stale" if stale else "Current"
    return Check(matched=matched, reason=reason,
                 rows=(*rows, ("Validity", "Valid"), ("Freshness", freshness)),
                 detail={"scale" if not ready_kind else "readyReplicas": {
                     "specReplicas": want_spec, "currentReplicas": status.replicas,
                     "readyReplicas": status.ready_replicas, "freshness": freshness}})


def check_held(isvc: Mapping[str, Any], ir: Mapping[str, Any] | None, spec: WaitSpec) -> Check:
    """``held-revision=unheld``: on the InferenceReplica ``--ir-name``/``--ir-uid`` of this
    service, ``--revision`` is no longer Held and the release annotation is gone."""
    refusal = _held_identity(isvc, ir, spec)
    if refusal is not None:
        validity = "Unavailable" if refusal == "ReplicaMissing" else "Invalid"
        return _held_check(False, refusal, "", "Unknown", "Unknown", validity)
    assert ir is not None
    meta = ir.get("metadata") or {}
    name = str(meta.get("name") or "")
    status = _decoded(ir)
    if status is None:
        return _held_check(False, "InvalidStatus", name, "Unknown", "Unknown", "Invalid")
    block = next((b for b in status.retry_blocks if b.target_revision == spec.revision), None)
    state = block.state if block is not None else "Absent"
    mailbox_value = (meta.get("annotations") or {}).get(ANNOTATION_RELEASE_HELD)
    mailbox = "Absent" if mailbox_value is None else (
        "Pending" if mailbox_value in (spec.revision, spec.revision.rsplit("-", 1)[-1])
        else "Superseded")
    if _stale(ir, status):
        return _held_check(False, "SourceStale", name, state, mailbox, "Partial")
    if state == "Held":
        reason = "Held"
    elif mailbox != "Absent":
        reason = "MailboxPending" if mailbox == "Pending" else "MailboxSuperseded"
    else:
        reason = "Unheld"
    return _held_check(reason == "Unheld", reason, name, state, mailbox, "Valid")


def _held_identity(isvc: Mapping[str, Any], ir: Mapping[str, Any] | None,
                   spec: WaitSpec) -> str | None:
    """Why ``ir`` is not the InferenceReplica the wait is bound to (None: it is)."""
    if ir is None:
        return "ReplicaMissing"
    meta = ir.get("metadata") or {}
    if meta.get("uid") != spec.ir_uid:
        return "ReplicaReplaced"
    if meta.get("deletionTimestamp"):
        return "Deleting"
    ir_spec = ir.get("spec") or {}
    if (ir_spec.get("parentRef") or {}).get("name") != (isvc.get("metadata") or {}).get("name") \
            or ir_spec.get("component") != spec.component:
        return "SourceInvalid"
    return None


def _held_check(matched: bool, reason: str, name: str, state: str, mailbox: str,
                validity: str) -> Check:
    interpretation = ("Exact revision no longer Held on original IR" if matched
                      else "No verified current unheld state")
    return Check(matched=matched, reason=reason,
                 evidence="Reported" if validity == "Valid" else "Unavailable",
                 rows=(("InferenceReplica", name), ("Target state", state),
                       ("Mailbox", mailbox), ("Validity", validity),
                       ("Interpretation", interpretation)),
                 detail={"heldRevision": {"inferenceReplica": name, "targetState": state,
                                          "mailbox": mailbox, "validity": validity}})


def check(spec: WaitSpec, isvc: Mapping[str, Any], irs: Sequence[Mapping[str, Any]]) -> Check:
    """One check of ``spec`` on the InferenceService and its InferenceReplicas."""
    if spec.kind == "condition":
        return check_condition(isvc, spec)
    if spec.kind in ("rollout", "runtime-sync"):
        if spec.kind == "rollout":
            matched, reason, rows, detail = check_rollout(isvc, spec.want)
            evidence = "Reported"  # OME: invalid rollout status is Reported evidence too
        else:
            matched, reason, rows, detail = check_runtime_sync(isvc, spec.request_id)
            evidence = "Reported" if detail["runtimeSync"]["validity"] == "Valid" \
                else "Unavailable"
        return Check(matched=matched, reason=reason, rows=rows, detail=detail,
                     evidence=evidence)
    if spec.kind == "migration":
        return check_migration(irs, spec)
    if spec.kind == "held-revision":
        named = next((ir for ir in irs
                      if (ir.get("metadata") or {}).get("name") == spec.ir_name), None)
        return check_held(isvc, named, spec)
    if spec.ir_name:
        found = next((ir for ir in irs
                      if (ir.get("metadata") or {}).get("name") == spec.ir_name), None)
    else:
        found = next((ir for ir in irs
                      if (ir.get("spec") or {}).get("component") == spec.component), None)
    return check_replicas(found, spec)


# ---------------------------------------------------------------------------- report


def report_table(service: str, spec: WaitSpec, outcome: str, last: Check | None,
                 elapsed_ms: int, counts: Mapping[str, int]) -> str:
    """The FIELD/VALUE table OME prints when the wait ends."""
    reason = last.reason if last is not None else "PredicateUnmet"
    rows: list[tuple[str, str]] = [("Service", service), ("Requested", spec.requested),
                                   *spec.flag_rows(), ("Outcome", outcome)]
    if last is not None:
        rows += [r for r in last.rows if not (r[0] == "Component" and spec.component)]
    rows += [("Reason", reason),
             ("Evidence", last.evidence if last is not None else "Unavailable"),
             ("Source method", "Poll" if counts.get("polls") else "InitialGET"),
             ("Elapsed milliseconds", str(elapsed_ms)),
             ("GET / WATCH / polls",
              f"{counts.get('gets', 0)} / 0 / {counts.get('polls', 0)}")]
    return table(("FIELD", "VALUE"), rows)


def report_json(namespace: str, name: str, spec: WaitSpec, outcome: str, last: Check | None,
                elapsed_ms: int, counts: Mapping[str, int], collected_at: str
                ) -> dict[str, Any]:
    """OME's ``WaitReport`` (``cli.ome.io/v1alpha1``)."""
    content: dict[str, Any] = {
        "requested": spec.requested, "outcome": outcome,
        "reason": last.reason if last is not None else "PredicateUnmet",
        "evidence": last.evidence if last is not None else "Unavailable",
    }
    if last is not None:
        content.update(last.detail)
    content.update({"elapsedMilliseconds": elapsed_ms,
                    "counts": {"gets": counts.get("gets", 0), "watches": 0,
                               "polls": counts.get("polls", 0)},
                    "sourceMethod": "Poll" if counts.get("polls") else "InitialGET",
                    "pollingFallback": False})
    return {"apiVersion": "cli.ome.io/v1alpha1", "kind": "WaitReport",
            "metadata": {"namespace": namespace, "name": name},
            "collectedAt": collected_at, "sources": [], "content": content, "warnings": []}

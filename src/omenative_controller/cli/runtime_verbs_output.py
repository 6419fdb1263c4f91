"""``kubectl ome runtime sync|explain``: the sync action's safety checks, preview and
ActionResult, and the selection table of ``explain`` (pure, as every ``*_output`` module).

``sync`` goes ahead only on a managed pin that drifted from its live runtime (OME's rules,
``reference/kubectl-ome/runtime.md`` "Refusals"): PIN ``ManagedPin/Resolved`` on the revision
``status.pinnedRevisionName`` names, DRIFT ``ReportedTrue/RevisionMismatch``, LIVE-RELATION
``Different``, no earlier token pending, no rollout run, no rollout mailbox, and every
OMENative InferenceReplica of the service settled (no lag, operation, migration, retry block
or deletion).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from omenative_controller.cli.ome_output import (
    ANNOTATION_PAUSED,
    ANNOTATION_PROMOTE,
    ANNOTATION_RELEASE_HELD,
    ANNOTATION_REPIN,
    ANNOTATION_ROLLBACK,
)
from omenative_controller.cli.output_basics import decode_status, table
from omenative_controller.cli.runtime_output import Effective, effective_rows
from omenative_controller.cli.runtime_tree_output import chain_of
from omenative_controller.cli.wait_predicates import TOKEN_PREFIX
from omenative_core.codec import CodecError
from omenative_core.rollout.state import RolloutStateError, state_from_json
from omenative_core.service import BaseModel, InferenceService, ServingRuntime
from omenative_core.service.runtime_pin import ANNOTATION_RUNTIME_SYNC
from omenative_core.service.runtime_select import compatible_runtimes, incompatibility

__all__ = ["REFUSE_CONTROLLER", "REFUSE_DELETING", "REFUSE_EVIDENCE", "REFUSE_IDENTITY",
           "REFUSE_MAILBOX", "TOKEN_PREFIX", "action_result_json", "action_result_table",
           "effective_context", "explain_table", "predicted_revision", "sync_preview",
           "sync_refusal"]

REFUSE_IDENTITY = "action refused: target identity is missing or unsafe"
REFUSE_DELETING = "action refused: target is being deleted"
REFUSE_EVIDENCE = ("action refused: managed runtime sync safety evidence is unavailable or "
                   "inconsistent")
REFUSE_CONTROLLER = "action refused: controller safety evidence is stale or inconsistent"
REFUSE_MAILBOX = "action refused: a rollout promote or rollback mailbox is present"
_MAX_REPLICAS = 32


def _obj(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _identity_refusal(isvc: Mapping[str, Any]) -> str | None:
    meta = _obj(isvc.get("metadata"))
    if not all(meta.get(k) for k in ("name", "namespace", "uid", "resourceVersion")) or \
            not isinstance(meta.get("generation"), int):
        return REFUSE_IDENTITY
    if meta.get("deletionTimestamp"):
        return REFUSE_DELETING
    return None


def _evidence_ok(rep: Effective, isvc: Mapping[str, Any]) -> bool:
    ref = _obj(_obj(isvc.get("spec")).get("runtime"))
    reported = _obj(isvc.get("status")).get("pinnedRevisionName")
    return (rep.pin_mode == "ManagedPin" and rep.pin_state == "Resolved"
            and rep.active.revision == reported and not ref.get("revision")
            and ref.get("apiGroup", "ome.io") == "ome.io"
            and rep.drift == "ReportedTrue" and rep.drift_cause == "RevisionMismatch"
            and rep.relation == "Different" and rep.sync != "Pending"
            and rep.live.state == "Available" and len(rep.chain or ()) <= 5)


def _rollout_active(isvc: Mapping[str, Any]) -> bool:
    raw = _obj(isvc.get("status")).get("rollout")
    if not raw:
        return False
    try:
        state = state_from_json(raw)
    except (RolloutStateError, CodecError, ValueError, TypeError):
        return True
    return state.active or any(g.phase == "RolledBack" for g in state.groups)


def _replica_unsettled(ir: Mapping[str, Any], isvc_name: str) -> bool:
    meta, spec = _obj(ir.get("metadata")), _obj(ir.get("spec"))
    if meta.get("deletionTimestamp") or _obj(spec.get("pacing")).get("rollbackToRevision"):
        return True
    if meta.get("name") != f"{isvc_name}-{spec.get('component')}":
        return True
    try:
        status = decode_status(ir)
    except (CodecError, ValueError, TypeError):
        return True
    if status.observed_generation != meta.get("generation"):
        return True
    return bool(status.migrations or status.retry_blocks
                or any(row.operation is not None for row in status.instances)
                or status.ready_replicas > status.replicas)


def _controller_refusal(rep: Effective, name: str,
                        mine: Sequence[Mapping[str, Any]], isvc: Mapping[str, Any]) -> str | None:
    if len(mine) > _MAX_REPLICAS:
        return "action refused: safety inputs exceed inspection bounds"
    native = [c for c, mode, _ in rep.active.modes if mode == "OMENative"]
    have = {_obj(ir.get("spec")).get("component") for ir in mine}
    if _rollout_active(isvc) or any(_replica_unsettled(ir, name) for ir in mine) or \
            any(c not in have for c in native):
        return REFUSE_CONTROLLER
    return None


def _mailbox(isvc: Mapping[str, Any], mine: Sequence[Mapping[str, Any]]) -> bool:
    annotations = _obj(_obj(isvc.get("metadata")).get("annotations"))
    if any(k in annotations for k in (ANNOTATION_PROMOTE, ANNOTATION_ROLLBACK, ANNOTATION_REPIN)):
        return True
    return any(ANNOTATION_RELEASE_HELD in _obj(_obj(ir.get("metadata")).get("annotations"))
               for ir in mine)


def sync_refusal(rep: Effective, isvc: Mapping[str, Any],
                 replicas: Sequence[Mapping[str, Any]]) -> str | None:
    """Why ``runtime sync`` must not write now (OME's message), or None: it may."""
    refusal = _identity_refusal(isvc)
    if refusal is not None:
        return refusal
    if not _evidence_ok(rep, isvc):
        return REFUSE_EVIDENCE
    name = str(_obj(isvc.get("metadata")).get("name"))
    mine = [ir for ir in replicas
            if _obj(_obj(ir.get("spec")).get("parentRef")).get("name") == name]
    refusal = _controller_refusal(rep, name, mine, isvc)
    if refusal is not None:
        return refusal
    return REFUSE_MAILBOX if _mailbox(isvc, mine) else None


def predicted_revision(rep: Effective) -> str:
    """The revision the manager will pin for the live spec: ``cr-<rt>-<hash>`` or
    ``r-<ns>-<rt>-<hash>``."""
    digest = rep.live.digest[:8]
    if rep.live.kind == "ServingRuntime":
        return f"r-{rep.namespace}-{rep.live.name}-{digest}"
    return f"cr-{rep.live.name}-{digest}"


def sync_preview(rep: Effective, isvc: Mapping[str, Any], *, context: str, dry_run: str,
                 request_id: str, target_exists: bool) -> str:
    """The FIELD/VALUE preview ``sync`` prints on stderr before it asks."""
    meta = _obj(isvc.get("metadata"))
    reported = _obj(isvc.get("status")).get("observedGeneration")
    pause = _obj(meta.get("annotations")).get(ANNOTATION_PAUSED)
    rows = [("Action", "runtime sync"), ("Context", context or "-"),
            ("Workload NS", rep.namespace), ("Target", f"InferenceService/{rep.name}"),
            ("UID", str(meta.get("uid"))), ("ResourceVersion", str(meta.get("resourceVersion"))),
            ("Dry-run", dry_run), ("Generation", str(meta.get("generation"))),
            ("Reported gen", "-" if reported is None else str(reported)),
            ("Freshness", "Unverifiable (advisory global status)"),
            ("Pin", rep.active.revision),
            ("Pin source", f"{rep.live.kind}/{rep.live.namespace or ''}/{rep.live.name}"),
            ("Current hash", rep.active.digest[:8]), ("Target hash", rep.live.digest[:8]),
            ("Predicted pin", predicted_revision(rep)),
            ("Target evidence", "Existing" if target_exists else "NotFound"),
            ("Old sync token", rep.sync),
            ("Pause state", {"true": "Paused", "freeze": "Freeze"}.get(str(pause),
                                                                      "Not recognized")),
            ("Request UUID", request_id), ("Set annotation", ANNOTATION_RUNTIME_SYNC),
            ("New token", TOKEN_PREFIX + request_id)]
    notes = ["API acceptance is not convergence or serving-revision readiness.",
             "Requests latest merged live runtime when controller consumes the token.",
             "Previewed content is not locked by this annotation.",
             "Existing pause/freeze and lifecycle/rollout policies remain in effect."]
    return "\n".join(["ALPHA runtime sync preview (acceptance is not convergence)",
                      table(("FIELD", "VALUE"), rows), *notes])


_MESSAGES = {"client": "Validated locally; no patch sent.",
             "server": "API dry-run accepted; no changes persisted.",
             "none": "API accepted annotation request; consumption and convergence not "
                     "observed."}


def action_result_json(rep: Effective, *, uid: str, dry_run: str, request_id: str,
                       follow_up: str) -> dict[str, Any]:
    """The ActionResult of ``runtime sync`` (``cli.ome.io/v1alpha1``)."""
    return {"apiVersion": "cli.ome.io/v1alpha1", "kind": "ActionResult",
            "action": "runtime sync",
            "target": {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
                       "namespace": rep.namespace, "name": rep.name, "uid": uid},
            "dryRun": dry_run, "accepted": dry_run != "client", "applied": dry_run == "none",
            "requestID": request_id, "revisionHash": rep.live.digest[:8],
            "message": _MESSAGES[dry_run], "followUp": follow_up}


def _cut(text: str, limit: int = 56) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def action_result_table(result: Mapping[str, Any]) -> str:
    """The ActionResult as OME's FIELD/VALUE table (values cut at 56 characters)."""
    target = _obj(result.get("target"))
    rows = [("action", str(result["action"])),
            ("target", f"InferenceService/{target.get('namespace')}/{target.get('name')}"),
            ("dry-run", str(result["dryRun"])),
            ("accepted", "Yes" if result["accepted"] else "No"),
            ("applied", "Yes" if result["applied"] else "No"),
            ("request-id", str(result["requestID"])),
            ("revision-hash", str(result["revisionHash"])),
            ("message", str(result["message"])), ("follow-up", str(result["followUp"])),
            ("hint", "Use -o json or -o yaml for full values.")]
    return table(("FIELD", "VALUE"), [(k, _cut(v)) for k, v in rows])


# ---------------------------------------------------------------------------- explain

_NO_AUTOSELECT = ("supports the model but has no supportedModelFormats[].autoSelect=true "
                  "entry, so automatic selection skips it (pin it explicitly via "
                  "spec.runtime.name instead)")


def _formats(rt: ServingRuntime) -> list[Mapping[str, Any]]:
    return [f for f in rt.spec.get("supportedModelFormats") or () if isinstance(f, Mapping)]


def _first_match(rt: ServingRuntime, model: BaseModel) -> Mapping[str, Any] | None:
    for entry in _formats(rt):
        fmt = _obj(entry.get("modelFormat"))
        if fmt.get("name") == model.format_name:
            return entry
    return None


def _priority_weight(rt: ServingRuntime, model: BaseModel) -> tuple[str, str]:
    entry = _first_match(rt, model) or {}
    prio = entry.get("priority")
    prio = prio if isinstance(prio, int) and not isinstance(prio, bool) else 1
    weight = 0
    for key in ("modelFormat", "modelFramework"):
        w = _obj(entry.get(key)).get("weight")
        if isinstance(w, int) and w > 0:
            weight += w * prio
    return str(prio), str(weight)


def _no_reason(rt: ServingRuntime, model: BaseModel, isvc: InferenceService) -> str:
    reason = incompatibility(rt, model, isvc)
    if reason is not None:
        return reason
    formats = _formats(rt)
    if not any(f.get("autoSelect") is True for f in formats):
        return _NO_AUTOSELECT
    entry = _first_match(rt, model)
    if entry is not None and entry.get("autoSelect") is not True:
        name = _obj(entry.get("modelFormat")).get("name")
        return (f"matching format {name} is not autoSelect-enabled (a different "
                "supportedModelFormats entry on this runtime has autoSelect=true, but not "
                "the one that matches this model)")
    return "auto-select score is 0"


def explain_table(isvc: InferenceService, model: BaseModel,
                  runtimes: Sequence[ServingRuntime]) -> tuple[str, int]:
    """OME's RUNTIME SCOPE COMPATIBLE PRIORITY WEIGHT REASON table (``Yes`` rows in rank
    order, then ``No`` rows, ServingRuntimes first, each by name) and how many rows."""
    visible = [rt for rt in runtimes
               if rt.kind == "ClusterServingRuntime" or rt.namespace == isvc.namespace]
    ranked = [sel.runtime for sel in compatible_runtimes(isvc, model, visible)
              if sel.runtime is not None]
    chosen = {(rt.kind, rt.name) for rt in ranked}
    rows = []
    for rt in ranked:
        prio, weight = _priority_weight(rt, model)
        rows.append([rt.name, _scope(rt), "Yes", prio, weight, "-"])
    rest = sorted((rt for rt in visible if (rt.kind, rt.name) not in chosen),
                  key=lambda rt: (rt.kind != "ServingRuntime", rt.name))
    rows += [[rt.name, _scope(rt), "No", "-", "-", _no_reason(rt, model, isvc)] for rt in rest]
    return table(("RUNTIME", "SCOPE", "COMPATIBLE", "PRIORITY", "WEIGHT", "REASON"), rows), \
        len(rows)


def _scope(rt: ServingRuntime) -> str:
    return "Cluster" if rt.kind == "ClusterServingRuntime" else "Namespaced"


# ---------------------------------------------------------------- explain --with-effective

CONTEXT_HEADING = "Effective context (separate observation; selector verdict unchanged):"
"""The line ``explain --with-effective`` prints before its second table."""


def effective_context(rep: Effective | None, runtimes: Sequence[ServingRuntime]) -> str:
    """The second table of ``explain --isvc --with-effective`` (OME's "Effective context"):
    how the runtime was chosen, its inheritance chain root first, a caveat, then the rows
    ``effective`` prints; only EVIDENCE/CAVEAT when the context could not be collected
    (``rep`` None)."""
    if rep is None:
        rows = [("Service", "EVIDENCE", "Unavailable"),
                ("Service", "CAVEAT", "Selector verdict above is unchanged")]
        return "\n".join([CONTEXT_HEADING, table(("SCOPE", "FIELD", "VALUE"), rows)])
    rows = [("Service", "SELECTION", rep.selection)]
    live = rep.live
    if live.name:
        rows.append(("Service", "SOURCE", live.runtime()))
    source = next((rt for rt in runtimes if rt.kind == live.kind and rt.name == live.name
                   and (rt.kind == "ClusterServingRuntime" or rt.namespace == live.namespace)),
                  None)
    chain, reason = chain_of(source, runtimes) if source is not None else ([], "NotFound")
    if reason is None:
        rows.append(("Source", "INHERITANCE", "Observed"))
        rows += [("Source", "ROOT-FIRST", label) for label in chain]
    else:
        rows += [("Source", "INHERITANCE", "Unavailable"), ("Source", "REASON", reason)]
    rows.append(("Service", "CAVEAT", "Independent snapshot; not rollout convergence"))
    rows += effective_rows(rep)
    return "\n".join([CONTEXT_HEADING, table(("SCOPE", "FIELD", "VALUE"), rows)])

"""``kubectl ome runtime effective|history``: the runtime behind an InferenceService, in OME's
Live and Active views (pure: the command reads the objects, this module judges them).

* **Live**: the runtime ``spec.runtime`` names, or the one OME selects for the model, merged
  with its ``ome.io/inherit-from`` chain (the core's ``select_runtime`` and
  ``inherited_runtime``).
* **Active**: what the InferenceService is meant to run: the runtime revision it is pinned
  to (``spec.runtime.revision``, else ``status.pinnedRevisionName``), or Live when it is not
  pinned.

HASH is the first 8 hex of the sha256 of the spec's canonical JSON, the same digest the
manager puts in a revision's name (``runtime_pin.spec_digest``), so a revision that holds the
live spec shows the live hash. The states, reasons and issue codes are OME's
(``reference/kubectl-ome/runtime.md``); ``runtime_sync`` and ``runtime_explain`` hold the
other two verbs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from attrs import field, frozen

from omenative_controller.cli.output_basics import table
from omenative_core.codec import CodecError
from omenative_core.service import (
    BaseModel,
    InferenceService,
    InheritanceError,
    RuntimeRef,
    ServingRuntime,
    basemodel_from_json,
    explain_mode,
    inheritance_health,
    inherited_runtime,
    isvc_from_json,
    runtime_from_json,
    select_runtime,
)
from omenative_core.service.models import find_model, model_ref
from omenative_core.service.objects import find_runtime
from omenative_core.service.runtime_pin import (
    ANNOTATION_RUNTIME_SYNC,
    CONDITION_RUNTIME_DRIFTED,
    LABEL_RUNTIME_OF,
    spec_digest,
)
from omenative_core.service.runtime_select import incompatibility

__all__ = ["COMPONENTS", "Effective", "HistoryRow", "View", "components_of", "decode_isvc",
           "decode_models", "decode_runtimes", "drift_state", "effective", "effective_json",
           "effective_rows", "effective_table", "effective_wide", "generation_state",
           "history_json", "history_rows", "history_table", "report", "revision_problems",
           "runtime_label", "sync_state"]

COMPONENTS = ("engine", "decoder", "router")
"""The components of an InferenceService, in OME's order."""
T = TypeVar("T")
_KINDS = ("ServingRuntime", "ClusterServingRuntime")
_DRIFT_CAUSES = ("RevisionMismatch", "RevisionMissing", "SourceRuntimeMissing",
                 "RuntimeMismatch")


def _obj(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def runtime_label(kind: str, name: str, namespace: str | None, *, full: bool = False) -> str:
    """``CSR/<name>`` or ``SR/<namespace>/<name>`` (``full``: the kind spelled out)."""
    if kind == "ClusterServingRuntime":
        return f"ClusterServingRuntime/{name}" if full else f"CSR/{name}"
    return f"ServingRuntime/{namespace}/{name}" if full else f"SR/{namespace}/{name}"


@frozen(kw_only=True)
class View:
    """One view (Live or Active): available or why not, its runtime, revision and hash, and
    each component's deployment mode with its source."""

    state: str = "Available"
    reason: str = ""
    kind: str = ""
    name: str = ""
    namespace: str | None = None
    revision: str = ""
    digest: str = ""
    modes: tuple[tuple[str, str, str], ...] = ()

    def runtime(self, *, full: bool = False) -> str:
        """The runtime as ``CSR/<name>`` (``full``: ``ClusterServingRuntime/<name>``)."""
        return runtime_label(self.kind, self.name, self.namespace, full=full) if self.name \
            else ""


def _unavailable(reason: str, ref: RuntimeRef | None = None, ns: str | None = None) -> View:
    if ref is None:
        return View(state="Unavailable", reason=reason)
    return View(state="Unavailable", reason=reason, kind=ref.kind, name=ref.name,
                namespace=ns if ref.kind == "ServingRuntime" else None)


@frozen(kw_only=True)
class Effective:
    """The whole ``runtime effective`` report of one InferenceService."""

    namespace: str
    name: str
    live: View
    active: View
    pin_mode: str
    pin_state: str
    sync: str
    status: str
    drift: str
    drift_cause: str
    relation: str
    selection: str
    chain: tuple[str, ...] | None
    issues: tuple[str, ...] = ()
    live_runtime: ServingRuntime | None = field(default=None, eq=False, repr=False)


def _decoded(objects: Sequence[Mapping[str, Any]], decode: Callable[[object], T]) -> list[T]:
    """The objects that decode (a bad one is left out, as the manager does)."""
    out: list[T] = []
    for obj in objects:
        try:
            out.append(decode(obj))
        except CodecError:
            continue
    return out


def decode_runtimes(objects: Sequence[Mapping[str, Any]]) -> list[ServingRuntime]:
    """The ServingRuntimes and ClusterServingRuntimes that decode."""
    return _decoded(objects, runtime_from_json)


def decode_models(objects: Sequence[Mapping[str, Any]]) -> list[BaseModel]:
    """The BaseModels and ClusterBaseModels that decode."""
    return _decoded(objects, basemodel_from_json)


def components_of(isvc: InferenceService, runtime: ServingRuntime | None) -> list[str]:
    """The components the InferenceService has (the engine also when only its runtime
    configures it), in OME's order."""
    return [c for c in COMPONENTS
            if isvc.component(c) is not None or (c == "engine" and runtime is not None
                                                 and runtime.config(c) is not None)]


def _modes(isvc: InferenceService, runtime: ServingRuntime | None) -> tuple[
        tuple[str, str, str], ...]:
    out = []
    for comp in components_of(isvc, runtime):
        res = explain_mode(isvc, runtime, comp)
        out.append((comp, res.mode, res.source))
    return tuple(out)


def _live(isvc: InferenceService, runtimes: Sequence[ServingRuntime],
          models: Sequence[BaseModel]) -> tuple[View, str, ServingRuntime | None,
                                                tuple[str, ...] | None, list[str]]:
    """(Live view, selection, the merged runtime, chain root first, issues)."""
    issues: list[str] = []
    ref, selection = isvc.runtime_ref, "Explicit"
    mref = model_ref(isvc)
    model = find_model(mref, isvc.namespace, models) if mref is not None else None
    if ref is None:
        selection = "Selected"
        if mref is None:
            return _unavailable("NotConfigured"), "NotConfigured", None, None, issues
        chosen = select_runtime(isvc, model, runtimes).ref if model is not None else None
        if chosen is None:
            return _unavailable("NotFound"), selection, None, None, ["LiveRuntimeUnavailable"]
        ref = chosen
    runtime = find_runtime(isvc, runtimes, ref)
    if runtime is None:
        return (_unavailable("NotFound", ref, isvc.namespace), selection, None, None,
                ["LiveRuntimeUnavailable"])
    health = inheritance_health(runtime, runtimes)
    try:
        merged = inherited_runtime(runtime, runtimes)
    except InheritanceError as exc:
        reason = "NotFound" if exc.reason == "ParentNotFound" else "Unreadable"
        return (_unavailable(reason, ref, isvc.namespace), selection, None, None,
                ["InheritanceUnavailable", "LiveRuntimeUnavailable"])
    if merged.disabled:
        return (_unavailable("Disabled", ref, isvc.namespace), selection, merged, health.chain,
                ["LiveRuntimeUnavailable"])
    if (isvc.runtime_ref is not None and model is not None and not _pinned(isvc)
            and incompatibility(merged, model, isvc) is not None):
        issues.append("DeclaredCompatibilityMismatch")
    view = View(kind=ref.kind, name=ref.name,
                namespace=isvc.namespace if ref.kind == "ServingRuntime" else None,
                digest=spec_digest(merged.spec), modes=_modes(isvc, merged))
    return view, selection, merged, health.chain, issues


def _pinned(isvc: InferenceService) -> bool:
    return isvc.runtime_ref is not None and _obj(isvc.spec.get("runtime")).get("autoSync") \
        is False


def _pin_mode(raw_ref: Mapping[str, Any], has_ref: bool) -> str:
    if raw_ref.get("autoSync") is not False or not raw_ref.get("name"):
        return "AutoSync"
    if "kind" in raw_ref and raw_ref.get("kind") not in _KINDS:
        return "InvalidPin"
    return "ExplicitPin" if raw_ref.get("revision") else "ManagedPin" if has_ref else "AutoSync"


def revision_problems(obj: Mapping[str, Any], ref: RuntimeRef, namespace: str) -> list[str]:
    """OME's revision issue codes for one runtime revision of ``ref`` (empty: consistent)."""
    meta = _obj(obj.get("metadata"))
    name = str(meta.get("name") or "")
    labels = _obj(meta.get("labels"))
    spec = _obj(obj.get("data")).get("spec")
    issues: list[str] = []
    if LABEL_RUNTIME_OF not in labels:
        issues.append(f"RevisionNotOMEManaged({name})")
    prefix = f"cr-{ref.name}-" if ref.kind == "ClusterServingRuntime" else \
        f"r-{namespace}-{ref.name}-"
    if labels.get(LABEL_RUNTIME_OF) != ref.name or not name.startswith(prefix):
        issues.append(f"RevisionSourceMismatch({name})")
    if not isinstance(spec, Mapping):
        return [*issues, f"RevisionPayloadMalformed({name})"]
    if name.rsplit("-", 1)[-1] != spec_digest(spec)[:8]:
        issues.append(f"RevisionHashMismatch({name})")
    if obj.get("revision", 1) != 1:
        issues.append(f"RevisionOrdinalUnexpected({name})")
    if spec.get("disabled") is True:
        issues.append(f"RevisionDisabled({name})")
    return issues


def _active(isvc: InferenceService, mode: str, live: View, merged: ServingRuntime | None,
            revisions: Mapping[str, Mapping[str, Any]]) -> tuple[View, str, list[str]]:
    """(Active view, pin state, issues)."""
    live_bad = live.state != "Available"
    if mode == "AutoSync":
        active = View(state=live.state, reason=live.reason, kind=live.kind, name=live.name,
                      namespace=live.namespace, digest=live.digest, modes=live.modes)
        return active, "Unavailable" if live_bad else "NotApplicable", []
    if mode == "InvalidPin":
        return _unavailable("MalformedPayload"), "InvalidIntent", ["InvalidDeclaredKind"]
    ref = isvc.runtime_ref
    assert ref is not None
    raw_ref = _obj(isvc.spec.get("runtime"))
    reported = isvc.status.get("pinnedRevisionName")
    reported = reported if isinstance(reported, str) and reported else None
    wanted = str(raw_ref.get("revision")) if mode == "ExplicitPin" else reported
    if wanted is None:
        active = View(state=live.state, reason=live.reason, kind=live.kind, name=live.name,
                      namespace=live.namespace, digest=live.digest, modes=live.modes)
        return active, "Unavailable" if live_bad else "AwaitingPin", ["ActiveRevisionUnreported"]
    active, state, issues = _revision_view(isvc, ref, revisions.get(wanted), wanted, merged)
    if state != "Resolved":
        return active, state, issues
    if mode == "ExplicitPin" and reported is not None and reported != wanted:
        state = "DesiredReportedMismatch"
    elif live.reason in ("Disabled", "Unreadable"):
        state = "Unavailable"
    return active, state, []


def _revision_view(isvc: InferenceService, ref: RuntimeRef, obj: Mapping[str, Any] | None,
                   wanted: str, merged: ServingRuntime | None) -> tuple[View, str, list[str]]:
    """The Active view of the pinned revision ``wanted`` (``Resolved``), or why not."""
    if obj is None:
        return (_unavailable("NotFound", ref, isvc.namespace), "RevisionMissing",
                ["ActiveRevisionUnavailable", f"RevisionNotFound({wanted})"])
    problems = revision_problems(obj, ref, isvc.namespace)
    spec = _obj(_obj(obj.get("data")).get("spec"))
    if any(p.startswith("RevisionDisabled") for p in problems):
        return (_unavailable("Disabled", ref, isvc.namespace), "RevisionDisabled",
                ["ActiveRevisionUnavailable", *problems])
    if problems:
        return (_unavailable("MalformedPayload", ref, isvc.namespace), "RevisionInvalid",
                ["ActiveRevisionUnavailable", *problems])
    base = merged.raw if merged is not None else {
        "kind": ref.kind, "metadata": {"name": ref.name, "namespace": isvc.namespace}}
    runtime = ServingRuntime({**base, "spec": dict(spec)})
    active = View(kind=ref.kind, name=ref.name,
                  namespace=isvc.namespace if ref.kind == "ServingRuntime" else None,
                  revision=wanted, digest=spec_digest(spec), modes=_modes(isvc, runtime))
    return active, "Resolved", []


def sync_state(isvc: Mapping[str, Any]) -> str:
    """``ome.io/runtime-sync`` against ``status.lastRuntimeSyncToken``: Absent, StatusOnly,
    Acknowledged or Pending."""
    token = _obj(_obj(isvc.get("metadata")).get("annotations")).get(ANNOTATION_RUNTIME_SYNC)
    last = _obj(isvc.get("status")).get("lastRuntimeSyncToken")
    if not token:
        return "StatusOnly" if last else "Absent"
    return "Acknowledged" if token == last else "Pending"


def generation_state(isvc: Mapping[str, Any]) -> str:
    """``status.observedGeneration`` against ``metadata.generation``."""
    seen = _obj(isvc.get("status")).get("observedGeneration")
    gen = _obj(isvc.get("metadata")).get("generation")
    if not isinstance(seen, int) or not isinstance(gen, int):
        return "Unobserved"
    return "Current" if seen == gen else "Stale" if seen < gen else "Invalid"


def drift_state(isvc: Mapping[str, Any]) -> tuple[str, str]:
    """The RuntimeDrifted condition as (state, cause)."""
    found = [c for c in _obj(isvc.get("status")).get("conditions") or ()
             if isinstance(c, Mapping) and c.get("type") == CONDITION_RUNTIME_DRIFTED]
    if not found:
        return "NotReported", ""
    if len(found) > 1:
        return "Malformed", ""
    status = found[0].get("status")
    if status not in ("True", "False", "Unknown"):
        return "Malformed", ""
    reason = found[0].get("reason")
    return f"Reported{status}", reason if reason in _DRIFT_CAUSES else "Other"


def _relation(live: View, active: View) -> str:
    if not live.digest or not active.digest:
        return "Unknown"
    if live.digest == active.digest:
        return "Equal"
    return "Ambiguous" if live.digest[:8] == active.digest[:8] else "Different"


def decode_isvc(raw: Mapping[str, Any]) -> tuple[InferenceService, bool]:
    """The InferenceService, and whether its ``spec.runtime.kind`` is invalid (then it is
    decoded without it, so the rest of the report can still be made)."""
    ref = _obj(_obj(raw.get("spec")).get("runtime"))
    if "kind" in ref and ref.get("kind") not in _KINDS:
        fixed_ref = {k: v for k, v in ref.items() if k != "kind"}
        return isvc_from_json({**raw, "spec": {**_obj(raw.get("spec")),
                                               "runtime": fixed_ref}}), True
    return isvc_from_json(raw), False


def effective(isvc_obj: Mapping[str, Any], runtimes: Sequence[ServingRuntime],
              models: Sequence[BaseModel], revisions: Sequence[Mapping[str, Any]]) -> Effective:
    """The report of ``isvc_obj``; ``revisions``: the runtime revisions in OME's namespace.
    ValueError (CodecError) when the InferenceService itself does not decode."""
    isvc, bad_kind = decode_isvc(isvc_obj)
    live, selection, merged, chain, issues = _live(isvc, runtimes, models)
    raw_ref = _obj(_obj(isvc_obj.get("spec")).get("runtime"))
    mode = _pin_mode(raw_ref, isvc.runtime_ref is not None)
    by_name = {str(_obj(r.get("metadata")).get("name")): r for r in revisions}
    active, pin_state, active_issues = _active(isvc, mode, live, merged, by_name)
    if bad_kind and "InvalidDeclaredKind" not in active_issues:
        issues.insert(0, "InvalidDeclaredKind")
    status = generation_state(isvc_obj)
    drift, cause = drift_state(isvc_obj)
    if status != "Current":
        issues.append(f"Status{status}")
    if drift == "Malformed":
        issues.append("ReportedDriftConflict")
    meta = _obj(isvc_obj.get("metadata"))
    return Effective(namespace=str(meta.get("namespace") or ""), name=str(meta.get("name")),
                     live=live, active=active, pin_mode=mode, pin_state=pin_state,
                     sync=sync_state(isvc_obj), status=status, drift=drift, drift_cause=cause,
                     relation=_relation(live, active), selection=selection, chain=chain,
                     issues=tuple(dict.fromkeys([*issues, *active_issues])),
                     live_runtime=merged)


# ---------------------------------------------------------------------------- output


def _cut(text: str, limit: int = 54) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _view_rows(scope: str, view: View) -> list[tuple[str, str, str]]:
    rows = [(scope, "STATE", view.state)]
    for key, value in (("REASON", view.reason), ("RUNTIME", view.runtime()),
                       ("REVISION", view.revision), ("HASH", view.digest[:8])):
        if value:
            rows.append((scope, key, _cut(value)))
    rows += [(scope, comp.upper(), f"{mode} ({source})") for comp, mode, source in view.modes]
    return rows


def _drift_text(rep: Effective) -> str:
    return f"{rep.drift}/{rep.drift_cause}" if rep.drift_cause else rep.drift


def effective_rows(rep: Effective) -> list[tuple[str, str, str]]:
    """The SCOPE/FIELD/VALUE rows of ``effective``: Live, Active, then Service."""
    rows = _view_rows("Live", rep.live) + _view_rows("Active", rep.active)
    rows += [("Service", "PIN", f"{rep.pin_mode}/{rep.pin_state}"),
             ("Service", "SYNC", rep.sync), ("Service", "STATUS", rep.status),
             ("Service", "DRIFT", _drift_text(rep)),
             ("Service", "LIVE-RELATION", rep.relation)]
    return rows + [("Service", "ISSUE", _cut(issue)) for issue in rep.issues]


def effective_table(rep: Effective) -> str:
    """OME's SCOPE/FIELD/VALUE table: Live rows, Active rows, then Service rows."""
    return table(("SCOPE", "FIELD", "VALUE"), effective_rows(rep))


def effective_wide(rep: Effective) -> str:
    """One row per view and component, the Service fields repeated on each."""
    rows = []
    for scope, view in (("Live", rep.live), ("Active", rep.active)):
        for comp, mode, source in view.modes or (("-", "-", "-"),):
            rows.append([scope, view.state, view.reason or "-", view.runtime(full=True) or "-",
                         view.revision or "-", view.digest[:8] or "-", comp, mode, source,
                         rep.pin_mode, rep.pin_state, rep.sync, rep.status, _drift_text(rep),
                         rep.relation, ",".join(rep.issues) or "-"])
    return table(("VIEW", "STATE", "REASON", "RUNTIME", "REVISION", "HASH", "COMPONENT",
                  "MODE", "MODE-SOURCE", "PIN", "PIN-STATE", "SYNC", "STATUS", "DRIFT",
                  "LIVE-RELATION", "ISSUES"), rows)


def _view_json(view: View) -> dict[str, Any]:
    out: dict[str, Any] = {"state": view.state}
    if view.reason:
        out["reason"] = view.reason
    if view.name:
        out["runtime"] = {"kind": view.kind, "name": view.name}
        if view.namespace:
            out["runtime"]["namespace"] = view.namespace
    if view.revision:
        out["revision"] = view.revision
    if view.digest:
        out["hash"] = view.digest[:8]
        out["fullHash"] = view.digest
    out["components"] = [{"type": c, "deploymentMode": m, "modeSource": s}
                         for c, m, s in view.modes]
    return out


def report(kind: str, namespace: str, name: str, collected_at: str,
           content: Mapping[str, Any], warnings: Sequence[str] = ()) -> dict[str, Any]:
    """An OME CLI report envelope (``cli.ome.io/v1alpha1``)."""
    return {"apiVersion": "cli.ome.io/v1alpha1", "kind": kind,
            "metadata": {"namespace": namespace, "name": name}, "collectedAt": collected_at,
            "sources": [], "content": dict(content),
            "warnings": [{"code": w} for w in warnings]}


def effective_json(rep: Effective, collected_at: str) -> dict[str, Any]:
    """OME's ``RuntimeEffectiveReport``, with the selection and the inheritance chain."""
    content = {
        "live": _view_json(rep.live), "active": _view_json(rep.active),
        "service": {"pin": {"mode": rep.pin_mode, "state": rep.pin_state},
                    "sync": rep.sync, "status": rep.status,
                    "drift": {"state": rep.drift, "cause": rep.drift_cause or None},
                    "liveRelation": rep.relation, "issues": list(rep.issues)},
        "selection": {"mode": rep.selection},
        "inheritance": {"state": "Observed" if rep.chain else "Unavailable",
                        "rootFirst": list(rep.chain or ())},
    }
    return report("RuntimeEffectiveReport", rep.namespace, rep.name, collected_at, content,
                  ["PartialData"] if rep.issues else [])


# ---------------------------------------------------------------------------- history


@frozen(kw_only=True)
class HistoryRow:
    """One runtime revision in ``history``."""

    name: str
    created: str
    digest: str
    roles: tuple[str, ...]
    source: str
    issues: tuple[str, ...]
    relation: str


def history_rows(rep: Effective, isvc_obj: Mapping[str, Any],
                 revisions: Sequence[Mapping[str, Any]]) -> list[HistoryRow]:
    """The revisions of the report's runtime (those labelled with its name), newest first."""
    runtime = rep.live.name or rep.active.name
    if not runtime:
        return []
    ref = RuntimeRef(name=runtime, kind=rep.live.kind or rep.active.kind)
    raw_ref = _obj(_obj(isvc_obj.get("spec")).get("runtime"))
    reported = _obj(isvc_obj.get("status")).get("pinnedRevisionName")
    mine = [r for r in revisions
            if _obj(_obj(r.get("metadata")).get("labels")).get(LABEL_RUNTIME_OF) == runtime]
    mine.sort(key=lambda r: str(_obj(r.get("metadata")).get("creationTimestamp") or ""),
              reverse=True)
    rows = []
    for obj in mine:
        meta = _obj(obj.get("metadata"))
        name = str(meta.get("name") or "")
        spec = _obj(obj.get("data")).get("spec")
        digest = spec_digest(spec) if isinstance(spec, Mapping) else ""
        roles = tuple(role for role, held in (
            ("Active", name == rep.active.revision), ("Requested", raw_ref.get("revision") == name),
            ("Reported", reported == name), ("History", True)) if held)
        live = rep.live.digest
        relation = "Unknown" if not digest or not live else "MatchesLive" if digest == live \
            else "AmbiguousLive" if digest[:8] == live[:8] else "DiffersFromLive"
        source = runtime_label(ref.kind, runtime, rep.namespace, full=True)
        rows.append(HistoryRow(name=name, created=str(meta.get("creationTimestamp") or ""),
                               digest=digest, roles=roles, source=source, relation=relation,
                               issues=tuple(revision_problems(obj, ref, rep.namespace))))
    return rows


_ROLE_LETTER = {"Active": "A", "Reported": "R", "Requested": "Q", "History": "H"}
_RELATION_SHORT = {"MatchesLive": "MATCH", "DiffersFromLive": "DIFF", "AmbiguousLive": "AMB",
                   "Unknown": "?"}


def _short_name(name: str) -> str:
    if len(name) <= 14:
        return name
    return f"{name[:2]}...#{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def _created_short(stamp: str) -> str:
    # 2026-09-20T14:30:00Z -> 26-09-20T14:30Z
    return f"{stamp[2:16]}Z" if len(stamp) >= 16 else (stamp or "-")


def _count(n: int) -> str:
    return "9+" if n > 9 else str(n)


def history_table(rows: Sequence[HistoryRow], report_issues: Sequence[str], *,
                  wide: bool = False) -> str:
    """OME's history table (WINDOW REVISION CREATED ROLES CHECK LIVE ISSUES), or ``wide``."""
    g = len(report_issues)
    if wide:
        body = [["Complete", "RetentionBounded", "1/1", r.name, r.created or "-",
                 r.digest[:8] or "-", ",".join(r.roles), r.source,
                 "Inconsistent" if r.issues else "Consistent", r.relation,
                 ",".join(r.issues) or "-", ",".join(report_issues) or "-"] for r in rows]
        return table(("OBSERVATION", "COMPLETENESS", "PAGES", "REVISION", "CREATED", "HASH",
                      "ROLES", "SOURCE", "CONSISTENCY", "RELATION", "REVISION-ISSUES",
                      "REPORT-ISSUES"), body)
    order = "ARQH"
    short = [["C/B/1/1", _short_name(r.name), _created_short(r.created),
              "".join(sorted((_ROLE_LETTER[x] for x in r.roles), key=order.index)),
              "BAD" if r.issues else "OK", _RELATION_SHORT[r.relation],
              f"R{_count(len(r.issues))}/G{_count(g)}"] for r in rows]
    if not short:
        short = [["C/B/1/1", "-", "-", "-", "-", "-", f"R0/G{_count(g)}"]]
    return table(("WINDOW", "REVISION", "CREATED", "ROLES", "CHECK", "LIVE", "ISSUES"), short)


def history_json(rep: Effective, rows: Sequence[HistoryRow], collected_at: str
                 ) -> dict[str, Any]:
    """OME's ``RuntimeHistoryReport``."""
    content = {
        "observation": "Complete", "completeness": "RetentionBounded",
        "pages": {"seen": 1, "asked": 1},
        "revisions": [{"name": r.name, "createdAt": r.created, "hash": r.digest[:8],
                       "roles": list(r.roles), "source": r.source,
                       "consistency": "Inconsistent" if r.issues else "Consistent",
                       "relation": r.relation, "issues": list(r.issues)} for r in rows],
        "issues": list(rep.issues),
    }
    return report("RuntimeHistoryReport", rep.namespace, rep.name, collected_at, content,
                  ["PartialData"] if rep.issues else [])

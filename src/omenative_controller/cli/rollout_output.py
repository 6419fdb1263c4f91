"""InferenceService rollout groups for ``kubectl ome rollout``: status, explain and history.

Pure: the InferenceService's JSON and the persisted rollout state in, text and JSON out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from omenative_controller.cli.output_basics import age, decode_status, short_revision, table
from omenative_core.codec import CodecError, from_json, to_json
from omenative_core.model.status import (
    InferenceReplicaStatus,
    RolloutHold,
    TrafficTarget,
)
from omenative_core.model.timefmt import format_time, parse_time
from omenative_core.rollout import (
    ANNOTATION_OVERRIDE_ANALYSIS,
    ANNOTATION_PAUSED,
    ANNOTATION_PROMOTE,
    ANNOTATION_REPIN,
    ANNOTATION_ROLLBACK,
    GroupState,
    MemberView,
    RolloutGroup,
    RolloutSpecError,
    RolloutState,
    explain,
    parse_rollout,
    plan_token,
    state_from_json,
    step_allowance,
)

# ---------------------------------------------------------------------------- rollout groups


ROLLOUT_ANNOTATIONS = (
    ANNOTATION_PROMOTE,
    ANNOTATION_OVERRIDE_ANALYSIS,
    ANNOTATION_ROLLBACK,
    ANNOTATION_REPIN,
    ANNOTATION_PAUSED,
)
"""The InferenceService annotations that steer its rollout groups."""

_PROMOTABLE = ("Pending", "Canarying", "Paused", "Promoting")
_REPIN_TOKEN = re.compile(r"^rp1:[0-9a-f]{12}$")


def rollout_state(isvc: Mapping[str, Any]) -> RolloutState:
    """The rollout state the controller persisted in ``status.rollout`` (empty when none).

    Raises ``RolloutStateError`` naming the JSON path when it cannot be read."""
    return state_from_json((isvc.get("status") or {}).get("rollout"))


def has_rollout(isvc: Mapping[str, Any], state: RolloutState) -> bool:
    """The InferenceService declares ``spec.rollout`` or has a persisted rollout state."""
    return bool((isvc.get("spec") or {}).get("rollout")) or bool(state.groups)


def spec_plan_token(isvc: Mapping[str, Any]) -> str | None:
    """The ``rp1:`` token of the plan ``spec.rollout`` says now (None: absent or invalid)."""
    raw = (isvc.get("spec") or {}).get("rollout")
    if not raw:
        return None
    try:
        return plan_token(parse_rollout(raw))
    except RolloutSpecError:
        return None


def rollout_requests(isvc: Mapping[str, Any]) -> dict[str, str]:
    """The rollout annotations present on the InferenceService (not yet consumed)."""
    ann = (isvc.get("metadata") or {}).get("annotations") or {}
    return {k: str(ann[k]) for k in ROLLOUT_ANNOTATIONS if k in ann}


def rollback_requested(isvc: Mapping[str, Any]) -> str | None:
    """The value of ``ome.io/rollout-rollback`` when present (None: absent)."""
    ann = (isvc.get("metadata") or {}).get("annotations") or {}
    value = ann.get(ANNOTATION_ROLLBACK)
    return None if value is None else str(value)


def explain_line(isvc: Mapping[str, Any], state: RolloutState, now: datetime) -> str:
    """``rollout explain``: one line naming the gate that holds the rollout and its release."""
    if not state.groups:
        if (isvc.get("spec") or {}).get("rollout"):
            return ("no rollout state yet: the controller has not recorded status.rollout "
                    "for spec.rollout")
        return "no rollout groups: spec.rollout is not set, each component rolls on its own"
    return explain(state, now, current_token=spec_plan_token(isvc))


def _group_label(gs: GroupState) -> str:
    return f"group {gs.index} ({'+'.join(gs.components)})"


def _pinned_group(state: RolloutState, gs: GroupState) -> RolloutGroup | None:
    try:
        pinned = state.pinned
    except RolloutSpecError:
        return None
    return pinned.groups[gs.index] if gs.index < len(pinned.groups) else None


def _step_text(gs: GroupState, group: RolloutGroup | None) -> str:
    if not gs.active and gs.phase != "Failed":
        return "-"
    if group is not None and group.canary is not None and group.canary.steps:
        return f"{gs.step + 1}/{len(group.canary.steps)}"
    return f"batch {gs.step + 1}"


def _hold_of(raw: object) -> RolloutHold | None:
    if not isinstance(raw, Mapping) or not raw.get("gate"):
        return None
    try:
        return from_json(raw, RolloutHold)
    except CodecError:
        return RolloutHold(gate=str(raw.get("gate")), reason=str(raw.get("reason") or ""))


def _traffic_of(raw: object) -> list[TrafficTarget]:
    out = []
    for item in raw if isinstance(raw, list) else ():
        try:
            out.append(from_json(item, TrafficTarget))
        except CodecError:
            continue
    return out


def _component_status(isvc: Mapping[str, Any], component: str) -> Mapping[str, Any]:
    comps = (isvc.get("status") or {}).get("components") or {}
    entry = comps.get(component) if isinstance(comps, Mapping) else None
    return entry if isinstance(entry, Mapping) else {}


def _desired(ir: Mapping[str, Any] | None) -> int | None:
    if ir is None:
        return None
    replicas = (ir.get("spec") or {}).get("replicas")
    return 1 if replicas is None else max(int(replicas), 0)


def _member_view(component: str, ir: Mapping[str, Any], revision: str) -> MemberView:
    spec = ir.get("spec") or {}
    strategy = ((spec.get("lifecycle") or {}).get("updateStrategy") or {})
    rolling = strategy.get("rollingUpdate") or {}
    return MemberView(component=component, desired=_desired(ir) or 0, revision=revision,
                      strategy=str(strategy.get("type") or "SurgeThenDrain"),
                      max_surge=rolling.get("maxSurge"),
                      max_unavailable=rolling.get("maxUnavailable"))


def _ready_on(status: InferenceReplicaStatus, revision: str) -> int:
    return sum(1 for r in status.instances
               if r.running_revision == revision and r.phase == "Ready")


def _on(status: InferenceReplicaStatus, revision: str) -> int:
    return sum(1 for r in status.instances if (r.running_revision or r.target_revision)
               == revision)


def _hold_json(hold: RolloutHold | None) -> Any:
    return None if hold is None else to_json(hold)


def _member_json(isvc: Mapping[str, Any], gs: GroupState, group: RolloutGroup | None,
                 component: str, ir: Mapping[str, Any] | None) -> dict[str, Any]:
    entry = _component_status(isvc, component)
    canary = gs.canary.get(component, "")
    desired = _desired(ir)
    allowed: int | None = None
    ready: int | None = None
    if ir is not None and gs.active and canary:
        if group is not None:
            allowed = step_allowance(group, gs.step, _member_view(component, ir, canary))
        try:
            ready = _ready_on(decode_status(ir), canary)
        except CodecError:
            ready = None
    return {
        "component": component,
        "stable": gs.stable.get(component) or None,
        "canary": canary or None,
        "rejected": gs.rejected.get(component) or None,
        "desired": desired,
        "allowed": allowed,
        "readyOnCanary": ready,
        "traffic": [to_json(t) for t in _traffic_of(entry.get("traffic"))],
        "rolloutHold": _hold_json(_hold_of((entry.get("lifecycle") or {}).get("rolloutHold"))),
    }


def service_rollout_json(isvc: Mapping[str, Any], state: RolloutState,
                         replicas: Mapping[str, Mapping[str, Any]],
                         now: datetime) -> dict[str, Any]:
    """``rollout status ISVC -o json``: plan tokens, the explanation, pending requests and
    every group with its members (revisions, capacity, traffic, holds).

    ``replicas`` maps components to their InferenceReplica JSON (missing ones are skipped:
    desired and capacity are then null)."""
    meta = isvc.get("metadata") or {}
    token = spec_plan_token(isvc)
    groups = []
    for gs in state.groups:
        group = _pinned_group(state, gs)
        steps = len(group.canary.steps) if group is not None and group.canary else None
        groups.append({
            "index": gs.index,
            "components": list(gs.components),
            "progression": gs.progression,
            "phase": gs.phase,
            "step": gs.step + 1,
            "steps": steps,
            "gate": gs.gate or None,
            "failure": gs.failure or None,
            "stableAt": None if gs.stable_at is None else format_time(gs.stable_at),
            "rolloutHold": _hold_json(gs.hold),
            "members": [_member_json(isvc, gs, group, c, replicas.get(c))
                        for c in gs.components],
        })
    return {
        "kind": "InferenceService",
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "planToken": state.plan_token or None,
        "specPlanToken": token,
        "drifted": bool(token and state.plan_token and token != state.plan_token),
        "active": state.active,
        "explain": explain_line(isvc, state, now),
        "requests": rollout_requests(isvc),
        "groups": groups,
    }


def _short_hold(raw: Any) -> str:
    return str(raw["gate"]) if isinstance(raw, Mapping) and raw.get("gate") else "-"


def _traffic_text(traffic: Sequence[Mapping[str, Any]]) -> str:
    parts = []
    for t in traffic:
        name = str(t.get("revisionName") or "")
        text = f"{short_revision(name)} {t.get('percent', 0)}%"
        if t.get("tag"):
            text += f" {t['tag']}"
        parts.append(text)
    return ", ".join(parts) or "-"


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


def _hold_line(who: str, raw: Mapping[str, Any], now: datetime) -> str:
    hold = _hold_of(raw)
    assert hold is not None
    text = f"{who}: {hold.gate}"
    if hold.reason:
        text += f": {hold.reason}"
    if hold.target:
        text += f" (target {hold.target})"
    if hold.since is not None:
        text += f", since {format_time(hold.since)} ({age(hold.since, now)})"
    return text


def format_service_rollout(isvc: Mapping[str, Any], state: RolloutState,
                           replicas: Mapping[str, Mapping[str, Any]], now: datetime) -> str:
    """``rollout status ISVC``: the plan, the one-line explanation, a line per group, a line
    per member (stable / canary / rejected revision, canary capacity, traffic) and holds.

    CAP(R/A/D) is: canary Instances Ready / Instances the step allows on the canary /
    desired Instances."""
    data = service_rollout_json(isvc, state, replicas, now)
    name = f"inferenceservice {data['namespace'] or '?'}/{data['name'] or '?'}"
    if not state.groups:
        return f"Rollout:   {name}\n{data['explain']}"
    plan = f"{data['planToken'] or '-'} pinned"
    if data["drifted"]:
        plan += (f"; spec.rollout is now {data['specPlanToken']} (drifted: kubectl ome "
                 "rollout repin moves the run)")
    elif data["specPlanToken"] is None and (isvc.get("spec") or {}).get("rollout"):
        plan += "; spec.rollout does not parse"
    lines = [f"Rollout:   {name}", f"Plan:      {plan}", f"Explain:   {data['explain']}"]
    if data["requests"]:
        lines.append("Requests:  " + ", ".join(f"{k}={v}" for k, v in data["requests"].items())
                     + " (not yet consumed by the controller)")
    lines.append("")
    group_rows = []
    member_rows = []
    holds = []
    for g, gs in zip(data["groups"], state.groups, strict=True):
        group = _pinned_group(state, gs)
        group_rows.append((str(g["index"]), "+".join(g["components"]), g["progression"],
                           g["phase"], _step_text(gs, group), g["gate"] or "-",
                           _short_hold(g["rolloutHold"])))
        if g["rolloutHold"]:
            holds.append(_hold_line(_group_label(gs), g["rolloutHold"], now))
        for m in g["members"]:
            cap = "-"
            if m["canary"] and gs.active:
                cap = f"{_count(m['readyOnCanary'])}/{_count(m['allowed'])}/" \
                      f"{_count(m['desired'])}"
            member_rows.append((m["component"], str(g["index"]),
                                short_revision(m["stable"] or ""),
                                short_revision(m["canary"] or ""),
                                short_revision(m["rejected"] or ""), cap,
                                _traffic_text(m["traffic"]), _short_hold(m["rolloutHold"])))
            if m["rolloutHold"]:
                holds.append(_hold_line(m["component"], m["rolloutHold"], now))
        if g["failure"]:
            holds.append(f"{_group_label(gs)}: failed: {g['failure']}")
    lines.append(table(("GROUP", "COMPONENTS", "PROGRESSION", "PHASE", "STEP", "GATE", "HOLD"),
                       group_rows))
    lines.append("")
    lines.append(table(("COMPONENT", "GROUP", "STABLE", "CANARY", "REJECTED", "CAP(R/A/D)",
                        "TRAFFIC", "HOLD"), member_rows))
    if any(r[5] != "-" for r in member_rows):
        lines.append("CAP(R/A/D): canary Instances Ready / allowed by the step / desired")
    if holds:
        lines.append("")
        lines.append("Holds:")
        lines.extend(f"  {h}" for h in holds)
    return "\n".join(lines)


# ------------------------------------------------------------ history


def _revision_roles(comp: str, gs: GroupState | None,
                    status: InferenceReplicaStatus) -> dict[str, list[str]]:
    roles: dict[str, list[str]] = {}
    tagged = [("current", status.current_revision)]
    if status.update_revision != status.current_revision:
        tagged.append(("update", status.update_revision))
    if gs is not None:
        tagged = [("stable", gs.stable.get(comp, "")), ("canary", gs.canary.get(comp, "")),
                  ("rejected", gs.rejected.get(comp, "")), *tagged]
    for role, rev in tagged:
        if rev:
            roles.setdefault(rev, []).append(role)
    return roles


def history_json(isvc: Mapping[str, Any], state: RolloutState,
                 replicas: Mapping[str, Mapping[str, Any]],
                 revisions: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """``rollout history ISVC -o json``: per component, its revisions (ControllerRevisions,
    plus any the rollout state names that no longer exist) oldest first, each with its roles
    (``stable``, ``canary``, ``rejected``; ``current`` / ``update`` from the replica status)
    and when it was created."""
    meta = isvc.get("metadata") or {}
    components: list[str] = []
    for gs in state.groups:
        components.extend(c for c in gs.components if c not in components)
    components.extend(c for c in sorted(replicas) if c not in components)
    components.extend(c for c in sorted(revisions) if c not in components)
    out = []
    for comp in components:
        owner = next((g for g in state.groups if comp in g.components), None)
        ir = replicas.get(comp)
        try:
            status = decode_status(ir) if ir is not None else InferenceReplicaStatus()
        except CodecError:
            status = InferenceReplicaStatus()
        roles = _revision_roles(comp, owner, status)
        rows: list[dict[str, Any]] = []
        seen: set[str] = set()
        for cr in revisions.get(comp, ()):
            cmeta = cr.get("metadata") or {}
            rev = str(cmeta.get("name") or "")
            seen.add(rev)
            rows.append({"name": rev, "revision": cr.get("revision"),
                         "created": cmeta.get("creationTimestamp"),
                         "pairingProtocol": (cr.get("data") or {}).get("pairingProtocol")})
        for rev in roles:
            if rev not in seen:
                rows.append({"name": rev, "revision": None, "created": None,
                             "pairingProtocol": None})
        rows.sort(key=lambda r: (r["revision"] is None, r["revision"] or 0, r["name"]))
        for r in rows:
            r["hash"] = short_revision(r["name"])
            r["roles"] = roles.get(r["name"], [])
            r["instances"] = _on(status, r["name"])
            r["stableSince"] = (format_time(owner.stable_at) if owner is not None
                                and owner.stable_at and "stable" in r["roles"] else None)
        out.append({"component": comp, "group": None if owner is None else owner.index,
                    "revisions": rows})
    return {"kind": "InferenceService", "name": meta.get("name"),
            "namespace": meta.get("namespace"), "components": out}


def format_history(isvc: Mapping[str, Any], state: RolloutState,
                   replicas: Mapping[str, Mapping[str, Any]],
                   revisions: Mapping[str, Sequence[Mapping[str, Any]]], now: datetime) -> str:
    """``rollout history ISVC``: a line per revision of each component, oldest first, with
    its roles and age (``-`` = no ControllerRevision: pruned, or not written yet)."""
    data = history_json(isvc, state, replicas, revisions)
    rows = []
    for comp in data["components"]:
        for r in comp["revisions"]:
            created = r["created"]
            when = age(parse_time(created), now) if created else "-"
            role = ",".join(r["roles"]) or "-"
            if r["stableSince"]:
                role += f" (since {age(parse_time(r['stableSince']), now)})"
            rows.append((comp["component"], "-" if r["revision"] is None else str(r["revision"]),
                         r["name"], when, role, str(r["instances"])))
    if not rows:
        return "no revisions: no component of this InferenceService has a revision yet"
    return table(("COMPONENT", "REVISION", "NAME", "CREATED", "ROLE", "INSTANCES"), rows)

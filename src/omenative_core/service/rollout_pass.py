"""One InferenceService pass's rollout groups, decided in the core: the members' views,
``decide``, and the per-revision Services every OMENative component keeps.

``prepare_rollout`` takes what the shell observed (the live InferenceReplicas, each live
revision's pairing token read from its ControllerRevision, the answers to the analysis
queries asked last pass) and the rendered plan, so each member's revision is the one about
to be applied; a ``spec.rollout`` or ``status.rollout`` that cannot be used is a
``Rejection`` (nothing is applied). ``revision_services`` builds, by name, the traffic and
headless Service of every live revision (a group's stable and canary revisions included),
as OME does; the shell creates them and deletes the stale ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from attrs import evolve, field, frozen

from omenative_core.codec import CodecError, spec_from_json
from omenative_core.model.spec import InferenceReplica
from omenative_core.revisions import hash_of
from omenative_core.rollout.decide import decide
from omenative_core.rollout.decision import RolloutDecision
from omenative_core.rollout.findings import errors as rollout_errors
from omenative_core.rollout.members import AnalysisMeasurement, MemberView, member_view
from omenative_core.rollout.model import parse_rollout
from omenative_core.rollout.services import component_revision_services, live_revision_hashes
from omenative_core.rollout.spec import RolloutConfig, RolloutSpec, RolloutSpecError
from omenative_core.rollout.state import RolloutState, RolloutStateError, state_from_json
from omenative_core.rollout.validate import validate_rollout
from omenative_core.service.model import InferenceService
from omenative_core.service.modes import MODE_OMENATIVE
from omenative_core.service.objects import isvc_owner_reference
from omenative_core.service.plan import ServicePlan
from omenative_core.service.rejection import Rejection
from omenative_core.service.rollout_writes import (
    member_replica_body,
    member_traffic,
    shape_rollout_status,
)

__all__ = [
    "PairingTokens",
    "RolloutPass",
    "has_rollout_groups",
    "prepare_rollout",
    "revision_services",
]

PairingTokens = Mapping[str, Mapping[str, str | None]]
"""By component, each stored revision's pairing token (from its ControllerRevision)."""


def has_rollout_groups(isvc: InferenceService) -> bool:
    """``spec.rollout`` names at least one group (otherwise components roll on their own)."""
    rollout = isvc.spec.get("rollout")
    return isinstance(rollout, Mapping) and bool(rollout.get("groups"))


@frozen(kw_only=True)
class RolloutPass:
    """One decided pass: what to write into the member specs, the status, and after."""

    spec: RolloutSpec
    decision: RolloutDecision
    members: Mapping[str, MemberView] = field(factory=dict)
    #: the group phases persisted before this pass (for OME's transition counter)
    phases_before: tuple[str, ...] = ()

    def replica_body(self, component: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        """The InferenceReplica apply body with the member's pacing (and group budgets)."""
        return member_replica_body(obj, self.decision.components.get(component))

    def traffic_json(self, component: str) -> list[Any]:
        """The member's traffic targets as status JSON."""
        return member_traffic(self.decision.components.get(component))

    def shape_status(self, status: dict[str, Any]) -> dict[str, Any]:
        """Add ``rollout``, each member's ``traffic`` and the group holds to a status."""
        return shape_rollout_status(status, self.decision)


def _checked_spec(isvc: InferenceService, config: RolloutConfig) -> RolloutSpec | Rejection:
    rollout_json = isvc.spec.get("rollout")
    try:
        spec = parse_rollout(rollout_json)
    except RolloutSpecError as exc:
        first = exc.problems[0] if exc.problems else None
        return Rejection(first.reason if first else "InvalidRolloutSpec", str(exc),
                         "spec.rollout")
    found = rollout_errors(validate_rollout(rollout_json, annotations=isvc.annotations,
                                            config=config))
    if found:
        return Rejection(found[0].reason, "; ".join(f"{r.path}: {r.message}" for r in found),
                         "spec.rollout")
    return spec


def _members(isvc: InferenceService, spec: RolloutSpec, plan: ServicePlan,
             replicas: Mapping[str, InferenceReplica],
             pairing: PairingTokens) -> dict[str, MemberView]:
    """One view per member from its live status and the spec about to be applied; a member
    not created yet, or whose rendered spec does not decode, is left out (its group holds)."""
    named = {c for g in spec.groups for c in g.components}
    members: dict[str, MemberView] = {}
    for cp in plan.components:
        if cp.component not in named or cp.blocked or cp.replica is None:
            continue
        live = replicas.get(cp.component)
        if live is None or not cp.revision_hash:
            continue
        try:
            replica = evolve(live, spec=spec_from_json(cp.replica["spec"]))
        except CodecError:
            continue
        revision = f"{isvc.name}-{cp.component}-{cp.revision_hash}"
        tokens: dict[str, str | None] = dict(pairing.get(cp.component, {}))
        tokens[revision] = replica.spec.pairing_protocol
        members[cp.component] = member_view(replica, revision, pairing=tokens)
    return members


def prepare_rollout(
    isvc: InferenceService,
    plan: ServicePlan,
    replicas: Mapping[str, InferenceReplica],
    now: datetime,
    *,
    pairing: PairingTokens,
    answers: Sequence[AnalysisMeasurement] = (),
    config: RolloutConfig | None = None,
) -> RolloutPass | Rejection | None:
    """Decide this pass's rollout groups (None without groups), or why it cannot."""
    if not has_rollout_groups(isvc):
        return None
    config = config or RolloutConfig()
    spec = _checked_spec(isvc, config)
    if isinstance(spec, Rejection):
        return spec
    status = isvc.raw.get("status")
    try:
        state = state_from_json(status.get("rollout") if isinstance(status, Mapping) else None)
    except RolloutStateError as exc:
        return Rejection("InvalidRolloutState", str(exc), "status.rollout")
    members = _members(isvc, spec, plan, replicas, pairing)
    decision = decide(spec, state, members, now, answers, isvc.annotations, config)
    return RolloutPass(spec=spec, decision=decision, members=members,
                       phases_before=tuple(g.phase.value for g in state.groups))


def _live_revisions(component: str, view: MemberView, state: RolloutState) -> set[str]:
    """The revisions of ``component`` that run, are rendered, or are a group's stable or
    canary revision."""
    revisions = {r for r, n in view.instances.items() if n > 0} | {view.revision}
    for g in state.groups:
        for m in (g.stable, g.canary):
            if m.get(component):
                revisions.add(m[component])
    return revisions


def revision_services(
    isvc: InferenceService, plan: ServicePlan, replicas: Mapping[str, InferenceReplica],
    rollout: RolloutPass | None,
) -> dict[str, dict[str, Any]]:
    """By name, the traffic and headless Service of every live revision of every OMENative
    component, as in OME (a rollout group's stable and canary revisions included)."""
    owner = isvc_owner_reference(isvc)
    wanted: dict[str, dict[str, Any]] = {}
    for cp in plan.components:
        if cp.mode != MODE_OMENATIVE or cp.blocked or cp.replica is None:
            continue
        hashes = live_revision_hashes(replicas.get(cp.component), cp.revision_hash)
        view = rollout.members.get(cp.component) if rollout is not None else None
        if rollout is not None and view is not None:
            hashes |= {hash_of(r) for r in _live_revisions(cp.component, view,
                                                            rollout.decision.state)}
        wanted.update(component_revision_services(
            isvc.name, isvc.namespace, cp.component, {h for h in hashes if h},
            main_service=cp.object("Service"), owner=owner))
    return wanted

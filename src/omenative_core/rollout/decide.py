"""``decide``: one pass of the rollout-group controller, from observations to a decision.

Theory of operation:

1. Inputs are data: the ISVC's ``spec.rollout`` (parsed), the state persisted last pass,
   one ``MemberView`` per component (its InferenceReplica summarised), ``now``, the analysis
   measurements the shell took for the queries asked last pass, the ISVC's annotations and
   the cluster config. Nothing is read from anywhere else; the same inputs give the same
   decision.
2. The only lever on an InferenceReplica is its pacing: ``partition = desired - allowed``
   (the planner keeps the lowest ``partition`` indexes on their revision, so ``allowed``
   Instances move to the new one), ``rollbackToRevision`` to send everything back, and for
   rollingUpdate groups the budgets. The shell writes them in the same spec write that
   carries a new template, so no member starts rolling on its own.
3. A run starts when a member's revision differs from its stable revision. The plan (the
   rollout spec) is pinned when the run starts; later edits wait for the run to end or for
   ``ome.io/rollout-repin``.
4. A group advances one step per pass, and only when every member has the current step's
   Instances ready on the new revision and the step's gate is open. A held member, a member
   with failed Instances, a ratio that would leave its tolerance, or a pairing that would
   break stops the whole group, never one member.
5. Everything to remember is in the returned ``RolloutState``; events are emitted on
   transitions only, so a repeated pass emits nothing new.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from attrs import evolve

from omenative_core.model.spec import Pacing, RollingUpdate
from omenative_core.model.status import TrafficTarget
from omenative_core.rollout.commands import PROMOTABLE
from omenative_core.rollout.decision import ComponentDecision, RolloutDecision
from omenative_core.rollout.members import AnalysisMeasurement, MemberView
from omenative_core.rollout.phases import FORWARD, GroupPhase, HoldGate
from omenative_core.rollout.progress import _Progress
from omenative_core.rollout.services import traffic_revision_name
from omenative_core.rollout.spec import RolloutConfig, RolloutGroup, RolloutSpec
from omenative_core.rollout.state import GroupState, RolloutState
from omenative_core.rollout.steps import step_allowance
from omenative_core.rollout.verbs import ANNOTATION_OVERRIDE_ANALYSIS, ANNOTATION_PROMOTE

__all__ = ["decide"]

_ROLLING_BACK = frozenset({GroupPhase.ROLLING_BACK, GroupPhase.ROLLED_BACK})


def _percentages(weights: Mapping[str, int]) -> dict[str, int]:
    """Integer percentages of ``weights`` summing to 100 (largest remainder, by name)."""
    total = sum(weights.values())
    if total <= 0:
        return dict.fromkeys(weights, 0)
    exact = {k: 100 * w / total for k, w in weights.items()}
    out = {k: math.floor(v) for k, v in exact.items()}
    rest = 100 - sum(out.values())
    for k in sorted(exact, key=lambda k: (-(exact[k] - out[k]), k))[:rest]:
        out[k] += 1
    return out


class _Decider(_Progress):
    """The whole pass: verbs, then each group's progress and allowances, then the decision.

    The steps live in the classes it builds on, one concept each: ``passstate`` (inputs
    and accumulators), ``commands`` (promote, rollback), ``pinning`` (the pinned plan,
    repin), ``guards`` (sequence, ratio, pairing), ``analysisgate`` and ``progress``.
    """

    def allowances(self, gs: GroupState, group: RolloutGroup) -> GroupState:
        """Fill ``self.allowed`` for the group's members; may add the Pairing hold."""
        views = self.views(gs)
        alloc: dict[str, int] = {}
        for c, v in views.items():
            if c not in gs.canary:
                alloc[c] = v.desired
            elif gs.phase == GroupPhase.PENDING:
                alloc[c] = 0
            else:
                alloc[c] = step_allowance(group, gs.step, v)
        if gs.phase in FORWARD or gs.phase == GroupPhase.FAILED:
            capped, reason, stuck = self.pairing_cap(gs, alloc)
            if reason is not None:
                named, _ = self.promote_for(gs)
                if stuck and named:
                    self.use_promote(gs, "the Pairing gate (a pairing gap is accepted)")
                    gs = evolve(gs, pairing_override=gs.step)
                else:
                    alloc = capped
                    if gs.hold is None:
                        if stuck:
                            reason += (
                                "; no Instance can move without breaking the last pair: "
                                "promote to accept a gap, or run 2 or more Instances"
                            )
                        gs = self.hold(gs, HoldGate.PAIRING, reason)
        self.allowed.update(alloc)
        return gs

    def traffic(self, gs: GroupState, view: MemberView) -> tuple[TrafficTarget, ...]:
        """The traffic to record for a member: ready Instances per revision, in percent."""
        c = view.component
        stable = gs.stable.get(c, view.revision)
        canary = gs.canary.get(c)
        rejected = gs.rejected.get(c) if gs.phase in _ROLLING_BACK else None
        weights = {r: n for r, n in view.ready.items() if n > 0 and r != rejected}
        pct = _percentages(weights) if weights else {}
        if not weights:
            pct = {stable: 100}
        named = [stable]
        if canary and canary != stable:
            named.append(canary)
        if rejected and rejected not in named:
            named.append(rejected)
        others = sorted(r for r, p in pct.items() if p > 0 and r not in named)
        prev = {t.revision_name: t.percent for t in view.traffic}
        out_pct = {r: pct.get(r, 0) for r in (*named, *others)}
        names = {r: traffic_revision_name(r) for r in out_pct}
        band = self.config.traffic_deadband
        if (
            band > 0
            and set(prev) == set(names.values())
            and sum(prev.values()) == 100
            and all(
                abs(prev[names[r]] - p) <= band
                and p not in (0, 100)
                and prev[names[r]] not in (0, 100)
                for r, p in out_pct.items()
            )
        ):
            out_pct = {r: prev[names[r]] for r in out_pct}
        if rejected:
            out_pct[rejected] = 0
        tags = {stable: "stable"}
        if canary:
            tags[canary] = "canary"
        if rejected:
            tags[rejected] = "canary"
        return tuple(
            TrafficTarget(
                revision_name=names[r],
                percent=p,
                tag=tags.get(r),
                latest_revision=r == view.revision,
                pairing_protocol=view.token(r),
            )
            for r, p in out_pct.items()
        )

    def component_decisions(self) -> dict[str, ComponentDecision]:
        """What to write on each member: pacing, budgets, traffic, hold."""
        out: dict[str, ComponentDecision] = {}
        for gs in self.groups:
            group = self.pinned.groups[gs.index]
            for c in gs.components:
                view = self.members.get(c)
                if view is None:
                    continue
                allowed = self.allowed.get(c, view.desired)
                rollback = None
                if gs.phase in _ROLLING_BACK and c in gs.rejected:
                    rollback = gs.stable.get(c)
                    allowed = view.desired
                ru = None
                if group.rolling_update is not None:
                    ru = RollingUpdate(
                        max_surge=group.rolling_update.effective_max_surge,
                        max_unavailable=group.rolling_update.effective_max_unavailable,
                    )
                hold = None
                if gs.hold is not None:
                    hold = evolve(
                        gs.hold, target=gs.canary.get(c) or gs.rejected.get(c) or view.revision
                    )
                out[c] = ComponentDecision(
                    component=c,
                    group=gs.index,
                    phase=gs.phase,
                    allowed=allowed,
                    pacing=Pacing(
                        partition=max(0, view.desired - allowed), rollback_to_revision=rollback
                    ),
                    rolling_update=ru,
                    traffic=self.traffic(gs, view),
                    hold=hold,
                    coordination_group_ref=f"groups[{gs.index}]",
                )
        return out

    def run(self) -> RolloutDecision:
        """The whole pass, from the verbs to the decision."""
        self.pin()
        self.repin()
        self.rollback_verb()
        self.parse_promote()
        for i in range(len(self.groups)):
            old = self.groups[i]
            self.prev_holds[old.index] = old.hold
            group = self.pinned.groups[old.index]
            gs = self.progress(old, group)
            gs = self.allowances(gs, group)
            self.groups[i] = gs
        if self.promote is not None and not self.promote_used:
            gs = self.groups[self.promote[0]]
            if gs.phase not in PROMOTABLE:
                self.drop(ANNOTATION_PROMOTE)
                self.drop(ANNOTATION_OVERRIDE_ANALYSIS)
        active = any(g.active for g in self.groups)
        if self.pinned_token == self.token:
            plan = {} if self.too_big else dict(self.plan_json)
        else:
            plan = dict(self.state.plan)
        del active
        state = RolloutState(plan_token=self.pinned_token, plan=plan, groups=tuple(self.groups))
        requeue: timedelta | None = None
        if self.again:
            requeue = timedelta(0)
        elif self.timers:
            requeue = max(min(self.timers) - self.now, timedelta(0))
        seen: set[str] = set()
        queries = []
        for q in self.queries:
            if q.id not in seen:
                seen.add(q.id)
                queries.append(q)
        return RolloutDecision(
            components=self.component_decisions(),
            state=state,
            events=tuple(self.events),
            remove_annotations=tuple(self.remove),
            queries=tuple(queries),
            requeue_after=requeue,
            plan_token=self.token,
        )


def decide(
    rollout_spec: RolloutSpec,
    state: RolloutState | None,
    members: Mapping[str, MemberView],
    now: datetime,
    analysis_results: Sequence[AnalysisMeasurement] = (),
    annotations: Mapping[str, str] | None = None,
    config: RolloutConfig | None = None,
) -> RolloutDecision:
    """One pass of the rollout groups of an InferenceService.

    ``rollout_spec`` must have passed ``validate_rollout``. ``state`` is what the last
    decision returned (None on the first pass); ``members`` has a view for every component
    the groups name (a missing one holds its group with gate ``Plan``). ``annotations`` are
    the ISVC's (the promote / rollback / repin / pause verbs and the ready-timeout
    override). Components in no group are not in the decision: they roll on their own.
    """
    return _Decider(
        rollout_spec,
        state,
        members,
        now,
        analysis_results,
        annotations or {},
        config or RolloutConfig(),
    ).run()

"""The pinned plan: a run keeps the rollout spec it started with.

Edits to ``spec.rollout`` during a run wait for it to end, or for ``ome.io/rollout-repin``
naming the new plan's token, which moves the run: groups of the same shape keep their
progress, others re-enter at the first step that covers what already runs the new revision.
"""

from __future__ import annotations

from collections.abc import Sequence

from attrs import evolve

from omenative_core.rollout.commands import _Commands
from omenative_core.rollout.machine import Move, enter
from omenative_core.rollout.phases import AUTO_ROLLBACK, GroupPhase
from omenative_core.rollout.spec import RolloutSpec
from omenative_core.rollout.state import GroupState
from omenative_core.rollout.steps import last_step, step_allowance
from omenative_core.rollout.verbs import ANNOTATION_REPIN, REPIN_VALUE

__all__: list[str] = []


class _Pinning(_Commands):
    def fresh_groups(self, spec: RolloutSpec, old: Sequence[GroupState]) -> list[GroupState]:
        """Group states for ``spec`` carrying each component's stable/rejected revisions."""
        stable: dict[str, str] = {}
        rejected: dict[str, str] = {}
        for g in old:
            stable.update(g.stable)
            rejected.update(g.rejected)
        out = []
        for i, group in enumerate(spec.groups):
            comps = tuple(group.components)
            st = {c: stable.get(c) or self.initial_stable(c) for c in comps}
            rj = {c: rejected[c] for c in comps if c in rejected}
            same = next(
                (g for g in old if g.components == comps and g.progression == group.progression),
                None,
            )
            if same is not None and not same.active:
                out.append(evolve(same, index=i, stable=st, rejected=rj))
                continue
            fresh = GroupState(
                index=i, components=comps, progression=group.progression, stable=st, rejected=rj
            )
            idle = GroupPhase.ROLLED_BACK if rj else GroupPhase.STABLE
            out.append(enter(fresh, Move.NEW_PLAN, idle))
        return out

    def pin(self) -> None:
        """Choose the plan this pass follows: the pinned one during a run, else the spec's."""
        st = self.state
        if st.plan_token and st.active and st.plan:
            self.pinned = st.pinned
            self.pinned_token = st.plan_token
            self.groups = list(st.groups)
            return
        # idle (or first pass): the current plan applies
        self.pinned = self.spec
        self.pinned_token = self.token
        if st.plan_token == self.token and len(st.groups) == len(self.spec.groups):
            self.groups = list(st.groups)
        else:
            self.groups = self.fresh_groups(self.spec, st.groups)

    def refit(self, spec: RolloutSpec, old: Sequence[GroupState]) -> list[GroupState]:
        """Move an active run onto ``spec``: same-shaped groups keep their progress, others
        re-enter at the first step that covers what already runs the new revision."""
        per: dict[str, GroupState] = {c: g for g in old for c in g.components}
        out = []
        for i, group in enumerate(spec.groups):
            comps = tuple(group.components)
            same = next((g for g in old if g.components == comps), None)
            if (
                same is not None
                and same.progression == group.progression
                and (
                    group.canary is None
                    or self.pinned.groups[min(same.index, len(self.pinned.groups) - 1)].canary
                    == group.canary
                )
            ):
                out.append(evolve(same, index=i))
                continue
            stable = {
                c: per[c].stable.get(c, "") if c in per else self.initial_stable(c) for c in comps
            }
            stable = {c: s or self.initial_stable(c) for c, s in stable.items()}
            canary = {c: per[c].canary[c] for c in comps if c in per and c in per[c].canary}
            rejected = {c: per[c].rejected[c] for c in comps if c in per and c in per[c].rejected}
            gs = GroupState(
                index=i,
                components=comps,
                progression=group.progression,
                stable=stable,
                canary=canary,
                rejected=rejected,
            )
            if not canary:
                idle = GroupPhase.ROLLED_BACK if rejected else GroupPhase.STABLE
                out.append(enter(gs, Move.REPIN, idle))
                continue
            if all(per[c].phase == GroupPhase.PENDING for c in comps if c in per):
                out.append(enter(gs, Move.REPIN, GroupPhase.PENDING))
                continue
            views = [self.members[c] for c in canary if c in self.members]
            last = last_step(group, views)
            step = next(
                (
                    s
                    for s in range(last + 1)
                    if all(step_allowance(group, s, v) >= v.on(canary[v.component]) for v in views)
                ),
                last,
            )
            out.append(
                enter(
                    gs,
                    Move.REPIN,
                    self.running_phase(group, step, views),
                    step=step,
                    step_entered_at=self.now,
                    ready_clock=self.now,
                )
            )
        return out

    def repin_problem(self, value: str) -> str | None:
        """Why the repin ``value`` cannot move the run now (the first reason that applies),
        or None when it can."""
        rolling_back = self.rollback_requested or any(
            g.phase == GroupPhase.ROLLING_BACK
            or (g.phase == GroupPhase.FAILED and g.failure in AUTO_ROLLBACK)
            for g in self.groups
        )
        missing = [c for g in self.groups for c in g.canary if self.spec.group_of(c) is None]
        problems = (
            (rolling_back, "a rollback is in progress"),
            (
                value != "now" and not REPIN_VALUE.match(value),
                "expected rp1:<12 hex digits> or now",
            ),
            (value not in ("now", self.token), f"the current plan is {self.token}"),
            (self.pinned_token == self.token, f"the run already follows {self.token}"),
            (
                self.too_big,
                f"the plan is {self.plan_bytes} bytes, above the "
                f"{self.config.max_pinned_plan_bytes}-byte limit for a pinned plan",
            ),
            (bool(missing), f"{', '.join(missing)} would leave every group mid-run"),
        )
        return next((why for bad, why in problems if bad), None)

    def repin(self) -> None:
        """Act on ``ome.io/rollout-repin``: move the run to the current plan, or say why not."""
        value = self.annotations.get(ANNOTATION_REPIN)
        if value is None:
            return
        self.drop(ANNOTATION_REPIN)
        why = self.repin_problem(value)
        if why is not None:
            self.event("Warning", "RolloutRepinRejected", f"repin {value!r} rejected: {why}")
            return
        old_token = self.pinned_token
        self.groups = self.refit(self.spec, self.groups)
        self.pinned = self.spec
        self.pinned_token = self.token
        self.again = True
        self.event(
            "Normal", "RolloutPlanRepinned", f"the run moved from plan {old_token} to {self.token}"
        )

"""The rollout-group invariants, one named function each.

Each takes a ``Pass``: the state persisted before the pass, the member views the decision
was made from, the decision, the previous decision's allowances and the annotations seen.
The arithmetic (step allowances, pairing and ratio predictions) is written again here, not
imported from ``decide``, so a bug there cannot hide behind itself. A failure raises
AssertionError naming the group, the member and what broke.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from omenative_core.rollout import (
    ANNOTATION_ROLLBACK,
    GroupState,
    MemberView,
    RolloutDecision,
    RolloutGroup,
    RolloutSpec,
    RolloutState,
    traffic_revision_name,
)

RUNNING = ("Canarying", "Paused", "Promoting")
MOVING = (*RUNNING, "Failed")


@dataclass(frozen=True)
class Pass:
    """One decide() call and what it saw."""

    before: RolloutState | None
    views: Mapping[str, MemberView]
    decision: RolloutDecision
    prev_allowed: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    default_tolerance: int = 5

    @property
    def after(self) -> RolloutState:
        return self.decision.state

    @property
    def spec(self) -> RolloutSpec:
        return self.after.pinned

    @property
    def repinned(self) -> bool:
        return any(e.reason == "RolloutPlanRepinned" for e in self.decision.events)

    def before_group(self, gs: GroupState) -> GroupState | None:
        """The same group before the pass, when the plan did not change under it."""
        b = self.before
        if b is None or b.plan_token != self.after.plan_token or self.repinned:
            return None
        for g in b.groups:
            if g.index == gs.index and g.components == gs.components:
                return g
        return None

    def allowed(self, component: str) -> int:
        return self.decision.components[component].allowed


def _budget(value: int | str | None, desired: int) -> int:
    if value is None:
        value = "25%"
    if isinstance(value, int):
        return value
    return math.ceil(desired * int(value.rstrip("%")) / 100)


def allowance(group: RolloutGroup, step: int, view: MemberView) -> int:
    """Instances of ``view`` a step may put on the new revision (written independently)."""
    n = view.desired
    if n <= 0:
        return 0
    if group.canary is not None:
        cap = group.canary.steps[min(step, len(group.canary.steps) - 1)].capacity
        if isinstance(cap, int):
            return min(cap, n)
        return min(n, math.ceil(n * int(cap.rstrip("%")) / 100))
    if group.rolling_update is not None:
        ru = group.rolling_update
        raw = ru.max_surge if view.strategy == "SurgeThenDrain" else ru.max_unavailable
        batch = max(1, _budget(raw, n))
    else:
        batch = max(1, math.ceil(n / 4))
    return min(n, (step + 1) * batch)


# ------------------------------------------------------------------------------ lockstep


def members_never_drift_apart(p: Pass) -> None:
    """A group moves one step at a time, and only once every member has the current step's
    Instances ready on the new revision; no member is allowed past its group's step."""
    for gs in p.after.groups:
        group = p.spec.groups[gs.index]
        if gs.phase in MOVING:
            for c in gs.canary:
                if c not in p.views:
                    continue
                limit = allowance(group, gs.step, p.views[c])
                assert p.allowed(c) <= limit, (
                    f"group {gs.index}: {c} allowed {p.allowed(c)} past step {gs.step + 1} "
                    f"({limit})"
                )
        b = p.before_group(gs)
        if b is None or b.phase not in MOVING or gs.phase not in MOVING:
            continue
        if dict(gs.canary) != dict(b.canary):
            continue
        assert gs.step in (b.step, b.step + 1), (
            f"group {gs.index} jumped from step {b.step + 1} to {gs.step + 1}"
        )
        if gs.step == b.step + 1:
            for c, new in gs.canary.items():
                need = allowance(group, b.step, p.views[c])
                have = p.views[c].ready_on(new)
                assert have >= need, (
                    f"group {gs.index} advanced to step {gs.step + 1} while {c} had "
                    f"{have}/{need} ready on {new}"
                )


# ------------------------------------------------------------------------------ capacity


def canary_capacity_within_step(p: Pass) -> None:
    """A canary member never gets more Instances on the canary than its step's capacity
    (nothing before the group starts)."""
    for gs in p.after.groups:
        group = p.spec.groups[gs.index]
        if group.canary is None:
            continue
        for c in gs.canary:
            if c not in p.views:
                continue
            if gs.phase == "Pending":
                assert p.allowed(c) == 0, f"{c} allowed {p.allowed(c)} before the canary starts"
            elif gs.phase in MOVING:
                cap = allowance(group, gs.step, p.views[c])
                assert p.allowed(c) <= cap, (
                    f"{c}: {p.allowed(c)} on the canary exceeds step {gs.step + 1}'s {cap}"
                )


# ------------------------------------------------------------------------------ ratio


def _within(x: int, y: int, target: float, tolerance: int) -> bool:
    return y > 0 and abs((x / y) / target - 1) * 100 <= tolerance + 1e-9


def _worst_ready(
    p: Pass, group: RolloutGroup, view: MemberView, alloc: int, canary: str | None
) -> int:
    ready = view.total_ready
    if canary is None or view.strategy in ("SurgeThenDrain", "InPlaceIfPossible", "InPlaceOnly"):
        return ready
    if group.rolling_update is not None:
        budget = max(1, _budget(group.rolling_update.max_unavailable, view.desired))
    else:
        budget = max(1, _budget(view.max_unavailable, view.desired))
    down = view.on(canary) - view.ready_on(canary)
    return ready - min(max(0, alloc - view.on(canary)), max(0, budget - down))


def ratio_tolerance_holds(p: Pass) -> None:
    """When a maintainRatio group starts or advances a step, ready engine:decoder stays
    within target ± tolerance however the members' Instances go down along the way."""
    e, d = p.views.get("engine"), p.views.get("decoder")
    if e is None or d is None or e.desired <= 0 or d.desired <= 0:
        return
    for gs in p.after.groups:
        group = p.spec.groups[gs.index]
        if group.maintain_ratio is None or gs.phase not in RUNNING:
            continue
        b = p.before_group(gs)
        if b is None or dict(b.canary) != dict(gs.canary):
            continue
        started = b.phase == "Pending"
        if not started and not (b.phase in MOVING and gs.step == b.step + 1):
            continue
        tol = group.maintain_ratio.tolerance
        tolerance = tol if tol is not None else p.default_tolerance
        worst = {}
        for view in (e, d):
            c = view.component
            owner = next(g for g in p.after.groups if c in g.components)
            owner_group = p.spec.groups[owner.index]
            alloc = (
                allowance(group, gs.step, view)
                if c in gs.canary
                else p.allowed(c)
                if c in p.decision.components
                else view.desired
            )
            worst[c] = _worst_ready(p, owner_group, view, alloc, owner.canary.get(c))
        target = e.desired / d.desired
        for x, y in ((worst["engine"], d.total_ready), (e.total_ready, worst["decoder"])):
            assert _within(x, y, target, tolerance), (
                f"group {gs.index} advanced to step {gs.step + 1} although ready "
                f"engine:decoder could reach {x}:{y} (target {e.desired}:{d.desired} "
                f"± {tolerance}%)"
            )


def observed_ratio_within_tolerance(
    views: Mapping[str, MemberView], spec: RolloutSpec, state: RolloutState, default_tolerance: int
) -> None:
    """In a fault-free run, the ready engine:decoder ratio seen at every pass stays within
    the tolerance of every maintainRatio group that is rolling."""
    e, d = views.get("engine"), views.get("decoder")
    if e is None or d is None or e.desired <= 0 or d.desired <= 0:
        return
    for gs in state.groups:
        group = spec.groups[gs.index]
        if group.maintain_ratio is None or gs.phase not in MOVING:
            continue
        tol = group.maintain_ratio.tolerance
        tolerance = tol if tol is not None else default_tolerance
        assert _within(e.total_ready, d.total_ready, e.desired / d.desired, tolerance), (
            f"ready engine:decoder is {e.total_ready}:{d.total_ready} during group "
            f"{gs.index}'s roll (target {e.desired}:{d.desired} ± {tolerance}%)"
        )


# ------------------------------------------------------------------------------ pairing


def _token_change(gs: GroupState, e: MemberView, d: MemberView) -> bool:
    new_e = gs.canary.get("engine", gs.stable.get("engine", ""))
    new_d = gs.canary.get("decoder", gs.stable.get("decoder", ""))

    def changes(view: MemberView, old: str, new: str) -> bool:
        a, b = view.token(old), view.token(new)
        return bool(a) and bool(b) and a != b

    return changes(e, gs.stable.get("engine", ""), new_e) or changes(
        d, gs.stable.get("decoder", ""), new_d
    )


def _ready_by_token(view: MemberView) -> dict[str | None, int]:
    out: dict[str | None, int] = {}
    for rev, n in view.ready.items():
        out[view.token(rev)] = out.get(view.token(rev), 0) + n
    return out


def pairing_gate_holds(p: Pass) -> None:
    """While engine and decoder change pairing token, no decision can leave zero ready
    same-token pairs: what stays behind the partition, or a new pair already serving,
    keeps one (unless a promote accepted the gap for this step)."""
    e, d = p.views.get("engine"), p.views.get("decoder")
    if e is None or d is None:
        return
    for gs in p.after.groups:
        if not {"engine", "decoder"} <= set(gs.components) or gs.phase not in MOVING:
            continue
        if not gs.canary or not _token_change(gs, e, d) or gs.pairing_override == gs.step:
            continue
        re_, rd = _ready_by_token(e), _ready_by_token(d)
        if not any(rd.get(t, 0) >= 1 for t, n in re_.items() if n >= 1):
            continue  # no pair serves now: nothing to keep
        guaranteed: dict[str, dict[str | None, int]] = {}
        for view, ready in ((e, re_), (d, rd)):
            c = view.component
            new = gs.canary.get(c, gs.stable.get(c, ""))
            base = view.ready_on(new) if view.strategy == "SurgeThenDrain" else view.on(new)
            leaving = max(0, p.allowed(c) - base) if c in gs.canary else 0
            guaranteed[c] = {
                t: n if t == view.token(new) else n - leaving for t, n in ready.items()
            }
        tokens = set(guaranteed["engine"]) & set(guaranteed["decoder"])
        assert any(
            guaranteed["engine"][t] >= 1 and guaranteed["decoder"][t] >= 1 for t in tokens
        ), (
            f"group {gs.index}: allowing engine {p.allowed('engine')} and decoder "
            f"{p.allowed('decoder')} can leave no same-token pair (ready engine {re_}, "
            f"decoder {rd})"
        )


def pair_serving(views: Mapping[str, MemberView]) -> bool:
    """Some same-token engine/decoder pair is ready (True without both components)."""
    e, d = views.get("engine"), views.get("decoder")
    if e is None or d is None:
        return True
    re_, rd = _ready_by_token(e), _ready_by_token(d)
    return any(n >= 1 and rd.get(t, 0) >= 1 for t, n in re_.items())


def observed_pair_serving(views: Mapping[str, MemberView], state: RolloutState) -> None:
    """In a fault-free run, once a token-changing group rolls (``state`` made the last
    decision) and a pair was serving, some same-token pair is still ready."""
    e, d = views.get("engine"), views.get("decoder")
    if e is None or d is None:
        return
    if not any(
        {"engine", "decoder"} <= set(g.components) and g.phase in MOVING and _token_change(g, e, d)
        for g in state.groups
    ):
        return
    assert pair_serving(views), (
        f"no same-token pair is ready: engine {_ready_by_token(e)}, decoder {_ready_by_token(d)}"
    )


# ------------------------------------------------------------------------------ rollback


def rollback_restores_stable(p: Pass) -> None:
    """A rolling-back group sends every rejected member to its stable revision with 0%
    traffic on the rejected one; RolledBack means every Instance is back; a rollback
    request stops every group in a run."""
    for gs in p.after.groups:
        if gs.phase not in ("RollingBack", "RolledBack"):
            continue
        for c, rejected in gs.rejected.items():
            if c not in p.decision.components:
                continue
            cd = p.decision.components[c]
            stable = gs.stable[c]
            assert cd.pacing.rollback_to_revision == stable, (
                f"{c}: rollbackToRevision {cd.pacing.rollback_to_revision} is not the stable "
                f"{stable}"
            )
            assert not cd.pacing.partition, f"{c}: partition {cd.pacing.partition} in rollback"
            pct = {t.revision_name: t.percent for t in cd.traffic}
            name = traffic_revision_name(rejected)
            assert pct.get(name) == 0, f"{c}: rejected {name} has traffic {pct.get(name)}"
            assert sum(pct.values()) == 100, f"{c}: traffic sums to {sum(pct.values())}"
            if gs.phase == "RolledBack":
                view = p.views[c]
                assert set(view.instances) == {stable}, (
                    f"{c} is RolledBack with Instances on {sorted(view.instances)}"
                )
    if p.annotations.get(ANNOTATION_ROLLBACK) != "true" or p.before is None or p.repinned:
        return
    if ANNOTATION_ROLLBACK in p.decision.remove_annotations:
        return  # a new revision appeared: the rollback is over
    # a group rolled back earlier does not spend the request: any run still under way
    # (one started since by a new revision) is rolled back too
    for gs in p.after.groups:
        b = p.before_group(gs)
        if b is not None and b.canary and b.phase in (*MOVING, "Pending"):
            assert gs.phase in ("RollingBack", "RolledBack"), (
                f"group {gs.index} is {gs.phase} after a rollback request"
            )


# ------------------------------------------------------------------------------ holds


def held_member_stops_group(p: Pass) -> None:
    """A held or failing member stops its whole group (held: phase Failed) and every later
    group of a sequence; nobody races ahead."""
    seq = p.spec.sequence()
    for gs in p.after.groups:
        b = p.before_group(gs)
        stuck = [c for c in gs.canary if c in p.views and (p.views[c].held or p.views[c].failed)]
        if not stuck or b is None or b.phase not in MOVING or dict(b.canary) != dict(gs.canary):
            continue
        assert gs.step == b.step, (
            f"group {gs.index} advanced to step {gs.step + 1} with {', '.join(stuck)} "
            "held or failing"
        )
        if any(p.views[c].held for c in stuck):
            assert gs.phase == "Failed", f"group {gs.index} is {gs.phase} with a held member"
            assert gs.hold is not None and gs.hold.gate == "Held"
        group = p.spec.groups[gs.index]
        for c in gs.canary:
            assert p.allowed(c) <= allowance(group, gs.step, p.views[c]), (
                f"{c} races ahead of held group {gs.index}"
            )
    for pos, i in enumerate(seq):
        later = p.after.groups[i]
        if later.phase in MOVING and p.before_group(later) is not None:
            b = p.before_group(later)
            if b is not None and b.phase == "Pending":
                for j in seq[:pos]:
                    assert p.after.groups[j].phase in ("Stable", "RolledBack"), (
                        f"sequence group {i} started while group {j} is {p.after.groups[j].phase}"
                    )


ALL_PASS_INVARIANTS = (
    members_never_drift_apart,
    canary_capacity_within_step,
    ratio_tolerance_holds,
    pairing_gate_holds,
    rollback_restores_stable,
    held_member_stops_group,
)
"""Checked after every decide() of the state machine."""

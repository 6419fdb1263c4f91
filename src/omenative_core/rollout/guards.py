"""What stops a group between steps: the sequence, the engine:decoder ratio, pairing.

- Sequential: a group waits for every earlier group in ``sequence`` to be Stable (or
  RolledBack) and for the soak after the last of them.
- Ratio: a step may not take ready engine:decoder outside ``maintainRatio``'s tolerance,
  counting the Instances each member may take down while it moves.
- Pairing: while a pairing token changes, a same-token engine/decoder pair keeps serving;
  allowances are lowered until a new-token pair is ready.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from omenative_core.phases import Strategy
from omenative_core.rollout.members import MemberView
from omenative_core.rollout.phases import SETTLED, GroupPhase
from omenative_core.rollout.pinning import _Pinning
from omenative_core.rollout.spec import RolloutGroup
from omenative_core.rollout.state import GroupState
from omenative_core.rollout.steps import dip_budget, step_allowance

__all__: list[str] = []

NO_DIP = frozenset(
    {Strategy.SURGE_THEN_DRAIN, Strategy.IN_PLACE_IF_POSSIBLE, Strategy.IN_PLACE_ONLY}
)
"""Strategies that never take a ready Instance down while it moves."""


def changes_token(view: MemberView, old: str, new: str) -> bool:
    """``old`` and ``new`` carry two different non-empty pairing tokens (as in OME, only a
    change between two tokens is coordinated; an unknown token is no evidence of one)."""
    a, b = view.token(old), view.token(new)
    return bool(a) and bool(b) and a != b


def _pairing_applies(gs: GroupState, e: MemberView, d: MemberView) -> bool:
    """The group moves an engine and a decoder between two pairing tokens, and no promote
    accepted a pairing gap at this step."""
    if not {"engine", "decoder"} <= set(gs.components):
        return False
    if not (gs.canary.get("engine") or gs.canary.get("decoder")):
        return False
    if gs.pairing_override == gs.step:
        return False
    new_e = gs.canary.get("engine", gs.stable.get("engine", ""))
    new_d = gs.canary.get("decoder", gs.stable.get("decoder", ""))
    old_e, old_d = gs.stable.get("engine", ""), gs.stable.get("decoder", "")
    return changes_token(e, old_e, new_e) or changes_token(d, old_d, new_d)


class _Guards(_Pinning):
    def sequence_wait(self, gs: GroupState) -> tuple[str, datetime | None] | None:
        """The earlier group a Sequential group waits on and until when (None: no end yet);
        None when it need not wait."""
        seq = self.pinned.sequence()
        if gs.index not in seq:
            return None
        pos = seq.index(gs.index)
        latest: tuple[datetime, str] | None = None
        for j in seq[:pos]:
            earlier = self.groups[j]
            name = earlier.components[0] if earlier.components else f"group {j}"
            if earlier.phase not in SETTLED:
                return (name, None)  # rolling, or stopped by a held member
            if earlier.stable_at is not None and (latest is None or earlier.stable_at > latest[0]):
                latest = (earlier.stable_at, name)
        wait = self.pinned.sequence_wait()
        if latest is not None and wait > timedelta(0) and self.now < latest[0] + wait:
            return (latest[1], latest[0] + wait)
        return None

    def current_allowance(self, component: str) -> int | None:
        """The Instances ``component`` is allowed on its new revision now, or None."""
        if component in self.allowed:
            return self.allowed[component]
        for gs in self.groups:
            if component in gs.components and gs.canary.get(component):
                group = self.pinned.groups[gs.index]
                view = self.members.get(component)
                if view is None:
                    return None
                if gs.phase == GroupPhase.PENDING:
                    return 0
                return step_allowance(group, gs.step, view)
        return None

    def ratio_check(
        self, gs: GroupState, group: RolloutGroup, proposed: Mapping[str, int]
    ) -> str | None:
        """None when advancing to ``proposed`` keeps ready engine:decoder within tolerance."""
        if group.maintain_ratio is None:
            return None
        e, d = self.members.get("engine"), self.members.get("decoder")
        if e is None or d is None or e.desired <= 0 or d.desired <= 0:
            return None
        tol = group.maintain_ratio.tolerance
        tolerance = tol if tol is not None else self.config.default_ratio_tolerance
        if tolerance is None:  # OME: no configured default, the group has no drift bound
            return None

        def worst(view: MemberView) -> int:
            c = view.component
            canary = None
            for g in self.groups:
                if c in g.components:
                    canary = g.canary.get(c)
            if c in gs.components:
                canary = gs.canary.get(c)
            ready = view.total_ready
            if canary is None or view.strategy in NO_DIP:
                return ready
            owner = self.pinned.groups[self.pinned.group_of(c) or 0]
            alloc = proposed[c] if c in proposed else (self.current_allowance(c) or 0)
            pending = max(0, alloc - view.on(canary))
            down = max(0, view.on(canary) - view.ready_on(canary))
            headroom = max(0, dip_budget(owner, view) - down)
            return ready - min(pending, headroom)

        target = e.desired / d.desired
        pe, pd = worst(e), worst(d)
        re_, rd = e.total_ready, d.total_ready
        for x, y in ((pe, rd), (re_, pd)):
            if y <= 0 or abs((x / y) / target - 1) * 100 > tolerance + 1e-9:
                return (
                    f"ready engine:decoder would be {x}:{y}, outside the target "
                    f"{e.desired}:{d.desired} ± {tolerance}%"
                )
        return None

    def pairing_cap(
        self, gs: GroupState, alloc: dict[str, int]
    ) -> tuple[dict[str, int], str | None, bool]:
        """Lower ``alloc`` so a same-token engine/decoder pair keeps serving.

        Returns the allowances, a hold reason when they were lowered, and whether the hold
        is stuck (no Instance can move without breaking the last pair).
        """
        e, d = self.members.get("engine"), self.members.get("decoder")
        if e is None or d is None or not _pairing_applies(gs, e, d):
            return alloc, None, False
        new_e = gs.canary.get("engine", gs.stable.get("engine", ""))
        new_d = gs.canary.get("decoder", gs.stable.get("decoder", ""))
        old_e = gs.stable.get("engine", "")
        re_, rd = e.ready_by_token(), d.ready_by_token()
        pairs = sorted((t for t in re_ if rd.get(t, 0) >= 1), key=lambda t: t or "")
        new_tok = e.token(new_e)
        new_pair_serves = (
            new_tok == d.token(new_d) and e.ready_on(new_e) >= 1 and d.ready_on(new_d) >= 1
        )
        if not pairs or new_pair_serves:
            # no pair serves now (nothing left to keep), or a new-token pair already serves
            return alloc, None, False
        keep = e.token(old_e) if e.token(old_e) in pairs else pairs[0]
        out = dict(alloc)
        for view, new in ((e, new_e), (d, new_d)):
            c = view.component
            if c not in gs.canary or view.token(new) == keep:
                continue
            surge = view.strategy == Strategy.SURGE_THEN_DRAIN
            base = view.ready_on(new) if surge else view.on(new)
            keep_ready = (re_ if c == "engine" else rd).get(keep, 0)
            out[c] = max(0, min(alloc[c], base + keep_ready - 1))
        if out == alloc:
            return alloc, None, False
        moving = any(
            out[c] > self.members[c].on(gs.canary[c])
            or self.members[c].on(gs.canary[c]) > self.members[c].ready_on(gs.canary[c])
            for c in gs.canary
            if c in out
        )
        reason = (
            f"keeping a {keep or 'untokened'} engine/decoder pair serving until a "
            f"{new_tok or 'untokened'} pair is ready"
        )
        return out, reason, not moving

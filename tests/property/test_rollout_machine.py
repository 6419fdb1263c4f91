"""decide() over two or three simulated InferenceReplicas, random edits, faults and verbs.

Each member is a small model of an InferenceReplica: Instances by index, moving toward the
pacing the decision wrote (partition keeps the lowest indexes; at most the strategy's budget
in flight; every move takes a few ticks), SurgeThenDrain (the old Instance serves until its
replacement is ready) or RecreatePod (it goes down first). Rules edit revisions (and the
pairing token), scale, edit the plan, hold or fail a member's new revision, crash Instances,
pass time, promote, roll back and repin. After every decide() the invariants of
``rollout_invariants.py`` are checked, the state goes through its JSON codec, and the same
inputs are decided twice. At the end faults stop and the run must settle.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from omenative_core.model import Pacing, RollingUpdate
from omenative_core.revisions import hash_of
from omenative_core.rollout import (
    ANNOTATION_OVERRIDE_ANALYSIS,
    ANNOTATION_PROMOTE,
    ANNOTATION_REPIN,
    ANNOTATION_ROLLBACK,
    AnalysisMeasurement,
    MemberView,
    RolloutConfig,
    RolloutDecision,
    RolloutState,
    decide,
    errors,
    explain_decision,
    parse_rollout,
    plan_token,
    state_from_json,
    state_to_json,
    validate_rollout,
)
from tests.property.rollout_invariants import (
    ALL_PASS_INVARIANTS,
    Pass,
    observed_pair_serving,
    observed_ratio_within_tolerance,
    pair_serving,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TICK = timedelta(seconds=10)
CONFIG = RolloutConfig()
ERR = {"name": "err", "query": "sum(rate(errors[1m]))", "operator": "LT", "threshold": 0.05}
HEALTH = {"pass": 0.01, "fail": 0.5, "none": None}


def _budget(value: int | str | None, desired: int) -> int:
    if value is None:
        value = "25%"
    if isinstance(value, int):
        return value
    return math.ceil(desired * int(value.rstrip("%")) / 100)


@dataclass
class Inst:
    """One Instance: its revision, readiness, a move in flight, a crash."""

    index: int
    rev: str
    ready: bool = True
    busy: int = 0
    surge_to: str | None = None
    down: int = 0


class SimReplica:
    """A component's InferenceReplica, reduced to what the rollout sees and steers."""

    def __init__(self, component: str, desired: int, revision: str, strategy: str) -> None:
        self.component = component
        self.desired = desired
        self.revision = revision
        self.strategy = strategy
        self.insts = [Inst(i, revision) for i in range(desired)]
        self.held: set[str] = set()
        self.fail_ticks = 0

    def view(self, tokens: dict[str, str | None]) -> MemberView:
        instances: Counter[str] = Counter()
        ready: Counter[str] = Counter()
        for inst in self.insts:
            instances[inst.rev] += 1
            if inst.surge_to:
                instances[inst.surge_to] += 1
            if inst.ready and not inst.down:
                ready[inst.rev] += 1
        revs = {*instances, self.revision}
        current = (
            max(sorted(ready), key=lambda r: ready[r])
            if ready
            else self.insts[0].rev
            if self.insts
            else self.revision
        )
        return MemberView(
            component=self.component,
            desired=self.desired,
            revision=self.revision,
            current_revision=current,
            instances=dict(instances),
            ready=dict(ready),
            held=self.revision in self.held,
            failed=self.fail_ticks > 0,
            pairing={r: tokens.get(r) for r in revs},
            strategy=self.strategy,
        )

    def tick(self, pacing: Pacing | None, budgets: RollingUpdate | None, lag: int) -> None:
        target = (
            pacing.rollback_to_revision if pacing and pacing.rollback_to_revision else self.revision
        )
        part = (pacing.partition or 0) if pacing else 0
        for inst in self.insts:
            if inst.down:
                inst.down -= 1
            if inst.busy:
                inst.busy -= 1
                if inst.busy == 0:
                    if inst.surge_to:
                        inst.rev, inst.surge_to = inst.surge_to, None
                    inst.ready = True
        if self.fail_ticks:
            self.fail_ticks -= 1
        while len(self.insts) > self.desired:
            self.insts.pop()
        kept = self.insts[0].rev if self.insts else target
        while len(self.insts) < self.desired:
            i = len(self.insts)
            self.insts.append(Inst(i, target if i >= part else kept, ready=False, busy=lag + 1))
        if target in self.held:
            return  # a held revision gets no new pods
        if self.strategy == "SurgeThenDrain":
            raw = budgets.max_surge if budgets else None
        else:
            raw = budgets.max_unavailable if budgets else None
        budget = max(1, _budget(raw, self.desired))
        inflight = sum(1 for i in self.insts if i.busy)
        for inst in sorted(self.insts, key=lambda i: -i.index):
            if inflight >= budget:
                break
            if inst.index < part or inst.busy or inst.rev == target:
                continue
            if self.strategy == "SurgeThenDrain":
                inst.surge_to = target
            else:
                inst.rev, inst.ready = target, False
            inst.busy = lag + 1
            inflight += 1


def layouts(layout: str, comps: list[str], token: str | None, variant: int) -> dict[str, Any]:
    """The rollout spec of a layout, in one of two plan variants."""
    router = "router" in comps
    groups: list[dict[str, Any]]
    if layout == "canary":
        steps = (
            [
                {"capacity": "25%", "pause": {}},
                {"capacity": "50%", "pause": {"duration": "2m"}},
                {
                    "capacity": "100%",
                    "analysis": {"interval": "1m", "failureLimit": 2, "metrics": [ERR]},
                },
            ]
            if variant == 0
            else [{"capacity": "50%", "pause": {}}, {"capacity": "100%"}]
        )
        groups = [{"components": ["engine", "decoder"], "canary": {"steps": steps}}]
        if router:
            groups.append({"components": ["router"], "blueGreen": {}})
    elif layout == "bluegreen":
        groups = [
            {
                "components": comps,
                "blueGreen": {},
                "maintainRatio": {"tolerance": 100 if variant == 0 else 80},
            }
        ]
    elif layout == "sequence":
        groups = [
            {
                "components": ["engine"],
                "soak": "1m" if variant == 0 else "2m",
                "maintainRatio": {} if variant == 0 else {"tolerance": 100},
            },
            {"components": ["decoder"]},
        ]
        if router:
            groups.append({"components": ["router"]})
    else:
        groups = [
            {
                "components": ["engine", "decoder"],
                "rollingUpdate": {"maxSurge": 1 if variant == 0 else "50%", "maxUnavailable": 1},
            }
        ]
        if router:
            groups.append({"components": ["router"]})
    out: dict[str, Any] = {"groups": groups}
    if token is not None:
        out["pairingProtocol"] = token
    return out


class RolloutMachine(RuleBasedStateMachine):
    """Drives decide() against simulated members and checks the rollout invariants."""

    @initialize(
        layout=st.sampled_from(["canary", "bluegreen", "sequence", "rolling"]),
        three=st.booleans(),
        strategy=st.sampled_from(["SurgeThenDrain", "RecreatePod"]),
        desired=st.lists(st.integers(1, 4), min_size=3, max_size=3),
        tokens=st.booleans(),
        start=st.sampled_from(["all", "both", "engine", "decoder", "none"]),
        start_token=st.booleans(),
    )
    def setup(
        self,
        layout: str,
        three: bool,
        strategy: str,
        desired: list[int],
        tokens: bool,
        start: str,
        start_token: bool,
    ) -> None:
        self.layout = layout
        self.comps = ["engine", "decoder", *(["router"] if three else [])]
        self.strategy = strategy
        self.serial = 0
        self.tokens: dict[str, str | None] = {}
        self.token_n = 1
        self.paired = tokens and layout in ("canary", "bluegreen")
        self.token: str | None = "t1" if self.paired else None
        self.sims = {}
        for c, n in zip(self.comps, desired, strict=False):
            rev = self._new_rev(c)
            if c != "router":
                self.tokens[rev] = self.token
            self.sims[c] = SimReplica(c, n, rev, strategy)
        self.variant = 0
        self.rollout = layouts(layout, self.comps, self.token, 0)
        self.declared = dict.fromkeys(self.comps, True)
        assert errors(validate_rollout(self.rollout, None, self.declared)) == []
        self.spec = parse_rollout(self.rollout)
        self.state: RolloutState | None = None
        self.now = T0
        self.ann: dict[str, str] = {}
        self.results: list[AnalysisMeasurement] = []
        self.health = "pass"
        self.pacing: dict[str, Pacing] = {}
        self.budgets: dict[str, RollingUpdate | None] = {}
        self.prev_allowed: dict[str, tuple[int, int]] = {}
        self.clean = True
        self.last: RolloutDecision | None = None
        self.lag = 1
        self.passes = 0
        self.pair_seen = False
        if start != "none":
            self.new_revision(start, start_token)

    # ------------------------------------------------------------------ the loop

    def _new_rev(self, component: str) -> str:
        self.serial += 1
        return f"x-{component}-{self.serial:010x}"

    def _views(self) -> dict[str, MemberView]:
        return {c: s.view(self.tokens) for c, s in self.sims.items()}

    def _pass(self) -> RolloutDecision:
        views = self._views()
        ann = dict(self.ann)
        d = decide(self.spec, self.state, views, self.now, self.results, ann, CONFIG)
        again = decide(self.spec, self.state, views, self.now, self.results, ann, CONFIG)
        assert again == d, "decide is not deterministic"
        p = Pass(
            before=self.state,
            views=views,
            decision=d,
            prev_allowed=self.prev_allowed,
            annotations=ann,
            default_tolerance=CONFIG.default_ratio_tolerance,
        )
        for check in ALL_PASS_INVARIANTS:
            check(p)
        if self.clean and self.state is not None:
            # the world was shaped by the previous decision: judge it by that state
            observed_ratio_within_tolerance(
                views, self.state.pinned, self.state, CONFIG.default_ratio_tolerance
            )
            if self.pair_seen:
                observed_pair_serving(views, self.state)
        self.pair_seen = pair_serving(views)
        assert explain_decision(d, self.now)
        stored = state_from_json(json.loads(json.dumps(state_to_json(d.state))))
        assert stored == d.state, "the state does not survive its JSON codec"
        self.state = stored
        for key in d.remove_annotations:
            self.ann.pop(key, None)
        value = HEALTH[self.health]
        self.results = [
            AnalysisMeasurement(id=q.id, value=value, error="" if value is not None else "no data")
            for q in d.queries
        ]
        for e in d.events:
            event(f"event {e.reason}")
        for g in d.state.groups:
            if g.hold is not None:
                event(f"hold {g.hold.gate}")
        for e in d.events:
            if e.reason == "RolloutPromoted" and "Pairing" in e.message:
                self.clean = False  # a pairing gap was accepted
            if e.reason in ("RolloutPlanRepinned", "RolloutRollingBack", "RolloutRestarted"):
                self.clean = False  # these moves are not ratio- or pairing-paced
        self.pacing = {c: cd.pacing for c, cd in d.components.items()}
        self.budgets = {c: cd.rolling_update for c, cd in d.components.items()}
        self.prev_allowed = {c: (cd.allowed, views[c].desired) for c, cd in d.components.items()}
        for c, sim in self.sims.items():
            sim.tick(self.pacing.get(c), self.budgets.get(c), self.lag)
        self.now += TICK
        self.last = d
        self.passes += 1
        return d

    # ------------------------------------------------------------------ rules

    @rule(n=st.integers(1, 12), lag=st.integers(0, 2))
    def reconcile(self, n: int, lag: int) -> None:
        self.lag = lag
        for _ in range(n):
            self._pass()

    @rule(seconds=st.sampled_from([30, 90, 300, 900]))
    def wait(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)

    @rule(
        which=st.sampled_from(["engine", "decoder", "router", "both", "all"]),
        new_token=st.booleans(),
    )
    def new_revision(self, which: str, new_token: bool) -> None:
        targets = {"both": ["engine", "decoder"], "all": self.comps}.get(which, [which])
        targets = [c for c in targets if c in self.sims]
        if self.paired and new_token:
            targets = sorted({*targets, "engine", "decoder"})
            self.token_n += 1
            old = self.rollout
            self.token = f"t{self.token_n}"
            self._set_plan(layouts(self.layout, self.comps, self.token, self.variant), old)
        for c in targets:
            rev = self._new_rev(c)
            if c != "router":
                self.tokens[rev] = self.token
            self.sims[c].revision = rev

    @rule(component=st.sampled_from(["engine", "decoder", "router"]), n=st.integers(1, 4))
    def scale(self, component: str, n: int) -> None:
        if component in self.sims and self.sims[component].desired != n:
            self.sims[component].desired = n
            self.clean = False

    def _set_plan(self, rollout: dict[str, Any], old: dict[str, Any]) -> None:
        assert errors(validate_rollout(rollout, old, self.declared)) == [], rollout
        self.rollout = rollout
        self.spec = parse_rollout(rollout)

    @rule()
    def edit_plan(self) -> None:
        self.variant = 1 - self.variant
        self._set_plan(layouts(self.layout, self.comps, self.token, self.variant), self.rollout)

    @rule(component=st.sampled_from(["engine", "decoder", "router"]))
    def hold(self, component: str) -> None:
        if component in self.sims:
            self.sims[component].held.add(self.sims[component].revision)

    @rule()
    def release(self) -> None:
        for sim in self.sims.values():
            sim.held.clear()

    @rule(component=st.sampled_from(["engine", "decoder", "router"]))
    def fail(self, component: str) -> None:
        if component in self.sims:
            self.sims[component].fail_ticks = 3

    @rule(component=st.sampled_from(["engine", "decoder", "router"]), data=st.data())
    def crash(self, component: str, data: st.DataObject) -> None:
        sim = self.sims.get(component)
        if sim is None or not sim.insts:
            return
        inst = data.draw(st.sampled_from(sim.insts))
        inst.down = data.draw(st.integers(1, 4))
        self.clean = False

    @rule(health=st.sampled_from(sorted(HEALTH)))
    def set_health(self, health: str) -> None:
        self.health = health

    @precondition(lambda self: self.state is not None)
    @rule(kind=st.sampled_from(["canary", "wrong", "override"]))
    def promote(self, kind: str) -> None:
        assert self.state is not None
        hashes = sorted(hash_of(r) for g in self.state.groups for r in g.canary.values())
        if kind == "wrong" or not hashes:
            self.ann[ANNOTATION_PROMOTE] = "ffffff"
            return
        self.ann[ANNOTATION_PROMOTE] = hashes[0][:6]
        if kind == "override":
            self.ann[ANNOTATION_OVERRIDE_ANALYSIS] = "true"

    @rule()
    def rollback(self) -> None:
        self.ann[ANNOTATION_ROLLBACK] = "true"
        self.clean = False

    @rule(kind=st.sampled_from(["now", "current", "stale"]))
    def repin(self, kind: str) -> None:
        value = {"now": "now", "current": plan_token(self.spec), "stale": "rp1:000000000000"}[kind]
        self.ann[ANNOTATION_REPIN] = value

    # ------------------------------------------------------------------ checks

    @invariant()
    def decisions_are_made(self) -> None:
        if hasattr(self, "sims") and self.passes == 0:
            self._pass()

    def teardown(self) -> None:
        """Faults stop, analyses pass, manual gates are promoted: every group settles."""
        if not hasattr(self, "sims"):
            return
        for sim in self.sims.values():
            sim.held.clear()
            sim.fail_ticks = 0
            for inst in sim.insts:
                inst.down = 0
        self.health = "pass"
        self.lag = 1
        d = self._pass()
        for _ in range(400):
            if all(g.phase in ("Stable", "RolledBack") for g in d.state.groups):
                break
            for g in d.state.groups:
                stuck_pairing = (
                    g.hold is not None and g.hold.gate == "Pairing" and "promote" in g.hold.reason
                )
                if g.canary and (g.gate == "Manual" or stuck_pairing):
                    self.ann[ANNOTATION_PROMOTE] = sorted(hash_of(r) for r in g.canary.values())[0]
            if d.requeue_after and d.requeue_after > TICK:
                self.now += d.requeue_after - TICK
            d = self._pass()
        groups = d.state.groups
        blocked = [g for g in groups if g.phase not in ("Stable", "RolledBack")]
        ratio_held = any(g.hold is not None and g.hold.gate == "Ratio" for g in blocked)
        for g in blocked:
            # maintainRatio with Instances that go down can be unsatisfiable: it says so,
            # and the groups of a sequence behind it wait
            gate = g.hold.gate if g.hold is not None else ""
            assert gate == "Ratio" or (ratio_held and gate == "Sequential"), (
                f"group {g.index} did not settle: {g.phase} gate={g.gate} hold={g.hold}: "
                f"{explain_decision(d, self.now)}"
            )
        for _ in range(20):  # let the last moves land
            d = self._pass()
        for g in d.state.groups:
            if g.phase not in ("Stable", "RolledBack"):
                continue
            for c in g.components:
                sim = self.sims[c]
                revs = {i.rev for i in sim.insts} | {i.surge_to for i in sim.insts if i.surge_to}
                assert revs == {g.stable[c]}, (
                    f"{c} settled {g.phase} on {g.stable[c]} but runs {sorted(revs)}"
                )
        if blocked:
            return
        before = d.state
        quiet = self._pass()
        assert not quiet.events, f"a settled rollout still emits {quiet.events}"
        assert quiet.state == before, "a settled rollout still changes its state"
        assert quiet.requeue_after is None and not quiet.remove_annotations


RolloutMachine.TestCase.settings = settings(
    stateful_step_count=int(os.environ.get("OMENATIVE_ROLLOUT_STEPS", "30")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    deadline=None,
)
TestRolloutMachine = RolloutMachine.TestCase

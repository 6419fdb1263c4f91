"""decide(): canary steps and gates, verbs, rollback, blue-green sequences, ratio, pairing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from omenative_core.model import (
    InferenceReplica,
    InferenceReplicaSpec,
    InferenceReplicaStatus,
    InstanceOperation,
    InstanceStatus,
    ObjectMeta,
    RetryBlock,
)
from omenative_core.rollout import (
    ANNOTATION_OVERRIDE_ANALYSIS,
    ANNOTATION_PAUSED,
    ANNOTATION_PROMOTE,
    ANNOTATION_READY_TIMEOUT,
    ANNOTATION_REPIN,
    ANNOTATION_ROLLBACK,
    AnalysisMeasurement,
    MemberView,
    RolloutConfig,
    RolloutDecision,
    RolloutState,
    decide,
    explain_decision,
    member_view,
    parse_rollout,
    plan_token,
    state_from_json,
    state_to_json,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def rev(component: str, letter: str) -> str:
    """A ControllerRevision name with a 10-character hash of ``letter``."""
    return f"x-{component}-{letter * 10}"


E1, E2, E3 = rev("engine", "a"), rev("engine", "b"), rev("engine", "e")
D1, D2, D3 = rev("decoder", "c"), rev("decoder", "d"), rev("decoder", "f")
R1, R2 = rev("router", "1"), rev("router", "2")

ERR = {"name": "err", "query": "sum(rate(errors[1m]))", "operator": "LT", "threshold": 0.05}


class Fleet:
    """Members whose Instances move to the pacing at once (all Ready), and the loop."""

    def __init__(
        self,
        rollout: Mapping[str, Any],
        members: Mapping[str, tuple[int, str]],
        *,
        strategy: str = "SurgeThenDrain",
        tokens: Mapping[str, str | None] | None = None,
        config: RolloutConfig | None = None,
    ) -> None:
        self.spec = parse_rollout(rollout)
        self.desired = {c: d for c, (d, _) in members.items()}
        self.revision = {c: r for c, (_, r) in members.items()}
        self.on: dict[str, dict[str, int]] = {c: {r: d} for c, (d, r) in members.items()}
        self.not_ready: dict[str, dict[str, int]] = {c: {} for c in members}
        self.tokens: dict[str, str | None] = dict(tokens or {})
        self.strategy = strategy
        self.held: set[str] = set()
        self.failed: set[str] = set()
        self.state: RolloutState | None = None
        self.now = T0
        self.ann: dict[str, str] = {}
        self.results: list[AnalysisMeasurement] = []
        self.config = config
        self.last: RolloutDecision | None = None
        self.frozen: set[str] = set()

    def views(self) -> dict[str, MemberView]:
        out = {}
        for c in self.desired:
            ready = {r: n - self.not_ready[c].get(r, 0) for r, n in self.on[c].items()}
            out[c] = MemberView(
                component=c,
                desired=self.desired[c],
                revision=self.revision[c],
                current_revision=max(self.on[c], key=lambda r: self.on[c][r]),
                instances={r: n for r, n in self.on[c].items() if n},
                ready={r: n for r, n in ready.items() if n},
                held=c in self.held,
                failed=c in self.failed,
                pairing={r: self.tokens.get(r) for r in {*self.on[c], self.revision[c]}},
                strategy=self.strategy,
            )
        return out

    def decide(self) -> RolloutDecision:
        d = decide(
            self.spec, self.state, self.views(), self.now, self.results, self.ann, self.config
        )
        again = state_from_json(state_to_json(d.state))
        assert again == d.state
        twice = decide(
            self.spec, self.state, self.views(), self.now, self.results, self.ann, self.config
        )
        assert twice == d  # deterministic
        return d

    def apply(self, d: RolloutDecision) -> None:
        for c, cd in d.components.items():
            if c in self.frozen:
                continue
            target = cd.pacing.rollback_to_revision or self.revision[c]
            desired = self.desired[c]
            keep = cd.pacing.partition or 0
            on_target = self.on[c].get(target, 0)
            moved = max(on_target, desired - keep)
            rest = dict(self.on[c])
            rest.pop(target, None)
            leaving = sum(rest.values()) - (desired - moved)
            for r in sorted(rest, key=lambda r: (r == d.state.groups[cd.group].stable.get(c), r)):
                take = min(rest[r], leaving)
                rest[r] -= take
                leaving -= take
            self.on[c] = {r: n for r, n in rest.items() if n}
            self.on[c][target] = moved

    def step(
        self, *, answer: Callable[[str], float | None] | None = None, wait: timedelta | None = None
    ) -> RolloutDecision:
        """One pass: decide, apply, drop consumed annotations, answer queries, move time."""
        d = self.decide()
        self.state = d.state
        self.apply(d)
        for key in d.remove_annotations:
            self.ann.pop(key, None)
        self.results = (
            [AnalysisMeasurement(id=q.id, value=answer(q.metric)) for q in d.queries]
            if answer is not None
            else []
        )
        if wait is not None:
            self.now += wait
        elif d.requeue_after:
            self.now += d.requeue_after
        self.last = d
        return d

    def run_until(
        self, pred: Callable[[RolloutDecision], bool], *, limit: int = 40, **kw: Any
    ) -> RolloutDecision:
        for _ in range(limit):
            d = self.step(**kw)
            if pred(d):
                return d
        raise AssertionError(f"not reached; last state {self.state}")

    def phase(self, group: int = 0) -> str:
        assert self.state is not None
        return self.state.groups[group].phase

    def reasons(self, d: RolloutDecision) -> list[str]:
        return [e.reason for e in d.events]


def canary_rollout(*steps: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "groups": [{"components": ["engine", "decoder"], "canary": {"steps": list(steps), **extra}}]
    }


def traffic(d: RolloutDecision, component: str) -> dict[str, int]:
    return {t.revision_name: t.percent for t in d.components[component].traffic}


# ------------------------------------------------------------------------------ canary


def test_three_step_canary_through_manual_pause_timed_pause_and_analysis() -> None:
    fleet = Fleet(
        canary_rollout(
            {"capacity": "25%", "traffic": 25, "pause": {}},
            {"capacity": "50%", "traffic": 50, "pause": {"duration": "5m"}},
            {"capacity": "100%", "traffic": 100, "analysis": {"interval": "1m", "metrics": [ERR]}},
        ),
        {"engine": (4, E1), "decoder": (8, D1)},
    )
    fleet.revision.update(engine=E2, decoder=D2)
    d = fleet.step()
    assert fleet.reasons(d) == ["RolloutStarted"]
    # a group's events name its members, so their InferenceReplicas show them too
    assert d.events[0].components == ("engine", "decoder")
    assert {c: cd.allowed for c, cd in d.components.items()} == {"engine": 1, "decoder": 2}
    assert d.components["engine"].pacing.partition == 3
    assert d.components["decoder"].pacing.partition == 6
    # step 1 is ready: the manual pause holds it
    d = fleet.step(wait=timedelta(seconds=30))
    assert fleet.phase() == "Paused"
    assert d.components["engine"].allowed == 1
    assert traffic(d, "engine") == {"x-engine-rev-aaaaaaaaaa": 75, "x-engine-rev-bbbbbbbbbb": 25}
    assert [t.tag for t in d.components["engine"].traffic] == ["stable", "canary"]
    assert [t.latest_revision for t in d.components["engine"].traffic] == [False, True]
    d = fleet.step(wait=timedelta(minutes=10))
    assert fleet.phase() == "Paused"  # time does not pass a manual pause
    fleet.ann[ANNOTATION_PROMOTE] = "bbbbbb"
    d = fleet.step(wait=timedelta(seconds=30))
    assert fleet.reasons(d) == ["RolloutPromoted", "RolloutStepAdvanced"]
    assert ANNOTATION_PROMOTE in d.remove_annotations
    assert {c: cd.allowed for c, cd in d.components.items()} == {"engine": 2, "decoder": 4}
    # step 2: a 5m pause counted from when the step was ready
    d = fleet.step(wait=timedelta(seconds=0))
    assert fleet.phase() == "Paused"
    assert d.requeue_after == timedelta(minutes=5)
    fleet.now += timedelta(minutes=4)
    d = fleet.step(wait=timedelta(0))
    assert fleet.phase() == "Paused"
    assert d.requeue_after == timedelta(minutes=1)
    fleet.now += timedelta(minutes=1)
    d = fleet.step(wait=timedelta(0))
    assert fleet.reasons(d) == ["RolloutStepAdvanced"]
    assert fleet.phase() == "Promoting"
    assert {c: cd.allowed for c, cd in d.components.items()} == {"engine": 4, "decoder": 8}
    # step 3: 100% and an analysis round; the shell answers the query
    d = fleet.step(answer=lambda metric: 0.01, wait=timedelta(0))
    assert fleet.phase() == "Canarying"
    assert [q.metric for q in d.queries] == ["err"]
    assert d.queries[0].query == ERR["query"]
    d = fleet.step(wait=timedelta(0))
    assert fleet.reasons(d) == ["CanaryAnalysisPassed", "RolloutGroupStable"]
    assert fleet.phase() == "Stable"
    assert traffic(d, "engine") == {"x-engine-rev-bbbbbbbbbb": 100}
    assert fleet.state is not None
    assert fleet.state.groups[0].stable == {"engine": E2, "decoder": D2}
    # at rest: the same state, no events, nothing to wait for
    again = fleet.step()
    assert again.state == d.state
    assert not again.events and again.requeue_after is None


def test_capacity_rounds_up_and_counts_are_capped() -> None:
    fleet = Fleet(
        canary_rollout({"capacity": "10%"}, {"capacity": 5}, {"capacity": "100%"}),
        {"engine": (3, E1), "decoder": (7, D1)},
    )
    fleet.revision.update(engine=E2, decoder=D2)
    d = fleet.step()
    assert {c: cd.allowed for c, cd in d.components.items()} == {"engine": 1, "decoder": 1}
    d = fleet.step()
    assert {c: cd.allowed for c, cd in d.components.items()} == {"engine": 3, "decoder": 5}


def test_step_waits_for_every_member_of_the_unit() -> None:
    fleet = Fleet(
        canary_rollout({"capacity": "50%"}, {"capacity": "100%"}),
        {"engine": (2, E1), "decoder": (2, D1)},
    )
    fleet.revision.update(engine=E2, decoder=D2)
    fleet.frozen.add("decoder")  # the decoder's replica lags behind
    for _ in range(5):
        d = fleet.step(wait=timedelta(seconds=10))
        assert d.components["engine"].allowed == 1
    assert fleet.phase() == "Canarying"
    assert fleet.state is not None and fleet.state.groups[0].gate == "Capacity"
    fleet.frozen.clear()
    d = fleet.run_until(lambda d: d.components["engine"].allowed == 2)


def test_promote_does_not_shorten_a_timed_pause() -> None:
    fleet = Fleet(
        canary_rollout({"capacity": "50%", "pause": {"duration": "10m"}}, {"capacity": "100%"}),
        {"engine": (2, E1), "decoder": (2, D1)},
    )
    fleet.revision.update(engine=E2, decoder=D2)
    fleet.step()
    fleet.ann[ANNOTATION_PROMOTE] = "dddddddddd"
    d = fleet.step(wait=timedelta(minutes=1))
    assert fleet.phase() == "Paused"
    assert ANNOTATION_PROMOTE not in d.remove_annotations  # kept until the advance
    fleet.now += timedelta(minutes=9)
    d = fleet.step()
    assert "RolloutStepAdvanced" in fleet.reasons(d)
    assert "RolloutPromoted" not in fleet.reasons(d)
    assert ANNOTATION_PROMOTE in d.remove_annotations


def test_promote_needs_override_to_pass_an_analysis_gate() -> None:
    fleet = Fleet(
        canary_rollout({"capacity": "50%", "analysis": {"metrics": [ERR]}}, {"capacity": "100%"}),
        {"engine": (2, E1), "decoder": (2, D1)},
    )
    fleet.revision.update(engine=E2, decoder=D2)
    fleet.step()
    fleet.ann[ANNOTATION_PROMOTE] = "bbbbbbbb"
    d = fleet.step(wait=timedelta(seconds=5))
    assert fleet.phase() == "Canarying" and d.queries
    assert ANNOTATION_PROMOTE not in d.remove_annotations
    fleet.ann[ANNOTATION_OVERRIDE_ANALYSIS] = "true"
    d = fleet.step(wait=timedelta(seconds=5))
    assert fleet.reasons(d) == ["RolloutPromoted", "RolloutStepAdvanced"]
    assert "analysis overridden" in d.events[0].message
    assert set(d.remove_annotations) == {ANNOTATION_PROMOTE, ANNOTATION_OVERRIDE_ANALYSIS}


def test_bad_promotes_are_rejected_and_removed() -> None:
    fleet = Fleet(
        canary_rollout({"capacity": "50%", "pause": {}}, {"capacity": "100%"}),
        {"engine": (2, E1), "decoder": (2, D1)},
    )
    fleet.ann[ANNOTATION_PROMOTE] = "bbbbbb"
    d = fleet.step()  # nothing in progress
    assert fleet.reasons(d) == ["RolloutPromoteRejected"]
    assert d.remove_annotations == (ANNOTATION_PROMOTE,)
    fleet.revision.update(engine=E2, decoder=D2)
    fleet.step()
    for value, why in (
        ("BBBBBB", "at least 6"),
        ("bbb", "at least 6"),
        ("aaaaaa", "no rollout in progress"),
    ):
        fleet.ann[ANNOTATION_PROMOTE] = value
        d = fleet.step()
        assert fleet.reasons(d) == ["RolloutPromoteRejected"], value
        assert why in d.events[0].message
        assert fleet.phase() == "Paused"


# ------------------------------------------------------------------------------ failure


def test_failing_analysis_fails_then_rolls_back_to_the_stable_revision() -> None:
    fleet = Fleet(
        canary_rollout(
            {
                "capacity": "50%",
                "analysis": {"interval": "1m", "failureLimit": 2, "metrics": [ERR]},
            },
            {"capacity": "100%"},
        ),
        {"engine": (2, E1), "decoder": (4, D1)},
    )
    fleet.revision.update(engine=E2, decoder=D2)
    fleet.step()
    reasons: list[str] = []
    for _ in range(8):
        d = fleet.step(answer=lambda m: 0.5)
        reasons += fleet.reasons(d)
        if fleet.phase() == "Failed":
            break
    assert fleet.phase() == "Failed"
    assert reasons == ["CanaryAnalysisRoundFailed", "CanaryAnalysisFailed"]
    assert d.requeue_after == timedelta(0)
    assert {c: cd.allowed for c, cd in d.components.items()} == {"engine": 1, "decoder": 2}
    fleet.frozen.add("decoder")  # the decoder takes a pass to come back
    d = fleet.step()
    assert fleet.phase() == "RollingBack"
    assert fleet.reasons(d) == ["RolloutRollingBack"]
    assert d.components["engine"].pacing.rollback_to_revision == E1
    assert d.components["decoder"].pacing.rollback_to_revision == D1
    assert d.components["engine"].pacing.partition == 0
    assert traffic(d, "engine")["x-engine-rev-bbbbbbbbbb"] == 0
    fleet.frozen.clear()
    d = fleet.step()
    assert fleet.phase() == "RollingBack"
    assert traffic(d, "decoder") == {"x-decoder-rev-cccccccccc": 100, "x-decoder-rev-dddddddddd": 0}
    d = fleet.step()
    assert fleet.phase() == "RolledBack"
    assert fleet.reasons(d) == ["RolloutRolledBack"]
    assert fleet.state is not None
    assert fleet.state.groups[0].rejected == {"engine": E2, "decoder": D2}
    # it stays rolled back while the spec still names the rejected revisions
    for _ in range(3):
        d = fleet.step(wait=timedelta(minutes=5))
        assert fleet.phase() == "RolledBack"
        assert d.components["engine"].pacing.rollback_to_revision == E1
        assert not d.events
    # a new revision starts a new run from the stable one
    fleet.revision["engine"] = E3
    d = fleet.step()
    assert fleet.phase() == "Canarying"
    assert fleet.state.groups[0].canary == {"engine": E3, "decoder": D2}
    assert fleet.state.groups[0].stable == {"engine": E1, "decoder": D1}
    assert d.components["engine"].pacing.rollback_to_revision is None


def test_missing_results_become_inconclusive_after_an_interval() -> None:
    fleet = Fleet(
        canary_rollout(
            {
                "capacity": "50%",
                "analysis": {"interval": "2m", "onInconclusive": "Rollback", "metrics": [ERR]},
            },
            {"capacity": "100%"},
        ),
        {"engine": (2, E1), "decoder": (2, D1)},
    )
    fleet.revision.update(engine=E2, decoder=D2)
    fleet.step()
    d = fleet.step(wait=timedelta(minutes=1))
    first = d.queries
    assert first
    d = fleet.step(wait=timedelta(minutes=1))  # no answer yet: asked again, same id
    assert [q.id for q in d.queries] == [q.id for q in first]
    d = fleet.step()
    assert fleet.phase() == "Failed"
    assert "CanaryAnalysisInconclusive" in fleet.reasons(d)


def test_inconclusive_hold_keeps_waiting_and_stall_rolls_back() -> None:
    for policy, expect in (("Hold", "Canarying"), ("RollbackOnStall", "Failed")):
        fleet = Fleet(
            canary_rollout(
                {
                    "capacity": "50%",
                    "analysis": {
                        "interval": "1m",
                        "failureLimit": 2,
                        "onInconclusive": policy,
                        "metrics": [ERR],
                    },
                },
                {"capacity": "100%"},
            ),
            {"engine": (2, E1), "decoder": (2, D1)},
        )
        fleet.revision.update(engine=E2, decoder=D2)
        fleet.step()
        phases = []
        for _ in range(6):
            fleet.step(answer=lambda m: None)
            phases.append(fleet.phase())
        assert fleet.state is not None
        if policy == "Hold":
            assert set(phases) == {"Canarying"}
            assert fleet.state.groups[0].analysis is not None
            assert fleet.state.groups[0].analysis.inconclusive >= 2
        else:
            assert expect in phases and phases[-1] == "RolledBack"


def test_ready_timeout_fails_a_canary_annotation_first() -> None:
    fleet = Fleet(
        canary_rollout({"capacity": "50%"}, {"capacity": "100%"}, readyTimeout="30m"),
        {"engine": (2, E1), "decoder": (2, D1)},
    )
    fleet.revision.update(engine=E2, decoder=D2)
    fleet.frozen.update({"engine", "decoder"})  # nothing ever becomes ready
    zero = timedelta(0)
    d = fleet.step(wait=zero)
    assert d.requeue_after == zero
    d = fleet.step(wait=zero)
    assert d.requeue_after == timedelta(minutes=30)
    fleet.ann[ANNOTATION_READY_TIMEOUT] = "10m"
    d = fleet.step(wait=zero)
    assert d.requeue_after == timedelta(minutes=10)
    fleet.now += timedelta(minutes=10)
    d = fleet.step(wait=zero)
    assert fleet.phase() == "Failed"
    assert fleet.reasons(d) == ["CanaryReadyTimeout"]
    fleet.step()
    assert fleet.phase() == "RollingBack"


def test_default_ready_timeout_comes_from_the_cluster_config() -> None:
    fleet = Fleet(
        canary_rollout({"capacity": "50%"}, {"capacity": "100%"}),
        {"engine": (2, E1), "decoder": (2, D1)},
        config=RolloutConfig(default_ready_timeout=timedelta(minutes=7)),
    )
    fleet.revision.update(engine=E2, decoder=D2)
    fleet.frozen.update({"engine", "decoder"})
    fleet.step()
    d = fleet.step()
    assert d.requeue_after == timedelta(minutes=7)


# ------------------------------------------------------------------------------ verbs


def test_rollback_annotation_rolls_every_member_back_and_stays_until_a_new_revision() -> None:
    fleet = Fleet(
        canary_rollout({"capacity": "50%", "pause": {}}, {"capacity": "100%"}),
        {"engine": (2, E1), "decoder": (2, D1)},
    )
    fleet.revision.update(engine=E2, decoder=D2)
    fleet.step()
    fleet.step()
    fleet.ann[ANNOTATION_ROLLBACK] = "true"
    fleet.frozen.add("engine")
    d = fleet.step()
    assert fleet.phase() == "RollingBack"
    assert fleet.reasons(d) == ["RolloutRollingBack"]
    assert not d.remove_annotations
    assert traffic(d, "engine")["x-engine-rev-bbbbbbbbbb"] == 0
    assert traffic(d, "engine")["x-engine-rev-aaaaaaaaaa"] == 100
    # promote and repin are refused while it is present
    fleet.ann[ANNOTATION_PROMOTE] = "bbbbbb"
    fleet.ann[ANNOTATION_REPIN] = "now"
    fleet.frozen.clear()
    d = fleet.step()
    assert set(fleet.reasons(d)) >= {"RolloutPromoteRejected", "RolloutRepinRejected"}
    assert ANNOTATION_ROLLBACK not in d.remove_annotations
    d = fleet.run_until(lambda d: fleet.phase() == "RolledBack")
    fleet.revision["decoder"] = D3
    d = fleet.step()
    assert ANNOTATION_ROLLBACK in d.remove_annotations
    assert fleet.phase() == "Canarying"


def test_rollback_with_nothing_in_progress_is_rejected() -> None:
    fleet = Fleet(canary_rollout({"capacity": "100%"}), {"engine": (2, E1), "decoder": (2, D1)})
    fleet.ann[ANNOTATION_ROLLBACK] = "true"
    d = fleet.step()
    assert fleet.reasons(d) == ["RolloutRollbackRejected"]
    assert d.remove_annotations == (ANNOTATION_ROLLBACK,)


def test_reverting_the_spec_ends_the_run() -> None:
    fleet = Fleet(
        canary_rollout({"capacity": "50%", "pause": {}}, {"capacity": "100%"}),
        {"engine": (2, E1), "decoder": (2, D1)},
    )
    fleet.revision.update(engine=E2, decoder=D2)
    fleet.step()
    fleet.revision.update(engine=E1, decoder=D1)
    d = fleet.step()
    assert fleet.phase() == "Stable"
    assert fleet.reasons(d) == ["RolloutAbandoned"]
    assert d.components["engine"].pacing.partition == 0


def test_a_new_revision_mid_run_restarts_from_the_first_step() -> None:
    fleet = Fleet(
        canary_rollout({"capacity": "25%"}, {"capacity": "50%", "pause": {}}, {"capacity": "100%"}),
        {"engine": (4, E1), "decoder": (4, D1)},
    )
    fleet.revision.update(engine=E2, decoder=D2)
    fleet.run_until(lambda d: fleet.phase() == "Paused")
    fleet.revision["engine"] = E3
    d = fleet.step()
    assert "RolloutRestarted" in fleet.reasons(d)
    assert fleet.state is not None
    assert fleet.state.groups[0].step == 0
    assert fleet.state.groups[0].canary == {"engine": E3, "decoder": D2}


def test_repin_moves_a_drifted_run_to_the_current_plan() -> None:
    fleet = Fleet(
        canary_rollout(
            {"capacity": "25%", "pause": {}}, {"capacity": "50%", "pause": {}}, {"capacity": "100%"}
        ),
        {"engine": (4, E1), "decoder": (4, D1)},
    )
    fleet.revision.update(engine=E2, decoder=D2)
    fleet.step()
    fleet.step()
    pinned = plan_token(fleet.spec)
    fleet.spec = parse_rollout(
        canary_rollout({"capacity": "50%", "pause": {}}, {"capacity": "100%"})
    )
    current = plan_token(fleet.spec)
    d = fleet.step()
    assert d.drifted and d.state.plan_token == pinned and d.plan_token == current
    assert "plan drifted" in explain_decision(d, fleet.now)
    assert d.components["engine"].allowed == 1  # still the pinned plan
    for value, why in (
        ("rp1:000000000000", f"the current plan is {current}"),
        ("rp1:xyz", "expected rp1:"),
    ):
        fleet.ann[ANNOTATION_REPIN] = value
        d = fleet.step()
        assert fleet.reasons(d) == ["RolloutRepinRejected"]
        assert why in d.events[0].message
        assert d.remove_annotations == (ANNOTATION_REPIN,)
    fleet.ann[ANNOTATION_REPIN] = current
    d = fleet.step()
    assert fleet.reasons(d)[0] == "RolloutPlanRepinned"
    assert d.state.plan_token == current and not d.drifted
    assert d.components["engine"].allowed == 2  # the first step that covers the canary
    fleet.ann[ANNOTATION_REPIN] = "now"
    d = fleet.step()
    assert fleet.reasons(d) == ["RolloutRepinRejected"]  # already on it


def test_plan_edits_apply_at_once_when_idle() -> None:
    fleet = Fleet(canary_rollout({"capacity": "100%"}), {"engine": (2, E1), "decoder": (2, D1)})
    fleet.step()
    fleet.spec = parse_rollout(canary_rollout({"capacity": "50%"}, {"capacity": "100%"}))
    d = fleet.step()
    assert d.state.plan_token == plan_token(fleet.spec)
    assert not d.events


def test_paused_rollout_holds_advances_but_timed_gates_age() -> None:
    fleet = Fleet(
        canary_rollout({"capacity": "50%", "pause": {"duration": "5m"}}, {"capacity": "100%"}),
        {"engine": (2, E1), "decoder": (2, D1)},
    )
    fleet.revision.update(engine=E2, decoder=D2)
    fleet.step()
    fleet.step()
    fleet.ann[ANNOTATION_PAUSED] = "true"
    fleet.now += timedelta(minutes=6)
    d = fleet.step()
    assert d.components["engine"].hold is not None
    assert d.components["engine"].hold.gate == "Plan"
    assert d.components["engine"].allowed == 1
    del fleet.ann[ANNOTATION_PAUSED]
    d = fleet.step()
    assert "RolloutStepAdvanced" in fleet.reasons(d)


# ------------------------------------------------------------------------------ blue-green


def test_blue_green_moves_a_quarter_of_each_member_per_step_in_lockstep() -> None:
    fleet = Fleet(
        {"groups": [{"components": ["engine", "decoder"], "blueGreen": {}}]},
        {"engine": (8, E1), "decoder": (3, D1)},
    )
    fleet.revision.update(engine=E2, decoder=D2)
    seen = []
    for _ in range(10):
        d = fleet.step()
        seen.append((d.components["engine"].allowed, d.components["decoder"].allowed))
        if fleet.phase() == "Stable":
            break
    assert seen[:4] == [(2, 1), (4, 2), (6, 3), (8, 3)]
    assert fleet.phase() == "Stable"


def test_no_progression_means_blue_green() -> None:
    fleet = Fleet({"groups": [{"components": ["router"]}]}, {"router": (4, R1)})
    fleet.revision["router"] = R2
    d = fleet.step()
    assert d.components["router"].allowed == 1
    assert fleet.phase() == "Promoting"


def test_sequence_rolls_one_group_at_a_time_with_the_soak_between() -> None:
    fleet = Fleet(
        {
            "groups": [
                {"components": ["engine"], "soak": "3m"},
                {"components": ["decoder"], "soak": "1m"},
            ]
        },
        {"engine": (2, E1), "decoder": (2, D1)},
    )
    fleet.revision.update(engine=E2, decoder=D2)
    d = fleet.step()
    hold = d.components["decoder"].hold
    assert hold is not None and hold.gate == "Sequential"
    assert hold.reason == "Sequential waiting on engine"
    assert d.components["decoder"].allowed == 0
    d = fleet.run_until(lambda d: fleet.phase(0) == "Stable")
    zero = timedelta(0)
    d = fleet.step(wait=zero)
    hold = d.components["decoder"].hold
    assert hold is not None and "soak, 3m left" in hold.reason
    assert d.requeue_after == timedelta(minutes=3)
    fleet.now += timedelta(minutes=2)
    d = fleet.step(wait=zero)
    assert fleet.phase(1) == "Pending"
    fleet.now += timedelta(minutes=1)
    d = fleet.step(wait=zero)
    assert fleet.phase(1) == "Promoting"
    assert d.components["decoder"].allowed == 1


def test_a_held_member_stops_the_group_and_the_sequence() -> None:
    fleet = Fleet(
        {
            "groups": [
                {"components": ["engine", "router"], "blueGreen": {}},
                {"components": ["decoder"]},
            ]
        },
        {"engine": (4, E1), "router": (4, R1), "decoder": (2, D1)},
    )
    fleet.revision.update(engine=E2, router=R2)
    fleet.step()
    fleet.held.add("engine")
    d = fleet.step()
    assert fleet.phase() == "Failed"
    assert fleet.reasons(d) == ["RolloutHeld"]
    for _ in range(3):
        d = fleet.step(wait=timedelta(minutes=1))
        assert d.components["router"].allowed == 1  # the router does not race ahead
        assert d.components["engine"].hold is not None
        assert d.components["engine"].hold.gate == "Held"
    since = d.components["engine"].hold.since
    assert since == T0  # the hold's since survives while it lasts
    fleet.held.clear()
    d = fleet.step()
    assert fleet.phase() == "Promoting"
    assert d.components["router"].allowed == 2


def test_failed_instances_hold_the_group_with_retry_block() -> None:
    fleet = Fleet(
        {"groups": [{"components": ["engine", "decoder"], "blueGreen": {}}]},
        {"engine": (4, E1), "decoder": (4, D1)},
    )
    fleet.revision.update(engine=E2, decoder=D2)
    fleet.step()
    fleet.failed.add("decoder")
    d = fleet.step()
    assert d.components["engine"].allowed == 1
    assert d.components["engine"].hold is not None
    assert d.components["engine"].hold.gate == "RetryBlock"
    assert fleet.phase() == "Promoting"


def test_rolling_update_groups_get_the_group_budgets() -> None:
    fleet = Fleet(
        {
            "groups": [
                {
                    "components": ["engine", "decoder"],
                    "rollingUpdate": {"maxSurge": 2, "maxUnavailable": "50%"},
                }
            ]
        },
        {"engine": (4, E1), "decoder": (6, D1)},
    )
    fleet.revision.update(engine=E2, decoder=D2)
    d = fleet.step()
    cd = d.components["engine"]
    assert cd.rolling_update is not None
    assert (cd.rolling_update.max_surge, cd.rolling_update.max_unavailable) == (2, "50%")
    assert (d.components["engine"].allowed, d.components["decoder"].allowed) == (2, 2)
    d = fleet.run_until(lambda d: fleet.phase() == "Stable")


# ------------------------------------------------------------------------------ gates


def test_maintain_ratio_holds_a_step_that_would_leave_the_tolerance() -> None:
    rollout = {
        "groups": [
            {
                "components": ["engine", "decoder"],
                "blueGreen": {},
                "maintainRatio": {"tolerance": 5},
            }
        ]
    }
    fleet = Fleet(rollout, {"engine": (4, E1), "decoder": (4, D1)}, strategy="RecreatePod")
    fleet.revision.update(engine=E2, decoder=D2)
    d = fleet.step()
    hold = d.components["engine"].hold
    assert hold is not None and hold.gate == "Ratio"
    assert "3:4" in hold.reason
    assert d.components["engine"].allowed == 0
    rollout["groups"][0]["maintainRatio"] = {"tolerance": 35}
    fleet = Fleet(rollout, {"engine": (4, E1), "decoder": (4, D1)}, strategy="RecreatePod")
    fleet.revision.update(engine=E2, decoder=D2)
    d = fleet.step()
    assert d.components["engine"].hold is None
    assert d.components["engine"].allowed == 1
    # surge strategies never dip, so even 0% tolerance lets them go
    rollout["groups"][0]["maintainRatio"] = {"tolerance": 0}
    fleet = Fleet(rollout, {"engine": (4, E1), "decoder": (4, D1)})
    fleet.revision.update(engine=E2, decoder=D2)
    assert fleet.step().components["engine"].allowed == 1


def test_ratio_out_of_band_from_a_fault_holds_until_it_recovers() -> None:
    rollout = {
        "groups": [{"components": ["engine"], "maintainRatio": {}}, {"components": ["decoder"]}]
    }
    fleet = Fleet(rollout, {"engine": (4, E1), "decoder": (4, D1)})
    fleet.revision["engine"] = E2
    fleet.not_ready["decoder"] = {D1: 1}  # a decoder Instance is down: 4:3
    d = fleet.step()
    assert d.components["engine"].hold is not None
    assert d.components["engine"].hold.gate == "Ratio"
    fleet.not_ready["decoder"] = {}
    d = fleet.step()
    assert d.components["engine"].allowed == 1


def test_pairing_gate_keeps_an_old_token_pair_until_a_new_pair_serves() -> None:
    tokens = {E1: "v1", D1: "v1", E2: "v2", D2: "v2"}
    fleet = Fleet(
        canary_rollout({"capacity": "100%"}), {"engine": (2, E1), "decoder": (2, D1)}, tokens=tokens
    )
    fleet.revision.update(engine=E2, decoder=D2)
    d = fleet.step()
    assert {c: cd.allowed for c, cd in d.components.items()} == {"engine": 1, "decoder": 1}
    hold = d.components["engine"].hold
    assert hold is not None and hold.gate == "Pairing"
    assert "v1" in hold.reason and "v2" in hold.reason
    pairing = {t.revision_name: t.pairing_protocol for t in d.components["engine"].traffic}
    assert pairing == {"x-engine-rev-aaaaaaaaaa": "v1", "x-engine-rev-bbbbbbbbbb": "v2"}
    d = fleet.step()  # one v2 pair is ready now
    assert {c: cd.allowed for c, cd in d.components.items()} == {"engine": 2, "decoder": 2}
    assert d.components["engine"].hold is None
    fleet.run_until(lambda d: fleet.phase() == "Stable")


def test_pairing_gate_with_single_instances_needs_a_promote() -> None:
    tokens = {E1: "v1", D1: "v1", E2: "v2", D2: "v2"}
    fleet = Fleet(
        canary_rollout({"capacity": "100%"}), {"engine": (1, E1), "decoder": (1, D1)}, tokens=tokens
    )
    fleet.revision.update(engine=E2, decoder=D2)
    for _ in range(3):
        d = fleet.step(wait=timedelta(minutes=30))
        assert d.components["engine"].allowed == 0
    hold = d.components["engine"].hold
    assert hold is not None and "promote" in hold.reason
    assert fleet.phase() == "Promoting"  # the ready timeout does not run out behind it
    fleet.ann[ANNOTATION_PROMOTE] = "bbbbbb"
    d = fleet.step()
    assert {c: cd.allowed for c, cd in d.components.items()} == {"engine": 1, "decoder": 1}
    assert "RolloutPromoted" in fleet.reasons(d)
    fleet.run_until(lambda d: fleet.phase() == "Stable")


def test_missing_member_holds_with_plan() -> None:
    fleet = Fleet(canary_rollout({"capacity": "100%"}), {"engine": (2, E1)})
    d = fleet.step()
    assert fleet.state is not None
    hold = fleet.state.groups[0].hold
    assert hold is not None and hold.gate == "Plan" and "decoder" in hold.reason
    assert d.components["engine"].hold is not None


def test_a_plan_too_large_to_pin_holds_with_plan() -> None:
    fleet = Fleet(
        canary_rollout({"capacity": "100%"}),
        {"engine": (2, E1), "decoder": (2, D1)},
        config=RolloutConfig(max_pinned_plan_bytes=50),
    )
    fleet.revision.update(engine=E2, decoder=D2)
    d = fleet.step()
    hold = d.components["engine"].hold
    assert hold is not None and hold.gate == "Plan" and "bytes" in hold.reason
    assert d.components["engine"].allowed == 0


def test_components_outside_groups_are_left_alone() -> None:
    fleet = Fleet({"groups": [{"components": ["router"]}]}, {"router": (2, R1), "engine": (2, E1)})
    d = fleet.step()
    assert set(d.components) == {"router"}
    assert d.components["router"].coordination_group_ref == "groups[0]"


def test_traffic_deadband_keeps_small_changes() -> None:
    fleet = Fleet(
        {"groups": [{"components": ["router"]}]},
        {"router": (3, R1)},
        config=RolloutConfig(traffic_deadband=40),
    )
    view = MemberView(
        component="router",
        desired=3,
        revision=R2,
        current_revision=R1,
        instances={R1: 2, R2: 1},
        ready={R1: 2, R2: 1},
    )
    d = decide(fleet.spec, None, {"router": view}, T0, config=fleet.config)
    assert traffic(d, "router") == {"x-router-rev-1111111111": 67, "x-router-rev-2222222222": 33}
    moved = MemberView(
        component="router",
        desired=3,
        revision=R2,
        current_revision=R1,
        instances={R1: 1, R2: 2},
        ready={R1: 1, R2: 2},
        traffic=d.components["router"].traffic,
    )
    d2 = decide(fleet.spec, d.state, {"router": moved}, T0, config=fleet.config)
    assert traffic(d2, "router") == traffic(d, "router")


def test_member_view_from_an_inference_replica() -> None:
    rows = (
        InstanceStatus(
            index=0,
            phase="Ready",
            running_revision=E1,
            target_revision=E1,
            pod_count=1,
            serving_pod_count=1,
        ),
        InstanceStatus(
            index=1,
            phase="Ready",
            running_revision=E2,
            target_revision=E2,
            pod_count=1,
            serving_pod_count=1,
        ),
        InstanceStatus(index=2, phase="Creating", target_revision=E2),
    )
    ir = InferenceReplica(
        metadata=ObjectMeta(name="x-engine"),
        spec=InferenceReplicaSpec(component="engine", replicas=3, pairing_protocol="v2"),
        status=InferenceReplicaStatus(
            instances=rows,
            current_revision=E1,
            update_revision=E2,
            retry_blocks=(RetryBlock(target_revision=E2, state="Held"),),
        ),
    )
    v = member_view(ir, E2)
    assert v.desired == 3 and v.current_revision == E1
    assert v.instances == {E1: 1, E2: 2}
    assert v.ready == {E1: 1, E2: 1}
    assert v.held and not v.failed
    assert v.pairing_token == "v2"


def _surge_replica(step: str, serving: int) -> InferenceReplica:
    """Four single-pod engine Instances: 0 on E1, 1 and 3 on E2, and 2 surging from E1 to
    E2 in its other slot (at ``step``; ``serving`` of its two pods serve)."""
    def ready(i: int, r: str) -> InstanceStatus:
        return InstanceStatus(index=i, phase="Ready", running_revision=r, target_revision=r,
                              pod_count=1, serving_pod_count=1)
    surging = InstanceStatus(
        index=2, phase="Updating", running_revision=E1, target_revision=E2, pod_count=2,
        serving_pod_count=serving,
        operation=InstanceOperation(id="update-1", type="Update", step=step,
                                    target_revision=E2, strategy="SurgeThenDrain"))
    return InferenceReplica(
        metadata=ObjectMeta(name="x-engine"),
        spec=InferenceReplicaSpec(component="engine", replicas=4),
        status=InferenceReplicaStatus(
            instances=(ready(0, E1), ready(1, E2), surging, ready(3, E2)),
            current_revision=E1, update_revision=E2),
    )


def test_a_single_pod_instance_surging_in_its_other_slot_still_serves() -> None:
    # regression: the row counts both pods, so "every pod serving" never held while one
    # pod of the Instance served, and the recorded traffic jumped (33% old, then 0% old
    # while the old pod still served, then back to 25%)
    for step in ("Surge", "SurgeDrain"):
        v = member_view(_surge_replica(step, serving=1), E2)
        assert v.ready == {E1: 2, E2: 2}, step
        assert v.serving == {E1: 2, E2: 2}, step
        assert v.instances == {E1: 2, E2: 2}, step
    # nothing of it serving (the old pod lost its gate before the replacement was up)
    assert member_view(_surge_replica("Surge", serving=0), E2).ready == {E1: 1, E2: 2}
    spec = parse_rollout({"groups": [{"components": ["engine"], "blueGreen": {}}]})
    d = decide(spec, None, {"engine": member_view(_surge_replica("Surge", serving=1), E2)}, T0)
    assert traffic(d, "engine") == {"x-engine-rev-aaaaaaaaaa": 50, "x-engine-rev-bbbbbbbbbb": 50}


# ------------------------------------------------------------------------------ regressions


def test_only_a_change_between_two_tokens_is_paired() -> None:
    # the stable revision has no token (or the shell could not read it)
    fleet = Fleet(
        canary_rollout({"capacity": "100%"}),
        {"engine": (1, E1), "decoder": (1, D1)},
        tokens={E2: "v1", D2: "v1"},
    )
    fleet.revision.update(engine=E2, decoder=D2)
    d = fleet.step()
    assert {c: cd.allowed for c, cd in d.components.items()} == {"engine": 1, "decoder": 1}
    assert d.components["engine"].hold is None


def test_a_sequence_moves_on_after_an_earlier_group_rolled_back() -> None:
    fleet = Fleet(
        {"groups": [{"components": ["engine"]}, {"components": ["decoder"]}]},
        {"engine": (2, E1), "decoder": (2, D1)},
    )
    fleet.revision["engine"] = E2
    fleet.step()
    fleet.ann[ANNOTATION_ROLLBACK] = "true"
    fleet.run_until(lambda d: fleet.phase(0) == "RolledBack")
    fleet.revision["decoder"] = D2
    d = fleet.step()
    assert fleet.phase(1) == "Promoting"
    assert d.components["decoder"].allowed == 1
    assert ANNOTATION_ROLLBACK in d.remove_annotations  # a new revision appeared


def test_a_spent_rollback_does_not_roll_back_a_later_run() -> None:
    fleet = Fleet(
        {"groups": [{"components": ["engine", "decoder"]}, {"components": ["router"]}]},
        {"engine": (2, E1), "decoder": (2, D1), "router": (2, R1)},
    )
    fleet.revision["engine"] = E2
    fleet.step()
    fleet.ann[ANNOTATION_ROLLBACK] = "true"
    fleet.run_until(lambda d: fleet.phase(0) == "RolledBack")
    fleet.ann[ANNOTATION_ROLLBACK] = "true"  # say the user set it again, or it lingered
    fleet.revision["router"] = R2
    d = fleet.step()
    assert fleet.phase(1) == "Promoting"
    assert fleet.phase(0) == "RolledBack"
    d = fleet.step()
    assert fleet.phase(1) in ("Promoting", "Stable")
    assert d.components["engine"].pacing.rollback_to_revision == E1


def test_a_rollback_asked_again_rolls_back_a_run_started_after_an_earlier_one() -> None:
    # Found by the rollout state machine: with the router group still RolledBack from the
    # first rollback, a second request was taken as already acted on, so the new canary
    # was never rolled back and the lingering annotation refused every promote.
    fleet = Fleet(
        {
            "groups": [
                {
                    "components": ["engine", "decoder"],
                    "canary": {"steps": [{"capacity": "50%", "pause": {}}, {"capacity": "100%"}]},
                },
                {"components": ["router"]},
            ]
        },
        {"engine": (2, E1), "decoder": (2, D1), "router": (2, R1)},
    )
    fleet.revision["router"] = R2
    fleet.step()
    fleet.ann[ANNOTATION_ROLLBACK] = "true"
    fleet.run_until(lambda d: fleet.phase(1) == "RolledBack")
    fleet.revision.update(engine=E2, decoder=D2)
    d = fleet.step()
    assert ANNOTATION_ROLLBACK in d.remove_annotations  # a new revision: that rollback is over
    fleet.run_until(lambda d: fleet.phase(0) == "Paused")
    fleet.ann[ANNOTATION_ROLLBACK] = "true"
    d = fleet.step()
    assert fleet.phase(0) == "RollingBack"
    assert "RolloutRollingBack" in fleet.reasons(d)
    assert d.components["engine"].pacing.rollback_to_revision == E1
    assert d.components["decoder"].pacing.rollback_to_revision == D1
    fleet.run_until(lambda d: fleet.phase(0) == "RolledBack")
    assert fleet.phase(1) == "RolledBack"
    assert fleet.on["engine"] == {E1: 2} and fleet.on["decoder"] == {D1: 2}

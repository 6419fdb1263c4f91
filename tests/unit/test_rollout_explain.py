"""explain(): one line naming the gate that holds the rollout and what releases it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from omenative_core.model import RolloutHold
from omenative_core.rollout import (
    AnalysisRound,
    AnalysisState,
    GroupState,
    MemberView,
    RolloutState,
    decide,
    explain,
    explain_decision,
    parse_rollout,
    plan_token,
    rollout_to_json,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
E1, E2 = "x-engine-aaaaaaaaaa", "x-engine-bbbbbbbbbb"
D1, D2 = "x-decoder-cccccccccc", "x-decoder-dddddddddd"
ERR = {"name": "err", "query": "q", "operator": "LT", "threshold": 0.05}
CANARY = {
    "groups": [
        {
            "components": ["engine", "decoder"],
            "canary": {
                "steps": [
                    {"capacity": "50%", "pause": {}},
                    {"capacity": "75%", "pause": {"duration": "10m"}},
                    {"capacity": "100%", "analysis": {"failureLimit": 3, "metrics": [ERR]}},
                ]
            },
        }
    ]
}


def state(rollout: dict[str, Any], *groups: GroupState) -> RolloutState:
    spec = parse_rollout(rollout)
    return RolloutState(plan_token=plan_token(spec), plan=rollout_to_json(spec), groups=groups)


def running(**kw: Any) -> GroupState:
    base: dict[str, Any] = {
        "index": 0,
        "components": ("engine", "decoder"),
        "progression": "canary",
        "stable": {"engine": E1, "decoder": D1},
        "canary": {"engine": E2, "decoder": D2},
    }
    base.update(kw)
    return GroupState(**base)


def test_nothing_to_do() -> None:
    assert explain(None, T0) == "no rollout groups"
    st = state(
        CANARY,
        GroupState(index=0, components=("engine", "decoder"), stable={"engine": E1, "decoder": D1}),
    )
    assert explain(st, T0) == "Stable: every group is on its stable revision"


def test_manual_pause_names_the_promote() -> None:
    st = state(CANARY, running(phase="Paused", step=0, gate="Manual"))
    assert explain(st, T0) == (
        "group 0 (engine+decoder) Paused at step 1/3: manual pause; release with "
        "kubectl ome rollout promote (ome.io/rollout-promote=bbbbbbbbbb)"
    )


def test_timed_pause_counts_down() -> None:
    st = state(CANARY, running(phase="Paused", step=1, gate="Pause", step_ready_at=T0))
    assert explain(st, T0 + timedelta(minutes=3, seconds=20)) == (
        "group 0 (engine+decoder) Paused at step 2/3: timed pause, 6m40s left; releases by "
        "itself (promote does not shorten it)"
    )


def test_analysis_reports_rounds() -> None:
    an = AnalysisState(
        step=2,
        rounds=1,
        failures=1,
        next_at=T0 + timedelta(seconds=45),
        history=(AnalysisRound(round=1, at=T0, outcome="Fail", detail="err=0.2 not LT 0.05"),),
    )
    st = state(CANARY, running(phase="Canarying", step=2, gate="Analysis", analysis=an))
    line = explain(st, T0)
    assert line.startswith(
        "group 0 (engine+decoder) Canarying at step 3/3: analysis, 1/3 "
        "failed rounds; next round in 45s; last round Fail: err=0.2 not LT"
    )
    assert line.endswith("--override-analysis")


def test_holds_name_their_gate_and_release() -> None:
    cases = {
        "Ratio": "raise maintainRatio.tolerance",
        "Pairing": "new-token engine/decoder pair is ready",
        "Held": "ome.io/release-held-revision",
        "RetryBlock": "failed Instances recover",
        "Plan": "resume the rollout",
    }
    for gate, release in cases.items():
        hold = RolloutHold(gate=gate, reason="why", target=E2, since=T0)
        st = state(CANARY, running(phase="Promoting", step=2, gate="Capacity", hold=hold))
        line = explain(st, T0)
        assert f": {gate} gate: why; " in line and release in line, line


def test_stuck_pairing_says_promote_or_scale() -> None:
    hold = RolloutHold(gate="Pairing", reason="...; promote to accept a gap", target=E2)
    st = state(CANARY, running(phase="Promoting", step=2, gate="Capacity", hold=hold))
    assert explain(st, T0).endswith(
        "release with kubectl ome rollout promote (ome.io/rollout-promote=bbbbbbbbbb) or "
        "scale to 2+ Instances"
    )


def test_a_sequence_reads_sequential_waiting_on() -> None:
    seq = {"groups": [{"components": ["engine"]}, {"components": ["decoder"]}]}
    views = {
        "engine": MemberView(
            component="engine",
            desired=4,
            revision=E2,
            current_revision=E1,
            instances={E1: 4},
            ready={E1: 4},
        ),
        "decoder": MemberView(
            component="decoder",
            desired=4,
            revision=D2,
            current_revision=D1,
            instances={D1: 4},
            ready={D1: 4},
        ),
    }
    d = decide(parse_rollout(seq), None, views, T0)
    assert explain_decision(d, T0) == (
        "group 0 (engine) Promoting at batch 1: waiting for the step's Instances to be ready "
        "on the new revision (+1 more group in progress)"
    )
    assert d.components["decoder"].hold is not None
    assert d.components["decoder"].hold.reason == "Sequential waiting on engine"
    only_decoder = {
        **views,
        "engine": MemberView(
            component="engine",
            desired=4,
            revision=E1,
            current_revision=E1,
            instances={E1: 4},
            ready={E1: 4},
        ),
    }
    d = decide(parse_rollout(seq), None, only_decoder, T0)
    assert explain_decision(d, T0).startswith("group 1 (decoder) Promoting at batch 1")


def test_rollback_lines() -> None:
    back = running(phase="RollingBack", canary={}, rejected={"engine": E2, "decoder": D2})
    assert explain(state(CANARY, back), T0) == (
        f"group 0 (engine+decoder) RollingBack: returning to {D1}, {E1}; finishes when every "
        "Instance is back"
    )
    done = running(phase="RolledBack", canary={}, rejected={"engine": E2, "decoder": D2})
    assert explain(state(CANARY, done), T0) == (
        f"group 0 (engine+decoder) RolledBack: {D2}, {E2} rejected; push a new revision to "
        "start again"
    )
    failed = running(phase="Failed", failure="AnalysisFailed", step=2, gate="Analysis")
    assert explain(state(CANARY, failed), T0) == (
        "group 0 (engine+decoder) Failed (AnalysisFailed): rolling back on the next pass"
    )


def test_drift_note() -> None:
    st = state(CANARY, running(phase="Paused", step=0, gate="Manual"))
    line = explain(st, T0, current_token="rp1:ffffffffffff")
    assert line.endswith(
        f"; plan drifted (pinned {st.plan_token}, spec rp1:ffffffffffff): "
        "ome.io/rollout-repin=rp1:ffffffffffff moves the run"
    )

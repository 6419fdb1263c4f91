"""The rollout spec types, their parser, the plan token and the persisted state's codec."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from omenative_core.model import RolloutHold
from omenative_core.rollout import (
    AnalysisRound,
    AnalysisState,
    GroupState,
    RolloutSpecError,
    RolloutState,
    RolloutStateError,
    canary_capacity,
    parse_rollout,
    plan_token,
    rollout_to_json,
    state_from_json,
    state_to_json,
)

SPEC = {
    "groups": [
        {
            "components": ["engine", "decoder"],
            "canary": {
                "steps": [
                    {"capacity": "25%", "traffic": 25, "pause": {}},
                    {"capacity": 3, "pause": {"duration": "90s"}},
                    {
                        "capacity": "100%",
                        "traffic": 100,
                        "analysis": {
                            "interval": "1m",
                            "initialDelay": "30s",
                            "failureLimit": 2,
                            "onInconclusive": "RollbackOnStall",
                            "metrics": [
                                {
                                    "name": "p99",
                                    "query": "histogram_quantile(0.99, x)",
                                    "operator": "LTE",
                                    "threshold": "0.5",
                                }
                            ],
                        },
                    },
                ],
                "prometheus": {"serverAddress": "http://prom:9090", "headers": {"X-A": "b"}},
                "readyTimeout": "20m",
                "scaleDownDelaySeconds": 30,
            },
        },
        {
            "components": ["router"],
            "rollingUpdate": {"maxSurge": 1},
            "maintainRatio": {"tolerance": 10},
        },
    ],
    "pairingProtocol": "nixl-v2",
    "groupOrdering": "Sequential",
}


def test_parse_reads_every_field() -> None:
    spec = parse_rollout(SPEC)
    g0, g1 = spec.groups
    assert g0.progression == "canary" and g1.progression == "rollingUpdate"
    assert g0.canary is not None
    s0, s1, s2 = g0.canary.steps
    assert (s0.gate, s1.gate, s2.gate) == ("Manual", "Pause", "Analysis")
    assert s1.pause is not None and s1.pause.duration == timedelta(seconds=90)
    assert s2.analysis is not None
    assert s2.analysis.metrics[0].threshold == 0.5
    assert s2.analysis.effective_failure_limit == 2
    assert g0.canary.ready_timeout == timedelta(minutes=20)
    assert g0.canary.prometheus is not None
    assert g0.canary.prometheus.headers == {"X-A": "b"}
    assert g1.rolling_update is not None
    assert g1.rolling_update.effective_max_unavailable == "25%"
    assert spec.pairing_protocol == "nixl-v2" and spec.ordering == "Sequential"
    assert parse_rollout(None).groups == ()
    assert (
        parse_rollout({"groups": [{"components": ["router"]}]}).groups[0].progression == "blueGreen"
    )


def test_metric_operators() -> None:
    spec = parse_rollout(SPEC)
    assert spec.groups[0].canary is not None
    analysis = spec.groups[0].canary.steps[2].analysis
    assert analysis is not None
    m = analysis.metrics[0]
    assert m.passes(0.5) and not m.passes(0.51)


def test_parse_errors_name_every_path() -> None:
    with pytest.raises(RolloutSpecError) as info:
        parse_rollout(
            {
                "groups": [
                    {"components": "engine", "soak": "10"},
                    {"components": ["router"], "canary": {"steps": 3}},
                ]
            }
        )
    got = [(p.reason, p.path) for p in info.value.problems]
    assert got == [
        ("InvalidRolloutSpec", "spec.rollout.groups[0].components"),
        ("InvalidDuration", "spec.rollout.groups[0].soak"),
        ("InvalidRolloutSpec", "spec.rollout.groups[1].canary.steps"),
    ]
    assert str(info.value).startswith("spec.rollout.groups[0].components: expected a list")


def test_normal_json_round_trips_and_the_token_ignores_spelling() -> None:
    spec = parse_rollout(SPEC)
    again = parse_rollout(json.loads(json.dumps(rollout_to_json(spec))))
    assert again == spec
    spelled = json.loads(json.dumps(SPEC))
    spelled["groups"][0]["canary"]["steps"][1]["pause"]["duration"] = "1m30s"
    assert plan_token(parse_rollout(spelled)) == plan_token(spec)
    assert plan_token(spec).startswith("rp1:") and len(plan_token(spec)) == 16
    changed = json.loads(json.dumps(SPEC))
    changed["groups"][0]["canary"]["steps"][0]["capacity"] = "10%"
    assert plan_token(parse_rollout(changed)) != plan_token(spec)


@pytest.mark.parametrize(
    ("capacity", "desired", "expect"),
    [
        ("25%", 4, 1),
        ("25%", 5, 2),
        ("1%", 3, 1),
        ("0%", 4, 0),
        (2, 4, 2),
        (9, 4, 4),
        ("100%", 7, 7),
        ("50%", 0, 0),
    ],
)
def test_canary_capacity(capacity: int | str, desired: int, expect: int) -> None:
    assert canary_capacity(capacity, desired) == expect


def test_sequence_and_its_wait() -> None:
    spec = parse_rollout(
        {
            "groups": [
                {"components": ["engine"], "soak": "2m"},
                {"components": ["decoder"], "soak": "5m"},
                {"components": ["router"], "soak": "1m"},
            ]
        }
    )
    assert spec.sequence() == (0, 1, 2)
    assert spec.sequence_wait() == timedelta(minutes=5)  # longest but the last's
    single = parse_rollout({"groups": [{"components": ["engine"]}]})
    assert single.sequence() == ()


def test_state_codec_round_trips() -> None:
    t = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
    state = RolloutState(
        plan_token="rp1:0123456789ab",
        plan=rollout_to_json(parse_rollout(SPEC)),
        groups=(
            GroupState(
                index=0,
                components=("engine", "decoder"),
                progression="canary",
                phase="Canarying",
                step=2,
                step_entered_at=t,
                step_ready_at=t,
                ready_clock=t,
                stable={"engine": "x-engine-aaaaaaaaaa", "decoder": "x-decoder-cccccccccc"},
                canary={"engine": "x-engine-bbbbbbbbbb", "decoder": "x-decoder-dddddddddd"},
                analysis=AnalysisState(
                    step=2,
                    rounds=1,
                    failures=1,
                    next_at=t,
                    pending_round=2,
                    pending_since=t,
                    history=(AnalysisRound(round=1, at=t, outcome="Fail", detail="p99=0.9"),),
                ),
                gate="Analysis",
                hold=RolloutHold(gate="Ratio", reason="r", target="x", since=t),
                pairing_override=1,
            ),
            GroupState(
                index=1,
                components=("router",),
                progression="rollingUpdate",
                phase="RolledBack",
                rejected={"router": "x-router-2222222222"},
                stable={"router": "x-router-1111111111"},
                stable_at=t,
                failure="Rollback",
            ),
        ),
    )
    text = json.dumps(state_to_json(state))
    assert state_from_json(json.loads(text)) == state
    assert state_from_json(None) == RolloutState()
    assert state_to_json(RolloutState()) == {}


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"groups": [{"components": ["engine"], "phase": "Sideways"}]}, "unknown phase"),
        ({"groups": [{"components": ["prefill"]}]}, "unknown component"),
        (
            {"groups": [{"components": ["engine"], "stepEnteredAt": "yesterday"}]},
            "groups[0].stepEnteredAt",
        ),
        ({"groups": "none"}, "expected a list"),
        ({"plan": {"groups": 1}}, "status.rollout.plan.groups"),
    ],
)
def test_state_errors_name_the_path(raw: object, fragment: str) -> None:
    with pytest.raises(RolloutStateError, match=None) as info:
        state_from_json(raw)
    assert fragment in str(info.value)

"""validate_rollout(): every OME rollout admission reason, and the warnings."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from omenative_core.rollout import (
    ANNOTATION_READY_TIMEOUT,
    Rejection,
    budget_problem,
    errors,
    validate_rollout,
    warnings,
)

ALL = {"engine": True, "decoder": True, "router": True}
ERR = {"name": "err", "query": "q", "operator": "LT", "threshold": 0.05}


def canary(
    *steps: dict[str, Any], components: tuple[str, ...] = ("engine", "decoder"), **extra: Any
) -> dict[str, Any]:
    return {"groups": [{"components": list(components), "canary": {"steps": list(steps), **extra}}]}


def reasons(found: list[Rejection]) -> list[str]:
    return [r.reason for r in errors(found)]


def test_a_good_spec_is_admitted() -> None:
    spec = {
        "groups": [
            {
                "components": ["engine", "decoder"],
                "canary": {
                    "steps": [
                        {"capacity": "25%", "traffic": 25, "pause": {}},
                        {"capacity": 2, "traffic": 50, "pause": {"duration": "5m"}},
                        {
                            "capacity": "100%",
                            "traffic": 100,
                            "analysis": {"interval": "1m", "failureLimit": 2, "metrics": [ERR]},
                        },
                    ]
                },
            },
            {"components": ["router"], "rollingUpdate": {"maxSurge": "50%"}},
        ],
        "pairingProtocol": "nixl-v2",
    }
    assert validate_rollout(spec, None, ALL) == []


@pytest.mark.parametrize(
    ("spec", "reason", "path"),
    [
        (
            {"groups": [{"components": ["engine"]}]},
            "CoordinationRequiresOMENative",
            "spec.rollout.groups[0].components[0]",
        ),
        (
            canary({"capacity": "100%"}),
            "CanaryRequiresOMENative",
            "spec.rollout.groups[0].components[0]",
        ),
    ],
)
def test_members_must_declare_omenative(spec: dict[str, Any], reason: str, path: str) -> None:
    found = validate_rollout(spec, None, {"engine": False, "decoder": True})
    assert [(r.reason, r.path) for r in errors(found)] == [(reason, path)]


@pytest.mark.parametrize(
    ("groups", "reason"),
    [
        ([{"components": ["prefill"]}], "InvalidComponentInCoordinationGroup"),
        ([{"components": []}], "InvalidComponentInCoordinationGroup"),
        (
            [{"components": ["engine"]}, {"components": ["engine"]}],
            "DuplicateComponentInCoordinationGroups",
        ),
        ([{"components": ["router", "router"]}], "DuplicateComponentInCoordinationGroups"),
        ([{"components": ["router"], "order": ["router"]}], "OrderNotHonored"),
        ([{"components": ["router"], "policyRef": {"name": "p"}}], "RolloutPolicyRefUnsupported"),
    ],
)
def test_group_membership_reasons(groups: list[dict[str, Any]], reason: str) -> None:
    assert reasons(validate_rollout({"groups": groups}, None, ALL)) == [reason]


def test_policy_ref_with_an_inline_progression_is_accepted() -> None:
    spec = {"groups": [{"components": ["router"], "policyRef": {"name": "p"}, "blueGreen": {}}]}
    assert validate_rollout(spec, None, ALL) == []


def test_orphan_group_names_an_undeclared_component() -> None:
    found = validate_rollout({"groups": [{"components": ["router"]}]}, None, {"engine": True})
    assert reasons(found) == ["OrphanCoordinationGroup"]


def test_soak_only_between_sequence_groups() -> None:
    canary_soak = {
        "groups": [
            {
                "components": ["engine", "decoder"],
                "soak": "1m",
                "canary": {"steps": [{"capacity": "100%"}]},
            }
        ]
    }
    assert reasons(validate_rollout(canary_soak, None, ALL)) == ["SoakNotHonored"]
    alone = {"groups": [{"components": ["router"], "soak": "1m"}]}
    assert reasons(validate_rollout(alone, None, ALL)) == ["SoakNotHonored"]
    last = {"groups": [{"components": ["engine"]}, {"components": ["decoder"], "soak": "5m"}]}
    assert reasons(validate_rollout(last, None, ALL)) == ["SoakNotHonored"]
    fine = {
        "groups": [
            {"components": ["engine"], "soak": "5m"},
            {"components": ["decoder"], "soak": "5m"},
        ]
    }
    assert validate_rollout(fine, None, ALL) == []


def test_group_ordering_must_be_honored() -> None:
    seq = {"groups": [{"components": ["engine"]}, {"components": ["decoder"]}]}
    assert reasons(validate_rollout({**seq, "groupOrdering": "Concurrent"}, None, ALL)) == [
        "GroupOrderingNotHonored"
    ]
    assert validate_rollout({**seq, "groupOrdering": "Sequential"}, None, ALL) == []
    mixed = {
        "groups": [
            {"components": ["engine", "decoder"], "canary": {"steps": [{"capacity": "100%"}]}},
            {"components": ["router"]},
        ],
        "groupOrdering": "Sequential",
    }
    assert reasons(validate_rollout(mixed, None, ALL)) == ["GroupOrderingNotHonored"]
    assert validate_rollout({**mixed, "groupOrdering": None}, None, ALL) == []
    assert reasons(validate_rollout({**seq, "groupOrdering": "Random"}, None, ALL)) == [
        "InvalidRolloutSpec"
    ]


@pytest.mark.parametrize(
    ("budgets", "reason"),
    [
        ({"maxSurge": -1}, "InvalidRollingUpdateInteger"),
        ({"maxSurge": "2"}, "InvalidRollingUpdateInteger"),
        ({"maxUnavailable": "150%"}, "InvalidRollingUpdatePercent"),
        ({"maxUnavailable": "12.5%"}, "InvalidRollingUpdatePercent"),
        ({"maxSurge": "lots"}, "InvalidRollingUpdatePercent"),
        ({"maxSurge": 0, "maxUnavailable": "0%"}, "ZeroBudgetPacingUnstartable"),
    ],
)
def test_rolling_update_budgets(budgets: dict[str, Any], reason: str) -> None:
    spec = {"groups": [{"components": ["router"], "rollingUpdate": budgets}]}
    assert reasons(validate_rollout(spec, None, ALL)) == [reason]


def test_rolling_update_budgets_of_members_change_in_lockstep() -> None:
    spec = {"groups": [{"components": ["engine", "decoder"], "rollingUpdate": {}}]}
    old = {"engine": ("25%", "25%"), "decoder": ("25%", "25%")}
    alone = {"engine": ("50%", "25%"), "decoder": ("25%", "25%")}
    apart = {"engine": ("50%", "25%"), "decoder": ("40%", "25%")}
    together = {"engine": ("50%", "25%"), "decoder": ("50%", "25%")}
    for new, expect in (
        (alone, ["RollingUpdateLockstepViolation"]),
        (apart, ["RollingUpdateLockstepViolation"]),
        (together, []),
    ):
        found = validate_rollout(spec, spec, ALL, component_budgets=new, old_component_budgets=old)
        assert reasons(found) == expect


def test_pairing_protocol_change_needs_a_coordinated_group() -> None:
    old = {
        "groups": [{"components": ["engine"]}, {"components": ["decoder"]}],
        "pairingProtocol": "v1",
    }
    new = {**old, "pairingProtocol": "v2"}
    assert reasons(validate_rollout(new, old, ALL)) == ["PairingProtocolChangeUncoordinated"]
    rolling = {
        "groups": [{"components": ["engine", "decoder"], "rollingUpdate": {}}],
        "pairingProtocol": "v2",
    }
    assert reasons(validate_rollout(rolling, old, ALL)) == ["PairingProtocolChangeUncoordinated"]
    together = {"groups": [{"components": ["engine", "decoder"]}], "pairingProtocol": "v2"}
    assert validate_rollout(together, old, ALL) == []
    # setting a token for the first time is not a change between two tokens
    first = {**old, "pairingProtocol": None}
    assert validate_rollout(new, first, ALL) == []
    bad = {**together, "pairingProtocol": "-v2"}
    assert reasons(validate_rollout(bad, None, ALL)) == ["InvalidRolloutSpec"]


@pytest.mark.parametrize(
    ("steps", "fragment"),
    [
        ([], "at least one step"),
        ([{"capacity": 1}] * 20 + [{"capacity": "100%"}], "at most 20"),
        ([{"capacity": "50%"}], "must be '100%'"),
        ([{"capacity": "3"}, {"capacity": "100%"}], "quoted number"),
        ([{"capacity": "half"}, {"capacity": "100%"}], "neither a count"),
        ([{"capacity": "150%"}, {"capacity": "100%"}], "above 100%"),
        ([{"capacity": "50%"}, {"capacity": "25%"}, {"capacity": "100%"}], "below the previous"),
        (
            [{"capacity": "50%", "traffic": 60}, {"capacity": "100%", "traffic": 50}],
            "never decreases",
        ),
        ([{"capacity": "50%", "traffic": 50}, {"capacity": "100%", "traffic": 90}], "must be 100"),
        ([{"capacity": "50%", "traffic": 50}, {"capacity": "100%"}], "must be 100"),
        (
            [{"capacity": "50%", "traffic": 120}, {"capacity": "100%", "traffic": 100}],
            "outside 0-100",
        ),
    ],
)
def test_canary_invalid(steps: list[dict[str, Any]], fragment: str) -> None:
    found = errors(validate_rollout(canary(*steps), None, ALL))
    assert {r.reason for r in found} == {"CanaryInvalid"}
    assert any(fragment in r.message for r in found), [r.message for r in found]


def test_canary_unit_needs_engine_and_decoder() -> None:
    spec = canary({"capacity": "100%"}, components=("engine",))
    found = validate_rollout(spec, None, ALL)
    assert reasons(found) == ["CanaryInvalid"]
    assert "add decoder" in errors(found)[0].message
    # without a decoder in the service the engine is a unit on its own
    assert validate_rollout(spec, None, {"engine": True}) == []


def test_maintain_ratio_is_rejected_on_canary_groups() -> None:
    spec = canary({"capacity": "100%"})
    spec["groups"][0]["maintainRatio"] = {"tolerance": 5}
    assert reasons(validate_rollout(spec, None, ALL)) == ["CanaryInvalid"]


def test_multiple_canary_groups() -> None:
    spec = {
        "groups": [
            {"components": ["engine", "decoder"], "canary": {"steps": [{"capacity": "100%"}]}},
            {"components": ["router"], "canary": {"steps": [{"capacity": "100%"}]}},
        ]
    }
    assert reasons(validate_rollout(spec, None, ALL)) == ["MultipleCanaryGroups"]


def test_at_most_one_progression_and_three_groups() -> None:
    two = {"groups": [{"components": ["router"], "blueGreen": {}, "rollingUpdate": {}}]}
    assert reasons(validate_rollout(two, None, ALL)) == ["InvalidRolloutSpec"]
    four = {
        "groups": [{"components": [c]} for c in ("engine", "decoder", "router")]
        + [{"components": ["engine"]}]
    }
    assert "InvalidRolloutSpec" in reasons(validate_rollout(four, None, ALL))


@pytest.mark.parametrize(
    "where",
    ["soak", "pause", "interval", "initialDelay", "readyTimeout"],
)
def test_invalid_durations(where: str) -> None:
    step: dict[str, Any] = {"capacity": "100%"}
    extra: dict[str, Any] = {}
    if where == "pause":
        step["pause"] = {"duration": "5 minutes"}
    elif where in ("interval", "initialDelay"):
        step["analysis"] = {"metrics": [ERR], where: "90"}
    elif where == "readyTimeout":
        extra["readyTimeout"] = "soon"
    spec = canary(step, **extra)
    if where == "soak":
        spec = {"groups": [{"components": ["engine"], "soak": "1d"}, {"components": ["decoder"]}]}
    found = validate_rollout(spec, None, ALL)
    assert reasons(found) == ["InvalidDuration"]
    assert "expected" in found[0].message


def test_invalid_ready_timeout_annotation() -> None:
    found = validate_rollout(
        canary({"capacity": "100%"}), None, ALL, annotations={ANNOTATION_READY_TIMEOUT: "fast"}
    )
    assert [(r.reason, r.path) for r in found] == [
        ("InvalidDuration", f"metadata.annotations[{ANNOTATION_READY_TIMEOUT}]")
    ]


@pytest.mark.parametrize(
    ("analysis", "fragment"),
    [
        ({"failureLimit": 0, "metrics": [ERR]}, "at least 1"),
        ({"metrics": []}, "1 to 10"),
        ({"metrics": [{**ERR, "name": f"m{i}"} for i in range(11)]}, "1 to 10"),
        ({"metrics": [{**ERR, "operator": "EQ"}]}, "operator 'EQ'"),
        ({"metrics": [ERR, ERR]}, "repeated"),
        ({"metrics": [{**ERR, "query": " "}]}, "needs a query"),
        ({"metrics": [{**ERR, "threshold": "high"}]}, "not a number"),
        ({"onInconclusive": "Shrug", "metrics": [ERR]}, "onInconclusive"),
    ],
)
def test_analysis_invalid(analysis: dict[str, Any], fragment: str) -> None:
    found = errors(validate_rollout(canary({"capacity": "100%", "analysis": analysis}), None, ALL))
    assert {r.reason for r in found} == {"AnalysisInvalid"}
    assert any(fragment in r.message for r in found), [r.message for r in found]


def test_warnings_admit() -> None:
    high = {"groups": [{"components": ["engine", "decoder"], "maintainRatio": {"tolerance": 60}}]}
    found = validate_rollout(high, None, ALL)
    assert errors(found) == []
    assert [r.reason for r in warnings(found)] == ["RatioToleranceTooHigh"]
    out_of_range = {"groups": [{"components": ["router"], "maintainRatio": {"tolerance": 101}}]}
    assert reasons(validate_rollout(out_of_range, None, ALL)) == ["InvalidRolloutSpec"]
    short = canary({"capacity": "100%"}, readyTimeout="30s")
    assert [r.reason for r in warnings(validate_rollout(short, None, ALL))] == [
        "RolloutTimeoutTooShort"
    ]
    below = canary({"capacity": "100%"}, readyTimeout="10m")
    found = validate_rollout(below, None, ALL, instance_ready_timeout=timedelta(minutes=30))
    assert [r.reason for r in warnings(found)] == ["RolloutTimeoutTooShort"]
    # the annotation wins over the field
    found = validate_rollout(
        below,
        None,
        ALL,
        instance_ready_timeout=timedelta(minutes=30),
        annotations={ANNOTATION_READY_TIMEOUT: "1h"},
    )
    assert found == []


def test_wrong_json_shapes_are_invalid_rollout_spec() -> None:
    found = validate_rollout({"groups": {"components": ["engine"]}}, None, ALL)
    assert [(r.reason, r.path) for r in found] == [("InvalidRolloutSpec", "spec.rollout.groups")]
    found = validate_rollout({"groups": [{"components": "engine"}]}, None, ALL)
    assert found[0].path == "spec.rollout.groups[0].components"


def test_every_problem_is_reported_at_once() -> None:
    spec = {
        "groups": [
            {
                "components": ["engine"],
                "order": ["engine"],
                "soak": "1m",
                "canary": {"steps": [{"capacity": "50%"}]},
            },
            {"components": ["router"], "canary": {"steps": [{"capacity": "100%"}]}},
        ]
    }
    got = set(reasons(validate_rollout(spec, None, {"engine": True, "router": False})))
    assert got == {
        "OrderNotHonored",
        "CanaryInvalid",
        "MultipleCanaryGroups",
        "SoakNotHonored",
        "CanaryRequiresOMENative",
    }


def test_fields_omenative_does_not_implement_are_admitted_with_a_warning() -> None:
    delayed = canary({"capacity": "100%"}, scaleDownDelaySeconds=30)
    found = validate_rollout(delayed, None, ALL)
    assert errors(found) == []
    assert [(r.reason, r.path) for r in warnings(found)] == [
        ("FieldIgnored", "spec.rollout.groups[0].canary.scaleDownDelaySeconds")
    ]
    provider = canary({"capacity": "100%"}, prometheus={"providerRef": {"name": "prom"}})
    (warned,) = warnings(validate_rollout(provider, None, ALL))
    assert warned.reason == "FieldIgnored" and "set serverAddress" in warned.message
    # with a serverAddress the reference is not needed: nothing to warn about
    both = canary({"capacity": "100%"}, prometheus={"providerRef": {"name": "prom"},
                                                    "serverAddress": "http://prom:9090"})
    assert validate_rollout(both, None, ALL) == []


@pytest.mark.parametrize("budgets", [{"maxSurge": "150%"}, {"maxUnavailable": "lots"}])
def test_a_group_budget_message_names_the_field_and_the_rule(budgets: dict[str, Any]) -> None:
    spec = {"groups": [{"components": ["router"], "rollingUpdate": budgets}]}
    (found,) = errors(validate_rollout(spec, None, ALL))
    (key,) = budgets
    assert found.path == f"spec.rollout.groups[0].rollingUpdate.{key}"
    assert found.message.startswith(f"{key} is ")
    assert "a count >= 0 such as 1, or a whole percentage from 0% to 100% such as '25%'" in (
        found.message
    )


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, None),
        (0, None),
        ("100%", None),
        (" 25% ", None),
        (-1, "InvalidRollingUpdateInteger"),
        ("101%", "InvalidRollingUpdatePercent"),
        ("-3", "InvalidRollingUpdateInteger"),
        (True, "InvalidRollingUpdatePercent"),
        (2.5, "InvalidRollingUpdatePercent"),
        ([1], "InvalidRollingUpdatePercent"),
    ],
)
def test_budget_problem_is_the_one_rule_for_every_budget(value: object, reason: str | None) -> None:
    found = budget_problem(value, "spec.x.maxSurge")
    assert (found[0] if found else None) == reason
    if found:
        assert found[1].startswith("spec.x.maxSurge is ")

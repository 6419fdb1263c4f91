"""A simulated InferenceService: the real planner per component plus the rollout decisions,
on one shared cluster (``omenative simulate`` with a ``service`` scenario)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from omenative_sim.scenario import ScenarioError, load_yaml
from omenative_sim.service import parse_service_scenario, run_service_scenario

CANARY = Path(__file__).resolve().parents[2] / "examples" / "service-canary.yaml"


def _raw() -> dict[str, Any]:
    raw = load_yaml(CANARY.read_text())
    assert isinstance(raw, dict)
    return copy.deepcopy(raw)


def _new_count(row: dict[str, Any], old: str) -> int:
    return sum(n for h, n in row["revisions"].items() if h != old)


def test_canary_holds_its_step_until_promoted_then_finishes_on_the_new_revision() -> None:
    result = run_service_scenario(parse_service_scenario(_raw()))
    first = result.timeline[0]["components"]
    olds = {c: next(iter(first[c]["revisions"])) for c in ("engine", "decoder")}
    before_promote = [s for s in result.timeline if s["t"] < 600]
    after = [s for s in result.timeline if s["t"] >= 600]
    # step 1 is 25% of 4 = 1 Instance of each member on the canary, until the promote at 10m
    assert max(_new_count(s["components"]["engine"], olds["engine"])
               for s in before_promote) == 1
    assert all(_new_count(s["components"][c], olds[c]) <= 1
               for s in before_promote for c in ("engine", "decoder"))
    paused = [s for s in before_promote if "Paused at step 1/2" in s.get("rollout", "")]
    assert paused, "the manual pause was never reached"
    # engine and decoder move together: never more than one Instance apart on the canary
    for s in result.timeline:
        e, d = (_new_count(s["components"][c], olds[c]) for c in ("engine", "decoder"))
        assert abs(e - d) <= 1, s
    assert any(_new_count(s["components"]["engine"], olds["engine"]) > 1 for s in after)
    assert result.converged
    assert all(olds[c] not in row["revisions"] for c, row in result.final.items())
    assert result.min_serving == {"engine": 4, "decoder": 4}
    assert result.rollout.startswith("Stable")
    assert any("RolloutPromoted" in m for _, _, m in result.events)


def test_rollback_returns_every_member_to_the_stable_revision() -> None:
    raw = _raw()
    raw["events"][1] = {"at": "10m", "rollback": True}
    result = run_service_scenario(parse_service_scenario(raw))
    olds = {c: next(iter(r["revisions"])) for c, r in result.timeline[0]["components"].items()}
    for comp, row in result.final.items():
        assert row["revisions"] == {olds[comp]: 4}, (comp, row)
        assert row["serving"] == 4
    assert "RolledBack" in result.rollout or "rolled back" in result.rollout.lower(), \
        result.rollout
    assert result.min_serving == {"engine": 4, "decoder": 4}


def test_components_compete_for_one_clusters_gpus() -> None:
    raw = _raw()
    # 8 Instances x 2 GPUs fill 4 nodes x 4 GPUs: the canary's surge pods cannot be placed,
    # so the canary never gets ready, times out (readyTimeout, 15m by default) and rolls back
    raw["cluster"]["nodes"] = 4
    result = run_service_scenario(parse_service_scenario(raw))
    olds = {c: next(iter(r["revisions"])) for c, r in result.timeline[0]["components"].items()}
    assert all(sum(r["gpus"] for r in s["components"].values()) <= 16 for s in result.timeline)
    assert max(sum(r["pods"] for r in s["components"].values()) for s in result.timeline) > 8
    assert all(r["revisions"] == {olds[c]: 4} for c, r in result.final.items())
    assert result.min_serving == {"engine": 4, "decoder": 4}
    assert "RolledBack" in result.rollout, result.rollout


def test_without_a_rollout_each_component_rolls_on_its_own() -> None:
    raw = _raw()
    del raw["service"]["spec"]["rollout"]
    raw["events"] = raw["events"][:1]
    result = run_service_scenario(parse_service_scenario(raw))
    assert result.converged and result.rollout == ""
    old = next(iter(result.timeline[0]["components"]["engine"]["revisions"]))
    assert all(old not in r["revisions"] for r in result.final.values())


@pytest.mark.parametrize(("edit", "fragment"), [
    (lambda r: r["service"]["spec"].update(deploymentMode="RawDeployment"),
     "no OMENative component to simulate"),
    (lambda r: r["events"].append({"at": "1m", "failNode": "node-1"}),
     "events[2].failNode: unknown key"),
    (lambda r: r["service"]["spec"]["rollout"]["groups"][0]["canary"]["steps"].pop(),
     "service.spec.rollout: "),
    (lambda r: r.pop("cluster"), "cluster: required"),
])
def test_bad_service_scenarios_name_what_is_wrong(edit: Any, fragment: str) -> None:
    raw = _raw()
    edit(raw)
    with pytest.raises(ScenarioError) as err:
        parse_service_scenario(raw)
    assert fragment in str(err.value)


def test_same_input_same_run() -> None:
    a = run_service_scenario(parse_service_scenario(_raw())).to_json()
    b = run_service_scenario(parse_service_scenario(_raw())).to_json()
    assert a == b

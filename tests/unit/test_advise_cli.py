"""``omenative advise``: the example's moves place the pending gang without a serving dip;
bad scenarios exit 2 naming the key; unhealthy nodes are emptied."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from omenative_sim.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "advisor-fragmented.yaml"


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["advise", *args])
    return result.exit_code, result.stdout, result.stderr


def _json(path: Path | str) -> dict[str, Any]:
    code, out, err = _run(str(path), "--json")
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


def test_example_places_the_gang_with_two_moves_and_no_serving_dip() -> None:
    data = _json(EXAMPLE)
    assert data["pendingBefore"] == ["default/big[0]"]
    assert data["placed"] == ["default/big[0]"]
    assert data["pendingAfter"] == []
    moves = data["moves"]
    assert len(moves) == 2
    assert all(m["phase"] == "Completed" for m in moves)
    # each moved Instance ends on the node the advisor hinted at
    assert all(m["toNodes"] == m["recommendation"]["targetNodes"] for m in moves)
    replicas = data["replicas"]
    for name in ("small-0", "small-1", "small-2", "small-3"):
        assert replicas[name]["lowestServing"] == replicas[name]["desired"] == 1, name
    assert replicas["big"]["servingAfter"] == 1


def test_example_fragmentation_before_and_after() -> None:
    data = _json(EXAMPLE)
    [before] = data["before"]["domains"]
    assert before["freeGpus"] == 16
    assert before["freeOnWholeNodes"] == 0
    assert before["fragmentation"] == 1.0
    assert data["after"]["recommendations"] == []


def test_readable_report_shows_before_moves_after_and_the_floor() -> None:
    code, out, err = _run(str(EXAMPLE))
    assert code == 0, err
    assert "before:" in out and "after:" in out
    assert "pending gang default/big[0]: placed" in out
    assert "small-0: desired 1, serving 1 -> 1, lowest during the moves 1 (never below " \
           "desired)" in out
    assert out.count(": Completed, now on node-") == 2


def test_same_seed_same_result() -> None:
    assert _json(EXAMPLE) == _json(EXAMPLE)


def _single(name: str, gpus: int, start_on: list[str] | None = None) -> dict[str, Any]:
    container = {"name": "ome-container", "image": "example.com/llm:1",
                 "resources": {"limits": {"nvidia.com/gpu": gpus}}}
    item: dict[str, Any] = {"replica": {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"component": "engine", "replicas": 1, "runners": [
            {"name": "default", "size": 1, "template": {"spec": {"containers": [container]}}}]},
    }}
    if start_on is not None:
        item["startOn"] = start_on
    return item


def _write(tmp_path: Path, scenario: dict[str, Any]) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(scenario))  # JSON is YAML
    return path


def test_unhealthy_node_is_emptied_replacement_first(tmp_path: Path) -> None:
    scenario = {
        "cluster": {"nodes": 3, "gpusPerNode": 8},
        "unhealthyNodes": ["node-0"],
        "replicas": [_single("a", 4, ["node-0"]), _single("b", 4, ["node-1"])],
    }
    data = _json(_write(tmp_path, scenario))
    assert data["podsOnUnhealthyNodesAfter"] == {"node-0": 0}
    [move] = data["moves"]
    assert move["recommendation"]["reason"] == "UnhealthyNode"
    assert move["phase"] == "Completed"
    assert "node-0" not in move["toNodes"]
    assert data["replicas"]["a"]["lowestServing"] == 1


def test_nothing_to_do_reports_no_moves(tmp_path: Path) -> None:
    scenario = {"cluster": {"nodes": 2}, "replicas": [_single("a", 4)]}
    code, out, err = _run(str(_write(tmp_path, scenario)))
    assert code == 0, err
    assert "(none)" in out
    assert "a: desired 1, serving 1 -> 1" in out


def test_bad_scenarios_exit_2_naming_the_key(tmp_path: Path) -> None:
    cases = [
        ({"cluster": {"nodes": 2}, "replicas": []}, "replicas: expected a non-empty list"),
        ({"cluster": {"nodes": 2}, "replicas": [_single("a", 4, ["node-9"])]},
         "replicas[0].startOn[0]: no node 'node-9'"),
        ({"cluster": {"nodes": 2}, "unhealthyNodes": ["gpu-1"],
          "replicas": [_single("a", 4)]}, "unhealthyNodes[0]: no node 'gpu-1'"),
        ({"cluster": {"nodes": 2}, "replicas": [_single("a", 4), _single("a", 4)]},
         "replicas[1].replica.metadata.name: 'a' is used twice"),
        ({"replicas": [_single("a", 4)]}, "cluster: required"),
        ({"cluster": {"nodes": 2}, "replicas": [_single("a", 4)], "moves": 3},
         "moves: unknown key"),
    ]
    for scenario, message in cases:
        code, out, err = _run(str(_write(tmp_path, scenario)))
        assert code == 2, (scenario, out)
        assert err.startswith("error: ") and message in err, (message, err)


def test_simulate_points_an_advise_scenario_to_advise() -> None:
    result = CliRunner().invoke(main, ["simulate", str(EXAMPLE)])
    assert result.exit_code == 2
    assert "run it with `omenative advise`" in result.stderr

"""``omenative simulate``: every example runs, bad scenarios exit 2 naming the key, seeds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("omenative_core.planner")

from omenative_sim.advise import is_advise_scenario
from omenative_sim.cli import main
from omenative_sim.scenario import load_yaml
from omenative_sim.service import is_service_scenario

ALL_EXAMPLES = [  # advise scenarios run under ``omenative advise`` (test_advise_cli.py)
    p for p in sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))
    if not is_advise_scenario(load_yaml(p.read_text()))
]
SERVICE_EXAMPLES = [p for p in ALL_EXAMPLES if is_service_scenario(load_yaml(p.read_text()))]
EXAMPLES = [p for p in ALL_EXAMPLES if p not in SERVICE_EXAMPLES]
REQUIRED = {"timeline", "converged", "convergedAtSeconds", "summary", "final"}
SAMPLE_KEYS = {
    "t",
    "replicas",
    "readyReplicas",
    "servingReplicas",
    "updatedReplicas",
    "pods",
    "gpusInUse",
    "desiredReplicas",
    "surgeCeiling",
}


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["simulate", *args])
    return result.exit_code, result.stdout, result.stderr


def test_there_are_examples() -> None:
    names = {p.name for p in EXAMPLES}
    assert {"engine-gang.yaml", "router-single.yaml", "worker-crash.yaml"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_runs_with_json(path: Path) -> None:
    code, out, err = _run(str(path), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert set(data) >= REQUIRED
    timeline = data["timeline"]
    assert timeline[0]["t"] == 0
    assert timeline[-1]["t"] == data["untilSeconds"]
    assert all(set(s) == SAMPLE_KEYS for s in timeline)
    assert [s["t"] for s in timeline] == sorted({s["t"] for s in timeline})
    summary = data["summary"]
    assert {"peakPods", "peakGpus", "minServingReplicas", "rollouts"} <= set(summary)
    assert summary["peakPods"] == max(s["pods"] for s in timeline)
    if data["converged"]:
        assert isinstance(data["convergedAtSeconds"], int | float)
        assert "stall" not in data
    else:
        assert data["convergedAtSeconds"] is None
        assert {"gate", "reason"} <= set(data["stall"])
    assert isinstance(data["final"], dict) and "replicas" in data["final"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_prints_a_timeline(path: Path) -> None:
    code, out, err = _run(str(path))
    assert code == 0, err
    assert "t=     0s  replicas" in out
    assert "converged:" in out and "peak:" in out


def test_the_three_core_examples_converge() -> None:
    for name in ("engine-gang.yaml", "router-single.yaml", "worker-crash.yaml"):
        code, out, _ = _run(str(next(p for p in EXAMPLES if p.name == name)), "--json")
        data = json.loads(out)
        assert code == 0 and data["converged"], (name, data.get("stall"))
    gang = json.loads(
        _run(str(next(p for p in EXAMPLES if p.name == "engine-gang.yaml")), "--json")[1]
    )
    (rollout,) = gang["summary"]["rollouts"]
    assert rollout["durationSeconds"] is not None
    assert gang["summary"]["minServingReplicas"] == 2  # surge then drain: never below desired
    assert gang["summary"]["peakGpus"] > gang["timeline"][0]["gpusInUse"]


def test_a_restarted_gang_converges_when_it_is_ready_again() -> None:
    # the restart series ends 10 min after the gang is Ready with a status-only write:
    # bookkeeping, not activity, so convergence is when the gang served again
    data = json.loads(
        _run(str(next(p for p in EXAMPLES if p.name == "worker-crash.yaml")), "--json")[1]
    )
    back = next(s["t"] for s in data["timeline"] if s["t"] > 300 and s["servingReplicas"] == 1)
    assert data["converged"] and data["convergedAtSeconds"] == back
    assert back < 300 + 600  # well before the series' 10-minute reset


def test_bad_scenario_exits_2_naming_the_key(tmp_path: Path) -> None:
    text = (next(p for p in EXAMPLES if p.name == "worker-crash.yaml")).read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("runner: worker", "runner: 7"))
    code, out, err = _run(str(bad), "--json")
    assert code == 2 and out == ""
    assert err.startswith("error: events[0].failPod.runner: expected a string")
    bad.write_text(text.replace("podStartSeconds", "podStartSecs"))
    code, _, err = _run(str(bad))
    assert code == 2 and "cluster.podStartSecs: unknown key" in err
    bad.write_text(text + "\nlifecycle: {updateRetry: {maxAttempts: 0}}\n")
    code, _, err = _run(str(bad))
    assert code == 2 and "lifecycle.updateRetry.maxAttempts" in err


def test_event_naming_a_missing_pod_exits_2(tmp_path: Path) -> None:
    text = (next(p for p in EXAMPLES if p.name == "worker-crash.yaml")).read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("{instance: 0, runner: worker, ordinal: 1}", "{instance: 5}"))
    code, _, err = _run(str(bad))
    assert code == 2 and "events[0].failPod: no pod of instance 5" in err


def test_same_seed_same_output() -> None:
    path = str(next(p for p in EXAMPLES if p.name == "engine-gang.yaml"))
    first = _run(path, "--json", "--seed", "7")
    second = _run(path, "--json", "--seed", "7")
    assert first == second and first[0] == 0
    assert json.loads(first[1])["seed"] == 7


@pytest.mark.parametrize("path", SERVICE_EXAMPLES, ids=lambda p: p.name)
def test_every_service_example_reports_each_component(path: Path) -> None:
    code, out, err = _run(str(path), "--json")
    assert code == 0, err
    data = json.loads(out)
    components = set(data["final"])
    assert len(components) >= 2
    assert all(set(s["components"]) == components for s in data["timeline"])
    code, text, err = _run(str(path))
    assert code == 0, err
    first = next(line for line in text.splitlines() if line.startswith("t=     0s"))
    assert all(f"{c} " in first for c in components), first
    assert "converged:" in text


def test_a_service_scenario_with_a_bad_event_is_a_clear_error(tmp_path: Path) -> None:
    path = SERVICE_EXAMPLES[0]
    bad = tmp_path / "bad.yaml"
    bad.write_text(path.read_text().replace("promote: true", "promote: {now: true}"))
    code, _, err = _run(str(bad))
    assert code == 2
    assert err.startswith("error: events[1].promote.now: unknown key"), err

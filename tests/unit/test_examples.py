"""The bundled scenarios behave as their descriptions promise (``omenative simulate --json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from omenative_sim.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _simulate(name: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["simulate", str(EXAMPLES / name), "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.output)
    return data


def test_surge_then_drain_with_room_never_serves_below_desired() -> None:
    for name, desired in (("engine-gang.yaml", 2), ("gang8-one-spare.yaml", 3)):
        data = _simulate(name)
        assert data["converged"] is True, name
        assert min(s["servingReplicas"] for s in data["timeline"]) >= desired, name
        assert data["summary"]["rollouts"][0]["durationSeconds"] is not None


def test_eight_node_gangs_fit_in_one_spare_gang() -> None:
    data = _simulate("gang8-one-spare.yaml")
    # 3 gangs of 8 pods x 8 GPUs, one replacement gang at a time: peak is 4 gangs
    assert data["summary"]["peakPods"] == 32
    assert data["summary"]["peakGpus"] == 256


def test_bad_image_ends_held_with_the_old_revision_serving() -> None:
    data = _simulate("bad-image.yaml")
    assert data["converged"] is False
    assert data["stall"]["gate"] == "Held"
    final = data["final"]
    assert final["servingReplicas"] == 2
    assert final["currentRevision"] != final["updateRevision"]
    held = [b for b in final["retryBlocks"] if b["state"] == "Held"]
    assert [b["targetRevision"] for b in held] == [final["updateRevision"]]


def test_migration_moves_the_instance_and_completes() -> None:
    data = _simulate("migrate.yaml")
    assert data["converged"] is True
    (migration,) = data["final"]["migrations"]
    assert migration["phase"] == "Completed" and migration["succeeded"] is True
    assert min(s["servingReplicas"] for s in data["timeline"]) >= 2


def test_recreate_pod_needs_no_spare_capacity_and_dips_by_the_budget() -> None:
    data = _simulate("recreate-pod.yaml")
    assert data["converged"] is True
    assert data["summary"]["peakPods"] == 4
    assert data["summary"]["minServingReplicas"] == 1

"""The simulator and the shell write the same member InferenceReplicas for an ISVC pass.

Both call ``omenative_core.service.rollout_writes``; these tests check that the simulator's
plumbing around it ends with the replica spec the shell would apply (the render plus the
decision's pacing), including when ``spec.rollout`` is removed mid-run: the shell's
server-side apply then drops the pacing, and so does the simulator.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from omenative_core.rollout import parse_rollout
from omenative_core.service import (
    ServiceConfig,
    isvc_from_json,
    render_service,
    runtime_from_json,
)
from omenative_core.service.rollout_pass import RolloutPass
from omenative_sim.scenario import load_yaml
from omenative_sim.service import ServiceWorld, parse_service_scenario

CANARY = Path(__file__).resolve().parents[2] / "examples" / "service-canary.yaml"
NEW_IMAGE = {
    "spec": {
        "engine": {"runner": {"image": "registry.example.com/sglang:0.4.1"}},
        "decoder": {"runner": {"image": "registry.example.com/sglang:0.4.1"}},
    }
}


def _world() -> ServiceWorld:
    raw = load_yaml(CANARY.read_text())
    assert isinstance(raw, dict)
    sc = parse_service_scenario(copy.deepcopy(raw))
    return ServiceWorld(sc.cluster, dict(sc.service), sc.runtimes, sc.lifecycle)


def _run_until(sw: ServiceWorld, end: float) -> None:
    sw.settle()
    while (nxt := sw.next_time()) is not None and nxt <= end:
        sw.advance(max(nxt, sw.now))
        sw.settle()
    sw.advance(max(end, sw.now))
    sw.settle()


def _shell_spec(sw: ServiceWorld, component: str) -> dict[str, Any]:
    """The spec the shell's ISVC pass would apply for ``component`` now."""
    isvc = isvc_from_json(sw.service)
    rendered = render_service(
        isvc, [runtime_from_json(r) for r in sw.runtimes], (), ServiceConfig(lifecycle=sw.config)
    )
    cp = rendered.component(component)
    assert cp is not None and cp.replica is not None
    body = {k: v for k, v in cp.replica.items() if k != "status"}
    raw_rollout = (sw.service.get("spec") or {}).get("rollout")
    if raw_rollout is None or sw.last_decision is None:
        return dict(body["spec"])  # no rollout groups: the render, nothing added
    rp = RolloutPass(spec=parse_rollout(raw_rollout), decision=sw.last_decision, members={})
    return dict(rp.replica_body(component, body)["spec"])


def test_mid_canary_the_simulated_replicas_carry_the_shells_pacing() -> None:
    sw = _world()
    _run_until(sw, 120.0)
    sw.patch_service(NEW_IMAGE)
    _run_until(sw, 400.0)  # the canary's first step, held at its manual pause
    assert sw.rollout_state is not None
    assert "Paused" in sw.rollout_line()
    for component in ("engine", "decoder"):
        live = sw.worlds[component].manifest["spec"]
        assert live == _shell_spec(sw, component), component
        # 3 of 4 Instances held back on the stable revision
        assert live["pacing"] == {"partition": 3}


def test_removing_the_rollout_mid_run_drops_the_partition_as_the_shell_does() -> None:
    sw = _world()
    _run_until(sw, 120.0)
    sw.patch_service(NEW_IMAGE)
    _run_until(sw, 400.0)
    assert sw.worlds["engine"].manifest["spec"]["pacing"] == {"partition": 3}
    sw.patch_service({"spec": {"rollout": None}})
    sw.settle()
    for component in ("engine", "decoder"):
        live = sw.worlds[component].manifest["spec"]
        assert "pacing" not in live, component
        assert live == _shell_spec(sw, component), component
    # nothing holds the members back any more: both finish on the new revision by themselves
    _run_until(sw, 3600.0)
    for component in ("engine", "decoder"):
        row = sw.component_row(component)
        assert len(row["revisions"]) == 1 and row["ready"] == 4, (component, row)

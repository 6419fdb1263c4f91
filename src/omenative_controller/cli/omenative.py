"""``omenative``: the user's tool. ``omenative simulate SCENARIO.yaml`` previews a rollout.

The simulation itself is pure (``omenative_core.sim``); this module only reads the file,
prints, and maps a bad scenario to exit status 2 with ``error: <key path>: <what>``.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from typing import Any

import click

from omenative_core.model.timefmt import format_duration
from omenative_core.sim import ScenarioError, SimResult, parse_scenario, run_scenario

__all__ = ["format_result", "main", "simulate"]

EXIT_BAD_SCENARIO = 2


@click.group()
def main() -> None:
    """OMENative: Instance lifecycle tools."""


def _dur(seconds: float | int | None) -> str:
    if seconds is None:
        return "-"
    return format_duration(timedelta(seconds=float(seconds)))


def _t(seconds: float | int) -> str:
    text = f"{seconds:g}" if isinstance(seconds, float) else str(seconds)
    return f"t={text:>6}s"


def _event_line(ev: dict[str, Any]) -> str:
    instance = "" if ev.get("instance") is None else f" [instance {ev['instance']}]"
    if ev.get("source") == "scenario":
        return f"  >> {ev['reason']}{instance}: {ev['message']}"
    return f"  -- {ev['type']} {ev['reason']}{instance}: {ev['message']}"


def format_result(result: SimResult, *, title: str = "") -> str:
    """The readable timeline: one line per sample with the events in between, a summary."""
    data = result.to_json()
    lines: list[str] = []
    if title:
        lines.append(title)
    if result.description:
        lines.append(result.description.strip())
    if lines:
        lines.append("")
    samples = {s["t"]: s for s in data["timeline"]}
    by_time: dict[float, list[dict[str, Any]]] = {}
    for ev in data["events"]:
        by_time.setdefault(ev["t"], []).append(ev)
    pad = " " * len(_t(0))
    for t in sorted({*samples, *by_time}):
        sample = samples.get(t)
        events = by_time.get(t, [])
        if sample is not None:
            lines.append(
                f"{_t(t)}  replicas {sample['replicas']}  ready {sample['readyReplicas']}  "
                f"serving {sample['servingReplicas']}  updated {sample['updatedReplicas']}  "
                f"pods {sample['pods']}  gpus {sample['gpusInUse']}"
            )
        for i, ev in enumerate(events):
            prefix = _t(t) if sample is None and i == 0 else pad
            lines.append(f"{prefix}{_event_line(ev)}")
    summary = data["summary"]
    lines.append("")
    if data["converged"]:
        at = data["convergedAtSeconds"]
        lines.append(f"converged: yes, at {at}s ({_dur(at)})")
    else:
        stall = data.get("stall") or {}
        why = f"{stall.get('gate', '?')}: {stall.get('reason', '')}"
        if stall.get("message"):
            why += f" ({stall['message']})"
        lines.append(f"converged: no, by {data['untilSeconds']}s; stalled at {why}")
    lines.append(
        f"peak: {summary['peakPods']} pods, {summary['peakGpus']} GPUs in use "
        f"(desired {summary['desiredReplicas']} Instances)"
    )
    min_serving = summary["minServingReplicas"]
    lines.append(
        "lowest serving after all desired Instances first served: "
        + ("never all served" if min_serving is None else str(min_serving))
    )
    for r in summary["rollouts"]:
        src = r["fromRevision"] or "(nothing)"
        if r["durationSeconds"] is not None:
            how = f"took {_dur(r['durationSeconds'])} (done at {r['completedAtSeconds']}s)"
        elif "supersededAtSeconds" in r:
            how = f"superseded at {r['supersededAtSeconds']}s"
        else:
            how = "not finished"
        lines.append(f"rollout {src} -> {r['toRevision']}: from {r['startedAtSeconds']}s, {how}")
    for note in data["notes"]:
        lines.append(f"note: {note}")
    return "\n".join(lines)


@main.command()
@click.argument("scenario_file", metavar="SCENARIO.yaml", type=click.File("r", encoding="utf-8"))
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object instead of a timeline."
)
@click.option("--seed", type=int, default=0, show_default=True, help="The world's random seed.")
def simulate(scenario_file: Any, as_json: bool, seed: int) -> None:
    """Run the planner against a simulated cluster and show how the scenario goes.

    Exits 0 when the run completes (converged or not), 2 for a bad scenario.
    """
    text = scenario_file.read()
    try:
        scenario = parse_scenario(text)
        result = run_scenario(scenario, seed=seed)
    except ScenarioError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_BAD_SCENARIO)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2, sort_keys=False))
    else:
        name = getattr(scenario_file, "name", "")
        click.echo(format_result(result, title=f"scenario {name} (seed {seed})"))


if __name__ == "__main__":  # pragma: no cover
    main()

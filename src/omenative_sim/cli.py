"""``omenative``: the user's tool. ``omenative simulate SCENARIO.yaml`` previews a rollout.

The simulation itself is pure (``omenative_sim``); this module only reads the file,
prints, and maps a bad scenario to exit status 2 with ``error: <key path>: <what>``.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from typing import Any

import click

from omenative_controller.cli.advise_output import format_advice, move_line
from omenative_controller.cli.install import install, uninstall
from omenative_core.model.timefmt import format_duration
from omenative_sim import ScenarioError, SimResult, parse_scenario, run_scenario
from omenative_sim.advise import (
    AdviseResult,
    is_advise_scenario,
    parse_advise_scenario,
    run_advise_scenario,
)
from omenative_sim.scenario import load_yaml
from omenative_sim.service import (
    ServiceSimResult,
    is_service_scenario,
    parse_service_scenario,
    run_service_scenario,
)

__all__ = ["advise_scenario", "format_advise_result", "format_result", "format_service_result",
           "main", "simulate"]

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


def _summary_lines(data: dict[str, Any]) -> list[str]:
    """The run's summary: convergence (or where it stalled), peaks, serving floor,
    rollouts and notes."""
    lines: list[str] = []
    summary = data["summary"]
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
    return lines


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
    lines.append("")
    lines += _summary_lines(data)
    return "\n".join(lines)


def _component_cell(name: str, row: dict[str, Any]) -> str:
    revs = ",".join(f"{h[:6]}:{n}" for h, n in sorted(row["revisions"].items())) or "-"
    part = "" if not row.get("partition") else f" p{row['partition']}"
    return f"{name} {row['ready']}/{row['desired']} ready {row['serving']} serving [{revs}]{part}"


def format_service_result(result: ServiceSimResult, *, title: str = "",
                          description: str = "") -> str:
    """The readable timeline of a service run: one line per component and sample, the
    rollout's one-line explanation when it changes, the events, and a summary."""
    lines: list[str] = [x for x in (title, description.strip()) if x]
    if lines:
        lines.append("")
    by_time: dict[float, list[tuple[str, str]]] = {}
    for t, comp, msg in result.events:
        by_time.setdefault(t, []).append((comp, msg))
    samples = {s["t"]: s for s in result.timeline}
    pad = " " * len(_t(0))
    last_rollout = ""
    for t in sorted({*samples, *by_time}):
        first = True
        sample = samples.get(t)
        if sample is not None:
            cells = [_component_cell(c, r) for c, r in sample["components"].items()]
            lines.append(f"{_t(t)}  " + "  |  ".join(cells))
            first = False
        for comp, msg in by_time.get(t, []):
            lines.append(f"{_t(t) if first else pad}  {'>>' if comp == 'scenario' else '--'} "
                         f"{comp}: {msg}")
            first = False
        line = sample.get("rollout", "") if sample is not None else ""
        if line and line != last_rollout:
            lines.append(f"{pad}  rollout: {line}")
            last_rollout = line
    lines.append("")
    lines.append(f"converged: {'yes' if result.converged else 'no'} by {result.ended_at:g}s")
    for comp, row in result.final.items():
        lines.append(f"{comp}: final {_component_cell(comp, dict(row))}; lowest serving "
                     f"{result.min_serving.get(comp, 0)}")
    if result.rollout:
        lines.append(f"rollout: {result.rollout}")
    return "\n".join(lines)


_PLOT_HELP = ("Also draw the run as a picture into FILE (.svg or .png; needs "
              "matplotlib: pip install 'omenative[plot]').")


def _plot(kind: str, data: dict[str, Any], path: str | None, title: str) -> None:
    """Draw ``data`` (the run's --json object) into ``path``; matplotlib is imported here
    only, so a run without --plot never loads it. A missing matplotlib exits 2."""
    if path is None:
        return
    from omenative_sim.pictures import PlotUnavailable, save_figure  # noqa: PLC0415

    try:
        if kind == "advise":
            from omenative_sim.pictures.advice import advise_figure  # noqa: PLC0415

            fig = advise_figure(data, title=title)
        else:
            from omenative_sim.pictures.timeline import (  # noqa: PLC0415
                replica_figure,
                service_figure,
            )

            fig = (service_figure if kind == "service" else replica_figure)(data, title=title)
        save_figure(fig, path)
    except PlotUnavailable as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_BAD_SCENARIO)
    click.echo(f"picture: {path}", err=True)


def _check_plot_path(path: str | None) -> None:
    """Refuse a --plot file name of an unknown kind before the run, not after it."""
    if path is None:
        return
    from omenative_sim.pictures import PlotUnavailable, check_path  # noqa: PLC0415

    try:
        check_path(path)
    except PlotUnavailable as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_BAD_SCENARIO)


def _title(name: str, seed: int) -> str:
    stem = name.rsplit("/", 1)[-1].removesuffix(".yaml") if name else "scenario"
    return f"{stem} (seed {seed})"


@main.command()
@click.argument("scenario_file", metavar="SCENARIO.yaml", type=click.File("r", encoding="utf-8"))
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object instead of a timeline."
)
@click.option("--seed", type=int, default=0, show_default=True, help="The world's random seed.")
@click.option("--plot", "plot_path", metavar="FILE", default=None, help=_PLOT_HELP)
def simulate(scenario_file: Any, as_json: bool, seed: int, plot_path: str | None) -> None:
    """Run the planner against a simulated cluster and show how the scenario goes.

    Exits 0 when the run completes (converged or not), 2 for a bad scenario.
    """
    _check_plot_path(plot_path)
    text = scenario_file.read()
    name = getattr(scenario_file, "name", "")
    try:
        raw = load_yaml(text)
        if is_advise_scenario(raw):
            raise ScenarioError("replicas: this is an advise scenario (several replicas); "
                                "run it with `omenative advise`")
        if is_service_scenario(raw):
            service = parse_service_scenario(raw)
            service_result = run_service_scenario(service, seed=seed)
        else:
            scenario = parse_scenario(raw)
            result = run_scenario(scenario, seed=seed)
    except ScenarioError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_BAD_SCENARIO)
    if is_service_scenario(raw):
        if as_json:
            click.echo(json.dumps(service_result.to_json(), indent=2))
        else:
            click.echo(format_service_result(service_result,
                                             title=f"scenario {name} (seed {seed})",
                                             description=service.description))
        _plot("service", service_result.to_json(), plot_path, _title(name, seed))
        return
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2, sort_keys=False))
    else:
        click.echo(format_result(result, title=f"scenario {name} (seed {seed})"))
    _plot("replica", result.to_json(), plot_path, _title(name, seed))


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" if line else "" for line in text.splitlines())


def format_advise_result(result: AdviseResult, *, title: str = "",
                         description: str = "") -> str:
    """Before, the moves, after: the advice and domains, gangs placed, serving floors."""
    lines: list[str] = [x for x in (title, description.strip()) if x]
    if lines:
        lines.append("")
    lines += ["before:", _indent(format_advice(result.before)), ""]
    lines.append("moves (one after another, the advisor asked again after each):")
    for m in result.moves:
        lines.append(f"  t={m.started_at:g}s..{m.ended_at:g}s  {move_line(m.recommendation)}: "
                     f"{m.phase}, now on {','.join(m.to_nodes) or '-'}")
    if not result.moves:
        lines.append("  (none)")
    lines += ["", "after:", _indent(format_advice(result.after)), ""]
    for gang in result.pending_before:
        placed = "placed" if gang not in result.pending_after else "still pending"
        lines.append(f"pending gang {gang}: {placed}")
    for node, pods in result.unhealthy_pods_after.items():
        lines.append(f"unhealthy node {node}: {'empty' if pods == 0 else f'{pods} pods left'}")
    for name, desired in result.desired.items():
        low = result.min_serving[name]
        floor = "never below desired" if low >= desired else (
            "never below its start" if low >= result.serving_before[name] else "DROPPED")
        lines.append(f"{name}: desired {desired}, serving {result.serving_before[name]} -> "
                     f"{result.serving_after[name]}, lowest during the moves {low} ({floor})")
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)


@main.command("advise")
@click.argument("scenario_file", metavar="SCENARIO.yaml", type=click.File("r", encoding="utf-8"))
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object instead of a report."
)
@click.option("--seed", type=int, default=0, show_default=True, help="The world's random seed.")
@click.option("--plot", "plot_path", metavar="FILE", default=None, help=_PLOT_HELP)
def advise_scenario(scenario_file: Any, as_json: bool, seed: int, plot_path: str | None) -> None:
    """Run the GPU caretaker on a simulated cluster, then its moves, and show before/after.

    Exits 0 when the run completes (whatever the moves achieved), 2 for a bad scenario.
    """
    _check_plot_path(plot_path)
    name = getattr(scenario_file, "name", "")
    try:
        scenario = parse_advise_scenario(load_yaml(scenario_file.read()))
        result = run_advise_scenario(scenario, seed=seed)
    except ScenarioError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_BAD_SCENARIO)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        click.echo(format_advise_result(result, title=f"scenario {name} (seed {seed})",
                                        description=scenario.description))
    _plot("advise", result.to_json(), plot_path, _title(name, seed))


main.add_command(install)  # omenative install / uninstall: config/ with a guard (install.py)
main.add_command(uninstall)


if __name__ == "__main__":  # pragma: no cover
    main()

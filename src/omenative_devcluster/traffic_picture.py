"""A traffic run as data and as a picture: answers per second by revision, failures marked,
the Instances omenative counted serving beneath.

A run is saved as ``NAME.json`` (every request's outcome, the serving intervals of each
Instance, and marks such as "patch rev-2", all in seconds since the run started) beside
``NAME.svg`` (or ``.png``) drawn from it. The picture is always redrawn from the saved data
(``render_file``; ``python -m omenative_devcluster traffic-picture NAME.json``), so a saved
run can be drawn again after the drawing changes, and a test can draw a recorded run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attrs import asdict

from omenative_devcluster.traffic_report import Outcome, TrafficReport

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from omenative_devcluster.serving_record import ServingRecord

__all__ = ["DATA_VERSION", "dump_data", "render_file", "report_from_data", "save_traffic",
           "serving_counts", "serving_intervals", "traffic_data", "traffic_figure"]

DATA_VERSION = 1
"""The saved data's ``version``; bumped when a field changes meaning."""

_REVISION_COLOURS = ("tab:blue", "tab:green", "tab:purple", "tab:cyan", "tab:olive")


def serving_intervals(record: ServingRecord, wall0: float) -> list[dict[str, Any]]:
    """Each Instance attempt omenative counted serving: from when, until when (None: to the
    end), as offsets from ``wall0`` (``LoadGenerator.started_wall``)."""
    out = []
    for key, since in sorted(record.serving_since.items()):
        until = record.unserving_since.get(key)
        name, index, incarnation, attempt = key
        out.append({"instance": f"{name}[{index}] incarnation {incarnation} #{attempt}",
                    "servingFrom": round(since - wall0, 3),
                    "servingUntil": None if until is None else round(until - wall0, 3)})
    return out


def traffic_data(report: TrafficReport, *, title: str,
                 intervals: Sequence[Mapping[str, Any]] = (),
                 marks: Iterable[tuple[float, str]] = ()) -> dict[str, Any]:
    """The run as one JSON object: title, rate, outcomes, serving intervals, marks."""
    return {
        "version": DATA_VERSION,
        "title": title,
        "rate": report.rate,
        "marks": [{"t": round(t, 3), "label": label} for t, label in marks],
        "instances": [dict(i) for i in intervals],
        "outcomes": [_outcome_json(o) for o in report.outcomes],
    }


_DEFAULTS = asdict(Outcome(started=0.0, ended=0.0, via=""))


def _outcome_json(o: Outcome) -> dict[str, Any]:
    """One outcome, times to 0.1 ms, fields at their default left out (a run has hundreds)."""
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(o).items()
            if k in ("started", "ended", "via") or v != _DEFAULTS[k]}


def report_from_data(data: Mapping[str, Any]) -> TrafficReport:
    """The ``TrafficReport`` of saved data (its tables and figures, as when it ran)."""
    return TrafficReport(outcomes=tuple(Outcome(**o) for o in data["outcomes"]),
                         rate=float(data["rate"]))


def serving_counts(intervals: Sequence[Mapping[str, Any]], end: float
                   ) -> tuple[list[float], list[int]]:
    """The number of Instances serving over time, as steps (times, counts) up to ``end``."""
    changes: dict[float, int] = {}
    for i in intervals:
        changes[float(i["servingFrom"])] = changes.get(float(i["servingFrom"]), 0) + 1
        if i["servingUntil"] is not None:
            until = float(i["servingUntil"])
            changes[until] = changes.get(until, 0) - 1
    times, counts, n = [0.0], [0], 0
    for t in sorted(changes):
        n += changes[t]
        if t <= 0:
            counts[0] = n
            continue
        times.append(t)
        counts.append(n)
    times.append(max(end, times[-1]))
    counts.append(n)
    return times, counts


def _answers_panel(ax: Any, report: TrafficReport, marks: Sequence[Mapping[str, Any]]) -> None:
    rows = report.per_second()
    edges = [float(s) for s in range(len(rows) + 1)]
    bottom = [0.0] * len(rows)
    layers = [(f"answers-{rev}", f"answered by {rev}", rev,
               _REVISION_COLOURS[i % len(_REVISION_COLOURS)])
              for i, rev in enumerate(report.revision_order())]
    layers.append(("failed", "failed", "failed", "tab:red"))
    for gid, label, key, colour in layers:
        heights = [float(row.get(key, 0)) for row in rows]
        if not any(heights):
            continue
        top = [b + h for b, h in zip(bottom, heights, strict=True)]
        # one filled step area per revision, stacked: a second's answers by who gave them
        area = ax.stairs(top, edges, baseline=bottom, fill=True, color=colour, label=label)
        area.set_gid(gid)
        bottom = top
    for n, o in enumerate(report.failures):
        (mark,) = ax.plot([o.started], [0], marker="x", color="tab:red", linestyle="",
                          clip_on=False, label=None if n else f"failed request ({o.failure})")
        mark.set_gid(f"failure-{n}")
    for n, w in enumerate(report.failure_windows()):
        ax.axvspan(w.start, w.end, color="tab:red", alpha=0.12).set_gid(f"failure-window-{n}")
    (line,) = ax.plot([0, len(rows)], [report.rate, report.rate], color="black",
                      linestyle="--", linewidth=1, label=f"sent ({report.rate:g}/s)")
    line.set_gid("rate")
    for n, m in enumerate(marks):
        ax.axvline(float(m["t"]), color="black", linestyle=":", linewidth=1).set_gid(f"mark-{n}")
        ax.text(float(m["t"]), 1.0 - 0.08 * (n % 3), f" {m['label']}", fontsize=8, va="top",
                transform=ax.get_xaxis_transform(), gid=f"mark-{n}-label")
    ax.set_ylim(0, report.rate * 1.5)
    ax.set_ylabel("requests per second")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def traffic_figure(data: Mapping[str, Any]) -> Figure:
    """The run's picture from its saved data (see the module docstring)."""
    from omenative_sim.pictures import figure  # noqa: PLC0415 - matplotlib only when drawing

    report = report_from_data(data)
    end = float(math.ceil(max([o.started for o in report.outcomes] + [0.0]))) + 1
    fig, (top, bottom) = figure(2, width=10.0, row_height=2.6, height_ratios=[3.0, 1.2])
    _answers_panel(top, report, data.get("marks", ()))
    top.set_title(f"{data['title']}: {report.sent} requests, {report.answered} answered, "
                  f"{report.failed} failed", fontsize=9)
    times, counts = serving_counts(data.get("instances", ()), end)
    (line,) = bottom.step(times, counts, where="post", color="tab:green", linewidth=2,
                          label="Instances serving")
    line.set_gid("instances-serving")
    for n, m in enumerate(data.get("marks", ())):
        bottom.axvline(float(m["t"]), color="black", linestyle=":", linewidth=1
                       ).set_gid(f"mark-{n}-below")
    bottom.set_ylim(0, max([*counts, 1]) + 1)
    bottom.set_ylabel("Instances\nserving")
    bottom.set_xlabel("seconds since the first request")
    bottom.set_xlim(0, end)
    bottom.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return fig


def render_file(data_path: Path, out: Path) -> Path:
    """Draw the saved run ``data_path`` into ``out`` (.svg or .png); returns ``out``."""
    from omenative_sim.pictures import save_figure  # noqa: PLC0415

    data = json.loads(data_path.read_text(encoding="utf-8"))
    return save_figure(traffic_figure(data), out)


def dump_data(data: Mapping[str, Any]) -> str:
    """The saved JSON text: readable, one outcome per line (a run has hundreds)."""
    head = {k: v for k, v in data.items() if k != "outcomes"}
    lines = [json.dumps(head, indent=1)[:-2] + ',\n "outcomes": [']
    outcomes = [json.dumps(o, separators=(",", ":")) for o in data.get("outcomes", ())]
    lines.append(",\n".join(f"  {o}" for o in outcomes))
    lines.append(" ]\n}\n")
    return "\n".join(lines)


def save_traffic(data: Mapping[str, Any], directory: Path, name: str) -> tuple[Path, Path | None]:
    """Write ``NAME.json`` and its picture ``NAME.svg`` into ``directory``; the picture is
    skipped (None) when matplotlib is missing (``pip install 'omenative[plot]'``)."""
    from omenative_sim.pictures import PlotUnavailable  # noqa: PLC0415

    directory.mkdir(parents=True, exist_ok=True)
    data_path = directory / f"{name}.json"
    data_path.write_text(dump_data(data), encoding="utf-8")
    try:
        return data_path, render_file(data_path, directory / f"{name}.svg")
    except PlotUnavailable:
        return data_path, None

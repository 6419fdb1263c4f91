"""The rollout preview: ``omenative simulate SCENARIO --plot FILE``.

One panel for a replica scenario: Instances (all rows, serving, ready, updated) and pods as
steps over time, the desired count and the surge ceiling (desired + maxSurge) as dashed
lines, each rollout shaded from its start to its end, the scenario's events as vertical
lines and the planner's Warning Events as marks along the top; GPUs in use on a second
axis. A service scenario gets one such panel per component (Instances by state, pods, the
desired count, GPUs) with the rollout's steps as vertical lines across every panel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from omenative_sim.pictures import figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["REPLICA_SERIES", "SERVICE_SERIES", "replica_figure", "service_figure"]

REPLICA_SERIES: tuple[tuple[str, str, str], ...] = (
    # (timeline key, label, colour); the key is the series' id in the picture too
    ("replicas", "Instances (surges included)", "tab:gray"),
    ("servingReplicas", "serving", "tab:green"),
    ("readyReplicas", "ready", "tab:blue"),
    ("updatedReplicas", "updated", "tab:purple"),
    ("pods", "pods", "tab:brown"),
)
"""The counters a replica picture draws, in drawing order."""

SERVICE_SERIES: tuple[tuple[str, str, str], ...] = (
    ("serving", "serving", "tab:green"),
    ("ready", "ready", "tab:blue"),
    ("updated", "updated", "tab:purple"),
    ("pods", "pods", "tab:brown"),
)
"""The per-component counters a service picture draws."""


def _steps(times: Sequence[float], values: Sequence[float], end: float
           ) -> tuple[list[float], list[float]]:
    """A step series held from each sample to the next, and to ``end`` after the last."""
    xs = [*times, max(end, times[-1] if times else 0.0)]
    ys = [*values, values[-1] if values else 0.0]
    return xs, ys


def _style(key: str) -> dict[str, Any]:
    """Serving is drawn as a wide pale band under the thin lines: where it equals ready or
    the desired count, both still show."""
    if key in ("servingReplicas", "serving"):
        return {"linewidth": 6, "alpha": 0.4, "zorder": 1}
    return {"linewidth": 1.4, "zorder": 2}


def _series(ax: Axes, gid: str, label: str, xs: list[float], ys: list[float], **kw: Any) -> None:
    (line,) = ax.step(xs, ys, where="post", label=label, **kw)
    line.set_gid(gid)


def _gpu_axis(ax: Axes, gid: str, xs: list[float], ys: list[float]) -> None:
    """GPUs in use on a second y axis, so the cost of a surge reads beside its Instances;
    one legend for both axes, outside the panel on the right."""
    gpu = ax.twinx()
    (line,) = gpu.step(xs, ys, where="post", color="tab:orange", alpha=0.7, linewidth=1.2,
                       label="GPUs in use (right)")
    line.set_gid(gid)
    gpu.set_ylabel("GPUs in use", color="tab:orange")
    gpu.set_ylim(0, max([*ys, 1]) * 1.25)
    gpu.grid(False)
    handles, labels = ax.get_legend_handles_labels()
    legend = ax.legend(handles=[*handles, line], labels=[*labels, str(line.get_label())],
                       loc="upper left", bbox_to_anchor=(1.07, 1.0), fontsize=8,
                       frameon=False)
    legend.set_gid(f"{gid}-legend")


def _view_end(times: Sequence[float], events: Sequence[Mapping[str, Any]], end: float) -> float:
    """Where the time axis stops: a little after the last change, not at a long quiet tail."""
    changes = [t for t in times if t < end]  # the last sample is at `until` whatever happens
    last = max([*changes, *(float(e["t"]) for e in events), 0.0])
    return min(end, last * 1.15 + 30) if last > 0 else end


def _scenario_marks(ax: Axes, events: Sequence[Mapping[str, Any]], top: float) -> None:
    """The scenario's events as labelled vertical lines; Warning Events as marks on top."""
    row = 0
    warned = False
    for i, ev in enumerate(events):
        t = float(ev["t"])
        if ev.get("source") == "scenario":
            line = ax.axvline(t, color="black", linestyle=":", linewidth=1)
            line.set_gid(f"event-{i}")
            row += 1  # labels step down one row each, so close events stay readable
            label = ax.text(t, top * (1.04 - 0.07 * (row % 4)), f" {ev['reason']}", fontsize=8,
                            va="top")
            label.set_gid(f"event-{i}-label")
        elif ev.get("type") == "Warning":
            (mark,) = ax.plot([t], [top * 0.99], marker="v", color="tab:red", linestyle="",
                              label=None if warned else "planner Warning Event")
            mark.set_gid(f"warning-{i}")
            warned = True


def _rollout_spans(ax: Axes, rollouts: Sequence[Mapping[str, Any]], end: float) -> None:
    for i, r in enumerate(rollouts):
        start = float(r["startedAtSeconds"])
        stop = r.get("completedAtSeconds") or r.get("supersededAtSeconds") or end
        span = ax.axvspan(start, float(stop), color="tab:blue", alpha=0.07)
        span.set_gid(f"rollout-{i}")
        took = r.get("durationSeconds")
        span.set_label(f"rollout {i + 1}" + (f" ({took:g}s)" if took is not None else
                                            " (not finished)"))


def replica_figure(data: Mapping[str, Any], *, title: str = "") -> Figure:
    """The preview of a replica scenario from its ``--json`` object."""
    timeline = data["timeline"]
    end = float(data["untilSeconds"])
    times = [float(s["t"]) for s in timeline]
    fig, (ax,) = figure(1, row_height=4.2)
    for key, label, colour in REPLICA_SERIES:
        xs, ys = _steps(times, [s[key] for s in timeline], end)
        _series(ax, key, label, xs, ys, color=colour, **_style(key))
    for key, label in (("desiredReplicas", "desired"), ("surgeCeiling", "surge ceiling")):
        xs, ys = _steps(times, [s.get(key, 0) for s in timeline], end)
        _series(ax, key, label, xs, ys, color="black",
                linestyle="--" if key == "desiredReplicas" else "-.", linewidth=1)
    top = max(max(s["pods"], s.get("surgeCeiling", 0)) for s in timeline) * 1.3 + 0.5
    ax.set_ylim(0, top)
    _rollout_spans(ax, data["summary"]["rollouts"], end)
    _scenario_marks(ax, data["events"], top)
    ax.set_xlim(0, _view_end(times, data["events"], end))
    ax.set_xlabel("seconds")
    ax.set_ylabel("Instances / pods")
    _gpu_axis(ax, "gpusInUse", *_steps(times, [s["gpusInUse"] for s in timeline], end))
    ax.set_title(title or "omenative simulate")
    return fig


def _service_marks(axes: Sequence[Axes], events: Sequence[Mapping[str, Any]]) -> None:
    """The scenario's events and the rollout's steps as vertical lines on every panel,
    labelled on the first."""
    row = 0
    last_t = None
    for i, ev in enumerate(events):
        t = float(ev["t"])
        scenario = ev["component"] == "scenario"
        if not scenario and ev["component"] != "rollout":
            continue
        text = ev["message"] if scenario else ev["message"].split(":", 1)[0]
        for ax in axes:
            line = ax.axvline(t, color="black" if scenario else "tab:red",
                              linestyle=":" if scenario else "--", linewidth=1)
            line.set_gid(f"event-{i}")
        row = row + 1 if t == last_t else 0
        last_t = t
        label = axes[0].text(t, 1.0 - 0.1 * row, f" {text}", fontsize=7, va="top",
                             transform=axes[0].get_xaxis_transform())
        label.set_gid(f"event-{i}-label")


def _paused_spans(ax: Axes, timeline: Sequence[Mapping[str, Any]], end: float) -> None:
    """Shade where the rollout said it was paused (a manual pause step, waiting to promote)."""
    start: float | None = None
    spans: list[tuple[float, float]] = []
    for s in timeline:
        paused = " Paused " in str(s.get("rollout", ""))
        if paused and start is None:
            start = float(s["t"])
        elif not paused and start is not None:
            spans.append((start, float(s["t"])))
            start = None
    if start is not None:
        spans.append((start, end))
    for i, (a, b) in enumerate(spans):
        span = ax.axvspan(a, b, color="tab:gray", alpha=0.12,
                          label="rollout paused" if i == 0 else None)
        span.set_gid(f"paused-{i}")


def service_figure(data: Mapping[str, Any], *, title: str = "") -> Figure:
    """The preview of a service scenario from its ``--json`` object: a panel per component."""
    timeline = data["timeline"]
    end = float(data["endedAt"])
    times = [float(s["t"]) for s in timeline]
    components = list(timeline[0]["components"]) if timeline else []
    fig, axes = figure(max(len(components), 1), row_height=3.0)
    for ax, comp in zip(axes, components, strict=False):
        rows = [s["components"][comp] for s in timeline]
        for key, label, colour in SERVICE_SERIES:
            xs, ys = _steps(times, [r[key] for r in rows], end)
            _series(ax, f"{comp}-{key}", label, xs, ys, color=colour, **_style(key))
        xs, ys = _steps(times, [r["desired"] for r in rows], end)
        _series(ax, f"{comp}-desired", "desired", xs, ys, color="black", linestyle="--",
                linewidth=1)
        ax.set_ylim(0, max(max(r["pods"], r["desired"]) for r in rows) * 1.35 + 0.5)
        ax.set_ylabel(f"{comp}\nInstances / pods")
        _paused_spans(ax, timeline, end)
        _gpu_axis(ax, f"{comp}-gpus", *_steps(times, [r["gpus"] for r in rows], end))
    _service_marks(axes, data["events"])
    axes[-1].set_xlim(0, _view_end(times, data["events"], end))
    axes[-1].set_xlabel("seconds")
    axes[0].set_title(title or "omenative simulate (InferenceService)")
    return fig

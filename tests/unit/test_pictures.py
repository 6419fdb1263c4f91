"""Pictures of the simulator (``--plot``): what each picture holds, read from the figure's
artists and the SVG's ids and texts (not its pixels), deterministic output, matplotlib
loaded only for ``--plot``, and the docs' picture data still what a fresh run gives."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from omenative_sim.cli import main
from omenative_sim.pictures import PlotUnavailable, check_path, save_figure
from omenative_sim.pictures.advice import advise_figure, domain_order
from omenative_sim.pictures.timeline import replica_figure, service_figure

ROOT = Path(__file__).resolve().parents[2]
PICTURES = ROOT / "docs" / "pictures"
SVG = "{http://www.w3.org/2000/svg}"

sys.path.insert(0, str(ROOT / "scripts"))
import render_pictures  # noqa: E402


def _data(name: str) -> dict[str, Any]:
    return json.loads((PICTURES / f"{name}.json").read_text(encoding="utf-8"))


def _gids(fig: Any) -> set[str]:
    return {a.get_gid() for a in fig.findobj() if a.get_gid()}


def _texts(fig: Any) -> set[str]:
    return {t.get_text().strip() for t in fig.findobj(match=lambda a: hasattr(a, "get_text"))
            if t.get_text().strip()}


def _svg(fig: Any, tmp_path: Path, name: str = "p.svg") -> ET.Element:
    out = save_figure(fig, tmp_path / name)
    return ET.parse(out).getroot()


def _svg_ids(root: ET.Element) -> set[str]:
    return {e.get("id", "") for e in root.iter()} - {""}


def _svg_texts(root: ET.Element) -> str:
    return " ".join("".join(e.itertext()) for e in root.iter(f"{SVG}text"))


def _line(fig: Any, gid: str) -> Any:
    return next(a for a in fig.findobj() if a.get_gid() == gid)


# ------------------------------------------------------------------ replica scenario


def test_timeline_samples_carry_the_desired_count_and_the_surge_ceiling() -> None:
    # engine-gang: 2 Instances, maxSurge 1, so at most 3 at once; the surge reaches it
    timeline = _data("engine-gang")["timeline"]
    assert {s["desiredReplicas"] for s in timeline} == {2}
    assert {s["surgeCeiling"] for s in timeline} == {3}
    assert max(s["replicas"] for s in timeline) == 3


def test_router_scale_up_raises_the_desired_line() -> None:
    code_text = CliRunner().invoke(main, ["simulate", str(ROOT / "examples/router-single.yaml"),
                                          "--json"])
    timeline = json.loads(code_text.stdout)["timeline"]
    assert timeline[0]["desiredReplicas"] == 1
    assert timeline[-1]["desiredReplicas"] == 3
    assert all(s["surgeCeiling"] >= s["desiredReplicas"] for s in timeline)


def test_replica_picture_draws_every_series_the_lines_and_the_events(tmp_path: Path) -> None:
    data = _data("engine-gang")
    fig = replica_figure(data, title="engine-gang")
    gids = _gids(fig)
    for series in ("replicas", "servingReplicas", "readyReplicas", "updatedReplicas", "pods",
                   "desiredReplicas", "surgeCeiling", "gpusInUse", "rollout-0", "event-0"):
        assert series in gids, series
    # the lines plot the data: the surge ceiling at 3, GPUs peaking at the summary's peak
    assert set(_line(fig, "surgeCeiling").get_ydata()) == {3}
    assert max(_line(fig, "gpusInUse").get_ydata()) == data["summary"]["peakGpus"]
    texts = _texts(fig)
    assert "patch" in texts and "GPUs in use" in texts and "engine-gang" in texts
    assert "rollout 1 (366s)" in texts  # the rollout's span, with its duration
    root = _svg(fig, tmp_path)
    assert {"servingReplicas", "surgeCeiling", "gpusInUse", "event-0-label"} <= _svg_ids(root)
    assert "surge ceiling" in _svg_texts(root)


def test_warning_events_are_marked(tmp_path: Path) -> None:
    data = _data("bad-image")
    warnings = [i for i, e in enumerate(data["events"]) if e.get("type") == "Warning"]
    assert warnings
    fig = replica_figure(data)
    assert {f"warning-{i}" for i in warnings} <= _gids(fig)
    assert "planner Warning Event" in _texts(fig)


def test_the_same_data_gives_the_same_svg_bytes_without_a_date(tmp_path: Path) -> None:
    data = _data("engine-gang")
    a = save_figure(replica_figure(data), tmp_path / "a.svg").read_bytes()
    b = save_figure(replica_figure(data), tmp_path / "b.svg").read_bytes()
    assert a == b
    assert b"<dc:date>" not in a and b"Matplotlib v" not in a


def test_png_is_written_for_a_png_name(tmp_path: Path) -> None:
    out = save_figure(replica_figure(_data("engine-gang")), tmp_path / "p.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_unknown_picture_suffix_is_refused() -> None:
    with pytest.raises(PlotUnavailable, match=r"must end in \.svg or \.png"):
        check_path("out.gif")


# ------------------------------------------------------------------ service scenario


def test_service_picture_has_a_panel_per_component_and_the_rollout_steps() -> None:
    data = _data("service-canary")
    fig = service_figure(data, title="service-canary")
    gids = _gids(fig)
    for comp in ("engine", "decoder"):
        for key in ("serving", "ready", "updated", "pods", "desired", "gpus"):
            assert f"{comp}-{key}" in gids, (comp, key)
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert "engine\nInstances / pods" in labels and "decoder\nInstances / pods" in labels
    texts = _texts(fig)
    for step in ("RolloutStarted", "RolloutStepAdvanced", "RolloutGroupStable", "promote"):
        assert step in texts, step
    assert "paused-0" in gids and "rollout paused" in texts  # the manual pause, shaded


# ------------------------------------------------------------------ advise scenario


def test_advise_picture_shows_nodes_before_and_after_and_numbers_the_moves() -> None:
    data = _data("advisor-fragmented")
    fig = advise_figure(data, title="advisor-fragmented")
    gids = _gids(fig)
    # before: a 4-GPU small Instance on each node, the rest free
    for i in range(4):
        assert f"before-node-{i}-small-{i}[0]" in gids
        assert f"before-node-{i}-free" in gids
    # the two moves, numbered, with arrows; after: where they landed, and the gang placed
    assert {"move-1", "move-2", "move-1-arrow", "move-2-arrow"} <= gids
    assert {"landed-1-node-1", "landed-2-node-3"} <= gids
    assert {"after-node-0-big[0]", "after-node-2-big[0]"} <= gids
    texts = _texts(fig)
    assert "before the moves: pending gangs default/big[0]" in texts
    assert "after the moves: pending gangs none" in texts


def test_advise_layout_counts_gpus_per_instance() -> None:
    data = _data("advisor-fragmented")
    before = {n["name"]: n for n in data["layoutBefore"]}
    assert before["node-0"] == {"name": "node-0", "gpus": 8, "unhealthy": False,
                                "labels": before["node-0"]["labels"],
                                "used": {"small-0[0]": 4}}
    after = {n["name"]: n["used"] for n in data["layoutAfter"]}
    assert after["node-0"] == {"big[0]": 8} and sum(after["node-1"].values()) == 8


def test_nodes_are_grouped_by_the_domain_key() -> None:
    layout = [{"name": f"n{i}", "labels": {"zone": "a" if i < 2 else "b"}} for i in range(3)]
    assert [(d, [n["name"] for n in ns]) for d, ns in domain_order(layout, "zone")] == [
        ("zone=a", ["n0", "n1"]), ("zone=b", ["n2"])]
    assert [d for d, _ in domain_order(layout, None)] == ["(cluster)"]


def test_unhealthy_nodes_are_marked_unsound() -> None:
    data = _data("advisor-fragmented")
    data["layoutBefore"][3]["unhealthy"] = True
    fig = advise_figure(data)
    assert "before-node-3-unsound" in _gids(fig)
    assert "node-3\n(unsound)" in _texts(fig)


# ------------------------------------------------------------------ the CLI


@pytest.mark.parametrize(("command", "example", "ids"), [
    ("simulate", "engine-gang.yaml", {"servingReplicas", "surgeCeiling"}),
    ("simulate", "service-canary.yaml", {"engine-serving", "decoder-serving"}),
    ("advise", "advisor-fragmented.yaml", {"move-1", "landed-1-node-1"}),
])
def test_plot_option_writes_the_picture(tmp_path: Path, command: str, example: str,
                                        ids: set[str]) -> None:
    out = tmp_path / "run.svg"
    result = CliRunner().invoke(main, [command, str(ROOT / "examples" / example),
                                       "--plot", str(out)])
    assert result.exit_code == 0, result.output
    assert ids <= _svg_ids(ET.parse(out).getroot())
    assert f"picture: {out}" in result.stderr


def test_plot_with_a_bad_suffix_exits_2_before_running(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["simulate", str(ROOT / "examples/engine-gang.yaml"),
                                       "--plot", str(tmp_path / "x.jpg")])
    assert result.exit_code == 2
    assert "error: --plot" in result.stderr and ".svg or .png" in result.stderr
    assert result.stdout == ""


def test_matplotlib_is_loaded_only_for_plot() -> None:
    probe = ("import sys; from omenative_sim.cli import main\n"
             "try:\n    main(['simulate', sys.argv[1]])\nexcept SystemExit:\n    pass\n"
             "print('LOADED' if 'matplotlib' in sys.modules else 'NOT LOADED', file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe, str(ROOT / "examples/router-single.yaml")],
                          capture_output=True, text=True, check=True, timeout=120)
    assert done.stderr.strip().endswith("NOT LOADED")


# ------------------------------------------------------------------ the docs' pictures


def test_docs_picture_data_is_what_a_fresh_run_gives() -> None:
    """A change to the planner or simulator that changes a docs picture's story must come
    with `make pictures` (the data is compared; the SVG follows the data)."""
    assert render_pictures.stale() == []
    for name in render_pictures.SIMULATED:
        assert (PICTURES / f"{name}.svg").is_file(), name

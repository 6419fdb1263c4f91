"""A traffic run saved as data and drawn from it: answers per second by revision, failures
marked, the Instances serving beneath; the saved data gives back the same report."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from click.testing import CliRunner

from omenative_devcluster.__main__ import cli
from omenative_devcluster.serving_record import ServingRecord
from omenative_devcluster.traffic_picture import (
    dump_data,
    render_file,
    report_from_data,
    save_traffic,
    serving_counts,
    serving_intervals,
    traffic_data,
    traffic_figure,
)
from omenative_devcluster.traffic_report import Outcome, TrafficReport


def _run() -> TrafficReport:
    """10 s at 4 requests/s: rev-1 answers until 5 s, rev-2 after, one failure at 5.1 s."""
    outcomes = []
    for k in range(40):
        t = k / 4
        if k == 20:
            outcomes.append(Outcome(started=t + 0.1, ended=t + 0.3, via="new",
                                    failure="connection-error", detail="reset"))
            continue
        rev = "rev-1" if t < 5 else "rev-2"
        outcomes.append(Outcome(started=t, ended=t + 0.05, via="kept" if k % 2 else "new",
                                revision=rev, instance=str(k % 2), pod=f"llm-{k % 2}-leader-0",
                                status=200))
    return TrafficReport(outcomes=tuple(outcomes), rate=4.0)


INTERVALS = [
    {"instance": "llm[0] incarnation 1 #1", "servingFrom": -30.0, "servingUntil": 6.0},
    {"instance": "llm[1] incarnation 1 #1", "servingFrom": -30.0, "servingUntil": 7.0},
    {"instance": "llm[2] incarnation 1 #1", "servingFrom": 3.0, "servingUntil": None},
    {"instance": "llm[3] incarnation 1 #1", "servingFrom": 4.0, "servingUntil": None},
]


def _data() -> dict:
    return traffic_data(_run(), title="surge", intervals=INTERVALS,
                        marks=[(1.0, "patch: rev-2"), (8.0, "converged")])


def test_saved_data_gives_back_the_same_report() -> None:
    data = json.loads(dump_data(_data()))
    again = report_from_data(data)
    assert again == _run()
    assert again.table("t") == _run().table("t")
    assert data["marks"] == [{"t": 1.0, "label": "patch: rev-2"},
                             {"t": 8.0, "label": "converged"}]


def test_serving_counts_step_with_each_instance() -> None:
    times, counts = serving_counts(INTERVALS, end=10.0)
    assert list(zip(times, counts, strict=True)) == [
        (0.0, 2), (3.0, 3), (4.0, 4), (6.0, 3), (7.0, 2), (10.0, 2)]


def test_serving_intervals_come_from_the_record_as_offsets() -> None:
    record = ServingRecord()
    key = ("llm", 0, 1, 1)
    record.serving_since[key] = 1000.5
    record.unserving_since[key] = 1010.0
    record.serving_since[("llm", 1, 1, 1)] = 1003.0
    assert serving_intervals(record, wall0=1000.0) == [
        {"instance": "llm[0] incarnation 1 #1", "servingFrom": 0.5, "servingUntil": 10.0},
        {"instance": "llm[1] incarnation 1 #1", "servingFrom": 3.0, "servingUntil": None}]


def test_picture_shows_answers_by_revision_failures_and_instances() -> None:
    fig = traffic_figure(_data())
    gids = {a.get_gid() for a in fig.findobj() if a.get_gid()}
    assert {"answers-rev-1", "answers-rev-2", "failed", "failure-0", "failure-window-0",
            "instances-serving", "rate", "mark-0", "mark-1"} <= gids
    serving = next(a for a in fig.findobj() if a.get_gid() == "instances-serving")
    assert max(serving.get_ydata()) == 4
    texts = {t.get_text() for t in fig.findobj(match=lambda a: hasattr(a, "get_text"))}
    assert "surge: 40 requests, 39 answered, 1 failed" in texts
    assert {"answered by rev-1", "answered by rev-2", "failed request (connection-error)",
            "Instances serving", " patch: rev-2"} <= texts


def test_save_writes_data_and_picture_and_the_renderer_redraws_it(tmp_path: Path) -> None:
    data_path, picture = save_traffic(_data(), tmp_path, "traffic-surge")
    assert data_path == tmp_path / "traffic-surge.json"
    assert picture == tmp_path / "traffic-surge.svg"
    ids = {e.get("id") for e in ET.parse(picture).getroot().iter()}
    assert {"answers-rev-1", "answers-rev-2", "instances-serving"} <= ids
    first = picture.read_bytes()
    picture.unlink()
    result = CliRunner().invoke(cli, ["traffic-picture", str(data_path)])
    assert result.exit_code == 0, result.output
    assert picture.read_bytes() == first  # drawn again from the data, the same bytes
    png = render_file(data_path, tmp_path / "again.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_the_recorded_demo_run_in_the_docs_draws(tmp_path: Path) -> None:
    """docs/pictures/traffic-demo.json is a real `make demo` run: its report and picture."""
    recorded = Path(__file__).resolve().parents[2] / "docs" / "pictures" / "traffic-demo.json"
    data = json.loads(recorded.read_text(encoding="utf-8"))
    report = report_from_data(data)
    assert report.revision_order() == ["rev-1", "rev-2"]
    assert report.failed == 0 and report.sent > 500
    out = render_file(recorded, tmp_path / "demo.svg")
    ids = {e.get("id") for e in ET.parse(out).getroot().iter()}
    assert {"answers-rev-1", "answers-rev-2", "instances-serving", "mark-0", "mark-1"} <= ids

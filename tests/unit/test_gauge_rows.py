"""``GaugeRows``: a per-replica gauge kept as rows prints what a labelled ``Gauge`` printed,
and a series costs a row, not a Gauge child (issue 36: the manager's peak memory)."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge, generate_latest

from omenative_controller.gauge_rows import GaugeRows

LABELS = ["namespace", "replica"]


def _drive(g: Any) -> None:
    """The calls the manager makes: set, set again, remove, set after a remove."""
    g.labels("ns", "a").set(10)
    g.labels("ns", "b").set(2.5)
    g.labels("other", "a").set(0)
    g.labels("ns", "a").set(11)
    g.remove("ns", "b")
    g.labels("ns", "b").set(3)


def test_a_scrape_prints_what_the_gauge_printed() -> None:
    rows_reg, gauge_reg = CollectorRegistry(), CollectorRegistry()
    rows = GaugeRows("omenative_status_bytes", "Bytes.", LABELS, rows_reg)
    _drive(rows)
    _drive(Gauge("omenative_status_bytes", "Bytes.", LABELS, registry=gauge_reg))
    assert generate_latest(rows_reg) == generate_latest(gauge_reg)
    assert rows_reg.get_sample_value("omenative_status_bytes",
                                     {"namespace": "ns", "replica": "a"}) == 11
    # an empty family is still exported (a dashboard's query names it)
    empty = CollectorRegistry()
    GaugeRows("x_bytes", "X.", LABELS, empty)
    assert b"# TYPE x_bytes gauge" in generate_latest(empty)


def test_remove_of_a_missing_series_and_wrong_labels_fail_as_a_gauges_do() -> None:
    g = GaugeRows("y_bytes", "Y.", LABELS, CollectorRegistry())
    with pytest.raises(KeyError):
        g.remove("ns", "gone")
    with pytest.raises(ValueError, match="2 label values"):
        g.labels("ns")
    with pytest.raises(ValueError, match="Duplicated"):  # a name is registered once
        reg = CollectorRegistry()
        GaugeRows("z_bytes", "Z.", LABELS, reg)
        Gauge("z_bytes", "Z.", LABELS, registry=reg)


def test_a_series_costs_a_row_not_a_gauge_child() -> None:
    g = GaugeRows("w_bytes", "W.", LABELS, CollectorRegistry())
    names = [f"replica-{i}" for i in range(500)]
    g.labels("ns", "warm").set(1)
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for name in names:
            g.labels("ns", name).set(1234)
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(d.size_diff for d in after.compare_to(before, "filename"))
    assert 0 < grown / 500 < 250  # bytes a series (a Gauge child: ~700)
    assert len(g) == 501

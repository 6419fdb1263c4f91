"""The manager's Grafana dashboard (config/grafana/): every query names a metric the manager
exports, under the name Prometheus scrapes; the chart's copy is the same file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from omenative_controller.advisor_loop import AdvisorMetrics
from omenative_controller.observability import Metrics
from omenative_controller.pass_context import PassContext
from omenative_core.model.status import InferenceReplicaStatus

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "config" / "grafana" / "omenative-dashboard.json"
CHART_COPY = ROOT / "charts" / "omenative" / "files" / "grafana" / "omenative-dashboard.json"
METRIC = re.compile(r"\b(?:ome_)?omenative_[a-z0-9_]+")  # ours and OME's names
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
            "gauge": ("",), "summary": ("_sum", "_count", "")}


def exported() -> set[str]:
    """Every series name the manager's /metrics can show (manager and advisor registries)."""
    registry = CollectorRegistry()
    Metrics(registry)
    AdvisorMetrics(registry)
    names = set()
    for family in registry.collect():
        for suffix in SUFFIXES[family.type]:
            names.add(family.name + suffix)
    return names


def queries() -> list[tuple[str, str]]:
    dash: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return [(p["title"], t["expr"]) for p in dash["panels"] for t in p.get("targets", ())]


def test_every_query_names_only_metrics_the_manager_exports() -> None:
    names = exported()
    found = queries()
    assert len(found) >= 20
    for title, expr in found:
        used = set(METRIC.findall(expr))
        assert used, f"{title}: {expr} names no omenative metric"
        assert used <= names, f"{title}: {sorted(used - names)} not exported by the manager"


def test_the_dashboard_covers_the_operating_surface() -> None:
    used = {m for _, expr in queries() for m in METRIC.findall(expr)}
    for metric in ("omenative_pass_duration_seconds_bucket", "omenative_api_requests_in_flight",
                   "omenative_status_bytes", "omenative_advisor_free_gpus",
                   "omenative_advisor_fragmentation_ratio", "omenative_queue_depth",
                   "omenative_instances", "omenative_rollout_instances"):
        assert metric in used, metric


def test_instances_by_phase_and_rollout_progress_read_the_labels_the_manager_sets() -> None:
    found = queries()
    assert ("Instances by phase", "sum by (phase) (omenative_instances)") in found
    progress = " ".join(e for t, e in found if t.startswith("Rollout progress"))
    for state in ("updated_ready", "serving", "desired"):
        assert f'omenative_rollout_instances{{state="{state}"}}' in progress
    assert "sum by (namespace, isvc, component)" in progress
    m = Metrics()
    ident = {"namespace", "replica", "isvc", "component"}
    ctx = PassContext(key="ns/a", namespace="ns", name="a",
                      raw={"metadata": {"name": "a", "namespace": "ns"}, "spec": {}})
    m.replicas.observe(ctx, InferenceReplicaStatus(), changed=True)
    labels = {s.name: set(s.labels) for f in m.registry.collect() for s in f.samples}
    assert labels["omenative_instances"] == ident | {"phase"}
    assert labels["omenative_rollout_instances"] == ident | {"state"}


def test_a_metric_name_that_is_not_exported_is_caught() -> None:
    # the check itself: a counter without its _total suffix is not what Prometheus scrapes
    assert "omenative_actions" not in exported()
    assert "omenative_actions_total" in exported()
    # OME's names are read whole, never as the omenative_ name inside them
    assert METRIC.findall("rate(ome_omenative_rollout_group_transition_total[5m])") == [
        "ome_omenative_rollout_group_transition_total"]
    assert "ome_omenative_rollout_group_phase_total" in exported()


def test_panels_are_laid_out_and_the_chart_carries_the_same_file() -> None:
    dash = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    assert all(p["gridPos"]["x"] >= 0 and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
               for p in dash["panels"])
    assert dash["uid"] == "omenative-manager"
    assert CHART_COPY.read_text(encoding="utf-8") == DASHBOARD.read_text(encoding="utf-8")

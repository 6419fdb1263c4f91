"""The memory probe of ``benchmarks/manager_memory.py`` (issue 36): each object is counted
once, for the first structure that reaches it, and a report names the Manager's
structures with their sizes."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import manager_memory

from omenative_controller.manager import Manager
from omenative_controller.manager_config import ManagerOptions


def test_shared_objects_count_once_for_the_first_that_reaches_them() -> None:
    shared = ["x" * 1000]
    a, b = {"rows": shared}, {"rows": shared, "own": "y" * 500}
    seen: set[int] = set()
    first = manager_memory.deep_size(a, seen, Counter())
    second = manager_memory.deep_size(b, seen, Counter())
    assert first > 1000  # the shared string is a's
    assert 500 < second < 1000  # b's own string, not the shared one again


def test_a_report_lists_the_managers_structures(tmp_path: Path) -> None:
    manager = Manager(ManagerOptions())
    manager.metrics.status_bytes.labels("ns", "r").set(1)
    rows = manager_memory.manager_sizes(manager)
    paths = [path for _, path, _ in rows]
    assert "metrics.registry" in paths and "options" in paths
    assert [size for size, _, _ in rows] == sorted((size for size, _, _ in rows), reverse=True)
    out = manager_memory.report(tmp_path, "now")
    text = out.read_text()
    assert text.startswith("VmRSS ") and "reachable from the Manager" in text
    assert " MB metrics.registry " in text
    del manager

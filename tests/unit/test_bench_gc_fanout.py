"""The young-collection probe names what a long young collection walked
(``benchmarks/gc_fanout.py``): the references its young objects hold, and the widest
containers among them, so a container that points at the whole fleet is found by name."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import gc_fanout


class Pod:
    """An old cached object."""

    def __init__(self, n: int) -> None:
        self.n = [n]


def test_a_young_list_of_every_pod_is_named_with_its_references(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = [Pod(n) for n in range(20000)]
    gc.collect()  # the cache is old now
    out = tmp_path / "young"
    monkeypatch.setattr(gc_fanout, "SLOW", 0.0)  # every young collection is written
    undo = gc_fanout.install(out)
    try:
        every_pod = list(cache)  # a young container that points at the whole fleet
        gc.collect(0)
        gc.collect(1)  # not young: not counted
    finally:
        undo()
    lines = out.read_text().splitlines()
    assert len(lines) == 1
    _, kind, _cpu, objects, refs, rest = lines[0].split(" ", 5)
    assert kind == "young"
    assert int(refs) >= len(every_pod) and int(objects) >= 1
    assert "list[20000] of {'Pod': 50} (20000 refs)" in rest.split("widest: ", 1)[1]


def test_a_short_young_collection_is_not_written(tmp_path: Path) -> None:
    out = tmp_path / "young"
    undo = gc_fanout.install(out)
    try:
        gc.collect(0)  # nearly nothing young: far under SLOW
    finally:
        undo()
    assert out.read_text() == ""

"""The py-spy timeline report names what ran inside the loop's longest busy stretches
(``benchmarks/spy_stalls.py``): the tool that says which part of a long callback held it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import spy_stalls

FRAMES = [
    {"name": "BaseEventLoop._run_once", "file": "/py/asyncio/base_events.py", "line": 1900},
    {"name": "EpollSelector.select", "file": "/py/selectors.py", "line": 468},
    {"name": "Handle._run", "file": "/py/asyncio/events.py", "line": 80},
    {"name": "Informer.run", "file": "/src/omenative_controller/kube/informer.py",
     "line": 499},
    {"name": "loads", "file": "/venv/orjson.py", "line": 1},
    {"name": "Worker.run", "file": "/src/omenative_controller/manager.py", "line": 10},
    {"name": "plan", "file": "/src/omenative_core/planner.py", "line": 20},
    {"name": "Thread.run", "file": "/py/threading.py", "line": 5},
]
IDLE = [0, 1]
WATCH = [0, 2, 3, 4]
PASS = [0, 2, 5, 6]


def _doc(*loop: list[int]) -> dict[str, Any]:
    other = {"type": "sampled", "name": "thread 2", "unit": "seconds",
             "samples": [[7]] * 50, "weights": [0.001] * 50}
    mine = {"type": "sampled", "name": "thread 1", "unit": "seconds",
            "samples": list(loop), "weights": [0.001] * len(loop)}
    return {"shared": {"frames": FRAMES}, "profiles": [other, mine]}


def test_the_longest_stretch_comes_first_with_its_callbacks_in_order() -> None:
    doc = _doc(*([IDLE] * 3 + [WATCH] * 2 + [IDLE] + [WATCH] * 4 + [PASS] * 6 + [IDLE] * 2))
    assert spy_stalls.stretches(doc) == [(3, 5), (6, 16)]
    lines = spy_stalls.report(doc, top=5, min_ms=0)
    assert lines[1] == "- 10 ms (samples 6-16):"
    # the watch step first (4 samples, in orjson under the informer), then the pass
    assert lines[2].split() == ["4", "Informer.run", "(informer.py:499)"]
    assert "Informer.run (informer.py:499) > loads (orjson.py:1)" in lines[3]
    assert lines[4].split() == ["6", "Worker.run", "(manager.py:10)"]
    assert lines[6].startswith("- 2 ms")


def test_short_stretches_are_left_out_and_a_profile_without_a_loop_is_said() -> None:
    doc = _doc(*([WATCH] * 3 + [IDLE]))
    assert spy_stalls.report(doc, top=5, min_ms=8.0) == [
        "1 busy stretches; the longest 5 of at least 8.0 ms:"]
    no_loop = {"shared": {"frames": FRAMES}, "profiles": [_doc()["profiles"][0]]}
    assert spy_stalls.report(no_loop, top=5, min_ms=0) == [
        "no thread runs an asyncio loop in this profile"]


def test_flat_shares_the_busy_samples_by_function() -> None:
    doc = _doc(*([IDLE] * 2 + [WATCH] * 1 + [PASS] * 3))
    lines = spy_stalls.flat(doc, top=5)
    assert lines[0] == "4 busy samples of 6; by callback:"
    assert lines[1].split() == ["75.0%", "Worker.run", "(manager.py)"]
    assert "75.0% plan (planner.py)" in lines[lines.index("by the deepest frame of ours:") + 1]

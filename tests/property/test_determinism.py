"""Same snapshot, same plan, byte for byte, whatever the interpreter's hash seed.

The planner promises determinism (docs/architecture.md): two managers, or one manager
before and after a restart, must write the same status and take the same actions from the
same view, or they fight. Set and dict iteration over strings is the classic way to break
that (it follows ``PYTHONHASHSEED``), so 200 snapshots from the simulator's scenarios are
planned here and in child interpreters with other hash seeds, and the serialized plans
must be identical.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import cattrs

from omenative_core.model.observed import Snapshot
from omenative_core.model.plan import Plan
from omenative_core.planner import plan
from omenative_sim.runner import run_scenario
from omenative_sim.scenario import load_yaml, parse_scenario

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
COUNT = 200

_CHILD = """
import json, pickle, sys
import cattrs
from omenative_core.planner import plan
snaps = pickle.load(open(sys.argv[1], "rb"))
conv = cattrs.Converter()
for s in snaps:
    sys.stdout.write(json.dumps(conv.unstructure(plan(s)), default=str) + "\\n")
"""


_CONVERTER = cattrs.Converter()


def serialize(p: Plan) -> str:
    """A plan as JSON text in the order its fields and dicts hold (no sorting)."""
    return json.dumps(_CONVERTER.unstructure(p), default=str)


def _snapshots() -> list[Snapshot]:
    """``COUNT`` snapshots with distinct plans, spread over the example scenarios."""
    seen: dict[str, Snapshot] = {}

    def record(snap: Snapshot) -> Plan:
        p = plan(snap)
        seen.setdefault(serialize(p), snap)
        return p

    for path in sorted(EXAMPLES.glob("*.yaml")):
        raw: Any = load_yaml(path.read_text())
        if "replica" not in raw:
            continue  # a whole InferenceService (service-canary): not one planner's input
        run_scenario(parse_scenario(raw), seed=1, planner=record)
    distinct = list(seen.values())
    step = max(len(distinct) // COUNT, 1)
    return distinct[::step][:COUNT]


def test_plans_are_identical_under_other_hash_seeds(tmp_path: Path) -> None:
    snaps = _snapshots()
    assert len(snaps) == COUNT
    here = [serialize(plan(s)) for s in snaps]
    assert len(set(here)) == COUNT, "the sample holds as many different plans as snapshots"
    data = tmp_path / "snapshots.pickle"
    data.write_bytes(pickle.dumps(snaps))
    # a seed other than this interpreter's (random unless PYTHONHASHSEED is set)
    for seed in ("0" if os.environ.get("PYTHONHASHSEED") != "0" else "1",):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT / "src")}
        child = subprocess.run(
            [sys.executable, "-c", _CHILD, str(data)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert child.returncode == 0, child.stderr
        there = child.stdout.splitlines()
        assert len(there) == COUNT
        for i, (a, b) in enumerate(zip(here, there, strict=True)):
            assert a == b, f"snapshot {i}: plans differ under PYTHONHASHSEED={seed}"

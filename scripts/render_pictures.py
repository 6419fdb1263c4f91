"""Regenerate the pictures of docs/ (``make pictures``) and the data they are drawn from.

Each simulator picture has two files in ``docs/pictures/``: ``NAME.json``, the run's
``--json`` object (seed 0), and ``NAME.svg``, drawn from it. The data is what a reviewer
can diff and what ``--check`` (and ``tests/unit/test_pictures.py``) compares with a fresh
run: a planner or simulator change that changes a picture's story shows as stale data.
The SVG bytes depend on the matplotlib release too, so they are regenerated, not compared.
A traffic picture (``traffic-*.json``, recorded by ``make demo``) is only redrawn.

    python scripts/render_pictures.py            # write data and pictures
    python scripts/render_pictures.py --check    # exit 1 when committed data is stale
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omenative_devcluster.traffic_picture import render_file
from omenative_sim import parse_scenario, run_scenario
from omenative_sim.advise import parse_advise_scenario, run_advise_scenario
from omenative_sim.pictures import save_figure
from omenative_sim.pictures.advice import advise_figure
from omenative_sim.pictures.timeline import replica_figure, service_figure
from omenative_sim.scenario import load_yaml
from omenative_sim.service import parse_service_scenario, run_service_scenario

ROOT = Path(__file__).resolve().parents[1]
PICTURES = ROOT / "docs" / "pictures"
EXAMPLES = ROOT / "examples"


def _replica(raw: Any) -> dict[str, Any]:
    return run_scenario(parse_scenario(raw), seed=0).to_json()


def _service(raw: Any) -> dict[str, Any]:
    return run_service_scenario(parse_service_scenario(raw), seed=0).to_json()


def _advise(raw: Any) -> dict[str, Any]:
    return run_advise_scenario(parse_advise_scenario(raw), seed=0).to_json()


SIMULATED: dict[str, tuple[str, Callable[[Any], dict[str, Any]]]] = {
    "engine-gang": ("replica", _replica),
    "bad-image": ("replica", _replica),
    "service-canary": ("service", _service),
    "advisor-fragmented": ("advise", _advise),
}
"""The docs' simulator pictures: example name -> (kind, how its data is made)."""


def picture_data(name: str) -> dict[str, Any]:
    """A fresh run of ``examples/NAME.yaml`` at seed 0: the data its picture is drawn from
(the ``--json`` object without ``final``)."""
    _, run = SIMULATED[name]
    data = run(load_yaml((EXAMPLES / f"{name}.yaml").read_text(encoding="utf-8")))
    data.pop("final", None)  # the final status is not drawn (and churns with every codec change)
    return data


def dump(data: dict[str, Any]) -> str:
    """The JSON text the data is committed as (stable: indented, keys in run order)."""
    return json.dumps(data, indent=1) + "\n"


def draw(kind: str, data: dict[str, Any], out: Path, title: str) -> None:
    """Draw one picture (matplotlib, the ``plot`` extra, is imported here)."""
    figures = {"replica": replica_figure, "service": service_figure, "advise": advise_figure}
    save_figure(figures[kind](data, title=title), out)


def stale() -> list[str]:
    """The committed data files that a fresh run no longer reproduces."""
    return [name for name in SIMULATED
            if (PICTURES / f"{name}.json").read_text(encoding="utf-8")
            != dump(picture_data(name))]


def main() -> int:
    """Write (or with ``--check`` compare) the docs' picture data, and draw the pictures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare the data, write nothing")
    args = parser.parse_args()
    if args.check:
        names = stale()
        for name in names:
            print(f"docs/pictures/{name}.json is stale: run `make pictures`")
        return 1 if names else 0
    PICTURES.mkdir(parents=True, exist_ok=True)
    for name, (kind, _) in SIMULATED.items():
        data = picture_data(name)
        (PICTURES / f"{name}.json").write_text(dump(data), encoding="utf-8")
        draw(kind, data, PICTURES / f"{name}.svg", f"{name}.yaml (seed 0)")
        print(f"docs/pictures/{name}.svg")
    for recorded in sorted(PICTURES.glob("traffic-*.json")):
        out = render_file(recorded, recorded.with_suffix(".svg"))
        print(f"docs/pictures/{out.name} (from the recorded {recorded.name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

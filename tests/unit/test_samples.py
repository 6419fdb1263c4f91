"""config/samples/chat.yaml is the documentation's `chat` example, and renders as it says.

A user copies from docs/serve-a-model.md or applies the sample; both must be the same
objects, and the preview the guide prints must be what the core renders for them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from omenative_core.service import isvc_from_json, render_service, runtime_from_json

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "serve-a-model.md"
SAMPLE = REPO / "config" / "samples" / "chat.yaml"


def _fenced(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", GUIDE.read_text(), re.S)


def _sample() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(SAMPLE.read_text()) if d]


def test_the_sample_holds_the_guides_runtime_and_service() -> None:
    runtime, isvc = (yaml.safe_load(b) for b in _fenced("yaml")[:2])
    assert isvc["metadata"].pop("namespace") == "llm"  # the sample takes `kubectl -n`
    assert _sample() == [runtime, isvc]


def test_the_sample_renders_what_the_guide_shows() -> None:
    runtime_json, isvc_json = _sample()
    isvc_json = {**isvc_json, "metadata": {**isvc_json["metadata"], "namespace": "llm"}}
    plan = render_service(isvc_from_json(isvc_json), [runtime_from_json(runtime_json)],
                          crds_present=[])
    lines = []
    for component in plan.components:
        lines.append(f"{component.component} {component.mode} ({component.mode_source})")
        lines.extend(f"   {o['kind']} {o['metadata']['name']}" for o in component.objects)
    shown = next(b for b in _fenced("text") if b.startswith("engine OMENative"))
    assert lines == shown.rstrip("\n").split("\n")
    (engine,) = [c for c in plan.components if c.component == "engine"]
    assert engine.replica is not None
    runners = {r["name"]: r.get("size", 1) for r in engine.replica["spec"]["runners"]}
    assert runners == {"leader": 1, "worker": 1}
    assert engine.replica["spec"]["replicas"] == 2

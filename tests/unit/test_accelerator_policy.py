"""OME's accelerator selection policy ``FirstAvailable`` and its constraint filter
(ome-projects/ome@cfa05c69 ``pkg/acceleratorclassselector/selector.go``
``getAcceleratorClassByPolicy``, ``policy_helpers.go`` ``meetsRequirements``)."""

from __future__ import annotations

from typing import Any

import pytest
from test_service_accelerators import H100, engine, pod_spec

from omenative_core.service import accelerator_class_from_json, runtime_from_json
from omenative_core.service.accelerator_policy import meets_constraints, quantity_gib


def cls(name: str, **spec: Any) -> Any:
    return accelerator_class_from_json({
        "kind": "AcceleratorClass", "metadata": {"name": name},
        "spec": {"discovery": {"nodeSelector": {"gpu": name}}, **spec}})


A100 = cls("nvidia-a100", vendor="nvidia", family="ampere",
           capabilities={"memoryGB": "80Gi", "computeCapability": "8.0",
                         "features": ["tensor-cores"]})
H200 = cls("nvidia-h200", vendor="nvidia", family="hopper",
           capabilities={"memoryGB": "141Gi", "computeCapability": "9.0",
                         "features": ["tensor-cores", "fp8"]})


def two_class_runtime() -> Any:
    return runtime_from_json({"kind": "ClusterServingRuntime", "metadata": {"name": "srt"},
        "spec": {
            "acceleratorRequirements": {"acceleratorClasses": [
                "missing", "nvidia-a100", "nvidia-h200", "nvidia-a100"]},
            "supportedModelFormats": [{"modelFormat": {"name": "safetensors"},
                                       "autoSelect": True}],
            "engineConfig": {"runner": {"name": "ome-container", "image": "srt:1"}}}})


def chosen(selector: dict[str, Any], component: dict[str, Any] | None = None) -> str | None:
    spec: dict[str, Any] = {"acceleratorSelector": selector}
    if component is not None:
        spec["engine"] = component
    got = pod_spec(engine(spec, [A100, H200, H100], two_class_runtime()))
    return got.get("nodeSelector", {}).get("gpu")  # type: ignore[no-any-return]


def test_first_available_takes_the_runtimes_first_existing_class() -> None:
    assert chosen({"policy": "FirstAvailable"}) == "nvidia-a100"


def test_constraints_filter_the_candidates_first() -> None:
    assert chosen({"policy": "FirstAvailable",
                   "constraints": {"requiredFeatures": ["FP8"]}}) == "nvidia-h200"
    assert chosen({"policy": "FirstAvailable",
                   "constraints": {"minMemory": 100}}) == "nvidia-h200"
    assert chosen({"policy": "FirstAvailable",
                   "constraints": {"excludedClasses": ["nvidia-a100"]}}) == "nvidia-h200"
    assert chosen({"policy": "FirstAvailable",
                   "constraints": {"architectureFamilies": ["nvidia-hopper"]}}) == "nvidia-h200"
    assert chosen({"policy": "FirstAvailable",
                   "constraints": {"minArchitectureVersion": "9.5"}}) is None


def test_the_components_override_policy_wins_and_a_named_class_wins_over_a_policy() -> None:
    assert chosen({}, {"acceleratorOverride": {"policy": "FirstAvailable"}}) == "nvidia-a100"
    assert chosen({"policy": "FirstAvailable", "acceleratorClass": "nvidia-h200"}) == \
        "nvidia-h200"


def test_the_scoring_policies_are_not_implemented_and_choose_nothing() -> None:
    for policy in ("BestFit", "Cheapest", "MostCapable"):
        assert chosen({"policy": policy}) is None


@pytest.mark.parametrize(("text", "gib"), [("80Gi", 80), ("96G", 89), ("1Ti", 1024),
                                           (85899345920, 80), ("x", None), ("", None)])
def test_quantities_in_whole_gib(text: object, gib: int | None) -> None:
    assert quantity_gib(text) == gib


def test_memory_bounds_need_a_memory_capability() -> None:
    assert not meets_constraints(cls("bare"), {"maxMemory": 10})
    assert meets_constraints(cls("bare"), {})

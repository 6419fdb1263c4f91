"""OME's accelerator selection policies and their constraint filter
(ome-projects/ome@cfa05c69 ``pkg/acceleratorclassselector/selector.go``
``getAcceleratorClassByPolicy``, ``selectBestFit``, ``selectCheapest``, ``selectMostCapable``;
``policy_helpers.go``; the cases of ``selector_test.go``)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from test_service_accelerators import H100, MODEL, engine, pod_spec

from omenative_core.codec import CodecError
from omenative_core.service import (
    accelerator_class_from_json,
    isvc_from_json,
    render_service,
    runtime_from_json,
)
from omenative_core.service.accelerator_policy import meets_constraints, quantity_gib
from omenative_core.service.accelerators import quantity


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


# OME's realistic classes (selector_test.go ``createRealisticAccelerators``).
OME_H100 = cls("nvidia-h100-80gb", vendor="NVIDIA", family="Hopper", capabilities={
    "memoryGB": "80Gi", "memoryBandwidthGBps": "3k", "computeCapability": "9.0",
    "features": ["cuda", "tensor-cores", "nvlink", "fp8"],
    "performance": {"fp32Tflops": 67, "fp16Tflops": 1979, "int8Tops": 3958, "int4Tops": 7916}},
    cost={"perHour": "4", "spotPerHour": "2", "perMillionTokens": "100", "tier": "high"})
OME_A100 = cls("nvidia-a100-40gb", vendor="NVIDIA", family="Ampere", capabilities={
    "memoryGB": "40Gi", "memoryBandwidthGBps": "1555", "computeCapability": "8.0",
    "features": ["cuda", "tensor-cores", "nvlink"],
    "performance": {"fp32Tflops": 19, "fp16Tflops": 312, "int8Tops": 624}},
    cost={"perHour": "2", "spotPerHour": "1", "perMillionTokens": "50", "tier": "medium"})
OME_T4 = cls("nvidia-t4", vendor="NVIDIA", family="Turing", capabilities={
    "memoryGB": "16Gi", "memoryBandwidthGBps": "320", "computeCapability": "7.5",
    "features": ["cuda", "tensor-cores"],
    "performance": {"fp32Tflops": 8, "fp16Tflops": 65, "int8Tops": 130}},
    cost={"perHour": "1", "spotPerHour": "0", "perMillionTokens": "20", "tier": "low"})


def listed_runtime(names: list[str]) -> Any:
    return runtime_from_json({"kind": "ClusterServingRuntime", "metadata": {"name": "srt"},
        "spec": {
            "acceleratorRequirements": {"acceleratorClasses": names},
            "supportedModelFormats": [{"modelFormat": {"name": "safetensors"},
                                       "autoSelect": True}],
            "engineConfig": {"runner": {"name": "ome-container", "image": "srt:1"}}}})


def pick(policy: str, names: list[str], classes: list[Any] | None = None,
         **constraints: Any) -> str | None:
    selector: dict[str, Any] = {"policy": policy, "constraints": constraints}
    cp = engine({"acceleratorSelector": selector},
                classes if classes is not None else [OME_H100, OME_A100, OME_T4],
                listed_runtime(names))
    return pod_spec(cp).get("nodeSelector", {}).get("gpu")  # type: ignore[no-any-return]


ALL = ["nvidia-h100-80gb", "nvidia-a100-40gb", "nvidia-t4"]


@pytest.mark.parametrize(("names", "constraints", "expected"), [
    # TestSelectBestFit_Integration
    (ALL[:2], {"minMemory": 40, "preferredPrecisions": ["fp16"]}, "nvidia-a100-40gb"),
    (ALL, {"minMemory": 80, "preferredPrecisions": ["fp16"]}, "nvidia-h100-80gb"),
    (ALL[:2], {"minMemory": 80, "preferredPrecisions": ["fp8", "fp16"]}, "nvidia-h100-80gb"),
    (ALL[1:], {"minMemory": 16, "requiredFeatures": ["nvlink"]}, "nvidia-a100-40gb"),
    (ALL, {"minMemory": 16, "maxMemory": 20}, "nvidia-t4"),
])
def test_best_fit_avoids_over_provisioning(names: list[str], constraints: dict[str, Any],
                                           expected: str) -> None:
    assert pick("BestFit", names, **constraints) == expected


def test_best_fit_scores_compute_below_the_required_tflops_lower() -> None:
    # Same memory fit (no minMemory): the class meeting 1000 TFLOPS wins over the one at 312.
    assert pick("BestFit", ALL[1::-1], minComputePerformanceTFLOPS=1000) == "nvidia-h100-80gb"


@pytest.mark.parametrize(("names", "constraints", "expected"), [
    # TestSelectCheapest_Integration: spot prices first (T4's spot 0)
    (ALL, {"minMemory": 16}, "nvidia-t4"),
    (ALL[:2], {"minMemory": 40}, "nvidia-a100-40gb"),
    (ALL[:2], {"minMemory": 80}, "nvidia-h100-80gb"),
])
def test_cheapest_takes_the_lowest_hourly_price(names: list[str], constraints: dict[str, Any],
                                                expected: str) -> None:
    assert pick("Cheapest", names, **constraints) == expected


@pytest.mark.parametrize(("costs", "expected"), [
    # TestSelectCheapest_CostTypeGrouping
    ({"a": {"spotPerHour": "5"}, "b": {"perHour": "3"}}, "b"),
    ({"a": {"perHour": "10"}, "b": {"perMillionTokens": "1"}}, "a"),
    ({"a": {"perMillionTokens": "50"}, "b": {"perMillionTokens": "10"}}, "b"),
    ({"a": {"tier": "high"}, "b": {"tier": "low"}}, "b"),
    ({"a": {"perHour": "2500m"}, "b": {"perHour": "2.4"}}, "b"),
    ({"a": {"perHour": "3"}, "b": {"perHour": "3"}}, "a"),  # a tie: the runtime's first
    ({"a": {"tier": "gold"}, "b": {"tier": "medium"}}, "a"),  # unknown tier = medium, tie
])
def test_cheapest_compares_one_price_unit_at_a_time(costs: dict[str, Any],
                                                    expected: str) -> None:
    classes = [cls(n, cost=c) for n, c in costs.items()]
    assert pick("Cheapest", list(costs), classes) == expected


@pytest.mark.parametrize(("constraints", "expected"), [
    # TestSelectMostCapable_Integration
    ({"minMemory": 16, "preferredPrecisions": ["fp8", "fp16"]}, "nvidia-h100-80gb"),
    ({"minMemory": 16, "preferredPrecisions": ["fp32"]}, "nvidia-h100-80gb"),
    ({"minMemory": 16, "maxMemory": 50, "preferredPrecisions": ["fp16"]}, "nvidia-a100-40gb"),
])
def test_most_capable_weighs_memory_bandwidth_and_tflops(constraints: dict[str, Any],
                                                         expected: str) -> None:
    assert pick("MostCapable", ALL, **constraints) == expected


def test_the_guides_classes_give_the_guides_answers() -> None:
    # ome-docs guides/deploy-models/select-accelerators.md, Step 3's table.
    h100 = cls("nvidia-h100", vendor="nvidia", family="hopper", capabilities={
        "memoryGB": "80Gi", "computeCapability": "9.0", "memoryBandwidthGBps": "3350",
        "performance": {"fp16Tflops": 989}}, cost={"perHour": "10"})
    h200 = cls("nvidia-h200", vendor="nvidia", family="hopper", capabilities={
        "memoryGB": "141Gi", "computeCapability": "9.0", "memoryBandwidthGBps": "4800",
        "performance": {"fp16Tflops": 989}}, cost={"perHour": "12"})
    names, classes = ["nvidia-h100", "nvidia-h200"], [h100, h200]
    assert pick("BestFit", names, classes, minMemory=80) == "nvidia-h100"
    assert pick("Cheapest", names, classes) == "nvidia-h100"
    assert pick("MostCapable", names, classes) == "nvidia-h200"
    assert pick("FirstAvailable", names, classes) == "nvidia-h100"


def test_equal_scores_take_the_runtimes_first_class() -> None:
    twin = cls("twin", capabilities={"memoryGB": "80Gi", "performance": {"fp16Tflops": 989}})
    other = cls("other", capabilities={"memoryGB": "80Gi", "performance": {"fp16Tflops": 989}})
    assert pick("BestFit", ["twin", "other"], [twin, other], minMemory=80) == "twin"
    assert pick("BestFit", ["other", "twin"], [twin, other], minMemory=80) == "other"
    assert pick("MostCapable", ["other", "twin"], [twin, other]) == "other"


def render(selector: dict[str, Any], names: list[str], classes: list[Any]) -> Any:
    isvc = isvc_from_json({"kind": "InferenceService",
                           "metadata": {"name": "chat", "namespace": "prod"},
                           "spec": {"deploymentMode": "OMENative", "model": {"name": "m"},
                                    "runtime": {"name": "srt"},
                                    "engine": {}, "acceleratorSelector": selector}})
    return render_service(isvc, [listed_runtime(names)], (), models=[MODEL],
                          accelerator_classes=classes)


def test_best_fit_without_constraints_blocks_naming_the_field_where_ome_crashes() -> None:
    plan = render({"policy": "BestFit"}, ALL, [OME_H100, OME_A100, OME_T4])
    cp = plan.component("engine")
    assert cp is not None and cp.blocked and cp.ready is not None
    assert cp.ready.reason == "AcceleratorClassError"
    assert "spec.acceleratorSelector.constraints" in cp.ready.message
    # One qualifying class needs no scoring: OME picks it, and so does omenative.
    single = render({"policy": "BestFit"}, ["nvidia-t4"], [OME_T4]).component("engine")
    assert pod_spec(single)["nodeSelector"]["gpu"] == "nvidia-t4"


def test_a_policy_that_finds_no_class_warns_and_renders_without_one() -> None:
    plan = render({"policy": "Cheapest", "constraints": {"minMemory": 500}},
                  ["missing", *ALL], [OME_H100, OME_A100, OME_T4])
    spec = pod_spec(plan.component("engine"))
    assert "gpu" not in spec.get("nodeSelector", {})
    (event,) = [e for e in plan.events if e.reason == "NoAcceleratorClassMatched"]
    assert event.type == "Warning"
    assert "spec.acceleratorSelector.policy: Cheapest found no class for the engine" in \
        event.message
    assert "missing (no such AcceleratorClass)" in event.message
    assert "nvidia-t4 (fails spec.acceleratorSelector.constraints)" in event.message
    (cond,) = [c for c in plan.conditions if c.type == "AcceleratorClassSelected"]
    assert (cond.status, cond.reason) == ("False", "NoAcceleratorClassMatched")
    # Classes without a cost are no candidates for Cheapest.
    bare = render({"policy": "Cheapest"}, ["a", "b"], [cls("a"), cls("b")])
    (cond,) = [c for c in bare.conditions if c.type == "AcceleratorClassSelected"]
    assert "a (no spec.cost); b (no spec.cost)" in cond.message


def test_a_selected_class_removes_the_condition() -> None:
    plan = render({"policy": "Cheapest"}, ALL, [OME_H100, OME_A100, OME_T4])
    assert "AcceleratorClassSelected" in plan.removed_conditions
    assert not [c for c in plan.conditions if c.type == "AcceleratorClassSelected"]


def test_an_unknown_policy_on_a_loose_schema_warns_naming_the_field() -> None:
    plan = render({"policy": "Fastest"}, ALL, [OME_H100])
    (event,) = [e for e in plan.events if e.reason == "NoAcceleratorClassMatched"]
    assert event.message.startswith("spec.acceleratorSelector.policy: 'Fastest' is not one of")


@pytest.mark.parametrize(("text", "value"), [
    ("2500m", Fraction(5, 2)), ("1e3", Fraction(1000)), ("3k", Fraction(3000)),
    ("1Gi", Fraction(2**30)), (".5", Fraction(1, 2)), (7, Fraction(7)), ("ten", None),
    (True, None)])
def test_cost_quantities_are_read_exactly(text: object, value: Fraction | None) -> None:
    assert quantity(text) == value


@pytest.mark.parametrize(("text", "gib"), [("80Gi", 80), ("96G", 89), ("1Ti", 1024),
                                           (85899345920, 80), ("x", None), ("", None)])
def test_quantities_in_whole_gib(text: object, gib: int | None) -> None:
    assert quantity_gib(text) == gib


def test_memory_bounds_need_a_memory_capability() -> None:
    assert not meets_constraints(cls("bare"), {"maxMemory": 10})
    assert meets_constraints(cls("bare"), {})


def test_a_class_with_a_bad_cost_is_refused_naming_the_field() -> None:
    with pytest.raises(CodecError, match=r"spec\.cost\.perHour: 'cheap' is not a Kubernetes"):
        cls("bad", cost={"perHour": "cheap"})

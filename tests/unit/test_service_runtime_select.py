"""OME's runtime auto-selection, and what a render does with it.

The runtimes, models, expected orders and scores of ``test_get_compatible_runtimes_*`` are
transcribed from OME's ``pkg/runtimeselector/selector_test.go`` (``TestGetSupportingRuntimes``
and ``TestSortSupportedRuntime``) at ome-projects/ome commit
cfa05c6967648a1bd62e2d96221f06aa1dec95fe.
"""

from __future__ import annotations

from typing import Any

import pytest

from omenative_core.service import (
    BaseModel,
    basemodel_from_json,
    compatible_runtimes,
    isvc_from_json,
    render_service,
    runtime_from_json,
    select_runtime,
)


def fmt(name: str, weight: int = 0, *, auto: bool | None = True, priority: int | None = None,
        **extra: Any) -> dict[str, Any]:
    weights = {"weight": weight} if weight else {}
    entry: dict[str, Any] = {"modelFormat": {"name": name, **weights}, **extra}
    if auto is not None:
        entry["autoSelect"] = auto
    if priority is not None:
        entry["priority"] = priority
    return entry


def rt(name: str, formats: list[dict[str, Any]], size: tuple[str, str] | None = None, *,
       cluster: bool = False, namespace: str = "default", **spec: Any) -> Any:
    body: dict[str, Any] = {"supportedModelFormats": formats, **spec}
    if size is not None:
        body["modelSizeRange"] = {"min": size[0], "max": size[1]}
    meta: dict[str, Any] = {"name": name}
    if not cluster:
        meta["namespace"] = namespace
    return runtime_from_json({"kind": "ClusterServingRuntime" if cluster else "ServingRuntime",
                              "metadata": meta, "spec": body})


def mdl(fmt_name: str, size: str | None = None, **spec: Any) -> BaseModel:
    body: dict[str, Any] = {"modelFormat": {"name": fmt_name}, **spec}
    if size is not None:
        body["modelParameterSize"] = size
    return basemodel_from_json({"kind": "ClusterBaseModel", "metadata": {"name": "m"},
                                "spec": {**body, "storage": {"path": "/models/m"}}})


def isvc(spec: dict[str, Any] | None = None, namespace: str = "default", **meta: Any) -> Any:
    return isvc_from_json({"kind": "InferenceService",
                           "metadata": {"name": "chat", "namespace": namespace, **meta},
                           "spec": spec or {}})


# TestGetSupportingRuntimes' runtimes
OME_RUNTIMES = [
    rt("pytorch-rt", [fmt("pytorch", 10, priority=2)], ("1B", "10B")),
    rt("onnx-rt", [fmt("onnx", 8, priority=1)], ("10B", "20B")),
    rt("tensorflow-rt", [fmt("tensorflow", 12)], ("50B", "100B")),
    rt("multi-format-rt", [fmt("pytorch", 5, priority=1), fmt("onnx", 5, priority=1)],
       ("1B", "20B")),
    rt("disabled-rt", [fmt("pytorch")], disabled=True),
    rt("no-autoselect-rt", [fmt("pytorch", 20, auto=False)]),
    rt("cluster-pytorch-rt", [fmt("pytorch", 7)], ("5B", "15B"), cluster=True),
]


@pytest.mark.parametrize(("model", "expected"), [
    (mdl("pytorch", "7B"),
     [("pytorch-rt", 20), ("multi-format-rt", 5), ("cluster-pytorch-rt", 7)]),
    (mdl("onnx", "13B"), [("onnx-rt", 8), ("multi-format-rt", 5)]),
    (mdl("tensorflow", "70B"), [("tensorflow-rt", 12)]),
    (mdl("unknown-format"), []),
    (mdl("pytorch", "200B"), []),
])
def test_get_compatible_runtimes_matches_omes_order_and_scores(
        model: BaseModel, expected: list[tuple[str, int]]) -> None:
    got = compatible_runtimes(isvc(), model, OME_RUNTIMES)
    assert [(s.runtime.name, s.score) for s in got if s.runtime] == expected


def test_equal_scores_prefer_the_closest_size_range() -> None:
    """TestSortSupportedRuntime "sort by model size range when scores are equal"."""
    runtimes = [rt("far-size-runtime", [fmt("f", 10)], ("20B", "30B")),
                rt("close-size-runtime", [fmt("f", 10)], ("5B", "10B"))]
    model = mdl("f", "7B")
    assert [s.runtime.name for s in compatible_runtimes(isvc(), model, runtimes)
            if s.runtime] == ["close-size-runtime"]  # 7B is outside [20B, 30B]
    runtimes[0] = rt("far-size-runtime", [fmt("f", 10)], ("1B", "30B"))
    order = [s.runtime.name for s in compatible_runtimes(isvc(), model, runtimes) if s.runtime]
    assert order == ["close-size-runtime", "far-size-runtime"]


def test_framework_adds_its_weight_times_priority() -> None:
    """TestSortSupportedRuntime "higher score wins": (10 + 8) x 2 = 36."""
    high = rt("high-score-runtime", [fmt("test-format", 10, priority=2,
                                         modelFramework={"name": "test-framework", "weight": 8})])
    low = rt("low-score-runtime", [fmt("test-format", 5, priority=1,
                                       modelFramework={"name": "test-framework"})])
    model = mdl("test-format", modelFramework={"name": "test-framework"})
    got = compatible_runtimes(isvc(), model, [low, high])
    assert [(s.runtime.name, s.score) for s in got if s.runtime] == [
        ("high-score-runtime", 36), ("low-score-runtime", 10)]


def test_a_namespace_runtime_of_another_namespace_is_not_a_candidate() -> None:
    other = rt("pytorch-rt", [fmt("pytorch", 10)], namespace="elsewhere")
    assert select_runtime(isvc(), mdl("pytorch"), [other]).runtime is None


def test_no_candidate_gives_omes_message_with_each_excluded_runtime() -> None:
    sel = select_runtime(isvc(), mdl("pytorch", "200B"), OME_RUNTIMES)
    assert sel.runtime is None
    assert sel.message.startswith(
        "no runtime found to support model pytorch with format pytorch in namespace default. "
        "Checked 7 runtimes (6 namespace-scoped, 1 cluster-scoped). Excluded runtimes: ")
    assert "pytorch-rt (model size 200B is outside supported range [1B, 10B])" in sel.message


def test_architecture_and_quantization_must_match_on_both_sides() -> None:
    arch = rt("arch-rt", [fmt("safetensors", modelArchitecture="LlamaForCausalLM")])
    assert select_runtime(isvc(), mdl("safetensors"), [arch]).runtime is None
    llama = mdl("safetensors", modelArchitecture="LlamaForCausalLM")
    assert select_runtime(isvc(), llama, [arch]).runtime is not None
    fp8 = mdl("safetensors", modelArchitecture="LlamaForCausalLM", quantization="fp8")
    assert select_runtime(isvc(), fp8, [arch]).runtime is None


def test_format_version_operators() -> None:
    ge = rt("ge", [{"modelFormat": {"name": "safetensors", "version": "1.2",
                                    "operator": "GreaterThanOrEqual"}, "autoSelect": True}])
    assert select_runtime(isvc(), mdl("safetensors", modelFormat={"name": "safetensors",
                                                                  "version": "1.3"}),
                          [ge]).runtime is not None
    assert select_runtime(isvc(), mdl("safetensors", modelFormat={"name": "safetensors",
                                                                  "version": "1.1"}),
                          [ge]).runtime is None


def test_accelerator_class_asked_for_must_be_offered() -> None:
    plain = rt("plain", [fmt("pytorch")])
    h100 = rt("h100", [fmt("pytorch")],
              acceleratorRequirements={"acceleratorClasses": ["nvidia-h100"]})
    asks = isvc(annotations={"ome.io/accelerator-class": "nvidia-h100"})
    assert select_runtime(asks, mdl("pytorch"), [plain, h100]).runtime.name == "h100"  # type: ignore[union-attr]


# ---------------------------------------------------------------------------- in a render


SERVE_RT = rt("srt", [fmt("safetensors")], cluster=True,
              engineConfig={"runner": {"name": "ome-container", "image": "srt:1"}})


def test_render_without_spec_runtime_uses_the_selected_runtime() -> None:
    plan = render_service(isvc({"deploymentMode": "OMENative", "model": {"name": "m"},
                                "engine": {}}), [SERVE_RT], (), models=[mdl("safetensors")])
    assert plan.runtime is not None and plan.runtime.name == "srt"
    engine = plan.component("engine")
    assert engine is not None and not engine.blocked
    assert engine.replica is not None
    container = engine.replica["spec"]["runners"][0]["template"]["spec"]["containers"][0]
    assert container["image"] == "srt:1"


def test_render_with_no_runtime_for_the_model_is_runtime_not_found() -> None:
    plan = render_service(isvc({"model": {"name": "m"}, "engine": {}}), [SERVE_RT], (),
                          models=[mdl("gguf")])
    engine = plan.component("engine")
    assert engine is not None and engine.blocked and engine.ready is not None
    assert engine.ready.reason == "RuntimeNotFound"
    assert engine.ready.message.startswith("no runtime found to support model gguf")


def test_a_named_runtime_that_does_not_declare_the_model_renders_with_an_advisory() -> None:
    plan = render_service(isvc({"deploymentMode": "OMENative", "model": {"name": "m"},
                                "runtime": {"name": "srt"}, "engine": {}}),
                          [SERVE_RT], (), models=[mdl("gguf")])
    engine = plan.component("engine")
    assert engine is not None and not engine.blocked
    assert [e.reason for e in plan.events] == ["RuntimeCompatibilityAdvisory"]
    assert plan.events[0].type == "Warning"
    assert plan.events[0].message.startswith("Runtime srt does not declare support for model m")
    assert plan.events[0].message.endswith("proceeding because the runtime was named explicitly")


def test_the_advisory_is_omes_text_from_the_prefill_decode_guide() -> None:
    """OME v1.3's guide "Serve a prefill-decode model" prints this for its catalog runtime
    ``srt-llama-3-2-1b-instruct-pd`` (formats as in ome-projects/ome
    ``config/runtimes/srt/meta/llama-3-2-1b-instruct-pd-rt.yaml`` at cfa05c69) and the model
    as OME's agent records it."""
    pd = rt("srt-llama-3-2-1b-instruct-pd", [{
        "modelFramework": {"name": "transformers", "version": "4.43.0"},
        "modelFormat": {"name": "safetensors", "version": "1.0.0"},
        "modelArchitecture": "LlamaForCausalLM", "autoSelect": False, "priority": 1}],
        ("500M", "2B"), cluster=True, engineConfig={"runner": {"image": "srt:1"}})
    llama = basemodel_from_json({"kind": "ClusterBaseModel",
                                 "metadata": {"name": "llama-3-2-1b-instruct"},
                                 "spec": {"modelFormat": {"name": "safetensors",
                                                          "version": "1.0.0"},
                                          "modelArchitecture": "LlamaForCausalLM",
                                          "modelFramework": {"name": "transformers",
                                                             "version": "4.45.0.dev0"},
                                          "modelParameterSize": "1.24B",
                                          "storage": {"path": "/raid/models/llama"}}})
    plan = render_service(isvc({"deploymentMode": "OMENative",
                                "model": {"name": "llama-3-2-1b-instruct"},
                                "runtime": {"name": "srt-llama-3-2-1b-instruct-pd"},
                                "engine": {}}), [pd], (), models=[llama])
    (event,) = plan.events
    assert event.message == (
        "Runtime srt-llama-3-2-1b-instruct-pd does not declare support for model "
        "llama-3-2-1b-instruct (runtime srt-llama-3-2-1b-instruct-pd does not support model "
        "safetensors: model format 'mt:safetensors:1.0.0:LlamaForCausalLM:transformers:"
        "4.45.0.dev0' not in supported formats: framework version mismatch "
        "(model=4.45.0.dev0, runtime=4.43.0)); proceeding because the runtime was named "
        "explicitly")

"""OME v1.3's admission of an InferenceService's model and runtime (``model_admission``).

Each case is a branch of OME's validator (ome-projects/ome
``pkg/webhook/admission/isvc/inference_service_validation.go`` at ca73aa4c:
``validateModelExists``, ``validateRuntimeAndModelResolution``,
``validateRuntimeOnlyAvailability``, ``resolveModelAndRuntime``), with OME's message text.
"""

from __future__ import annotations

from typing import Any

from omenative_core.service import basemodel_from_json, isvc_from_json, runtime_from_json
from omenative_core.service.admission_models import has_full_runner, model_admission


def model(name: str = "llama", *, kind: str = "ClusterBaseModel", **spec: Any) -> Any:
    meta: dict[str, Any] = {"name": name}
    if kind == "BaseModel":
        meta["namespace"] = "team"
    return basemodel_from_json({"kind": kind, "metadata": meta, "spec": {
        "modelFormat": {"name": "safetensors"}, "storage": {"path": f"/m/{name}"}, **spec}})


def runtime(name: str = "srt", *, fmt: str = "safetensors", **spec: Any) -> Any:
    return runtime_from_json({"kind": "ClusterServingRuntime", "metadata": {"name": name},
                              "spec": {"supportedModelFormats": [
                                  {"modelFormat": {"name": fmt}, "autoSelect": True}],
                                  "engineConfig": {"runner": {"image": "x"}}, **spec}})


def isvc(**spec: Any) -> Any:
    spec.setdefault("engine", {"minReplicas": 1})
    return isvc_from_json({"kind": "InferenceService",
                           "metadata": {"name": "chat", "namespace": "team"}, "spec": spec})


def reasons(found: list[Any]) -> list[tuple[str, bool]]:
    return [(r.reason, r.warning) for r in found]


def test_a_missing_model_is_refused_with_omes_message() -> None:
    (found,) = model_admission(isvc(model={"name": "nope"}), [runtime()], [model()])
    assert not found.warning
    assert found.message == (
        "ModelNotFound: referenced model 'nope' not found in namespace 'team': ensure a "
        "BaseModel exists in this namespace or a ClusterBaseModel exists cluster-wide with "
        "this name")


def test_a_basemodel_of_another_namespace_does_not_count() -> None:
    other = basemodel_from_json({"kind": "BaseModel",
                                 "metadata": {"name": "llama", "namespace": "elsewhere"},
                                 "spec": {"modelFormat": {"name": "safetensors"}}})
    found = model_admission(isvc(model={"name": "llama"}), [runtime()], [other])
    assert reasons(found) == [("ModelNotFound", False)]


def test_without_the_model_crds_the_model_is_not_checked() -> None:
    assert model_admission(isvc(model={"name": "nope"}), [], None) == []


def test_a_disabled_model_is_refused_when_it_must_be_resolved() -> None:
    found = model_admission(isvc(model={"name": "llama"}, runtime={"name": "srt"}),
                            [runtime()], [model(disabled=True)])
    assert [r.message for r in found] == ["ModelDisabled: model llama is disabled"]


def test_a_named_runtime_that_is_missing_is_refused_when_a_model_is_named() -> None:
    found = model_admission(isvc(model={"name": "llama"}, runtime={"name": "gone"}),
                            [runtime()], [model()])
    assert reasons(found) == [("RuntimeNotFound", False)]
    assert found[0].message.startswith("RuntimeNotFound: runtime gone does not support model "
                                       "llama: ")


def test_a_named_runtime_that_does_not_declare_the_format_is_admitted_with_the_advisory() -> None:
    found = model_admission(isvc(model={"name": "llama"}, runtime={"name": "srt"}),
                            [runtime(fmt="onnx")], [model()])
    assert reasons(found) == [("RuntimeCompatibilityAdvisory", True)]
    assert "proceeding because the runtime was named explicitly" in found[0].message


def test_auto_selection_is_named_in_a_warning() -> None:
    found = model_admission(isvc(model={"name": "llama"}), [runtime()], [model()])
    assert [r.message for r in found] == [
        "RuntimeAutoSelected: Runtime srt will be auto-selected for model llama"]


def test_no_runtime_for_the_model_is_refused() -> None:
    found = model_admission(isvc(model={"name": "llama"}), [runtime(fmt="onnx")], [model()])
    assert reasons(found) == [("RuntimeNotFound", False)]
    assert found[0].message.startswith(
        "RuntimeNotFound: no supporting runtime found for model llama and engine does not "
        "have complete runner configuration: no runtime found to support model")


def test_an_engine_with_its_own_image_skips_runtime_resolution() -> None:
    spec = isvc(model={"name": "llama"}, engine={"runner": {"image": "mine:1"}})
    assert model_admission(spec, [runtime(fmt="onnx")], [model(disabled=True)]) == []


def test_runtime_only_a_disabled_runtime_is_refused_a_missing_one_admitted() -> None:
    disabled = runtime(disabled=True)
    found = model_admission(isvc(runtime={"name": "srt"}), [disabled], [model()])
    assert reasons(found) == [("RuntimeDisabled", False)]
    assert model_admission(isvc(runtime={"name": "gone"}), [disabled], [model()]) == []
    pinned = isvc(runtime={"name": "srt", "autoSync": False})
    assert model_admission(pinned, [disabled], [model()]) == []


def test_full_runner_means_an_image_on_the_runner_or_on_leader_and_worker() -> None:
    assert has_full_runner({"runner": {"image": "a"}})
    assert has_full_runner({"leader": {"runner": {"image": "a"}},
                            "worker": {"runner": {"image": "b"}}})
    assert not has_full_runner({"leader": {"runner": {"image": "a"}}, "worker": {}})
    assert not has_full_runner({"runner": {"name": "x"}})

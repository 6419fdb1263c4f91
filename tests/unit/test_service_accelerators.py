"""Accelerator classes and a runtime's ``acceleratorConfig`` in the engine's pods.

``merge_args`` cases are transcribed from OME's ``TestMergeArgs`` and
``TestMergeArgsListFormat`` (``pkg/controller/v1beta1/inferenceservice/utils/merging_test.go``),
the resources case from ``components/engine_test.go`` "User did NOT specify resources -
should merge from AcceleratorClass", at ome-projects/ome commit
cfa05c6967648a1bd62e2d96221f06aa1dec95fe; the rest from ``components/base.go`` at that commit.
"""

from __future__ import annotations

from typing import Any

import pytest

from omenative_core.service import (
    accelerator_class_from_json,
    basemodel_from_json,
    isvc_from_json,
    merge_args,
    render_service,
    runtime_from_json,
)

ML = "python3 -m sglang.launch_server \\\n--host=0.0.0.0 \\\n--port=8080 \\\n--enable-metrics" \
     " \\\n--log-requests \\\n--model-path=\"$MODEL_PATH\" \\\n--mem-frac=0.9"


@pytest.mark.parametrize(("args", "overrides", "expected"), [
    ([ML], ["--tp-size=4"], [ML + " \\\n--tp-size=4"]),
    (["python3 -m sglang.launch_server \\\n--host=0.0.0.0 \\\n--mem-frac=0.9"], ["--tp-size=8"],
     ["python3 -m sglang.launch_server \\\n--host=0.0.0.0 \\\n--mem-frac=0.9 \\\n--tp-size=8"]),
    (["python3 -m server"], [], ["python3 -m server"]),
    ([], ["--tp-size=4"], ["--tp-size=4"]),
    (["python3 -m server"], ["--debug"], ["python3 -m server", "--debug"]),
    (["python3 -m sglang.launch_server \\\n--host=0.0.0.0"], ["--tp-size=4", "--pp-size=2"],
     ["python3 -m sglang.launch_server \\\n--host=0.0.0.0 \\\n--tp-size=4 \\\n--pp-size=2"]),
    (["python3 -m sglang.launch_server\n--host=0.0.0.0\n--port=8080"], ["--tp-size=4"],
     ["python3 -m sglang.launch_server \\\n--host=0.0.0.0 \\\n--port=8080 \\\n--tp-size=4"]),
    (["--tp-size=4", "--port=8080"], ["--tp-size=8"], ["--tp-size=8", "--port=8080"]),
    (["--tp-size=4", "--port=8080"], ["--host=0.0.0.0"],
     ["--tp-size=4", "--port=8080", "--host=0.0.0.0"]),
    (["--tp-size=4", "--pp-size=2", "--port=8080"], ["--tp-size=8", "--pp-size=4", "--debug"],
     ["--tp-size=8", "--pp-size=4", "--port=8080", "--debug"]),
    (["--tp-size", "4", "--port", "8080"], ["--tp-size", "8"],
     ["--tp-size", "8", "--port", "8080"]),
    (["--tp-size=4", "--port", "8080"], ["--tp-size=8", "--host=0.0.0.0"],
     ["--tp-size=8", "--port", "8080", "--host=0.0.0.0"]),
    (["python3", "-m", "server", "--port=8080"], ["--debug"],
     ["python3", "-m", "server", "--port=8080", "--debug"]),
    ([], [], []),
])
def test_merge_args_matches_omes_cases(args: list[str], overrides: list[str],
                                       expected: list[str]) -> None:
    assert merge_args(args, overrides) == expected


H100 = accelerator_class_from_json({
    "kind": "AcceleratorClass", "metadata": {"name": "nvidia-h100"},
    "spec": {"vendor": "nvidia",
             "discovery": {"nodeSelector": {"nvidia.com/gpu.product": "H100-SXM"}},
             "resources": [{"name": "nvidia.com/gpu", "quantity": "2"}]}})
MODEL = basemodel_from_json({"kind": "ClusterBaseModel", "metadata": {"name": "m"},
                             "spec": {"modelFormat": {"name": "safetensors"},
                                      "storage": {"path": "/models/m"}}})


def accel_runtime(**runner: Any) -> Any:
    return runtime_from_json({"kind": "ClusterServingRuntime", "metadata": {"name": "srt"},
        "spec": {
            "acceleratorRequirements": {"acceleratorClasses": ["nvidia-h100"]},
            "supportedModelFormats": [{
                "modelFormat": {"name": "safetensors"}, "autoSelect": True,
                "acceleratorConfig": {"nvidia-h100": {
                    "environmentOverride": {"NCCL_ALGO": "Ring"},
                    "runtimeArgsOverride": ["--mem-frac=0.85"],
                    "tensorParallelismOverride": {"tensorParallelSize": 4}}}}],
            "engineConfig": {"runner": {"name": "ome-container", "image": "srt:1",
                                        "args": ["--tp-size=1", "--mem-frac=0.9"],
                                        **runner}}}})


def engine(spec: dict[str, Any], classes: list[Any], rt: Any = None) -> Any:
    isvc = isvc_from_json({"kind": "InferenceService",
                           "metadata": {"name": "chat", "namespace": "prod"},
                           "spec": {"deploymentMode": "OMENative", "model": {"name": "m"},
                                    "runtime": {"name": "srt"}, **spec}})
    return render_service(isvc, [rt or accel_runtime()], (), models=[MODEL],
                          accelerator_classes=classes).component("engine")


def pod_spec(cp: Any) -> dict[str, Any]:
    assert cp is not None and not cp.blocked, cp.ready if cp is not None else None
    return cp.replica["spec"]["runners"][0]["template"]["spec"]  # type: ignore[no-any-return]


def test_the_class_and_its_accelerator_config_shape_the_engine() -> None:
    spec = pod_spec(engine({"engine": {"acceleratorOverride": {
        "acceleratorClass": "nvidia-h100"}}}, [H100]))
    (c,) = spec["containers"]
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["NCCL_ALGO"] == "Ring"
    assert "PARALLELISM_SIZE" not in env  # none with an AcceleratorClass
    assert c["args"] == ["--tp-size=4", "--mem-frac=0.85"]
    assert c["resources"]["requests"]["nvidia.com/gpu"] == "2"  # engine_test.go's case
    assert spec["nodeSelector"]["nvidia.com/gpu.product"] == "H100-SXM"
    assert spec["nodeSelector"]["models.ome.io/clusterbasemodel.m"] == "Ready"
    assert "acceleratorOverride" not in spec  # a setting, not a pod field


def test_the_services_own_resources_are_kept() -> None:
    spec = pod_spec(engine({"acceleratorSelector": {"acceleratorClass": "nvidia-h100"},
                            "engine": {"runner": {"resources": {"limits": {"cpu": "4"}}}}},
                           [H100]))
    assert spec["containers"][0]["resources"] == {"limits": {"cpu": "4"}}


def test_a_runtime_without_classes_ignores_the_selector_and_sets_parallelism() -> None:
    plain = runtime_from_json({"kind": "ClusterServingRuntime", "metadata": {"name": "srt"},
        "spec": {"engineConfig": {"runner": {"name": "ome-container", "image": "srt:1",
                                             "resources": {"limits": {"nvidia.com/gpu": "2"}}}}}})
    spec = pod_spec(engine({"acceleratorSelector": {"acceleratorClass": "nvidia-h100"}}, [],
                           plain))
    env = {e["name"]: e["value"] for e in spec["containers"][0]["env"]}
    assert env["PARALLELISM_SIZE"] == "2"


def test_a_named_class_that_does_not_exist_blocks_with_accelerator_class_error() -> None:
    cp = engine({"acceleratorSelector": {"acceleratorClass": "nvidia-h100"}, "engine": {}}, [])
    assert cp is not None and cp.blocked and cp.ready is not None
    assert cp.ready.reason == "AcceleratorClassError"
    assert "nvidia-h100" in cp.ready.message

"""Runtime inheritance (``ome.io/inherit-from``), checked against OME v1.3's own example.

The profile ``sglang-profile``, the child ``sglang-llama-3-2-3b``, the InferenceService and
the container they render are transcribed from OME's docs, concepts/runtimes/
runtime-inheritance.md ("Define a profile and inherit from it", "What merges", "Chain
limits", "What admission checks").
"""

from __future__ import annotations

from typing import Any

import pytest

from omenative_core.service import (
    InheritanceError,
    basemodel_from_json,
    inherited_runtime,
    isvc_from_json,
    render_service,
    runtime_from_json,
)

PROFILE = runtime_from_json({
    "kind": "ClusterServingRuntime",
    "metadata": {"name": "sglang-profile", "annotations": {"ome.io/runtime-profile": "true"}},
    "spec": {
        "disabled": True,
        "engineConfig": {
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                             "effect": "NoSchedule"}],
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
            "runner": {
                "name": "ome-container",
                "image": "docker.io/lmsysorg/sglang:v0.5.5.post3-cu129-amd64",
                "command": ["python3", "-m", "sglang.launch_server", "--host=0.0.0.0",
                            "--port=8080", "--model-path=$(MODEL_PATH)",
                            "--served-model-name={{.Name}}"],
                "ports": [{"containerPort": 8080, "name": "http1", "protocol": "TCP"}],
                "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
            },
        },
    },
})


def child(parent: str = "sglang-profile", name: str = "sglang-llama-3-2-3b",
          **spec: Any) -> Any:
    return runtime_from_json({
        "kind": "ServingRuntime",
        "metadata": {"name": name, "namespace": "llama-demo",
                     "annotations": {"ome.io/inherit-from": parent}},
        "spec": {
            "disabled": False,
            "supportedModelFormats": [{
                "modelFormat": {"name": "safetensors", "version": "1.0.0"},
                "modelFramework": {"name": "transformers", "version": "4.45.0.dev0"},
                "modelArchitecture": "LlamaForCausalLM", "autoSelect": False}],
            "modelSizeRange": {"min": "2B", "max": "4B"},
            "engineConfig": {"runner": {
                "name": "ome-container", "args": ["--tp-size=1", "--mem-frac=0.9"],
                "resources": {
                    "requests": {"cpu": "10", "memory": "30Gi", "nvidia.com/gpu": "1"},
                    "limits": {"cpu": "10", "memory": "30Gi", "nvidia.com/gpu": "1"}}}},
            **spec,
        },
    })


ISVC = isvc_from_json({
    "kind": "InferenceService",
    "metadata": {"name": "llama-3-2-3b-instruct", "namespace": "llama-demo"},
    "spec": {"model": {"name": "llama-3-2-3b-instruct"},
             "runtime": {"name": "sglang-llama-3-2-3b", "kind": "ServingRuntime"},
             "engine": {"minReplicas": 1, "maxReplicas": 1}},
})
MODEL = basemodel_from_json({"kind": "ClusterBaseModel",
                             "metadata": {"name": "llama-3-2-3b-instruct"},
                             "spec": {"modelFormat": {"name": "safetensors", "version": "1.0.0"},
                                      "storage": {"path": "/raid/models/llama"}}})


def engine_container(plan: Any) -> dict[str, Any]:
    engine = plan.component("engine")
    assert engine is not None and not engine.blocked, engine.ready
    deployment = next(o for o in engine.objects if o["kind"] == "Deployment")
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "ome-container")


def test_omes_example_renders_the_profiles_image_and_command_and_the_childs_args() -> None:
    """The doc's output: image and command from the profile, the last two flags from the
    child, ``{{.Name}}`` filled with the InferenceService's name."""
    c = engine_container(render_service(ISVC, [PROFILE, child()], (), models=[MODEL]))
    assert c["image"] == "docker.io/lmsysorg/sglang:v0.5.5.post3-cu129-amd64"
    assert [*c["command"], *c["args"]] == [
        "python3", "-m", "sglang.launch_server", "--host=0.0.0.0", "--port=8080",
        "--model-path=$(MODEL_PATH)", "--served-model-name=llama-3-2-3b-instruct",
        "--tp-size=1", "--mem-frac=0.9"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]


def test_merge_rules_objects_by_field_named_lists_by_key_other_lists_replaced() -> None:
    parent = runtime_from_json({"kind": "ClusterServingRuntime", "metadata": {"name": "p"},
                                "spec": {"modelSizeRange": {"min": "1B", "max": "8B"},
                                         "engineConfig": {"runner": {
                                             "env": [{"name": "A", "value": "1"}],
                                             "args": ["--x"]}}}})
    kid = runtime_from_json({"kind": "ClusterServingRuntime",
                             "metadata": {"name": "c", "annotations": {
                                 "ome.io/inherit-from": "p"}},
                             "spec": {"modelSizeRange": {"max": "4B"},
                                      "engineConfig": {"runner": {
                                          "env": [{"name": "B", "value": "2"}],
                                          "args": ["--y"], "image": ""}}}})
    spec = inherited_runtime(kid, [parent, kid]).spec
    assert spec["modelSizeRange"] == {"min": "1B", "max": "4B"}
    runner = spec["engineConfig"]["runner"]
    assert runner["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert runner["args"] == ["--y"]
    assert "image" not in runner  # "" counts as unset


def test_a_namespace_runtime_looks_for_parents_in_its_namespace_then_the_cluster() -> None:
    local = runtime_from_json({"kind": "ServingRuntime",
                               "metadata": {"name": "sglang-profile", "namespace": "llama-demo"},
                               "spec": {"engineConfig": {"runner": {"image": "local:1"}}}})
    elsewhere = runtime_from_json({"kind": "ServingRuntime",
                                   "metadata": {"name": "sglang-profile", "namespace": "x"},
                                   "spec": {"engineConfig": {"runner": {"image": "x:1"}}}})
    kid = child()
    assert inherited_runtime(kid, [PROFILE, elsewhere, local, kid]).spec[
        "engineConfig"]["runner"]["image"] == "local:1"
    assert inherited_runtime(kid, [PROFILE, elsewhere, kid]).spec[
        "engineConfig"]["runner"]["image"].startswith("docker.io/lmsysorg/sglang")


@pytest.mark.parametrize(("runtimes", "message"), [
    ([child()], 'inherit-from parent "sglang-profile" not found '
                "(chain so far: [sglang-llama-3-2-3b])"),
    ([child(parent="sglang-llama-3-2-3b")],
     "inheritance cycle detected: [sglang-llama-3-2-3b sglang-llama-3-2-3b]"),
])
def test_a_broken_chain_gives_omes_message(runtimes: list[Any], message: str) -> None:
    with pytest.raises(InheritanceError) as err:
        inherited_runtime(runtimes[0], runtimes)
    assert str(err.value) == message


def test_a_chain_of_six_exceeds_the_max_depth() -> None:
    chain = [runtime_from_json({"kind": "ClusterServingRuntime",
                                "metadata": {"name": f"r{i}", "annotations": (
                                    {"ome.io/inherit-from": f"r{i + 1}"} if i < 5 else {})},
                                "spec": {}}) for i in range(6)]
    with pytest.raises(InheritanceError, match=r"^inheritance chain exceeds max depth 5"):
        inherited_runtime(chain[0], chain)
    assert inherited_runtime(chain[1], chain).name == "r1"  # five is fine


def test_a_broken_chain_blocks_the_isvc_with_omes_validation_error() -> None:
    plan = render_service(ISVC, [child()], (), models=[MODEL])
    engine = plan.component("engine")
    assert engine is not None and engine.blocked and engine.ready is not None
    assert engine.ready.reason == "RuntimeValidationError"
    assert engine.ready.message.startswith(
        "Runtime sglang-llama-3-2-3b does not support model llama-3-2-3b-instruct: "
        'inherit-from parent "sglang-profile" not found')


def test_naming_the_disabled_profile_itself_is_runtime_disabled() -> None:
    isvc = isvc_from_json({"kind": "InferenceService",
                           "metadata": {"name": "x", "namespace": "llama-demo"},
                           "spec": {"runtime": {"name": "sglang-profile"}, "engine": {}}})
    engine = render_service(isvc, [PROFILE], (), models=[]).component("engine")
    assert engine is not None and engine.ready is not None
    assert engine.ready.reason == "RuntimeDisabled"

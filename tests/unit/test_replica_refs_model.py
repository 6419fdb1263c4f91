"""A standalone InferenceReplica that renders from ``spec.modelRef`` (issue 28, item 3):
the model looked up as for an InferenceService, the runtime named or auto-selected, the
model rendered into the runners, and OME's reasons when it cannot
(ome-projects/ome@a543351b, ``pkg/controller/v1beta1/inferencereplica/render.go``
``serviceShell``, ``renderFromRefs``, ``classifyResolveError``; its test
``TestRenderFromRefs_ReportsNoRuntimeForTheModel``)."""

from __future__ import annotations

from typing import Any

from attrs import evolve

from omenative_core.render import validate_replica
from omenative_core.service import (
    BaseModel,
    ServiceConfig,
    basemodel_from_json,
    model_ready_label,
    runtime_from_json,
)
from omenative_core.service.replica_refs import RefsRender, render_replica_refs
from omenative_core.status.wire import replica_from_json

NS = "llama-demo"


def runtime(name: str, formats: list[str], *, kind: str = "ClusterServingRuntime",
            gpus: int = 1, **spec: Any) -> Any:
    meta: dict[str, Any] = {"name": name}
    if kind == "ServingRuntime":
        meta["namespace"] = NS
    return runtime_from_json({
        "apiVersion": "ome.io/v1beta1", "kind": kind, "metadata": meta,
        "spec": {"supportedModelFormats": [{"name": f, "modelFormat": {"name": f},
                                            "autoSelect": True} for f in formats],
                 "engineConfig": {"runner": {
                     "name": "ome-container", "image": f"{name}:1",
                     "args": ["--model-path", "$(MODEL_PATH)"],
                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}},
                 **spec}})


def model(name: str, path: str, *, kind: str = "ClusterBaseModel", fmt: str = "safetensors",
          **spec: Any) -> BaseModel:
    meta: dict[str, Any] = {"name": name}
    if kind == "BaseModel":
        meta["namespace"] = NS
    return basemodel_from_json({"apiVersion": "ome.io/v1beta1", "kind": kind, "metadata": meta,
                                "spec": {"modelFormat": {"name": fmt},
                                         "storage": {"path": path}, **spec}})


SRT = runtime("srt", ["safetensors"], gpus=2)
LLAMA = model("llama-3-2-1b-instruct", "/mnt/models/llama")


def pool(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
            "metadata": {"name": "llama-pool", "namespace": NS, "uid": "u1"},
            "spec": {"component": "engine", "replicas": 1, **spec}}


def render(body: dict[str, Any], runtimes: list[Any], models: list[BaseModel] | None
           ) -> RefsRender:
    return render_replica_refs(body, runtimes, ServiceConfig(), models)


def main_container(got: RefsRender) -> tuple[dict[str, Any], dict[str, Any]]:
    assert got.reason == "", got.message
    (runner,) = got.runners
    pod = runner.template["spec"]
    (container,) = pod["containers"]
    return pod, container


def env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env") or ()}


def test_a_model_ref_renders_the_model_into_the_auto_selected_runtimes_pods() -> None:
    other = runtime("onnx-rt", ["onnx"])
    body = pool(modelRef={"name": "llama-3-2-1b-instruct"})  # no runtimeRef: auto-selected
    got = render(body, [other, SRT], [LLAMA])
    pod, container = main_container(got)
    assert container["image"] == "srt:1"  # the runtime that supports safetensors
    assert env(container)["MODEL_PATH"] == "/mnt/models/llama"
    assert env(container)["PARALLELISM_SIZE"] == "2"  # 2 GPUs x 1 pod
    assert {"name": "llama-3-2-1b-instruct", "mountPath": "/mnt/models/llama",
            "readOnly": True} in container["volumeMounts"]
    assert {"name": "llama-3-2-1b-instruct",
            "hostPath": {"path": "/mnt/models/llama"}} in pod["volumes"]
    assert pod["nodeSelector"][model_ready_label(LLAMA)] == "Ready"
    assert model_ready_label(LLAMA) == "models.ome.io/clusterbasemodel.llama-3-2-1b-instruct"
    assert got.warnings == ()
    replica = replica_from_json(body)
    assert validate_replica(evolve(replica, spec=evolve(replica.spec,
                                                        runners=got.runners))) == ()


def test_a_namespace_basemodel_wins_over_a_clusterbasemodel_of_the_same_name() -> None:
    local = model("llama-3-2-1b-instruct", "/mnt/local/llama", kind="BaseModel")
    body = pool(modelRef={"name": "llama-3-2-1b-instruct"}, runtimeRef={"name": "srt"})
    pod, container = main_container(render(body, [SRT], [LLAMA, local]))
    assert env(container)["MODEL_PATH"] == "/mnt/local/llama"
    assert pod["nodeSelector"] == {
        f"models.ome.io/{NS}.basemodel.llama-3-2-1b-instruct": "Ready"}
    # modelRef.kind restricts the lookup to that kind
    only_cluster = pool(modelRef={"name": "llama-3-2-1b-instruct", "kind": "ClusterBaseModel"},
                        runtimeRef={"name": "srt"})
    _, container = main_container(render(only_cluster, [SRT], [LLAMA, local]))
    assert env(container)["MODEL_PATH"] == "/mnt/models/llama"


def test_a_named_runtime_that_does_not_declare_the_model_renders_with_an_advisory() -> None:
    onnx = runtime("onnx-rt", ["onnx"])
    got = render(pool(modelRef={"name": "llama-3-2-1b-instruct"},
                      runtimeRef={"name": "onnx-rt"}), [onnx, SRT], [LLAMA])
    _, container = main_container(got)
    assert container["image"] == "onnx-rt:1"
    assert env(container)["MODEL_PATH"] == "/mnt/models/llama"
    ((reason, message),) = got.warnings
    assert reason == "RuntimeCompatibilityAdvisory"
    assert "proceeding because the runtime was named explicitly" in message


def test_a_model_that_cannot_render_blocks_with_omes_reason_and_no_runners() -> None:
    def blocked(body: dict[str, Any], runtimes: list[Any],
                models: list[BaseModel] | None) -> tuple[str, str]:
        got = render(body, runtimes, models)
        assert got.runners == ()
        return got.reason, got.message

    ref = {"name": "llama-3-2-1b-instruct"}
    reason, message = blocked(pool(modelRef=ref), [SRT], [])
    assert reason == "ModelNotFound" and "llama-3-2-1b-instruct" in message
    # the model CRDs are not served: no model can exist
    assert blocked(pool(modelRef=ref), [SRT], None)[0] == "ModelNotFound"
    # modelRef.kind: a BaseModel is asked for, only a ClusterBaseModel exists
    assert blocked(pool(modelRef={**ref, "kind": "BaseModel"}), [SRT], [LLAMA])[0] == \
        "ModelNotFound"
    disabled = model("llama-3-2-1b-instruct", "/mnt/models/llama", disabled=True)
    assert blocked(pool(modelRef=ref), [SRT], [disabled]) == (
        "ModelDisabled", "specified base model llama-3-2-1b-instruct is disabled")
    # no runtime supports the model: OME's RuntimeSelectionFailed
    reason, message = blocked(pool(modelRef=ref), [runtime("onnx-rt", ["onnx"])], [LLAMA])
    assert reason == "RuntimeSelectionFailed"
    assert message.startswith("no runtime found to support model")
    # a named runtime that does not exist, and one without the component's piece
    assert blocked(pool(modelRef=ref, runtimeRef={"name": "nope"}), [SRT], [LLAMA]) == (
        "RuntimeNotFound", "ClusterServingRuntime 'nope' not found")
    assert blocked(pool(component="router", modelRef=ref), [SRT], [LLAMA]) == (
        "RuntimePieceMissing", "ClusterServingRuntime 'srt' has no router piece; "
        "a router replica cannot render from it")
    assert blocked(pool(modelRef={"kind": "BaseModel"}), [SRT], [LLAMA]) == (
        "RenderFailed", "spec.modelRef.name is not set")

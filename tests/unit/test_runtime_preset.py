"""The ``ome.io/engine: sglang-pd`` preset, as OME v1.3's runtime mutating webhook fills it
in (package ``runtimepreset``: ``sglangPDPreset``, ``applyPreset``; ome-docs
``reference/api/labels-and-annotations.md``, "ServingRuntime and ClusterServingRuntime")."""

from __future__ import annotations

from typing import Any

from omenative_core.service import (
    basemodel_from_json,
    decode_runtime,
    isvc_from_json,
    render_service,
)

MODEL = basemodel_from_json({"kind": "ClusterBaseModel", "metadata": {"name": "m"},
                             "spec": {"modelFormat": {"name": "safetensors"},
                                      "storage": {"path": "/models/m"}}})
ISVC = isvc_from_json({"kind": "InferenceService",
                       "metadata": {"name": "chat", "namespace": "prod"},
                       "spec": {"deploymentMode": "OMENative", "model": {"name": "m"},
                                "runtime": {"name": "srt-pd"},
                                "engine": {}, "decoder": {}, "router": {}}})


def pd_runtime(engine: str = "sglang-pd", **spec: Any) -> Any:
    return decode_runtime({
        "kind": "ClusterServingRuntime",
        "metadata": {"name": "srt-pd", "annotations": {"ome.io/engine": engine}},
        "spec": {"supportedModelFormats": [{"modelFormat": {"name": "safetensors"},
                                            "autoSelect": True}], **spec}})


def container(plan: Any, component: str) -> dict[str, Any]:
    cp = plan.component(component)
    assert cp is not None and not cp.blocked, cp.ready if cp is not None else None
    runners = cp.replica["spec"]["runners"]
    return runners[0]["template"]["spec"]["containers"][0]  # type: ignore[no-any-return]


def test_the_preset_renders_prefill_engine_decode_decoder_and_router() -> None:
    plan = render_service(ISVC, [pd_runtime()], (), models=[MODEL])
    engine = container(plan, "engine")
    assert engine["image"] == "lmsysorg/sglang:latest"
    assert engine["command"] == [
        "python3", "-m", "sglang.launch_server", "--host", "0.0.0.0", "--port", "30000",
        "--model-path", "$(MODEL_PATH)", "--disaggregation-mode", "prefill",
        "--disaggregation-transfer-backend", "nixl", "--disaggregation-bootstrap-port", "8998"]
    assert [p["containerPort"] for p in engine["ports"]] == [30000, 8998]
    env = {e["name"]: e for e in engine["env"]}
    assert env["SGLANG_HOST_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert env["MODEL_PATH"]["value"] == "/models/m"  # the model still reaches the pod
    assert engine["readinessProbe"] == {"httpGet": {"path": "/health", "port": 30000},
                                        "failureThreshold": 5, "periodSeconds": 30,
                                        "timeoutSeconds": 10}
    decoder = container(plan, "decoder")
    assert "decode" in decoder["command"] and "--disaggregation-bootstrap-port" not in \
        decoder["command"]
    assert [p["containerPort"] for p in decoder["ports"]] == [30000]
    assert decoder["livenessProbe"]["periodSeconds"] == 60
    router = container(plan, "router")
    assert router["image"] == "lmsysorg/sglang-router:latest"
    assert router["args"][router["args"].index("--prefill-label-selector") + 1] == \
        "component=engine,ome.io/inferenceservice=$(INFERENCESERVICE_NAME)"
    assert {e["name"] for e in router["env"]} == {"NAMESPACE", "INFERENCESERVICE_NAME"}
    assert router["readinessProbe"]["httpGet"] == {"path": "/readiness", "port": 30080}


def test_the_runtimes_own_fields_win_and_named_lists_merge() -> None:
    rt = pd_runtime(engineConfig={"runner": {
        "name": "ome-container", "image": "registry.local/sglang:v0.5.5",
        "env": [{"name": "PYTHONUNBUFFERED", "value": "0"}, {"name": "EXTRA", "value": "x"}]}})
    engine = container(render_service(ISVC, [rt], (), models=[MODEL]), "engine")
    assert engine["image"] == "registry.local/sglang:v0.5.5"
    env = {e["name"]: e.get("value") for e in engine["env"]}
    assert env["PYTHONUNBUFFERED"] == "0" and env["EXTRA"] == "x" and "SGLANG_HOST_IP" in env
    assert "--disaggregation-mode" in engine["command"]  # unset in the runtime: the preset's


def test_a_runtime_without_the_annotation_is_left_alone() -> None:
    rt = decode_runtime({"kind": "ClusterServingRuntime", "metadata": {"name": "plain"},
                         "spec": {"engineConfig": {"runner": {"name": "c", "image": "i"}}}})
    assert "decoderConfig" not in rt.spec and rt.spec["engineConfig"]["runner"] == {
        "name": "c", "image": "i"}


def test_an_unknown_engine_blocks_naming_the_annotation_where_ome_denies_the_runtime() -> None:
    plan = render_service(ISVC, [pd_runtime("vllm-pd")], (), models=[MODEL])
    cp = plan.component("engine")
    assert cp is not None and cp.blocked and cp.ready is not None
    assert cp.ready.reason == "RuntimeValidationError"
    assert cp.ready.message == ("ClusterServingRuntime srt-pd: unknown ome.io/engine value "
                                "'vllm-pd' (known: sglang-pd)")

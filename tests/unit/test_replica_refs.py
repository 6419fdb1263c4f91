"""A standalone InferenceReplica that renders from ``spec.runtimeRef`` (issue 28, item 3),
with OME's reasons when it cannot (ome-projects/ome@a543351b,
``pkg/controller/v1beta1/inferencereplica/render.go``)."""

from __future__ import annotations

from typing import Any

from attrs import evolve

from omenative_core.render import validate_replica
from omenative_core.service import ServiceConfig, runtime_from_json
from omenative_core.service.replica_refs import has_refs, render_replica_refs
from omenative_core.status.wire import replica_from_json

RUNTIME = runtime_from_json({
    "apiVersion": "ome.io/v1beta1", "kind": "ClusterServingRuntime",
    "metadata": {"name": "vllm"},
    "spec": {"engineConfig": {"runner": {"name": "ome-container", "image": "vllm:0.9",
                                         "ports": [{"containerPort": 8080}]}}},
})


def pool(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
            "metadata": {"name": "llama-pool", "namespace": "llama-demo", "uid": "u1"},
            "spec": {"component": "engine", "replicas": 1, **spec}}


def test_a_runtime_ref_renders_the_runtimes_piece_as_the_replicas_runner() -> None:
    body = pool(runtimeRef={"name": "vllm"})  # kind defaults to ClusterServingRuntime
    assert has_refs(body["spec"])
    rendered = render_replica_refs(body, [RUNTIME], ServiceConfig())
    assert rendered.reason == "", rendered.message
    (runner,) = rendered.runners
    assert runner.name == "default"
    (container,) = runner.template["spec"]["containers"]
    assert (container["name"], container["image"]) == ("ome-container", "vllm:0.9")
    # the replica with those runners is valid and plans as any runners replica
    replica = replica_from_json(body)
    assert validate_replica(replica) != ()  # no runners stored: TemplateSourceMissing
    assert validate_replica(evolve(replica, spec=evolve(replica.spec,
                                                        runners=rendered.runners))) == ()


def test_a_runtime_that_cannot_render_blocks_with_omes_reason() -> None:
    def reason(body: dict[str, Any], runtimes: list[Any]) -> tuple[str, str]:
        got = render_replica_refs(body, runtimes, ServiceConfig())
        assert got.runners == ()
        return got.reason, got.message

    assert reason(pool(runtimeRef={"name": "sglang"}), [RUNTIME]) == (
        "RuntimeNotFound", "ClusterServingRuntime 'sglang' not found")
    assert reason(pool(runtimeRef={"name": "vllm", "kind": "ServingRuntime"}),
                  [RUNTIME])[0] == "RuntimeNotFound"
    assert reason(pool(component="router", runtimeRef={"name": "vllm"}), [RUNTIME]) == (
        "RuntimePieceMissing", "ClusterServingRuntime 'vllm' has no router piece; "
        "a router replica cannot render from it")
    disabled = runtime_from_json({**RUNTIME.raw, "spec": {**RUNTIME.raw["spec"],
                                                          "disabled": True}})
    assert reason(pool(runtimeRef={"name": "vllm"}), [disabled])[0] == "RuntimeDisabled"


def test_no_template_source_is_omes_template_source_missing() -> None:
    (problem,) = validate_replica(replica_from_json(pool()))
    assert problem == ("TemplateSourceMissing: spec sets neither runners nor modelRef or "
                       "runtimeRef; one template source is required")

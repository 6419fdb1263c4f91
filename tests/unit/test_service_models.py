"""A BaseModel / ClusterBaseModel rendered into a component's pods, as OME renders it.

Expected values are transcribed from OME's controller tests at ome-projects/ome commit
cfa05c6967648a1bd62e2d96221f06aa1dec95fe:
``pkg/controller/v1beta1/inferenceservice/components/engine_test.go`` ("Multi-node
deployment with leader and worker specs", "ClusterBaseModel with node selector") and
``components/base_test.go`` (``TestUpdatePodSpecNodeSelector``), and from the rules in
``components/base.go``, ``engine.go``, ``decoder.go``, ``router.go`` at that commit.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import pytest

from omenative_core.model.observed import Snapshot
from omenative_core.model.plan import CreatePod
from omenative_core.planner import plan as plan_replica
from omenative_core.service import (
    BaseModel,
    ComponentPlan,
    ServicePlan,
    basemodel_from_json,
    isvc_from_json,
    model_ready_label,
    render_service,
    runtime_from_json,
)
from omenative_core.status.wire import replica_from_json

NOW = datetime(2025, 6, 1, tzinfo=UTC)


def model(name: str, path: str, *, kind: str = "ClusterBaseModel", namespace: str | None = None,
          **spec: Any) -> BaseModel:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    body = {"modelFormat": {"name": "safetensors"}, "storage": {"path": path}, **spec}
    return basemodel_from_json({"apiVersion": "ome.io/v1beta1", "kind": kind,
                                "metadata": meta, "spec": body})


def isvc(spec: dict[str, Any], namespace: str = "default", **meta: Any) -> Any:
    return isvc_from_json({"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
                           "metadata": {"name": "test-mn-isvc", "namespace": namespace, **meta},
                           "spec": spec})


def runtime(spec: dict[str, Any], name: str = "srt", kind: str = "ClusterServingRuntime",
            namespace: str | None = None) -> Any:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return runtime_from_json({"apiVersion": "ome.io/v1beta1", "kind": kind, "metadata": meta,
                              "spec": spec})


GPU_RUNTIME = runtime({
    "engineConfig": {
        "runner": {"name": "ome-container", "image": "sglang:0.4",
                   "args": ["--model-path", "$(MODEL_PATH)", "--tp", "$(PARALLELISM_SIZE)"],
                   "resources": {"limits": {"nvidia.com/gpu": "2"}}},
        "leader": {},
        "worker": {"size": 2},
    },
    "routerConfig": {"runner": {"image": "router:1"}},
})


def render(i: Any, models: list[BaseModel],
           runtimes: tuple[Any, ...] = (GPU_RUNTIME,)) -> ServicePlan:
    return render_service(i, list(runtimes), (), models=models)


def comp(plan: ServicePlan, name: str) -> ComponentPlan:
    cp = plan.component(name)
    assert cp is not None
    return cp


def templates(cp: ComponentPlan) -> dict[str, dict[str, Any]]:
    assert cp.replica is not None, cp.ready
    return {r["name"]: r["template"] for r in cp.replica["spec"]["runners"]}


def main_container(template: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in template["spec"]["containers"] if c["name"] == "ome-container")


def env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


SERVE = {"deploymentMode": "OMENative", "model": {"name": "base-model-2"},
         "runtime": {"name": "srt"}, "engine": {"minReplicas": 2}}
BASE_MODEL_2 = model("base-model-2", "/mnt/models/model2", kind="BaseModel", namespace="default")


# ---------------------------------------------------------------------------- OME's cases


def test_multi_node_leader_and_worker_get_the_model_ready_node_selector() -> None:
    """engine_test.go "Multi-node deployment with leader and worker specs": BaseModel
    ``base-model-2`` in ``default`` puts ``models.ome.io/default.basemodel.base-model-2:
    Ready`` on the leader and the worker template."""
    t = templates(comp(render(isvc(SERVE), [BASE_MODEL_2]), "engine"))
    for role in ("leader", "worker"):
        assert t[role]["spec"]["nodeSelector"]["models.ome.io/default.basemodel.base-model-2"] \
            == "Ready"


def test_cluster_base_model_gets_the_cluster_label() -> None:
    """engine_test.go "ClusterBaseModel with node selector"."""
    m = model("cluster-base-model", "/mnt/models/cluster")
    spec = {**SERVE, "model": {"name": "cluster-base-model"}}
    t = templates(comp(render(isvc(spec), [m]), "engine"))
    assert t["leader"]["spec"]["nodeSelector"] == {
        "models.ome.io/clusterbasemodel.cluster-base-model": "Ready"}


@pytest.mark.parametrize(("kind", "namespace", "name", "label"), [
    ("BaseModel", "default", "llama-3-8b", "models.ome.io/default.basemodel.llama-3-8b"),
    ("ClusterBaseModel", None, "mixtral-8x7b", "models.ome.io/clusterbasemodel.mixtral-8x7b"),
    ("BaseModel", "test-ns", "model-1", "models.ome.io/test-ns.basemodel.model-1"),
])
def test_model_ready_label_matches_omes_base_test(kind: str, namespace: str | None, name: str,
                                                   label: str) -> None:
    """base_test.go TestUpdatePodSpecNodeSelector's expected label keys."""
    assert model_ready_label(model(name, "/m", kind=kind, namespace=namespace)) == label


def test_existing_node_selector_is_kept_and_the_model_label_added() -> None:
    """base_test.go: an existing selector stays; the model label is one more key."""
    spec = {**SERVE, "engine": {"minReplicas": 1, "nodeSelector": {"gpu": "a100"}}}
    t = templates(comp(render(isvc(spec), [BASE_MODEL_2]), "engine"))
    assert t["leader"]["spec"]["nodeSelector"] == {
        "gpu": "a100", "models.ome.io/default.basemodel.base-model-2": "Ready"}


def test_long_model_names_are_shortened_with_omes_hash_prefix() -> None:
    """constants.go GetClusterBaseModelLabel: a name over 32 characters becomes the first 8
    hex of its sha256, ``-`` and its last 23 characters, so the key stays a valid label."""
    name = "meta-llama-3-1-405b-instruct-fp8-dynamic"
    label = model_ready_label(model(name, "/m"))
    tail = hashlib.sha256(name.encode()).hexdigest()[:8] + "-" + name[-23:]
    assert label == f"models.ome.io/clusterbasemodel.{tail}"
    assert len(label.split("/", 1)[1]) <= 63
    ns_label = model_ready_label(model(name, "/m", kind="BaseModel", namespace="inference-prod"))
    assert len(ns_label.split("/", 1)[1]) <= 63
    assert ".basemodel." in ns_label


# ---------------------------------------------------------------------------- MODEL_PATH, volume


def test_runner_gets_model_path_and_a_read_only_mount_and_the_pod_a_host_path_volume() -> None:
    """base.go UpdateEnvVariables / UpdateVolumeMounts / UpdatePodSpecVolumes: MODEL_PATH is
    the storage path, the mount is named after the model, the volume is a hostPath."""
    t = templates(comp(render(isvc(SERVE), [BASE_MODEL_2]), "engine"))
    for role in ("leader", "worker"):
        c = main_container(t[role])
        assert env(c)["MODEL_PATH"] == "/mnt/models/model2"
        assert {"name": "base-model-2", "mountPath": "/mnt/models/model2",
                "readOnly": True} in c["volumeMounts"]
        assert {"name": "base-model-2", "hostPath": {"path": "/mnt/models/model2"}} \
            in t[role]["spec"]["volumes"]


def test_parallelism_size_is_gpus_per_pod_times_pods_per_instance() -> None:
    """engine.go setParallelismEnvVarForEngine: 2 GPUs x (1 leader + 2 workers) = 6."""
    t = templates(comp(render(isvc(SERVE), [BASE_MODEL_2]), "engine"))
    assert env(main_container(t["leader"]))["PARALLELISM_SIZE"] == "6"
    assert env(main_container(t["worker"]))["PARALLELISM_SIZE"] == "6"


def test_the_services_own_model_path_wins_and_parallelism_size_is_replaced() -> None:
    """AppendEnvVarsIfNotExist for MODEL_PATH; UpdateEnvVars (replace) for PARALLELISM_SIZE."""
    spec = {**SERVE, "engine": {"minReplicas": 1, "runner": {"env": [
        {"name": "MODEL_PATH", "value": "/own"}, {"name": "PARALLELISM_SIZE", "value": "1"}]}}}
    t = templates(comp(render(isvc(spec), [BASE_MODEL_2]), "engine"))
    e = env(main_container(t["leader"]))
    assert e["MODEL_PATH"] == "/own"
    assert e["PARALLELISM_SIZE"] == "6"


def test_model_init_annotation_leaves_model_path_and_mount_to_omes_webhook() -> None:
    """utils/annotations.go IsOriginalModelVolumeMountNecessary."""
    i = isvc(SERVE, annotations={"ome.io/inject-model-init": "true"})
    c = main_container(templates(comp(render(i, [BASE_MODEL_2]), "engine"))["leader"])
    assert "MODEL_PATH" not in env(c)
    assert not c.get("volumeMounts")


def test_router_gets_only_the_volume() -> None:
    """router.go calls only UpdatePodSpecVolumes: no env, mount or node selector."""
    spec = {**SERVE, "router": {"minReplicas": 1}}
    t = templates(comp(render(isvc(spec), [BASE_MODEL_2]), "router"))["default"]
    assert t["spec"]["volumes"] == [{"name": "base-model-2",
                                     "hostPath": {"path": "/mnt/models/model2"}}]
    assert "nodeSelector" not in t["spec"]
    assert "MODEL_PATH" not in env(t["spec"]["containers"][0])


def test_pods_carry_omes_model_labels_and_annotations() -> None:
    """base.go ProcessBaseLabels / ProcessBaseAnnotations."""
    m = model("base-model-2", "/mnt/models/model2", kind="BaseModel", namespace="default",
              vendor="meta", modelFormat={"name": "safetensors", "version": "1"})
    meta = templates(comp(render(isvc(SERVE), [m]), "engine"))["leader"]["metadata"]
    assert meta["labels"]["base-model-name"] == "base-model-2"
    assert meta["labels"]["base-model-size"] == "SMALL"
    assert meta["labels"]["base-model-type"] == "Serving"
    assert meta["labels"]["base-model-vendor"] == "meta"
    assert meta["annotations"]["ome.io/base-model-format"] == "safetensors"
    assert meta["annotations"]["ome.io/base-model-format-version"] == "1"


def test_created_pods_get_model_path_mount_and_selector() -> None:
    """What the planner creates from the rendered replica carries the model."""
    cp = comp(render(isvc(SERVE), [BASE_MODEL_2]), "engine")
    assert cp.replica is not None
    ir = replica_from_json({**cp.replica, "metadata": {**cp.replica["metadata"], "uid": "u"}})
    pods = [a.body for a in plan_replica(Snapshot(replica=ir, now=NOW)).actions
            if isinstance(a, CreatePod)]
    assert pods
    for pod in pods:
        assert pod["spec"]["nodeSelector"]["models.ome.io/default.basemodel.base-model-2"] \
            == "Ready"
        assert env(main_container(pod))["MODEL_PATH"] == "/mnt/models/model2"


def test_a_new_storage_path_is_a_new_revision() -> None:
    a = comp(render(isvc(SERVE), [BASE_MODEL_2]), "engine").revision_hash
    moved = model("base-model-2", "/mnt/models/v2", kind="BaseModel", namespace="default")
    assert comp(render(isvc(SERVE), [moved]), "engine").revision_hash != a


# ---------------------------------------------------------------------------- lookup, problems


def test_a_base_model_in_the_namespace_wins_over_a_cluster_base_model() -> None:
    """reconciliation.go GetBaseModel: BaseModel first, then ClusterBaseModel."""
    cluster = model("base-model-2", "/cluster")
    c = main_container(templates(comp(render(isvc(SERVE), [cluster, BASE_MODEL_2]),
                                      "engine"))["leader"])
    assert env(c)["MODEL_PATH"] == "/mnt/models/model2"
    other_ns = model("base-model-2", "/elsewhere", kind="BaseModel", namespace="other")
    c = main_container(templates(comp(render(isvc(SERVE), [other_ns, cluster]),
                                      "engine"))["leader"])
    assert env(c)["MODEL_PATH"] == "/cluster"


def test_a_missing_model_blocks_every_component_with_model_not_found() -> None:
    spec = {**SERVE, "router": {"minReplicas": 1}}
    plan = render(isvc(spec), [model("another", "/x")])
    assert plan.objects == ()
    for cp in plan.components:
        assert cp.blocked
        assert cp.ready is not None
        assert cp.ready.reason == "ModelNotFound"
        assert "base-model-2" in cp.ready.message


def test_a_model_of_the_wrong_kind_is_not_found() -> None:
    spec = {**SERVE, "model": {"name": "base-model-2", "kind": "ClusterBaseModel"}}
    plan = render(isvc(spec), [BASE_MODEL_2])
    assert comp(plan, "engine").ready.reason == "ModelNotFound"  # type: ignore[union-attr]


def test_a_disabled_model_blocks_with_model_disabled() -> None:
    off = model("base-model-2", "/m", kind="BaseModel", namespace="default", disabled=True)
    cp = comp(render(isvc(SERVE), [off]), "engine")
    assert cp.blocked
    assert cp.ready is not None and cp.ready.reason == "ModelDisabled"


def test_without_model_lookups_spec_model_is_ignored_as_before() -> None:
    plan = render_service(isvc(SERVE), [GPU_RUNTIME], ())
    assert not comp(plan, "engine").blocked
    assert "MODEL_PATH" not in env(main_container(templates(comp(plan, "engine"))["leader"]))


def test_a_bad_model_field_is_a_codec_error_naming_it() -> None:
    from omenative_core.codec import CodecError

    with pytest.raises(CodecError, match=r"spec\.storage\.path"):
        basemodel_from_json({"kind": "BaseModel", "metadata": {"name": "m"},
                             "spec": {"storage": {"path": 3}}})


# ---------------------------------------------------------------------------- placeholders


def _placeholder_runtime(*args: str) -> Any:
    return runtime({"engineConfig": {"runner": {"name": "ome-container", "image": "srt:1",
                                                "args": list(args)}}})


def test_runtime_placeholders_are_filled_from_the_isvc_metadata() -> None:
    """merging.go ReplacePlaceholders: the runner container as a Go template over the ISVC's
    ObjectMeta; a missing map key renders ``<no value>``."""
    rt = _placeholder_runtime("--served-model-name={{.Name}}", "--ns={{ .Namespace }}",
                              "--team={{.Labels.team}}",
                              '--tier={{index .Annotations "example.com/tier"}}',
                              "--missing={{.Labels.nope}}", "--trim={{- .Name -}}")
    i = isvc({"deploymentMode": "OMENative", "runtime": {"name": "srt"}, "engine": {}},
             labels={"team": "search"},
             annotations={"example.com/tier": "gold"})
    plan = render_service(i, [rt], (), models=[])
    args = main_container(templates(comp(plan, "engine"))["default"])["args"]
    assert args == ["--served-model-name=test-mn-isvc", "--ns=default", "--team=search",
                    "--tier=gold", "--missing=<no value>", "--trim=test-mn-isvc"]


@pytest.mark.parametrize("arg", ["--x={{ .Spec.Model }}", "--chat-template={{ messages"])
def test_a_placeholder_omes_template_cannot_fill_blocks_with_render_failed(arg: str) -> None:
    plan = render_service(isvc({"runtime": {"name": "srt"}, "engine": {}}),
                          [_placeholder_runtime(arg)], (), models=[])
    engine = comp(plan, "engine")
    assert engine.blocked and engine.ready is not None
    assert engine.ready.reason == "RenderFailed"
    assert "placeholder" in engine.ready.message


# ---------------------------------------------------------------------------- the decoder


PD_RUNTIME = runtime({
    "engineConfig": {"runner": {"name": "ome-container", "image": "srt:1",
                                "resources": {"limits": {"nvidia.com/gpu": "4"}}}},
    "decoderConfig": {"runner": {"name": "ome-container", "image": "srt:1",
                                 "resources": {"limits": {"nvidia.com/gpu": "4"}}},
                      "leader": {}, "worker": {"size": 3}},
})


def test_the_decoder_gets_the_model_and_counts_its_leader_and_workers() -> None:
    """decoder.go setParallelismEnvVarForDecoder: 4 GPUs x (1 leader + 3 workers); the
    engine, single-pod, 4 x 1."""
    spec = {"deploymentMode": "OMENative", "model": {"name": "base-model-2"},
            "runtime": {"name": "srt"}, "engine": {}, "decoder": {}}
    plan = render(isvc(spec), [BASE_MODEL_2], (PD_RUNTIME,))
    decoder = templates(comp(plan, "decoder"))
    for role in ("leader", "worker"):
        e = env(main_container(decoder[role]))
        assert e["PARALLELISM_SIZE"] == "16"
        assert e["MODEL_PATH"] == "/mnt/models/model2"
        assert decoder[role]["spec"]["nodeSelector"] == {
            "models.ome.io/default.basemodel.base-model-2": "Ready"}
    engine = templates(comp(plan, "engine"))["default"]
    assert env(main_container(engine))["PARALLELISM_SIZE"] == "4"


def test_a_component_without_a_runner_gets_no_model_path_but_the_node_selector() -> None:
    """engine_test.go "Raw deployment with basic engine spec": without a runner there is no
    MODEL_PATH; the pod is still placed on a node with the model."""
    bare = runtime({"engineConfig": {"containers": [{"name": "ome-container",
                                                     "image": "srt:1"}]}})
    spec = {"deploymentMode": "OMENative", "model": {"name": "base-model-2"},
            "runtime": {"name": "srt"}, "engine": {}}
    t = templates(comp(render(isvc(spec), [BASE_MODEL_2], (bare,)), "engine"))["default"]
    assert "MODEL_PATH" not in env(main_container(t))
    assert t["spec"]["nodeSelector"]["models.ome.io/default.basemodel.base-model-2"] == "Ready"


def test_a_component_the_runtime_has_no_piece_for_is_runtime_piece_missing() -> None:
    """OME v1.3's reason for a component its runtime cannot render (``RuntimePieceMissing``),
    in place of the template's ``ContainersRequired``."""
    engine_only = runtime({"engineConfig": {"runner": {"image": "srt:1"}}})
    spec = {"deploymentMode": "OMENative", "runtime": {"name": "srt"}, "engine": {},
            "decoder": {}}
    decoder = comp(render(isvc(spec), [], (engine_only,)), "decoder")
    assert decoder.blocked and decoder.ready is not None
    assert decoder.ready.reason == "RuntimePieceMissing"
    assert "has no decoder piece" in decoder.ready.message

"""BaseModel / ClusterBaseModel and what OME renders from them into a component's pods.

An InferenceService's ``spec.model.name`` names a model. OME looks for a BaseModel of that
name in the ISVC's namespace first, then a ClusterBaseModel (``find_model``; a
``spec.model.kind`` restricts the search to that kind). A model that does not exist blocks
every component with ``ModelNotFound``, a disabled one with ``ModelDisabled``: no object is
applied, so nothing serves a model that is not there.

From the model OME renders (``apply_model``; OME v0.1.5 ``components/base.go``, ``engine.go``,
``decoder.go``, ``router.go``, ``utils/utils.go``, ``utils/container.go``):

* engine and decoder, on the runner's container of every pod (leader and worker): the env
  ``MODEL_PATH`` = ``spec.storage.path`` unless the container sets it, and a read-only
  volume mount named after the model at that path; ``PARALLELISM_SIZE`` = GPUs per pod
  (``nvidia.com/gpu`` limit, else request) x pods per Instance, replacing any value (the
  decoder counts its leader only when it has a leader or a runner);
* engine and decoder, on the pod: the hostPath volume named after the model at the storage
  path, and the node selector ``models.ome.io/clusterbasemodel.<name>: Ready`` (a
  ClusterBaseModel) or ``models.ome.io/<ns>.basemodel.<name>: Ready`` (a BaseModel; long
  names shortened with OME's hash prefix), the label OME's model agent sets on nodes where
  the model is on disk;
* the router gets only the volume;
* on every pod, OME's model labels (``base-model-name``, ``base-model-size``,
  ``base-model-type``, ``base-model-vendor``) and annotations (``ome.io/base-model-name``,
  ``ome.io/base-model-format``, ``ome.io/base-model-format-version``,
  ``ome.io/base-model-vendor``).

An ISVC annotated ``ome.io/inject-model-init: "true"`` gets no ``MODEL_PATH`` and no mount
(OME's model-init webhook provides them). Fine-tuned weights are not rendered.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, Final

from attrs import evolve, frozen

from omenative_core.codec import CodecError
from omenative_core.model.spec import JSON, Runner
from omenative_core.service.accelerators import Accelerator, apply_to_container, apply_to_pod
from omenative_core.service.merge import MAIN_CONTAINER
from omenative_core.service.model import ComponentSpec, InferenceService
from omenative_core.service.placeholders import fill_placeholders, placeholder_problem

__all__ = [
    "MODEL_KINDS",
    "BaseModel",
    "ModelRef",
    "apply_model",
    "basemodel_from_json",
    "find_model",
    "finish_runners",
    "model_problem",
    "model_ready_label",
    "model_ref",
    "runner_placeholder_problem",
]

MODEL_KINDS: Final = ("BaseModel", "ClusterBaseModel")
"""The two model kinds: a BaseModel is namespaced, a ClusterBaseModel cluster-wide."""

ENV_MODEL_PATH: Final = "MODEL_PATH"
ENV_PARALLELISM_SIZE: Final = "PARALLELISM_SIZE"
GPU_RESOURCE: Final = "nvidia.com/gpu"
ANNOTATION_MODEL_INIT: Final = "ome.io/inject-model-init"
MODEL_LABEL_DOMAIN: Final = "models.ome.io"
_MAX_LABEL_NAME: Final = 49  # 63 - len("models.ome.io") - 1, OME's MaxLabelNameLength
_HASH_PREFIX: Final = 8


def _bad(path: str, what: str, value: object) -> CodecError:
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return CodecError(f"{path}: {what}, got {text}", path=path)


def _obj(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _opt_str(obj: Mapping[str, Any], key: str) -> str | None:
    value = obj.get(key)
    return value if isinstance(value, str) else None


@frozen
class BaseModel:
    """A BaseModel or ClusterBaseModel, kept whole in ``raw``."""

    raw: JSON

    @property
    def kind(self) -> str:
        """``BaseModel`` or ``ClusterBaseModel``."""
        return "BaseModel" if self.raw.get("kind") == "BaseModel" else "ClusterBaseModel"

    @property
    def metadata(self) -> Mapping[str, Any]:
        """``metadata`` as sent."""
        return _obj(self.raw.get("metadata"))

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return str(self.metadata.get("name", ""))

    @property
    def namespace(self) -> str | None:
        """A BaseModel's namespace (``default`` when absent); None for a ClusterBaseModel."""
        if self.kind == "ClusterBaseModel":
            return None
        return _opt_str(self.metadata, "namespace") or "default"

    @property
    def annotations(self) -> dict[str, str]:
        """``metadata.annotations``."""
        return {k: v for k, v in _obj(self.metadata.get("annotations")).items()
                if isinstance(v, str)}

    @property
    def spec(self) -> Mapping[str, Any]:
        """``spec`` as sent (``{}`` when absent)."""
        return _obj(self.raw.get("spec"))

    @property
    def disabled(self) -> bool:
        """``spec.disabled`` is true."""
        return self.spec.get("disabled") is True

    @property
    def storage_path(self) -> str | None:
        """``spec.storage.path``: where the model agent puts the weights on each node."""
        return _opt_str(_obj(self.spec.get("storage")), "path")

    @property
    def format_name(self) -> str:
        """``spec.modelFormat.name`` (``""`` when unset)."""
        return _opt_str(_obj(self.spec.get("modelFormat")), "name") or ""

    @property
    def format_version(self) -> str | None:
        """``spec.modelFormat.version``."""
        return _opt_str(_obj(self.spec.get("modelFormat")), "version")

    @property
    def framework(self) -> Mapping[str, Any] | None:
        """``spec.modelFramework`` (``name``, ``version``), if set."""
        value = self.spec.get("modelFramework")
        return value if isinstance(value, Mapping) else None

    @property
    def architecture(self) -> str | None:
        """``spec.modelArchitecture``."""
        return _opt_str(self.spec, "modelArchitecture")

    @property
    def quantization(self) -> str | None:
        """``spec.quantization``."""
        return _opt_str(self.spec, "quantization")

    @property
    def parameter_size(self) -> str | None:
        """``spec.modelParameterSize`` (``"8B"``, ``"500M"``...)."""
        return _opt_str(self.spec, "modelParameterSize")

    @property
    def vendor(self) -> str | None:
        """``spec.vendor``."""
        return _opt_str(self.spec, "vendor")


def _check_str_at(obj: Mapping[str, Any], key: str, path: str) -> None:
    if obj.get(key) is not None and not isinstance(obj[key], str):
        raise _bad(f"{path}.{key}", "expected a string", obj[key])


def _check_obj_at(obj: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _bad(f"{path}.{key}", "expected an object", value)
    return value


def basemodel_from_json(obj: object, kind: str | None = None) -> BaseModel:
    """Check and wrap a BaseModel or ClusterBaseModel (``kind`` when the JSON has none);
    a bad field the rendering reads is a ``CodecError`` naming its path."""
    if not isinstance(obj, Mapping):
        raise _bad("$", "expected an object", obj)
    data = dict(obj)
    data.setdefault("kind", kind or "ClusterBaseModel")
    if data["kind"] not in MODEL_KINDS:
        raise _bad("kind", f"expected one of {', '.join(MODEL_KINDS)}", data["kind"])
    meta = _check_obj_at(data, "metadata", "$")
    if not isinstance(meta.get("name"), str) or not meta["name"]:
        raise _bad("metadata.name", "expected a non-empty string", meta.get("name"))
    _check_str_at(meta, "namespace", "metadata")
    spec = _check_obj_at(data, "spec", "$")
    if spec.get("disabled") is not None and not isinstance(spec["disabled"], bool):
        raise _bad("spec.disabled", "expected a boolean", spec["disabled"])
    for key in ("modelArchitecture", "quantization", "modelParameterSize", "vendor"):
        _check_str_at(spec, key, "spec")
    for key in ("modelFormat", "modelFramework", "storage"):
        block = _check_obj_at(spec, key, "spec")
        for leaf in ("name", "version", "path", "operator"):
            _check_str_at(block, leaf, f"spec.{key}")
    return BaseModel(data)


@frozen
class ModelRef:
    """``spec.model``: the model's name and, when given, its kind."""

    name: str
    kind: str | None = None


def model_ref(isvc: InferenceService) -> ModelRef | None:
    """``spec.model`` as a reference, or None when the ISVC names no model."""
    model = _obj(isvc.spec.get("model"))
    name = _opt_str(model, "name")
    if not name:
        return None
    kind = _opt_str(model, "kind")
    return ModelRef(name=name, kind=kind if kind in MODEL_KINDS else None)


def find_model(
    ref: ModelRef, namespace: str, models: Iterable[BaseModel]
) -> BaseModel | None:
    """OME's lookup: a BaseModel named ``ref.name`` in ``namespace``, else a
    ClusterBaseModel of that name (only the kind ``ref.kind`` names, when set)."""
    found: dict[str, BaseModel] = {}
    for m in models:
        if m.name != ref.name or (ref.kind is not None and m.kind != ref.kind):
            continue
        if m.kind == "BaseModel" and m.namespace != namespace:
            continue
        found.setdefault(m.kind, m)
    return found.get("BaseModel") or found.get("ClusterBaseModel")


def model_problem(
    ref: ModelRef, model: BaseModel | None, namespace: str
) -> tuple[str, str] | None:
    """``(reason, message)`` when the model cannot be served: ``ModelNotFound`` (OME's
    message) or ``ModelDisabled``; None when it can."""
    if model is None:
        where = ref.kind or "BaseModel or ClusterBaseModel"
        return ("ModelNotFound",
                f"No {where} with the name: {ref.name} (namespace {namespace})")
    if model.disabled:
        return ("ModelDisabled", f"specified base model {ref.name} is disabled")
    return None


# ---------------------------------------------------------------------------- node label


def _truncate(text: str, limit: int) -> str:
    """OME's ``truncateWithHash``: the text, or an 8-hex sha256 prefix, ``-`` and its tail."""
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:_HASH_PREFIX]
    tail = limit - _HASH_PREFIX - 1
    if tail <= 0:
        return digest[:limit]
    return f"{digest}-{text[len(text) - tail:]}"


def model_ready_label(model: BaseModel) -> str:
    """The node label OME's model agent sets to ``Ready`` where ``model`` is on disk
    (OME ``constants.GetClusterBaseModelLabel`` / ``GetBaseModelLabel``)."""
    if model.namespace is None:
        limit = _MAX_LABEL_NAME - len("clusterbasemodel") - 1
        return f"{MODEL_LABEL_DOMAIN}/clusterbasemodel.{_truncate(model.name, limit)}"
    ns, name = model.namespace, model.name
    space = _MAX_LABEL_NAME - len("basemodel.") - 1
    if len(ns) + len(name) > space:
        ns_max = min(len(ns), 8)  # OME gives the namespace at most 8 (space is 38 >= 16)
        ns, name = _truncate(ns, ns_max), _truncate(name, space - ns_max)
    return f"{MODEL_LABEL_DOMAIN}/{ns}.basemodel.{name}"


# ---------------------------------------------------------------------------- rendering


def _gpus(container: Mapping[str, Any]) -> int:
    resources = _obj(container.get("resources"))
    for key in ("limits", "requests"):
        value = _obj(resources.get(key)).get(GPU_RESOURCE)
        if value is not None:
            try:
                return int(str(value))
            except ValueError:
                return 0
    return 0


def _set_env(container: dict[str, Any], name: str, value: str, *, replace: bool) -> None:
    env = [dict(e) for e in container.get("env") or () if isinstance(e, Mapping)]
    for entry in env:
        if entry.get("name") == name:
            if replace:
                entry.pop("valueFrom", None)
                entry["value"] = value
            container["env"] = env
            return
    env.append({"name": name, "value": value})
    container["env"] = env


def _main_index(containers: list[dict[str, Any]], runner_name: str | None) -> int | None:
    names = [c.get("name") for c in containers]
    for wanted in (runner_name, MAIN_CONTAINER):
        if wanted and wanted in names:
            return names.index(wanted)
    return 0 if containers else None


@frozen(kw_only=True)
class _Render:
    model: BaseModel
    component: str
    pods_per_instance: int
    count_leader: bool
    model_init: bool
    accelerator: Accelerator | None


def _render_container(c: dict[str, Any], r: _Render) -> None:
    path = r.model.storage_path
    if path is not None and not r.model_init:
        _set_env(c, ENV_MODEL_PATH, path, replace=False)
        mounts = [dict(m) for m in c.get("volumeMounts") or () if isinstance(m, Mapping)]
        if not any(m.get("name") == r.model.name or m.get("mountPath") == path for m in mounts):
            mounts.append({"name": r.model.name, "mountPath": path, "readOnly": True})
        c["volumeMounts"] = mounts
    if r.accelerator is not None:  # OME sets no PARALLELISM_SIZE with an AcceleratorClass
        apply_to_container(c, r.accelerator)
        return
    gpus = _gpus(c)
    pods = r.pods_per_instance - (0 if r.count_leader else 1)
    if gpus > 0 and pods > 0:
        _set_env(c, ENV_PARALLELISM_SIZE, str(gpus * pods), replace=True)


def _render_pod(pod: dict[str, Any], r: _Render, runner_name: str | None, *,
                has_runner: bool) -> None:
    path = r.model.storage_path
    if path is not None:
        volumes = [v for v in pod.get("volumes") or () if isinstance(v, Mapping)]
        if not any(v.get("name") == r.model.name for v in volumes):
            volumes = [*volumes, {"name": r.model.name, "hostPath": {"path": path}}]
        pod["volumes"] = volumes
    if r.component == "router":
        return
    if has_runner:
        containers = [dict(c) for c in pod.get("containers") or () if isinstance(c, Mapping)]
        index = _main_index(containers, runner_name)
        if index is not None:
            _render_container(containers[index], r)
            pod["containers"] = containers
    selector = dict(_obj(pod.get("nodeSelector")))
    selector.setdefault(model_ready_label(r.model), "Ready")
    pod["nodeSelector"] = selector
    if r.accelerator is not None:
        apply_to_pod(pod, r.accelerator)


def _model_metadata(model: BaseModel) -> tuple[dict[str, str], dict[str, str]]:
    """OME's model labels and annotations on the pods (``ProcessBaseLabels`` /
    ``ProcessBaseAnnotations``)."""
    labels = {
        "base-model-name": model.name,
        "base-model-size": model.annotations.get("models.ome.io/category", "SMALL"),
        "base-model-type": "Serving",
    }
    annotations = {"ome.io/base-model-name": model.name,
                   "ome.io/base-model-format": model.format_name}
    if model.format_version is not None:
        annotations["ome.io/base-model-format-version"] = model.format_version
    if model.vendor is not None:
        labels["base-model-vendor"] = model.vendor
        annotations["ome.io/base-model-vendor"] = model.vendor
    return labels, annotations


def _with_metadata(template: Mapping[str, Any], labels: Mapping[str, str],
                   annotations: Mapping[str, str]) -> dict[str, Any]:
    out = dict(template)
    meta = dict(_obj(out.get("metadata")))
    meta["labels"] = dict(sorted({**labels, **_obj(meta.get("labels"))}.items()))
    meta["annotations"] = dict(sorted({**annotations, **_obj(meta.get("annotations"))}.items()))
    out["metadata"] = meta
    return out


def _role_runner(merged: ComponentSpec, role: str) -> Mapping[str, Any] | None:
    block = merged.leader if role == "leader" else merged.worker if role == "worker" else None
    if block is not None and block.runner is not None:
        return block.runner
    return merged.runner


def apply_model(
    runners: tuple[Runner, ...],
    model: BaseModel,
    component: str,
    merged: ComponentSpec,
    annotations: Mapping[str, str],
    accelerator: Accelerator | None = None,
) -> tuple[Runner, ...]:
    """``runners`` rendered with ``model`` as OME renders a component (module docstring).

    ``merged``: the component merged with its runtime (its ``runner``, ``leader`` and
    ``worker`` decide which container is the runner's and how many pods share the model);
    ``annotations``: the ISVC's and the component's (``ome.io/inject-model-init``);
    ``accelerator``: the engine's or decoder's accelerator class (``accelerators``).
    """
    pods = sum(r.size for r in runners)
    count_leader = component != "decoder" or merged.leader is not None or \
        merged.runner is not None
    render = _Render(model=model, component=component, pods_per_instance=pods,
                     count_leader=count_leader,
                     model_init=annotations.get(ANNOTATION_MODEL_INIT) == "true",
                     accelerator=accelerator)
    labels, notes = _model_metadata(model)
    out: list[Runner] = []
    for runner in runners:
        template = _with_metadata(runner.template, labels, notes)
        pod = dict(_obj(template.get("spec")))
        role_runner = _role_runner(merged, runner.name)
        name = role_runner.get("name") if role_runner is not None else None
        _render_pod(pod, render, name if isinstance(name, str) else None,
                    has_runner=role_runner is not None)
        template["spec"] = pod
        out.append(evolve(runner, template=template))
    return tuple(out)


def runner_placeholder_problem(merged: ComponentSpec) -> str | None:
    """Why OME's template cannot fill the placeholders of ``merged``'s runner containers
    (its ``runner``, its ``leader`` / ``worker`` runners), or None."""
    blocks = [merged.runner]
    for role in (merged.leader, merged.worker):
        if role is not None:
            blocks.append(role.runner)
    for block in blocks:
        problem = placeholder_problem(block) if block is not None else None
        if problem is not None:
            return problem
    return None


def _main_container_filled(runner: Runner, meta: Mapping[str, Any]) -> Runner:
    template = dict(runner.template)
    pod = dict(_obj(template.get("spec")))
    containers = [dict(c) for c in pod.get("containers") or () if isinstance(c, Mapping)]
    index = _main_index(containers, None)
    if index is None:
        return runner
    containers[index] = fill_placeholders(containers[index], meta)
    pod["containers"] = containers
    template["spec"] = pod
    return evolve(runner, template=template)


def finish_runners(
    runners: tuple[Runner, ...],
    model: BaseModel | None,
    isvc: InferenceService,
    component: str,
    merged: ComponentSpec,
    accelerator: Accelerator | None = None,
) -> tuple[Runner, ...]:
    """``runners`` as OME finishes a component's pods: the runtime placeholders of the main
    container filled from the ISVC's metadata (``placeholders``), then ``model`` rendered
    in (``apply_model``, with the component's ``accelerator`` class) when there is one."""
    meta = {"name": isvc.name, "namespace": isvc.namespace, "labels": isvc.labels,
            "annotations": isvc.annotations}
    runners = tuple(_main_container_filled(r, meta) for r in runners)
    if model is None:
        return runners
    return apply_model(runners, model, component, merged,
                       {**isvc.annotations, **merged.annotations}, accelerator)

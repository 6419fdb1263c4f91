"""Typed views over InferenceService and (Cluster)ServingRuntime JSON.

Each view keeps the object exactly as the API server sent it (``raw``) and reads the
fields the service layer needs through typed properties. Nothing is dropped: a field OME
has and we do not model (``kedaConfig``, ``predictor``, ``status.url``, ...) stays in
``raw``, and ``isvc_to_json`` / ``with_status`` write it back unchanged.

``isvc_from_json`` and ``runtime_from_json`` check the types of every field the properties
read, so a property never meets a value of the wrong type; a bad value is a ``CodecError``
naming its JSON path.

A component (``spec.engine``, ``spec.decoder``, ``spec.router``, or a runtime's
``engineConfig`` / ``decoderConfig`` / ``routerConfig``) is OME's inline mix of a pod spec
and component settings. ``COMPONENT_KEYS`` lists the settings; every other key of the
component is part of its pod spec and reaches the pods (so pod fields newer than this
code, such as ``resourceClaims``, pass through).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from attrs import frozen

from omenative_core.codec import CodecError, from_json
from omenative_core.model.spec import COMPONENTS, JSON, LifecycleSpec

__all__ = [
    "API_VERSION",
    "COMPONENT_KEYS",
    "COMPONENT_ORDER",
    "CONFIG_KEYS",
    "ISVC_KIND",
    "ROLE_KEYS",
    "RUNTIME_KINDS",
    "ComponentSpec",
    "InferenceService",
    "RoleSpec",
    "RuntimeRef",
    "ServingRuntime",
    "isvc_from_json",
    "isvc_to_json",
    "runtime_from_json",
    "with_status",
]

API_VERSION: Final = "ome.io/v1beta1"
"""apiVersion of InferenceService, ServingRuntime, ClusterServingRuntime and InferenceReplica."""

ISVC_KIND: Final = "InferenceService"
"""kind of an InferenceService (short name ``isvc``)."""

RUNTIME_KINDS: Final = ("ServingRuntime", "ClusterServingRuntime")
"""The two runtime kinds; a ``spec.runtime`` without ``kind`` means ClusterServingRuntime."""

COMPONENT_ORDER: Final = COMPONENTS
"""Components in the order OME reconciles them: engine, decoder, router."""

CONFIG_KEYS: Final = {
    "engine": "engineConfig",
    "decoder": "decoderConfig",
    "router": "routerConfig",
}
"""The runtime field that configures each component."""

COMPONENT_KEYS: Final = frozenset(
    {
        # ComponentExtensionSpec
        "minReplicas",
        "maxReplicas",
        "scaleTarget",
        "scaleMetric",
        "containerConcurrency",
        "timeoutSeconds",
        "canaryTrafficPercent",
        "logger",
        "labels",
        "annotations",
        "deploymentStrategy",
        "kedaConfig",
        "autoscaler",
        "podDisruptionBudget",
        "minAvailable",
        "maxUnavailable",
        "servicePortAppProtocols",
        "autoscalerPolicyRef",
        "acceleratorOverride",
        # OMENative component settings
        "lifecycle",
        "topologyKey",
        "topologySpread",
        "topologySpreadKey",
        # runner / multi-node / router settings
        "runner",
        "leader",
        "worker",
        "config",
    }
)
"""Keys of a component that are settings, not pod spec fields."""

ROLE_KEYS: Final = frozenset({"runner", "size"})
"""Keys of a ``leader`` / ``worker`` block that are not pod spec fields."""


def _bad(path: str, what: str, value: object) -> CodecError:
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return CodecError(f"{path}: {what}, got {text}", path=path)


def _check_object(value: object, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _bad(path, "expected an object", value)
    return value


def _check_str_map(value: object, path: str) -> None:
    obj = _check_object(value, path)
    for k, v in obj.items():
        if not isinstance(v, str):
            raise _bad(f"{path}.{k}", "expected a string", v)


def _check_int(value: object, path: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(path, "expected an integer", value)


def _check_str(value: object, path: str) -> None:
    if not isinstance(value, str):
        raise _bad(path, "expected a string", value)


def _present(obj: Mapping[str, Any], key: str) -> bool:
    return obj.get(key) is not None


def _check_role(value: object, path: str, *, worker: bool) -> None:
    role = _check_object(value, path)
    if _present(role, "runner"):
        _check_object(role["runner"], f"{path}.runner")
    if worker and _present(role, "size"):
        _check_int(role["size"], f"{path}.size")
    if _present(role, "containers") and not isinstance(role["containers"], list):
        raise _bad(f"{path}.containers", "expected a list", role["containers"])


def _check_component(value: object, path: str) -> None:
    comp = _check_object(value, path)
    for key in ("labels", "annotations"):
        if _present(comp, key):
            _check_str_map(comp[key], f"{path}.{key}")
    for key in ("minReplicas", "maxReplicas"):
        if _present(comp, key):
            _check_int(comp[key], f"{path}.{key}")
    for key in ("topologyKey", "topologySpread", "topologySpreadKey", "schedulerName"):
        if _present(comp, key):
            _check_str(comp[key], f"{path}.{key}")
    for key in ("runner", "autoscaler", "podDisruptionBudget"):
        if _present(comp, key):
            _check_object(comp[key], f"{path}.{key}")
    if _present(comp, "containers") and not isinstance(comp["containers"], list):
        raise _bad(f"{path}.containers", "expected a list", comp["containers"])
    if _present(comp, "leader"):
        _check_role(comp["leader"], f"{path}.leader", worker=False)
    if _present(comp, "worker"):
        _check_role(comp["worker"], f"{path}.worker", worker=True)
    if _present(comp, "lifecycle"):
        from_json(
            _check_object(comp["lifecycle"], f"{path}.lifecycle"),
            LifecycleSpec,
            path=f"{path}.lifecycle",
        )


def _check_metadata(obj: Mapping[str, Any], *, namespaced: bool) -> None:
    meta = _check_object(obj.get("metadata"), "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise _bad("metadata.name", "expected a non-empty string", name)
    if namespaced and _present(meta, "namespace"):
        _check_str(meta["namespace"], "metadata.namespace")
    for key in ("labels", "annotations"):
        if _present(meta, key):
            _check_str_map(meta[key], f"metadata.{key}")
    if _present(meta, "generation"):
        _check_int(meta["generation"], "metadata.generation")
    if _present(meta, "uid"):
        _check_str(meta["uid"], "metadata.uid")


def _str_map(value: object) -> dict[str, str]:
    return dict(value) if isinstance(value, Mapping) else {}


def _opt_str(obj: Mapping[str, Any], key: str) -> str | None:
    value = obj.get(key)
    return value if isinstance(value, str) else None


def _opt_int(obj: Mapping[str, Any], key: str) -> int | None:
    value = obj.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _opt_obj(obj: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else None


def _pod_spec(obj: Mapping[str, Any], settings: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in settings and v is not None}


# ---------------------------------------------------------------------------- components


@frozen
class RoleSpec:
    """A ``leader`` or ``worker`` block: pod spec overrides, a runner, and (worker) a size."""

    raw: JSON

    @property
    def runner(self) -> Mapping[str, Any] | None:
        """The runner container override, if any."""
        return _opt_obj(self.raw, "runner")

    @property
    def size(self) -> int | None:
        """``worker.size``: worker pods per Instance (None when unset)."""
        return _opt_int(self.raw, "size")

    @property
    def pod_spec(self) -> dict[str, Any]:
        """The block's pod spec fields (a fresh dict)."""
        return _pod_spec(self.raw, ROLE_KEYS)


@frozen
class ComponentSpec:
    """An engine, decoder or router: an ISVC component or a runtime ``*Config``."""

    raw: JSON

    @property
    def annotations(self) -> dict[str, str]:
        """The component's ``annotations`` (pod annotations, and ``ome.io/deploymentMode``)."""
        return _str_map(self.raw.get("annotations"))

    @property
    def labels(self) -> dict[str, str]:
        """The component's ``labels`` (pod labels)."""
        return _str_map(self.raw.get("labels"))

    @property
    def min_replicas(self) -> int | None:
        """``minReplicas`` (None when unset)."""
        return _opt_int(self.raw, "minReplicas")

    @property
    def max_replicas(self) -> int | None:
        """``maxReplicas`` (None when unset; 0 means "same as minReplicas")."""
        return _opt_int(self.raw, "maxReplicas")

    @property
    def runner(self) -> Mapping[str, Any] | None:
        """The ``runner`` container override, if any."""
        return _opt_obj(self.raw, "runner")

    @property
    def leader(self) -> RoleSpec | None:
        """The ``leader`` block (an empty ``leader: {}`` counts as set)."""
        value = _opt_obj(self.raw, "leader")
        return None if value is None else RoleSpec(value)

    @property
    def worker(self) -> RoleSpec | None:
        """The ``worker`` block (an empty ``worker: {}`` counts as set)."""
        value = _opt_obj(self.raw, "worker")
        return None if value is None else RoleSpec(value)

    @property
    def lifecycle(self) -> Mapping[str, Any] | None:
        """The ``lifecycle`` block as JSON (read by OMENative components only)."""
        return _opt_obj(self.raw, "lifecycle")

    @property
    def topology_key(self) -> str | None:
        """``topologyKey``: workers' pod affinity to their leader's domain."""
        return _opt_str(self.raw, "topologyKey")

    @property
    def topology_spread(self) -> str | None:
        """``topologySpread``: ``Preferred`` or ``Required`` spread of Instances."""
        return _opt_str(self.raw, "topologySpread")

    @property
    def topology_spread_key(self) -> str | None:
        """``topologySpreadKey``: the fault-domain key (defaults to ``topologyKey``)."""
        return _opt_str(self.raw, "topologySpreadKey")

    @property
    def scheduler_name(self) -> str | None:
        """``schedulerName`` (an inline pod spec field)."""
        return _opt_str(self.raw, "schedulerName")

    @property
    def autoscaler(self) -> Mapping[str, Any] | None:
        """The typed ``autoscaler`` block, if any."""
        return _opt_obj(self.raw, "autoscaler")

    @property
    def pdb_path(self) -> str:
        """Where the budget is set, under ``spec.<component>``: OME v1.3's inline
        ``minAvailable`` / ``maxUnavailable`` (``component.go``), else the older
        ``podDisruptionBudget`` block (OME v1.3's schema prunes it)."""
        inline = any(self.raw.get(k) is not None for k in ("minAvailable", "maxUnavailable"))
        return "" if inline else "podDisruptionBudget"

    @property
    def pod_disruption_budget(self) -> Mapping[str, Any] | None:
        """``{minAvailable | maxUnavailable}`` from ``pdb_path``, if any."""
        if not self.pdb_path:
            return {k: self.raw[k] for k in ("minAvailable", "maxUnavailable")
                    if self.raw.get(k) is not None}
        return _opt_obj(self.raw, "podDisruptionBudget")

    @property
    def pod_spec(self) -> dict[str, Any]:
        """The component's pod spec fields: every key but the settings (a fresh dict)."""
        return _pod_spec(self.raw, COMPONENT_KEYS)


# ---------------------------------------------------------------------------- objects


@frozen
class RuntimeRef:
    """``spec.runtime``: which (Cluster)ServingRuntime the ISVC uses."""

    name: str
    kind: str = "ClusterServingRuntime"


@frozen
class InferenceService:
    """An InferenceService, kept whole in ``raw``; properties read what rendering needs."""

    raw: JSON

    @property
    def metadata(self) -> Mapping[str, Any]:
        """``metadata`` as sent."""
        value = self.raw.get("metadata")
        return value if isinstance(value, Mapping) else {}

    @property
    def spec(self) -> Mapping[str, Any]:
        """``spec`` as sent (``{}`` when absent)."""
        value = self.raw.get("spec")
        return value if isinstance(value, Mapping) else {}

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return str(self.metadata.get("name", ""))

    @property
    def namespace(self) -> str:
        """``metadata.namespace`` (``default`` when absent)."""
        return _opt_str(self.metadata, "namespace") or "default"

    @property
    def uid(self) -> str:
        """``metadata.uid`` (``""`` before creation)."""
        return _opt_str(self.metadata, "uid") or ""

    @property
    def generation(self) -> int:
        """``metadata.generation`` (0 when absent)."""
        return _opt_int(self.metadata, "generation") or 0

    @property
    def labels(self) -> dict[str, str]:
        """``metadata.labels``."""
        return _str_map(self.metadata.get("labels"))

    @property
    def annotations(self) -> dict[str, str]:
        """``metadata.annotations``."""
        return _str_map(self.metadata.get("annotations"))

    @property
    def deployment_mode(self) -> str | None:
        """``spec.deploymentMode`` (``OMENative`` or ``RawDeployment``), if set."""
        return _opt_str(self.spec, "deploymentMode")

    @property
    def runtime_ref(self) -> RuntimeRef | None:
        """``spec.runtime`` as a reference, if it names a runtime."""
        ref = _opt_obj(self.spec, "runtime")
        if ref is None or not isinstance(ref.get("name"), str) or not ref["name"]:
            return None
        return RuntimeRef(name=ref["name"], kind=_opt_str(ref, "kind") or "ClusterServingRuntime")

    @property
    def model_name(self) -> str | None:
        """``spec.model.name``, if set."""
        model = _opt_obj(self.spec, "model")
        return None if model is None else _opt_str(model, "name")

    @property
    def pairing_protocol(self) -> str | None:
        """``spec.rollout.pairingProtocol``, if set."""
        rollout = _opt_obj(self.spec, "rollout")
        return None if rollout is None else _opt_str(rollout, "pairingProtocol")

    @property
    def status(self) -> Mapping[str, Any]:
        """``status`` as sent (``{}`` when absent)."""
        value = self.raw.get("status")
        return value if isinstance(value, Mapping) else {}

    def component(self, name: str) -> ComponentSpec | None:
        """``spec.<name>`` for ``engine``, ``decoder`` or ``router``; None when not declared."""
        value = _opt_obj(self.spec, name) if name in COMPONENT_ORDER else None
        return None if value is None else ComponentSpec(value)

    @property
    def declared_components(self) -> tuple[str, ...]:
        """The components ``spec`` declares, in reconcile order."""
        return tuple(c for c in COMPONENT_ORDER if _opt_obj(self.spec, c) is not None)


@frozen
class ServingRuntime:
    """A ServingRuntime or ClusterServingRuntime, kept whole in ``raw``."""

    raw: JSON

    @property
    def kind(self) -> str:
        """``ServingRuntime`` or ``ClusterServingRuntime``."""
        kind = self.raw.get("kind")
        return kind if kind in RUNTIME_KINDS else "ClusterServingRuntime"

    @property
    def name(self) -> str:
        """``metadata.name``."""
        meta = self.raw.get("metadata")
        return str(meta.get("name", "")) if isinstance(meta, Mapping) else ""

    @property
    def namespace(self) -> str | None:
        """``metadata.namespace`` of a ServingRuntime (None for a cluster runtime)."""
        if self.kind == "ClusterServingRuntime":
            return None
        meta = self.raw.get("metadata")
        return (_opt_str(meta, "namespace") if isinstance(meta, Mapping) else None) or "default"

    @property
    def spec(self) -> Mapping[str, Any]:
        """``spec`` as sent."""
        value = self.raw.get("spec")
        return value if isinstance(value, Mapping) else {}

    @property
    def disabled(self) -> bool:
        """``spec.disabled`` is true."""
        return self.spec.get("disabled") is True

    @property
    def scheduler_name(self) -> str | None:
        """``spec.schedulerName``: the components' scheduler when they set none."""
        return _opt_str(self.spec, "schedulerName")

    @property
    def node_selector(self) -> dict[str, str]:
        """``spec.nodeSelector``: merged under the engine's and decoder's own."""
        return _str_map(self.spec.get("nodeSelector"))

    def config(self, component: str) -> ComponentSpec | None:
        """``engineConfig`` / ``decoderConfig`` / ``routerConfig``; None when absent."""
        key = CONFIG_KEYS.get(component)
        value = None if key is None else _opt_obj(self.spec, key)
        return None if value is None else ComponentSpec(value)


# ---------------------------------------------------------------------------- codec


def isvc_from_json(obj: object) -> InferenceService:
    """Check and wrap an InferenceService; a bad field is a ``CodecError`` naming its path."""
    data = _check_object(obj, "$")
    _check_metadata(data, namespaced=True)
    spec = data.get("spec")
    if spec is None:
        spec = {}
    spec = _check_object(spec, "spec")
    if _present(spec, "deploymentMode"):
        _check_str(spec["deploymentMode"], "spec.deploymentMode")
    if _present(spec, "runtime"):
        ref = _check_object(spec["runtime"], "spec.runtime")
        for key in ("name", "kind"):
            if _present(ref, key):
                _check_str(ref[key], f"spec.runtime.{key}")
        if _present(ref, "kind") and ref["kind"] not in RUNTIME_KINDS:
            raise _bad(
                "spec.runtime.kind", f"expected one of {', '.join(RUNTIME_KINDS)}", ref["kind"]
            )
    if _present(spec, "rollout"):
        rollout = _check_object(spec["rollout"], "spec.rollout")
        if _present(rollout, "pairingProtocol"):
            _check_str(rollout["pairingProtocol"], "spec.rollout.pairingProtocol")
    for component in COMPONENT_ORDER:
        if _present(spec, component):
            _check_component(spec[component], f"spec.{component}")
    if _present(data, "status"):
        _check_object(data["status"], "status")
    return InferenceService(data)


def runtime_from_json(obj: object) -> ServingRuntime:
    """Check and wrap a ServingRuntime or ClusterServingRuntime (``kind`` decides which)."""
    data = _check_object(obj, "$")
    kind = data.get("kind", "ClusterServingRuntime")
    if kind not in RUNTIME_KINDS:
        raise _bad("kind", f"expected one of {', '.join(RUNTIME_KINDS)}", kind)
    _check_metadata(data, namespaced=kind == "ServingRuntime")
    spec = _check_object(data.get("spec") if data.get("spec") is not None else {}, "spec")
    for key in CONFIG_KEYS.values():
        if _present(spec, key):
            _check_component(spec[key], f"spec.{key}")
    if _present(spec, "schedulerName"):
        _check_str(spec["schedulerName"], "spec.schedulerName")
    if _present(spec, "nodeSelector"):
        _check_str_map(spec["nodeSelector"], "spec.nodeSelector")
    return ServingRuntime(data)


def isvc_to_json(isvc: InferenceService) -> dict[str, Any]:
    """The InferenceService as JSON, every field it arrived with included (a deep copy)."""
    return copy.deepcopy(dict(isvc.raw))


def with_status(isvc: InferenceService, status: Mapping[str, Any]) -> dict[str, Any]:
    """The InferenceService JSON with ``status`` merged in: ``status`` keys replace the
    existing ones at the top level, except ``components``, which merges per component and
    per key, so fields written by others (``url``, ``modelStatus``, a component's
    ``traffic``) stay as they were."""
    out = isvc_to_json(isvc)
    merged: dict[str, Any] = dict(out.get("status") or {})
    for key, value in status.items():
        if key == "components" and isinstance(value, Mapping):
            comps: dict[str, Any] = dict(merged.get("components") or {})
            for comp, fields in value.items():
                entry = dict(comps.get(comp) or {})
                entry.update(copy.deepcopy(dict(fields)))
                comps[comp] = entry
            merged["components"] = comps
        else:
            merged[key] = copy.deepcopy(value)
    out["status"] = merged
    return out

"""OME v1.3's structural schemas of the InferenceService and (Cluster)ServingRuntime specs.

Written by us after OME's Go types (ome-projects/ome ``pkg/apis/ome/v1beta1``:
``inference_service.go`` at 4ff3b6e39a76100dd2d733522463408e4f0b538f, ``component.go`` at
4dfb96b1a473d68f5c0da4ccdc17b313069d59bb, ``servingruntime_types.go`` and ``podspec.go`` at
3731e1e7ad756a2e6d4068c455a56331f47e8d46, ``model.go``) and the post-processing of OME's
``Makefile`` target ``manifests`` (the InferenceService loses ``required`` two levels under a
component and the component-level ``ephemeralContainers``). Theory of operation:

1. Every OME type is *closed*: its fields are declared with OME's JSON names, types, enums,
   defaults and ``required``, and the API server prunes any other field, exactly as OME's
   published CRD does. This is what makes a manifest that OME would change or refuse behave
   the same here.
2. Kubernetes' own types inside (Container sub-objects, Volume, Affinity, Toleration,
   probes, ...) are declared by name and kind (object, list) but kept whole
   (``x-kubernetes-preserve-unknown-fields``): their fields are Kubernetes', checked again when
   the pod is created. OME's lifecycle, autoscaler, traffic, scaling and placement blocks are
   kept whole the same way (omenative reads a few of their keys; docs/ome-compatibility.md).
3. ``status`` of the InferenceService keeps unknown fields (OME's
   ``+kubebuilder:pruning:PreserveUnknownFields``); the runtimes' status is typed.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = [
    "INT_OR_STRING",
    "component_schema",
    "isvc_spec_schema",
    "printer_columns",
    "runtime_spec_schema",
    "runtime_status_schema",
]

_STR: Final[dict[str, Any]] = {"type": "string"}
_BOOL: Final[dict[str, Any]] = {"type": "boolean"}
_INT: Final[dict[str, Any]] = {"type": "integer"}
_INT32: Final[dict[str, Any]] = {"type": "integer", "format": "int32"}
_INT64: Final[dict[str, Any]] = {"type": "integer", "format": "int64"}
_STRINGS: Final[dict[str, Any]] = {"type": "object", "additionalProperties": {"type": "string"}}
INT_OR_STRING: Final[dict[str, Any]] = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "x-kubernetes-int-or-string": True,
}
"""A Kubernetes ``IntOrString`` (``minAvailable``, ``maxUnavailable``)."""


def _whole() -> dict[str, Any]:
    """An object kept whole: its fields are checked elsewhere (Kubernetes, the core)."""
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _list(items: dict[str, Any], *, atomic: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "array", "items": items}
    if atomic:
        out["x-kubernetes-list-type"] = "atomic"
    return out


def _map_list(items: dict[str, Any], *keys: str) -> dict[str, Any]:
    """A list keyed by ``keys`` (``+listType=map``): each item declares and requires them."""
    props = {k: dict(_STR) for k in keys} | items.get("properties", {})
    return {
        "type": "array",
        "items": {**items, "properties": props, "required": list(keys)},
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": list(keys),
    }


def _object(properties: dict[str, Any], *, required: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = list(required)
    return out


def _strings_list() -> dict[str, Any]:
    return _list(dict(_STR), atomic=True)


def container_schema(*, name_required: bool) -> dict[str, Any]:
    """``core/v1 Container``: its fields by name, Kubernetes' sub-objects kept whole."""
    objs = ("resources", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle",
            "securityContext")
    lists = ("envFrom", "volumeDevices", "resizePolicy")
    props: dict[str, Any] = {
        "name": dict(_STR),
        "image": dict(_STR),
        "command": _strings_list(),
        "args": _strings_list(),
        "workingDir": dict(_STR),
        "ports": _list(_whole()),
        "env": _map_list(_whole(), "name"),
        "volumeMounts": _map_list(_whole(), "mountPath"),
        "restartPolicy": dict(_STR),
        "terminationMessagePath": dict(_STR),
        "terminationMessagePolicy": dict(_STR),
        "imagePullPolicy": dict(_STR),
        "stdin": dict(_BOOL),
        "stdinOnce": dict(_BOOL),
        "tty": dict(_BOOL),
    }
    props |= {k: _whole() for k in objs} | {k: _list(_whole(), atomic=True) for k in lists}
    return _object(dict(sorted(props.items())), required=("name",) if name_required else ())


def _pod_spec(*, ephemeral: bool) -> dict[str, Any]:
    """OME's ``PodSpec`` (``podspec.go``): core/v1 PodSpec's fields, all optional."""
    containers = _map_list(container_schema(name_required=True), "name")
    props: dict[str, Any] = {
        "volumes": _map_list(_whole(), "name"),
        "initContainers": containers,
        "containers": containers,
        "restartPolicy": dict(_STR),
        "terminationGracePeriodSeconds": dict(_INT64),
        "activeDeadlineSeconds": dict(_INT64),
        "dnsPolicy": dict(_STR),
        "nodeSelector": dict(_STRINGS),
        "serviceAccountName": dict(_STR),
        "serviceAccount": dict(_STR),
        "automountServiceAccountToken": dict(_BOOL),
        "nodeName": dict(_STR),
        "hostNetwork": dict(_BOOL),
        "hostPID": dict(_BOOL),
        "hostIPC": dict(_BOOL),
        "shareProcessNamespace": dict(_BOOL),
        "securityContext": _whole(),
        "imagePullSecrets": _list(_whole()),
        "hostname": dict(_STR),
        "subdomain": dict(_STR),
        "affinity": _whole(),
        "schedulerName": dict(_STR),
        "tolerations": _list(_whole(), atomic=True),
        "hostAliases": _list(_whole()),
        "priorityClassName": dict(_STR),
        "priority": dict(_INT32),
        "dnsConfig": _whole(),
        "readinessGates": _list(_whole(), atomic=True),
        "runtimeClassName": dict(_STR),
        "enableServiceLinks": dict(_BOOL),
        "preemptionPolicy": dict(_STR),
        "overhead": _whole(),
        "topologySpreadConstraints": _list(_whole()),
        "setHostnameAsFQDN": dict(_BOOL),
        "os": _whole(),
        "hostUsers": dict(_BOOL),
        "schedulingGates": _list(_whole()),
        "resourceClaims": _list(_whole()),
    }
    if ephemeral:
        props["ephemeralContainers"] = _list(_whole())
    return props


_POLICIES: Final = ("BestFit", "Cheapest", "MostCapable", "FirstAvailable")


def _accelerator_selector() -> dict[str, Any]:
    """``AcceleratorSelector`` (``inference_service.go``)."""
    constraints = _object({
        "minMemory": dict(_INT64),
        "maxMemory": dict(_INT64),
        "minComputePerformanceTFLOPS": dict(_INT64),
        "minArchitectureVersion": dict(_STR),
        "requiredFeatures": _strings_list(),
        "excludedClasses": _strings_list(),
        "architectureFamilies": _strings_list(),
        "preferredPrecisions": _strings_list(),
    })
    return _object({
        "acceleratorClass": dict(_STR),
        "constraints": constraints,
        "policy": {"type": "string", "enum": list(_POLICIES)},
    })


def _extension() -> dict[str, Any]:
    """``ComponentExtensionSpec`` (``component.go``, v1.3)."""
    return {
        "minReplicas": dict(_INT),
        "maxReplicas": dict(_INT),
        "timeoutSeconds": dict(_INT64),
        "labels": dict(_STRINGS),
        "annotations": dict(_STRINGS),
        "servicePortAppProtocols": dict(_STRINGS),
        "minAvailable": dict(INT_OR_STRING),
        "maxUnavailable": dict(INT_OR_STRING),
        "deploymentStrategy": _whole(),
        "lifecycle": _whole(),
        "autoscaler": _whole(),
        "autoscalerPolicyRef": _whole(),
    }


def component_schema(component: str, *, in_isvc: bool) -> dict[str, Any]:
    """``EngineSpec`` / ``DecoderSpec`` / ``RouterSpec`` (``component`` is engine, decoder or
    router). In the InferenceService, OME's Makefile strips ``required`` from the component's
    direct children (so ``runner.name`` is optional there) and drops the component-level
    ``ephemeralContainers``; the runtimes keep both."""
    runner = container_schema(name_required=not in_isvc)
    named_runner = container_schema(name_required=True)
    props = _pod_spec(ephemeral=not in_isvc) | _extension()
    props["runner"] = runner
    if component == "router":
        props["config"] = dict(_STRINGS)
        return _object(dict(sorted(props.items())))
    leader = _pod_spec(ephemeral=True) | {"runner": named_runner}
    worker = _pod_spec(ephemeral=True) | {"runner": named_runner, "size": dict(_INT)}
    props |= {
        "leader": _object(dict(sorted(leader.items()))),
        "worker": _object(dict(sorted(worker.items()))),
        "topologyKey": dict(_STR),
        "topologySpread": {"type": "string", "enum": ["Preferred", "Required"]},
        "topologySpreadKey": dict(_STR),
        "acceleratorOverride": _accelerator_selector(),
    }
    return _object(dict(sorted(props.items())))


def _ref(default_kind: str, **extra: Any) -> dict[str, Any]:
    props: dict[str, Any] = {
        "name": dict(_STR),
        "kind": {"type": "string", "default": default_kind},
        "apiGroup": {"type": "string", "default": "ome.io"},
    }
    return _object(props | extra, required=("name",))


def isvc_spec_schema(rollout: dict[str, Any]) -> dict[str, Any]:
    """``InferenceServiceSpec`` (v1.3); ``rollout`` is the caller's ``spec.rollout`` schema."""
    overlay = _ref("ClusterBaseModel")
    model = _ref(
        "ClusterBaseModel",
        fineTunedWeights=_strings_list(),
        overlays={
            "type": "array",
            "items": overlay,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
        },
    )
    runtime = _ref(
        "ClusterServingRuntime",
        autoSync={"type": "boolean", "default": True},
        revision=dict(_STR),
    )
    return _object({
        "deploymentMode": {"type": "string", "enum": ["OMENative", "RawDeployment"]},
        "engine": component_schema("engine", in_isvc=True),
        "decoder": component_schema("decoder", in_isvc=True),
        "router": component_schema("router", in_isvc=True),
        "model": model,
        "runtime": runtime,
        "acceleratorSelector": _accelerator_selector(),
        "traffic": _whole(),
        "rollout": rollout,
        "scalingPolicy": _whole(),
        "placement": _whole(),
    })


def _versioned(*, with_operator: bool = True) -> dict[str, Any]:
    """``ModelFormat`` / ``ModelFrameworkSpec`` (``model.go``)."""
    props: dict[str, Any] = {"name": dict(_STR), "version": dict(_STR)}
    if with_operator:
        props["operator"] = {"type": "string", "default": "Equal"}
        props["weight"] = {"type": "integer", "format": "int64", "default": 1}
    return _object(props, required=("name",))


def _supported_format() -> dict[str, Any]:
    """``SupportedModelFormat`` (``servingruntime_types.go``)."""
    minimum = {"type": "integer", "format": "int64", "minimum": 0}
    accel = _object({
        "minMemoryPerBillionParams": dict(minimum),
        "tensorParallelismOverride": _object({
            "tensorParallelSize": dict(minimum),
            "pipelineParallelSize": dict(minimum),
            "dataParallelSize": dict(minimum),
        }),
        "runtimeArgsOverride": _strings_list(),
        "environmentOverride": dict(_STRINGS),
    })
    return _object(
        {
            "name": dict(_STR),
            "modelFormat": _versioned(),
            "modelType": dict(_STR),
            "version": dict(_STR),
            "modelFramework": _versioned(),
            "modelArchitecture": dict(_STR),
            "quantization": dict(_STR),
            "diffusionPipeline": _whole(),
            "modelCacheProviders": _strings_list(),
            "autoSelect": dict(_BOOL),
            "priority": {"type": "integer", "format": "int32", "minimum": 1},
            "acceleratorConfig": {"type": "object", "additionalProperties": accel},
        },
        required=("modelFormat", "modelFramework"),
    )


def runtime_spec_schema() -> dict[str, Any]:
    """``ServingRuntimeSpec`` (v1.3), shared by ServingRuntime and ClusterServingRuntime."""
    minimum = {"type": "integer", "format": "int64", "minimum": 0}
    props: dict[str, Any] = {
        "supportedModelFormats": _list(_supported_format(), atomic=True),
        "modelSizeRange": _object({"min": dict(_STR), "max": dict(_STR)}),
        "disabled": dict(_BOOL),
        "routerConfig": component_schema("router", in_isvc=False),
        "engineConfig": component_schema("engine", in_isvc=False),
        "decoderConfig": component_schema("decoder", in_isvc=False),
        "protocolVersions": _list(dict(_STR), atomic=True),
        "containers": _map_list(container_schema(name_required=True), "name"),
        "volumes": _map_list(_whole(), "name"),
        "nodeSelector": dict(_STRINGS),
        "affinity": _whole(),
        "tolerations": _list(_whole(), atomic=True),
        "labels": dict(_STRINGS),
        "annotations": dict(_STRINGS),
        "imagePullSecrets": _map_list(_whole(), "name"),
        "schedulerName": dict(_STR),
        "hostIPC": dict(_BOOL),
        "dnsPolicy": dict(_STR),
        "hostNetwork": dict(_BOOL),
        "scalingPolicy": _whole(),
        "acceleratorRequirements": _object({
            "acceleratorClasses": _strings_list(),
            "minMemory": dict(minimum),
            "minComputePerformanceTFLOPS": dict(minimum),
            "minArchitectureVersion": dict(_STR),
            "requiredFeatures": _strings_list(),
            "preferredPrecisions": _strings_list(),
        }),
    }
    return _object(props)


def runtime_status_schema() -> dict[str, Any]:
    """``ServingRuntimeStatus`` (v1.3): the inheritance chain and its conditions."""
    return _object({
        "inheritanceChain": _strings_list(),
        "conditions": _map_list(_whole(), "type"),
    })


def _column(name: str, kind: str, path: str, priority: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "type": kind, "jsonPath": path}
    if priority:
        out["priority"] = priority
    return out


def printer_columns(kind: str) -> list[dict[str, Any]]:
    """OME's ``kubectl get`` columns of ``kind`` (its ``+kubebuilder:printcolumn`` markers)."""
    age = _column("Age", "date", ".metadata.creationTimestamp")
    if kind == "InferenceService":
        return [
            _column("URL", "string", ".status.url"),
            _column("Ready", "string", ".status.conditions[?(@.type=='Ready')].status"),
            _column("BaseModel", "string", ".spec.model.name"),
            _column("Runtime", "string", ".spec.runtime.name"),
            _column("Plan-Source", "string", ".status.rollout.activeRun.plan.groups[0].source", 1),
            _column("Plan-Drift", "string",
                    ".status.conditions[?(@.type=='RolloutPlanDrift')].status", 1),
            age,
        ]
    formats = ".spec.supportedModelFormats[*]"
    return [
        _column("Disabled", "boolean", ".spec.disabled"),
        _column("ModelFormat", "string", f"{formats}.modelFormat.name"),
        _column("ModelFramework", "string", f"{formats}.modelFramework.name"),
        _column("ModelFrameworkVersion", "string", f"{formats}.modelFramework.version"),
        _column("ModelArchitecture", "string", f"{formats}.modelArchitecture"),
        _column("ModelSizeMin", "string", ".spec.modelSizeRange.min"),
        _column("ModelSizeMax", "string", ".spec.modelSizeRange.max"),
        _column("Images", "string", ".spec.containers[*].image"),
        age,
    ]

"""The InferenceService and runtime CRDs the tests install follow OME v1.3's schema.

Each expectation is a marker of OME's Go types (ome-projects/ome ``pkg/apis/ome/v1beta1``:
``inference_service.go`` at 4ff3b6e3, ``component.go`` at 4dfb96b1, ``servingruntime_types.go``
at 3731e1e7) or a line of OME's ``Makefile`` ``manifests`` target; an OME user's manifest is
kept, defaulted, pruned or refused the same way here (the API server itself is exercised in
``tests/integration/test_ome_schema.py``).
"""

from __future__ import annotations

from typing import Any

import pytest

from omenative_controller import service_crds

OME_KINDS = service_crds.SERVICE_CRDS


def _schema(crd: service_crds.CrdKind) -> dict[str, Any]:
    (version,) = service_crds.crd_manifest(crd)["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]
    assert isinstance(schema, dict)
    return schema


def _at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    node = schema
    for part in path.split("."):
        node = node["items"] if part == "[]" else node["properties"][part]
    return node


@pytest.mark.parametrize("crd", OME_KINDS, ids=lambda c: c.kind)
def test_spec_is_closed_so_unknown_fields_are_pruned(crd: service_crds.CrdKind) -> None:
    """OME's published CRDs are structural without preserve-unknown-fields on spec:
    a field OME does not know is dropped by the API server."""
    spec = _schema(crd)["properties"]["spec"]
    assert "x-kubernetes-preserve-unknown-fields" not in spec
    assert crd.file.parent.name == "crd"  # what config/ installs


def test_isvc_fields_types_enums_and_defaults() -> None:
    isvc = _schema(service_crds.OME_INFERENCE_SERVICE)
    assert _at(isvc, "spec.deploymentMode")["enum"] == ["OMENative", "RawDeployment"]
    assert _at(isvc, "spec.model")["required"] == ["name"]
    assert _at(isvc, "spec.model.kind")["default"] == "ClusterBaseModel"
    assert _at(isvc, "spec.runtime.kind")["default"] == "ClusterServingRuntime"
    assert _at(isvc, "spec.runtime.autoSync")["default"] is True
    assert _at(isvc, "spec.acceleratorSelector.policy")["enum"] == [
        "BestFit", "Cheapest", "MostCapable", "FirstAvailable"]
    assert _at(isvc, "spec.engine.topologySpread")["enum"] == ["Preferred", "Required"]
    assert _at(isvc, "spec.engine.worker.size")["type"] == "integer"
    assert _at(isvc, "spec.engine.minAvailable")["x-kubernetes-int-or-string"] is True
    # OME's status keeps unknown fields (+kubebuilder:pruning:PreserveUnknownFields)
    assert isvc["properties"]["status"]["x-kubernetes-preserve-unknown-fields"] is True


def test_isvc_component_fields_follow_v13() -> None:
    """v1.3's ComponentExtensionSpec: the pre-v1.3 scaleTarget/scaleMetric/kedaConfig are
    gone (pruned), the OMENative lifecycle and topology fields are there."""
    engine = _at(_schema(service_crds.OME_INFERENCE_SERVICE), "spec.engine")["properties"]
    for gone in ("scaleTarget", "scaleMetric", "containerConcurrency", "kedaConfig",
                 "canaryTrafficPercent", "ephemeralContainers"):
        assert gone not in engine
    for kept in ("lifecycle", "topologyKey", "runner", "leader", "worker", "containers",
                 "nodeSelector", "annotations", "labels", "minReplicas", "maxReplicas"):
        assert kept in engine


def test_required_names_as_omes_makefile_leaves_them() -> None:
    """OME's Makefile deletes ``required`` directly under an ISVC component (a runner may omit
    its name there), not deeper, and not in the runtimes."""
    isvc = _schema(service_crds.OME_INFERENCE_SERVICE)
    assert "required" not in _at(isvc, "spec.engine.runner")
    assert _at(isvc, "spec.engine.leader.runner")["required"] == ["name"]
    assert _at(isvc, "spec.engine.containers.[]")["required"] == ["name"]
    runtime = _schema(service_crds.OME_CLUSTER_SERVING_RUNTIME)
    assert _at(runtime, "spec.engineConfig.runner")["required"] == ["name"]


def test_runtime_fields_types_and_required() -> None:
    runtime = _schema(service_crds.OME_SERVING_RUNTIME)
    fmt = _at(runtime, "spec.supportedModelFormats.[]")
    assert fmt["required"] == ["modelFormat", "modelFramework"]
    assert _at(runtime, "spec.supportedModelFormats.[].priority")["minimum"] == 1
    assert _at(runtime, "spec.supportedModelFormats.[].modelFormat.weight")["default"] == 1
    assert _at(runtime, "spec.supportedModelFormats.[].modelFormat.operator")["default"] == "Equal"
    assert set(_at(runtime, "status")["properties"]) == {"inheritanceChain", "conditions"}
    assert service_crds.OME_SERVING_RUNTIME.status_subresource


def test_printer_columns_are_omes() -> None:
    (version,) = service_crds.crd_manifest(service_crds.OME_INFERENCE_SERVICE)["spec"]["versions"]
    names = [c["name"] for c in version["additionalPrinterColumns"]]
    assert names == ["URL", "Ready", "BaseModel", "Runtime", "Plan-Source", "Plan-Drift", "Age"]

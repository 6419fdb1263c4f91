"""How a component's mode is resolved: each rule of OME's order and its precedence."""

from __future__ import annotations

from typing import Any

import pytest

from omenative_core.service import (
    ModeError,
    declared_mode,
    explain_mode,
    isvc_from_json,
    resolve_mode,
    runtime_from_json,
)

MODE = "ome.io/deploymentMode"


def isvc(spec: dict[str, Any], annotations: dict[str, str] | None = None) -> Any:
    meta: dict[str, Any] = {"name": "chat"}
    if annotations:
        meta["annotations"] = annotations
    return isvc_from_json({"metadata": meta, "spec": spec})


def runtime(**configs: dict[str, Any]) -> Any:
    return runtime_from_json(
        {"kind": "ClusterServingRuntime", "metadata": {"name": "rt"}, "spec": configs}
    )


def ann(mode: str) -> dict[str, Any]:
    return {"annotations": {MODE: mode}}


LW = {"leader": {}, "worker": {"size": 1}}

# (case, isvc spec, runtime configs, component, expected mode, expected source)
TABLE: list[tuple[str, dict[str, Any], dict[str, Any], str, str, str]] = [
    ("nothing set", {"engine": {}}, {}, "engine", "RawDeployment", "Default"),
    (
        "spec.deploymentMode",
        {"deploymentMode": "OMENative", "router": {}},
        {},
        "router",
        "OMENative",
        "ServiceSpec",
    ),
    (
        "spec RawDeployment beats leader/worker",
        {"deploymentMode": "RawDeployment", "engine": LW},
        {},
        "engine",
        "RawDeployment",
        "ServiceSpec",
    ),
    ("isvc leader/worker", {"engine": LW}, {}, "engine", "OMENative", "LeaderWorkerShape"),
    (
        "runtime worker only",
        {"decoder": {}},
        {"decoderConfig": {"worker": {}}},
        "decoder",
        "OMENative",
        "LeaderWorkerShape",
    ),
    (
        "router never from a shape",
        {"router": {}},
        {"routerConfig": LW},
        "router",
        "RawDeployment",
        "Default",
    ),
    (
        "isvc annotation beats spec",
        {"deploymentMode": "RawDeployment", "engine": ann("OMENative")},
        {},
        "engine",
        "OMENative",
        "ComponentAnnotation",
    ),
    (
        "runtime annotation beats spec",
        {"deploymentMode": "OMENative", "engine": {}},
        {"engineConfig": ann("MultiNode")},
        "engine",
        "MultiNode",
        "ComponentAnnotation",
    ),
    (
        "isvc annotation beats runtime annotation",
        {"engine": ann("RawDeployment")},
        {"engineConfig": {**ann("MultiNode"), **LW}},
        "engine",
        "RawDeployment",
        "ComponentAnnotation",
    ),
    (
        "annotation beats leader/worker",
        {"engine": {**ann("RawDeployment"), **LW}},
        {},
        "engine",
        "RawDeployment",
        "ComponentAnnotation",
    ),
    (
        "unknown annotation value is skipped",
        {"deploymentMode": "OMENative", "engine": ann("MultiNodeRayVLLM")},
        {},
        "engine",
        "OMENative",
        "ServiceSpec",
    ),
    (
        "values are case-sensitive",
        {"engine": ann("omenative")},
        {},
        "engine",
        "RawDeployment",
        "Default",
    ),
    (
        "the service's skipped value still hides the runtime's",
        {"engine": ann("bogus")},
        {"engineConfig": ann("OMENative")},
        "engine",
        "RawDeployment",
        "Default",
    ),
    (
        "spec enum outside OMENative/RawDeployment is skipped",
        {"deploymentMode": "MultiNode", "engine": {}},
        {},
        "engine",
        "RawDeployment",
        "Default",
    ),
    (
        "MultiNode on the engine is allowed",
        {"engine": ann("MultiNode")},
        {},
        "engine",
        "MultiNode",
        "ComponentAnnotation",
    ),
]


@pytest.mark.parametrize(
    ("case", "spec", "configs", "component", "mode", "source"), TABLE, ids=[row[0] for row in TABLE]
)
def test_mode_resolution_table(
    case: str, spec: dict[str, Any], configs: dict[str, Any], component: str, mode: str, source: str
) -> None:
    res = explain_mode(isvc(spec), runtime(**configs), component)
    assert (res.mode, res.source, res.error) == (mode, source, None), case
    assert resolve_mode(isvc(spec), runtime(**configs), component) == mode


def test_annotation_origin_says_where_it_came_from() -> None:
    from_runtime = explain_mode(
        isvc({"engine": {}}), runtime(engineConfig=ann("OMENative")), "engine"
    )
    assert from_runtime.origin == "runtime"
    own = explain_mode(isvc({"engine": ann("OMENative")}), None, "engine")
    assert own.origin == "service"
    assert str(own) == "OMENative (ComponentAnnotation)"


def test_isvc_metadata_annotation_sets_no_component_mode() -> None:
    res = explain_mode(isvc({"engine": {}}, {MODE: "OMENative"}), None, "engine")
    assert (res.mode, res.source) == ("RawDeployment", "Default")


def test_isvc_metadata_virtual_deployment_applies_to_every_component() -> None:
    service = isvc({"engine": ann("OMENative"), "router": {}}, {MODE: "VirtualDeployment"})
    for component in ("engine", "router"):
        res = explain_mode(service, None, component)
        assert (res.mode, res.source, res.error) == ("VirtualDeployment", "ServiceAnnotation", None)


@pytest.mark.parametrize(
    ("spec", "configs", "component", "needle"),
    [
        ({"engine": ann("VirtualDeployment")}, {}, "engine", "VirtualDeployment"),
        ({"router": {}}, {"routerConfig": ann("VirtualDeployment")}, "router", "runtime's"),
        ({"router": ann("MultiNode")}, {}, "router", "invalid deployment mode for router"),
    ],
)
def test_impossible_component_annotation_fails_with_a_clear_error(
    spec: dict[str, Any], configs: dict[str, Any], component: str, needle: str
) -> None:
    res = explain_mode(isvc(spec), runtime(**configs), component)
    assert res.error is not None and needle in res.error
    with pytest.raises(ModeError, match=needle):
        resolve_mode(isvc(spec), runtime(**configs), component)


def test_declared_mode_reads_only_the_isvc() -> None:
    service = isvc({"engine": LW, "decoder": ann("OMENative")})
    assert declared_mode(service, "engine") == ""
    assert declared_mode(service, "decoder") == "OMENative"
    spec_wide = isvc({"deploymentMode": "OMENative", "engine": ann("MultiNode"), "decoder": {}})
    assert declared_mode(spec_wide, "engine") == "MultiNode"
    assert declared_mode(spec_wide, "decoder") == "OMENative"

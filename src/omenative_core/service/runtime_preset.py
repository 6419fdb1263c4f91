"""Engine presets (``ome.io/engine`` on a runtime), as OME v1.3 fills them in.

OME v1.3's mutating webhook for ServingRuntimes and ClusterServingRuntimes (package
``runtimepreset``: ``applyPreset``, ``sglangPDPreset``) merges a Go-defined preset under the
runtime's spec when the runtime's annotation ``ome.io/engine`` names one, with the same merge
as runtime inheritance (the preset is the parent: the runtime's own fields win, ``env``,
``ports`` and the other named lists merge item by item, ``command``/``args`` replace). Any
other value is denied (``unknown ome.io/engine value "<v>" (known: sglang-pd)``).

omenative has no mutating webhook for runtimes, so the preset is applied where a runtime is
read (``decode_runtime``, used by every reader of runtimes): what the components render, the
runtime-revision hash and auto-selection see the spec OME would have stored. An unknown
value cannot be denied here; a component that renders from such a runtime is blocked with
``RuntimeValidationError`` naming the annotation (``preset_problem``).

``sglang-pd`` (ome-docs ``reference/api/labels-and-annotations.md``, "ServingRuntime and
ClusterServingRuntime"): an engine runner in prefill mode with the bootstrap port 8998, a
decoder runner in decode mode, both ``lmsysorg/sglang:latest`` on port 30000, and a router
``lmsysorg/sglang-router:latest`` on port 30080 that finds the engine and decoder pods by
label.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from omenative_core.service.inheritance import merge_specs
from omenative_core.service.model import ServingRuntime, runtime_from_json

__all__ = ["ANNOTATION_ENGINE", "PRESETS", "decode_runtime", "preset_problem", "with_preset"]

ANNOTATION_ENGINE: Final = "ome.io/engine"
"""On a runtime: the engine preset whose fields fill the ones the runtime leaves unset."""

_ENGINE_IMAGE: Final = "lmsysorg/sglang:latest"
_ROUTER_IMAGE: Final = "lmsysorg/sglang-router:latest"


def _probe(path: str, port: int, failures: int, period: int) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": port}, "failureThreshold": failures,
            "periodSeconds": period, "timeoutSeconds": 10}


def _port(number: int, name: str) -> dict[str, Any]:
    return {"containerPort": number, "name": name, "protocol": "TCP"}


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _sglang_runner(mode: str, bootstrap: bool) -> dict[str, Any]:
    command = ["python3", "-m", "sglang.launch_server", "--host", "0.0.0.0", "--port", "30000",
               "--model-path", "$(MODEL_PATH)", "--disaggregation-mode", mode,
               "--disaggregation-transfer-backend", "nixl"]
    ports = [_port(30000, "http")]
    if bootstrap:
        command += ["--disaggregation-bootstrap-port", "8998"]
        ports.append(_port(8998, "bootstrap"))
    return {"name": "ome-container", "image": _ENGINE_IMAGE, "command": command,
            "env": [{"name": "PYTHONUNBUFFERED", "value": "1"},
                    _field_env("SGLANG_HOST_IP", "status.podIP")],
            "ports": ports,
            "readinessProbe": _probe("/health", 30000, 5, 30),
            "livenessProbe": _probe("/health", 30000, 5, 60)}


def _sglang_pd() -> dict[str, Any]:
    selector = "ome.io/inferenceservice=$(INFERENCESERVICE_NAME)"
    router = {
        "name": "router", "image": _ROUTER_IMAGE,
        "args": ["--port", "30080", "--k8s-namespace", "$(NAMESPACE)",
                 "--prefill-label-selector", f"component=engine,{selector}",
                 "--decode-label-selector", f"component=decoder,{selector}",
                 "--k8s-engine-port", "30000", "--bootstrap-port", "8998"],
        "env": [_field_env("NAMESPACE", "metadata.namespace"),
                _field_env("INFERENCESERVICE_NAME",
                           "metadata.labels['ome.io/inferenceservice']")],
        "ports": [_port(30080, "http")],
        "readinessProbe": _probe("/readiness", 30080, 5, 30),
        "livenessProbe": _probe("/liveness", 30080, 5, 30)}
    return {"engineConfig": {"runner": _sglang_runner("prefill", True)},
            "decoderConfig": {"runner": _sglang_runner("decode", False)},
            "routerConfig": {"runner": router}}


PRESETS: Final = {"sglang-pd": _sglang_pd}
"""OME v1.3's presets by ``ome.io/engine`` value."""


def _engine(runtime: ServingRuntime) -> str:
    meta = runtime.raw.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    value = annotations.get(ANNOTATION_ENGINE) if isinstance(annotations, Mapping) else None
    return value if isinstance(value, str) else ""


def with_preset(runtime: ServingRuntime) -> ServingRuntime:
    """``runtime`` with its ``ome.io/engine`` preset merged under its spec (itself when it
    names none, or one OME does not know)."""
    factory = PRESETS.get(_engine(runtime))
    if factory is None:
        return runtime
    return ServingRuntime({**runtime.raw, "spec": merge_specs(factory(), runtime.spec)})


def decode_runtime(obj: object) -> ServingRuntime:
    """``runtime_from_json`` and then ``with_preset``: a runtime as OME stores it."""
    return with_preset(runtime_from_json(obj))


def preset_problem(runtime: ServingRuntime) -> str | None:
    """OME's admission denial for an ``ome.io/engine`` value it has no preset for."""
    engine = _engine(runtime)
    if not engine or engine in PRESETS:
        return None
    return (f"{runtime.kind} {runtime.name}: unknown {ANNOTATION_ENGINE} value {engine!r} "
            f"(known: {', '.join(sorted(PRESETS))})")

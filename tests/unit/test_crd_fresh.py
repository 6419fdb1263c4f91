"""The checked-in CRD is what ``make manifests`` generates, and it holds what the codec writes.

A field the codec writes but the schema lacks would be silently pruned by the API server
(and the manager would forget it between passes), so every key of a fully populated spec
and status, in both status encodings, must be declared with a matching type.
"""

from __future__ import annotations

import sys
import types
import typing
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from omenative_controller import crd
from omenative_core.codec import spec_to_json
from omenative_core.model.spec import InferenceReplicaSpec
from omenative_core.model.status import InferenceReplicaStatus, InstanceStatus
from omenative_core.status.wire import status_to_json

ROOT = Path(__file__).resolve().parents[2]


def test_checked_in_crd_is_fresh() -> None:
    path = ROOT / crd.CRD_FILE
    assert path.is_file(), f"{crd.CRD_FILE} is missing: run `make manifests`"
    assert path.read_text(encoding="utf-8") == crd.render_yaml(), (
        f"{crd.CRD_FILE} is stale: run `make manifests` (python -m omenative_controller.crd)"
    )


def test_config_crd_holds_only_crds_and_lists_every_one() -> None:
    crd_dir = ROOT / "config" / "crd"
    manifests = sorted(f.name for f in crd_dir.iterdir() if f.name != "kustomization.yaml")
    for name in manifests:
        docs = [d for d in yaml.safe_load_all((crd_dir / name).read_text()) if d]
        assert docs and all(d["kind"] == "CustomResourceDefinition" for d in docs), name
    kustomization = yaml.safe_load((crd_dir / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == manifests


def _version() -> dict[str, Any]:
    manifest = yaml.safe_load((ROOT / crd.CRD_FILE).read_text())
    (version,) = manifest["spec"]["versions"]
    return version


def test_names_subresources_and_columns() -> None:
    manifest = crd.crd_manifest()
    spec = manifest["spec"]
    assert spec["group"] == "ome.io" and spec["scope"] == "Namespaced"
    assert spec["names"]["plural"] == "inferencereplicas"
    assert spec["names"]["shortNames"] == ["irep"]
    version = _version()
    assert version["name"] == "v1beta1" and version["served"] and version["storage"]
    assert version["subresources"]["status"] == {}
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.labelSelector",
    }
    columns = {c["name"]: (c["type"], c["jsonPath"]) for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Component": ("string", ".spec.component"),
        "Desired": ("integer", ".spec.replicas"),
        "Current": ("integer", ".status.replicas"),
        "Ready": ("integer", ".status.readyReplicas"),
        "Available": ("integer", ".status.availableReplicas"),
        "Age": ("date", ".metadata.creationTimestamp"),
    }


def test_cheap_validation_rules() -> None:
    spec = _version()["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert spec["replicas"]["minimum"] == 0
    runner = spec["runners"]["items"]["properties"]
    assert runner["size"]["minimum"] == 1
    assert runner["name"]["enum"] == ["default", "leader", "worker"]
    assert runner["template"]["x-kubernetes-preserve-unknown-fields"] is True
    assert spec["runners"]["x-kubernetes-list-map-keys"] == ["name"]
    rolling = spec["lifecycle"]["properties"]["updateStrategy"]["properties"]["rollingUpdate"]
    assert rolling["properties"]["maxSurge"]["x-kubernetes-int-or-string"] is True
    assert spec["lifecycle"]["properties"]["instanceReadyTimeout"]["type"] == "string"
    status = _version()["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert "instanceStatuses" in status
    assert status["instanceStatusEncoding"]["enum"] == ["ColumnarV2"]  # OME: absent is DenseV1
    assert status["instanceStatusColumns"]["x-kubernetes-preserve-unknown-fields"] is True


# ---------------------------------------------------------------------------- codec coverage

_NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _sample(tp: Any, depth: int = 0) -> Any:
    """A non-default value of ``tp`` (attrs classes: every field set)."""
    origin = typing.get_origin(tp)
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if origin in (typing.Union, types.UnionType):
        if set(args) == {int, str}:
            return "25%"
        return _sample(args[0], depth)
    if tp is bool:
        return True
    if tp is int:
        return 3
    if tp is float:
        return 1.5
    if tp is str:
        return "x"
    if tp is datetime:
        return _NOW
    if tp is timedelta:
        return timedelta(minutes=5)
    if tp is Any:
        return None
    if origin is tuple:
        return (_sample(args[0], depth + 1),)
    if origin in (Mapping, dict):
        if len(args) == 2 and args[1] is str:
            return {"k": "v"}
        return {"spec": {"containers": [{"name": "c", "image": "i"}]}}
    if isinstance(tp, type) and attrs.has(tp):
        hints = typing.get_type_hints(tp, vars(sys.modules[tp.__module__]))
        values = {}
        for a in attrs.fields(tp):
            if a.name == "status" and hints[a.name] is Any:
                continue
            values[a.name] = _sample(hints[a.name], depth + 1)
        return tp(**values)
    raise TypeError(tp)


def _check(value: Any, schema: dict[str, Any], path: str) -> None:
    if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
        return
    if schema.get("x-kubernetes-int-or-string"):
        assert isinstance(value, int | str), path
        return
    kind = schema.get("type")
    if kind == "object":
        assert isinstance(value, dict), f"{path}: expected an object"
        if "properties" in schema:
            for key, sub in value.items():
                assert key in schema["properties"], f"{path}.{key} is not in the CRD schema"
                _check(sub, schema["properties"][key], f"{path}.{key}")
        elif "additionalProperties" in schema:
            for key, sub in value.items():
                _check(sub, schema["additionalProperties"], f"{path}.{key}")
    elif kind == "array":
        assert isinstance(value, list), f"{path}: expected an array"
        for i, item in enumerate(value):
            _check(item, schema["items"], f"{path}[{i}]")
    elif kind == "integer":
        assert isinstance(value, int) and not isinstance(value, bool), f"{path}: {value!r}"
    elif kind == "number":
        assert isinstance(value, int | float), f"{path}: {value!r}"
    elif kind == "boolean":
        assert isinstance(value, bool), f"{path}: {value!r}"
    elif kind == "string":
        assert isinstance(value, str), f"{path}: {value!r}"


def _schema(part: str) -> dict[str, Any]:
    return _version()["schema"]["openAPIV3Schema"]["properties"][part]


def test_full_spec_fits_the_schema() -> None:
    spec = _sample(InferenceReplicaSpec)
    _check(spec_to_json(spec), _schema("spec"), "spec")


@pytest.mark.parametrize("encoding", ["DenseV1", "ColumnarV2"])
def test_full_status_fits_the_schema(encoding: str) -> None:
    status = _sample(InferenceReplicaStatus)
    rows = tuple(
        attrs.evolve(_sample(InstanceStatus), index=i, active_ordinal=i % 2, phase="Ready")
        for i in range(12)
    )
    status = attrs.evolve(status, instances=rows)
    out = status_to_json(status, encoding=encoding, max_decoded=20000)
    if encoding == "ColumnarV2":
        assert "instanceStatusColumns" in out or "instanceStatuses" in out
    _check(out, _schema("status"), "status")

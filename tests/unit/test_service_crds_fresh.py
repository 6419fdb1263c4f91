"""The checked-in InferenceService / ServingRuntime / ClusterServingRuntime CRDs are fresh."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from omenative_controller import service_crds

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("crd", service_crds.ALL_CRDS, ids=lambda c: f"{c.folder}/{c.kind}")
def test_checked_in_crd_is_fresh(crd: service_crds.CrdKind) -> None:
    path = ROOT / crd.file
    assert path.is_file(), f"{crd.file} is missing: run python -m omenative_controller.service_crds"
    assert path.read_text(encoding="utf-8") == service_crds.render_yaml(crd), (
        f"{crd.file} is stale: run `python -m omenative_controller.service_crds`"
    )


def test_check_flag(tmp_path: Path) -> None:
    assert service_crds.main(["--root", str(tmp_path), "--check"]) == 1
    assert service_crds.main(["--root", str(tmp_path)]) == 0
    assert service_crds.main(["--root", str(tmp_path), "--check"]) == 0
    (tmp_path / service_crds.OME_SERVING_RUNTIME.file).write_text("stale\n")
    assert service_crds.main(["--root", str(tmp_path), "--check"]) == 1


def _version(crd: service_crds.CrdKind) -> dict[str, object]:
    manifest = yaml.safe_load((ROOT / crd.file).read_text())
    (version,) = manifest["spec"]["versions"]
    assert isinstance(version, dict)
    return version


def test_names_scopes_and_subresources() -> None:
    isvc = service_crds.crd_manifest(service_crds.INFERENCE_SERVICE)
    assert isvc["metadata"]["name"] == "inferenceservices.ome.io"
    assert isvc["spec"]["scope"] == "Namespaced"
    assert isvc["spec"]["names"]["shortNames"] == ["isvc"]
    assert _version(service_crds.INFERENCE_SERVICE)["subresources"] == {"status": {}}
    sr = service_crds.crd_manifest(service_crds.SERVING_RUNTIME)
    assert sr["spec"]["scope"] == "Namespaced"
    assert sr["spec"]["names"]["plural"] == "servingruntimes"
    csr = service_crds.crd_manifest(service_crds.CLUSTER_SERVING_RUNTIME)
    assert csr["spec"]["scope"] == "Cluster"
    assert csr["spec"]["names"]["kind"] == "ClusterServingRuntime"


LOOSE = (*service_crds.LOOSE_SERVICE_CRDS, *service_crds.MODEL_CRDS,
         service_crds.ACCELERATOR_CLASS)


@pytest.mark.parametrize("crd", LOOSE, ids=lambda c: f"{c.folder}/{c.kind}")
def test_unknown_fields_are_preserved(crd: service_crds.CrdKind) -> None:
    version = _version(crd)
    schema = version["schema"]["openAPIV3Schema"]  # type: ignore[index]
    props = schema["properties"]
    assert props["spec"]["x-kubernetes-preserve-unknown-fields"] is True
    assert props["status"]["x-kubernetes-preserve-unknown-fields"] is True

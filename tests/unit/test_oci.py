"""The OCI packer: reproducible digests and a layout containerd's importer accepts.

Go-free: a few fixed bytes stand in for the model server binary. What containerd's
``ctr images import`` needs is checked against the OCI image-spec rules: every descriptor's
digest and size match its blob, the manifest names the config and the layer, the config's
``diff_ids`` name the uncompressed layer, and the index carries both name annotations.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

import pytest

from omenative_devcluster import oci
from omenative_devcluster.images import (
    MODEL_SERVER_IMAGE,
    PAUSE_IMAGE,
    archive_name,
    image_specs,
)

FAKE_BINARY = b"\x7fELF" + bytes(range(256)) * 40


def _members(archive: bytes) -> dict[str, tuple[tarfile.TarInfo, bytes | None]]:
    out: dict[str, tuple[tarfile.TarInfo, bytes | None]] = {}
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for info in tar.getmembers():
            f = tar.extractfile(info) if info.isfile() else None
            out[info.name] = (info, f.read() if f else None)
    return out


def _blob(members: dict[str, tuple[tarfile.TarInfo, bytes | None]], desc: dict[str, object]
          ) -> bytes:
    digest = str(desc["digest"])
    data = members[f"blobs/sha256/{digest.removeprefix('sha256:')}"][1]
    assert data is not None
    assert "sha256:" + hashlib.sha256(data).hexdigest() == digest, "blob content != its digest"
    assert len(data) == desc["size"], f"descriptor size {desc['size']} != blob size {len(data)}"
    return data


def _specs() -> dict[str, oci.ImageSpec]:
    return {s.ref: s for s in image_specs(FAKE_BINARY)}


def test_same_sources_give_the_same_digests_and_bytes() -> None:
    first = [oci.pack(s) for s in image_specs(FAKE_BINARY)]
    again = [oci.pack(s) for s in image_specs(bytes(FAKE_BINARY))]
    assert [i.manifest_digest for i in first] == [i.manifest_digest for i in again]
    assert [i.archive() for i in first] == [i.archive() for i in again]
    changed = [oci.pack(s) for s in image_specs(FAKE_BINARY + b"x")]
    assert {i.manifest_digest for i in changed}.isdisjoint(i.manifest_digest for i in first)


def test_the_archive_is_a_valid_oci_layout() -> None:
    image = oci.pack(_specs()[MODEL_SERVER_IMAGE])
    members = _members(image.archive())
    layout = members["oci-layout"][1]
    assert layout is not None and json.loads(layout) == {"imageLayoutVersion": "1.0.0"}
    index_bytes = members["index.json"][1]
    assert index_bytes is not None
    index = json.loads(index_bytes)
    assert index["schemaVersion"] == 2 and index["mediaType"] == oci.MEDIA_INDEX
    (desc,) = index["manifests"]
    assert desc["mediaType"] == oci.MEDIA_MANIFEST
    assert desc["digest"] == image.manifest_digest
    assert desc["annotations"] == {oci.CONTAINERD_NAME: MODEL_SERVER_IMAGE, oci.REF_NAME: "v1"}
    assert desc["platform"] == {"architecture": oci.host_architecture(), "os": "linux"}

    manifest = json.loads(_blob(members, desc))
    assert manifest["schemaVersion"] == 2 and manifest["mediaType"] == oci.MEDIA_MANIFEST
    assert manifest["config"]["mediaType"] == oci.MEDIA_CONFIG
    config = json.loads(_blob(members, manifest["config"]))
    (layer_desc,) = manifest["layers"]
    assert layer_desc["mediaType"] == oci.MEDIA_LAYER
    with tarfile.open(fileobj=io.BytesIO(_blob(members, layer_desc))) as tar:
        (entry,) = tar.getmembers()
        f = tar.extractfile(entry)
        assert entry.name == "model-server" and entry.mode == 0o755
        assert f is not None and f.read() == FAKE_BINARY
    # an uncompressed layer: its diff_id is its own digest
    assert config["rootfs"] == {"type": "layers", "diff_ids": [layer_desc["digest"]]}
    assert config["os"] == "linux" and config["architecture"] == oci.host_architecture()
    run = config["config"]
    assert run["Entrypoint"] == ["/model-server"]
    assert run["User"] == "65532:65532", "the server runs as a non-root numeric user"
    assert "MODEL_REVISION=v1" in run["Env"], "the revision defaults to the image tag"
    # no blob that nothing names (the importer would keep it unreferenced)
    blob_names = {n for n, (info, _) in members.items() if n.startswith("blobs/sha256/")
                  and info.isfile()}
    named = {f"blobs/sha256/{d.removeprefix('sha256:')}" for d in
             (desc["digest"], manifest["config"]["digest"], layer_desc["digest"])}
    assert blob_names == named


def test_layer_entries_are_sorted_owned_by_root_and_timeless() -> None:
    files = [oci.LayerFile("usr/bin/b", b"b", 0o755), oci.LayerFile("a", b"a", 0o600)]
    layer = oci.layer_tar(files)
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        infos = tar.getmembers()
    assert [i.name for i in infos] == ["a", "usr", "usr/bin", "usr/bin/b"]
    assert all(i.mtime == 0 and i.uid == 0 and i.gid == 0 for i in infos)
    assert all(i.uname == "" and i.gname == "" for i in infos)
    assert {i.name: i.mode for i in infos} == {"a": 0o600, "usr": 0o755, "usr/bin": 0o755,
                                               "usr/bin/b": 0o755}


def test_pause_and_server_share_the_binary_layer() -> None:
    specs = _specs()
    pause, server = oci.pack(specs[PAUSE_IMAGE]), oci.pack(specs[MODEL_SERVER_IMAGE])
    pause_members = _members(pause.archive())
    index = json.loads(pause_members["index.json"][1] or b"")
    manifest = json.loads(_blob(pause_members, index["manifests"][0]))
    config = json.loads(_blob(pause_members, manifest["config"]))
    assert manifest["layers"][0]["digest"] in server.blobs, "one layer: containerd stores it once"
    assert pause.manifest_digest != server.manifest_digest
    assert config["config"]["Entrypoint"] == ["/model-server", "pause"]
    assert archive_name(pause).startswith("pause-v1-")


@pytest.mark.parametrize("ref", ["omenative.local/pause", "pause:", "host:5000/pause"])
def test_a_reference_without_a_tag_is_rejected(ref: str) -> None:
    with pytest.raises(ValueError, match="must end with ':<tag>'"):
        oci.pack(oci.ImageSpec(ref=ref, files=(), entrypoint=("/x",)))


def test_a_layer_path_that_climbs_out_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"without '\.\.'"):
        oci.layer_tar([oci.LayerFile("../etc/passwd", b"")])

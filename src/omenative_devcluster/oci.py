"""OCI images packed by our own code: a layer tar, a config, a manifest, an index.

The real nodes run images that were never in a registry: ``images.py`` packs the model
server's binary into images with this module, and each node's containerd loads the archive
with ``ctr -n k8s.io images import``. What containerd reads (``core/images/archive``): a tar
holding ``oci-layout``, ``index.json`` and ``blobs/sha256/<hex>``; each manifest in the index
is named by its ``io.containerd.image.name`` annotation (the full reference), else by
``org.opencontainers.image.ref.name`` (the OCI layout's own name annotation, which holds
the tag, as ``ctr export`` writes it). We set both.

Everything is reproducible: the same files give the same digests, byte for byte. Tar
entries are sorted, with mtime 0, uid/gid 0, no user or group names and fixed modes; JSON
is written with sorted keys and no spaces; the image has a fixed creation time (the epoch);
the layer is not compressed, so no compressor's version can change a digest.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import tarfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from attrs import field, frozen

MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"
#: the OCI layout's name annotation (the tag) and containerd's (the full reference)
REF_NAME = "org.opencontainers.image.ref.name"
CONTAINERD_NAME = "io.containerd.image.name"
#: every timestamp in our images: reproducible builds carry no clock
EPOCH = "1970-01-01T00:00:00Z"
DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def host_architecture() -> str:
    """This machine's architecture in OCI's (Go's) words: ``amd64``, ``arm64``..."""
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "i686": "386"}.get(
        machine, machine)


@frozen
class LayerFile:
    """One regular file of a layer: its path inside the image (no leading ``/``) and bytes."""

    path: str
    data: bytes = field(repr=lambda d: f"<{len(d)} bytes>")
    mode: int = 0o755


@frozen
class ImageSpec:
    """What an image holds and how it starts: its layers and the config's run settings."""

    #: full reference, e.g. ``omenative.local/model-server:v1``
    ref: str
    #: the last layer's files (none: no such layer)
    files: tuple[LayerFile, ...]
    entrypoint: tuple[str, ...]
    #: layer tars built elsewhere (``tree_layer``), below the files' layer, bottom first
    layers: tuple[bytes, ...] = field(default=(), repr=lambda ls: f"<{len(ls)} layers>")
    #: the config's ``Labels`` (OCI annotations such as ``org.opencontainers.image.version``)
    labels: tuple[tuple[str, str], ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    #: ``uid:gid`` (numeric, so no ``/etc/passwd`` is needed); empty runs as root
    user: str = ""
    exposed_ports: tuple[str, ...] = ()
    architecture: str = field(factory=host_architecture)
    os: str = "linux"


@frozen
class PackedImage:
    """A packed image: its blobs by digest, the manifest's descriptor and ``index.json``."""

    ref: str
    manifest_digest: str
    blobs: Mapping[str, bytes]
    index_json: bytes

    def archive(self) -> bytes:
        """The OCI layout as one tar, as ``ctr images import`` reads it."""
        entries: list[tuple[str, bytes | None]] = [("blobs/", None), ("blobs/sha256/", None)]
        entries += [(f"blobs/sha256/{d.removeprefix('sha256:')}", b)
                    for d, b in sorted(self.blobs.items())]
        entries += [("index.json", self.index_json), ("oci-layout", _layout_json())]
        return _tar(entries)

    def write(self, path: Path) -> Path:
        """Write ``archive()`` to ``path`` (atomically: a reader never sees half of it)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(self.archive())
        os.replace(tmp, path)
        return path


def digest_of(data: bytes) -> str:
    """The OCI digest of ``data``: ``sha256:<hex>``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical_json(obj: object) -> bytes:
    """JSON with sorted keys and no spaces: the same object always gives the same bytes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def split_ref(ref: str) -> tuple[str, str]:
    """``repo:tag`` -> (repo, tag); a reference with no tag is rejected (we always tag)."""
    repo, sep, tag = ref.rpartition(":")
    if not sep or not repo or "/" in tag or not tag:
        raise ValueError(f"image reference {ref!r} must end with ':<tag>'")
    return repo, tag


def layer_tar(files: Iterable[LayerFile]) -> bytes:
    """A deterministic layer: the files and their parent folders, sorted, owned by 0:0."""
    entries: dict[str, bytes | None] = {}
    for f in files:
        path = f.path.strip("/")
        if not path or ".." in path.split("/"):
            raise ValueError(f"layer file path {f.path!r} must be relative, without '..'")
        parts = path.split("/")
        for i in range(1, len(parts)):
            entries.setdefault("/".join(parts[:i]) + "/", None)
        entries[path] = f.data
    modes = {f.path.strip("/"): f.mode for f in files}
    return _tar(sorted(entries.items()), modes)


def tree_layer(root: Path, special: Mapping[str, tuple[int, int, int]] | None = None) -> bytes:
    """A deterministic layer of the tree under ``root`` (folders, files, symlinks).

    Entries are sorted by path, dated 0, owned by 0:0 and their modes normalized (folders
    0755, files 0755 when any execute bit is set, else 0644; no setuid), so the same tree
    gives the same bytes on any machine and umask. ``special`` sets (uid, gid, mode) of
    some paths (relative, no leading ``/``): ``tmp`` 1777, a user's home. A hard link is
    stored as a second copy.
    """
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix()):
            name = path.relative_to(root).as_posix()
            st = path.lstat()
            info = tarfile.TarInfo(name)
            info.mtime = 0
            info.uname = info.gname = ""
            if path.is_symlink():
                info.type, info.mode = tarfile.SYMTYPE, 0o777
                info.linkname = os.readlink(path)
            elif path.is_dir():
                info.type, info.mode = tarfile.DIRTYPE, 0o755
            else:
                info.mode = 0o755 if st.st_mode & 0o111 else 0o644
                info.size = st.st_size
            info.uid, info.gid, info.mode = (special or {}).get(name, (0, 0, info.mode))
            if info.type == tarfile.REGTYPE:
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
    return buf.getvalue()


def pack(spec: ImageSpec) -> PackedImage:
    """Pack ``spec`` into its blobs, manifest and index (nothing is written)."""
    _, tag = split_ref(spec.ref)
    layers = [*spec.layers, *([layer_tar(spec.files)] if spec.files else [])]
    if not layers:
        raise ValueError(f"image {spec.ref}: no layer (no files and no prebuilt layers)")
    run: dict[str, object] = {
        "Entrypoint": list(spec.entrypoint),
        "Env": [DEFAULT_PATH, *spec.env],
        "WorkingDir": "/",
    }
    if spec.cmd:
        run["Cmd"] = list(spec.cmd)
    if spec.user:
        run["User"] = spec.user
    if spec.exposed_ports:
        run["ExposedPorts"] = {p: {} for p in spec.exposed_ports}
    if spec.labels:
        run["Labels"] = dict(spec.labels)
    config = canonical_json({
        "created": EPOCH,
        "architecture": spec.architecture,
        "os": spec.os,
        "config": run,
        "rootfs": {"type": "layers", "diff_ids": [digest_of(layer) for layer in layers]},
        "history": [{"created": EPOCH, "created_by": "omenative_devcluster.oci"}
                    for _ in layers],
    })
    manifest = canonical_json({
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": _descriptor(MEDIA_CONFIG, config),
        "layers": [_descriptor(MEDIA_LAYER, layer) for layer in layers],
    })
    manifest_desc = _descriptor(MEDIA_MANIFEST, manifest)
    manifest_desc["annotations"] = {CONTAINERD_NAME: spec.ref, REF_NAME: tag}
    manifest_desc["platform"] = {"architecture": spec.architecture, "os": spec.os}
    index = canonical_json({"schemaVersion": 2, "mediaType": MEDIA_INDEX,
                            "manifests": [manifest_desc]})
    blobs = {digest_of(b): b for b in (*layers, config, manifest)}
    return PackedImage(ref=spec.ref, manifest_digest=str(manifest_desc["digest"]), blobs=blobs,
                       index_json=index)


def _descriptor(media_type: str, data: bytes) -> dict[str, object]:
    return {"mediaType": media_type, "digest": digest_of(data), "size": len(data)}


def _layout_json() -> bytes:
    return canonical_json({"imageLayoutVersion": "1.0.0"})


def _tar(entries: Iterable[tuple[str, bytes | None]], modes: Mapping[str, int] | None = None,
         ) -> bytes:
    """A ustar archive of (name, bytes) files and (``dir/``, None) folders, in the given order."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name.rstrip("/"))
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if data is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
            else:
                info.mode = (modes or {}).get(name, 0o644)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()

"""The images the real nodes run, built here with no registry.

Two images share one layer, the static model server binary (``modelserver/``, built by the
shared builder): ``PAUSE_IMAGE``, the pods' sandbox (``model-server pause``: holds the pod's
namespaces and reaps zombies, as ``registry.k8s.io/pause`` does, so nothing is pulled), and
``MODEL_SERVER_IMAGE``, the test model server. ``build_image_archives()`` packs them
(``oci.py``) into OCI archives that each node's containerd loads with
``ctr -n k8s.io images import``; pods use them with ``imagePullPolicy: IfNotPresent``.

The same sources give the same binary, hence the same image digests: an archive is named
by its manifest digest and written once.
"""

from __future__ import annotations

import threading
from pathlib import Path

from omenative_devcluster.build import cache_root, log
from omenative_devcluster.components import MODEL_SERVER, build_local
from omenative_devcluster.oci import ImageSpec, LayerFile, PackedImage, pack, split_ref

PAUSE_IMAGE = "omenative.local/pause:v1"
"""The sandbox image every real node's containerd is configured with."""
MODEL_SERVER_IMAGE = "omenative.local/model-server:v1"
"""The test model server's image (its ``MODEL_REVISION`` defaults to the tag)."""

#: the binary's path inside both images
BINARY = "model-server"
#: uid:gid of the server (distroless' "nonroot") and of the sandbox (as registry.k8s.io/pause)
SERVER_USER = "65532:65532"
PAUSE_USER = "65535:65535"
SERVER_PORT = 8080

_lock = threading.Lock()
_built: dict[str, Path] = {}


def image_specs(binary: bytes) -> tuple[ImageSpec, ...]:
    """The pause and model server images around ``binary`` (pure: no build, no I/O)."""
    files = (LayerFile(BINARY, binary, 0o755),)
    _, tag = split_ref(MODEL_SERVER_IMAGE)
    return (
        ImageSpec(ref=PAUSE_IMAGE, files=files, entrypoint=(f"/{BINARY}", "pause"),
                  user=PAUSE_USER),
        ImageSpec(ref=MODEL_SERVER_IMAGE, files=files, entrypoint=(f"/{BINARY}",),
                  env=(f"MODEL_REVISION={tag}", f"PORT={SERVER_PORT}"), user=SERVER_USER,
                  exposed_ports=(f"{SERVER_PORT}/tcp",)),
    )


def archive_name(image: PackedImage) -> str:
    """``<repo basename>-<tag>-<12 hex of the manifest digest>.tar``: one file per content."""
    repo, tag = split_ref(image.ref)
    short = image.manifest_digest.removeprefix("sha256:")[:12]
    return f"{repo.rsplit('/', 1)[-1]}-{tag}-{short}.tar"


def build_image_archives() -> dict[str, Path]:
    """Image reference -> OCI archive path, for ``PAUSE_IMAGE`` and ``MODEL_SERVER_IMAGE``.

    Builds the binary through the shared builder if its sources changed, packs both images
    and writes each archive into ``$OMENATIVE_CACHE/images/`` unless it is there already;
    cached for the process. Raises ``RuntimeError`` when Go is missing or the build fails.
    """
    with _lock:
        if not _built:
            binary = build_local(MODEL_SERVER).read_bytes()
            out = cache_root() / "images"
            for image in (pack(spec) for spec in image_specs(binary)):
                path = out / archive_name(image)
                if not path.is_file():
                    image.write(path)
                    log(f"image {image.ref} {image.manifest_digest}: {path} "
                        f"({path.stat().st_size} bytes)")
                _built[image.ref] = path
        return dict(_built)

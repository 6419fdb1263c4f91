"""The manager image (``make image``): reproducible, and it runs as 65532 with no shell.

Builds with the cache off and compares with the cached build (built first when missing):
the same checkout, lock and constraints must give the same digest. Then unpacks the layers
and runs the manager's command in a chroot as 65532:65532, the way the pod runs it.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import os
import re
import subprocess
import tarfile
from pathlib import Path

from omenative_devcluster import manager_image


def _unpack(archive: Path, dest: Path) -> dict[str, object]:
    with tarfile.open(archive) as tar:
        tar.extractall(dest / "oci", filter="tar")
    blobs = dest / "oci/blobs/sha256"
    index = json.loads((dest / "oci/index.json").read_text())
    manifest = json.loads((blobs / index["manifests"][0]["digest"][7:]).read_text())
    for layer in manifest["layers"]:
        with tarfile.open(blobs / layer["digest"][7:]) as tar:
            tar.extractall(dest / "root", filter="tar")
    config: dict[str, object] = json.loads((blobs / manifest["config"]["digest"][7:]).read_text())
    return config


def _record_mismatches(site: Path) -> list[str]:
    """Every file a wheel's RECORD lists with a hash must be in the image with that hash."""
    bad = []
    for record in sorted(site.glob("*.dist-info/RECORD")):
        for row in csv.reader(record.read_text().splitlines()):
            if len(row) < 2 or not row[1]:
                continue
            path = Path(os.path.normpath(site / row[0]))
            algo, _, want = row[1].partition("=")
            if not path.is_file():
                bad.append(f"{record.parent.name}: {row[0]} is listed but absent")
                continue
            got = base64.urlsafe_b64encode(hashlib.new(algo, path.read_bytes()).digest())
            if got.rstrip(b"=").decode() != want:
                bad.append(f"{record.parent.name}: {row[0]} differs from its RECORD hash")
    return bad


def test_two_builds_give_the_same_digest_and_the_image_runs_as_nonroot(tmp_path: Path) -> None:
    first = manager_image.build_image()
    again = manager_image.build_image(use_cache=False)
    print(f"image {again.ref}: {again.size / 2**20:.1f} MiB, cold build {again.seconds:.1f} s")
    assert again.digest == first.digest, "same inputs, different image: not reproducible"

    config = _unpack(again.archive, tmp_path)
    run = config["config"]
    assert isinstance(run, dict)
    assert run["User"] == "65532:65532"
    assert run["Entrypoint"] == ["/usr/local/bin/omenative-manager"]
    root = tmp_path / "root"
    assert not (root / "bin/sh").exists() and not (root / "usr/bin/sh").exists(), "a shell"
    assert _record_mismatches(root / "usr/local/lib/python3.11/dist-packages") == []
    assert "nonroot:x:65532:65532" in (root / "etc/passwd").read_text()
    versions = (root / "etc/omenative-image.txt").read_text()
    assert "\npython3.11-minimal=3.11." in versions
    assert re.search(r"\nkubernetes[-_]asyncio==[0-9]", versions), versions
    out = subprocess.run(["chroot", "--userspec=65532:65532", str(root),
                          "/usr/local/bin/omenative-manager", "--help"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "--lease-duration" in out.stdout

"""The manager image's pure parts: the tree layer, the lock, the pinned dependencies.

The build itself (apt-get, pip, twice, same digest; the image runs as 65532 without a
shell) is tests/integration/test_manager_image.py.
"""

from __future__ import annotations

import importlib.metadata as md
import io
import os
import re
import tarfile
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement

from omenative_devcluster import manager_image, oci


def _tree(root: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        (root / "usr/bin").mkdir(parents=True)
        (root / "usr/bin/tool").write_text("#!/bin/true\n")
        (root / "usr/bin/tool").chmod(0o4775 & ~umask)  # setuid must not survive
        (root / "usr/lib").mkdir()
        (root / "usr/lib/data.txt").write_text("x")
        (root / "usr/lib/link").symlink_to("data.txt")
        (root / "tmp").mkdir()
    finally:
        os.umask(old)


def _entries(layer: bytes) -> list[tuple[str, int, int, int, int, str]]:
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        return [(m.name, m.mode, m.uid, m.gid, m.mtime, m.linkname) for m in tar.getmembers()]


def test_a_tree_layer_is_the_same_bytes_whatever_the_umask_and_mtimes(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _tree(a, 0o022)
    _tree(b, 0o077)
    os.utime(b / "usr/lib/data.txt", (12345, 12345))
    special = {"tmp": (0, 0, 0o1777)}
    assert oci.tree_layer(a, special) == oci.tree_layer(b, special)


def test_a_tree_layer_is_sorted_timeless_owned_by_root_with_normal_modes(
        tmp_path: Path) -> None:
    _tree(tmp_path, 0o022)
    entries = _entries(oci.tree_layer(tmp_path, {"tmp": (0, 0, 0o1777)}))
    names = [e[0] for e in entries]
    assert names == sorted(names)
    by_name = {e[0]: e for e in entries}
    assert by_name["usr/bin/tool"][1] == 0o755, "setuid dropped, exec kept"
    assert by_name["usr/lib/data.txt"][1] == 0o644
    assert by_name["usr/lib/link"][5] == "data.txt"
    assert by_name["tmp"][1] == 0o1777
    assert {(e[2], e[3], e[4]) for e in entries} == {(0, 0, 0)}


def test_prebuilt_layers_stack_below_the_files_layer_in_the_manifest(tmp_path: Path) -> None:
    _tree(tmp_path, 0o022)
    base = oci.tree_layer(tmp_path)
    image = oci.pack(oci.ImageSpec(ref="x.local/m:v1", layers=(base,),
                                   files=(oci.LayerFile("app", b"a"),), entrypoint=("/app",),
                                   labels=(("org.opencontainers.image.version", "v1"),)))
    assert oci.digest_of(base) in image.blobs
    assert len(image.blobs) == 4, "two layers, a config and a manifest"


def test_an_image_with_no_layer_is_rejected() -> None:
    with pytest.raises(ValueError, match="no layer"):
        oci.pack(oci.ImageSpec(ref="x.local/m:v1", files=(), entrypoint=("/app",)))


def test_the_lock_pins_every_debian_package_to_one_version() -> None:
    pairs = manager_image.read_lock()
    names = [n for n, _ in pairs]
    assert "python3.11-minimal" in names and "libc6" in names
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[0-9:][\w.+~:-]*", v) for _, v in pairs)


def test_a_lock_line_without_a_version_is_refused(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    lock.write_text("# comment\nlibc6\n")
    with pytest.raises(ValueError, match=r"lock:2: 'libc6' is not NAME=VERSION"):
        manager_image.read_lock(lock)


def _pins() -> dict[str, str]:
    pins = {}
    for line in manager_image.CONSTRAINTS.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def _runtime_closure() -> set[str]:
    """omenative's runtime requirements and theirs, as installed here (no extras)."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in md.distribution("omenative").requires or ()
            if "extra" not in r]
    while todo:
        req = todo.pop()
        if req.marker is not None and not Marker(str(req.marker)).evaluate({"extra": ""}):
            continue
        key = re.sub(r"[-_.]+", "-", req.name).lower()
        if key not in seen:
            seen.add(key)
            todo += [Requirement(r) for r in md.distribution(req.name).requires or ()]
    return seen


def test_the_constraints_pin_every_runtime_dependency_and_nothing_else() -> None:
    pins = _pins()
    closure = _runtime_closure()
    assert closure - set(pins) == set(), "a runtime dependency is not pinned"
    assert set(pins) - closure == set(), "a pin no runtime dependency needs"
    assert all(re.fullmatch(r"[\w.]+", v) for v in pins.values())

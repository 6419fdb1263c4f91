"""The manager's OCI image, built here without Docker and without a registry (``make image``).

Three layers, bottom first, each a deterministic tar (``oci.tree_layer``):

1. **base**: a Python 3.11 runtime from the Debian packages of ``image/debian-packages.lock``
   (``apt-get download NAME=VERSION``, ``dpkg-deb -x``; docs and man pages dropped), plus
   ``/etc/passwd`` and ``/etc/group`` naming the user ``nonroot`` (65532), ``/tmp`` (1777)
   and ``/etc/omenative-image.txt``, the versions of everything in the image. No shell.
2. **deps**: omenative's runtime dependencies, ``pip install --target`` of wheels only,
   pinned by ``image/constraints.txt``, into ``/usr/local/lib/python3.11/dist-packages``.
3. **app**: omenative's wheel (built from this checkout) and its three commands in
   ``/usr/local/bin`` (``#!/usr/bin/python3.11`` scripts: the kernel runs them, no shell).

Every ``.py`` is byte-compiled with ``--invalidation-mode unchecked-hash``: the pyc files
hold no source mtime (reproducible) and are never rewritten (the root filesystem is
read-only in the pod). The image runs as ``65532:65532``.

Reproducible: the same checkout, lock and constraints give the same digest, byte for byte;
the archive is cached in ``$OMENATIVE_CACHE/images/`` under a key of those inputs, so a
second ``make image`` takes a fraction of a second.

Run as ``python -m omenative_devcluster.manager_image [--tag T] [--repository R]``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator, Sequence
from pathlib import Path

import click
from attrs import frozen

from omenative_devcluster import oci
from omenative_devcluster.build import cache_root, log

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCK_FILE = REPO_ROOT / "image" / "debian-packages.lock"
CONSTRAINTS = REPO_ROOT / "image" / "constraints.txt"
#: pins the wheel's build backend (its name and version land in the wheel's metadata)
BUILD_CONSTRAINTS = REPO_ROOT / "image" / "build-constraints.txt"
REPOSITORY = "ghcr.io/omenative/omenative-manager"
"""The chart's default ``omenative.image.repository``: the image loads under this name."""
PYTHON = "/usr/bin/python3.11"
SITE = "usr/local/lib/python3.11/dist-packages"
USER = "65532:65532"
#: omenative's top-level packages (the wheel's), moved from the deps layer to the app layer
APP_PACKAGES = ("omenative_core", "omenative_sim", "omenative_controller")
COMMANDS = {
    "omenative-manager": "omenative_controller.cli.manager",
    "kubectl-ome": "omenative_controller.cli.kubectl_ome",
    "omenative": "omenative_sim.cli",
}
#: what the base needs nothing of: docs, and the stdlib parts for humans at a terminal
PRUNE = ("usr/share/doc", "usr/share/man", "usr/share/lintian", "usr/share/info",
         "usr/lib/python3.11/lib2to3", "usr/lib/python3.11/pydoc_data",
         "usr/lib/python3.11/ensurepip", "usr/lib/python3.11/idlelib")
#: inputs of the build besides the lock and constraints: a change to any rebuilds
SOURCES = ("pyproject.toml", "README.md", "src/omenative_core", "src/omenative_sim",
           "src/omenative_controller", "src/omenative_devcluster/manager_image.py",
           "src/omenative_devcluster/oci.py", "image")


class ImageBuildError(RuntimeError):
    """A step of the build failed; the message names it and what it printed."""


@frozen
class BuiltImage:
    """A built image: its reference, manifest digest, archive and how long it took."""

    ref: str
    digest: str
    archive: Path
    seconds: float
    cached: bool

    @property
    def size(self) -> int:
        """Bytes of the OCI archive (uncompressed layers: the size on a node's disk)."""
        return self.archive.stat().st_size


def project_version() -> str:
    """omenative's version from ``pyproject.toml``: the image's default tag."""
    with (REPO_ROOT / "pyproject.toml").open("rb") as fh:
        return str(tomllib.load(fh)["project"]["version"])


def read_lock(path: Path = LOCK_FILE) -> tuple[tuple[str, str], ...]:
    """The lock's ``(package, version)`` pairs; a line that is not ``NAME=VERSION`` raises."""
    pairs = []
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("=")
        if not sep or not name or not version:
            raise ValueError(f"{path}:{n}: {line!r} is not NAME=VERSION")
        pairs.append((name, version))
    return tuple(pairs)


def input_key(ref: str) -> str:
    """A hash of everything the image is made from (and its reference): the cache key."""
    h = hashlib.sha256(ref.encode())
    for top in SOURCES:
        base = REPO_ROOT / top
        files = [base] if base.is_file() else sorted(
            p for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        for p in files:
            h.update(p.relative_to(REPO_ROOT).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def _run(args: Sequence[str], cwd: Path | None = None, env: dict[str, str] | None = None,
         ) -> str:
    out = subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, check=False,
                         env={**os.environ, **(env or {})})
    if out.returncode:
        raise ImageBuildError(f"{' '.join(args[:4])} ... failed ({out.returncode}): "
                              f"{(out.stderr or out.stdout).strip()[-2000:]}")
    return out.stdout


def fetch_debs(packages: Sequence[tuple[str, str]], debdir: Path) -> list[Path]:
    """The ``.deb`` of each pinned package, downloaded into ``debdir`` once (``apt-get``)."""
    debdir.mkdir(parents=True, exist_ok=True)

    def found(name: str, version: str) -> Path | None:
        return next(iter(sorted(debdir.glob(f"{name}_{version.replace(':', '%3a')}_*.deb"))),
                    None)

    missing = [f"{n}={v}" for n, v in packages if found(n, v) is None]
    if missing:
        log(f"apt-get download {' '.join(missing)}")
        try:
            _run(["apt-get", "download", "-q", *missing], cwd=debdir)
        except ImageBuildError as exc:
            raise ImageBuildError(
                f"{exc}\n(not in the apt lists? `apt-get update`; gone from the archive? "
                f"refresh {LOCK_FILE.name}: --refresh-lock)") from exc
    debs = [found(n, v) for n, v in packages]
    lost = [f"{n}={v}" for (n, v), d in zip(packages, debs, strict=True) if d is None]
    if lost:
        raise ImageBuildError(f"apt-get download gave no .deb for {lost}")
    return [d for d in debs if d is not None]


def _base_tree(root: Path, debs: Sequence[Path], manifest: str) -> None:
    for deb in debs:
        _run(["dpkg-deb", "-x", str(deb), str(root)])
    for rel in PRUNE:
        shutil.rmtree(root / rel, ignore_errors=True)
    etc = root / "etc"
    etc.mkdir(exist_ok=True)
    (etc / "passwd").write_text("root:x:0:0:root:/root:/sbin/nologin\n"
                                "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")
    (etc / "group").write_text("root:x:0:\nnonroot:x:65532:\n")
    (etc / "omenative-image.txt").write_text(manifest)
    for d in ("tmp", "home/nonroot"):
        (root / d).mkdir(parents=True, exist_ok=True)


def _pip_trees(work: Path, deps: Path, app: Path) -> list[str]:
    """Build omenative's wheel, install it and its pinned dependencies; split app from deps.
    Returns ``name==version`` of everything installed."""
    wheels = work / "wheel"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    _run([*pip, "wheel", "--no-deps", "-w", str(wheels), str(REPO_ROOT)],
         env={"PIP_CONSTRAINT": str(BUILD_CONSTRAINTS), "SOURCE_DATE_EPOCH": "0"})
    wheel = next(wheels.glob("omenative-*.whl"))
    site = deps / SITE
    _run([*pip, "install", "--no-compile", "--only-binary=:all:", "--root-user-action=ignore",
          "--no-warn-script-location", "--constraint", str(CONSTRAINTS), "--target", str(site),
          str(wheel)])
    # pip's console scripts carry the build's own interpreter path in their shebang (the
    # checkout's venv), so they and their RECORD lines differ per checkout: drop both (our
    # commands are written below); direct_url.json names our temp dir: drop it too.
    shutil.rmtree(site / "bin", ignore_errors=True)
    for direct in site.glob("*.dist-info/direct_url.json"):
        direct.unlink()
    for record in site.glob("*.dist-info/RECORD"):
        drop = ("../../bin/", f"{record.parent.name}/direct_url.json,")
        record.write_text("".join(line for line in record.read_text().splitlines(True)
                                  if not line.startswith(drop)))
    (app / SITE).mkdir(parents=True)
    for name in (*APP_PACKAGES, "-".join(wheel.name.split("-")[:2]) + ".dist-info"):
        shutil.move(site / name, app / SITE / name)
    bindir = app / "usr/local/bin"
    bindir.mkdir(parents=True)
    for cmd, module in COMMANDS.items():
        script = bindir / cmd
        script.write_text(f"#!{PYTHON}\nimport sys\nfrom {module} import main\n\n"
                          f"if __name__ == '__main__':\n    sys.exit(main())\n")
        script.chmod(0o755)
    return sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions(
        path=[str(deps / SITE), str(app / SITE)]))


def _compile(tree: Path) -> None:
    """Byte-compile every module of ``tree`` as it will be seen from ``/`` in the image."""
    _run([sys.executable, "-m", "compileall", "-q", "-j", "2", "--invalidation-mode",
          "unchecked-hash", "-s", str(tree), "-p", "/", str(tree)])


def _pack(ref: str, base: Path, deps: Path, app: Path) -> oci.PackedImage:
    layers = (
        oci.tree_layer(base, {"tmp": (0, 0, 0o1777), "home/nonroot": (65532, 65532, 0o755)}),
        oci.tree_layer(deps),
        oci.tree_layer(app),
    )
    _, tag = oci.split_ref(ref)
    return oci.pack(oci.ImageSpec(
        ref=ref, files=(), layers=layers, entrypoint=("/usr/local/bin/omenative-manager",),
        env=("PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1", "HOME=/home/nonroot"),
        user=USER, exposed_ports=("8080/tcp", "8081/tcp", "9443/tcp"),
        labels=(("org.opencontainers.image.title", "omenative-manager"),
                ("org.opencontainers.image.version", tag),
                ("org.opencontainers.image.licenses", "Apache-2.0"))))


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    path = cache_root() / "images" / "manager-build.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_image(ref: str | None = None, *, use_cache: bool = True) -> BuiltImage:
    """Build the manager image as ``ref`` (default ``REPOSITORY:<project version>``) into an
    OCI archive under ``$OMENATIVE_CACHE/images/``, or find it there.

    Raises ``ImageBuildError`` naming the step that failed (apt-get, pip, dpkg-deb).
    """
    ref = ref or f"{REPOSITORY}:{project_version()}"
    oci.split_ref(ref)
    t0 = time.monotonic()
    out_dir = cache_root() / "images"
    with _lock():
        key = input_key(ref)
        known = out_dir / f"manager-{key}.json"
        if use_cache and known.is_file():
            meta = json.loads(known.read_text())
            archive = Path(meta["archive"])
            if archive.is_file():
                return BuiltImage(ref, meta["digest"], archive, time.monotonic() - t0, True)
        packages = read_lock()
        debs = fetch_debs(packages, out_dir / "debs")
        with tempfile.TemporaryDirectory(dir=out_dir, prefix="manager-build-") as tmp:
            work = Path(tmp)
            base, deps, app = (work / n for n in ("base", "deps", "app"))
            for d in (base, deps, app):
                d.mkdir()
            t1 = time.monotonic()
            installed = _pip_trees(work, deps, app)
            t2 = time.monotonic()
            manifest = "".join(
                ["# Debian packages (dpkg-deb -x)\n", *(f"{n}={v}\n" for n, v in packages),
                 "# Python packages (pip install --target)\n", *(f"{p}\n" for p in installed)])
            _base_tree(base, debs, manifest)
            for tree in (base, deps, app):
                _compile(tree)
            t3 = time.monotonic()
            image = _pack(ref, base, deps, app)
            log(f"image steps: debs {t1 - t0:.1f} s, pip {t2 - t1:.1f} s, "
                f"extract+compile {t3 - t2:.1f} s, pack {time.monotonic() - t3:.1f} s")
        short = image.manifest_digest.removeprefix("sha256:")[:12]
        _, tag = oci.split_ref(ref)
        archive = image.write(out_dir / f"omenative-manager-{tag}-{short}.tar")
        known.write_text(json.dumps({"archive": str(archive), "digest": image.manifest_digest,
                                     "ref": ref}))
        return BuiltImage(ref, image.manifest_digest, archive, time.monotonic() - t0, False)


def refresh_lock(path: Path = LOCK_FILE) -> None:
    """Rewrite the lock's versions with ``apt-cache policy``'s candidates (same packages)."""
    lines = []
    for raw in path.read_text().splitlines():
        name, sep, _ = raw.partition("=")
        line = raw
        if sep and not raw.lstrip().startswith("#"):
            policy = _run(["apt-cache", "policy", name])
            cand = next((ln.split()[1] for ln in policy.splitlines()
                         if ln.strip().startswith("Candidate:")), "(none)")
            line = f"{name}={cand}"
        lines.append(line)
    path.write_text("\n".join(lines) + "\n")


@click.command()
@click.option("--repository", default=REPOSITORY, show_default=True,
              help="The image's repository (the reference it is loaded and pushed under).")
@click.option("--tag", default="", help="The image's tag [default: the project version].")
@click.option("--no-cache", is_flag=True, help="Build even when the cache has this image.")
@click.option("--refresh-lock", "refresh_lock_", is_flag=True,
              help="Update image/debian-packages.lock from apt-cache policy first.")
def main(repository: str, tag: str, no_cache: bool, refresh_lock_: bool) -> None:
    """Build the manager image; print its reference, digest, size and archive."""
    if refresh_lock_:
        refresh_lock()
    try:
        built = build_image(f"{repository}:{tag or project_version()}", use_cache=not no_cache)
    except (ImageBuildError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    how = "cached" if built.cached else f"built in {built.seconds:.1f} s"
    log(f"IMAGE {built.ref} {built.digest} {built.size / 2**20:.1f} MiB ({how})")
    print(built.archive)


if __name__ == "__main__":
    main()

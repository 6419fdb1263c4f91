"""Build and cache the local control plane binaries from the Go module proxy.

kube-apiserver, kube-controller-manager, kube-scheduler and kubectl come from the Go module
``k8s.io/kubernetes`` (built through a wrapper module that replaces every staging module with
its published ``v0.N.M``), etcd from ``go.etcd.io/etcd/server/v3``. Everything lands in
``$OMENATIVE_CACHE/k8s/<version>/bin/`` (default ``~/.cache/omenative``); when all binaries
are there, the build is skipped.

Run as ``python -m omenative_devcluster.build`` (or ``... devcluster build``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

#: The Kubernetes release built and run by default (its go.mod says ``go 1.26.0``: builds
#: with Go 1.26.x).
DEFAULT_K8S_VERSION = "v1.37.2"
#: The other release we test (``make test-k8s-other``): the previous one, 1.36.
OTHER_K8S_VERSION = "v1.36.3"
#: The release this process builds and runs: ``$OMENATIVE_K8S_VERSION`` (how the test
#: fixtures and ``make`` pick one), else the default.
K8S_VERSION = os.environ.get("OMENATIVE_K8S_VERSION") or DEFAULT_K8S_VERSION
#: The etcd release of 1.36 (3.5+ is required by current kube-apiservers).
ETCD_VERSION = "v3.6.16"
#: The etcd each Kubernetes release pins (its ``build/dependencies.yaml``).
ETCD_VERSIONS = {"v1.36.3": ETCD_VERSION, "v1.37.2": "v3.7.0"}

#: The control plane, and the kubelet and kube-proxy that real nodes run (one ``go build``:
#: they share most packages, so building them together costs a few minutes, not a second build).
K8S_COMMANDS = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kubelet",
    "kube-proxy",
)
BINARIES = (*K8S_COMMANDS, "etcd")

_T0 = time.monotonic()


def log(msg: str) -> None:
    """Print a timestamped progress line to stderr (stdout is kept for results)."""
    stamp = time.strftime("%H:%M:%S")
    print(f"[{stamp} +{time.monotonic() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def cache_root() -> Path:
    """Root of our cache: ``$OMENATIVE_CACHE`` or ``~/.cache/omenative``."""
    env = os.environ.get("OMENATIVE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "omenative"


@contextlib.contextmanager
def build_lock() -> Iterator[None]:
    """Hold the cache's build lock: one Go build at a time on this machine (the control
    plane here, the other components in ``components``; both take it)."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with (root / "build.lock").open("w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log("another build holds the cache's build lock: waiting for it")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def version_dir(version: str = K8S_VERSION) -> Path:
    """Directory of one Kubernetes version in the cache."""
    return cache_root() / "k8s" / version


def bin_dir(version: str = K8S_VERSION) -> Path:
    """Where the five binaries of ``version`` live."""
    return version_dir(version) / "bin"


def missing_binaries(version: str = K8S_VERSION) -> list[str]:
    """Names of the binaries not yet in the cache (empty when the cache is complete)."""
    d = bin_dir(version)
    return [b for b in BINARIES if not os.access(d / b, os.X_OK)]


def _go_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("GOFLAGS", "-buildvcs=false")
    if "-buildvcs" not in env["GOFLAGS"]:
        env["GOFLAGS"] += " -buildvcs=false"
    env["CGO_ENABLED"] = "0"
    env.setdefault("GOPROXY", "https://proxy.golang.org,direct")
    env.update(extra or {})
    return env


def _run(
    args: Sequence[str],
    cwd: Path,
    *,
    capture: bool = False,
    progress: bool = False,
    env: Mapping[str, str] | None = None,
) -> str:
    """Run a command, streaming (or capturing) its output; raise on failure.

    ``env`` adds to (or overrides) the Go environment, e.g. ``CGO_ENABLED=1`` for runc.
    """
    log("$ " + " ".join(args))
    proc = subprocess.Popen(
        list(args),
        cwd=cwd,
        env=_go_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if not capture else subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    out: list[str] = []
    err: list[str] = []
    if capture:
        assert proc.stderr is not None
        stderr = proc.stderr

        def _drain() -> None:
            for line in stderr:
                err.append(line)

        t = threading.Thread(target=_drain, daemon=True)
        t.start()
        out.append(proc.stdout.read())
        t.join()
    else:
        count = 0
        last_print = time.monotonic()
        last = ""
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            # `go build -v` prints one package path per line: count them as progress
            if progress and line and " " not in line and not line.startswith("#"):
                count += 1
                last = line
                if time.monotonic() - last_print > 20 or count % 250 == 0:
                    log(f"  compiled {count} packages (last: {last})")
                    last_print = time.monotonic()
                continue
            log("  " + line)
        if progress:
            log(f"  compiled {count} packages in all")
    rc = proc.wait()
    if rc != 0:
        if err:
            sys.stderr.write("".join(err))
        raise RuntimeError(f"command failed with exit code {rc}: {' '.join(args)}")
    return "".join(out)


def _init_module(wdir: Path, name: str) -> None:
    if wdir.exists():
        shutil.rmtree(wdir)
    wdir.mkdir(parents=True)
    _run(["go", "mod", "init", name], wdir)


def prepare_k8s_module(version: str, wdir: Path) -> None:
    """Create the wrapper module: require k8s.io/kubernetes, replace staging modules."""
    staging = "v0." + version.removeprefix("v1.")
    _init_module(wdir, "local/k8s-bins")
    info = json.loads(
        _run(["go", "mod", "download", "-json", f"k8s.io/kubernetes@{version}"], wdir, capture=True)
    )
    gomod = Path(info["GoMod"]).read_text()
    mods: list[str] = []
    for raw in gomod.splitlines():
        parts = raw.strip().split()
        # "require" block lines are `k8s.io/x v0.0.0`; a one-line require has a prefix
        if parts and parts[0] == "require":
            parts = parts[1:]
        if (
            len(parts) >= 2
            and parts[0].startswith("k8s.io/")
            and parts[1] == "v0.0.0"
            and parts[0] not in mods
        ):
            mods.append(parts[0])
    log(f"{len(mods)} staging modules to replace with {staging}")
    args = ["go", "mod", "edit", *[f"-replace={m}={m}@{staging}" for m in mods]]
    _run(args, wdir)
    pkgs = [f"k8s.io/kubernetes/cmd/{c}@{version}" for c in K8S_COMMANDS]
    _run(["go", "get", *pkgs], wdir)


def prepare_etcd_module(version: str, wdir: Path) -> None:
    """Create the wrapper module for etcd's server command."""
    _init_module(wdir, "local/etcd-bin")
    _run(["go", "get", f"go.etcd.io/etcd/server/v3@{version}"], wdir)


def etcd_version_for(version: str) -> str:
    """The etcd release ``version`` of Kubernetes pins (the newest we know for others)."""
    return ETCD_VERSIONS.get(version, ETCD_VERSIONS[max(ETCD_VERSIONS)])


def build(version: str = K8S_VERSION, etcd_version: str | None = None) -> Path:
    """Build what is missing into the cache and return the bin directory."""
    etcd_version = etcd_version or etcd_version_for(version)
    bdir = bin_dir(version)
    missing = missing_binaries(version)
    if not missing:
        log(f"all binaries present in {bdir}: nothing to build")
        return bdir
    with build_lock():
        return _build_locked(version, etcd_version)


def _build_locked(version: str, etcd_version: str) -> Path:
    bdir = bin_dir(version)
    missing = missing_binaries(version)
    if not missing:
        return bdir
    started = time.monotonic()
    log(f"building {', '.join(missing)} into {bdir}")
    if shutil.which("go") is None:
        raise RuntimeError("no `go` command on PATH: Go 1.26+ is needed to build the binaries")
    log(subprocess.run(["go", "version"], check=True, env=_go_env(), capture_output=True,
                       text=True).stdout.strip())
    vdir = version_dir(version)
    partial = vdir / "bin.partial"
    partial.mkdir(parents=True, exist_ok=True)
    bdir.mkdir(parents=True, exist_ok=True)

    if "etcd" in missing:
        wdir = vdir / "src" / "etcd"
        prepare_etcd_module(etcd_version, wdir)
        log(f"building etcd {etcd_version}")
        _run(
            [
                "go", "build", "-mod=mod", "-p", "2", "-trimpath", "-ldflags", "-s -w",
                "-o", str(partial / "etcd"), "go.etcd.io/etcd/server/v3",
            ],
            wdir,
        )
        os.replace(partial / "etcd", bdir / "etcd")
        log("etcd done")

    k8s_missing = [c for c in K8S_COMMANDS if c in missing]
    if k8s_missing:
        wdir = vdir / "src" / "kubernetes"
        prepare_k8s_module(version, wdir)
        minor = version.removeprefix("v1.").split(".")[0]
        ldflags = " ".join(
            [
                "-s -w",
                f"-X k8s.io/component-base/version.gitVersion={version}",
                "-X k8s.io/component-base/version.gitMajor=1",
                f"-X k8s.io/component-base/version.gitMinor={minor}",
                "-X k8s.io/component-base/version.gitTreeState=clean",
                f"-X k8s.io/client-go/pkg/version.gitVersion={version}",
                "-X k8s.io/client-go/pkg/version.gitMajor=1",
                f"-X k8s.io/client-go/pkg/version.gitMinor={minor}",
            ]
        )
        log(f"building {', '.join(K8S_COMMANDS)} {version} in one go build (-p 2)")
        _run(
            [
                "go", "build", "-mod=mod", "-v", "-p", "2", "-trimpath", "-ldflags", ldflags,
                "-o", str(partial) + "/",
                *[f"k8s.io/kubernetes/cmd/{c}" for c in K8S_COMMANDS],
            ],
            wdir,
            progress=True,
        )
        for c in K8S_COMMANDS:
            os.replace(partial / c, bdir / c)
    shutil.rmtree(partial, ignore_errors=True)
    still = missing_binaries(version)
    if still:
        raise RuntimeError(f"build finished but {still} are missing in {bdir}")
    log(f"BUILD TIME control plane {version}: {time.monotonic() - started:.1f} s")
    log(f"done: {bdir}")
    return bdir


def main(argv: Sequence[str] | None = None, version: str = K8S_VERSION) -> int:
    """Command-line entry: build (or find) the binaries of ``version``; print the bin folder."""
    del argv
    try:
        bdir = build(version)
    except RuntimeError as exc:
        log(f"BUILD FAILED: {exc}")
        return 1
    print(bdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())

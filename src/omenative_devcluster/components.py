"""The shared builder of the real Go components the tests run beside omenative.

Users run omenative next to a gang scheduler, Kueue, sometimes LeaderWorkerSet, and install
it with Helm; the tests run the real ones. Each is a Go module served by the Go module
proxy: ``go mod download`` fetches its source at an exact version, the source is copied out
of the read-only module cache into ours (its own ``go.mod``, with its ``replace``
directives, then applies), and ``go build`` writes the binaries to
``$OMENATIVE_CACHE/components/<name>/<version>/bin/``. A component whose binaries are all
there is not built again.

One builder for every Go component, the control plane included: builds take a file lock in
the cache, so two processes (a test session and ``make``) never compile at once on a
2-core machine, and each build prints how long it took.

``python -m omenative_devcluster build --with kueue,helm`` builds the control plane and the
named components; ``--with all`` builds every one.

Our own Go programs (``LocalGoModule``: the model server) build the same way from a folder of
this source tree, cached by a hash of their sources, statically and reproducibly (the same
sources and Go give the same bytes, so the images packed from them keep their digests).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import time
from collections.abc import Mapping
from pathlib import Path

from attrs import frozen

from omenative_devcluster.build import _run, build_lock, cache_root, log


@frozen
class GoComponent:
    """A Go module at an exact version and the commands of it we build."""

    name: str
    module: str
    version: str
    #: binary name -> package path inside the module (``.`` for the module root)
    commands: Mapping[str, str]
    why: str
    #: Go build tags (``-tags``), comma-separated
    tags: str = ""
    #: build with cgo (runc links libseccomp); the default is a static, cgo-free build
    cgo: bool = False
    #: a ``main.go`` of our own, built in a wrapper module that requires ``module``: picks
    #: the parts of a big program we run (CoreDNS with only the plugins cluster DNS needs)
    wrapper_main: str = ""
    #: the Go toolchain the module's ``go`` line needs when the machine's is older
    #: (``GOTOOLCHAIN``; the Go module proxy serves toolchains as modules); empty: local
    toolchain: str = ""


#: CoreDNS with only the plugins cluster DNS needs, in CoreDNS's own directive order; no
#: ``forward``, so it answers cluster names only and never asks a server off this machine.
COREDNS_MAIN = """package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func init() {
	dnsserver.Directives = []string{
		"bind", "ready", "health", "errors", "log", "loadbalance", "cache", "kubernetes",
	}
}

func main() { coremain.Run() }
"""

COMPONENTS: Mapping[str, GoComponent] = {
    c.name: c
    for c in (
        GoComponent(
            name="scheduler-plugins",
            module="sigs.k8s.io/scheduler-plugins",
            version="v0.32.7",
            commands={"kube-scheduler-plugins": "cmd/scheduler",
                      "scheduler-plugins-controller": "cmd/controller"},
            why="coscheduling: gangs bound all or nothing through PodGroups",
        ),
        GoComponent(
            name="kueue",
            module="sigs.k8s.io/kueue",
            version="v0.17.0",
            commands={"kueue": "cmd/kueue"},
            why="quotas: whole Instances admitted within a ClusterQueue, the rest gated",
        ),
        GoComponent(
            name="lws",
            module="sigs.k8s.io/lws",
            version="v0.7.0",
            commands={"lws-manager": "cmd"},
            why="LeaderWorkerSet: the MultiNode mode and the move off it",
        ),
        GoComponent(
            name="containerd",
            module="github.com/containerd/containerd/v2",
            version="v2.4.2",
            commands={"containerd": "cmd/containerd", "ctr": "cmd/ctr",
                      "containerd-shim-runc-v2": "cmd/containerd-shim-runc-v2"},
            why="real nodes: one container runtime per node",
            tags="no_btrfs,no_devmapper,no_zfs",
        ),
        GoComponent(
            name="runc",
            module="github.com/opencontainers/runc",
            version="v1.5.3",
            commands={"runc": "."},
            why="real nodes: the OCI runtime containerd starts containers with (seccomp on)",
            tags="seccomp",
            cgo=True,
        ),
        GoComponent(
            name="coredns",
            module="github.com/coredns/coredns",
            version="v1.15.0",
            commands={"coredns": "."},
            why="real nodes: cluster DNS (Service names, OME_LEADER_ADDRESS); no upstream",
            wrapper_main=COREDNS_MAIN,
        ),
        GoComponent(
            name="kwok",
            module="sigs.k8s.io/kwok",
            version="v0.8.0",
            commands={"kwok": "cmd/kwok"},
            why="scale: simulated nodes whose pods run by stages (make test-kwok, bench-kwok)",
        ),
        GoComponent(
            name="helm",
            module="helm.sh/helm/v4",
            version="v4.3.2",
            commands={"helm": "cmd/helm"},
            why="the Helm chart: lint, template, install, upgrade",
        ),
        GoComponent(
            name="keda",
            module="github.com/kedacore/keda/v2",
            version="v2.21.1",
            commands={"keda-operator": "cmd/operator", "keda-adapter": "cmd/adapter"},
            why="OME's class: KEDA autoscaling: the operator and its external-metrics server "
                "(make test-keda)",
            toolchain="go1.27.4",  # its go.mod says go 1.27.4; the machine has 1.26.8
        ),
    )
}
"""Every Go component the tests may start, by name."""


def component_dir(component: GoComponent) -> Path:
    """Cache folder of one component version."""
    return cache_root() / "components" / component.name / component.version


def binary_path(name: str, command: str | None = None) -> Path:
    """Where the cached binary ``command`` of component ``name`` lives (built or not)."""
    component = COMPONENTS[name]
    cmd = command or next(iter(component.commands))
    if cmd not in component.commands:
        raise KeyError(f"{name} has no command {cmd!r}: {sorted(component.commands)}")
    return component_dir(component) / "bin" / cmd


def missing(component: GoComponent) -> list[str]:
    """The commands of ``component`` not yet in the cache."""
    bdir = component_dir(component) / "bin"
    return [c for c in component.commands if not os.access(bdir / c, os.X_OK)]


def _writable_copy(src: Path, dst: Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, symlinks=True)
    for root, dirs, files in os.walk(dst):
        for entry in (*dirs, *files):
            p = Path(root) / entry
            if not p.is_symlink():
                p.chmod(p.stat().st_mode | stat.S_IWUSR)


def _toolchain_env(component: GoComponent) -> dict[str, str]:
    return {"GOTOOLCHAIN": component.toolchain} if component.toolchain else {}


def _prepare_source(component: GoComponent) -> Path:
    """The folder to build in: a writable copy of the module, or our wrapper module."""
    src = component_dir(component) / "src"
    if component.wrapper_main:
        if src.exists():
            shutil.rmtree(src)
        src.mkdir(parents=True)
        _run(["go", "mod", "init", f"local/{component.name}"], src)
        (src / "main.go").write_text(component.wrapper_main)
        _run(["go", "get", f"{component.module}@{component.version}"], src)
        _run(["go", "mod", "tidy"], src)
        return src
    work = component_dir(component) / "work"
    work.mkdir(parents=True, exist_ok=True)
    info = json.loads(
        _run(["go", "mod", "download", "-json", f"{component.module}@{component.version}"],
             work, capture=True, env=_toolchain_env(component))
    )
    _writable_copy(Path(info["Dir"]), src)
    return src


def build_component(name: str) -> Path:
    """Build (or find) component ``name`` and return its bin directory."""
    if name not in COMPONENTS:
        raise RuntimeError(f"unknown component {name!r}: expected one of {sorted(COMPONENTS)}")
    component = COMPONENTS[name]
    bdir = component_dir(component) / "bin"
    if not missing(component):
        log(f"{name} {component.version}: cached in {bdir}")
        return bdir
    with build_lock():
        todo = missing(component)
        if not todo:
            return bdir
        if shutil.which("go") is None:
            raise RuntimeError(f"no `go` command on PATH: Go is needed to build {name}")
        started = time.monotonic()
        log(f"building {name} {component.version} ({component.why}): {', '.join(todo)}")
        src = _prepare_source(component)
        partial = component_dir(component) / "bin.partial"
        partial.mkdir(parents=True, exist_ok=True)
        bdir.mkdir(parents=True, exist_ok=True)
        env = {**_toolchain_env(component), "CGO_ENABLED": "1" if component.cgo else "0"}
        tags = ["-tags", component.tags] if component.tags else []
        for cmd in todo:
            pkg = component.commands[cmd]
            _run(["go", "build", "-mod=mod", "-v", "-p", "2", "-trimpath", *tags,
                  "-ldflags", "-s -w", "-o", str(partial / cmd),
                  "./" + pkg if pkg != "." else "."],
                 src, progress=True, env=env)
            os.replace(partial / cmd, bdir / cmd)
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(src, ignore_errors=True)
        log(f"BUILD TIME {name} {component.version}: {time.monotonic() - started:.1f} s")
    return bdir


# ------------------------------------------------------------------ our own Go modules


@frozen
class LocalGoModule:
    """A Go module of ours (standard library only) in this source tree, built to one binary."""

    name: str
    #: the module's folder (``go.mod`` and its ``*.go`` files)
    source: Path
    why: str


MODEL_SERVER = LocalGoModule(
    name="model-server",
    source=Path(__file__).resolve().parent / "modelserver",
    why="the test model server and pause process the real nodes' images carry",
)
"""The model server (``omenative_devcluster/modelserver``), also the pods' pause process."""


def module_sources(module: LocalGoModule) -> dict[str, bytes]:
    """The module's ``go.mod``, ``go.sum`` and ``*.go`` files, by name, read once."""
    files = {p.name: p.read_bytes() for p in sorted(module.source.iterdir())
             if p.is_file() and (p.suffix == ".go" or p.name in ("go.mod", "go.sum"))}
    if "go.mod" not in files:
        raise RuntimeError(f"{module.name}: no go.mod in {module.source}")
    return files


def source_hash(sources: Mapping[str, bytes]) -> str:
    """Hex SHA-256 over the file names and contents: the binary's cache key."""
    h = hashlib.sha256()
    for name, data in sorted(sources.items()):
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def build_local(module: LocalGoModule = MODEL_SERVER, *, into: Path | None = None) -> Path:
    """Build (or find) ``module`` and return its binary's path.

    The binary is static (``CGO_ENABLED=0``) and reproducible (``-trimpath``, no build id,
    no VCS stamp): it lands in ``<into>/<name>/<source hash>/<name>`` (``into`` defaults to
    ``$OMENATIVE_CACHE/local``), built from a copy of the sources under the shared build lock.
    """
    sources = module_sources(module)  # what is hashed is what is built
    key = source_hash(sources)[:16]
    vdir = (into or cache_root() / "local") / module.name / key
    binary = vdir / module.name
    if os.access(binary, os.X_OK):
        return binary
    with build_lock():
        if os.access(binary, os.X_OK):
            return binary
        if shutil.which("go") is None:
            raise RuntimeError(f"no `go` command on PATH: Go is needed to build {module.name}")
        started = time.monotonic()
        log(f"building {module.name} {key} ({module.why})")
        src = vdir / "src"
        shutil.rmtree(src, ignore_errors=True)
        src.mkdir(parents=True)
        for name, data in sources.items():
            (src / name).write_bytes(data)
        partial = vdir / f"{module.name}.partial"
        _run(["go", "build", "-p", "2", "-trimpath", "-ldflags", "-s -w -buildid=",
              "-o", str(partial), "."], src)
        os.replace(partial, binary)
        shutil.rmtree(src, ignore_errors=True)
        log(f"BUILD TIME {module.name}: {time.monotonic() - started:.1f} s")
    return binary


# ---------------------------------------------------------------------- background builds


class ComponentUnavailable(RuntimeError):
    """A test needs a component that is neither cached nor queued in a running build."""


def _pending_file() -> Path:
    return cache_root() / "components" / "pending.json"


def _alive(pid: int) -> bool:
    if pid <= 0:  # os.kill(0 or -1, 0) would test a process group, not one builder
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pending() -> list[str]:
    """Components a live ``build_in_order`` still has to build (empty when none runs)."""
    try:
        data = json.loads(_pending_file().read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict) or not _alive(int(data.get("pid", 0))):
        return []
    return [str(n) for n in data.get("names", [])]


def _write_pending(names: list[str]) -> None:
    path = _pending_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), "names": names}))
    os.replace(tmp, path)


def build_in_order(names: list[str]) -> None:
    """Build ``names`` one after another, publishing which are still to come.

    ``make test`` runs this in the background at the lowest CPU priority while the unit,
    property and first integration tests run; a test that needs a component still in the
    queue waits for it (``wait_for``) instead of failing or building it a second time.
    """
    unknown = [n for n in names if n not in COMPONENTS]
    if unknown:
        raise RuntimeError(f"unknown component(s) {unknown}: expected some of {sorted(COMPONENTS)}")
    todo = [n for n in names if missing(COMPONENTS[n])]
    for name in names:
        if name not in todo:
            log(f"{name} {COMPONENTS[name].version}: cached in "
                f"{component_dir(COMPONENTS[name]) / 'bin'}")
    try:
        for i, name in enumerate(todo):
            _write_pending(todo[i:])
            try:
                build_component(name)
            except (RuntimeError, OSError) as exc:
                raise RuntimeError(f"{name}: {exc}") from exc
    finally:
        with contextlib.suppress(OSError, ValueError):
            if json.loads(_pending_file().read_text()).get("pid") == os.getpid():
                _pending_file().unlink()


def wait_for(name: str, poll: float = 5.0) -> Path:
    """The bin directory of component ``name``, waiting while a running build still owes it.

    Raises ``ComponentUnavailable`` (its message says how to build it) when the component is
    not cached and no build in progress will produce it.
    """
    component = COMPONENTS[name]
    announced = False
    while missing(component) and name in pending():
        if not announced:
            log(f"waiting for the background build of {name} {component.version} "
                f"(its progress: {cache_root() / 'components-build.log'})")
            announced = True
        time.sleep(poll)
    if missing(component):
        raise ComponentUnavailable(
            f"{name} {component.version} is not built ({binary_path(name)} is missing) and "
            f"no build is running: run `make test-build WITH={name}` (or `python -m "
            f"omenative_devcluster build --with {name}`) first")
    return component_dir(component) / "bin"

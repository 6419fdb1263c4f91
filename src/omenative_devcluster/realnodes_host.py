"""The host-wide state real nodes create, and how it is all removed again.

Real kubelets, containerd and kube-proxy change the machine, not just a state folder:
iptables chains, a bridge per node and a dummy interface, cgroups in every v1 hierarchy,
bind mounts (the kubelet mounts its root dir, containerd mounts rootfs, shm and netns),
sysctls (IP forwarding, the kubelet's kernel tunables). Everything here has a fixed name
of ours (``omn*`` links, ``omenative-node-*`` cgroups, ``/var/lib/omenative-realnodes``),
so one machine runs one real-node cluster at a time (``machine_lock``) and ``teardown``
removes exactly what a run may have left, also after a crash.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

#: Where every node's files live (containerd root and state, kubelet root, CNI, logs).
BASE_DIR = Path(os.environ.get("OMENATIVE_REALNODES_DIR", "/var/lib/omenative-realnodes"))
#: The machine-wide lock: one real-node cluster per machine.
LOCK_FILE = Path("/run/omenative-realnodes.lock")
#: A bridge of ours (no ports; this kernel has no dummy links) with the address the API
#: server and DNS serve pods on.
HOST_LINK = "omn0"
HOST_ADDRESS = "10.250.0.1"
#: Node ``i``'s bridge is ``omn-br<i>`` with pods in 10.244.<i>.0/24 (gateway .1).
BRIDGE_PREFIX = "omn-br"
POD_CIDR = "10.244.0.0/16"
#: Service ClusterIPs (the API server's ``--service-cluster-ip-range``); the host routes
#: them to our dummy interface, so even before kube-proxy's DNAT nothing heads for eth0
SERVICE_CIDR = "10.0.0.0/24"
CGROUP_PREFIX = "omenative-node-"
CGROUP_FS = Path("/sys/fs/cgroup")

#: Sysctls set for real nodes (forwarding, bridged traffic through iptables) and the ones
#: the kubelet sets itself (its kernel tunables); all are put back by ``teardown``.
SYSCTLS = {
    "net/ipv4/ip_forward": "1",
    "net/bridge/bridge-nf-call-iptables": "1",
    "net/bridge/bridge-nf-call-ip6tables": "1",
}
KUBELET_SYSCTLS = (
    "vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
)
SAVED_SYSCTLS = "sysctls.saved.json"
#: Host paths the kubelet and containerd create whatever their config says; removed by
#: ``teardown`` when absent before ``up`` (recorded in ``created.json``).
SHARED_PATHS = (Path("/var/lib/kubelet"), Path("/run/containerd"), Path("/var/log/pods"))
CREATED_FILE = "created.json"
#: where every containerd's shims put their sockets (a fixed path in containerd)
SHIM_SOCKETS = Path("/run/containerd/s")


def log(msg: str) -> None:
    """Progress to stderr, in the devcluster's format."""
    import sys  # noqa: PLC0415 - only for the print target

    print(f"[realnodes {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def sh(*args: str, check: bool = True) -> str:
    """Run a host command and return its stdout; raise with its stderr when it fails."""
    proc = subprocess.run(list(args), capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(args)}` failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


# ---------------------------------------------------------------------- the machine lock


@contextlib.contextmanager
def machine_lock(owner: str) -> Iterator[IO[str]]:
    """Hold the machine-wide real-node lock (waiting, and saying so, while another run has it)."""
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    with LOCK_FILE.open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            log(f"another real-node cluster runs on this machine ({fh.read().strip() or '?'}): "
                "waiting for it to stop (one real-node cluster per machine)")
            fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps({"pid": os.getpid(), "owner": owner}))
        fh.flush()
        try:
            yield fh
        finally:
            fh.seek(0)
            fh.truncate()
            fcntl.flock(fh, fcntl.LOCK_UN)


def lock_free() -> bool:
    """True when no process holds the machine lock (then leftovers are nobody's)."""
    if not LOCK_FILE.exists():
        return True
    with LOCK_FILE.open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(fh, fcntl.LOCK_UN)
        return True


# ---------------------------------------------------------------------- set-up


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name


def save_host_state() -> None:
    """Record the sysctls and shared paths as they are before ``up`` (once per run)."""
    BASE_DIR.mkdir(parents=True, exist_ok=True)
    saved = BASE_DIR / SAVED_SYSCTLS
    if not saved.exists():
        values = {}
        for name in (*SYSCTLS, *KUBELET_SYSCTLS):
            with contextlib.suppress(OSError):
                values[name] = _sysctl_path(name).read_text().strip()
        saved.write_text(json.dumps(values))
    created = BASE_DIR / CREATED_FILE
    if not created.exists():
        created.write_text(json.dumps([str(p) for p in SHARED_PATHS if not p.exists()]))


def set_up_host(nodes: int) -> None:
    """Sysctls, the dummy interface with the host address, one bridge per node, cgroup roots."""
    for name, value in SYSCTLS.items():
        _sysctl_path(name).write_text(value)
    sh("ip", "link", "add", HOST_LINK, "type", "bridge")
    sh("ip", "addr", "add", f"{HOST_ADDRESS}/32", "dev", HOST_LINK)
    sh("ip", "link", "set", HOST_LINK, "up")
    sh("ip", "route", "add", SERVICE_CIDR, "dev", HOST_LINK, "src", HOST_ADDRESS)
    for i in range(nodes):
        for hierarchy in cgroup_hierarchies():
            node = hierarchy / f"{CGROUP_PREFIX}{i}"
            node.mkdir(exist_ok=True)
            for name in ("cpuset.cpus", "cpuset.mems"):  # a v1 cpuset starts empty
                if (hierarchy / name).exists() and not (node / name).read_text().strip():
                    (node / name).write_text((hierarchy / name).read_text())


def cgroup_hierarchies() -> list[Path]:
    """Every mounted cgroup hierarchy (v1 controllers, the named systemd one, unified)."""
    out = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[2] in ("cgroup", "cgroup2"):
            out.append(Path(parts[1]))
    return out


# ---------------------------------------------------------------------- teardown


def _ours(cmdline: list[str]) -> bool:
    text = " ".join(cmdline)
    return str(BASE_DIR) in text


def process_cmdline(pid: int) -> list[str]:
    """The argv of process ``pid`` (empty when it is gone or unreadable)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def shim_socket(cmdline: list[str]) -> Path | None:
    """The socket a containerd shim with this command line serves (``/run/containerd/s/...``).

    containerd names it by the SHA-256 of ``<containerd address>/<namespace>/<id>``, whatever
    its own state dir; a killed shim leaves it behind.
    """
    args = dict(zip(cmdline[1::2], cmdline[2::2], strict=False))
    try:
        key = f"{args['-address']}/{args['-namespace']}/{args['-id']}"
    except KeyError:
        return None
    return SHIM_SOCKETS / hashlib.sha256(key.encode()).hexdigest()


def kill_leftovers() -> list[int]:
    """SIGKILL every process in our cgroups and every shim of our containerds; return PIDs."""
    killed: list[int] = []
    for _ in range(5):
        pids = set(_cgroup_pids())
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and _ours(process_cmdline(int(entry.name))):
                pids.add(int(entry.name))
        pids.discard(os.getpid())
        if not pids:
            break
        sockets = [shim_socket(process_cmdline(pid)) for pid in pids]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        killed.extend(pids)
        time.sleep(0.3)
        for sock in sockets:
            if sock is not None:
                sock.unlink(missing_ok=True)
    return sorted(set(killed))


def _our_cgroups() -> Iterator[Path]:
    for hierarchy in cgroup_hierarchies():
        with contextlib.suppress(OSError):
            for top in hierarchy.iterdir():
                if top.name.startswith(CGROUP_PREFIX) and top.is_dir():
                    yield top


def _cgroup_pids() -> Iterator[int]:
    for top in _our_cgroups():
        for procs in top.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                yield from (int(x) for x in procs.read_text().split())


def remove_cgroups() -> list[str]:
    """Remove our cgroups, deepest first, in every hierarchy; return what would not go."""
    stuck = []
    for top in list(_our_cgroups()):
        dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        for d in [*dirs, top]:
            try:
                d.rmdir()
            except FileNotFoundError:
                pass
            except OSError as exc:
                stuck.append(f"{d}: {exc.strerror}")
    return stuck


def our_mounts() -> list[str]:
    """Mount points under our base dir (the kubelet's, containerd's, netns), deepest first."""
    points = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        point = line.split()[1].replace("\\040", " ")
        if point == str(BASE_DIR) or point.startswith(str(BASE_DIR) + "/"):
            points.append(point)
    return sorted(points, key=lambda p: -p.count("/"))


def unmount_all() -> list[str]:
    """Unmount everything under the base dir; return what stayed mounted."""
    for _ in range(3):
        points = our_mounts()
        if not points:
            return []
        for point in points:
            sh("umount", point, check=False) or sh("umount", "-l", point, check=False)
    return our_mounts()


_RULE = re.compile(r"^-A (\S+) (.*)$")
_JUMP = re.compile(r"-j (KUBE|CNI)-")


def iptables_ours(save: str) -> list[str]:
    """The lines of an ``iptables-save`` that are ours: KUBE-* and CNI-* chains and jumps."""
    return [line for line in save.splitlines()
            if re.search(r"\b(KUBE|CNI)-[\w-]+", line) and not line.startswith("#")]


def clean_iptables() -> None:
    """Delete every KUBE-*/CNI-* rule and chain (filter, nat, mangle; IPv4 and IPv6)."""
    for tool in ("iptables", "ip6tables"):
        for table in ("filter", "nat", "mangle"):
            save = sh(f"{tool}-save", "-t", table, check=False)
            chains = []
            for line in save.splitlines():
                m = _RULE.match(line)
                if m and (re.match(r"(KUBE|CNI)-", m.group(1)) or _JUMP.search(line)):
                    sh(tool, "-t", table, "-D", m.group(1), *_split_rule(m.group(2)), check=False)
                elif line.startswith(":") and re.match(r":(KUBE|CNI)-", line):
                    chains.append(line[1:].split()[0])
            for chain in chains:
                sh(tool, "-t", table, "-F", chain, check=False)
            for chain in chains:
                sh(tool, "-t", table, "-X", chain, check=False)


def _split_rule(rule: str) -> list[str]:
    import shlex  # noqa: PLC0415 - only here

    return shlex.split(rule)


def our_links() -> list[str]:
    """Our interfaces: the dummy, the bridges, and veths still attached to a bridge of ours."""
    out = []
    for line in sh("ip", "-o", "link", "show").splitlines():
        name = line.split(":", 2)[1].strip().split("@")[0]
        if name == HOST_LINK or name.startswith(BRIDGE_PREFIX) or f"master {BRIDGE_PREFIX}" in line:
            out.append(name)
    return out


def remove_links() -> None:
    """Delete the veths on our bridges, the bridges and the dummy interface."""
    for name in sorted(our_links(), key=lambda n: n.startswith("omn")):
        sh("ip", "link", "del", name, check=False)


def restore_host_state() -> None:
    """Put the saved sysctls back and remove shared paths that did not exist before."""
    with contextlib.suppress(OSError, ValueError):
        for name, value in json.loads((BASE_DIR / SAVED_SYSCTLS).read_text()).items():
            with contextlib.suppress(OSError):
                if _sysctl_path(name).read_text().strip() != value:
                    _sysctl_path(name).write_text(value)
    with contextlib.suppress(OSError, ValueError):
        import shutil  # noqa: PLC0415

        for path in json.loads((BASE_DIR / CREATED_FILE).read_text()):
            shutil.rmtree(path, ignore_errors=True)


def teardown(kube_proxy: Path | None = None) -> list[str]:
    """Remove everything real nodes leave on the host; return what could not be removed.

    Idempotent and record-free (fixed names), so it also cleans up after a killed run.
    The caller holds the machine lock or knows no real-node cluster runs.
    """
    import shutil  # noqa: PLC0415

    kill_leftovers()
    problems = [f"still mounted: {m}" for m in unmount_all()]
    if kube_proxy is not None and os.access(kube_proxy, os.X_OK):
        sh(str(kube_proxy), "--cleanup", "--proxy-mode=iptables", check=False)
    clean_iptables()
    remove_links()
    problems += [f"cgroup left: {c}" for c in remove_cgroups()]
    restore_host_state()
    if not our_mounts():
        shutil.rmtree(BASE_DIR, ignore_errors=True)
    problems += [f"link left: {n}" for n in our_links()]
    return problems


def host_snapshot() -> dict[str, list[str]]:
    """What of ours is on the host now: for tests comparing before and after a run."""
    rules = []
    for tool in ("iptables-save", "ip6tables-save"):
        rules += iptables_ours(sh(tool, check=False))
    return {
        "iptables": rules,
        "mounts": our_mounts() + [m for m in _all_mounts() if "kubelet" in m],
        "links": our_links(),
        "cgroups": [str(c) for c in _our_cgroups()],
        "processes": [str(p) for p in Path("/proc").iterdir()
                      if p.name.isdigit() and _ours(process_cmdline(int(p.name)))],
        "paths": [str(p) for p in (BASE_DIR, HOST_LINK_PATH, *SHARED_PATHS) if p.exists()]
        + sorted(str(p) for p in SHIM_SOCKETS.glob("*")),
    }


HOST_LINK_PATH = Path("/sys/class/net") / HOST_LINK


def _all_mounts() -> list[str]:
    return [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]

"""The control plane's processes: free ports, liveness, log tails, ``pids.json``, ``down``.

``Cluster`` (``cluster.py``) starts etcd, kube-apiserver, kube-controller-manager and
kube-scheduler and records each PID with its binary in the state folder's ``pids.json``;
this module reads that record and stops exactly those processes (never a reused PID), and
holds the small process helpers the cluster, kwok and real-node bring-ups share.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from omenative_devcluster.realnodes_host import process_cmdline

PIDS_FILE = "pids.json"

def _log(msg: str) -> None:
    print(f"[devcluster {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_ports(count: int) -> list[int]:
    """Pick ``count`` distinct free TCP ports on 127.0.0.1 (held open until all are chosen)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _pdeathsig() -> None:
    """In the child: get SIGTERM when the parent dies, so no component outlives us."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def pid_alive(pid: int) -> bool:
    """True when a process with this PID exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # field 3 (after the parenthesised command) is the state; Z = zombie, X = dead
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _http_ok(url: str, token: str | None, timeout: float = 2.0) -> bool:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(cannot read log: {exc})"


def read_pids(state_dir: Path) -> dict[str, Any] | None:
    """The recorded ``pids.json`` of a state folder, or None."""
    try:
        data = json.loads((state_dir / PIDS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _recorded(pids: dict[str, Any]) -> Iterator[tuple[str, int, str]]:
    for name, rec in (pids.get("components") or {}).items():
        yield name, int(rec["pid"]), str(rec["exe"])


def _is_ours(pid: int, exe: str) -> bool:
    """The PID is alive and still runs the binary we recorded (not a reused PID)."""
    if not pid_alive(pid):
        return False
    argv = process_cmdline(pid)
    return bool(argv) and argv[0] == exe


def down(state_dir: Path, timeout: float = 20.0) -> list[str]:
    """Stop exactly the processes recorded in ``pids.json``; return what was stopped."""
    state_dir = state_dir.resolve()
    pids = read_pids(state_dir)
    if pids is None:
        return []
    stopped: list[str] = []
    sup = pids.get("supervisor") or {}
    sup_pid = int(sup.get("pid", 0))
    if sup.get("cli") and sup_pid and sup_pid != os.getpid() and pid_alive(sup_pid):
        argv = process_cmdline(sup_pid)
        if any("omenative_devcluster" in a for a in argv):
            os.kill(sup_pid, signal.SIGTERM)
            stopped.append(f"supervisor ({sup_pid})")
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and pid_alive(sup_pid):
                time.sleep(0.1)
    # the supervisor stops its components itself; whatever is left we stop here
    comps = list(_recorded(pids))
    for name, pid, exe in reversed(comps):
        if _is_ours(pid, exe):
            os.kill(pid, signal.SIGTERM)
            stopped.append(f"{name} ({pid})")
    deadline = time.monotonic() + timeout
    for _name, pid, exe in comps:
        while time.monotonic() < deadline and _is_ours(pid, exe):
            time.sleep(0.1)
        if _is_ours(pid, exe):
            os.kill(pid, signal.SIGKILL)
    data_dir = pids.get("etcdDataDir")
    if data_dir and Path(data_dir).name.startswith("omenative-etcd-"):
        shutil.rmtree(data_dir, ignore_errors=True)
    with contextlib.suppress(OSError):
        (state_dir / PIDS_FILE).unlink()
    return stopped

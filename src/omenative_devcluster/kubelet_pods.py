"""Pod status as a kubelet writes it: containers, conditions, terminal phase.

Pure functions of the pod and the stand-in's record of it (``_PodState``): which step comes
next and when (``plan_pod``), and the status that step writes; the stand-in runs them.
"""

from __future__ import annotations

import asyncio
import hashlib
import math

import attrs

from omenative_devcluster.kubelet_api import Json, _now
from omenative_devcluster.kubelet_config import Faults, StandInConfig, image_matches

_PULL_ERROR = "pull-error"
_PULL_BACKOFF = "pull-backoff"
_CRASH = "crash"
_RUNNING = "running"
_READY = "ready"
_TERMINATE = "terminate"
_DELETE = "delete"
_TERMINAL_PHASES = ("Succeeded", "Failed")


@attrs.define(eq=False)
class _PodState:
    uid: str
    pod: Json
    changed: asyncio.Event
    seen_at: float
    stage: str = ""
    stage_at: float = 0.0
    delete_seen_at: float | None = None
    #: the final delete (grace period 0) was accepted; a finalizer may still hold the pod
    removed: bool = False
    restarts: int = 0
    next_restart_at: float = 0.0
    ip: str | None = None
    gone: bool = False
    last_action: str = ""
    last_action_at: float = 0.0
    task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.pod["metadata"]["namespace"])

    @property
    def node(self) -> str:
        return str(self.pod.get("spec", {}).get("nodeName") or "")


def _conditions(pod: Json) -> dict[str, str]:
    return {
        str(c.get("type")): str(c.get("status"))
        for c in pod.get("status", {}).get("conditions") or []
    }


def _gates(pod: Json) -> list[str]:
    return [
        str(g["conditionType"])
        for g in pod.get("spec", {}).get("readinessGates") or []
        if "conditionType" in g
    ]


def readiness_gates_met(pod: Json) -> bool:
    """True when every ``spec.readinessGates`` entry has a True condition in the status."""
    conds = _conditions(pod)
    return all(conds.get(g) == "True" for g in _gates(pod))


def _containers(pod: Json) -> list[Json]:
    return list(pod.get("spec", {}).get("containers") or [])


def _image_id(image: str) -> str:
    return f"docker.io/fake@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


def _container_id(uid: str, name: str, restarts: int) -> str:
    digest = hashlib.sha256(f"{uid}/{name}/{restarts}".encode()).hexdigest()
    return f"containerd://{digest}"


def _running_since(pod: Json, name: str) -> str | None:
    """When container ``name`` started running, from the pod's last status (None if not)."""
    prior = next(
        (x for x in pod.get("status", {}).get("containerStatuses") or []
         if x.get("name") == name and "running" in (x.get("state") or {})),
        None,
    )
    since = (prior or {}).get("state", {}).get("running", {}).get("startedAt")
    return str(since) if since else None


def _pod_conditions(pod: Json, *, ready: bool, ts: str, terminated: bool = False) -> list[Json]:
    """The kubelet-owned pod conditions; a condition whose status holds keeps its time."""

    def cond(type_: str, ok: bool, reason: str = "", message: str = "") -> Json:
        c: Json = {"type": type_, "status": "True" if ok else "False",
                   "lastProbeTime": None, "lastTransitionTime": ts}
        if not ok and reason:
            c["reason"] = reason
            if message:
                c["message"] = message
        return c

    names = " ".join(str(c["name"]) for c in _containers(pod))
    not_ready = f"containers with unready status: [{names}]"
    if terminated:
        ready_cond = cond("Ready", False, "PodCompleted")
        containers_ready = cond("ContainersReady", False, "PodCompleted")
    else:
        reason = "ContainersNotReady"
        containers_ready = cond("ContainersReady", ready, reason, not_ready)
        if ready:
            missing = [g for g in _gates(pod) if _conditions(pod).get(g) != "True"]
            ready_cond = cond(
                "Ready", readiness_gates_met(pod), "ReadinessGatesNotReady",
                f"the status of pod readiness gate(s) {missing} is not True",
            )
        else:
            ready_cond = cond("Ready", False, reason, not_ready)
    conds = [
        cond("PodReadyToStartContainers", not terminated),
        cond("Initialized", True),
        containers_ready,
        ready_cond,
    ]
    # keep lastTransitionTime when a condition's status does not change
    old = {c.get("type"): c for c in pod.get("status", {}).get("conditions") or []}
    for c in conds:
        prev = old.get(c["type"])
        if prev and prev.get("status") == c["status"] and prev.get("lastTransitionTime"):
            c["lastTransitionTime"] = prev["lastTransitionTime"]
    return conds


def _init_statuses(pod: Json, started_at: str, ts: str) -> list[Json]:
    """Init containers, all completed (the stand-in runs nothing before the main ones)."""
    return [
        {
            "name": c["name"], "image": c.get("image", ""), "imageID": "",
            "ready": True, "restartCount": 0, "started": False,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                     "startedAt": started_at, "finishedAt": ts}},
            "lastState": {},
        }
        for c in pod.get("spec", {}).get("initContainers") or []
    ]




def crash_backoff(restarts: int) -> float:
    """Seconds before a crash-looping container restarts (doubling, at most 10)."""
    return float(min(10.0, 2.0**restarts))


def pod_status(st: _PodState, action: str, ip: str, host_ip: str) -> Json:
    """The status a kubelet writes for ``action`` on a pod at ``ip`` on node ``host_ip``."""
    pod = st.pod
    ts = _now()
    started_at = pod.get("status", {}).get("startTime") or ts
    statuses = [_container_status(st, c, action, ts) for c in _containers(pod)]
    status: Json = {
        "phase": "Pending" if action in (_PULL_ERROR, _PULL_BACKOFF) else "Running",
        "conditions": _pod_conditions(pod, ready=action in (_READY, "sync-ready"), ts=ts),
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": started_at,
        "containerStatuses": statuses,
    }
    init = _init_statuses(pod, started_at, ts)
    if init:
        status["initContainerStatuses"] = init
    return status


def _container_status(st: _PodState, c: Json, action: str, ts: str) -> Json:
    """One container's status for ``action`` (pull error, crash, running, ready)."""
    uid = st.uid
    name = str(c["name"])
    image = str(c.get("image", ""))
    running = action in (_RUNNING, _READY, "sync-ready")
    cs: Json = {
        "name": name,
        "image": image,
        "imageID": "",
        "ready": action in (_READY, "sync-ready"),
        "restartCount": st.restarts,
        "started": running,
        "lastState": {},
    }
    if action in (_PULL_ERROR, _PULL_BACKOFF):
        reason = "ErrImagePull" if action == _PULL_ERROR else "ImagePullBackOff"
        msg = (
            f'failed to pull image "{image}": not found (kubelet stand-in fault)'
            if action == _PULL_ERROR
            else f'Back-off pulling image "{image}"'
        )
        cs["state"] = {"waiting": {"reason": reason, "message": msg}}
        return cs
    cs["imageID"] = _image_id(image)
    cs["containerID"] = _container_id(uid, name, st.restarts)
    if action in (_CRASH, "restart"):
        terminated = {
            "exitCode": 1, "reason": "Error", "startedAt": ts, "finishedAt": ts,
            "containerID": _container_id(uid, name, max(0, st.restarts - 1)),
        }
        if action == _CRASH:
            cs["state"] = {"terminated": terminated}
        else:
            cs["state"] = {"waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off restarting failed container {name} in pod "
                           f"{st.name}_{st.namespace}({uid})",
            }}
            cs["lastState"] = {"terminated": terminated}
        return cs
    since = _running_since(st.pod, name) or ts
    cs["state"] = {"running": {"startedAt": since}}
    return cs


def terminal_status(st: _PodState) -> Json:
    """The status a kubelet writes once a deleted pod's containers have stopped.

    A container that was running exits cleanly on SIGTERM (exit code 0, ``Completed``);
    one that never started or was crash-looping is reported as killed (exit code 137).
    The pod is ``Succeeded`` when every container exited cleanly, else ``Failed``;
    ``Ready`` and ``ContainersReady`` turn False.
    """
    pod = st.pod
    ts = _now()
    clean = st.stage in (_RUNNING, _READY)
    statuses: list[Json] = []
    for c in _containers(pod):
        name = str(c["name"])
        image = str(c.get("image", ""))
        since = _running_since(pod, name) or ts
        terminated: Json = (
            {"exitCode": 0, "reason": "Completed", "startedAt": since, "finishedAt": ts}
            if clean else
            {"exitCode": 137, "reason": "ContainerStatusUnknown", "finishedAt": ts,
             "message": "The container was stopped because the pod was deleted"}
        )
        if clean:
            terminated["containerID"] = _container_id(st.uid, name, st.restarts)
        statuses.append({
            "name": name, "image": image,
            "imageID": _image_id(image) if clean else "",
            "ready": False, "restartCount": st.restarts, "started": False,
            "state": {"terminated": terminated}, "lastState": {},
        })
    status: Json = {
        "phase": "Succeeded" if clean else "Failed",
        "conditions": _pod_conditions(pod, ready=False, ts=ts, terminated=True),
        "containerStatuses": statuses,
    }
    return status


def plan_pod(st: _PodState, now: float, cfg: StandInConfig, faults: Faults
             ) -> tuple[str | None, float]:
    """Next action for a pod and when it is due (None: wait for a change)."""
    pod = st.pod
    if st.node in faults.dead_nodes:
        return None, math.inf
    if pod["metadata"].get("deletionTimestamp"):
        return _plan_deletion(st, now, cfg)
    return _plan_faults(st, cfg, faults) or _plan_healthy(st, now, cfg)


def _plan_healthy(st: _PodState, now: float, cfg: StandInConfig) -> tuple[str | None, float]:
    """The next step of a pod without faults: Running, then Ready, then kept in sync."""
    pod = st.pod
    if st.stage in ("", _PULL_ERROR, _PULL_BACKOFF, _CRASH):
        return _RUNNING, st.seen_at + cfg.start_delay if st.stage == "" else now
    if st.stage == _RUNNING:
        return _READY, st.stage_at + cfg.ready_delay
    conds = _conditions(pod)
    want_ready = "True" if readiness_gates_met(pod) else "False"
    if (
        conds.get("ContainersReady") != "True"
        or conds.get("Ready") != want_ready
        or pod.get("status", {}).get("phase") != "Running"
    ):
        return "sync-ready", now
    return None, math.inf


def _plan_deletion(st: _PodState, now: float, cfg: StandInConfig) -> tuple[str | None, float]:
    """A deleted pod: stop its containers (terminal phase), then remove it once.

    The terminal status comes first, as with a kubelet; the delete with grace period 0
    follows. A finalizer (Kueue's) may keep the pod after that: the stand-in then waits
    for the next change instead of deleting it again.
    """
    if st.delete_seen_at is None:
        st.delete_seen_at = now
    due = st.delete_seen_at + cfg.delete_delay
    if st.pod.get("status", {}).get("phase") not in _TERMINAL_PHASES:
        return _TERMINATE, due
    if not st.removed:
        return _DELETE, due
    return None, math.inf


def _plan_faults(st: _PodState, cfg: StandInConfig, faults: Faults
                 ) -> tuple[str | None, float] | None:
    """The next step of a finished pod or one whose image is faulted; None otherwise."""
    if st.pod.get("status", {}).get("phase") in _TERMINAL_PHASES:
        return None, math.inf
    images = [str(c.get("image", "")) for c in _containers(st.pod)]
    pull = _plan_bad_image(st, images, cfg, faults)
    if pull is not None:
        return pull
    if any(image_matches(i, faults.crash_images) for i in images):
        if st.stage != _CRASH:
            return _CRASH, st.seen_at + cfg.start_delay
        return "restart", st.next_restart_at
    return None


def _plan_bad_image(st: _PodState, images: list[str], cfg: StandInConfig,
                    faults: Faults) -> tuple[str | None, float] | None:
    """ErrImagePull, then ImagePullBackOff, for a pod not started whose image is bad."""
    # a bad image only matters before the pull; a started pod has its image already
    not_started = st.stage in ("", _PULL_ERROR, _PULL_BACKOFF)
    if not not_started or not any(image_matches(i, faults.bad_images) for i in images):
        return None
    if st.stage == _PULL_ERROR:
        return _PULL_BACKOFF, st.stage_at + 1.0
    if st.stage == _PULL_BACKOFF:
        return None, math.inf
    return _PULL_ERROR, st.seen_at + cfg.start_delay

"""The real scheduler-plugins coscheduling, run out of cluster against the local control plane.

Gang scheduling through PodGroups (``scheduling.x-k8s.io/v1alpha1``) needs two programs of
``sigs.k8s.io/scheduler-plugins``, both built by :mod:`omenative_devcluster.components`:

* ``kube-scheduler-plugins``: kube-scheduler with the plugins compiled in, run as a *second*
  scheduler beside the cluster's ``default-scheduler``. Its one profile,
  ``scheduler-plugins-scheduler`` (:data:`SCHEDULER_NAME`), enables ``Coscheduling`` for
  queue sort and every other extension point, so pods naming that scheduler bind as whole
  gangs or not at all. The ``KubeSchedulerConfiguration`` is written at run time: leader
  election off, ``podGroupBackoffSeconds`` 0 (a backoff can park a gang until the
  5-minute unschedulable flush), and secure serving on a loopback port chosen at run time,
  with a certificate made here, so ``/readyz`` can be checked with verification on.
* ``scheduler-plugins-controller``: writes each PodGroup's status (``phase``, ``running``,
  ``scheduled``); it also reconciles ElasticQuotas and fails to start without their CRD.

Both CRDs come from the module source in the Go module cache
(``config/crd/bases``; never copied into this repository) and are installed with
server-side apply. :meth:`SchedulerPlugins.stop` stops both processes and, if ``start``
installed the CRDs, removes them again, so later tests see a cluster without PodGroups.
A failure raises :class:`SchedPluginsError` with the reason and the end of the log.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from omenative_devcluster.build import log
from omenative_devcluster.components import (
    COMPONENTS,
    ComponentUnavailable,
    binary_path,
    wait_for,
)
from omenative_devcluster.loopback import (
    free_port,
    install_crds,
    kubectl,
    log_tail,
    make_certificate,
    module_source,
    stop_process,
    wait_ready,
)

__all__ = [
    "CRD_NAMES",
    "SCHEDULER_NAME",
    "SchedPluginsError",
    "SchedulerPlugins",
    "crd_files",
    "module_dir",
    "pod_group_crd_file",
    "scheduler_config",
]

SCHED_PLUGINS = COMPONENTS["scheduler-plugins"]
SCHEDULER_NAME = "scheduler-plugins-scheduler"
"""The profile (``schedulerName`` on the pods) of the coscheduling scheduler."""
CRD_NAMES = ("podgroups.scheduling.x-k8s.io", "elasticquotas.scheduling.x-k8s.io")
"""The CRDs the scheduler and the controller need, by name."""
_CRD_DIR = ("config", "crd", "bases")


class SchedPluginsError(RuntimeError):
    """scheduler-plugins could not be prepared or started; the message says why."""


def module_dir() -> Path:
    """The scheduler-plugins module's source in the Go module cache (downloaded if missing)."""
    return module_source("scheduler-plugins", SchedPluginsError)


def crd_files(module: Path) -> list[Path]:
    """The PodGroup and ElasticQuota CRDs, as the module ships them (``config/crd/bases``)."""
    files = [module.joinpath(*_CRD_DIR, f"{name.split('.', 1)[1]}_{name.split('.', 1)[0]}.yaml")
             for name in CRD_NAMES]
    absent = [str(f) for f in files if not f.is_file()]
    if absent:
        raise SchedPluginsError(f"scheduler-plugins {SCHED_PLUGINS.version} ships no "
                                f"{', '.join(absent)}")
    return files


def pod_group_crd_file() -> Path:
    """The real ``podgroups.scheduling.x-k8s.io`` CRD file in the module source."""
    return crd_files(module_dir())[0]


def scheduler_config(kubeconfig: Path, *, permit_wait_seconds: int = 60) -> dict[str, Any]:
    """A ``KubeSchedulerConfiguration`` with one Coscheduling profile, :data:`SCHEDULER_NAME`.

    ``permit_wait_seconds`` is how long the gang's first pods wait at Permit for the rest
    (``permitWaitingTimeSeconds``; omenative's PodGroup ``scheduleTimeoutSeconds`` wins when
    set). ``podGroupBackoffSeconds`` stays 0.
    """
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 50, "burst": 100},
        "profiles": [{
            "schedulerName": SCHEDULER_NAME,
            "plugins": {
                "queueSort": {"enabled": [{"name": "Coscheduling"}],
                              "disabled": [{"name": "*"}]},
                "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
            },
            "pluginConfig": [{"name": "Coscheduling", "args": {
                "permitWaitingTimeSeconds": permit_wait_seconds,
                "podGroupBackoffSeconds": 0,
            }}],
        }],
    }


class SchedulerPlugins:
    """The coscheduling scheduler and the PodGroup controller for the cluster of ``kubeconfig``."""

    def __init__(self, kubeconfig: Path, state_dir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.state_dir = state_dir
        self.scheduler_log = state_dir / "kube-scheduler-plugins.log"
        self.controller_log = state_dir / "scheduler-plugins-controller.log"
        self.scheduler: subprocess.Popen[bytes] | None = None
        self.controller: subprocess.Popen[bytes] | None = None
        self.scheduler_port = 0
        self.probe_port = 0
        self._installed_crds = False

    def _kubectl(self, *args: str, stdin: str | None = None) -> str:
        return kubectl(self.kubeconfig, *args, stdin=stdin, error=SchedPluginsError)

    def log_tail(self, lines: int = 40) -> str:
        """The end of both logs (for error messages)."""
        return (f"kube-scheduler-plugins:\n{log_tail(self.scheduler_log, lines)}\n"
                f"scheduler-plugins-controller:\n{log_tail(self.controller_log, lines)}")

    def install_crds(self) -> None:
        """Apply the module's PodGroup and ElasticQuota CRDs and wait until Established."""
        files = crd_files(module_dir())
        self._installed_crds = True
        install_crds(self.kubeconfig, files, CRD_NAMES, SchedPluginsError)

    def start(self, timeout: float = 120.0) -> None:
        """Install the CRDs, start the controller and the scheduler, wait until both are ready."""
        try:
            wait_for("scheduler-plugins")
        except ComponentUnavailable as exc:
            raise SchedPluginsError(str(exc)) from exc
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.install_crds()
        try:
            self._start_controller(timeout)
            self._start_scheduler(timeout)
        except BaseException:
            self.stop()
            raise

    def _spawn(self, args: list[str], log_path: Path) -> subprocess.Popen[bytes]:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        with log_path.open("ab") as out:
            return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    stdin=subprocess.DEVNULL, start_new_session=True)

    def _start_controller(self, timeout: float) -> None:
        self.probe_port = free_port()
        self.controller = self._spawn(
            [str(binary_path("scheduler-plugins", "scheduler-plugins-controller")),
             "--metricsAddr=0", f"--probeAddr=127.0.0.1:{self.probe_port}",
             "--qps=50", "--burst=100", "--workers=2"],
            self.controller_log)
        log(f"scheduler-plugins-controller {SCHED_PLUGINS.version} started "
            f"(pid {self.controller.pid}, log {self.controller_log})")
        wait_ready("scheduler-plugins-controller", self.controller,
                   f"http://127.0.0.1:{self.probe_port}/readyz", self.controller_log, timeout,
                   SchedPluginsError)

    def _start_scheduler(self, timeout: float) -> None:
        cert_dir = self.state_dir / "scheduler-certs"
        make_certificate(cert_dir, SchedPluginsError)
        cfg_path = self.state_dir / "scheduler-config.yaml"
        cfg_path.write_text(yaml.safe_dump(scheduler_config(self.kubeconfig)))
        self.scheduler_port = free_port()
        kcfg = str(self.kubeconfig)
        self.scheduler = self._spawn(
            [str(binary_path("scheduler-plugins", "kube-scheduler-plugins")),
             f"--config={cfg_path}", f"--authentication-kubeconfig={kcfg}",
             f"--authorization-kubeconfig={kcfg}", "--authentication-skip-lookup=true",
             "--bind-address=127.0.0.1",
             f"--secure-port={self.scheduler_port}",
             f"--tls-cert-file={cert_dir / 'tls.crt'}",
             f"--tls-private-key-file={cert_dir / 'tls.key'}", "--v=2"],
            self.scheduler_log)
        log(f"kube-scheduler-plugins {SCHED_PLUGINS.version} started as {SCHEDULER_NAME} "
            f"(pid {self.scheduler.pid}, log {self.scheduler_log})")
        wait_ready("kube-scheduler-plugins", self.scheduler,
                   f"https://127.0.0.1:{self.scheduler_port}/readyz", self.scheduler_log,
                   timeout, SchedPluginsError, cafile=cert_dir / "tls.crt")
        log("scheduler-plugins is ready")

    def stop(self) -> None:
        """Stop the scheduler and the controller; remove the CRDs if ``start`` installed them."""
        for attr in ("scheduler", "controller"):
            proc = getattr(self, attr)
            setattr(self, attr, None)
            stop_process(proc)
        if self._installed_crds:
            self._installed_crds = False
            with contextlib.suppress(SchedPluginsError, subprocess.TimeoutExpired):
                self._kubectl("delete", "--ignore-not-found", "--timeout=60s",
                              *(f"crd/{name}" for name in CRD_NAMES))

    @contextlib.contextmanager
    def running(self) -> Iterator[SchedulerPlugins]:
        """``start()`` on entry, ``stop()`` on exit."""
        self.start()
        try:
            yield self
        finally:
            self.stop()

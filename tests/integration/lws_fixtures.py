"""Fixtures and helpers for tests on the real LeaderWorkerSet controller (v0.7.0).

Use them from a test module with ``pytest_plugins = ["manager_fixtures", "lws_fixtures"]``
and mark every test ``@pytest.mark.component("lws")`` (the LWS tests then run last, after
the background build of LWS, if one runs).

* ``lws_controller`` (session): one LWS process for the session, its CRD installed and its
  webhooks registered (``omenative_devcluster.lws``); started on first use, stopped at the
  end of the session. The LWS build is awaited in a thread, never on the event loop (the
  kubelet stand-in keeps renewing its node leases meanwhile). An LWS that cannot start
  FAILS the tests that need it, with the reason and the end of its log.
* ``lws_namespace``: the test's namespace, with LWS running; the namespace's
  LeaderWorkerSets are deleted when the test ends.
* ``lws_service_controller``: an InferenceService controller on ``lws_namespace`` that
  finds the LWS CRD as it would in a cluster (its own CRD watch; the ``service_controller``
  fixture of ``manager_fixtures`` sees no optional CRD, so it never renders a LWS).

Helpers: ``LEADER_WORKER_SETS`` (the resource), ``leader_worker_set`` (a plain LWS body),
``lws_pods`` (a LWS's pods by name), ``pod_env`` and ``pod_ready``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from manager_fixtures import running_service_controller

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import PODS, Resource
from omenative_controller.service_controller import ServiceController
from omenative_devcluster.lws import NAME_LABEL, LwsError, LwsProcess

__all__ = [
    "LEADER_WORKER_SETS",
    "NAME_LABEL",
    "leader_worker_set",
    "lws_controller",
    "lws_namespace",
    "lws_pods",
    "lws_service_controller",
    "pod_env",
    "pod_ready",
]

LEADER_WORKER_SETS = Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets",
                              "LeaderWorkerSet")
"""The LeaderWorkerSet resource (``leaderworkerset.x-k8s.io/v1``)."""


@pytest.fixture(scope="session")
async def lws_controller(kubeconfig_path: Path, tmp_path_factory: pytest.TempPathFactory
                         ) -> AsyncIterator[LwsProcess]:
    """The real LWS controller for the session; one that cannot start FAILS the test."""
    proc = LwsProcess(kubeconfig_path, tmp_path_factory.mktemp("lws"))
    try:
        # start() awaits a background build of LWS (components.wait_for) in this thread
        await asyncio.to_thread(proc.start)
    except (LwsError, OSError) as exc:
        pytest.fail(f"LeaderWorkerSet did not start: {exc}", pytrace=False)
    try:
        yield proc
    finally:
        await asyncio.to_thread(proc.stop)


@pytest.fixture
async def lws_namespace(lws_controller: LwsProcess, kube: KubeClient, namespace: str
                        ) -> AsyncIterator[str]:
    """The test's namespace with LWS running; its LeaderWorkerSets are deleted afterwards."""
    try:
        yield namespace
    finally:
        with contextlib.suppress(ApiError):
            page = await kube.list(LEADER_WORKER_SETS, namespace)
            for lws in page.get("items") or ():
                with contextlib.suppress(ApiError):
                    await kube.delete(LEADER_WORKER_SETS, lws["metadata"]["name"], namespace)


@pytest.fixture
async def lws_service_controller(
    kubeconfig_path: Path, lws_namespace: str, kube: KubeClient, service_crds_applied: list[str],
    ir_crd: str,
) -> AsyncIterator[ServiceController]:
    """A ServiceController on the namespace that finds the LWS CRD as a cluster has it."""
    async with running_service_controller(kubeconfig_path, lws_namespace, kube,
                                          "isvc-controller-lws",
                                          crd_poll_seconds=1.0) as controller:
        yield controller


def leader_worker_set(name: str, *, replicas: int, size: int, image: str = "example.com/llm:1",
                      gpus: int = 0) -> JSON:
    """A plain LeaderWorkerSet: ``replicas`` groups of a leader and ``size - 1`` workers."""
    container: dict[str, Any] = {"name": "main", "image": image}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    template = {"spec": {"terminationGracePeriodSeconds": 1, "containers": [container]}}
    return {"apiVersion": LEADER_WORKER_SETS.api_version, "kind": "LeaderWorkerSet",
            "metadata": {"name": name},
            "spec": {"replicas": replicas,
                     "leaderWorkerTemplate": {"size": size,
                                              "restartPolicy": "RecreateGroupOnPodRestart",
                                              "workerTemplate": template}}}


async def lws_pods(kube: KubeClient, namespace: str, name: str) -> dict[str, JSON]:
    """The live (not terminating) pods of LeaderWorkerSet ``name``, by pod name."""
    page = await kube.list(PODS, namespace, label_selector=f"{NAME_LABEL}={name}")
    return {p["metadata"]["name"]: p for p in page.get("items") or ()
            if not p["metadata"].get("deletionTimestamp")}


def pod_env(pod: JSON, container: int = 0) -> dict[str, str]:
    """A pod container's literal environment variables."""
    env = pod["spec"]["containers"][container].get("env") or ()
    return {e["name"]: str(e.get("value", "")) for e in env if "name" in e}


def pod_ready(pod: JSON) -> bool:
    """The pod's ``Ready`` condition is True."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())

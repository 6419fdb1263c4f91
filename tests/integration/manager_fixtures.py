"""Fixtures and helpers for the manager's integration tests (real API server, in-process manager).

Import the fixtures into a test module with ``from manager_fixtures import *`` (pytest puts
this folder on ``sys.path``). Every test gets its own namespace; its manager watches only
that namespace, reads its lifecycle ConfigMap and holds its Lease there, so tests never see
each other. The PodGroup CRD is cluster-wide: the ``pod_group_crd`` / ``no_pod_group_crd``
fixtures install or remove it for one test. It is scheduler-plugins' own CRD, read from the
module source in the Go module cache at test time (``pod_group_crd_file()``), never a copy.

Helpers poll with deadlines (``eventually``); a failing wait says what it waited for and
what it saw last.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from attrs import define

from omenative_controller import service_crds
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import (
    CONFIG_MAPS,
    CRDS,
    EVENTS,
    INFERENCE_REPLICAS,
    POD_GROUP_CRD,
    PODS,
)
from omenative_controller.manager import Manager, ManagerOptions
from omenative_controller.observability import configure_logging
from omenative_controller.service_controller import ServiceController
from omenative_devcluster.schedplugins import SchedPluginsError
from omenative_devcluster.schedplugins import pod_group_crd_file as _module_pod_group_crd

pytest.register_assert_rewrite("pod_recorder")
from pod_recorder import (  # noqa: E402 - after the rewrite registration
    PodRecorder,
    RecorderDied,
    eventually,
    not_yet,
)

__all__ = [
    "REPO",
    "TEST_LIFECYCLE",
    "ManagerHandle",
    "PodRecorder",
    "RecorderDied",
    "apply_crd",
    "chat_runtime",
    "conditions",
    "delete_crd",
    "eventually",
    "gate",
    "get_replica",
    "ir_crd",
    "kube",
    "list_pods",
    "live_instances",
    "no_pod_group_crd",
    "not_yet",
    "patch_replica",
    "pod_group_crd",
    "pod_group_crd_file",
    "posted_warning_events",
    "replica_body",
    "replica_condition",
    "start_manager",
    "warning_events",
]


REPO = Path(__file__).resolve().parents[2]
IR_CRD_FILE = REPO / "config" / "crd" / "ome.io_inferencereplicas.yaml"

TEST_LIFECYCLE: dict[str, Any] = {
    "instanceReadyTimeout": "60s",
    "stuckPodGracePeriod": "5m",
    "unschedulableGracePeriod": "60s",
    "updateRetry": {"maxAttempts": 2, "initialDelay": "1s", "maxDelay": "2s", "multiplier": 2.0},
    "teardown": {"deadline": "2m"},
    "autoMigrate": {"maxAttempts": 3},
    "audit": {"maxInFlightMigrations": 3, "maxMigrationsPerWindow": 10, "window": "1h"},
    "revisionHistoryLimit": 10,
    "gangScheduleTimeout": {"min": "10s", "max": "60s"},
    "requeue": {"operation": "1s", "gate": "1s"},
    "instanceStatusEncoding": "DenseV1",
    "gangScheduling": "PodGroup",
}
"""A test-sized lifecycle config: short deadlines and backoffs, and the chart's relocation
budget, migration caps and history limit (a key left out of a ConfigMap is off, as in
OME). Gangs use the scheduler-plugins PodGroup (when its CRD is installed), as before the
cluster served Kubernetes' own; tests of another mechanism set ``gangScheduling``."""


# ---------------------------------------------------------------------------- cluster access


@pytest.fixture(scope="session")
async def kube(kubeconfig_path: Path) -> AsyncIterator[KubeClient]:
    """A raw-JSON client for the test's own reads and writes (no rate limit)."""
    client = await KubeClient.connect(str(kubeconfig_path), qps=0, burst=1, timeout=30)
    try:
        yield client
    finally:
        await client.close()


async def apply_crd(kube: KubeClient, path: Path) -> str:
    """Create or replace the CRD in ``path``; return its name once Established."""
    body = yaml.safe_load(path.read_text())
    name = body["metadata"]["name"]
    try:
        current = await kube.get(CRDS, name)
    except ApiError as exc:
        if not exc.not_found:
            raise
        await kube.create(CRDS, body)
    else:
        if current["metadata"].get("deletionTimestamp"):
            await _wait_crd_gone(kube, name)
            await kube.create(CRDS, body)
        else:
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            await kube.replace(CRDS, name, body)

    async def established() -> bool:
        crd = await kube.get(CRDS, name)
        return any(c.get("type") == "Established" and c.get("status") == "True"
                   for c in (crd.get("status") or {}).get("conditions") or ())

    await eventually(established, timeout=30, what=f"CRD {name} Established")
    return str(name)


async def _wait_crd_gone(kube: KubeClient, name: str) -> None:
    async def gone() -> bool:
        try:
            await kube.get(CRDS, name)
        except ApiError as exc:
            if exc.not_found:
                return True
            raise
        return False

    await eventually(gone, timeout=60, what=f"CRD {name} deleted")


async def delete_crd(kube: KubeClient, name: str) -> None:
    """Delete a CRD and wait until it is gone."""
    with contextlib.suppress(ApiError):
        await kube.delete(CRDS, name)
    await _wait_crd_gone(kube, name)


@pytest.fixture(scope="session")
async def ir_crd(kube: KubeClient) -> str:
    """The InferenceReplica CRD from ``config/crd/``, applied and Established."""
    configure_logging("info")
    return await apply_crd(kube, IR_CRD_FILE)


def pod_group_crd_file() -> Path:
    """scheduler-plugins' own PodGroup CRD, from its module source (the test FAILS without it)."""
    try:
        return _module_pod_group_crd()
    except SchedPluginsError as exc:
        pytest.fail(f"the PodGroup CRD could not be read from the scheduler-plugins module: "
                    f"{exc}", pytrace=False)


@pytest.fixture
async def pod_group_crd(kube: KubeClient) -> AsyncIterator[str]:
    """scheduler-plugins' PodGroup CRD installed for one test (removed afterwards)."""
    name = await apply_crd(kube, await asyncio.to_thread(pod_group_crd_file))
    try:
        yield name
    finally:
        await delete_crd(kube, name)


@pytest.fixture
async def no_pod_group_crd(kube: KubeClient) -> None:
    """Make sure the PodGroup CRD is not installed."""
    await delete_crd(kube, POD_GROUP_CRD)


# ---------------------------------------------------------------------------- the manager


@define
class ManagerHandle:
    """One in-process manager and its task."""

    manager: Manager
    task: asyncio.Task[None]

    @property
    def metrics(self) -> Any:
        """The manager's Metrics."""
        return self.manager.metrics

    def writes(self) -> float:
        """Write calls so far, Lease renewals excluded."""
        return float(self.manager.metrics.writes())

    def lease_writes(self) -> float:
        """Lease write calls so far."""
        return float(self.manager.metrics.sample("omenative_api_writes_total",
                                                 {"resource": "leases"}))

    async def stop(self, timeout: float = 30) -> None:
        """Graceful stop (finish in-flight passes, release the Lease)."""
        if self.task.done():
            return
        self.manager.stop()
        await asyncio.wait_for(asyncio.shield(self.task), timeout)

    async def kill(self, timeout: float = 60) -> None:
        """Hard kill: cancel the task (nothing is drained or released). A manager still
        running ``timeout`` s after its cancel fails the test with every task's stack."""
        if self.task.done():
            return
        self.task.cancel()
        await asyncio.wait({self.task}, timeout=timeout)
        if not self.task.done():
            raise AssertionError(f"the manager did not end {timeout} s after its cancel; "
                                 f"the tasks still running:\n{task_stacks()}")
        with contextlib.suppress(asyncio.CancelledError):
            self.task.result()

    async def wait_leader(self, timeout: float = 30) -> None:
        """Until this manager leads."""
        async def leading() -> bool:
            if self.task.done():
                self.task.result()  # raise the manager's error
            return self.manager.is_leader and self.manager.queue is not None
        await eventually(leading, timeout=timeout, what="the manager to lead")



def task_stacks() -> str:
    """Every asyncio task of the loop with where it waits: what a hung teardown shows."""
    out = io.StringIO()
    for task in asyncio.all_tasks():
        print(f"-- {task.get_name()}", file=out)
        awaited: Any = task.get_coro()
        for _ in range(30):  # down the chain of awaits to where it is parked
            frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "ag_frame", None)
            if frame is not None:
                print(f"   {frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}",
                      file=out)
            awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "ag_await", None)
            if awaited is None:
                break
    return out.getvalue()


@pytest.fixture
async def start_manager(
    kubeconfig_path: Path, namespace: str, kube: KubeClient, ir_crd: str,
    request: pytest.FixtureRequest,
) -> AsyncIterator[Callable[..., Awaitable[ManagerHandle]]]:
    """Factory: write the lifecycle ConfigMap and start a manager on the test's namespace.

    A test that also uses ``service_controller`` gets managers without their own
    InferenceService controller, so one ISVC controller runs per namespace, as in a cluster.
    """
    handles: list[ManagerHandle] = []
    if "service_controller" in request.fixturenames:
        defaults: dict[str, Any] = {"inference_services": False}
    else:
        defaults = {}

    async def start(
        *,
        lifecycle: dict[str, Any] | None = None,
        identity: str | None = None,
        lease_duration: float = 3.0,
        renew_deadline: float = 2.0,
        retry_period: float = 0.5,
        write_config: bool = True,
        wait_leader: bool = True,
        **extra: Any,
    ) -> ManagerHandle:
        if write_config:
            await put_lifecycle(kube, namespace, TEST_LIFECYCLE if lifecycle is None
                                else lifecycle)
        settings = manager_settings(kubeconfig_path, namespace,
                                    identity=identity or f"test-{len(handles)}",
                                    lease_duration=lease_duration,
                                    renew_deadline=renew_deadline, retry_period=retry_period)
        opts = ManagerOptions(**{**settings, **defaults, **extra})
        manager = Manager(opts)
        handle = ManagerHandle(manager, asyncio.create_task(manager.run(),
                                                            name=f"manager-{opts.identity}"))
        handles.append(handle)
        if wait_leader:
            await handle.wait_leader()
        return handle

    try:
        yield start
    finally:
        for h in handles:
            with contextlib.suppress(Exception):
                await h.kill()
        await release_finalizers(kube, namespace)


def manager_settings(
    kubeconfig: Path, namespace: str, *, identity: str, lease_duration: float = 3.0,
    renew_deadline: float = 2.0, retry_period: float = 0.5,
) -> dict[str, Any]:
    """The ``ManagerOptions`` every test manager starts with: one namespace watched and
    holding its config and Lease, loopback ports chosen at run time, quick polls and
    backoff (the stand-in and the real-node fixtures share them)."""
    return {
        "kubeconfig": str(kubeconfig), "namespaces": (namespace,),
        "config_namespace": namespace, "lease_namespace": namespace,
        "lease_duration": lease_duration, "renew_deadline": renew_deadline,
        "retry_period": retry_period, "bind_address": "127.0.0.1", "metrics_port": 0,
        "probe_port": 0, "crd_poll_seconds": 1.0, "config_reload_seconds": 2.0,
        "backoff_base": 0.05, "backoff_max": 5.0, "identity": identity,
    }


async def release_finalizers(kube: KubeClient, namespace: str) -> None:
    """Drop our finalizer from every InferenceReplica left, so the namespace can go."""
    with contextlib.suppress(ApiError):
        page = await kube.list(INFERENCE_REPLICAS, namespace)
        for ir in page.get("items") or ():
            if ir["metadata"].get("finalizers"):
                with contextlib.suppress(ApiError):
                    await kube.patch(INFERENCE_REPLICAS, ir["metadata"]["name"],
                                     {"metadata": {"finalizers": None}}, namespace)


async def put_lifecycle(kube: KubeClient, namespace: str, lifecycle: dict[str, Any] | str) -> None:
    """Create or replace ``inferenceservice-config`` with a ``lifecycle`` entry."""
    text = lifecycle if isinstance(lifecycle, str) else json.dumps(lifecycle)
    body: JSON = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "inferenceservice-config", "namespace": namespace},
        "data": {"lifecycle": text},
    }
    try:
        await kube.create(CONFIG_MAPS, body, namespace)
    except ApiError as exc:
        if not exc.already_exists:
            raise
        await kube.patch(CONFIG_MAPS, "inferenceservice-config", {"data": body["data"]},
                         namespace)


# ---------------------------------------------------------------------------- objects


def replica_body(
    name: str,
    *,
    replicas: int | None = 2,
    image: str = "example.com/llm:1",
    worker_image: str | None = None,
    worker_size: int = 1,
    single: bool = False,
    annotations: dict[str, str] | None = None,
    termination_grace: int = 1,
) -> JSON:
    """A standalone InferenceReplica: leader + worker(size) Instances, or one default pod."""

    def template(img: str) -> JSON:
        return {"spec": {"terminationGracePeriodSeconds": termination_grace,
                         "containers": [{"name": "ome-container", "image": img}]}}

    runners = (
        [{"name": "default", "size": 1, "template": template(image)}]
        if single else
        [{"name": "leader", "size": 1, "template": template(image)},
         {"name": "worker", "size": worker_size, "template": template(worker_image or image)}]
    )
    spec: JSON = {"component": "engine", "runners": runners}
    if replicas is not None:
        spec["replicas"] = replicas
    meta: JSON = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "metadata": meta,
            "spec": spec}


def chat_runtime(namespace: str) -> JSON:
    """The ServingRuntime ``srt-chat``: one ``example.com/llm:1`` engine container (what the
    autoscaler tests' InferenceService ``chat`` runs)."""
    return {"apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime",
            "metadata": {"name": "srt-chat", "namespace": namespace},
            "spec": {"engineConfig": {"runner": {"name": "ome-container",
                                                 "image": "example.com/llm:1"}}}}


async def get_replica(kube: KubeClient, namespace: str, name: str) -> JSON:
    """The InferenceReplica as the API server has it."""
    return await kube.get(INFERENCE_REPLICAS, name, namespace)


async def patch_replica(kube: KubeClient, namespace: str, name: str, patch: JSON,
                        *, subresource: str | None = None) -> JSON:
    """JSON merge patch on the InferenceReplica (or its ``scale`` subresource)."""
    return await kube.patch(INFERENCE_REPLICAS, name, patch, namespace, subresource=subresource)


async def list_pods(kube: KubeClient, namespace: str) -> dict[str, JSON]:
    """Pods of the namespace by name."""
    page = await kube.list(PODS, namespace)
    return {p["metadata"]["name"]: p for p in page.get("items") or ()}


def conditions(obj: JSON) -> dict[str, str]:
    """An object's status conditions: type -> status."""
    return {c.get("type"): c.get("status")
            for c in (obj.get("status") or {}).get("conditions") or ()}


def replica_condition(ir: JSON, type_: str) -> JSON | None:
    """One condition of an InferenceReplica's status."""
    for c in (ir.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return dict(c)
    return None


def gate(pod: JSON) -> str | None:
    """The pod's ``ome.io/serving`` condition status (None: not set)."""
    return conditions(pod).get("ome.io/serving")


def live_instances(pods: dict[str, JSON]) -> dict[int, list[JSON]]:
    """Non-terminating pods by Instance index."""
    out: dict[int, list[JSON]] = {}
    for pod in pods.values():
        if pod["metadata"].get("deletionTimestamp"):
            continue
        idx = pod["metadata"].get("labels", {}).get("ome.io/instance-index")
        if idx is not None:
            out.setdefault(int(idx), []).append(pod)
    return out


async def warning_events(kube: KubeClient, namespace: str, name: str | None = None
                         ) -> list[JSON]:
    """Warning Events on the object named ``name`` (an InferenceReplica, a runtime...);
    None: on every object of the namespace."""
    on = f"involvedObject.name={name}," if name is not None else ""
    page = await kube.list(EVENTS, namespace, field_selector=f"{on}type=Warning")
    return list(page.get("items") or ())


async def posted_warning_events(kube: KubeClient, namespace: str, name: str, reason: str,
                                timeout: float = 30) -> list[JSON]:
    """Every Warning Event with ``reason`` on ``name``, from the first read that finds one
    (waited for: the manager posts an Event after it writes the condition). A repeat of
    the same warning is that Event's ``count``, not a new Event, so a test can assert
    there is exactly one and what its count says."""

    async def found() -> list[JSON]:
        return [e for e in await warning_events(kube, namespace, name)
                if e["reason"] == reason]

    return await eventually(found, timeout=timeout, what=f"a {reason} Warning Event on {name}")


async def warning_event(kube: KubeClient, namespace: str, name: str, reason: str,
                        timeout: float = 30) -> JSON:
    """The first Warning Event with ``reason`` on ``name``, waited for
    (``posted_warning_events``)."""
    return (await posted_warning_events(kube, namespace, name, reason, timeout))[0]


# ------------------------------------------------------ the InferenceService controller


@pytest.fixture
async def service_crds_applied(kube: KubeClient) -> list[str]:
    """The InferenceService, ServingRuntime and ClusterServingRuntime CRDs as OME v1.3
    defines them (``config/crd/``), Established. Applied for every test that asks (a no-op
    when they are there): the opt-out and upgrade tests put the loose CRDs
    (``config/crd-loose/``) in their place while they run."""
    return await restore_ome_crds(kube)


async def restore_ome_crds(kube: KubeClient) -> list[str]:
    """Put OME's InferenceService and runtime CRDs (``service_crds.SERVICE_CRDS``) back."""
    return [await apply_crd(kube, REPO / crd.file) for crd in service_crds.SERVICE_CRDS]


@contextlib.asynccontextmanager
async def running_service_controller(
    kubeconfig_path: Path, namespace: str, kube: KubeClient, name: str, **options: Any
) -> AsyncIterator[ServiceController]:
    """A ServiceController on ``namespace`` with ``options``, running as a task named
    ``name``; on exit it is stopped and the namespace's finalizers are released."""
    client = await KubeClient.connect(str(kubeconfig_path), qps=0, burst=1, timeout=30)
    controller = ServiceController(client, [namespace], backoff_base=0.05, backoff_max=2.0,
                                   **options)
    task = asyncio.create_task(controller.run(), name=name)
    try:
        yield controller
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        await client.close()
        await release_finalizers(kube, namespace)


@pytest.fixture
async def service_controller(
    kubeconfig_path: Path, namespace: str, kube: KubeClient, service_crds_applied: list[str]
) -> AsyncIterator[ServiceController]:
    """A ServiceController on the test's namespace, running as a task; finalizers released."""
    async with running_service_controller(kubeconfig_path, namespace, kube, "isvc-controller",
                                          crds_present=lambda: ()) as controller:
        yield controller

"""The real Kueue (v0.17.0, its webhooks and its pod-group integration) beside the manager.

Kueue runs out of cluster against the test cluster (``omenative_devcluster.kueue``); the
kubelet stand-in's GPU nodes (4 x 8 GPUs) run the pods. Each multi-pod Instance here is a
leader and one worker of 4 GPUs each, so one Instance is 8 GPUs of quota. What is asserted
is what a user sees: the InferenceReplica's status, the pods and Kueue's Workloads.

* quota for one Instance, two wanted: the second waits gated with its readiness deadline
  parked (``waiting: QuotaExceeded``, not Failed after the deadline has passed), and is
  admitted and becomes Ready once the ClusterQueue grows;
* a whole-Instance restart (a crash-looping worker, from the faults fixture), a
  scale-down, a SurgeThenDrain update and the InferenceReplica's deletion each finish with
  no manual step: the retired groups' pods go and their Workloads with them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import INFERENCE_REPLICAS, Resource
from omenative_devcluster.kueue import KUEUE_NAMESPACE_LABEL, KueueError, KueueProcess

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402
    TEST_LIFECYCLE,
    ManagerHandle,
    eventually,
    get_replica,
    list_pods,
    patch_replica,
)

pytestmark = [pytest.mark.integration, pytest.mark.component("kueue"),
              pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

GROUP = "kueue.x-k8s.io"
CLUSTER_QUEUES = Resource(GROUP, "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False)
RESOURCE_FLAVORS = Resource(GROUP, "v1beta2", "resourceflavors", "ResourceFlavor",
                            namespaced=False)
LOCAL_QUEUES = Resource(GROUP, "v1beta2", "localqueues", "LocalQueue")
WORKLOADS = Resource(GROUP, "v1beta2", "workloads", "Workload")
GPU = "nvidia.com/gpu"
GPUS_PER_POD = 4
INSTANCE_GPUS = 2 * GPUS_PER_POD  # a leader and one worker
ADMISSION_GATE = "kueue.x-k8s.io/admission"
POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
INCARNATION_LABEL = "ome.io/instance-incarnation"


@pytest.fixture(scope="module")
async def kueue(kubeconfig_path: Path, tmp_path_factory: pytest.TempPathFactory
                ) -> AsyncIterator[KueueProcess]:
    """The real Kueue for this module's tests; a Kueue that cannot start FAILS them."""
    proc = KueueProcess(kubeconfig_path, tmp_path_factory.mktemp("kueue"))
    try:
        await asyncio.to_thread(proc.start)
    except (KueueError, OSError) as exc:
        pytest.fail(f"Kueue did not start: {exc}", pytrace=False)
    try:
        yield proc
    finally:
        await asyncio.to_thread(proc.stop)


class Queues:
    """A ResourceFlavor, ClusterQueue and LocalQueue of one test (removed afterwards)."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = f"{namespace}-gpu"

    async def create(self, instances: int) -> None:
        """The queues, with GPU quota for ``instances`` Instances."""
        await self.kube.create(RESOURCE_FLAVORS, {
            "apiVersion": RESOURCE_FLAVORS.api_version, "kind": "ResourceFlavor",
            "metadata": {"name": self.name}, "spec": {}})
        await self.kube.create(CLUSTER_QUEUES, {
            "apiVersion": CLUSTER_QUEUES.api_version, "kind": "ClusterQueue",
            "metadata": {"name": self.name},
            "spec": {
                "namespaceSelector": {"matchLabels": {
                    "kubernetes.io/metadata.name": self.namespace}},
                "resourceGroups": [self._group(instances)],
            }})
        await self.kube.create(LOCAL_QUEUES, {
            "apiVersion": LOCAL_QUEUES.api_version, "kind": "LocalQueue",
            "metadata": {"name": "llm", "namespace": self.namespace},
            "spec": {"clusterQueue": self.name}}, self.namespace)

        async def active() -> bool:
            cq = await self.kube.get(CLUSTER_QUEUES, self.name)
            return _condition(cq, "Active") == "True"

        await eventually(active, timeout=30, what=f"ClusterQueue {self.name} Active")

    def _group(self, instances: int) -> JSON:
        return {"coveredResources": [GPU], "flavors": [{"name": self.name, "resources": [
            {"name": GPU, "nominalQuota": instances * INSTANCE_GPUS}]}]}

    async def resize(self, instances: int) -> None:
        """Quota for ``instances`` Instances."""
        await self.kube.patch(CLUSTER_QUEUES, self.name,
                              {"spec": {"resourceGroups": [self._group(instances)]}})

    async def delete(self) -> None:
        """Remove the cluster-scoped queue objects (the LocalQueue goes with the namespace)."""
        for res in (CLUSTER_QUEUES, RESOURCE_FLAVORS):
            try:
                await self.kube.delete(res, self.name)
            except ApiError as exc:
                if not exc.not_found:
                    raise


@pytest.fixture
async def queues(kueue: KueueProcess, kube: KubeClient, namespace: str
                 ) -> AsyncIterator[Queues]:
    """The test's namespace opted in to Kueue's webhooks, and its queues (not yet made)."""
    await kube.patch(Resource("", "v1", "namespaces", "Namespace", namespaced=False),
                     namespace, {"metadata": {"labels": {KUEUE_NAMESPACE_LABEL: "true"}}})
    q = Queues(kube, namespace)
    try:
        yield q
    finally:
        await q.delete()


def _condition(obj: JSON, type_: str) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return str(c.get("status"))
    return None


def queued_replica(name: str, *, replicas: int, image: str = "example.com/llm:1",
                   worker_image: str = "example.com/llm-worker:1") -> JSON:
    """A leader + 1 worker InferenceReplica in LocalQueue ``llm``, 4 GPUs a pod."""

    def template(img: str) -> JSON:
        return {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "llm"}},
                "spec": {"terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "ome-container", "image": img,
                                         "resources": {"limits": {GPU: str(GPUS_PER_POD)}}}]}}

    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
            "metadata": {"name": name},
            "spec": {"component": "engine", "replicas": replicas, "runners": [
                {"name": "leader", "size": 1, "template": template(image)},
                {"name": "worker", "size": 1, "template": template(worker_image)}]}}


def rows(ir: JSON) -> dict[int, JSON]:
    """The InferenceReplica's Instance rows (DenseV1) by index."""
    return {int(r["index"]): r for r in (ir.get("status") or {}).get("instanceStatuses") or ()}


async def workloads(kube: KubeClient, namespace: str) -> dict[str, JSON]:
    """Kueue's Workloads of the namespace by name."""
    page = await kube.list(WORKLOADS, namespace)
    return {w["metadata"]["name"]: w for w in page.get("items") or ()}


def show(what: str, obj: Any) -> None:
    """Print what a user would see at this step (``pytest -rP`` shows it; the docs quote it)."""
    print(f"--- {what}\n{json.dumps(obj, indent=1, sort_keys=True, default=str)}")


def workload_summary(wls: dict[str, JSON]) -> dict[str, Any]:
    """Workload name -> its QuotaReserved/Admitted/Finished conditions."""
    return {n: {t: _condition(w, t) for t in ("QuotaReserved", "Admitted", "Finished")}
            for n, w in sorted(wls.items())}


def groups(pods: dict[str, JSON]) -> set[str]:
    """The Kueue pod groups of the pods."""
    return {p["metadata"]["labels"][POD_GROUP_LABEL] for p in pods.values()
            if POD_GROUP_LABEL in p["metadata"].get("labels", {})}


async def ready_instances(kube: KubeClient, namespace: str, name: str, count: int
                          ) -> dict[int, JSON]:
    """Wait for ``count`` Ready Instances and no other pod; return the rows."""
    async def check() -> dict[int, JSON] | None:
        ir = await get_replica(kube, namespace, name)
        got = rows(ir)
        pods = await list_pods(kube, namespace)
        ready = [r for r in got.values() if r.get("phase") == "Ready"]
        if len(got) == count and len(ready) == count and len(pods) == 2 * count and all(
                not p["metadata"].get("deletionTimestamp") for p in pods.values()):
            return got
        return None

    return await eventually(check, timeout=90, what=f"{count} Ready Instances of {name}")


async def only_groups_left(kube: KubeClient, namespace: str, what: str) -> set[str]:
    """Wait until the Workloads are exactly the groups of the pods; return them."""
    async def check() -> set[str] | None:
        pods = await list_pods(kube, namespace)
        wls = await workloads(kube, namespace)
        live = groups(pods)
        return live if set(wls) == live else None

    return await eventually(check, timeout=60, what=what)


# ---------------------------------------------------------------------------- the wait


async def test_an_instance_over_quota_waits_gated_with_its_deadline_parked_then_runs(
    kueue: KueueProcess, queues: Queues, kube: KubeClient, namespace: str,
    start_manager: Callable[..., Awaitable[ManagerHandle]],
) -> None:
    await queues.create(instances=1)
    await start_manager(lifecycle={**TEST_LIFECYCLE, "instanceReadyTimeout": "10s"})
    await kube.create(INFERENCE_REPLICAS, queued_replica("chat", replicas=2), namespace)

    async def one_ready_one_waiting() -> tuple[int, JSON] | None:
        got = rows(await get_replica(kube, namespace, "chat"))
        ready = [i for i, r in got.items() if r.get("phase") == "Ready"]
        waiting = [r for r in got.values()
                   if (r.get("operation") or {}).get("waiting") == "QuotaExceeded"]
        if len(got) == 2 and len(ready) == 1 and len(waiting) == 1:
            return ready[0], waiting[0]
        return None

    ready_index, row = await eventually(one_ready_one_waiting, timeout=90,
                                        what="one Instance Ready and one waiting for quota")
    show("the waiting Instance's status row", row)
    assert row.get("admitted", False) is False, row
    assert row["operation"].get("deadline") is None, row  # parked
    waiting_index = int(row["index"])
    pods = await list_pods(kube, namespace)
    gated = {n for n, p in pods.items()
             if p["metadata"]["labels"]["ome.io/instance-index"] == str(waiting_index)}
    assert len(gated) == 2, pods.keys()  # the whole Instance exists, for Kueue to see
    for n in gated:
        gates = [g["name"] for g in pods[n]["spec"].get("schedulingGates") or ()]
        assert ADMISSION_GATE in gates, (n, gates)  # (v0.17 adds its topology gate too)
    # one Workload per Instance: the Ready one admitted, the waiting one not (Kueue makes
    # the waiting group's Workload on its own time, apart from the row the manager writes)
    async def one_per_group() -> dict[str, JSON] | None:
        wls = await workloads(kube, namespace)
        return wls if set(wls) == groups(pods) else None

    wls = await eventually(one_per_group, timeout=30, what="a Workload for each pod group")
    show("Workloads while one Instance waits", workload_summary(wls))
    assert set(wls) == groups(pods) and len(wls) == 2, sorted(wls)

    # well past the 10 s readiness deadline: still waiting, not Failed
    await asyncio.sleep(15)
    ir = await get_replica(kube, namespace, "chat")
    late = rows(ir)[waiting_index]
    show("15 s after its 10 s readiness deadline", late)
    assert late["phase"] != "Failed" and late["operation"]["waiting"] == "QuotaExceeded", late
    assert rows(ir)[ready_index]["phase"] == "Ready"

    await queues.resize(instances=2)
    got = await ready_instances(kube, namespace, "chat", 2)
    assert got[waiting_index].get("admitted") is True
    pods = await list_pods(kube, namespace)
    assert not any(p["spec"].get("schedulingGates") for p in pods.values())


# ---------------------------------------------------------------------------- retiring


async def test_restart_scale_down_update_and_delete_finish_under_kueue(
    kueue: KueueProcess, queues: Queues, kube: KubeClient, namespace: str,
    start_manager: Callable[..., Awaitable[ManagerHandle]], faults: Any,
) -> None:
    await queues.create(instances=3)
    await start_manager()
    await kube.create(INFERENCE_REPLICAS, queued_replica("chat", replicas=2), namespace)
    await ready_instances(kube, namespace, "chat", 2)
    first = await only_groups_left(kube, namespace, "one Workload per Instance")
    assert len(first) == 2

    # 1. a worker crash-loops: each Instance restarts whole, into a new group. Quota for
    # three Instances only fits the two new groups once the two old Workloads are gone.
    await faults.set(crash_images=["example.com/llm-worker:1"])

    async def restarted() -> bool:
        got = rows(await get_replica(kube, namespace, "chat"))
        return len(got) == 2 and all(int(r.get("incarnation", 1)) >= 2 for r in got.values())

    await eventually(restarted, timeout=60, what="both Instances restarted whole")
    await faults.clear()
    await ready_instances(kube, namespace, "chat", 2)
    after_restart = await only_groups_left(kube, namespace, "the old groups' Workloads gone")
    show("pod groups before and after the restart", {"before": sorted(first),
                                                     "after": sorted(after_restart)})
    assert len(after_restart) == 2 and not after_restart & first, (first, after_restart)
    pods = await list_pods(kube, namespace)
    assert all(int(p["metadata"]["labels"][INCARNATION_LABEL]) >= 2 for p in pods.values())

    # 2. scale down: Instance 1 and its group go
    await patch_replica(kube, namespace, "chat", {"spec": {"replicas": 1}})
    await ready_instances(kube, namespace, "chat", 1)
    after_scale = await only_groups_left(kube, namespace, "the scaled-away Workload gone")
    assert len(after_scale) == 1 and after_scale < after_restart

    # 3. SurgeThenDrain update: the new Instance is admitted, the old one retires
    await patch_replica(kube, namespace, "chat", {"spec": {"runners": [
        {"name": "leader", "size": 1,
         "template": queued_replica("x", replicas=1, image="example.com/llm:2")
         ["spec"]["runners"][0]["template"]},
        {"name": "worker", "size": 1,
         "template": queued_replica("x", replicas=1)["spec"]["runners"][1]["template"]}]}})

    async def updated() -> bool:
        pods = await list_pods(kube, namespace)
        images = {c["image"] for p in pods.values() for c in p["spec"]["containers"]}
        return "example.com/llm:1" not in images and len(pods) == 2

    await eventually(updated, timeout=90, what="the update rolled out, old pods gone")
    await ready_instances(kube, namespace, "chat", 1)
    after_update = await only_groups_left(kube, namespace, "the old revision's Workload gone")
    show("pod groups after the scale-down and after the update",
         {"scaled": sorted(after_scale), "updated": sorted(after_update)})
    assert len(after_update) == 1 and not after_update & after_scale

    # 4. deletion: the teardown finishes, nothing of Kueue's is left behind
    await kube.delete(INFERENCE_REPLICAS, "chat", namespace)

    async def gone() -> bool:
        pods = await list_pods(kube, namespace)
        wls = await workloads(kube, namespace)
        try:
            await get_replica(kube, namespace, "chat")
        except ApiError as exc:
            return exc.not_found and not pods and not wls
        return False

    await eventually(gone, timeout=60, what="the InferenceReplica, its pods and Workloads gone")

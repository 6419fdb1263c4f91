"""Kubernetes' own gang scheduling with the real kube-scheduler: 1.37 (``scheduling.k8s.io/
v1beta1``) or 1.36 (``v1alpha2``), whichever the local control plane runs
(``$OMENATIVE_K8S_VERSION``; ``make test-k8s-other`` runs these tests on the other one).

The local control plane runs with its version's gates (``GenericWorkload``, 1.36 also
``GangScheduling``, and ``TopologyAwareWorkloadScheduling``) and the API enabled; the
manager runs with ``lifecycle.gangScheduling: Native``. Each test brings its own GPU nodes
(a second kubelet stand-in in this process), labelled and tainted for its namespace so no
other pod lands there, and its pods select them. What is asserted is what a user sees:
which pods got a ``nodeName``, the InferenceReplica's rows, and the PodGroups.

* 3 nodes x 8 GPUs, two Instances of a leader + 3 workers x 4 GPUs (16 GPUs each): one
  binds whole, the other has no pod bound at any look and is not Failed past its readiness
  deadline (``waiting: PodGroupUnschedulable``); a fourth node arrives and it binds whole.
* two topology domains of 2 nodes each and ``topologyKey`` on the domain label: every
  Instance's pods land in one domain.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from omenative_controller.kube.apiwatch import NATIVE_GANG_VERSIONS, served_resources
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import INFERENCE_REPLICAS, NODES, PODS
from omenative_devcluster.kubelet import KubeletStandIn, StandInConfig
from omenative_devcluster.loopback import kubectl

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402
    TEST_LIFECYCLE,
    ManagerHandle,
    PodRecorder,
    eventually,
    get_replica,
    list_pods,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

GPU = "nvidia.com/gpu"
TEST_NODE = "omenative.io/gang-test"
DOMAIN = "example.com/nvlink-domain"
WORKERS = 3
QUIET_SECONDS = 18.0
"""How long a waiting gang is watched (every pod change recorded): past its 10 s deadline."""
PODS_PER_INSTANCE = 1 + WORKERS
LIFECYCLE = {**TEST_LIFECYCLE, "gangScheduling": "Native", "instanceReadyTimeout": "10s",
             "unschedulableGracePeriod": "10m"}


class GangNodes:
    """This test's GPU nodes: kubelet stand-ins whose nodes only this namespace's pods use;
    ``pod_groups`` and ``workloads``: the native gang API version the cluster serves."""

    def __init__(self, kube: KubeClient, kubeconfig: Path, namespace: str) -> None:
        self.kube = kube
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.standins: list[KubeletStandIn] = []
        self.names: list[str] = []
        self.pod_groups, self.workloads = NATIVE_GANG_VERSIONS[0]

    async def add(self, count: int, domains: list[str] | None = None) -> list[str]:
        """Start ``count`` 8-GPU nodes (``domains``: their DOMAIN label, one each)."""
        prefix = f"{self.namespace}-g{len(self.standins)}-"
        standin = KubeletStandIn(StandInConfig(kubeconfig=self.kubeconfig, nodes=count,
                                               gpus_per_node=8, node_prefix=prefix))
        await standin.start()
        self.standins.append(standin)
        for i, node in enumerate(standin.node_names):
            labels = {TEST_NODE: self.namespace}
            if domains:
                labels[DOMAIN] = domains[i]
            await self.kube.patch(NODES, node, {
                "metadata": {"labels": labels},
                "spec": {"taints": [{"key": TEST_NODE, "value": self.namespace,
                                     "effect": "NoSchedule"}]}})
        await standin.wait_nodes_ready()
        self.names += standin.node_names
        return standin.node_names

    async def close(self) -> None:
        """Remove this test's pods (the stand-ins still running), then the nodes."""
        pods = await self.kube.list(PODS, self.namespace)
        for pod in pods.get("items") or ():
            if (pod.get("spec") or {}).get("nodeName") in self.names:
                try:
                    await self.kube.delete(PODS, pod["metadata"]["name"], self.namespace,
                                           grace_period_seconds=0)
                except ApiError as exc:
                    if not exc.not_found:
                        raise
        for standin in self.standins:
            await standin.stop()
        for node in self.names:
            try:
                await self.kube.delete(NODES, node)
            except ApiError as exc:
                if not exc.not_found:
                    raise


@pytest.fixture
async def gang_nodes(kube: KubeClient, kubeconfig_path: Path, namespace: str
                     ) -> AsyncIterator[GangNodes]:
    """Nodes for one test; the local control plane serves the native gang API."""
    served = [r for r in NATIVE_GANG_VERSIONS
              if isinstance(await served_resources(kube, r[0].api_version), frozenset)]
    assert served, "the local control plane serves no native gang API version"
    nodes = GangNodes(kube, kubeconfig_path, namespace)
    nodes.pod_groups, nodes.workloads = served[0]
    try:
        yield nodes
    finally:
        await nodes.close()


def gang_replica(name: str, namespace: str, *, replicas: int = 2,
                 topology_key: str | None = None) -> JSON:
    """Leader + 3 workers of 4 GPUs each, placed only on this test's nodes."""
    template = {"spec": {
        "terminationGracePeriodSeconds": 1,
        "nodeSelector": {TEST_NODE: namespace},
        "tolerations": [{"key": TEST_NODE, "operator": "Equal", "value": namespace,
                         "effect": "NoSchedule"}],
        "containers": [{"name": "ome-container", "image": "example.com/llm:1",
                        "resources": {"limits": {GPU: "4"}}}]}}
    spec: JSON = {"component": "engine", "replicas": replicas, "runners": [
        {"name": "leader", "size": 1, "template": template},
        {"name": "worker", "size": WORKERS, "template": template}]}
    if topology_key:
        spec["topologyKey"] = topology_key
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
            "metadata": {"name": name}, "spec": spec}


def rows(ir: JSON) -> dict[int, JSON]:
    """The InferenceReplica's Instance rows (DenseV1) by index."""
    return {int(r["index"]): r for r in (ir.get("status") or {}).get("instanceStatuses") or ()}


def by_instance(pods: dict[str, JSON]) -> dict[int, list[JSON]]:
    """Live pods by Instance index."""
    out: dict[int, list[JSON]] = {}
    for pod in pods.values():
        if not pod["metadata"].get("deletionTimestamp"):
            out.setdefault(int(pod["metadata"]["labels"]["ome.io/instance-index"]), []).append(pod)
    return out


def show(what: str, obj: Any) -> None:
    """Print what a user would see at this step (``pytest -rP`` shows it; the docs quote it)."""
    print(f"--- {what}\n{json.dumps(obj, indent=1, sort_keys=True, default=str)}")


def placement(pods: dict[str, JSON]) -> dict[str, str | None]:
    """Pod name -> its nodeName (None: not bound)."""
    return {n: (p.get("spec") or {}).get("nodeName") for n, p in sorted(pods.items())}


async def pod_groups(kube: KubeClient, nodes: GangNodes, namespace: str) -> dict[str, JSON]:
    """The native PodGroups of the namespace by name."""
    page = await kube.list(nodes.pod_groups, namespace)
    return {g["metadata"]["name"]: g for g in page.get("items") or ()}


async def show_kubectl(kubeconfig: Path, namespace: str, version: str) -> None:
    """What ``kubectl get`` shows of the PodGroups and the pods (the docs quote it)."""
    kind = "PodGroupScheduled" if version.endswith("v1alpha2") else "PodGroupInitiallyScheduled"
    cond = f'.status.conditions[?(@.type=="{kind}")]'
    for what, columns in (
        (f"podgroups.{version.split('/')[1]}.scheduling.k8s.io",
         "NAME:.metadata.name,MINCOUNT:.spec.schedulingPolicy.gang.minCount,"
         f"SCHEDULED:{cond}.status,REASON:{cond}.reason,MESSAGE:{cond}.message"),
        ("pods", "NAME:.metadata.name,PHASE:.status.phase,NODE:.spec.nodeName,"
                 "PODGROUP:.spec.schedulingGroup.podGroupName"),
    ):
        out = await asyncio.to_thread(kubectl, kubeconfig, "get", what, "-n", namespace,
                                      "-o", f"custom-columns={columns}", "--sort-by=.metadata.name")
        print(f"$ kubectl get {what}\n{out}")


def scheduled(group: JSON) -> dict[str, Any]:
    """A PodGroup's PodGroupScheduled condition (v1alpha2; PodGroupInitiallyScheduled in
    v1beta1): status, reason, message."""
    for cond in (group.get("status") or {}).get("conditions") or ():
        if cond.get("type") in ("PodGroupScheduled", "PodGroupInitiallyScheduled"):
            return {k: cond.get(k) for k in ("status", "reason", "message")}
    return {}


async def test_a_native_gang_binds_whole_or_not_at_all_and_waits_for_a_node(
    gang_nodes: GangNodes, kube: KubeClient, namespace: str, kubeconfig_path: Path,
    start_manager: Callable[..., Awaitable[ManagerHandle]],
) -> None:
    await gang_nodes.add(3)
    await start_manager(lifecycle=LIFECYCLE)
    await kube.create(INFERENCE_REPLICAS, gang_replica("chat", namespace), namespace)

    async def one_bound_one_waiting() -> tuple[int, int] | None:
        got = rows(await get_replica(kube, namespace, "chat"))
        live = by_instance(await list_pods(kube, namespace))
        whole = [i for i, ps in live.items() if len(ps) == PODS_PER_INSTANCE
                 and all(p["spec"].get("nodeName") for p in ps)]
        waiting = [i for i, r in got.items()
                   if (r.get("operation") or {}).get("waiting") == "PodGroupUnschedulable"]
        if len(whole) == 1 and len(waiting) == 1 and len(live.get(waiting[0], ())) == 4:
            return whole[0], waiting[0]
        return None

    bound, pending = await eventually(one_bound_one_waiting, timeout=90,
                                      what="one Instance bound whole, one waiting")

    # kube-scheduler writes a PodGroup's scheduled condition apart from its pods' bindings:
    # wait for both groups to say what their pods show
    async def groups_decided() -> dict[str, JSON] | None:
        got = await pod_groups(kube, gang_nodes, namespace)
        said = {n: scheduled(g).get("status") for n, g in got.items()}
        return got if said.get(f"chat-{bound}-1") == "True" and \
            said.get(f"chat-{pending}-1") == "False" else None

    groups = await eventually(groups_decided, timeout=30,
                              what="the bound PodGroup scheduled, the waiting one not")
    show("the PodGroups", {n: {"minCount": g["spec"]["schedulingPolicy"]["gang"]["minCount"],
                               "PodGroupScheduled": scheduled(g)} for n, g in groups.items()})
    assert set(groups) == {f"chat-{bound}-1", f"chat-{pending}-1"}
    assert scheduled(groups[f"chat-{pending}-1"])["status"] == "False"
    assert scheduled(groups[f"chat-{bound}-1"])["status"] == "True"
    workloads = (await kube.list(gang_nodes.workloads, namespace)).get("items") or ()
    assert len(workloads) == 1  # one per revision
    if gang_nodes.pod_groups.version == "v1beta1":  # an Instance is disrupted whole
        for group in groups.values():
            assert group["spec"]["disruptionMode"] == {"all": {}}
            assert group["spec"]["workloadRef"]["workloadName"] == (
                workloads[0]["metadata"]["name"])

    # every pod change recorded for well past the 10 s readiness deadline: none of the
    # waiting Instance's pods is ever bound, and it is not Failed
    recorder = await PodRecorder(kube, namespace).start()
    await asyncio.sleep(QUIET_SECONDS)
    await recorder.caught_up()
    await recorder.stop()

    def waiting_pod_bound(state: dict[str, JSON]) -> str | None:
        names = [p["metadata"]["name"] for p in by_instance(state).get(pending, ())
                 if p["spec"].get("nodeName")]
        return f"bound: {names}" if names else None

    recorder.assert_never(waiting_pod_bound, "the waiting Instance stays wholly unbound")
    row = rows(await get_replica(kube, namespace, "chat"))[pending]
    show("the waiting Instance's row after its deadline", row)
    assert row["phase"] != "Failed", row
    assert row["operation"]["waiting"] == "PodGroupUnschedulable", row
    assert row["operation"].get("deadline") is None, row  # parked
    show("pods and their nodes while one waits", placement(await list_pods(kube, namespace)))
    await show_kubectl(kubeconfig_path, namespace, gang_nodes.pod_groups.api_version)

    await gang_nodes.add(1)

    async def both_ready() -> dict[str, str | None] | None:
        got = rows(await get_replica(kube, namespace, "chat"))
        pods = await list_pods(kube, namespace)
        ready = [r for r in got.values() if r.get("phase") == "Ready"]
        if len(ready) == 2 and len(pods) == 2 * PODS_PER_INSTANCE:
            return placement(pods)
        return None

    nodes = await eventually(both_ready, timeout=90, what="both Instances Ready")
    show("pods and their nodes after a node was added", nodes)
    assert all(nodes.values())
    await show_kubectl(kubeconfig_path, namespace, gang_nodes.pod_groups.api_version)


async def test_a_native_gang_with_a_topology_key_lands_in_one_domain(
    gang_nodes: GangNodes, kube: KubeClient, namespace: str,
    start_manager: Callable[..., Awaitable[ManagerHandle]],
) -> None:
    await gang_nodes.add(4, domains=["d0", "d1", "d0", "d1"])
    await start_manager(lifecycle=LIFECYCLE)
    await kube.create(INFERENCE_REPLICAS,
                      gang_replica("chat", namespace, topology_key=DOMAIN), namespace)

    async def both_ready() -> dict[str, JSON] | None:
        got = rows(await get_replica(kube, namespace, "chat"))
        pods = await list_pods(kube, namespace)
        if (len([r for r in got.values() if r.get("phase") == "Ready"]) == 2
                and len(pods) == 2 * PODS_PER_INSTANCE):
            return pods
        return None

    pods = await eventually(both_ready, timeout=90, what="both Instances Ready")
    domain = {n["metadata"]["name"]: n["metadata"]["labels"][DOMAIN]
              for n in (await kube.list(NODES)).get("items") or ()
              if n["metadata"]["name"] in gang_nodes.names}
    show("pods, nodes and domains", {n: (node, domain[str(node)])
                                     for n, node in placement(pods).items()})
    for index, members in by_instance(pods).items():
        domains = {domain[p["spec"]["nodeName"]] for p in members}
        assert len(domains) == 1, (index, domains)
        assert "podAffinity" not in (members[0]["spec"].get("affinity") or {})
    groups = await pod_groups(kube, gang_nodes, namespace)
    for group in groups.values():
        assert group["spec"]["schedulingConstraints"] == {"topology": [{"key": DOMAIN}]}

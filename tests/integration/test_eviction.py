"""Evictions respect the engine's PodDisruptionBudget, counted in Instances (issue 5).

What a user needs: `kubectl drain` and the Eviction API never disrupt more Instances of a
component than its budget allows (the chart's ``podDisruptionBudget.omeNative`` is
``maxUnavailable: 1`` Instance). An Instance of a leader and a worker is disrupted as soon
as one of its pods goes: omenative then restarts it whole. So the budget must hold whatever
pods the evictions pick, one pod of each of two Instances included.

The seed-like ``chat`` InferenceService runs with the IR manager and the InferenceService
controller in-process, on the real API server; kube-controller-manager's disruption
controller keeps the PDB's status, and the API server enforces it on each eviction. Every
pod change is recorded with a watch, and the namespace is replayed afterwards: at no state
may more engine Instances be disrupted (fewer than all their pods Ready) than the budget.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import (
    INFERENCE_REPLICAS,
    NODES,
    PODS,
    Resource,
)
from omenative_controller.service_controller import (
    INFERENCE_SERVICES,
    SERVING_RUNTIMES,
    ServiceController,
)
from omenative_devcluster import build

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    PodRecorder,
    conditions,
    eventually,
    list_pods,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
KUBECTL = build.bin_dir() / "kubectl"  # the release under test (OMENATIVE_K8S_VERSION)

ENGINE = "chat-engine"
ENGINE_INSTANCES = (0, 1)
PODS_PER_INSTANCE = 2  # a leader and one worker
#: Instances the default budget lets go at once (chart ``podDisruptionBudget.omeNative``)
BUDGET = 1
#: the label that pins the engine to the test's node(s) in the drain test
POOL_LABEL = "omenative.io/eviction-test"



def runtime_body(namespace: str, engine_node_selector: dict[str, str] | None = None) -> JSON:
    """A ServingRuntime: an engine of leader + 1 worker, and a single-pod router.

    The engine's pods carry ``POOL_LABEL: <namespace>``, so a drain can select this test's
    pods only (pods of earlier tests' namespaces may still be terminating on the node).
    """
    engine: JSON = {
        "labels": {POOL_LABEL: namespace},
        "terminationGracePeriodSeconds": 1,
        "runner": {"name": "ome-container", "image": "example.com/llm:1",
                   "ports": [{"name": "http", "containerPort": 30000}]},
        "leader": {"runner": {"name": "ome-container", "command": ["serve", "--leader"]}},
        "worker": {"size": 1, "runner": {"name": "ome-container",
                                         "command": ["serve", "--worker"]}},
    }
    if engine_node_selector:
        engine["nodeSelector"] = dict(engine_node_selector)
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "ServingRuntime",
        "metadata": {"name": "srt-chat", "namespace": namespace},
        "spec": {
            "engineConfig": engine,
            "routerConfig": {
                "terminationGracePeriodSeconds": 1,
                "runner": {"name": "ome-container", "image": "example.com/router:1"},
            },
        },
    }


def chat_body(namespace: str) -> JSON:
    """The seed example ``chat`` (docs/serve-a-model.md): no PDB setting, so the default."""
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": namespace},
        "spec": {
            "deploymentMode": "OMENative",
            "model": {"name": "llama-3-3-70b-instruct"},
            "runtime": {"name": "srt-chat", "kind": "ServingRuntime"},
            "engine": {"minReplicas": 2, "maxReplicas": 2, "leader": {}, "worker": {}},
            "router": {"minReplicas": 1, "maxReplicas": 1},
        },
    }


# ---------------------------------------------------------------------------- helpers


def _healthy(pod: JSON) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and conditions(pod).get("Ready") == "True"


def _engine_pods(pods: dict[str, JSON]) -> dict[str, JSON]:
    return {n: p for n, p in pods.items()
            if p["metadata"].get("labels", {}).get("ome.io/inferencereplica") == ENGINE}


def disrupted_instances(pods: dict[str, JSON]) -> list[int]:
    """Engine Instances without all their pods Ready (and not terminating)."""
    healthy: dict[int, int] = {}
    for pod in _engine_pods(pods).values():
        idx = pod["metadata"]["labels"].get("ome.io/instance-index")
        if idx is not None and _healthy(pod):
            healthy[int(idx)] = healthy.get(int(idx), 0) + 1
    return [i for i in ENGINE_INSTANCES if healthy.get(i, 0) < PODS_PER_INSTANCE]


def _describe(pods: dict[str, JSON]) -> str:
    rows = []
    for name, pod in sorted(_engine_pods(pods).items()):
        state = ("terminating" if pod["metadata"].get("deletionTimestamp")
                 else f"Ready={conditions(pod).get('Ready')}")
        rows.append(f"{name}({pod['metadata']['uid'][:8]}) {state}")
    return ", ".join(rows)


def worst_moment(recorder: PodRecorder) -> tuple[int, str]:
    """The most engine Instances disrupted at once over the recording, and that state."""
    worst, seen = 0, "no state recorded"
    for _, _, state in recorder.replay():
        down = disrupted_instances(state)
        if len(down) > worst or seen == "no state recorded":
            worst, seen = max(worst, len(down)), f"disrupted {down}: {_describe(state)}"
    return worst, seen


async def evict(kube: KubeClient, namespace: str, name: str, uid: str) -> ApiError | None:
    """POST pods/{name}/eviction as `kubectl drain` does (for this pod UID only).

    None when the API server granted it; the refusal otherwise (429: the budget).
    """
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": {"preconditions": {"uid": uid}},
    }
    try:
        await kube.request("POST", PODS.path(namespace, name, "eviction"), verb="create",
                           resource="pods/eviction", body=body,
                           content_type="application/json")
    except ApiError as exc:
        return exc
    return None


async def chat_ready(kube: KubeClient, namespace: str) -> dict[str, JSON]:
    """Wait until chat is Ready with both engine Instances whole; return the engine pods."""

    async def ready() -> dict[str, JSON] | None:
        isvc = await kube.get(INFERENCE_SERVICES, "chat", namespace)
        conds = conditions(isvc)
        pods = await list_pods(kube, namespace)
        engine = {n: p for n, p in _engine_pods(pods).items()
                  if not p["metadata"].get("deletionTimestamp")}
        ir = await kube.get(INFERENCE_REPLICAS, ENGINE, namespace)
        ok = (conds.get("EngineReady") == "True" and conds.get("RouterReady") == "True"
              and len(engine) == len(ENGINE_INSTANCES) * PODS_PER_INSTANCE
              and not disrupted_instances(pods)
              and (ir.get("status") or {}).get("readyReplicas") == len(ENGINE_INSTANCES))
        return engine if ok else None

    return await eventually(ready, timeout=180, interval=0.3, what="chat Ready, engine whole")


async def pdb_settled(kube: KubeClient, namespace: str) -> JSON:
    """The engine's PDB once the disruption controller counts every engine pod healthy."""
    total = len(ENGINE_INSTANCES) * PODS_PER_INSTANCE

    async def settled() -> JSON | None:
        pdb = await kube.get(PDBS, ENGINE, namespace)
        st = pdb.get("status") or {}
        ok = (st.get("observedGeneration") == pdb["metadata"].get("generation")
              and st.get("expectedPods") == total and st.get("currentHealthy") == total)
        return pdb if ok else None

    return await eventually(settled, timeout=120, interval=0.3,
                            what="the engine PDB's status to count every engine pod healthy")


def _budget_text(pdb: JSON) -> str:
    spec = {k: v for k, v in pdb["spec"].items() if k != "selector"}
    st = pdb.get("status") or {}
    return (f"PDB {ENGINE} spec {spec}, selector {pdb['spec'].get('selector')}, "
            f"disruptionsAllowed {st.get('disruptionsAllowed')} of "
            f"{st.get('expectedPods')} pods")


# ---------------------------------------------------------------------------- tests


async def test_the_eviction_api_refuses_evictions_beyond_the_instance_budget(
    kube: KubeClient, namespace: str, start_manager: Any, service_controller: ServiceController
) -> None:
    """The budget must not depend on how fast the manager reacts.

    Between an eviction and the manager's answer (the serving gate of the Instance's other
    pods goes False, so the disruption controller stops counting them healthy) the PDB
    alone protects the Instances. The manager is down here for that window, as when its
    own pod is on the node being drained, or it is failing over.
    """
    manager = await start_manager()
    await kube.create(SERVING_RUNTIMES, runtime_body(namespace), namespace)
    await kube.create(INFERENCE_SERVICES, chat_body(namespace), namespace)
    engine = await chat_ready(kube, namespace)
    pdb = await pdb_settled(kube, namespace)
    budget = _budget_text(pdb)
    assert pdb["spec"]["selector"] == {"matchLabels": {  # OME's: the component's pods
        "ome.io/inferenceservice": "chat", "component": "engine",
        "ome.io/managed-by": "OMENative"}}

    recorder = await PodRecorder(kube, namespace).start()
    try:
        await manager.stop()
        # One pod of each Instance, one after the other: what `kubectl drain` does to a
        # node that holds pods of two Instances, or two drains of two nodes.
        victims = {f"{ENGINE}-{i}-leader-0": engine[f"{ENGINE}-{i}-leader-0"]["metadata"]["uid"]
                   for i in ENGINE_INSTANCES}
        first = {n: await evict(kube, namespace, n, u) for n, u in victims.items()}
        granted = [n for n, err in first.items() if err is None]
        refused = {n: err for n, err in first.items() if err is not None}
        await start_manager(write_config=False)

        # Then carry on like `kubectl drain`: retry each refused eviction until the API
        # server grants it or the pod is gone (its Instance restarted meanwhile).
        async def drained() -> bool:
            for name, uid in victims.items():
                if name in granted:
                    continue
                err = await evict(kube, namespace, name, uid)
                if err is None or err.status in (404, 409):
                    granted.append(name)
                elif err.status != 429:
                    raise AssertionError(f"eviction of {name}: {err}")
            return len(granted) == len(victims)

        await eventually(drained, timeout=300, interval=1.0,
                         what="every eviction to be granted in turn")
        await chat_ready(kube, namespace)
        await pdb_settled(kube, namespace)
        await recorder.caught_up()  # the checks below read its history to now
    finally:
        await recorder.stop()

    worst, when = worst_moment(recorder)
    granted_first = sorted(n for n, err in first.items() if err is None)
    assert 1 <= len(granted_first) <= BUDGET, (
        f"one pod of each of {len(victims)} Instances evicted in turn: the API server granted "
        f"{granted_first} (budget {BUDGET} Instance); refused {refused}. {budget}. "
        f"At worst {worst} engine Instances were disrupted at once ({when})")
    for name, err in refused.items():
        assert err.status == 429, f"eviction of {name} refused with {err}, not 429"
        assert "disruption budget" in err.message, err.message
    assert worst <= BUDGET, (
        f"{worst} engine Instances were disrupted at once (budget {BUDGET}): {when}. {budget}")


async def test_kubectl_drain_takes_at_most_the_budget_of_instances_at_a_time(
    kube: KubeClient, kubeconfig_path: Path, namespace: str, start_manager: Any,
    service_controller: ServiceController,
) -> None:
    assert KUBECTL.is_file(), f"kubectl is missing at {KUBECTL}"
    nodes = sorted(n["metadata"]["name"] for n in (await kube.list(NODES)).get("items") or ()
                   if not (n.get("spec") or {}).get("unschedulable"))
    assert len(nodes) >= 2, f"the drain test needs two schedulable nodes, got {nodes}"
    target, spare = nodes[0], nodes[1]
    labelled: list[str] = []
    try:
        # Every engine pod on `target` (both Instances on one node), then room on `spare`.
        await kube.patch(NODES, target, {"metadata": {"labels": {POOL_LABEL: namespace}}})
        labelled.append(target)
        await start_manager()
        await kube.create(SERVING_RUNTIMES, runtime_body(namespace, {POOL_LABEL: namespace}),
                          namespace)
        await kube.create(INFERENCE_SERVICES, chat_body(namespace), namespace)
        engine = await chat_ready(kube, namespace)
        assert {p["spec"].get("nodeName") for p in engine.values()} == {target}
        pdb = await pdb_settled(kube, namespace)
        budget = _budget_text(pdb)
        await kube.patch(NODES, spare, {"metadata": {"labels": {POOL_LABEL: namespace}}})
        labelled.append(spare)

        # kubectl drain evicts every selected pod at once and retries each refusal every
        # 5 s, by name: a retry can hit the restarted Instance's new pod of the same name
        # on `spare`. The budget must hold through that too.
        recorder = await PodRecorder(kube, namespace).start()
        try:
            proc = await asyncio.create_subprocess_exec(
                str(KUBECTL), "--kubeconfig", str(kubeconfig_path), "drain", target,
                "--pod-selector", f"ome.io/inferencereplica={ENGINE},{POOL_LABEL}={namespace}",
                "--disable-eviction=false", "--ignore-daemonsets", "--delete-emptydir-data",
                "--timeout=420s",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            )
            out, _ = await asyncio.wait_for(proc.communicate(), 480)
            output = out.decode(errors="replace")
            assert proc.returncode == 0, f"kubectl drain failed ({proc.returncode}):\n{output}"
            after = await chat_ready(kube, namespace)
            await pdb_settled(kube, namespace)
            await recorder.caught_up()  # the checks below read its history to now
        finally:
            await recorder.stop()

        worst, when = worst_moment(recorder)
        assert worst <= BUDGET, (
            f"kubectl drain disrupted {worst} engine Instances at once (budget {BUDGET}): "
            f"{when}. {budget}\n{output}")
        # four pods, a budget of one Instance: the drain had to wait for the budget
        assert "disruption budget" in output, output
        assert {p["spec"].get("nodeName") for p in after.values()} == {spare}
    finally:
        with contextlib.suppress(ApiError):
            await kube.patch(NODES, target, {"spec": {"unschedulable": None}})
        for node in labelled:
            with contextlib.suppress(ApiError):
                await kube.patch(NODES, node, {"metadata": {"labels": {POOL_LABEL: None}}})

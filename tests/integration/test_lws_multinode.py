"""A MultiNode engine really runs as a LeaderWorkerSet on the real LWS controller (v0.7.0).

The InferenceService controller renders the engine of ``chat`` (pinned ``MultiNode``, a
leader and one worker of 4 GPUs each, 2 replicas) as the LeaderWorkerSet
``lws-chat-engine`` and its Service. LWS makes the groups' pods through StatefulSets; the
kubelet stand-in runs them on its 4 x 8-GPU nodes. Asserted as a user sees it: the LWS's
pods are Ready and carry LWS's ``LWS_*`` variables, the LWS reports its groups ready, the
engine's Service selects the two leaders, and the controller's later passes leave the LWS
alone (its ``generation`` does not move: no rollout churn from re-applying the same spec).
"""

from __future__ import annotations

from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import SERVICES
from omenative_controller.service_controller import (
    INFERENCE_SERVICES,
    SERVING_RUNTIMES,
    ServiceController,
)
from omenative_devcluster.lws import LwsProcess

pytest.register_assert_rewrite("manager_fixtures", "lws_fixtures")
from lws_fixtures import LEADER_WORKER_SETS, lws_pods, pod_env, pod_ready  # noqa: E402
from manager_fixtures import eventually  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.component("lws"),
              pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures", "lws_fixtures"]

GPU = "nvidia.com/gpu"
LWS_NAME = "lws-chat-engine"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"


def runtime_body(namespace: str) -> JSON:
    """A ServingRuntime: an engine of a leader and one worker, 4 GPUs a pod."""
    runner = {"name": "ome-container", "image": "example.com/llm:1",
              "ports": [{"name": "http", "containerPort": 30000}],
              "resources": {"limits": {GPU: "4"}}}
    return {
        "apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime",
        "metadata": {"name": "srt-chat", "namespace": namespace},
        "spec": {"engineConfig": {
            "terminationGracePeriodSeconds": 1, "runner": runner,
            "leader": {"runner": {"name": "ome-container", "command": ["serve", "--leader"]}},
            "worker": {"size": 1, "runner": {"name": "ome-container",
                                             "command": ["serve", "--worker"]}}}},
    }


def chat_body(namespace: str) -> JSON:
    """``chat`` with its engine pinned to MultiNode, 2 replicas."""
    return {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": namespace},
        "spec": {
            "model": {"name": "llama-3-3-70b-instruct"},
            "runtime": {"name": "srt-chat", "kind": "ServingRuntime"},
            "engine": {"annotations": {"ome.io/deploymentMode": "MultiNode"},
                       "minReplicas": 2, "maxReplicas": 2, "leader": {}, "worker": {}},
        },
    }


async def test_a_multinode_engine_runs_as_a_real_leader_worker_set(
    lws_controller: LwsProcess, lws_namespace: str, kube: KubeClient,
    lws_service_controller: ServiceController,
) -> None:
    ns = lws_namespace
    await kube.create(SERVING_RUNTIMES, runtime_body(ns), ns)
    await kube.create(INFERENCE_SERVICES, chat_body(ns), ns)

    async def pods_ready() -> dict[str, JSON] | None:
        pods = await lws_pods(kube, ns, LWS_NAME)
        return pods if len(pods) == 4 and all(pod_ready(p) for p in pods.values()) else None

    pods = await eventually(pods_ready, timeout=120, what="the LWS's 4 pods Ready")
    leaders = sorted(n for n, p in pods.items() if p["metadata"]["labels"][WORKER_INDEX] == "0")
    assert leaders == [f"{LWS_NAME}-0", f"{LWS_NAME}-1"], sorted(pods)
    for name, pod in pods.items():
        env = pod_env(pod)
        assert env["LWS_GROUP_SIZE"] == "2", (name, env)
        assert env["LWS_WORKER_INDEX"] == pod["metadata"]["labels"][WORKER_INDEX], (name, env)
        assert env["LWS_LEADER_ADDRESS"].startswith(f"{LWS_NAME}-"), (name, env)
        limits = pod["spec"]["containers"][0]["resources"]["limits"]
        assert limits[GPU] == "4", (name, limits)
        assert pod["metadata"]["labels"]["ome.io/inferenceservice"] == "chat", name

    async def lws_ready() -> JSON | None:
        lws = await kube.get(LEADER_WORKER_SETS, LWS_NAME, ns)
        return lws if (lws.get("status") or {}).get("readyReplicas") == 2 else None

    lws = await eventually(lws_ready, timeout=60, what="the LWS reporting 2 ready groups")
    owners = [o["kind"] for o in lws["metadata"].get("ownerReferences") or ()]
    assert owners == ["InferenceService"], owners
    # applied just after the LeaderWorkerSet in the same pass (again on a retry if that
    # apply failed): waited for, not read once
    service = await eventually(lambda: kube.get(SERVICES, "chat-engine", ns), timeout=30,
                               what="the engine's Service")
    assert service["spec"]["selector"] == {"leaderworkerset.sigs.k8s.io/name": LWS_NAME,
                                           WORKER_INDEX: "0"}, service["spec"]

    # later passes (an ISVC change, a resync) re-apply the same LWS: nothing moves
    generation = lws["metadata"]["generation"]
    for n in range(3):
        await kube.patch(INFERENCE_SERVICES, "chat", {"metadata": {"labels": {"pass": str(n)}}},
                         ns)
        await _passed(lws_service_controller, kube, ns, str(n))
    lws = await kube.get(LEADER_WORKER_SETS, LWS_NAME, ns)
    assert lws["metadata"]["generation"] == generation, (generation, lws["metadata"])
    assert sorted(await lws_pods(kube, ns, LWS_NAME)) == sorted(pods)


async def _passed(controller: ServiceController, kube: KubeClient, ns: str, mark: str) -> None:
    """Wait until the controller has seen the ISVC labelled ``pass=mark`` and finished with it."""
    async def seen() -> bool:
        raw: Any = controller.isvcs.get(f"{ns}/chat")
        labels = ((raw or {}).get("metadata") or {}).get("labels") or {}
        q = controller.queue
        return labels.get("pass") == mark and len(q) == 0 and q.in_flight == 0

    await eventually(seen, timeout=30, interval=0.1, what=f"a pass over chat (pass={mark})")

"""The real LeaderWorkerSet controller (v0.7.0) runs on the local control plane.

``omenative_devcluster.lws`` starts LWS out of cluster, its webhooks on loopback. A plain
LeaderWorkerSet of two groups of three (a leader and two workers) gets its pods, made by
LWS's StatefulSets in kube-controller-manager and labelled by LWS's pod webhook, Ready
through the kubelet stand-in; the LWS then reports both groups ready. Deleting the LWS
removes its pods.
"""

from __future__ import annotations

from collections import Counter

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_devcluster.lws import LwsProcess

pytest.register_assert_rewrite("manager_fixtures", "lws_fixtures")
from lws_fixtures import (  # noqa: E402
    LEADER_WORKER_SETS,
    leader_worker_set,
    lws_pods,
    pod_env,
    pod_ready,
)
from manager_fixtures import eventually  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.component("lws"),
              pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures", "lws_fixtures"]

WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"


async def test_a_leader_worker_set_gets_its_groups_pods_ready(
    lws_controller: LwsProcess, lws_namespace: str, kube: KubeClient,
) -> None:
    ns = lws_namespace
    await kube.create(LEADER_WORKER_SETS, leader_worker_set("grp", replicas=2, size=3), ns)

    async def all_ready() -> dict[str, JSON] | None:
        pods = await lws_pods(kube, ns, "grp")
        return pods if len(pods) == 6 and all(pod_ready(p) for p in pods.values()) else None

    pods = await eventually(all_ready, timeout=90, what="6 LWS pods Ready")
    labels = [p["metadata"]["labels"] for p in pods.values()]
    # the pod webhook's labels: per group a leader (worker-index 0) and two workers
    assert Counter(lab[GROUP_INDEX] for lab in labels) == {"0": 3, "1": 3}, labels
    assert sorted(lab[WORKER_INDEX] for lab in labels) == ["0", "0", "1", "1", "2", "2"]
    assert {"grp-0", "grp-1"} <= set(pods), sorted(pods)  # the leaders
    for pod in pods.values():
        env = pod_env(pod)
        assert env["LWS_GROUP_SIZE"] == "3", env
        assert env["LWS_WORKER_INDEX"] == pod["metadata"]["labels"][WORKER_INDEX], env
        group = pod["metadata"]["labels"][GROUP_INDEX]
        assert env["LWS_LEADER_ADDRESS"].startswith(f"grp-{group}.grp."), env

    async def lws_ready() -> JSON | None:
        lws = await kube.get(LEADER_WORKER_SETS, "grp", ns)
        status = lws.get("status") or {}
        return lws if status.get("readyReplicas") == 2 else None

    lws = await eventually(lws_ready, timeout=60, what="the LWS reporting 2 ready groups")
    available = [c for c in lws["status"].get("conditions") or ()
                 if c.get("type") == "Available"]
    assert available and available[0]["status"] == "True", lws["status"]

    await kube.delete(LEADER_WORKER_SETS, "grp", ns)

    async def gone() -> bool:
        try:
            await kube.get(LEADER_WORKER_SETS, "grp", ns)
        except ApiError as exc:
            return exc.not_found and not await lws_pods(kube, ns, "grp")
        return False

    await eventually(gone, timeout=60, what="the LWS and its pods gone")

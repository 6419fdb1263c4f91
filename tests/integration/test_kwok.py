"""KWOK, the devcluster's scale backend, on the real API server (``make test-kwok``).

kwok v0.8.0 runs against the session's cluster with two simulated nodes of its own (a
prefix per test, the stand-in's labels and GPUs); the InferenceReplica's pods select them
by the ``type: kwok`` label. The manager must bring Instances up on them exactly as on
the stand-in: pods Ready once their serving gate is True, the Instance Ready, and a
scale-down drains an Instance's pods, each through the terminal phase ``Succeeded``, until
they are gone.
Not in ``make test``: kwok's cold build adds minutes to CI (docs/benchmarks.md).
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS
from omenative_devcluster import build, components
from omenative_devcluster.kwok import KwokOptions, create_nodes, prepare

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402
    ManagerHandle,
    eventually,
    gate,
    get_replica,
    list_pods,
    patch_replica,
    replica_body,
)
from pod_recorder import PodRecorder  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.kwok, pytest.mark.component("kwok"),
              pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]


@pytest.fixture
async def kwok_nodes(kubeconfig_path: Path, namespace: str, tmp_path: Path
                     ) -> AsyncIterator[KwokOptions]:
    """kwok with two nodes named for this test; nodes deleted and kwok stopped afterwards."""
    components.wait_for("kwok")
    opts = KwokOptions(nodes=2, prefix=f"kwok-{namespace}-")
    kubectl_bin = build.bin_dir() / "kubectl"

    def kubectl(*args: str) -> str:
        return subprocess.run([str(kubectl_bin), f"--kubeconfig={kubeconfig_path}", *args],
                              capture_output=True, text=True, check=True, timeout=60).stdout

    args = prepare(tmp_path, opts, kubeconfig_path, build_if_missing=False)
    with (tmp_path / "kwok.log").open("wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        create_nodes(kubectl, opts, tmp_path, timeout=60)
        yield opts
    finally:
        subprocess.run([str(kubectl_bin), f"--kubeconfig={kubeconfig_path}", "delete",
                        "nodes", "--wait=false", *[f"{opts.prefix}{i}" for i in range(opts.nodes)]],
                       capture_output=True, check=False, timeout=60)
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def on_kwok(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with every runner's pods selecting KWOK's nodes."""
    for runner in body["spec"]["runners"]:
        runner["template"]["spec"]["nodeSelector"] = {"type": "kwok"}
    return body


async def test_instances_come_up_on_kwok_nodes_and_a_scale_down_passes_a_terminal_phase(
    kube: KubeClient, namespace: str, kwok_nodes: KwokOptions,
    start_manager: Callable[..., Awaitable[ManagerHandle]],
) -> None:
    await start_manager()
    await kube.create(INFERENCE_REPLICAS, on_kwok(replica_body("chat", replicas=2,
                                                               worker_size=3)), namespace)

    async def ready() -> bool:
        ir = await get_replica(kube, namespace, "chat")
        return (ir.get("status") or {}).get("readyReplicas") == 2

    await eventually(ready, timeout=60, what="both Instances Ready on KWOK nodes")
    pods = await list_pods(kube, namespace)
    assert len(pods) == 8
    for name, pod in pods.items():
        assert pod["spec"]["nodeName"].startswith(kwok_nodes.prefix), name
        assert pod["status"]["phase"] == "Running", name
        assert gate(pod) == "True", name
        ready_cond = [c for c in pod["status"]["conditions"] if c["type"] == "Ready"]
        assert ready_cond and ready_cond[0]["status"] == "True", name

    recorder = await PodRecorder(kube, namespace).start()
    await patch_replica(kube, namespace, "chat", {"spec": {"replicas": 1}}, subresource="scale")

    async def scaled() -> bool:
        status = (await get_replica(kube, namespace, "chat")).get("status") or {}
        left = sorted(await list_pods(kube, namespace))
        return (left == sorted(n for n in pods if n.startswith("chat-engine-0-"))
                and status.get("replicas") == 1 and status.get("readyReplicas") == 1)

    await eventually(scaled, timeout=60, what="Instance 1 drained and gone, Instance 0 Ready")
    await recorder.caught_up()  # the checks below read its history to now
    await recorder.stop()
    terminal = {obj["metadata"]["name"] for _, obj, _ in recorder.replay()
                if obj["metadata"].get("deletionTimestamp")
                and (obj.get("status") or {}).get("phase") == "Succeeded"}
    assert terminal == {n for n in pods if n.startswith("chat-engine-1-")}

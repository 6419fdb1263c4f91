"""``omenative-manager`` as a user runs it: a clear startup error, probes, graceful SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS, LEASES

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402
    REPO,
    TEST_LIFECYCLE,
    PodRecorder,
    eventually,
    get_replica,
    list_pods,
    patch_replica,
    put_lifecycle,
    replica_body,
    warning_events,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]


async def spawn(kubeconfig: Path, namespace: str, *extra: str) -> asyncio.subprocess.Process:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep +
           os.environ.get("PYTHONPATH", "")}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "omenative_controller.cli.manager",
        "--kubeconfig", str(kubeconfig), "--namespace", namespace,
        "--config-namespace", namespace, "--bind-address", "127.0.0.1",
        "--metrics-port", "0", "--probe-port", "0",
        "--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms",
        *extra,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )


async def test_invalid_lifecycle_config_is_a_clear_startup_error(
    kubeconfig_path: Path, namespace: str, kube: KubeClient, ir_crd: str
) -> None:
    await put_lifecycle(kube, namespace, '{"instanceReadyTimeout": 30}')
    proc = await spawn(kubeconfig_path, namespace)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2
    text = err.decode()
    assert "Failed to initialize lifecycle configuration" in text
    assert f"{namespace}/inferenceservice-config" in text
    assert "instanceReadyTimeout" in text
    events = await warning_events(kube, namespace, "inferenceservice-config")
    assert [e["reason"] for e in events] == ["InvalidLifecycleConfig"]
    assert "lifecycle.instanceReadyTimeout: invalid duration 30" in events[0]["message"]
    assert events[0]["involvedObject"]["kind"] == "ConfigMap"


async def test_a_missing_lease_namespace_is_a_clear_startup_error_naming_the_install_step(
    kubeconfig_path: Path, namespace: str, kube: KubeClient, ir_crd: str
) -> None:
    await put_lifecycle(kube, namespace, TEST_LIFECYCLE)
    missing = f"{namespace}-not-installed"
    proc = await spawn(kubeconfig_path, namespace, "--lease-namespace", missing)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2
    text = err.decode()
    assert f"Lease namespace '{missing}' does not exist" in text
    assert "kubectl apply -k config/" in text and "omenative install" in text
    assert text.count("leader.create_failed") == 0, "no retry loop before giving up"


async def test_cli_serves_probes_and_stops_gracefully_on_sigterm(
    kubeconfig_path: Path, namespace: str, kube: KubeClient, ir_crd: str
) -> None:
    proc = await spawn(kubeconfig_path, namespace, "--identity", "cli-test")
    assert proc.stdout is not None
    ports: dict[str, Any] = {}
    try:
        while "metrics_port" not in ports:
            line = await asyncio.wait_for(proc.stdout.readline(), 30)
            assert line, "the manager exited before listening"
            record = json.loads(line)
            if record.get("event") == "manager.listening":
                ports = record
        drain = asyncio.create_task(proc.stdout.read())  # keep the pipe from filling up
        base = f"http://127.0.0.1:{ports['probe_port']}"
        async with aiohttp.ClientSession() as http:

            async def get(url: str) -> tuple[int, str]:
                async with http.get(url) as resp:
                    return resp.status, await resp.text()

            assert (await get(f"{base}/healthz"))[0] == 200
            await eventually(lambda: _ok(get(f"{base}/readyz")), timeout=30,
                             what="/readyz 200")

            async def leader_metric() -> bool:
                _, text = await get(f"http://127.0.0.1:{ports['metrics_port']}/metrics")
                return "omenative_leader 1.0" in text

            await eventually(leader_metric, timeout=30, what="omenative_leader 1")
            _, metrics = await get(f"http://127.0.0.1:{ports['metrics_port']}/metrics")
            for name in ("omenative_api_requests_total", "omenative_queue_depth",
                         "omenative_reconcile_duration_seconds", "omenative_caches_synced"):
                assert name in metrics, name
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 20)
        await drain
        assert proc.returncode == 0
        lease = await kube.get(LEASES, "omenative-manager", namespace)
        assert not lease["spec"].get("holderIdentity"), "the Lease was not released"
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def _ok(request: Any) -> bool:
    status, _ = await request
    return bool(status == 200)


async def test_sigkill_in_the_middle_of_an_update_and_a_restart_finishes_it(
    kubeconfig_path: Path, namespace: str, kube: KubeClient, ir_crd: str
) -> None:
    """The real process is SIGKILLed mid-rollout; a new one finishes with no lost Instance."""


    await put_lifecycle(kube, namespace, TEST_LIFECYCLE)
    first = await spawn(kubeconfig_path, namespace, "--identity", "kill-1")
    second: asyncio.subprocess.Process | None = None
    drains: list[asyncio.Task[bytes]] = []
    try:
        assert first.stdout is not None and first.stderr is not None
        drains += [asyncio.create_task(first.stdout.read()),
                   asyncio.create_task(first.stderr.read())]
        await kube.create(INFERENCE_REPLICAS, replica_body("kl", replicas=2), namespace)

        async def status_is(pred: Any) -> bool:
            st = (await get_replica(kube, namespace, "kl")).get("status") or {}
            return bool(pred(st))

        await eventually(lambda: status_is(lambda s: s.get("readyReplicas") == 2),
                         timeout=90, what="2 Instances Ready")
        old_uids = {p["metadata"]["uid"] for p in (await list_pods(kube, namespace)).values()}
        recorder = await PodRecorder(kube, namespace).start()
        runners = replica_body("kl", image="example.com/llm:2")["spec"]["runners"]
        await patch_replica(kube, namespace, "kl", {"spec": {"runners": runners}})

        async def new_pod_exists() -> bool:
            pods = await list_pods(kube, namespace)
            return any(p["metadata"]["uid"] not in old_uids for p in pods.values())

        await eventually(new_pod_exists, timeout=60, interval=0.05,
                         what="the first new-revision pod")
        first.send_signal(signal.SIGKILL)
        await asyncio.wait_for(first.wait(), 10)
        assert first.returncode == -signal.SIGKILL
        second = await spawn(kubeconfig_path, namespace, "--identity", "kill-2")
        assert second.stdout is not None and second.stderr is not None
        drains += [asyncio.create_task(second.stdout.read()),
                   asyncio.create_task(second.stderr.read())]

        async def finished() -> bool:
            pods = await list_pods(kube, namespace)
            return await status_is(
                lambda s: s.get("updatedReplicas") == 2 and s.get("readyReplicas") == 2
                and s.get("replicas") == 2
            ) and not old_uids & {p["metadata"]["uid"] for p in pods.values()} \
                and len(pods) == 4

        await eventually(finished, timeout=120, what="the restarted manager to finish")
        await recorder.caught_up()  # the checks below read its history to now
        await recorder.stop()
        # never more than desired + maxSurge (1) Instances alive, never a duplicate pod name
        for _, _, state in recorder.replay():
            live = {p["metadata"]["labels"]["ome.io/instance-index"]
                    for p in state.values() if not p["metadata"].get("deletionTimestamp")}
            assert len(live) <= 3, f"{len(live)} Instances alive at once"
    finally:
        for proc in (first, second):
            if proc is not None and proc.returncode is None:
                proc.kill()
                await proc.wait()
        for task in drains:
            task.cancel()

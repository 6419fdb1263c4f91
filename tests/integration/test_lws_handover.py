"""A MultiNode engine on the real LeaderWorkerSet controller moves to OMENative without
ever serving less than its replicas.

4 nodes x 8 GPUs (the session cluster). ``chat``'s engine is 2 replicas of a leader and one
worker, 4 GPUs each, pinned to ``MultiNode``: a real LWS (v0.7.0) runs it and the
component's Service has 2 ready leaders. The pin is switched to ``OMENative``. While the
manager (with its own InferenceService controller, as deployed) hands over, a sampler reads
the Service's EndpointSlices continuously: its ready endpoints never drop below 2. At the
end the LeaderWorkerSet and its pods are gone, both Instances are Ready with OME's
variables, and ``kubectl ome handover`` says ``Done``.

The second test fills two nodes with GPU-hungry pods first, so the Instances have no room
beside the LeaderWorkerSet: groups are traded one at a time (``NoRoomToSurge``), serving
dips to 1 and never to 0, and the hand-over still finishes.

Set ``OMENATIVE_HANDOVER_CAPTURE=DIR`` to keep what the test saw (``kubectl ome handover``
during the hand-over, the condition, the endpoint counts) for ``docs/migrating-from-lws.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from omenative_controller.cli.handover_output import format_handover, handover_rows
from omenative_controller.cli.kubectl_common import get_or_none
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import EVENTS, INFERENCE_REPLICAS, PODS, Resource
from omenative_controller.service_controller import INFERENCE_SERVICES, SERVING_RUNTIMES
from omenative_devcluster.lws import LwsProcess

pytest.register_assert_rewrite("manager_fixtures", "lws_fixtures")
from lws_fixtures import LEADER_WORKER_SETS, lws_pods, pod_env  # noqa: E402
from manager_fixtures import conditions, eventually  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.component("lws"),
              pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures", "lws_fixtures"]

ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")
MODE = "ome.io/deploymentMode"


def runtime_body(namespace: str) -> JSON:
    """A ServingRuntime: the engine is a leader + 1 worker of 4 GPUs each."""
    runner = {"name": "ome-container", "image": "example.com/llm:1",
              "ports": [{"name": "http", "containerPort": 30000}],
              "resources": {"limits": {"nvidia.com/gpu": "4"}}}
    return {
        "apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime",
        "metadata": {"name": "srt-lws", "namespace": namespace},
        "spec": {"engineConfig": {
            "terminationGracePeriodSeconds": 1,
            "runner": runner,
            "leader": {"runner": {"name": "ome-container", "command": ["serve", "--leader"]}},
            "worker": {"size": 1, "runner": {"name": "ome-container",
                                             "command": ["serve", "--worker"]}},
        }},
    }


def chat_body(namespace: str) -> JSON:
    """``chat``: a 2-replica engine pinned to MultiNode."""
    return {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": namespace},
        "spec": {
            "model": {"name": "llama"},
            "runtime": {"name": "srt-lws", "kind": "ServingRuntime"},
            "engine": {"minReplicas": 2, "maxReplicas": 2, "leader": {}, "worker": {"size": 1},
                       "annotations": {MODE: "MultiNode"}},
        },
    }


async def ready_endpoints(kube: KubeClient, namespace: str, service: str) -> list[str]:
    """The pods behind the Service's ready endpoints (EndpointSlices, deduplicated)."""
    page = await kube.list(ENDPOINT_SLICES, namespace,
                           label_selector=f"kubernetes.io/service-name={service}")
    names: set[str] = set()
    for es in page.get("items") or ():
        for ep in es.get("endpoints") or ():
            if (ep.get("conditions") or {}).get("ready") is True:
                names.add(str((ep.get("targetRef") or {}).get("name")))
    return sorted(names)


class Sampler:
    """Reads the Service's ready endpoints again and again until stopped."""

    def __init__(self, kube: KubeClient, namespace: str, service: str) -> None:
        self.kube, self.namespace, self.service = kube, namespace, service
        self.samples: list[list[str]] = []
        self.errors = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            try:
                self.samples.append(await ready_endpoints(self.kube, self.namespace,
                                                          self.service))
            except ApiError:
                self.errors += 1
            await asyncio.sleep(0.05)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="endpoint-sampler")

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    def counts(self) -> list[int]:
        """The ready count of each sample, consecutive repeats folded."""
        out: list[int] = []
        for s in self.samples:
            if not out or out[-1] != len(s):
                out.append(len(s))
        return out


def kubectl_ome(kubeconfig: Path, namespace: str, *args: str) -> str:
    """``kubectl ome ARGS`` as a user runs it (a process of its own)."""
    cmd = [sys.executable, "-m", "omenative_controller.cli.kubectl_ome",
           "--kubeconfig", str(kubeconfig), "-n", namespace, *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


class Progress:
    """``kubectl ome handover chat``'s table, rendered in-process (the CLI's own formatting,
    without a process start per read) each time it changes, and the LWSHandover
    conditions seen."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.tables: list[str] = []
        self.conditions: list[JSON] = []
        self._task: asyncio.Task[None] | None = None

    async def read(self) -> None:
        """One read: the ISVC, its LWS and its InferenceReplica."""
        ns = self.namespace
        isvc = await self.kube.get(INFERENCE_SERVICES, "chat", ns)
        sets = {"engine": await get_or_none(self.kube, LEADER_WORKER_SETS, "lws-chat-engine",
                                            ns)}
        irs = {"engine": await get_or_none(self.kube, INFERENCE_REPLICAS, "chat-engine", ns)}
        table = format_handover("chat", handover_rows(isvc, sets, irs))
        if not self.tables or self.tables[-1] != table:
            self.tables.append(table)
        comp = ((isvc.get("status") or {}).get("components") or {}).get("engine") or {}
        for cond in comp.get("conditions") or ():
            if cond.get("type") == "LWSHandover" and (
                    not self.conditions or self.conditions[-1] != cond):
                self.conditions.append(cond)

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(ApiError):
                await self.read()
            await asyncio.sleep(0.1)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="handover-progress")

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    def reasons(self) -> list[str]:
        """The condition's reasons in the order seen."""
        return [str(c.get("reason")) for c in self.conditions]


def save(name: str, **data: Any) -> None:
    """Keep what the test saw under ``$OMENATIVE_HANDOVER_CAPTURE`` (docs material)."""
    out = os.environ.get("OMENATIVE_HANDOVER_CAPTURE")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        Path(out, f"{name}.json").write_text(json.dumps(data, indent=2))


async def serve_on_lws(kube: KubeClient, ns: str) -> list[str]:
    """Create the runtime and ``chat`` (MultiNode); wait for 2 ready LWS leaders."""
    await kube.create(SERVING_RUNTIMES, runtime_body(ns), ns)
    await kube.create(INFERENCE_SERVICES, chat_body(ns), ns)

    async def lws_serving() -> list[str] | None:
        lws = await kube.get(LEADER_WORKER_SETS, "lws-chat-engine", ns)
        eps = await ready_endpoints(kube, ns, "chat-engine")
        ok = (lws.get("status") or {}).get("readyReplicas") == 2 and len(eps) == 2
        return eps if ok else None

    return await eventually(lws_serving, timeout=180, interval=0.5,
                            what="the LWS serving 2 ready leaders")


async def switch_and_wait(kube: KubeClient, ns: str) -> tuple[Sampler, Progress]:
    """Switch the engine to OMENative and sample until the LWS and its pods are gone and
    both Instances serve."""
    sampler, progress = Sampler(kube, ns, "chat-engine"), Progress(kube, ns)
    sampler.start()
    progress.start()
    try:
        await kube.patch(INFERENCE_SERVICES, "chat",
                         {"spec": {"engine": {"annotations": {MODE: "OMENative"}}}}, ns)

        async def handed_over() -> bool:
            if await get_or_none(kube, LEADER_WORKER_SETS, "lws-chat-engine", ns):
                return False
            ir = await kube.get(INFERENCE_REPLICAS, "chat-engine", ns)
            eps = await ready_endpoints(kube, ns, "chat-engine")
            return ((ir.get("status") or {}).get("readyReplicas") == 2
                    and not await lws_pods(kube, ns, "lws-chat-engine")
                    and eps == ["chat-engine-0-leader-0", "chat-engine-1-leader-0"])

        await eventually(handed_over, timeout=300, interval=0.5,
                         what="the LWS gone and 2 Instances serving")
    finally:
        await sampler.stop()
        await progress.stop()
    return sampler, progress


async def check_done(kube: KubeClient, ns: str, kubeconfig: Path) -> str:
    """OME's variables on the Instances, no LWSHandover left, ``kubectl ome`` says Done."""
    pods = {p["metadata"]["name"]: p
            for p in (await kube.list(PODS, ns)).get("items") or ()}
    leader, worker = pods["chat-engine-0-leader-0"], pods["chat-engine-0-worker-0"]
    env = pod_env(leader)
    assert env["OME_LEADER_ADDRESS"] == "chat-engine-0-leader-0.chat-engine-headless", env
    assert env["OME_INSTANCE_POD_RANK"] == "0" and pod_env(worker)["OME_INSTANCE_POD_RANK"] == "1"
    assert not any(k.startswith("LWS_") for k in env), env
    assert conditions(leader).get("Ready") == "True"

    # the pass that deletes the LeaderWorkerSet writes its status (LWSHandover: Deleting)
    # first; the pass the delete brings on removes the condition: wait for that one
    async def condition_gone() -> bool:
        isvc = await kube.get(INFERENCE_SERVICES, "chat", ns)
        comp = ((isvc.get("status") or {}).get("components") or {}).get("engine") or {}
        return not [c for c in comp.get("conditions") or () if c.get("type") == "LWSHandover"]

    await eventually(condition_gone, timeout=30, what="the LWSHandover condition removed")
    after = await asyncio.to_thread(kubectl_ome, kubeconfig, ns, "handover", "chat")
    assert after.splitlines()[1].split() == ["engine", "Done", "-", "2/2"], after
    await eventually(lambda: handover_events(kube, ns), timeout=30, interval=0.5,
                     what="the hand-over's Events on the InferenceService")
    return after


async def handover_events(kube: KubeClient, ns: str) -> list[str] | None:
    """The reasons of the hand-over's Events on ``chat`` once it is done: started once,
    at least one group scaled down or traded, deleted once (None: not all there yet)."""
    page = await kube.list(EVENTS, ns, field_selector="involvedObject.name=chat,"
                           "involvedObject.kind=InferenceService")
    reasons = sorted(str(e.get("reason")) for e in page.get("items") or ()
                     if str(e.get("reason", "")).startswith("LWSHandover"))
    if "LWSHandoverDeleted" not in reasons:
        return None
    assert reasons.count("LWSHandoverStarted") == 1, reasons
    assert reasons.count("LWSHandoverDeleted") == 1, reasons
    assert {"LWSHandoverScaledDown", "LWSHandoverTraded"} & set(reasons), reasons
    assert "LWSHandoverNotOwned" not in reasons, reasons
    return reasons


async def test_a_multinode_engine_moves_to_omenative_without_serving_less(
    lws_controller: LwsProcess, lws_namespace: str, kube: KubeClient, start_manager: Any,
    service_crds_applied: list[str], kubeconfig_path: Path,
) -> None:
    ns = lws_namespace
    await start_manager()
    before = await serve_on_lws(kube, ns)
    assert before == ["lws-chat-engine-0", "lws-chat-engine-1"], before

    sampler, progress = await switch_and_wait(kube, ns)

    counts = sampler.counts()
    assert sampler.samples, "the sampler read nothing"
    assert min(len(s) for s in sampler.samples) >= 2, counts
    assert max(counts) > 2, counts  # the Instances served beside the LWS (a surge)
    assert "Surging" in progress.reasons(), progress.conditions
    assert "NoRoomToSurge" not in progress.reasons(), progress.conditions
    after = await check_done(kube, ns, kubeconfig_path)
    save("surge", counts=counts, tables=[*progress.tables, after],
         conditions=progress.conditions, samples=len(sampler.samples))


def gpu_hog(name: str) -> JSON:
    """A plain pod that takes a whole node's 8 GPUs."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": "example.com/batch:1",
                                     "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}


async def test_with_no_room_to_surge_groups_are_traded_one_at_a_time(
    lws_controller: LwsProcess, lws_namespace: str, kube: KubeClient, start_manager: Any,
    service_crds_applied: list[str], kubeconfig_path: Path,
) -> None:
    ns = lws_namespace
    for name in ("hog-a", "hog-b"):  # two of the four nodes are full: room for the LWS only
        await kube.create(PODS, gpu_hog(name), ns)

    async def hogs_placed() -> bool:
        pods = [await kube.get(PODS, n, ns) for n in ("hog-a", "hog-b")]
        return all(p["spec"].get("nodeName") for p in pods)

    await eventually(hogs_placed, timeout=60, what="the GPU hogs on two nodes")
    await start_manager()
    await serve_on_lws(kube, ns)

    sampler, progress = await switch_and_wait(kube, ns)

    counts = sampler.counts()
    assert min(len(s) for s in sampler.samples) >= 1, counts  # one group at a time
    assert max(counts) == 2, counts  # never a surge: there was no room
    assert "NoRoomToSurge" in progress.reasons(), progress.conditions
    await check_done(kube, ns, kubeconfig_path)
    save("trade", counts=counts, tables=progress.tables, conditions=progress.conditions,
         samples=len(sampler.samples))

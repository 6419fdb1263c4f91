"""Rollout groups on a real API server: engine and decoder canaried together.

The IR manager and the ServiceController run in-process on the test's namespace; analysis
queries go to a real Prometheus (Debian's binary, fetched into the cache) scraping a tiny
metrics endpoint the test controls. Behaviour is checked as a user sees it: pods and their
revision labels, the InferenceReplicas' pacing, the ISVC's ``status.rollout`` and
``status.components.<c>.traffic``, annotations and Events.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from omenative_controller.devcluster.prometheus import PrometheusServer, fetch_prometheus
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import (
    CONTROLLER_REVISIONS,
    EVENTS,
    INFERENCE_REPLICAS,
    SERVICES,
)
from omenative_controller.service_controller import (
    INFERENCE_SERVICES,
    SERVING_RUNTIMES,
    ServiceController,
)
from omenative_core.revisions import hash_of

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402 - after the rewrite registration
    PodRecorder,
    eventually,
    list_pods,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

MEMBERS = ("engine", "decoder")


# ---------------------------------------------------------------------------- fixtures



class Metrics:
    """A ``/metrics`` endpoint serving ``error_rate`` with a value the test sets."""

    def __init__(self) -> None:
        self.error_rate = 0.0
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def _metrics(self, _request: web.Request) -> web.Response:
        text = ("# TYPE error_rate gauge\n"
                f"error_rate {self.error_rate}\n")
        return web.Response(text=text, content_type="text/plain")

    async def start(self) -> Metrics:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self.url = f"http://127.0.0.1:{port}/metrics"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def prometheus() -> AsyncIterator[tuple[PrometheusServer, Metrics]]:
    """A real Prometheus scraping a test-controlled ``error_rate`` every second."""
    binary = await asyncio.to_thread(fetch_prometheus)
    metrics = await Metrics().start()
    server = PrometheusServer(metrics.url, binary=binary)
    server.spawn()
    try:
        await server.ready(60)
        yield server, metrics
    finally:
        await asyncio.to_thread(server.stop)
        await metrics.stop()


# ---------------------------------------------------------------------------- objects


def runtime_body(namespace: str, image: str) -> JSON:
    """A ServingRuntime with single-pod engine and decoder."""
    def cfg(role: str) -> JSON:
        return {"terminationGracePeriodSeconds": 1,
                "runner": {"image": image, "command": ["serve", f"--{role}"],
                           "ports": [{"name": "http", "containerPort": 30000}]}}
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "ServingRuntime",
        "metadata": {"name": "srt-pd", "namespace": namespace},
        "spec": {"engineConfig": cfg("prefill"), "decoderConfig": cfg("decode")},
    }


def isvc_body(namespace: str, replicas: int, steps: list[JSON],
              prometheus: str | None = None) -> JSON:
    """An OMENative ISVC whose engine and decoder are one canary group."""
    canary: JSON = {"steps": steps}
    if prometheus is not None:
        canary["prometheus"] = {"serverAddress": prometheus}
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "pd", "namespace": namespace},
        "spec": {
            "deploymentMode": "OMENative",
            "model": {"name": "llama"},
            "runtime": {"name": "srt-pd", "kind": "ServingRuntime"},
            "engine": {"minReplicas": replicas, "maxReplicas": replicas},
            "decoder": {"minReplicas": replicas, "maxReplicas": replicas},
            "rollout": {"groups": [{"components": list(MEMBERS), "canary": canary}]},
        },
    }


# ---------------------------------------------------------------------------- reading


async def get_isvc(kube: KubeClient, namespace: str) -> JSON:
    """The ISVC as the API server has it."""
    return await kube.get(INFERENCE_SERVICES, "pd", namespace)


def group(isvc: JSON) -> JSON:
    """``status.rollout.groups[0]`` (empty before the first decision)."""
    groups = ((isvc.get("status") or {}).get("rollout") or {}).get("groups") or [{}]
    return dict(groups[0])


def by_revision(pods: dict[str, JSON], component: str) -> dict[str, set[int]]:
    """Live Instance indexes of ``component`` per revision hash."""
    out: dict[str, set[int]] = {}
    for pod in pods.values():
        labels = pod["metadata"].get("labels") or {}
        if pod["metadata"].get("deletionTimestamp") or labels.get("component") != component:
            continue
        out.setdefault(labels["ome.io/revision-hash"], set()).add(
            int(labels["ome.io/instance-index"]))
    return out


def ready_on(pods: dict[str, JSON], component: str, h: str) -> int:
    """Ready pods of ``component`` on revision hash ``h``."""
    n = 0
    for pod in pods.values():
        labels = pod["metadata"].get("labels") or {}
        conds = {c["type"]: c["status"] for c in (pod.get("status") or {}).get("conditions")
                 or ()}
        if (labels.get("component") == component and labels.get("ome.io/revision-hash") == h
                and not pod["metadata"].get("deletionTimestamp")
                and conds.get("Ready") == "True"):
            n += 1
    return n


def traffic(isvc: JSON, component: str) -> dict[str, int]:
    """``status.components.<c>.traffic`` as revisionName -> percent."""
    rows = (((isvc.get("status") or {}).get("components") or {}).get(component) or {}).get(
        "traffic") or []
    return {r["revisionName"]: r["percent"] for r in rows}


async def events(kube: KubeClient, namespace: str) -> dict[str, list[str]]:
    """Event reasons on the ISVC -> messages."""
    page = await kube.list(EVENTS, namespace, field_selector="involvedObject.name=pd")
    out: dict[str, list[str]] = {}
    for e in page.get("items") or ():
        out.setdefault(e["reason"], []).append(e["message"])
    return out


async def start_stable(kube: KubeClient, namespace: str, body: JSON,
                       replicas: int) -> dict[str, str]:
    """Create the runtime and ISVC; wait until every member is Ready and Stable. Returns
    each member's revision hash."""
    await kube.create(SERVING_RUNTIMES, runtime_body(namespace, "example.com/llm:1"),
                      namespace)
    await kube.create(INFERENCE_SERVICES, body, namespace)

    async def stable() -> dict[str, str] | None:
        isvc = await get_isvc(kube, namespace)
        pods = await list_pods(kube, namespace)
        if group(isvc).get("phase") != "Stable":
            return None
        hashes = {}
        for c in MEMBERS:
            revs = by_revision(pods, c)
            if len(revs) != 1:
                return None
            (h,) = revs
            if ready_on(pods, c, h) != replicas:
                return None
            hashes[c] = h
        return hashes

    return await eventually(stable, timeout=90, interval=0.3, what="engine+decoder Stable")


async def change_image(kube: KubeClient, namespace: str, image: str) -> None:
    """A runtime image change for both members: starts a run."""
    await kube.patch(SERVING_RUNTIMES, "srt-pd", {"spec": {
        "engineConfig": {"runner": {"image": image}},
        "decoderConfig": {"runner": {"image": image}}}}, namespace)


async def annotate(kube: KubeClient, namespace: str, key: str, value: str) -> None:
    """Set one annotation on the ISVC."""
    await kube.patch(INFERENCE_SERVICES, "pd", {"metadata": {"annotations": {key: value}}},
                     namespace)


async def back_on_stable(kube: KubeClient, namespace: str, old: dict[str, str],
                         replicas: int) -> JSON:
    """Wait for RolledBack with every member's Instances on ``old`` and Ready."""
    async def rolled_back() -> JSON | None:
        isvc = await get_isvc(kube, namespace)
        pods = await list_pods(kube, namespace)
        ok = group(isvc).get("phase") == "RolledBack" and all(
            set(by_revision(pods, c)) == {old[c]} and ready_on(pods, c, old[c]) == replicas
            for c in MEMBERS)
        return isvc if ok else None

    return await eventually(rolled_back, timeout=120, interval=0.3,
                            what="every member back on its stable revision")


def assert_canary_at_zero(isvc: JSON, old: dict[str, str]) -> None:
    """The rejected canary is recorded with 0% and the stable revision has it all."""
    rejected = group(isvc).get("rejected") or {}
    assert set(rejected) == set(MEMBERS)
    for c in MEMBERS:
        weights = traffic(isvc, c)
        assert weights[f"pd-{c}-rev-{old[c]}"] == 100, weights
        assert weights[f"pd-{c}-rev-{hash_of(rejected[c])}"] == 0, weights


# ---------------------------------------------------------------------------- tests


async def test_canary_holds_its_step_at_a_manual_pause_and_promote_finishes_it(
    kube: KubeClient, namespace: str, start_manager: Any,
    service_controller: ServiceController,
) -> None:
    await start_manager()
    steps = [{"capacity": "25%", "traffic": 25, "pause": {}},
             {"capacity": "100%", "traffic": 100}]
    old = await start_stable(kube, namespace, isvc_body(namespace, 4, steps), 4)
    recorder = await PodRecorder(kube, namespace).start()
    try:
        await change_image(kube, namespace, "example.com/llm:2")

        async def paused() -> JSON | None:
            isvc = await get_isvc(kube, namespace)
            g = group(isvc)
            pods = await list_pods(kube, namespace)
            canary = g.get("canary") or {}
            ok = (g.get("phase") == "Paused" and set(canary) == set(MEMBERS)
                  and all(ready_on(pods, c, hash_of(canary[c])) == 1 for c in MEMBERS))
            return isvc if ok else None

        isvc = await eventually(paused, timeout=90, interval=0.3, what="Paused at step 1")
        new = {c: hash_of(group(isvc)["canary"][c]) for c in MEMBERS}
        assert all(new[c] != old[c] for c in MEMBERS)
        await asyncio.sleep(3)  # a pause holds: nothing more moves
        isvc = await get_isvc(kube, namespace)
        assert group(isvc)["phase"] == "Paused"
        assert group(isvc)["step"] == 0
        for c in MEMBERS:
            ir = await kube.get(INFERENCE_REPLICAS, f"pd-{c}", namespace)
            assert ir["spec"]["pacing"]["partition"] == 3
            weights = traffic(isvc, c)
            assert weights == {f"pd-{c}-rev-{old[c]}": 75, f"pd-{c}-rev-{new[c]}": 25}
            assert ir["status"]["traffic"] == isvc["status"]["components"][c]["traffic"]
        # the decoder's template names the engine revision of its own run
        decoder = await kube.get(INFERENCE_REPLICAS, "pd-decoder", namespace)
        env = {e["name"]: e.get("value") for e in
               decoder["spec"]["runners"][0]["template"]["spec"]["containers"][0]["env"]}
        assert env["OME_ENGINE_REVISION_ENDPOINT"] == \
            f"pd-engine-rev-{new['engine']}.{namespace}.svc.cluster.local"
        assert env["OME_ENGINE_ENDPOINT"] == f"pd-engine.{namespace}.svc.cluster.local"
        # per-revision Services exist for both live revisions
        page = await kube.list(SERVICES, namespace)
        names = {s["metadata"]["name"] for s in page.get("items") or ()}
        for c in MEMBERS:
            for h in (old[c], new[c]):
                assert {f"pd-{c}-rev-{h}", f"pd-{c}-rev-{h}-headless"} <= names
        promote_at = len(recorder.history)

        await annotate(kube, namespace, "ome.io/rollout-promote", new["engine"][:8])

        async def finished() -> JSON | None:
            isvc = await get_isvc(kube, namespace)
            pods = await list_pods(kube, namespace)
            ok = group(isvc).get("phase") == "Stable" and all(
                set(by_revision(pods, c)) == {new[c]} and ready_on(pods, c, new[c]) == 4
                for c in MEMBERS)
            return isvc if ok else None

        isvc = await eventually(finished, timeout=120, interval=0.3, what="Stable on new")
    finally:
        await recorder.stop()

    # until the promote, the canary never held more than its step (1 of 4) of either member
    # (every change the watch delivered; the initial LIST entries only add pods one by one)
    for _kind, _obj, state in recorder.replay(from_start=True)[:promote_at]:
        for c in MEMBERS:
            on_new = by_revision(state, c).get(new[c], set())
            assert len(on_new) <= 1, (c, sorted(on_new))
    assert "ome.io/rollout-promote" not in (isvc["metadata"].get("annotations") or {})
    for c in MEMBERS:
        assert traffic(isvc, c) == {f"pd-{c}-rev-{new[c]}": 100}
        assert group(isvc)["stable"][c] == f"pd-{c}-{new[c]}"
    reasons = await events(kube, namespace)
    assert "RolloutPromoted" in reasons, sorted(reasons)

    # settled: the revision stays put (the peer env does not start another revision), the
    # old revision's Services are gone and the new ones stay
    async def old_services_gone() -> bool:
        page = await kube.list(SERVICES, namespace)
        names = {s["metadata"]["name"] for s in page.get("items") or ()}
        return all(f"pd-{c}-rev-{old[c]}" not in names and f"pd-{c}-rev-{new[c]}" in names
                   for c in MEMBERS)

    await eventually(old_services_gone, timeout=30, what="old revision Services deleted")
    await asyncio.sleep(3)
    for c in MEMBERS:
        ir = await kube.get(INFERENCE_REPLICAS, f"pd-{c}", namespace)
        assert ir["status"]["updateRevision"] == f"pd-{c}-{new[c]}"
        assert ir["status"]["currentRevision"] == f"pd-{c}-{new[c]}"
        assert ir["spec"]["pacing"]["partition"] == 0
        revs = await kube.list(CONTROLLER_REVISIONS, namespace,
                               label_selector=f"component={c}")
        assert len(revs.get("items") or ()) == 2
    assert group(await get_isvc(kube, namespace))["phase"] == "Stable"


ANALYSIS_STEPS: list[JSON] = [
    {"capacity": "50%", "traffic": 50,
     "analysis": {"interval": "2s", "initialDelay": "1s", "failureLimit": 1,
                  "metrics": [{"name": "errors", "query": "max(error_rate)",
                               "operator": "LT", "threshold": 0.05}]}},
    {"capacity": "100%", "traffic": 100},
]


async def test_a_passing_analysis_promotes_the_canary_by_itself(
    kube: KubeClient, namespace: str, start_manager: Any,
    service_controller: ServiceController, prometheus: tuple[PrometheusServer, Metrics],
) -> None:
    server, metrics = prometheus
    metrics.error_rate = 0.01  # below the 0.05 threshold
    await start_manager()
    body = isvc_body(namespace, 2, ANALYSIS_STEPS, prometheus=server.url)
    old = await start_stable(kube, namespace, body, 2)
    await change_image(kube, namespace, "example.com/llm:2")

    async def finished() -> JSON | None:
        isvc = await get_isvc(kube, namespace)
        pods = await list_pods(kube, namespace)
        g = group(isvc)
        ok = g.get("phase") == "Stable" and all(
            g.get("stable", {}).get(c, "").rsplit("-", 1)[-1] != old[c]
            and set(by_revision(pods, c)) == {hash_of(g["stable"][c])} for c in MEMBERS)
        return isvc if ok else None

    isvc = await eventually(finished, timeout=120, interval=0.3, what="Stable on the canary")
    for c in MEMBERS:
        new = hash_of(group(isvc)["stable"][c])
        assert traffic(isvc, c) == {f"pd-{c}-rev-{new}": 100}
    reasons = await events(kube, namespace)
    assert any("errors=0.01 LT 0.05" in m for m in reasons.get("CanaryAnalysisPassed", [])), \
        sorted(reasons)


async def test_a_failing_analysis_rolls_every_member_back_with_the_canary_at_zero(
    kube: KubeClient, namespace: str, start_manager: Any,
    service_controller: ServiceController, prometheus: tuple[PrometheusServer, Metrics],
) -> None:
    server, metrics = prometheus
    metrics.error_rate = 0.5  # well above the 0.05 threshold
    await start_manager()
    body = isvc_body(namespace, 2, ANALYSIS_STEPS, prometheus=server.url)
    old = await start_stable(kube, namespace, body, 2)
    await change_image(kube, namespace, "example.com/llm:2")

    isvc = await back_on_stable(kube, namespace, old, 2)
    assert group(isvc)["failure"] == "AnalysisFailed"
    assert_canary_at_zero(isvc, old)
    reasons = await events(kube, namespace)
    assert "CanaryAnalysisFailed" in reasons and "RolloutRolledBack" in reasons, sorted(reasons)
    # the value Prometheus scraped from the endpoint is the one that failed the round
    assert any("errors=0.5 not LT 0.05" in m for m in reasons["CanaryAnalysisFailed"])
    for c in MEMBERS:
        ir = await kube.get(INFERENCE_REPLICAS, f"pd-{c}", namespace)
        assert ir["spec"]["pacing"]["rollbackToRevision"] == f"pd-{c}-{old[c]}"


async def test_the_rollback_annotation_sends_every_member_back(
    kube: KubeClient, namespace: str, start_manager: Any,
    service_controller: ServiceController,
) -> None:
    await start_manager()
    steps = [{"capacity": "50%", "traffic": 50, "pause": {}},
             {"capacity": "100%", "traffic": 100}]
    old = await start_stable(kube, namespace, isvc_body(namespace, 2, steps), 2)
    await change_image(kube, namespace, "example.com/llm:2")

    async def paused() -> bool:
        return group(await get_isvc(kube, namespace)).get("phase") == "Paused"

    await eventually(paused, timeout=90, interval=0.3, what="Paused at step 1")
    await annotate(kube, namespace, "ome.io/rollout-rollback", "true")

    isvc = await back_on_stable(kube, namespace, old, 2)
    assert_canary_at_zero(isvc, old)
    # the annotation stays while the rollback holds
    assert isvc["metadata"]["annotations"]["ome.io/rollout-rollback"] == "true"
    reasons = await events(kube, namespace)
    assert "RolloutRollingBack" in reasons and "RolloutRolledBack" in reasons, sorted(reasons)

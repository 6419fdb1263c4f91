"""Rollout groups on a real API server: engine and decoder canaried together, a blue-green
sequence with a soak, and a manager restarted in the middle of a run.

The IR manager and the ServiceController run in-process on the test's namespace; analysis
queries go to a real Prometheus (Debian's binary, fetched into the cache) scraping a tiny
metrics endpoint the test controls. Behaviour is checked as a user sees it: pods and their
revision labels, the InferenceReplicas' pacing, the ISVC's ``status.rollout`` and
``status.components.<c>.traffic``, annotations and Events.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import (
    CONTROLLER_REVISIONS,
    EVENTS,
    INFERENCE_REPLICAS,
    PODS,
    SERVICES,
    Resource,
)
from omenative_controller.service_controller import (
    INFERENCE_SERVICES,
    SERVING_RUNTIMES,
)
from omenative_core.model.timefmt import parse_time
from omenative_core.revisions import hash_of
from omenative_devcluster.prometheus import PrometheusServer, fetch_prometheus
from omenative_devcluster.serving_record import listed_versions

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


class Timeline:
    """Every change to one kind of object in the namespace, with the (monotonic) time it
    arrived.

    One watch delivers its events in resourceVersion order, so replaying a timeline shows
    the objects as a user watching them saw them, change by change, and when.
    """

    def __init__(self, kube: KubeClient, namespace: str, resource: Resource) -> None:
        self.kube = kube
        self.namespace = namespace
        self.resource = resource
        self.history: list[tuple[float, str, JSON]] = []
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    async def start(self) -> Timeline:
        """Begin recording (returns once the watch is open)."""
        self._task = asyncio.create_task(self._run())
        await asyncio.wait_for(self._ready.wait(), 30)
        return self

    async def _run(self) -> None:
        page = await self.kube.list(self.resource, self.namespace)
        now = time.monotonic()
        for obj in page.get("items") or ():
            self.history.append((now, "ADDED", obj))
        rv = page["metadata"]["resourceVersion"]
        while True:
            try:
                async with self.kube.watch(self.resource, self.namespace, resource_version=rv,
                                           timeout_seconds=600, read_timeout=700) as stream:
                    self._ready.set()
                    async for ev in stream:
                        obj = ev.get("object") or {}
                        if ev.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                            self.history.append((time.monotonic(), ev["type"], obj))
                        rv = obj.get("metadata", {}).get("resourceVersion") or rv
            except (ApiError, aiohttp.ClientError, TimeoutError) as exc:
                if isinstance(exc, ApiError) and exc.gone:
                    raise
                await asyncio.sleep(0.2)

    async def stop(self) -> None:
        """Stop recording."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def caught_up(self, timeout: float = 30) -> None:
        """Until the recording holds every object as a LIST shows it now. A wait that read
        the cluster (a GET or LIST) can be ahead of the watch, so a check over the timeline
        right after it could miss the last changes it waited for."""
        async def same() -> bool:
            if self._task is not None and self._task.done():
                self._task.result()  # the recording stopped: raise why
                raise RuntimeError(f"the {self.resource.plural} timeline stopped")
            last = self.states()[-1][1] if self.history else {}
            return await listed_versions(self.kube, self.resource, self.namespace) == {
                n: o["metadata"]["resourceVersion"] for n, o in last.items()}

        await eventually(same, timeout=timeout,
                         what=f"the {self.resource.plural} timeline to catch up with a LIST")

    def states(self) -> list[tuple[float, dict[str, JSON]]]:
        """(arrival time, every object by name after that change), change by change."""
        state: dict[str, JSON] = {}
        out = []
        for t, kind, obj in self.history:
            name = obj["metadata"]["name"]
            if kind == "DELETED":
                state.pop(name, None)
            else:
                state[name] = obj
            out.append((t, dict(state)))
        return out

    def versions(self, name: str) -> list[tuple[float, JSON]]:
        """(arrival time, object) for every version of ``name`` seen."""
        return [(t, obj) for t, kind, obj in self.history
                if kind != "DELETED" and obj["metadata"]["name"] == name]



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
                "runner": {"name": "ome-container",
                           "image": image, "command": ["serve", f"--{role}"],
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


def groups(isvc: JSON) -> list[JSON]:
    """``status.rollout.groups`` (empty before the first decision)."""
    return [dict(g) for g in ((isvc.get("status") or {}).get("rollout") or {}).get("groups")
            or ()]


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


def traffic_rows(isvc: JSON, component: str) -> list[JSON]:
    """``status.components.<c>.traffic`` as written."""
    return list((((isvc.get("status") or {}).get("components") or {}).get(component)
                 or {}).get("traffic") or [])


def traffic(isvc: JSON, component: str) -> dict[str, int]:
    """``status.components.<c>.traffic`` as revisionName -> percent."""
    rows = (((isvc.get("status") or {}).get("components") or {}).get(component) or {}).get(
        "traffic") or []
    return {r["revisionName"]: r["percent"] for r in rows}


async def events(kube: KubeClient, namespace: str, name: str = "pd") -> dict[str, list[str]]:
    """Event reasons on the ISVC (or the object ``name``) -> messages."""
    page = await kube.list(EVENTS, namespace, field_selector=f"involvedObject.name={name}")
    out: dict[str, list[str]] = {}
    for e in page.get("items") or ():
        out.setdefault(e["reason"], []).append(e["message"])
    return out


async def posted(kube: KubeClient, namespace: str, wanted: dict[str, int],
                 name: str = "pd") -> dict[str, list[str]]:
    """``events`` once every reason of ``wanted`` is there at least that many times. The
    controller posts a pass's Events after that pass's status write, so a read right after
    a wait on the status can come before them."""
    async def there() -> dict[str, list[str]] | None:
        reasons = await events(kube, namespace, name)
        return reasons if all(len(reasons.get(r, ())) >= n for r, n in wanted.items()) else None

    return await eventually(there, timeout=30, what=f"the Events {wanted} on {name}")


async def traffic_mirrored(kube: KubeClient, namespace: str, isvc: JSON, component: str) -> None:
    """Until the member's InferenceReplica status carries ``isvc``'s traffic rows: they are
    mirrored into the replica after the ISVC status write that commits a pass."""
    async def mirrored() -> bool:
        ir = await kube.get(INFERENCE_REPLICAS, f"pd-{component}", namespace)
        return bool(ir["status"].get("traffic") == traffic_rows(isvc, component))

    await eventually(mirrored, timeout=30, what=f"the {component} traffic mirrored")


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
        gs = groups(isvc)
        if not gs or any(g.get("phase") != "Stable" for g in gs):
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


async def stable_on_canary(kube: KubeClient, namespace: str, old: dict[str, str]) -> JSON:
    """Wait until every member is Stable on a revision other than ``old``, all pods on it."""
    async def finished() -> JSON | None:
        isvc = await get_isvc(kube, namespace)
        pods = await list_pods(kube, namespace)
        g = group(isvc)
        ok = g.get("phase") == "Stable" and all(
            g.get("stable", {}).get(c, "").rsplit("-", 1)[-1] != old[c]
            and set(by_revision(pods, c)) == {hash_of(g["stable"][c])} for c in MEMBERS)
        return isvc if ok else None

    return await eventually(finished, timeout=120, interval=0.3, what="Stable on the canary")


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
    service_crds_applied: list[str],
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
            await traffic_mirrored(kube, namespace, isvc, c)
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
        await recorder.caught_up()  # every pod change up to the promote is checked below
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
    reasons = await posted(kube, namespace, {"RolloutPromoted": 1})
    assert "RolloutPromoted" in reasons, sorted(reasons)
    for c in MEMBERS:  # each member's InferenceReplica shows its group's events too
        on_ir = await posted(kube, namespace, dict.fromkeys(
            ("RolloutStarted", "RolloutPromoted", "RolloutGroupStable"), 1), f"pd-{c}")
        assert {"RolloutStarted", "RolloutPromoted", "RolloutGroupStable"} <= set(on_ir), \
            sorted(on_ir)

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
    service_crds_applied: list[str], prometheus: tuple[PrometheusServer, Metrics],
) -> None:
    server, metrics = prometheus
    metrics.error_rate = 0.01  # below the 0.05 threshold
    await start_manager()
    body = isvc_body(namespace, 2, ANALYSIS_STEPS, prometheus=server.url)
    old = await start_stable(kube, namespace, body, 2)
    await change_image(kube, namespace, "example.com/llm:2")

    isvc = await stable_on_canary(kube, namespace, old)
    for c in MEMBERS:
        new = hash_of(group(isvc)["stable"][c])
        assert traffic(isvc, c) == {f"pd-{c}-rev-{new}": 100}
    reasons = await posted(kube, namespace, {"CanaryAnalysisPassed": 1})
    assert any("errors=0.01 LT 0.05" in m for m in reasons.get("CanaryAnalysisPassed", [])), \
        sorted(reasons)


async def test_a_failing_analysis_rolls_every_member_back_with_the_canary_at_zero(
    kube: KubeClient, namespace: str, start_manager: Any,
    service_crds_applied: list[str], prometheus: tuple[PrometheusServer, Metrics],
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
    reasons = await posted(kube, namespace, {"CanaryAnalysisFailed": 1, "RolloutRolledBack": 1})
    assert "CanaryAnalysisFailed" in reasons and "RolloutRolledBack" in reasons, sorted(reasons)
    # the value Prometheus scraped from the endpoint is the one that failed the round
    assert any("errors=0.5 not LT 0.05" in m for m in reasons["CanaryAnalysisFailed"])
    for c in MEMBERS:
        ir = await kube.get(INFERENCE_REPLICAS, f"pd-{c}", namespace)
        assert ir["spec"]["pacing"]["rollbackToRevision"] == f"pd-{c}-{old[c]}"


async def test_the_rollback_annotation_sends_every_member_back(
    kube: KubeClient, namespace: str, start_manager: Any,
    service_crds_applied: list[str],
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
    reasons = await posted(kube, namespace, {"RolloutRollingBack": 1, "RolloutRolledBack": 1})
    assert "RolloutRollingBack" in reasons and "RolloutRolledBack" in reasons, sorted(reasons)


# ---------------------------------------------------------------------------- blue-green

SOAK_SECONDS = 4
"""The test-sized soak between the engine's group and the decoder's."""

SURGE_EVERYTHING: JSON = {
    "updateStrategy": {"type": "SurgeThenDrain", "rollingUpdate": {"maxSurge": "100%"}}}
"""A member budget that would replace every Instance at once: only the group paces it."""


def bluegreen_body(namespace: str, replicas: int, soak_seconds: int) -> JSON:
    """An OMENative ISVC whose engine and decoder are a blue-green sequence: the engine's
    group, then ``soak_seconds``, then the decoder's. Each member's own surge budget is all
    of its Instances, so what keeps them to a quarter at a time is the group alone."""
    def component() -> JSON:
        return {"minReplicas": replicas, "maxReplicas": replicas,
                "lifecycle": SURGE_EVERYTHING}
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "pd", "namespace": namespace},
        "spec": {
            "deploymentMode": "OMENative",
            "model": {"name": "llama"},
            "runtime": {"name": "srt-pd", "kind": "ServingRuntime"},
            "engine": component(),
            "decoder": component(),
            "rollout": {"groups": [
                {"components": ["engine"], "blueGreen": {}, "soak": f"{soak_seconds}s"},
                {"components": ["decoder"], "blueGreen": {}}]},
        },
    }


def _labels(pod: JSON) -> dict[str, str]:
    return dict(pod["metadata"].get("labels") or {})


def _ready(pod: JSON) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def live_by_index(pods: dict[str, JSON], component: str) -> dict[int, list[JSON]]:
    """Non-terminating pods of ``component`` by Instance index."""
    out: dict[int, list[JSON]] = {}
    for pod in pods.values():
        labels = _labels(pod)
        if pod["metadata"].get("deletionTimestamp") or labels.get("component") != component:
            continue
        out.setdefault(int(labels["ome.io/instance-index"]), []).append(pod)
    return out


def moving(pods: dict[str, JSON], component: str, new: str) -> set[int]:
    """Instances of ``component`` on their way to revision hash ``new``: a pod on it not
    Ready yet, or one next to a pod still on another revision."""
    out = set()
    for i, ps in live_by_index(pods, component).items():
        on_new = [p for p in ps if _labels(p)["ome.io/revision-hash"] == new]
        if on_new and (len(on_new) < len(ps) or not all(_ready(p) for p in on_new)):
            out.add(i)
    return out


def serving(pods: dict[str, JSON], component: str) -> int:
    """Ready, non-terminating pods of ``component`` (one per single-pod Instance)."""
    return sum(_ready(p) for ps in live_by_index(pods, component).values() for p in ps)


def done_on(pods: dict[str, JSON], component: str, new: str, replicas: int) -> bool:
    """Every live pod of ``component`` is on ``new``, and ``replicas`` of them are Ready."""
    live = [p for ps in live_by_index(pods, component).values() for p in ps]
    return (all(_labels(p)["ome.io/revision-hash"] == new for p in live)
            and sum(_ready(p) for p in live) == replicas)


def image_of(ir: JSON) -> str:
    """The image the InferenceReplica's (only) runner template names."""
    return str(ir["spec"]["runners"][0]["template"]["spec"]["containers"][0]["image"])


def partitions(irs: Timeline, component: str, image: str) -> list[int]:
    """``spec.pacing.partition`` of every version of the member with ``image`` in its
    template, consecutive repeats folded."""
    out: list[int] = []
    for _t, ir in irs.versions(f"pd-{component}"):
        if image_of(ir) != image:
            continue
        p = int(((ir["spec"].get("pacing") or {}).get("partition")) or 0)
        if not out or out[-1] != p:
            out.append(p)
    return out


def assert_paced(irs: Timeline, component: str, replicas: int, *, held_first: bool) -> None:
    """The new template never landed without its partition, which then came down a
    quarter (rounded up) at a time, never back up, to 0."""
    batch = math.ceil(replicas / 4)
    parts = partitions(irs, component, "example.com/llm:2")
    assert parts, f"no {component} version with the new image"
    assert parts[0] == (replicas if held_first else replicas - batch), (component, parts)
    assert parts[-1] == 0, (component, parts)
    assert all(0 < a - b <= batch for a, b in itertools.pairwise(parts)), \
        (component, parts)


def assert_pod_timeline(pods: Timeline, new: dict[str, str], replicas: int) -> None:
    """At every change a watcher saw: every Instance of each member present once (none
    lost, none extra), at most a quarter (rounded up) of them moving, all ``replicas``
    serving (SurgeThenDrain serves the replacement before the old pod drains), and an
    Instance that finished on the new revision never back on the old one."""
    batch = math.ceil(replicas / 4)
    finished: dict[str, set[int]] = {c: set() for c in MEMBERS}
    states = pods.states()
    for n, (_t, state) in enumerate(states[len(states) and _first_full(states, replicas):]):
        for c in MEMBERS:
            instances = live_by_index(state, c)
            assert set(instances) == set(range(replicas)), (n, c, sorted(instances))
            assert all(len(ps) <= 2 for ps in instances.values()), (n, c)
            on_way = moving(state, c, new[c])
            assert len(on_way) <= batch, (n, c, sorted(on_way))
            assert serving(state, c) >= replicas, (n, c, serving(state, c))
            for i, ps in instances.items():
                revs = {_labels(p)["ome.io/revision-hash"] for p in ps}
                if i in finished[c]:
                    assert revs == {new[c]}, (n, c, i, revs)
                elif revs == {new[c]} and all(_ready(p) for p in ps):
                    finished[c].add(i)
    for c in MEMBERS:
        assert finished[c] == set(range(replicas)), (c, finished[c])


def _first_full(states: list[tuple[float, dict[str, JSON]]], replicas: int) -> int:
    """The first state with every Instance listed (the initial LIST adds pods one by one)."""
    for n, (_t, state) in enumerate(states):
        if all(len(live_by_index(state, c)) == replicas for c in MEMBERS):
            return n
    raise AssertionError("never saw every Instance")


def engine_then_decoder(pods: Timeline, new: dict[str, str], replicas: int) -> tuple[float, float]:
    """(when the engine was done on its new revision, when the first decoder pod on its new
    revision appeared), as the pod watch saw them; asserts the first is earlier."""
    engine_done = decoder_moved = None
    for t, state in pods.states():
        if engine_done is None and done_on(state, "engine", new["engine"], replicas):
            engine_done = t
        if decoder_moved is None and any(
                _labels(p)["ome.io/revision-hash"] == new["decoder"]
                for ps in live_by_index(state, "decoder").values() for p in ps):
            decoder_moved = t
            assert engine_done is not None, "a decoder Instance moved before the engine was done"
    assert engine_done is not None and decoder_moved is not None, (engine_done, decoder_moved)
    return engine_done, decoder_moved


def decoder_started_after_soak(isvcs: Timeline) -> tuple[str, str]:
    """(the engine group's stableAt, the decoder group's first stepEnteredAt), from the
    ``status.rollout`` the controller wrote."""
    for _t, isvc in isvcs.versions("pd"):
        gs = groups(isvc)
        if len(gs) == 2 and gs[1].get("stepEnteredAt") and gs[0].get("stableAt"):
            return str(gs[0]["stableAt"]), str(gs[1]["stepEnteredAt"])
    raise AssertionError("the decoder group never entered a step")


def _seconds(stamp: str) -> float:
    return parse_time(stamp).timestamp()


def assert_traffic_follows(isvcs: Timeline, new: dict[str, str]) -> None:
    """Every recorded traffic split sums to 100 and the new revision's share only grows."""
    for c in MEMBERS:
        share = 0
        for _t, isvc in isvcs.versions("pd"):
            weights = traffic(isvc, c)
            if not weights or f"pd-{c}-rev-{new[c]}" not in weights:
                continue
            assert sum(weights.values()) == 100, (c, weights)
            assert weights[f"pd-{c}-rev-{new[c]}"] >= share, (c, weights, share)
            share = weights[f"pd-{c}-rev-{new[c]}"]
        assert share == 100, (c, share)


async def all_stable_on_new(kube: KubeClient, namespace: str, old: dict[str, str],
                            replicas: int) -> JSON:
    """Wait until every group is Stable on a new revision and only its pods are left."""
    async def finished() -> JSON | None:
        isvc = await get_isvc(kube, namespace)
        pods = await list_pods(kube, namespace)
        gs = groups(isvc)
        stable = {c: g.get("stable", {}).get(c, "") for g in gs for c in g["components"]}
        ok = (bool(gs) and all(g.get("phase") == "Stable" for g in gs) and all(
            stable.get(c) and hash_of(stable[c]) != old[c]
            and set(by_revision(pods, c)) == {hash_of(stable[c])}
            and ready_on(pods, c, hash_of(stable[c])) == replicas for c in MEMBERS))
        return isvc if ok else None

    return await eventually(finished, timeout=150, interval=0.3,
                            what="every group Stable on its new revision")


async def timelines(kube: KubeClient, namespace: str) -> tuple[Timeline, Timeline, Timeline]:
    """Pods, InferenceReplicas and the ISVC, recorded from now on."""
    return (await Timeline(kube, namespace, PODS).start(),
            await Timeline(kube, namespace, INFERENCE_REPLICAS).start(),
            await Timeline(kube, namespace, INFERENCE_SERVICES).start())


async def assert_settled(kube: KubeClient, namespace: str, isvc: JSON,
                         new: dict[str, str]) -> None:
    """Both members on their new revision: 100% traffic (mirrored into the replica),
    partition 0, two ControllerRevisions (the old and the new, nothing in between)."""
    for c in MEMBERS:
        assert traffic(isvc, c) == {f"pd-{c}-rev-{new[c]}": 100}, traffic(isvc, c)
        ir = await kube.get(INFERENCE_REPLICAS, f"pd-{c}", namespace)
        assert ir["spec"]["pacing"]["partition"] == 0
        assert ir["status"]["updateRevision"] == f"pd-{c}-{new[c]}"
        await traffic_mirrored(kube, namespace, isvc, c)
        revs = await kube.list(CONTROLLER_REVISIONS, namespace, label_selector=f"component={c}")
        assert len(revs.get("items") or ()) == 2, [
            r["metadata"]["name"] for r in revs.get("items") or ()]


async def test_a_blue_green_sequence_rolls_the_engine_soaks_then_rolls_the_decoder(
    kube: KubeClient, namespace: str, start_manager: Any, service_crds_applied: list[str],
) -> None:
    await start_manager()  # the manager runs the Instances and the ISVC controller
    replicas = 4
    old = await start_stable(kube, namespace, bluegreen_body(namespace, replicas,
                                                             SOAK_SECONDS), replicas)
    for c in MEMBERS:  # the member's own budget would move every Instance at once
        ir = await kube.get(INFERENCE_REPLICAS, f"pd-{c}", namespace)
        assert ir["spec"]["lifecycle"]["updateStrategy"]["rollingUpdate"]["maxSurge"] == "100%"
    pods, irs, isvcs = await timelines(kube, namespace)
    try:
        await change_image(kube, namespace, "example.com/llm:2")
        isvc = await all_stable_on_new(kube, namespace, old, replicas)
        for tl in (pods, irs, isvcs):  # the checks below read the timelines to this state
            await tl.caught_up()
    finally:
        for tl in (pods, irs, isvcs):
            await tl.stop()
    gs = groups(isvc)
    new = {c: hash_of(g["stable"][c]) for g in gs for c in g["components"]}
    assert [g["progression"] for g in gs] == ["blueGreen", "blueGreen"]

    # a quarter of each member at a time; the decoder held whole while the engine rolled
    assert_paced(irs, "engine", replicas, held_first=False)
    assert_paced(irs, "decoder", replicas, held_first=True)
    assert_pod_timeline(pods, new, replicas)
    # the engine finished before any decoder Instance moved, and the decoder waited the soak
    engine_done, decoder_moved = engine_then_decoder(pods, new, replicas)
    assert decoder_moved - engine_done >= SOAK_SECONDS - 1.5, (engine_done, decoder_moved)
    stable_at, entered = decoder_started_after_soak(isvcs)
    assert _seconds(entered) - _seconds(stable_at) >= SOAK_SECONDS, (stable_at, entered)
    holds = [(groups(v)[1].get("hold") or {}).get("reason", "")
             for _t, v in isvcs.versions("pd") if len(groups(v)) == 2]
    assert any("Sequential waiting on engine (soak" in r for r in holds), holds
    assert_traffic_follows(isvcs, new)
    await assert_settled(kube, namespace, isvc, new)
    reasons = await posted(kube, namespace, {"RolloutStarted": 2, "RolloutGroupStable": 2})
    assert len(reasons.get("RolloutStarted", [])) == 2, reasons.get("RolloutStarted")
    assert len(reasons.get("RolloutGroupStable", [])) == 2, reasons.get("RolloutGroupStable")


RESTART_SOAK_SECONDS = 8
"""Long enough for the successor to lead (a 3s Lease) while the soak still runs."""


async def test_a_manager_restarted_during_the_soak_finishes_the_sequence_from_the_cluster(
    kube: KubeClient, namespace: str, start_manager: Any, service_crds_applied: list[str],
) -> None:
    first = await start_manager(identity="first")
    replicas = 2
    old = await start_stable(kube, namespace, bluegreen_body(namespace, replicas,
                                                             RESTART_SOAK_SECONDS), replicas)
    pods, irs, isvcs = await timelines(kube, namespace)
    try:
        await change_image(kube, namespace, "example.com/llm:2")

        async def soaking() -> JSON | None:
            isvc = await get_isvc(kube, namespace)
            gs = groups(isvc)
            hold = (gs[1].get("hold") or {}) if len(gs) == 2 else {}
            ok = (gs and gs[0].get("phase") == "Stable"
                  and gs[0]["stable"]["engine"] != f"pd-engine-{old['engine']}"
                  and hold.get("gate") == "Sequential" and "soak" in hold.get("reason", "")
                  # that pass's Events go out after its status: killed before them, they
                  # would be lost (at most once), and the count below could not be checked
                  and any(m.startswith("group 0 ") for m in
                          (await events(kube, namespace)).get("RolloutGroupStable", [])))
            return isvc if ok else None

        soaked = await eventually(soaking, timeout=90, interval=0.2,
                                  what="the engine Stable and the decoder soaking")
        # a hard kill: nothing drained, the Lease not released; its ISVC controller goes too
        await first.kill()
        assert first.manager.leader_tasks.isvc is None  # its ISVC controller stopped
        decoder = await kube.get(INFERENCE_REPLICAS, "pd-decoder", namespace)
        assert decoder["spec"]["pacing"]["partition"] == replicas  # still held whole
        await start_manager(identity="second", write_config=False)
        isvc = await all_stable_on_new(kube, namespace, old, replicas)
        for tl in (pods, irs, isvcs):  # the checks below read the timelines to this state
            await tl.caught_up()
    finally:
        for tl in (pods, irs, isvcs):
            await tl.stop()
    gs = groups(isvc)
    new = {c: hash_of(g["stable"][c]) for g in gs for c in g["components"]}
    assert gs[0]["stable"] == groups(soaked)[0]["stable"]

    # the successor read the run from the cluster: the engine's stableAt (when its soak
    # started) is the one its predecessor wrote, and the decoder waited the soak from it
    assert gs[0]["stableAt"] == groups(soaked)[0]["stableAt"]
    stable_at, entered = decoder_started_after_soak(isvcs)
    assert stable_at == gs[0]["stableAt"]
    assert _seconds(entered) - _seconds(stable_at) >= RESTART_SOAK_SECONDS, (stable_at, entered)
    engine_done, decoder_moved = engine_then_decoder(pods, new, replicas)
    assert decoder_moved - engine_done >= RESTART_SOAK_SECONDS - 1.5, (engine_done,
                                                                       decoder_moved)
    # across the restart: no Instance lost or doubled, none back on its old revision,
    # pacing never raised again, traffic only towards the new revisions
    assert_pod_timeline(pods, new, replicas)
    assert_paced(irs, "engine", replicas, held_first=False)
    assert_paced(irs, "decoder", replicas, held_first=True)
    assert_traffic_follows(isvcs, new)
    await assert_settled(kube, namespace, isvc, new)
    # nothing announced twice: the successor did not start or finish a group again
    reasons = await posted(kube, namespace, {"RolloutStarted": 2, "RolloutGroupStable": 2})
    assert len(reasons.get("RolloutStarted", [])) == 2, reasons.get("RolloutStarted")
    assert len(reasons.get("RolloutGroupStable", [])) == 2, reasons.get("RolloutGroupStable")


async def test_a_canary_paused_across_a_manager_restart_is_promoted_by_the_successor(
    kube: KubeClient, namespace: str, start_manager: Any, service_crds_applied: list[str],
) -> None:
    first = await start_manager(identity="first")
    replicas = 4
    steps = [{"capacity": "25%", "traffic": 25, "pause": {}},
             {"capacity": "100%", "traffic": 100}]
    old = await start_stable(kube, namespace, isvc_body(namespace, replicas, steps), replicas)
    pods, irs, isvcs = await timelines(kube, namespace)
    try:
        await change_image(kube, namespace, "example.com/llm:2")

        async def paused() -> JSON | None:
            isvc = await get_isvc(kube, namespace)
            g = group(isvc)
            canary = g.get("canary") or {}
            current = await list_pods(kube, namespace)
            ok = (g.get("phase") == "Paused" and set(canary) == set(MEMBERS)
                  and all(ready_on(current, c, hash_of(canary[c])) == 1 for c in MEMBERS))
            return isvc if ok else None

        before = await eventually(paused, timeout=90, interval=0.3, what="Paused at step 1")
        new = {c: hash_of(group(before)["canary"][c]) for c in MEMBERS}
        await first.kill()
        assert first.manager.leader_tasks.isvc is None  # its ISVC controller stopped
        await start_manager(identity="second", write_config=False)
        await asyncio.sleep(3)  # the successor keeps the pause: nothing more moves
        isvc = await get_isvc(kube, namespace)
        assert group(isvc)["phase"] == "Paused" and group(isvc)["step"] == 0
        assert group(isvc)["canary"] == group(before)["canary"]
        assert group(isvc)["stepReadyAt"] == group(before)["stepReadyAt"]
        current = await list_pods(kube, namespace)
        for c in MEMBERS:
            assert by_revision(current, c).get(new[c]) == {replicas - 1}
            assert traffic(isvc, c) == {f"pd-{c}-rev-{old[c]}": 75, f"pd-{c}-rev-{new[c]}": 25}
        await pods.caught_up()  # every pod change up to the promote is checked below
        promote_at = len(pods.history)

        await annotate(kube, namespace, "ome.io/rollout-promote", new["decoder"][:8])
        isvc = await all_stable_on_new(kube, namespace, old, replicas)
        for tl in (pods, irs, isvcs):  # the checks below read the timelines to this state
            await tl.caught_up()
    finally:
        for tl in (pods, irs, isvcs):
            await tl.stop()

    assert {c: hash_of(group(isvc)["stable"][c]) for c in MEMBERS} == new
    # until the promote only the canary Instance of each member was on the new revision
    state: dict[str, JSON] = {}
    for _t, kind, obj in pods.history[:promote_at]:
        if kind == "DELETED":
            state.pop(obj["metadata"]["name"], None)
        else:
            state[obj["metadata"]["name"]] = obj
        for c in MEMBERS:
            assert by_revision(state, c).get(new[c], set()) <= {replicas - 1}, c
    assert_pod_timeline(pods, new, replicas)
    for c in MEMBERS:  # held at the step, then released at once: never raised again
        assert partitions(irs, c, "example.com/llm:2") == [replicas - 1, 0], c
    assert_traffic_follows(isvcs, new)
    await assert_settled(kube, namespace, isvc, new)
    assert "ome.io/rollout-promote" not in (isvc["metadata"].get("annotations") or {})
    reasons = await posted(kube, namespace, {"RolloutStarted": 1, "RolloutPromoted": 1})
    assert len(reasons.get("RolloutStarted", [])) == 1, reasons.get("RolloutStarted")
    assert len(reasons.get("RolloutPromoted", [])) == 1, reasons.get("RolloutPromoted")

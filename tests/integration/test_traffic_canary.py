"""A canary in a rollout group, under traffic, on real nodes: the share of answers per
revision tracks the share of Ready Instances on it.

An OMENative InferenceService whose engine (one model-server pod per Instance, 2
Instances) is a rollout group with the canary steps ``50%`` (paused) then ``100%``. A new
revision in the runtime starts a run; at the pause one Instance serves the canary and one
the stable revision, and the engine's Service (OME's, selecting both revisions' pods)
spreads new connections at random over the ready pods. Asserted at the pause: the answers
on new connections per revision are within 20 points of the Ready share (measured and
expected are printed), and no request fails; after the promote every answer is the new
revision's.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from manager_fixtures import apply_crd, eventually
from traffic_checks import answering_service, print_figures

from omenative_controller import service_crds
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import PODS
from omenative_controller.service_controller import INFERENCE_SERVICES, SERVING_RUNTIMES
from omenative_core.revisions import hash_of
from omenative_devcluster.model_engine import DRAIN_SECONDS, server_container
from omenative_devcluster.serving_record import ServingRecorder
from omenative_devcluster.traffic import LoadGenerator

pytest_plugins = ["realnode_fixtures", "traffic_fixtures"]
pytestmark = [pytest.mark.integration, pytest.mark.realnodes, pytest.mark.component("coredns"),
              pytest.mark.asyncio(loop_scope="session")]

REPO = Path(__file__).resolve().parents[2]
RATE = 25.0
INSTANCES = 2
#: how far the measured share of answers may be from the Ready share, in points
TOLERANCE = 20.0


def runtime_body(revision: str) -> JSON:
    """A ServingRuntime whose engine is one model-server pod answering ``revision``."""
    runner = server_container(revision)
    return {"apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime",
            "metadata": {"name": "srt-llm"},
            "spec": {"engineConfig": {"terminationGracePeriodSeconds": DRAIN_SECONDS + 25,
                                      "runner": runner}}}


def isvc_body() -> JSON:
    """The OMENative InferenceService ``llm``: its engine one canary group, 50 % paused."""
    steps = [{"capacity": "50%", "traffic": 50, "pause": {}},
             {"capacity": "100%", "traffic": 100}]
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "llm"},
            "spec": {"deploymentMode": "OMENative", "model": {"name": "llama"},
                     "runtime": {"name": "srt-llm", "kind": "ServingRuntime"},
                     "engine": {"minReplicas": INSTANCES, "maxReplicas": INSTANCES},
                     "rollout": {"groups": [{"components": ["engine"],
                                             "canary": {"steps": steps}}]}}}


def _group(isvc: JSON) -> JSON:
    groups = ((isvc.get("status") or {}).get("rollout") or {}).get("groups") or [{}]
    return dict(groups[0])


async def ready_revisions(kube: KubeClient, ns: str) -> dict[str, int]:
    """Ready, not terminating engine pods per MODEL_REVISION."""
    out: dict[str, int] = {}
    for pod in (await kube.list(PODS, ns)).get("items") or ():
        conds = {c["type"]: c["status"] for c in (pod.get("status") or {}).get("conditions")
                 or ()}
        if pod["metadata"].get("deletionTimestamp") or conds.get("Ready") != "True":
            continue
        env = {v["name"]: v.get("value") for v in pod["spec"]["containers"][0].get("env") or ()}
        rev = str(env.get("MODEL_REVISION"))
        out[rev] = out.get(rev, 0) + 1
    return out


async def stage(kube: KubeClient, ns: str, phase: str, want: dict[str, int]) -> JSON:
    """Until the group's phase is ``phase`` and the Ready pods per revision are ``want``."""

    async def there() -> JSON | None:
        isvc = await kube.get(INFERENCE_SERVICES, "llm", ns)
        ok = (_group(isvc).get("phase") == phase
              and await ready_revisions(kube, ns) == want)
        return isvc if ok else None

    return await eventually(there, timeout=120, interval=0.3,
                            what=f"the group {phase} with Ready pods {want}")


async def test_canary_answers_track_the_ready_share(
    real_kube: KubeClient, real_namespace: str, real_manager: Any,
) -> None:
    kube, ns = real_kube, real_namespace
    for crd in service_crds.SERVICE_CRDS:
        await apply_crd(kube, REPO / crd.file)
    await real_manager()
    await kube.create(SERVING_RUNTIMES, runtime_body("rev-1"), ns)
    await kube.create(INFERENCE_SERVICES, isvc_body(), ns)
    await stage(kube, ns, "Stable", {"rev-1": INSTANCES})
    url = await answering_service(kube, ns, "llm-engine", pods=INSTANCES)

    async with ServingRecorder(kube, ns) as recorder, LoadGenerator(
            f"{url}/", rate=RATE, duration=600) as gen:
        await asyncio.sleep(2)
        t_update = gen.now()
        await kube.patch(SERVING_RUNTIMES, "srt-llm",
                         {"spec": {"engineConfig": {"runner": server_container("rev-2")}}}, ns)
        isvc = await stage(kube, ns, "Paused", {"rev-1": 1, "rev-2": 1})
        t_paused = gen.now()
        await asyncio.sleep(2)  # kube-proxy routes to the canary
        t_pause = gen.now()
        await asyncio.sleep(10)
        t_promote = gen.now()
        canary = hash_of(str((_group(isvc).get("canary") or {})["engine"]))
        await kube.patch(INFERENCE_SERVICES, "llm", {"metadata": {"annotations": {
            "ome.io/rollout-promote": canary[:8]}}}, ns)
        await stage(kube, ns, "Stable", {"rev-2": INSTANCES})
        await asyncio.sleep(2)
        t_done = gen.now()
        await asyncio.sleep(3)
    report = gen.report()
    paused = [o for o in report.answers if t_pause <= o.started < t_promote and o.via == "new"]
    measured = 100.0 * sum(1 for o in paused if o.revision == "rev-2") / max(len(paused), 1)
    expected = 100.0 * 1 / INSTANCES
    weights = {r["revisionName"]: r["percent"] for r in
               ((isvc.get("status") or {}).get("components") or {}).get("engine", {})
               .get("traffic") or ()}
    print_figures("canary 50% (paused) in a rollout group", report,
                  paused_new_connection_answers=len(paused),
                  canary_share_measured=round(measured, 1), canary_share_expected=expected,
                  paused_after_s=round(t_paused - t_update, 1),
                  stable_after_promote_s=round(t_done - 2 - t_promote, 1),
                  status_traffic_at_pause=weights)

    assert len(paused) >= 50, len(paused)
    assert abs(measured - expected) <= TOLERANCE, (measured, expected)
    assert report.failed == 0, report.table()
    assert {o.revision for o in report.answers if o.started > t_done} == {"rev-2"}
    assert recorder.record.unserving_answers(report.answers, gen.wall) == []

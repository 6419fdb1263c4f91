"""The manager in a pod, from its own image, installed by ``helm install`` on real nodes.

``make image``'s archive (``manager_image.py``) is imported into every node's containerd,
then the chart is installed with its defaults but that image and the webhook on with the
certificate the chart makes (no cert-manager here). The CRDs are applied first, without
the chart (``omenative.crds.install=false``): other real-node tests of the session apply
them too. Checked: both manager pods Ready (read-only root, uid 65532, in-cluster config
through the ``kubernetes`` Service), one holds the Lease; an OMENative InferenceService of
the model server gets Ready and answers through its engine Service; the webhook answers
from the pod (a bad InferenceService is refused with its message); the leader's process
is killed (SIGKILL from the host: a crash) and the standby takes the Lease and scales the
engine; ``helm test`` passes; ``helm uninstall`` leaves the InferenceService serving (as
docs/install.md says). And ``helm upgrade`` to a new image in the middle of a rollout under
traffic: the managers roll onto it (and a renewed webhook certificate), the rollout
finishes with every Instance once, and no request fails. Printed: cold start to leader,
the take-over time, the managers' RSS.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from omenative_controller import service_crds
from omenative_controller.kube.client import JSON, ApiError, KubeClient
from omenative_controller.kube.resources import LEASES, PODS, SECRETS, SERVICES
from omenative_controller.service_controller import INFERENCE_SERVICES, SERVING_RUNTIMES
from omenative_devcluster import manager_image, oci
from omenative_devcluster.model_engine import live_pods, server_container, wait_answering
from omenative_devcluster.traffic import LoadGenerator

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import apply_crd, conditions, eventually  # noqa: E402
from test_admission import _bad_migration  # noqa: E402
from test_helm import CHART, helm  # noqa: E402
from test_traffic_canary import ready_revisions  # noqa: E402
from traffic_checks import print_figures  # noqa: E402

pytest_plugins = ["realnode_fixtures", "traffic_fixtures"]
# ranked by its later component (conftest's COMPONENT_ORDER: helm after coredns), since
# get_closest_marker reads the first "component" mark
pytestmark = [pytest.mark.integration, pytest.mark.realnodes, pytest.mark.component("helm"),
              pytest.mark.component("coredns"), pytest.mark.asyncio(loop_scope="session")]

REPO = Path(__file__).resolve().parents[2]
RELEASE = "omenative"
MANAGERS = "app.kubernetes.io/name=omenative-manager"
#: the upgrade's image: the same build under a new version (a new reference and digest)
NEXT_TAG = "0.1.0-next"
#: engine Instances in the upgrade test, and the new revision's model load time
INSTANCES = 3
LOAD = 4.0


def _pod_ready(pod: JSON) -> bool:
    conds = {c["type"]: c["status"] for c in (pod.get("status") or {}).get("conditions") or ()}
    return conds.get("Ready") == "True" and not pod["metadata"].get("deletionTimestamp")


def manager_pids(pod: str) -> list[int]:
    """Host pids of the manager process of ``pod`` (its hostname is the pod's name)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmd = (entry / "cmdline").read_bytes()
            if b"omenative-manager" in cmd and \
                    f"HOSTNAME={pod}\0".encode() in (entry / "environ").read_bytes():
                pids.append(int(entry.name))
    return pids


def rss_mib(pid: int) -> float:
    """The process' resident set (VmRSS), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.fixture
def helm_release(real_cluster: Any, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Builds (cached) and imports the image; yields the install's settings; uninstalls."""
    built = manager_image.build_image()
    real_cluster.nodes.import_images(real_cluster.cluster, {built.ref: built.archive})
    repo, tag = oci.split_ref(built.ref)
    release = {"home": tmp_path / "helm", "kubeconfig": real_cluster.kubeconfig_path,
               "image": built, "args": [
                   "--set", f"omenative.image.repository={repo}",
                   "--set", f"omenative.image.tag={tag}",
                   "--set", "omenative.crds.install=false",
                   "--set", "omenative.webhook.enabled=true",
                   "--set", "omenative.webhook.certManager.enabled=false"]}
    try:
        yield release
    finally:
        helm(release["home"], "uninstall", RELEASE, "--namespace", "default", "--wait",
             check=False, kubeconfig=release["kubeconfig"])
        deadline = time.monotonic() + 90
        while real_cluster.kubectl("get", "namespace", "ome", "-o", "name", check=False):
            if time.monotonic() > deadline:
                pytest.fail("namespace ome still there 90 s after helm uninstall")
            time.sleep(0.5)


async def _managers(kube: KubeClient) -> list[JSON]:
    return list((await kube.list(PODS, "ome", label_selector=MANAGERS)).get("items") or ())


async def _holder(kube: KubeClient) -> str:
    try:
        lease = await kube.get(LEASES, "omenative-manager", "ome")
    except ApiError as exc:
        if exc.not_found:
            return ""
        raise
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def _leader_pod(kube: KubeClient, not_pod: str = "") -> str | None:
    """The Ready manager pod whose process holds the Lease (other than ``not_pod``)."""
    holder = await _holder(kube)
    for pod in await _managers(kube):
        name = pod["metadata"]["name"]
        if name != not_pod and holder.startswith(f"{name}_") and _pod_ready(pod):
            return str(name)
    return None


def runtime_body() -> JSON:
    """A ServingRuntime whose engine is one model-server pod per Instance."""
    return {"apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime",
            "metadata": {"name": "srt-llm"},
            "spec": {"engineConfig": {"terminationGracePeriodSeconds": 30,
                                      "runner": server_container("rev-1")}}}


def isvc_body(replicas: int) -> JSON:
    """The OMENative InferenceService ``llm`` of ``replicas`` engine Instances."""
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "llm"},
            "spec": {"deploymentMode": "OMENative", "model": {"name": "llama"},
                     "runtime": {"name": "srt-llm", "kind": "ServingRuntime"},
                     "engine": {"minReplicas": replicas, "maxReplicas": replicas}}}


async def _serving(kube: KubeClient, ns: str, pods: int) -> str:
    """Until ``llm`` is Ready and its engine Service answers from ``pods`` pods; its URL."""

    async def ready() -> bool:
        isvc = await kube.get(INFERENCE_SERVICES, "llm", ns)
        running = [p for p in (await kube.list(PODS, ns)).get("items") or () if _pod_ready(p)]
        return conditions(isvc).get("Ready") == "True" and len(running) == pods

    await eventually(ready, timeout=180, interval=0.5, what=f"llm Ready with {pods} pods")
    svc = await eventually(lambda: kube.get(SERVICES, "llm-engine", ns), timeout=30,
                           what="the engine Service llm-engine")
    url = f"http://{svc['spec']['clusterIP']}:8080/"
    await wait_answering(url, pods=pods, timeout=60)
    return url


async def _two_managers_one_leads(kube: KubeClient, image: str) -> str:
    """Until 2 manager pods of ``image`` are Ready and one holds the Lease; its name."""

    async def there() -> str | None:
        pods = await _managers(kube)
        if len(pods) != 2 or not all(_pod_ready(p) for p in pods) or any(
                p["spec"]["containers"][0]["image"] != image for p in pods):
            return None
        return await _leader_pod(kube)

    return await eventually(there, timeout=180, interval=0.5,
                            what=f"2 manager pods of {image} Ready, one holding the Lease")


async def _install(kube: KubeClient, ns: str, release: dict[str, Any]) -> str:
    """The CRDs applied, ``helm install``, until both managers run, one leads and the
    webhook answers from them (kube-proxy has their Service: until then the API server's
    calls are refused, and with ``failurePolicy: Fail`` so is every create); the leader."""
    for crd in service_crds.SERVICE_CRDS:
        await apply_crd(kube, REPO / crd.file)
    helm(release["home"], "install", RELEASE, str(CHART), "--namespace", "default",
         *release["args"], kubeconfig=release["kubeconfig"])
    leader = await _two_managers_one_leads(kube, release["image"].ref)
    exc = await eventually(lambda: _refused(kube, ns), timeout=30, interval=0.3,
                           what="the webhook (in the manager pods) refusing a bad migration")
    assert "InvalidMigrationRequest: migration request" in exc.message, exc.message
    return leader


async def _refused(kube: KubeClient, ns: str) -> ApiError | None:
    """The webhook's refusal of an InferenceService only it refuses (None: admitted, or
    the webhook not reached yet)."""
    try:
        await kube.create(INFERENCE_SERVICES, _bad_migration(ns, "bad-migration"), ns)
    except ApiError as exc:
        return None if "failed calling webhook" in exc.message else exc
    await kube.delete(INFERENCE_SERVICES, "bad-migration", ns)
    return None


async def test_helm_install_runs_two_managers_one_leads_serves_and_survives_a_crash(
    real_kube: KubeClient, real_namespace: str, helm_release: dict[str, Any],
) -> None:
    kube, ns = real_kube, real_namespace
    t0 = time.monotonic()
    leader = await _install(kube, ns, helm_release)
    cold = time.monotonic() - t0
    pods = {p["metadata"]["name"]: p for p in await _managers(kube)}
    spec = pods[leader]["spec"]["containers"][0]
    assert spec["securityContext"]["readOnlyRootFilesystem"] is True
    assert spec["image"] == helm_release["image"].ref

    await kube.create(SERVING_RUNTIMES, runtime_body(), ns)
    await kube.create(INFERENCE_SERVICES, isvc_body(2), ns)
    url = await _serving(kube, ns, pods=2)
    first_pass = time.monotonic() - t0

    # the webhook, served from the manager pods with the chart-made certificate
    rss = {name: max((rss_mib(p) for p in manager_pids(name)), default=0.0) for name in pods}
    (standby,) = set(pods) - {leader}
    pids = manager_pids(leader)
    assert pids, f"no manager process of {leader} on this host"
    t_kill = time.monotonic()
    for pid in pids:
        os.kill(pid, signal.SIGKILL)

    async def standby_leads() -> str | None:
        now = await _leader_pod(kube, not_pod=leader)
        return now if now == standby else None

    await eventually(standby_leads, timeout=60, interval=0.2,
                     what=f"{standby} taking the Lease after {leader} was killed")
    takeover = time.monotonic() - t_kill
    await kube.patch(INFERENCE_SERVICES, "llm", {"spec": {"engine": {
        "minReplicas": 3, "maxReplicas": 3}}}, ns)
    await _serving(kube, ns, pods=3)
    await wait_answering(url, pods=3, timeout=60)

    home, kubeconfig = helm_release["home"], helm_release["kubeconfig"]
    smoke = helm(home, "test", RELEASE, "--namespace", "default", "--timeout", "120s",
                 kubeconfig=kubeconfig)
    assert "Succeeded" in smoke.stdout, smoke.stdout
    # docs/install.md: uninstall deletes the manager and its objects, keeps the CRDs and so
    # every InferenceService, whose pods keep serving (nobody manages them meanwhile)
    helm(home, "uninstall", RELEASE, "--namespace", "default", "--wait", kubeconfig=kubeconfig)
    assert (await kube.get(INFERENCE_SERVICES, "llm", ns))["metadata"]["name"] == "llm"
    await wait_answering(url, pods=3, timeout=30)
    assert not await _managers(kube)
    print(f"\nmanager image {helm_release['image'].size / 2**20:.1f} MiB; helm install -> "
          f"2 pods Ready, leader elected: {cold:.1f} s; -> InferenceService Ready and "
          f"answering: {first_pass:.1f} s; RSS at rest (leader, standby): "
          f"{rss[leader]:.0f}, {rss[standby]:.0f} MiB; leader SIGKILLed -> standby "
          f"leads: {takeover:.1f} s")


async def test_helm_upgrade_to_a_new_image_during_a_rollout_fails_no_request(
    real_kube: KubeClient, real_namespace: str, helm_release: dict[str, Any], real_cluster: Any,
) -> None:
    kube, ns = real_kube, real_namespace
    await _install(kube, ns, helm_release)
    await kube.create(SERVING_RUNTIMES, runtime_body(), ns)
    await kube.create(INFERENCE_SERVICES, isvc_body(INSTANCES), ns)
    url = await _serving(kube, ns, pods=INSTANCES)
    repo, _ = oci.split_ref(helm_release["image"].ref)
    newer = manager_image.build_image(f"{repo}:{NEXT_TAG}")
    real_cluster.nodes.import_images(real_cluster.cluster, {newer.ref: newer.archive})

    cert_before = (await kube.get(SECRETS, "omenative-webhook-cert", "ome"))["data"]

    async with LoadGenerator(url, rate=25, duration=600) as gen:
        await asyncio.sleep(2)
        # a rollout that takes a while: each new pod loads its model for LOAD seconds
        await kube.patch(SERVING_RUNTIMES, "srt-llm", {"spec": {"engineConfig": {
            "runner": server_container("rev-2", load_seconds=LOAD)}}}, ns)
        await asyncio.sleep(1)
        t_upgrade = gen.now()
        helm(helm_release["home"], "upgrade", RELEASE, str(CHART), "--namespace", "default",
             "--reuse-values", "--set", f"omenative.image.tag={NEXT_TAG}",
             kubeconfig=helm_release["kubeconfig"])
        await _two_managers_one_leads(kube, newer.ref)
        t_managers = gen.now()

        async def rolled_out() -> bool:
            return await ready_revisions(kube, ns) == {"rev-2": INSTANCES} and conditions(
                await kube.get(INFERENCE_SERVICES, "llm", ns)).get("Ready") == "True"

        await eventually(rolled_out, timeout=240, interval=0.5,
                         what=f"the rollout to rev-2 done: {INSTANCES} Ready pods, llm Ready")
        t_done = gen.now()
        await asyncio.sleep(3)
    cert_after = (await kube.get(SECRETS, "omenative-webhook-cert", "ome"))["data"]
    assert cert_after["tls.crt"] != cert_before["tls.crt"], "the upgrade kept the certificate"
    pods = await live_pods(kube, ns)
    assert len(pods) == INSTANCES, f"Instances lost or doubled: {sorted(pods)}"
    report = gen.report()
    print_figures("helm upgrade of the manager during a rollout", report,
                  upgrade_at=round(t_upgrade, 1), managers_new_at=round(t_managers, 1),
                  rollout_done_at=round(t_done, 1))
    assert report.failed == 0, report.table("failed requests")
    assert report.answers_by_revision().get("rev-2"), "no answer from the new revision"

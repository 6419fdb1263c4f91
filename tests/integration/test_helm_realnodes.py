"""The manager in a pod, from its own image, installed by ``helm install`` on real nodes.

``make image``'s archive (``manager_image.py``) is imported into every node's containerd,
then the chart is installed with its defaults but that image and the webhook on with the
certificate the chart makes (no cert-manager here). The CRDs are applied first, without
the chart (``omenative.crds.install=false``): other real-node tests of the session apply
them too. Checked: ``helm install --wait`` returns only once the API server reaches the
webhook (the chart's post-install Job), so the InferenceService applied right after it,
with no retry, goes through, and a bad one is refused by the webhook in the pods; both
manager pods Ready (read-only root, uid 65532, in-cluster config through the
``kubernetes`` Service), one holds the Lease; the InferenceService of the model server
gets Ready and answers through its engine Service; the leader's process is killed
(SIGKILL from the host: a crash) while a rollout is in progress, a live manager (the
standby, or the killed pod's restarted process if it asks first) takes the
Lease and finishes it with no Instance lost or duplicated (pods counted from the API
server every 0.25 s: ``instance_census.py``); ``helm test`` passes; ``helm uninstall``
leaves the InferenceService serving (as docs/install.md says). And ``helm upgrade`` to a
new image in the middle of a rollout under traffic: the managers roll onto it (and a
renewed webhook certificate), the rollout finishes with every Instance once, and no
request fails. Printed: cold start to leader, the take-over time, the managers' RSS.
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
from omenative_controller.kube.resources import LEASES, NODES, PODS, SECRETS, SERVICES
from omenative_controller.service_controller import INFERENCE_SERVICES, SERVING_RUNTIMES
from omenative_core.labels import LABEL_ISVC
from omenative_devcluster import manager_image, oci
from omenative_devcluster.kubelet import LEASE_NAMESPACE, KubeletStandIn, StandInConfig
from omenative_devcluster.kubelet_config import STAND_IN_TAINT
from omenative_devcluster.model_engine import live_pods, server_container, wait_answering
from omenative_devcluster.traffic import LoadGenerator

pytest.register_assert_rewrite("manager_fixtures")
from instance_census import census  # noqa: E402
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


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    """The process' resident set (``VmRSS``; ``VmHWM``: its peak), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cgroup_mib(pid: int) -> float:
    """The memory of the process' cgroup (its container): ``memory.current`` (cgroup v2)
    or ``memory.usage_in_bytes`` (v1), MiB; 0 when neither is readable."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for base, name in ((Path("/sys/fs/cgroup/memory"), "memory.usage_in_bytes"),
                           (Path("/sys/fs/cgroup"), "memory.current")):
            if (controllers == "memory") == (name == "memory.usage_in_bytes") and \
                    (file := base / path.lstrip("/") / name).exists():
                return int(file.read_text()) / 2**20
    return 0.0


def memory(pod: str) -> dict[str, float]:
    """RSS, peak RSS and cgroup memory of ``pod``'s manager process, MiB."""
    pids = manager_pids(pod)
    assert pids, f"no manager process of {pod} on this host"
    return {"rss": max(rss_mib(p) for p in pids), "peak": max(rss_mib(p, "VmHWM") for p in pids),
            "cgroup": max(cgroup_mib(p) for p in pids)}


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


async def _install(kube: KubeClient, ns: str, release: dict[str, Any], cluster: Any,
                   replicas: int) -> str:
    """The CRDs applied, ``helm install --wait``, and at once, as a user would, with no
    retry: the runtime and the InferenceService ``llm`` of ``replicas`` Instances applied
    (``kubectl apply``), a bad InferenceService refused by the webhook in the pods (with
    ``failurePolicy: Fail`` the API server refuses every create until it reaches the
    webhook: the chart's post-install Job waits for that); until both managers run and one
    leads: the leader."""
    for crd in service_crds.SERVICE_CRDS:
        await apply_crd(kube, REPO / crd.file)
    await asyncio.to_thread(
        helm, release["home"], "install", RELEASE, str(CHART), "--namespace", "default",
        "--wait", "--timeout", "180s", *release["args"], kubeconfig=release["kubeconfig"])
    objects = [runtime_body(), isvc_body(replicas)]
    for obj in objects:
        obj["metadata"]["namespace"] = ns
    cluster.apply(*objects)
    exc = await _refused(kube, ns)
    assert exc is not None, "the webhook did not refuse a bad migration right after install"
    assert "InvalidMigrationRequest: migration request" in exc.message, exc.message
    return await _two_managers_one_leads(kube, release["image"].ref)


async def _refused(kube: KubeClient, ns: str) -> ApiError | None:
    """The webhook's refusal of an InferenceService only it refuses (None: admitted); the
    test fails when the API server could not call the webhook."""
    try:
        await kube.create(INFERENCE_SERVICES, _bad_migration(ns, "bad-migration"), ns)
    except ApiError as exc:
        assert "failed calling webhook" not in exc.message, exc.message
        return exc
    await kube.delete(INFERENCE_SERVICES, "bad-migration", ns)
    return None


async def _rolled_out(kube: KubeClient, ns: str) -> bool:
    """The rollout to rev-2 done: INSTANCES Ready pods of it, llm Ready."""
    return await ready_revisions(kube, ns) == {"rev-2": INSTANCES} and conditions(
        await kube.get(INFERENCE_SERVICES, "llm", ns)).get("Ready") == "True"


def _roll_to_rev2() -> JSON:
    """The runtime patch that rolls the engine to rev-2, each new pod loading for LOAD s."""
    return {"spec": {"engineConfig": {"runner": server_container("rev-2", load_seconds=LOAD)}}}


async def test_helm_install_serves_at_once_and_a_leader_killed_mid_rollout_loses_nothing(
    real_kube: KubeClient, real_namespace: str, helm_release: dict[str, Any], real_cluster: Any,
) -> None:
    kube, ns = real_kube, real_namespace
    t0 = time.monotonic()
    leader = await _install(kube, ns, helm_release, real_cluster, INSTANCES)
    cold = time.monotonic() - t0
    pods = {p["metadata"]["name"]: p for p in await _managers(kube)}
    spec = pods[leader]["spec"]["containers"][0]
    assert spec["securityContext"]["readOnlyRootFilesystem"] is True
    assert spec["image"] == helm_release["image"].ref
    url = await _serving(kube, ns, pods=INSTANCES)
    first_pass = time.monotonic() - t0

    rss = {name: max((rss_mib(p) for p in manager_pids(name)), default=0.0) for name in pods}
    (standby,) = set(pods) - {leader}
    pids = manager_pids(leader)
    assert pids, f"no manager process of {leader} on this host"

    killed = await _holder(kube)
    assert killed.startswith(f"{leader}_"), killed

    async def taken_over() -> str | None:
        # a live manager holds the Lease: the standby, or the killed pod's restarted
        # process (a new identity) when it asks first once the Lease expired
        holder = await _holder(kube)
        return holder if holder and holder != killed else None

    # maxSurge 25% of 3 Instances: one surge pod at a time, none unavailable
    async with census(kube, ns, instances=INSTANCES, max_surge=1) as seen:
        await kube.patch(SERVING_RUNTIMES, "srt-llm", _roll_to_rev2(), ns)

        async def loading() -> bool:
            return any(r == "rev-2" and not ok for s in seen.samples[-1:] for _, r, ok in s.pods)

        await eventually(loading, timeout=60, interval=0.1,
                         what="the rollout in progress: a rev-2 pod loading its model")
        t_kill = time.monotonic()
        killed_at = seen.samples[-1].at
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        holder = await eventually(taken_over, timeout=60, interval=0.2,
                                  what=f"a live manager taking the Lease from {killed}")
        takeover = time.monotonic() - t_kill
        await eventually(lambda: _rolled_out(kube, ns), timeout=240, interval=0.5,
                         what=f"the rollout to rev-2 done: {INSTANCES} Ready pods, llm Ready")
        rolled = time.monotonic() - t_kill

        # the last rev-1 pod turns not Ready when its drain begins, and is deleted once no
        # endpoint routes to it: only then does a pod list hold rev-2 alone
        async def old_pods_gone() -> bool:
            return seen.samples[-1].by_revision() == {"rev-2": INSTANCES}

        await eventually(old_pods_gone, timeout=60, interval=0.25,
                         what="the drained rev-1 pods deleted (census)")
        await asyncio.sleep(2)
    print(f"\nInstances by revision (leader SIGKILLed at {killed_at:.1f} s):\n"
          f"{seen.timeline()}")
    problems = seen.problems()
    assert not problems, "\n".join(problems[:20])
    assert seen.samples[-1].by_revision() == {"rev-2": INSTANCES}
    await wait_answering(url, pods=INSTANCES, timeout=60)

    home, kubeconfig = helm_release["home"], helm_release["kubeconfig"]
    smoke = helm(home, "test", RELEASE, "--namespace", "default", "--timeout", "120s",
                 kubeconfig=kubeconfig)
    assert "Succeeded" in smoke.stdout, smoke.stdout
    # docs/install.md: uninstall deletes the manager and its objects, keeps the CRDs and so
    # every InferenceService, whose pods keep serving (nobody manages them meanwhile)
    await asyncio.to_thread(helm, home, "uninstall", RELEASE, "--namespace", "default",
                            "--wait", kubeconfig=kubeconfig)
    assert (await kube.get(INFERENCE_SERVICES, "llm", ns))["metadata"]["name"] == "llm"
    await wait_answering(url, pods=INSTANCES, timeout=30)
    assert not await _managers(kube)
    print(f"\nmanager image {helm_release['image'].size / 2**20:.1f} MiB; helm install "
          f"--wait -> 2 pods Ready, leader elected, webhook reached: {cold:.1f} s; -> "
          f"InferenceService Ready and answering: {first_pass:.1f} s; RSS at rest (leader, "
          f"standby): {rss[leader]:.0f}, {rss[standby]:.0f} MiB; leader SIGKILLed mid-rollout "
          f"-> {'the standby' if holder.startswith(f'{standby}_') else 'its restarted process'}"
          f" leads: {takeover:.1f} s; -> rollout done: {rolled:.1f} s; "
          f"{len(seen.samples)} census samples")


async def test_helm_upgrade_to_a_new_image_during_a_rollout_fails_no_request(
    real_kube: KubeClient, real_namespace: str, helm_release: dict[str, Any], real_cluster: Any,
) -> None:
    kube, ns = real_kube, real_namespace
    await _install(kube, ns, helm_release, real_cluster, INSTANCES)
    url = await _serving(kube, ns, pods=INSTANCES)
    repo, _ = oci.split_ref(helm_release["image"].ref)
    newer = manager_image.build_image(f"{repo}:{NEXT_TAG}")
    real_cluster.nodes.import_images(real_cluster.cluster, {newer.ref: newer.archive})

    cert_before = (await kube.get(SECRETS, "omenative-webhook-cert", "ome"))["data"]

    async with LoadGenerator(url, rate=25, duration=600) as gen:
        await asyncio.sleep(2)
        # a rollout that takes a while: each new pod loads its model for LOAD seconds
        await kube.patch(SERVING_RUNTIMES, "srt-llm", _roll_to_rev2(), ns)
        await asyncio.sleep(1)
        t_upgrade = gen.now()
        # off the loop: the load generator keeps sending while helm waits for its hook
        await asyncio.to_thread(
            helm, helm_release["home"], "upgrade", RELEASE, str(CHART), "--namespace",
            "default", "--reuse-values", "--set", f"omenative.image.tag={NEXT_TAG}",
            kubeconfig=helm_release["kubeconfig"])
        await _two_managers_one_leads(kube, newer.ref)
        t_managers = gen.now()
        await eventually(lambda: _rolled_out(kube, ns), timeout=240, interval=0.5,
                         what=f"the rollout to rev-2 done: {INSTANCES} Ready pods, llm Ready")
        t_done = gen.now()
        await asyncio.sleep(3)
    cert_after = (await kube.get(SECRETS, "omenative-webhook-cert", "ome"))["data"]
    assert cert_after["tls.crt"] != cert_before["tls.crt"], "the upgrade kept the certificate"

    async def drained() -> dict[str, JSON] | None:
        # an old pod whose drain began is not Ready and not yet deleted: wait for that delete
        pods = await live_pods(kube, ns)
        return pods if all(_pod_ready(p) for p in pods.values()) else None

    pods = await eventually(drained, timeout=60, what="every live pod Ready (old ones deleted)")
    assert len(pods) == INSTANCES, f"Instances lost or doubled: {sorted(pods)}"
    report = gen.report()
    print_figures("helm upgrade of the manager during a rollout", report,
                  upgrade_at=round(t_upgrade, 1), managers_new_at=round(t_managers, 1),
                  rollout_done_at=round(t_done, 1))
    assert report.failed == 0, report.table("failed requests")
    assert report.answers_by_revision().get("rev-2"), "no answer from the new revision"


#: Instances (one pod each) of the InferenceService ``wide`` on stand-in nodes
WIDE = 300


def _wide_runtime(nodes: list[str], image: str) -> JSON:
    """A ServingRuntime whose pods go only to the stand-in ``nodes`` (tainted: real-node
    pods never land there) and run ``image`` there as the stand-in pretends."""
    return {"apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime",
            "metadata": {"name": "srt-wide"},
            "spec": {"engineConfig": {
                "tolerations": [{"key": STAND_IN_TAINT["key"], "operator": "Exists"}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{
                        "key": "kubernetes.io/hostname", "operator": "In", "values": nodes}]}]}}},
                "runner": {"name": "ome-container", "image": image,
                           "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}}}}


async def _wide_ready(kube: KubeClient, ns: str, image: str) -> bool:
    """``wide`` Ready with WIDE Ready pods, all of ``image``."""
    isvc = await kube.get(INFERENCE_SERVICES, "wide", ns)
    pods = [p for p in (await kube.list(PODS, ns, label_selector=f"{LABEL_ISVC}=wide"))
            .get("items") or () if not p["metadata"].get("deletionTimestamp")]
    return (conditions(isvc).get("Ready") == "True" and len(pods) == WIDE
            and all(_pod_ready(p) and p["spec"]["containers"][0]["image"] == image
                    for p in pods))


async def _remove_stand_in(kube: KubeClient, ns: str, stand_in: KubeletStandIn) -> None:
    """``wide`` deleted and its pods torn down by the manager (or, after 90 s, deleted at
    once), the stand-in stopped, its nodes and Leases deleted: nothing of it is left for
    the session's other real-node tests."""

    async def gone() -> bool:
        return not (await kube.list(PODS, ns, label_selector=f"{LABEL_ISVC}=wide")
                    ).get("items")

    with contextlib.suppress(ApiError):
        await kube.delete(INFERENCE_SERVICES, "wide", ns)
    with contextlib.suppress(ApiError, AssertionError):
        await eventually(gone, timeout=90, interval=1, what="wide's pods torn down")
    with contextlib.suppress(ApiError):
        for pod in (await kube.list(PODS, ns, label_selector=f"{LABEL_ISVC}=wide")
                    ).get("items") or ():
            with contextlib.suppress(ApiError):
                await kube.delete(PODS, pod["metadata"]["name"], ns, grace_period_seconds=0)
    await stand_in.stop()
    for name in stand_in.node_names:
        for res, where in ((NODES, None), (LEASES, LEASE_NAMESPACE)):
            with contextlib.suppress(ApiError):
                await kube.delete(res, name, where)


async def test_manager_memory_in_the_pod_with_300_pods_stays_under_its_limit(
    real_kube: KubeClient, real_namespace: str, helm_release: dict[str, Any], real_cluster: Any,
) -> None:
    """RSS of the manager pods at rest, then with an InferenceService of 300 single-pod
    Instances on stand-in nodes (brought up, then rolled to a new image): read from the
    host (/proc VmRSS and VmHWM, the container's memory cgroup). Neither manager restarts
    (no OOM kill) and the peak stays under the chart's memory limit."""
    kube, ns = real_kube, real_namespace
    leader = await _install(kube, ns, helm_release, real_cluster, 1)
    await _serving(kube, ns, pods=1)
    (standby,) = {p["metadata"]["name"] for p in await _managers(kube)} - {leader}
    rest = {"leader": memory(leader), "standby": memory(standby)}

    stand_in = KubeletStandIn(StandInConfig(
        kubeconfig=real_cluster.kubeconfig_path, nodes=2, node_prefix=f"{ns}-",
        tainted=True, gpus_per_node=0))
    try:
        await stand_in.start()
        await stand_in.wait_nodes_ready()
        await kube.create(SERVING_RUNTIMES, _wide_runtime(stand_in.node_names, "llm:1"), ns)
        wide = isvc_body(WIDE)
        wide["metadata"]["name"] = "wide"
        wide["spec"]["runtime"]["name"] = "srt-wide"
        t0 = time.monotonic()
        await kube.create(INFERENCE_SERVICES, wide, ns)
        await eventually(lambda: _wide_ready(kube, ns, "llm:1"), timeout=300, interval=1,
                         what=f"wide Ready with {WIDE} Ready pods")
        up = time.monotonic() - t0
        await asyncio.sleep(5)
        loaded = {"leader": memory(leader), "standby": memory(standby)}
        t0 = time.monotonic()
        await kube.patch(SERVING_RUNTIMES, "srt-wide", _wide_runtime(
            stand_in.node_names, "llm:2"), ns)
        await eventually(lambda: _wide_ready(kube, ns, "llm:2"), timeout=300, interval=1,
                         what=f"wide rolled to llm:2: {WIDE} Ready pods")
        rolled = time.monotonic() - t0
        after = {"leader": memory(leader), "standby": memory(standby)}
    finally:
        await _remove_stand_in(kube, ns, stand_in)
    managers = await _managers(kube)
    restarts = {p["metadata"]["name"]: p["status"]["containerStatuses"][0]["restartCount"]
                for p in managers}
    limit = managers[0]["spec"]["containers"][0]["resources"]["limits"]["memory"]
    print(f"\nmanager memory, MiB (rss / peak / cgroup): at rest {rest}; {WIDE} pods up "
          f"({up:.1f} s) {loaded}; after rolling them ({rolled:.1f} s) {after}; "
          f"restarts {restarts}")
    assert restarts == {leader: 0, standby: 0}, restarts
    assert limit.endswith("Mi"), limit
    assert max(m["peak"] for m in after.values()) < int(limit[:-2]), (limit, after)

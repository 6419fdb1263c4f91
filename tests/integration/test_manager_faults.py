"""API faults between the manager and the API server: dropped watches, 500s, 409s, 410s.

The manager talks to the real API server through :mod:`faultproxy` (a reverse proxy of the
tests' own); the tests read and write the cluster directly. What is asserted is what a user
sees in the cluster: the pods (a recorded history of the namespace, replayed) and the
InferenceReplica's status, with deadlines.

* watches dropped (abruptly, mid-event, and cleanly) every 0.3-1.2 s while a replica is
  created, scaled up and scaled down: it converges, no pod is duplicated, lost or deleted
  but those of the Instances scaled away;
* 500 to every pod create/patch for 10 s, then 409 to every status update for 10 s: exactly
  the desired Instances afterwards, and the manager kept running and reconciling;
* a SurgeThenDrain update under random 500s (some after the server applied the write):
  ``servingReplicas`` never seen below the desired count;
* the API down (500 to everything) for 6 s: the manager steps down, comes back, converges;
* watches ended by ``ERROR 410 Expired`` and a pod delete that only a re-list can show;
* persistent 410s on watch starts are backed off (no LIST+WATCH spin).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from tests.pod_history import assert_no_duplicates

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS, PODS
from omenative_controller.manager import Manager, ManagerOptions

pytest.register_assert_rewrite("manager_fixtures")
from faultproxy import FaultProxy  # noqa: E402 - after the rewrite registration
from manager_fixtures import (  # noqa: E402
    TEST_LIFECYCLE,
    ManagerHandle,
    PodRecorder,
    eventually,
    gate,
    get_replica,
    list_pods,
    live_instances,
    patch_replica,
    put_lifecycle,
    release_finalizers,
    replica_body,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

POD_WRITES = r"^/api/v1/namespaces/[^/]+/pods(/|$)"
"""Pod create (POST .../pods), patch (.../pods/x) and the gate (.../pods/x/status)."""
IR_STATUS = r"/inferencereplicas/[^/]+/status$"


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture
async def proxy(kubeconfig_path: Path) -> AsyncIterator[FaultProxy]:
    """A fault proxy in front of the test cluster's API server."""
    p = await FaultProxy(kubeconfig_path, seed=random.randrange(1 << 30)).start()
    try:
        yield p
    finally:
        await p.stop()


@pytest.fixture
async def proxied_manager(
    proxy: FaultProxy, namespace: str, kube: KubeClient, ir_crd: str, tmp_path: Path,
    no_pod_group_crd: None,
) -> AsyncIterator[Callable[[], Awaitable[ManagerHandle]]]:
    """Factory: one manager on the test's namespace that reaches the API through ``proxy``."""
    handles: list[ManagerHandle] = []
    kubeconfig = proxy.write_kubeconfig(tmp_path / "kubeconfig-proxy")

    async def start() -> ManagerHandle:
        await put_lifecycle(kube, namespace, TEST_LIFECYCLE)
        opts = ManagerOptions(
            kubeconfig=str(kubeconfig), namespaces=(namespace,), config_namespace=namespace,
            lease_namespace=namespace, lease_duration=3.0, renew_deadline=2.0,
            retry_period=0.5, bind_address="127.0.0.1", metrics_port=0, probe_port=0,
            crd_poll_seconds=1.0, config_reload_seconds=2.0, backoff_base=0.05,
            backoff_max=5.0, identity=f"faults-{len(handles)}",
        )
        manager = Manager(opts)
        handle = ManagerHandle(manager, asyncio.create_task(manager.run(),
                                                            name=f"manager-{opts.identity}"))
        handles.append(handle)
        await handle.wait_leader()
        return handle

    try:
        yield start
    finally:
        proxy.clear()
        for h in handles:
            with contextlib.suppress(Exception):
                await h.kill()
        await release_finalizers(kube, namespace)


# ---------------------------------------------------------------------------- helpers


def assert_alive(handle: ManagerHandle) -> None:
    """The manager's task runs, no background task died, and it still leads."""
    assert not handle.task.done(), f"the manager stopped: {handle.task!r}"
    healthy, why = handle.manager.health()
    assert healthy, f"the manager is unhealthy: {why}"
    assert handle.manager.is_leader, "the manager lost its Lease"


def passes(handle: ManagerHandle) -> float:
    """Reconcile passes so far."""
    return float(handle.metrics.sample("omenative_reconcile_duration_seconds_count"))


async def converged(kube: KubeClient, namespace: str, name: str, count: int,
                    handle: ManagerHandle, *, timeout: float = 90) -> JSON:
    """Until exactly ``count`` Instances exist, all Ready and serving, and the status says so."""
    async def check() -> JSON | None:
        if handle.task.done():
            handle.task.result()  # raise the manager's error
        ir = await get_replica(kube, namespace, name)
        status = ir.get("status") or {}
        pods = await list_pods(kube, namespace)
        live = live_instances(pods)
        ok = (status.get("readyReplicas") == count and status.get("replicas") == count
              and status.get("servingReplicas") == count
              and sorted(live) == list(range(count)) and len(pods) == 2 * count
              and all(len(v) == 2 for v in live.values())
              and all(gate(p) == "True" for p in pods.values()))
        return ir if ok else None

    return await eventually(check, timeout=timeout, what=f"{name}: exactly {count} Instance(s) "
                            "Ready and serving")


def pod_lives(recorder: PodRecorder) -> tuple[dict[str, set[str]], set[str]]:
    """(pod name -> every UID it had, names of pods deleted or marked for deletion)."""
    uids: dict[str, set[str]] = {}
    deleted: set[str] = set()
    for kind, obj, _ in recorder.replay(from_start=True):
        meta = obj["metadata"]
        uids.setdefault(meta["name"], set()).add(meta["uid"])
        if kind == "DELETED" or meta.get("deletionTimestamp"):
            deleted.add(meta["name"])
    return uids, deleted


async def drop_watches_forever(proxy: FaultProxy, interval: tuple[float, float],
                               abrupt_only: asyncio.Event) -> None:
    """Drop every watch of the manager again and again: abruptly and cleanly in turn, or
    only abruptly once ``abrupt_only`` is set (the manager then re-lists)."""
    rng = random.Random(proxy.seed)
    abrupt = True
    while True:
        await asyncio.sleep(rng.uniform(*interval))
        proxy.drop_watches(abrupt=abrupt or abrupt_only.is_set())
        abrupt = not abrupt


# ---------------------------------------------------------------------------- the proxy itself


async def test_proxy_forwards_counts_injects_and_drops(
    proxy: FaultProxy, namespace: str, tmp_path: Path
) -> None:
    client = await KubeClient.connect(str(proxy.write_kubeconfig(tmp_path / "kc")), qps=0,
                                      burst=1, timeout=10)
    try:
        assert (await client.list(PODS, namespace)).get("items") == []
        rule = proxy.inject(500, verbs={"list"}, path=r"/pods$")
        with pytest.raises(Exception, match="500 InternalError") as err:
            await client.list(PODS, namespace)
        assert getattr(err.value, "status", None) == 500
        proxy.clear(rule)
        proxy.inject(409, verbs={"list"}, duration=0.5)
        with pytest.raises(Exception, match="409 Conflict"):
            await client.list(PODS, namespace)
        await asyncio.sleep(0.6)
        await client.list(PODS, namespace)  # the 409 window is over

        rv = (await client.list(PODS, namespace))["metadata"]["resourceVersion"]
        got: list[str] = []

        async def watch() -> None:
            async with client.watch(PODS, namespace, resource_version=rv,
                                    timeout_seconds=60, read_timeout=60) as events:
                async for ev in events:
                    got.append(ev["type"])

        task = asyncio.create_task(watch())
        await eventually(lambda: _true(proxy.open_watches == 1), timeout=10,
                         what="the watch open through the proxy")
        await client.create(PODS, {"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "c", "image": "example.com/x:1"}]}}, namespace)
        await eventually(lambda: _true("ADDED" in got), timeout=10, what="a streamed event")
        assert proxy.drop_watches(abrupt=True) == 1
        with pytest.raises(Exception):  # noqa: B017 - a broken chunked body, whatever aiohttp calls it
            await asyncio.wait_for(task, 10)
        assert proxy.counts["watch"] == 1 and proxy.counts["create"] == 1
        assert proxy.counts["list"] == 5
        assert proxy.injected == {("list", 500): 1, ("list", 409): 1}
    finally:
        await client.close()


async def _true(value: bool) -> bool:
    return value


# ---------------------------------------------------------------------------- (i) dropped watches


async def test_watches_dropped_repeatedly_while_creating_and_scaling(
    kube: KubeClient, namespace: str, proxy: FaultProxy, proxied_manager: Any
) -> None:
    handle = await proxied_manager()
    recorder = await PodRecorder(kube, namespace).start()
    abrupt_only = asyncio.Event()
    dropper = asyncio.create_task(drop_watches_forever(proxy, (0.3, 1.2), abrupt_only))
    try:
        await kube.create(INFERENCE_REPLICAS, replica_body("wd", replicas=2), namespace)
        await converged(kube, namespace, "wd", 2, handle)
        created = await list_pods(kube, namespace)
        lists = proxy.counts["list"]
        abrupt_only.set()
        await patch_replica(kube, namespace, "wd", {"spec": {"replicas": 3}},
                            subresource="scale")
        await converged(kube, namespace, "wd", 3, handle)
        # Broken streams in a row make the manager re-list: scale down after one did.
        await eventually(lambda: _true(proxy.counts["list"] > lists), timeout=40,
                         what="a re-list after repeated broken watch streams")
        await patch_replica(kube, namespace, "wd", {"spec": {"replicas": 1}},
                            subresource="scale")
        final = await converged(kube, namespace, "wd", 1, handle)
        await recorder.caught_up()  # the checks below read its history to now
    finally:
        dropper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await dropper
        await recorder.stop()
    restarts = handle.metrics.sample("omenative_watch_restarts_total")
    print(f"WATCH-DROPS: {proxy.watches_dropped} streams dropped, {restarts:.0f} watch "
          f"restarts by the manager, {proxy.counts['list']} lists, {proxy.counts['watch']} "
          f"watches")
    assert proxy.watches_dropped >= 20 and restarts >= 20, "the drops did not hit the manager"
    assert_alive(handle)
    assert final["status"]["replicas"] == 1

    uids, deleted = pod_lives(recorder)
    wanted = {f"wd-engine-{i}-{role}-0" for i in range(3) for role in ("leader", "worker")}
    assert set(uids) == wanted, f"pods ever seen: {sorted(uids)}"
    twice = {n: u for n, u in uids.items() if len(u) > 1}
    assert not twice, f"pods created more than once (lost and re-created): {twice}"
    assert deleted == wanted - {"wd-engine-0-leader-0", "wd-engine-0-worker-0"}, (
        f"deleted: {sorted(deleted)}; only Instances 1 and 2 should have gone")
    after = await list_pods(kube, namespace)
    for name in ("wd-engine-0-leader-0", "wd-engine-0-worker-0"):
        assert after[name]["metadata"]["uid"] == created[name]["metadata"]["uid"]
    assert_no_duplicates(recorder.replay(from_start=True), max_live=3)


# ---------------------------------------------------------------------------- (ii) 500s and 409s


async def test_500s_on_pod_writes_then_409s_on_status_converge_exactly(
    kube: KubeClient, namespace: str, proxy: FaultProxy, proxied_manager: Any
) -> None:
    handle = await proxied_manager()
    recorder = await PodRecorder(kube, namespace).start()
    fail_pods = proxy.inject(500, verbs={"create", "patch"}, path=POD_WRITES, duration=10)
    await kube.create(INFERENCE_REPLICAS, replica_body("fe", replicas=2), namespace)

    # While every pod write fails, no pod appears and the manager keeps trying.
    assert fail_pods.until is not None
    while time.monotonic() < fail_pods.until - 0.3:
        assert await list_pods(kube, namespace) == {}, "a pod was created through a 500"
        await asyncio.sleep(0.25)
    refused_creates = proxy.injected[("create", 500)]
    assert refused_creates >= 3, f"only {refused_creates} pod creates were refused"
    assert_alive(handle)

    # Then every status write of the InferenceReplica is a 409 for 10 s.
    fail_status = proxy.inject(409, verbs={"update", "patch"}, path=IR_STATUS, duration=10)
    await asyncio.sleep(max(0.0, fail_pods.until - time.monotonic()))
    assert fail_status.until is not None
    passes_after_faults = passes(handle)
    while time.monotonic() < fail_status.until - 0.3:
        assert_alive(handle)
        # sampled inside the window: the pass that writes the status once the 409s end
        # may come within the loop's last sleep (one pass converges: the gates went
        # through while the progress-only status was held)
        passes_after_faults = passes(handle)
        await asyncio.sleep(min(0.25, max(0.0, fail_status.until - 0.3 - time.monotonic())))
    refused_status = proxy.injected[("update", 409)]
    assert refused_status >= 3, f"only {refused_status} status updates were refused"

    await converged(kube, namespace, "fe", 2, handle, timeout=60)
    await recorder.caught_up()  # the checks below read its history to now
    await recorder.stop()
    assert_alive(handle)
    assert passes(handle) > passes_after_faults, "the manager stopped reconciling"
    uids, deleted = pod_lives(recorder)
    assert set(uids) == {f"fe-engine-{i}-{r}-0" for i in range(2) for r in ("leader", "worker")}, (
        f"pods ever seen: {sorted(uids)}")
    assert all(len(u) == 1 for u in uids.values()), f"a pod was re-created: {uids}"
    assert not deleted, f"pods deleted: {sorted(deleted)}"
    assert_no_duplicates(recorder.replay(from_start=True), max_live=2)
    errors = handle.metrics.sample("omenative_reconcile_errors_total")
    print(f"500/409: {refused_creates} creates and {proxy.injected[('patch', 500)]} pod "
          f"patches refused with 500, {refused_status} status updates with 409; "
          f"{errors:.0f} failed passes")


# ---------------------------------------------------------------------------- (iii) update + 500s


async def test_surge_then_drain_update_under_500s_never_drops_serving(
    kube: KubeClient, namespace: str, proxy: FaultProxy, proxied_manager: Any
) -> None:
    handle = await proxied_manager()
    await kube.create(INFERENCE_REPLICAS, replica_body("su", replicas=2), namespace)
    ir = await converged(kube, namespace, "su", 2, handle)
    old_rev = ir["status"]["currentRevision"]
    recorder = await PodRecorder(kube, namespace).start()
    # Pod writes fail 40 % of the time before reaching the server, and another ~20 % after
    # the server applied them (the manager only hears the 500); status writes 30 %.
    proxy.inject(500, verbs={"create", "patch", "delete"}, path=POD_WRITES, fraction=0.4)
    proxy.inject(500, verbs={"create", "patch", "delete"}, path=POD_WRITES, fraction=0.33,
                 after_forward=True)
    proxy.inject(500, verbs={"update"}, path=IR_STATUS, fraction=0.3)

    samples: list[tuple[float, int | None, int | None]] = []

    async def poll_status() -> None:
        while True:
            st = (await get_replica(kube, namespace, "su")).get("status") or {}
            samples.append((time.monotonic(), st.get("servingReplicas"),
                            st.get("readyReplicas")))
            await asyncio.sleep(0.05)

    poller = asyncio.create_task(poll_status())
    body = replica_body("x", image="example.com/llm:2")
    await patch_replica(kube, namespace, "su", {"spec": {"runners": body["spec"]["runners"]}})

    async def finished() -> JSON | None:
        if handle.task.done():
            handle.task.result()
        ir = await get_replica(kube, namespace, "su")
        status = ir.get("status") or {}
        pods = await list_pods(kube, namespace)
        new_rev = status.get("updateRevision")
        ok = (
            new_rev and new_rev != old_rev and status.get("currentRevision") == new_rev
            and status.get("updatedReplicas") == 2 and status.get("readyReplicas") == 2
            and status.get("servingReplicas") == 2 and len(pods) == 4
            and all(p["metadata"]["labels"]["ome.io/revision-hash"] == new_rev.rsplit("-", 1)[1]
                    and gate(p) == "True" and not p["metadata"].get("deletionTimestamp")
                    for p in pods.values())
        )
        return ir if ok else None

    try:
        await eventually(finished, timeout=90, interval=0.25,
                         what="the update finished under injected 500s")
        await recorder.caught_up()  # the checks below read its history to now
    finally:
        poller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await poller
        proxy.clear()
        await recorder.stop()
    assert_alive(handle)
    injected = sum(proxy.injected.values())
    assert injected >= 5, f"only {injected} errors were injected during the update"
    seen = [s for _, s, _ in samples]
    assert len(seen) >= 20, f"only {len(seen)} status samples"
    low = min(s if s is not None else -1 for s in seen)
    assert low >= 2, f"servingReplicas was {low} during the update (samples: {seen})"

    serving_floor = 2
    peak_live = 0
    for _, _, state in recorder.replay():
        live = live_instances(state)
        peak_live = max(peak_live, len(live))
        serving_floor = min(serving_floor, sum(
            1 for pods in live.values()
            if len(pods) == 2 and all(gate(p) == "True" for p in pods)))
    print(f"UPDATE-UNDER-500s: {dict(proxy.injected)} injected, {len(seen)} status samples, "
          f"lowest servingReplicas {low}, lowest serving Instances {serving_floor}, "
          f"peak live Instances {peak_live}")
    assert serving_floor >= 2, "serving Instances dropped below the desired count"
    assert peak_live <= 3, f"{peak_live} live Instances: more than desired 2 + maxSurge 1"
    assert_no_duplicates(recorder.replay(), max_live=3)
    # A name is reused by the new revision (the drained Instance comes back updated), but no
    # pod of one revision is created twice: nothing lost and re-created, nothing duplicated.
    per_revision: dict[tuple[str, str], set[str]] = {}
    for _, obj, _ in recorder.replay(from_start=True):
        meta = obj["metadata"]
        key = (meta["name"], meta["labels"]["ome.io/revision-hash"])
        per_revision.setdefault(key, set()).add(meta["uid"])
    twice = {k: u for k, u in per_revision.items() if len(u) > 1}
    assert not twice, f"pods created twice at one revision: {twice}"


# ---------------------------------------------------------------------------- (iv) API down


async def test_api_down_for_a_while_manager_steps_down_and_comes_back(
    kube: KubeClient, namespace: str, proxy: FaultProxy, proxied_manager: Any
) -> None:
    handle = await proxied_manager()
    await kube.create(INFERENCE_REPLICAS, replica_body("ao", replicas=2), namespace)
    await converged(kube, namespace, "ao", 2, handle)
    before = await list_pods(kube, namespace)
    recorder = await PodRecorder(kube, namespace).start()

    # Every request (Lease renewals, lists, watches, writes) is a 500 for 6 s, and the open
    # watch streams break; meanwhile the user scales up.
    outage = proxy.inject(500, duration=6)
    proxy.drop_watches(abrupt=True)
    await patch_replica(kube, namespace, "ao", {"spec": {"replicas": 3}}, subresource="scale")
    assert outage.until is not None
    stepped_down = False
    while time.monotonic() < outage.until - 0.2:
        assert not handle.task.done(), f"the manager stopped: {handle.task!r}"
        stepped_down = stepped_down or not handle.manager.is_leader
        pods = await list_pods(kube, namespace)
        assert set(pods) == set(before), f"pods changed during the outage: {sorted(pods)}"
        await asyncio.sleep(0.2)
    assert stepped_down, "the manager kept leading without renewing its Lease"
    back_at = time.monotonic()

    await handle.wait_leader(timeout=30)
    await converged(kube, namespace, "ao", 3, handle, timeout=60)
    recovered = time.monotonic() - back_at
    await recorder.caught_up()  # the checks below read its history to now
    await recorder.stop()
    assert_alive(handle)
    print(f"API-DOWN: {sum(proxy.injected.values())} requests answered 500 "
          f"({dict(proxy.injected)}); 3 Instances Ready {recovered:.1f}s after the outage")
    after = await list_pods(kube, namespace)
    for name, pod in before.items():
        assert after[name]["metadata"]["uid"] == pod["metadata"]["uid"], f"{name} was replaced"
    uids, deleted = pod_lives(recorder)
    assert not deleted, f"pods deleted: {sorted(deleted)}"
    assert all(len(u) == 1 for u in uids.values()), f"a pod was re-created: {uids}"
    assert_no_duplicates(recorder.replay(from_start=True), max_live=3)



# ---------------------------------------------------------------------------- (v) 410 Expired


async def test_watches_expired_and_a_delete_only_a_relist_shows(
    kube: KubeClient, namespace: str, proxy: FaultProxy, proxied_manager: Any
) -> None:
    handle = await proxied_manager()

    async def expire_forever() -> None:
        while True:
            await asyncio.sleep(random.uniform(0.2, 0.6))
            proxy.expire_watches()

    expirer = asyncio.create_task(expire_forever())
    try:
        await kube.create(INFERENCE_REPLICAS, replica_body("ex", replicas=2), namespace)
        await converged(kube, namespace, "ex", 2, handle)
    finally:
        expirer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await expirer
    assert proxy.watches_expired >= 6, f"only {proxy.watches_expired} streams expired"
    before = await list_pods(kube, namespace)
    recorder = await PodRecorder(kube, namespace).start()

    # The manager's watches break and cannot come back (nor can it list); meanwhile a
    # worker pod is deleted. Then every watch that resumes from before the delete is told
    # 410 Expired: only a re-list shows the manager that the pod is gone.
    blocked = proxy.inject(500, verbs={"watch", "list"})
    proxy.drop_watches(abrupt=True)
    await kube.delete(PODS, "ex-engine-0-worker-0", namespace)

    async def pod_gone() -> bool:
        return "ex-engine-0-worker-0" not in await list_pods(kube, namespace)

    await eventually(pod_gone, timeout=30, what="ex-engine-0-worker-0 gone")
    proxy.inject(410, verbs={"watch"}, reason="Expired", duration=1.5)
    proxy.clear(blocked)

    async def recreated() -> bool:
        if handle.task.done():
            handle.task.result()
        ir = await get_replica(kube, namespace, "ex")
        pods = await list_pods(kube, namespace)
        inst0 = [p for n, p in pods.items() if n.startswith("ex-engine-0-")]
        return (len(inst0) == 2 and (ir.get("status") or {}).get("readyReplicas") == 2
                and all(p["metadata"]["labels"]["ome.io/instance-incarnation"] == "2"
                        and gate(p) == "True" and not p["metadata"].get("deletionTimestamp")
                        for p in inst0))

    await eventually(recreated, timeout=60, what="Instance 0 re-created after the missed delete")
    await converged(kube, namespace, "ex", 2, handle)
    await recorder.caught_up()  # the checks below read its history to now
    await recorder.stop()
    assert_alive(handle)
    after = await list_pods(kube, namespace)
    leader = "ex-engine-0-leader-0"
    assert after[leader]["metadata"]["uid"] != before[leader]["metadata"]["uid"]
    for name in ("ex-engine-1-leader-0", "ex-engine-1-worker-0"):
        assert after[name]["metadata"]["uid"] == before[name]["metadata"]["uid"], (
            f"{name} was replaced")
    assert_no_duplicates(recorder.replay(from_start=True), max_live=2)
    print(f"EXPIRED: {proxy.watches_expired} streams ended with ERROR 410, "
          f"{proxy.injected[('watch', 410)]} watches answered 410, {proxy.counts['list']} lists")


async def test_persistent_410_on_watches_is_backed_off(
    kube: KubeClient, namespace: str, proxy: FaultProxy, proxied_manager: Any
) -> None:
    handle = await proxied_manager()
    await kube.create(INFERENCE_REPLICAS, replica_body("bo", replicas=1, single=True),
                      namespace)

    async def ready() -> bool:
        st = (await get_replica(kube, namespace, "bo")).get("status") or {}
        return st.get("readyReplicas") == 1

    await eventually(ready, timeout=60, what="bo Ready")
    # Every collection some informer watches (the manager's and the InferenceService
    # controller's: which ones depends on the APIs the cluster serves, e.g. Workloads and
    # PodGroups on Kubernetes 1.36). Only their LISTs count: an informer whose CRD is not
    # installed retries its LIST on 404 with its own back-off and never watches.
    watched = {r.path for r in proxy.log if r.verb == "watch"}
    informers = len(watched)
    assert informers >= 6, f"only {sorted(watched)} watched"
    start = len(proxy.log)
    rule = proxy.inject(410, verbs={"watch"}, reason="Expired", duration=3.0)
    proxy.expire_watches()
    await asyncio.sleep(3.0)
    relists = sum(1 for r in proxy.log[start:] if r.verb == "list" and r.path in watched)
    print(f"PERSISTENT-410: {relists} LISTs and {rule.hits} watches answered 410 in 3 s "
          f"by {informers} informers")
    assert_alive(handle)
    # The back-off doubles from 0.2 s, jittered down to half: LISTs at about 0, 0.1, 0.3,
    # 0.7 and 1.5 s, so at most 6 per informer in 3 s (a loop that does not back off makes
    # one per round trip, hundreds). client-go's reflector starts at 800 ms.
    assert relists <= 6 * informers, f"{relists} LISTs in 3 s: the informers do not back off"

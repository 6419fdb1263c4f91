"""A small InferenceReplica controller written with kopf on top of ``omenative_core``.

It is the proof that the core is a library: everything it decides comes from
``omenative_core.plan()``; this file only observes (kopf's watches wake a key; each pass
reads the world with kubernetes-asyncio) and applies the plan's actions in order, status
first, stopping at the first failure. It imports only ``omenative_core``, ``kopf`` and
``kubernetes_asyncio``. See README.md beside it for how kopf's pieces map to the core's
level-triggered contract.

Run it (standalone: no peering objects; nothing written to the InferenceReplica but what
the plan asks for)::

    KUBECONFIG=... python examples/kopf-operator/omenative_kopf.py --namespace llm
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import uuid
from collections.abc import Awaitable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import kopf
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from omenative_core import (
    LABEL_REPLICA,
    SERVING_GATE,
    Action,
    CodecError,
    ConfigError,
    CreateError,
    CreateObject,
    CreatePod,
    CreatePodGroup,
    CreateRevision,
    DeleteObject,
    DeletePod,
    DeletePodGroup,
    DeleteRevision,
    Event,
    InferenceReplica,
    LifecycleConfig,
    PatchPodImages,
    RemoveAnnotations,
    SetFinalizer,
    SetServingGate,
    Snapshot,
    UpdateStatus,
    headless_service_name,
    node_view_from_json,
    parse_lifecycle_config,
    plan,
    pod_group_view_from_json,
    pod_view_from_json,
    replica_from_json,
    revision_view_from_json,
    routed_pods_from_endpoint_slices,
    status_to_json,
)

GROUP, VERSION, PLURAL = "ome.io", "v1beta1", "inferencereplicas"
PG_GROUP, PG_VERSION, PG_PLURAL = "scheduling.x-k8s.io", "v1alpha1", "podgroups"
RESYNC_SECONDS = 60.0
"""Look at every known replica at least this often, even when nothing woke it."""
REQUEST_TIMEOUT = 30.0
"""Seconds one API call may take (the client has no timeout of its own)."""
RETRY_SECONDS = 1.0
"""Look again this soon after a pass that stopped on a failed action."""

log = logging.getLogger("omenative-kopf")
Key = tuple[str, str]  # (namespace, name)


class Stop(Exception):
    """End the pass here; the next one starts from what it then observes."""


# ---------------------------------------------------------------------------- kopf wiring


class NoProgressStorage(kopf.ProgressStorage):
    """kopf's handler progress, kept nowhere: the core's status is the only memory."""

    def fetch(self, *, key: Any, body: Any) -> None:
        return None

    def store(self, *, key: Any, record: Any, body: Any, patch: Any) -> None:
        pass

    def purge(self, *, key: Any, body: Any, patch: Any) -> None:
        pass

    def touch(self, *, body: Any, patch: Any, value: Any) -> None:
        pass

    def clear(self, *, essence: Any) -> Any:
        return super().clear(essence=essence)


class NoDiffBaseStorage(kopf.DiffBaseStorage):
    """kopf's "last handled state", kept nowhere: we diff nothing, the core plans from all."""

    def fetch(self, *, body: Any) -> None:
        return None

    def store(self, *, body: Any, patch: Any, essence: Any) -> None:
        pass


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """Write nothing of kopf's own to objects, then start the reconcile worker."""
    settings.persistence.progress_storage = NoProgressStorage()
    settings.persistence.diffbase_storage = NoDiffBaseStorage()
    settings.posting.enabled = False  # our Events come from the plan
    try:
        config.load_incluster_config()
        api = client.ApiClient()
    except config.ConfigException:
        cfg = client.Configuration()
        await config.load_kube_config(client_configuration=cfg)
        api = client.ApiClient(cfg)
    memo.controller = Controller(api, os.environ.get("OME_CONFIG_NAMESPACE", "ome"))
    memo.task = asyncio.create_task(memo.controller.run(), name="reconcile")


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    """Stop the worker and close the client."""
    memo.task.cancel()
    await asyncio.gather(memo.task, return_exceptions=True)
    await memo.controller.api.close()


# Only low-level event handlers: they store no progress, no diff-base and add no finalizer
# (kopf's timers and daemons would add kopf's finalizer to every InferenceReplica).
@kopf.on.event(GROUP, VERSION, PLURAL)
async def replica_event(namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    """Any change to an InferenceReplica: plan it again."""
    memo.controller.wake((namespace, name))


@kopf.on.event("", "v1", "pods", labels={LABEL_REPLICA: kopf.PRESENT})
async def pod_event(namespace: str, labels: dict[str, str], memo: kopf.Memo, **_: Any) -> None:
    """A pod of an InferenceReplica changed: plan its owner again."""
    memo.controller.wake((namespace, labels[LABEL_REPLICA]))


@kopf.on.event("discovery.k8s.io", "v1", "endpointslices", labels={LABEL_REPLICA: kopf.PRESENT})
async def slice_event(namespace: str, labels: dict[str, str], memo: kopf.Memo, **_: Any) -> None:
    """Routing changed (a drained pod left its Service): plan the owner again."""
    memo.controller.wake((namespace, labels[LABEL_REPLICA]))


# ---------------------------------------------------------------------------- the loop


class Controller:
    """One worker: woken keys are planned one at a time; each plan says when to look again."""

    def __init__(self, api: client.ApiClient, config_namespace: str) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.discovery = client.DiscoveryV1Api(api)
        self.config_namespace = config_namespace
        self.queue: asyncio.Queue[Key] = asyncio.Queue()
        self.queued: set[Key] = set()
        self.timers: dict[Key, asyncio.TimerHandle] = {}
        # the API server's refusals of the last pass's creates, for the next snapshot (an
        # observation handed on once, not a decision kept)
        self.create_errors: dict[Key, list[CreateError]] = {}

    def wake(self, key: Key, after: float = 0.0) -> None:
        """Plan ``key`` now (or in ``after`` seconds); repeated wakes coalesce."""
        if after > 0:
            old = self.timers.pop(key, None)
            if old is not None:
                old.cancel()
            self.timers[key] = asyncio.get_running_loop().call_later(after, self.wake, key)
            return
        if key not in self.queued:
            self.queued.add(key)
            self.queue.put_nowait(key)

    async def run(self) -> None:
        """Take keys off the queue forever."""
        while True:
            key = await self.queue.get()
            self.queued.discard(key)
            try:
                again = await self.reconcile(key)
            except Exception:
                log.exception("pass failed for %s/%s", *key)
                again = RETRY_SECONDS
            if again is not None:
                self.wake(key, max(again, 0.05))

    async def reconcile(self, key: Key) -> float | None:
        """One level-triggered pass: observe, plan, apply. Returns when to look again."""
        namespace, name = key
        try:
            raw = await call(self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, _preload_content=False))
        except ApiException as exc:
            if exc.status == 404:  # gone: nothing to remember
                self.create_errors.pop(key, None)
                return None
            raise
        try:
            replica = replica_from_json(raw)
            lifecycle = await self.lifecycle_config()
        except (CodecError, ConfigError) as exc:
            await self.emit(raw, [Event(type="Warning", reason="InvalidSpec", message=str(exc))])
            return RESYNC_SECONDS
        snapshot = await self.observe(key, replica, lifecycle)
        result = plan(snapshot)
        await self.emit(raw, result.events)
        try:
            await self.apply(key, raw, result.actions)
        except Stop as stop:
            log.info("%s/%s: pass stopped: %s", namespace, name, stop)
            return 0.05 if "conflict" in str(stop) else RETRY_SECONDS
        if result.requeue_after is not None:
            return min(result.requeue_after.total_seconds(), RESYNC_SECONDS)
        return RESYNC_SECONDS

    # ------------------------------------------------------------------ observe

    async def lifecycle_config(self) -> LifecycleConfig:
        """The ``lifecycle`` entry of ``inferenceservice-config`` (chart defaults if absent)."""
        try:
            cm = await call(self.core.read_namespaced_config_map(
                "inferenceservice-config", self.config_namespace, _preload_content=False))
        except ApiException as exc:
            if exc.status == 404:
                return LifecycleConfig()
            raise
        return parse_lifecycle_config((cm.get("data") or {}).get("lifecycle"))

    async def observe(self, key: Key, replica: InferenceReplica,
                      lifecycle: LifecycleConfig) -> Snapshot:
        """Read everything the core needs about one replica into a Snapshot."""
        namespace, name = key
        mine = f"{LABEL_REPLICA}={name}"
        service = headless_service_name(replica.prefix)
        pods = await call(self.core.list_namespaced_pod(
            namespace, label_selector=mine, _preload_content=False))
        nodes = await call(self.core.list_node(_preload_content=False))
        revisions = await call(self.apps.list_namespaced_controller_revision(
            namespace, label_selector=mine, _preload_content=False))
        slices = await call(self.discovery.list_namespaced_endpoint_slice(
            namespace, label_selector=f"kubernetes.io/service-name={service}",
            _preload_content=False))
        try:
            groups: dict[str, Any] | None = await call(self.custom.list_namespaced_custom_object(
                PG_GROUP, PG_VERSION, namespace, PG_PLURAL, label_selector=mine,
                _preload_content=False))
        except ApiException as exc:
            if exc.status != 404:
                raise
            groups = None  # the PodGroup CRD is not installed
        service_exists = await self._service_replica(service, namespace) is not None
        legacy = replica.legacy_prefix  # a standalone replica's pre-OME Service, if its own
        legacy_exists = legacy is not None and await self._service_replica(
            headless_service_name(legacy), namespace) == name
        node_views = (node_view_from_json(n) for n in nodes["items"])
        group_views = (pod_group_view_from_json(g) for g in (groups or {}).get("items", ()))
        return Snapshot(
            replica=replica,
            now=datetime.now(UTC),
            pods=tuple(pod_view_from_json(p) for p in pods["items"]),
            nodes={n.name: n for n in node_views},
            pod_groups={g.name: g for g in group_views},
            pod_group_crd=groups is not None,
            routed_pods=routed_pods_from_endpoint_slices(slices["items"]),
            revisions=tuple(revision_view_from_json(r) for r in revisions["items"]),
            create_errors=tuple(self.create_errors.pop(key, ())),
            config=lifecycle,
            headless_service_exists=service_exists,
            legacy_headless_service_exists=legacy_exists,
        )

    async def _service_replica(self, name: str, namespace: str) -> str | None:
        """The replica a Service is labelled with ("" for none); None: no such Service."""
        try:
            svc = await call(self.core.read_namespaced_service(name, namespace,
                                                               _preload_content=False))
        except ApiException as exc:
            if exc.status != 404:
                raise
            return None
        return str(((svc.get("metadata") or {}).get("labels") or {}).get(LABEL_REPLICA, ""))

    # ------------------------------------------------------------------ act

    async def apply(self, key: Key, raw: dict[str, Any], actions: Iterable[Action]) -> None:
        """Apply ``actions`` in order; raise ``Stop`` at the first one that did not land."""
        for action in actions:
            if isinstance(action, UpdateStatus):
                raw.update(await self.write_status(raw, action))
            elif isinstance(action, SetFinalizer):
                raw.update(await self.set_finalizer(raw, action))
            elif isinstance(action, RemoveAnnotations):
                raw.update(await self.patch_replica(raw, {"metadata": {
                    "annotations": dict.fromkeys(action.keys)}}))
            elif isinstance(action, SetServingGate):
                await self.patch_pod(action.name, key[0], gate_patch(action), status=True)
            elif isinstance(action, PatchPodImages):
                await self.patch_pod(action.name, key[0], images_patch(action), status=False)
            elif not (await self.create_one(key, raw, action)
                      or await self.delete_one(key[0], action)):
                # RecordAudit (migrations) and other objects: not in this example
                raise Stop(f"{action.kind} is not supported by this example")

    async def create_one(self, key: Key, raw: dict[str, Any], action: Action) -> bool:
        """Create what ``action`` creates (owned by the replica); False: not a create here."""
        namespace = key[0]
        if isinstance(action, CreatePod):
            call_ = self.core.create_namespaced_pod(
                namespace, owned(raw, action.body), _preload_content=False)
        elif isinstance(action, CreateRevision):
            call_ = self.apps.create_namespaced_controller_revision(
                namespace, owned(raw, action.body), _preload_content=False)
        elif isinstance(action, CreatePodGroup):
            call_ = self.custom.create_namespaced_custom_object(
                PG_GROUP, PG_VERSION, namespace, PG_PLURAL, owned(raw, action.body),
                _preload_content=False)
        elif isinstance(action, CreateObject) and action.body.get("kind") == "Service":
            call_ = self.core.create_namespaced_service(
                namespace, owned(raw, action.body), _preload_content=False)
        else:
            return False
        await self.create(key, action.body, call_)
        return True

    async def delete_one(self, namespace: str, action: Action) -> bool:
        """Delete what ``action`` deletes (UID precondition); False: not a delete here."""
        if isinstance(action, DeletePod):
            await delete(self.core.delete_namespaced_pod(
                action.name, namespace, body=delete_options(action.uid, action.force),
                _preload_content=False), f"Pod {action.name}")
        elif isinstance(action, DeleteRevision):
            await delete(self.apps.delete_namespaced_controller_revision(
                action.name, namespace, body=delete_options(action.uid),
                _preload_content=False), f"ControllerRevision {action.name}")
        elif isinstance(action, DeletePodGroup):
            await delete(self.custom.delete_namespaced_custom_object(
                PG_GROUP, PG_VERSION, namespace, PG_PLURAL, action.name,
                body=delete_options(action.uid), _preload_content=False),
                f"PodGroup {action.name}")
        elif isinstance(action, DeleteObject) and action.object_kind == "Service":
            await delete(self.core.delete_namespaced_service(
                action.name, namespace, _preload_content=False), f"Service {action.name}")
        else:
            return False
        return True

    async def write_status(self, raw: dict[str, Any], action: UpdateStatus) -> dict[str, Any]:
        """PUT the status subresource with the observed resourceVersion (409: stale view)."""
        meta = raw["metadata"]
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "InferenceReplica",
                "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                             "uid": meta["uid"], "resourceVersion": meta["resourceVersion"]},
                "spec": raw["spec"], "status": status_to_json(action.status)}
        try:
            return await call(self.custom.replace_namespaced_custom_object_status(
                GROUP, VERSION, meta["namespace"], PLURAL, meta["name"], body,
                _preload_content=False))
        except ApiException as exc:
            if exc.status in (404, 409):
                raise Stop(f"status write: conflict ({exc.status}): the view was stale") from None
            raise

    async def set_finalizer(self, raw: dict[str, Any], action: SetFinalizer) -> dict[str, Any]:
        """Add or drop the core's finalizer, guarded by the resourceVersion we last saw."""
        current = list(raw["metadata"].get("finalizers") or [])
        if action.present == (action.finalizer in current):
            return {}
        wanted = ([*current, action.finalizer] if action.present
                  else [f for f in current if f != action.finalizer])
        return await self.patch_replica(raw, {"metadata": {
            "finalizers": wanted, "resourceVersion": raw["metadata"]["resourceVersion"]}})

    async def patch_replica(self, raw: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
        """JSON merge patch on the InferenceReplica; 404/409 end the pass as stale."""
        meta = raw["metadata"]
        try:
            return await call(self.custom.patch_namespaced_custom_object(
                GROUP, VERSION, meta["namespace"], PLURAL, meta["name"], patch,
                _content_type="application/merge-patch+json", _preload_content=False))
        except ApiException as exc:
            if exc.status in (404, 409):
                raise Stop(f"replica patch: conflict ({exc.status})") from None
            raise

    async def create(self, key: Key, body: Mapping[str, Any], request: Awaitable[Any]) -> None:
        """A create: 409 AlreadyExists is success (names are deterministic); 422 and quota
        refusals go to the next snapshot as a ``CreateError`` and end the pass."""
        name = str(body["metadata"]["name"])
        try:
            await call(request)
        except ApiException as exc:
            if exc.status == 409:
                return
            message = error_message(exc)
            if exc.status == 422 or (exc.status == 403 and "exceeded quota" in message):
                reason = "Invalid" if exc.status == 422 else "QuotaExceeded"
                self.create_errors.setdefault(key, []).append(
                    CreateError(name=name, reason=reason, message=message,
                                at=datetime.now(UTC)))
                raise Stop(f"create {name}: {reason}: {message}") from None
            raise
        log.info("created %s %s", body.get("kind", ""), name)

    async def patch_pod(self, name: str, namespace: str, patch: dict[str, Any], *,
                        status: bool) -> None:
        """Strategic merge patch naming the pod's UID: a pod re-created under the same name
        is refused by the server, which ends the pass."""
        fn = self.core.patch_namespaced_pod_status if status else self.core.patch_namespaced_pod
        try:
            await call(fn(name, namespace, patch, _preload_content=False))
        except ApiException as exc:
            if exc.status in (404, 409, 422):
                raise Stop(f"pod {name} changed ({exc.status})") from None
            raise

    async def emit(self, raw: dict[str, Any], events: Iterable[Event]) -> None:
        """The plan's Events on the InferenceReplica (best effort)."""
        meta = raw["metadata"]
        for event in events:
            stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            body = {
                "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:12]}",
                             "namespace": meta["namespace"]},
                "involvedObject": {"apiVersion": f"{GROUP}/{VERSION}",
                                   "kind": "InferenceReplica", "name": meta["name"],
                                   "namespace": meta["namespace"], "uid": meta.get("uid")},
                "type": event.type, "reason": event.reason, "message": event.message,
                "source": {"component": "omenative-kopf"}, "count": 1,
                "firstTimestamp": stamp, "lastTimestamp": stamp,
            }
            try:
                await call(self.core.create_namespaced_event(meta["namespace"], body,
                                                             _preload_content=False))
            except ApiException as exc:
                log.warning("event %s not recorded: %s", event.reason, exc.status)


# ---------------------------------------------------------------------------- helpers


async def call(request: Awaitable[Any]) -> dict[str, Any]:
    """Await a kubernetes-asyncio call made with ``_preload_content=False``: its JSON, or an
    ``ApiException`` for a non-2xx answer (with raw responses the client does not raise)."""
    response = await asyncio.wait_for(request, REQUEST_TIMEOUT)
    try:
        raw = await asyncio.wait_for(response.read(), REQUEST_TIMEOUT)
    finally:
        response.release()
    if not 200 <= response.status <= 299:
        exc = ApiException(status=response.status, reason=response.reason)
        exc.body = raw.decode(errors="replace")
        raise exc
    data: dict[str, Any] = json.loads(raw)
    return data


async def delete(request: Awaitable[Any], what: str) -> None:
    """A delete: 404 (already gone) and 409 (the UID precondition failed: the name now
    belongs to a newer object, which this plan did not mean) are success."""
    try:
        await call(request)
    except ApiException as exc:
        if exc.status not in (404, 409):
            raise
        return
    log.info("deleted %s", what)


def delete_options(uid: str, force: bool = False) -> dict[str, Any]:
    """DeleteOptions with a UID precondition (and grace 0 when forced)."""
    options: dict[str, Any] = {"preconditions": {"uid": uid}} if uid else {}
    if force:
        options["gracePeriodSeconds"] = 0
    return options


def owned(raw: dict[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` with the InferenceReplica as its controller owner (so GC cleans up)."""
    meta = dict(body.get("metadata") or {})
    if not meta.get("ownerReferences"):
        meta["ownerReferences"] = [{
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "InferenceReplica",
            "name": raw["metadata"]["name"], "uid": raw["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}]
    return {**body, "metadata": meta}


def gate_patch(action: SetServingGate) -> dict[str, Any]:
    """The pod status patch that sets the ``ome.io/serving`` readiness gate."""
    return {"metadata": {"uid": action.uid}, "status": {"conditions": [{
        "type": SERVING_GATE, "status": "True" if action.value else "False",
        "reason": "InstanceServing" if action.value else "InstanceDraining",
        "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}]}}


def images_patch(action: PatchPodImages) -> dict[str, Any]:
    """The pod patch of an in-place image update (and its revision label)."""
    meta: dict[str, Any] = {"uid": action.uid}
    if action.labels:
        meta["labels"] = dict(action.labels)
    return {"metadata": meta, "spec": {"containers": [
        {"name": n, "image": i} for n, i in sorted(action.images.items())]}}


def error_message(exc: ApiException) -> str:
    """The Status message of an API error (or its reason)."""
    try:
        return str(json.loads(exc.body or "{}").get("message") or exc.reason)
    except (TypeError, ValueError):
        return str(exc.reason)


def main() -> None:
    """``python omenative_kopf.py [--namespace NS ...]``: run kopf standalone."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", action="append", default=[],
                        help="watch this namespace (repeat; default: the whole cluster)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if not args.verbose:  # kopf logs every handled watch event at INFO
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    kopf.run(standalone=True, namespaces=args.namespace, clusterwide=not args.namespace)


if __name__ == "__main__":
    main()

"""The manager's watch caches, built in one place.

One informer per resource the manager reads (InferenceReplicas, managed pods, nodes,
ControllerRevisions, headless Services, EndpointSlices), plus the PodGroup informers that
exist only while their API does. The manager and ``benchmarks/bench_memory.py`` both build
them here, so the benchmark measures exactly the caches the manager keeps.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from attrs import define

from omenative_controller.cache_views import (
    MANAGED_SELECTOR,
    FrozenCopy,
    ObjectRef,
    node_index,
    owner_index,
    pod_group_view,
    pod_view,
    ref_view,
    replica_view,
    revision_view,
    service_index,
    slice_view,
)
from omenative_controller.kube.apiwatch import NATIVE_GANG_VERSIONS, ApiPresence
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.crdwatch import CrdPresence
from omenative_controller.kube.informer import Informer, InformerObserver
from omenative_controller.kube.resources import (
    CONTROLLER_REVISIONS,
    ENDPOINT_SLICES,
    INFERENCE_REPLICAS,
    NODES,
    POD_GROUP_CRD,
    PODS,
    SERVICES,
    pod_groups,
)
from omenative_controller.routed import RoutedPods
from omenative_controller.wakeups import Wakeups
from omenative_core.labels import LABEL_REPLICA
from omenative_core.model.config import LifecycleConfig
from omenative_core.model.observed import CreateError, NodeView, PodView, Snapshot
from omenative_core.render import headless_service_name
from omenative_core.views import node_view_from_json

__all__ = ["LIST_PAGE", "WatchCaches", "build_watch_caches", "return_free_heap",
           "settle_after_sync"]

REPLICA_PAGE = 50
"""InferenceReplicas per LIST page: a replica with thousands of status rows parses to
megabytes, and a smaller page holds less of them in memory at once."""

LIST_PAGE = 100
"""Objects per LIST page of the other caches: a page is parsed whole before its objects are
slimmed into views, so a page of 500 pods held ~20 MB of parsed JSON at once and set the
manager's peak memory (``benchmarks/bench_memory.py``: 100 a page, the peak while the caches
sync fell from 149 to 136 MB at 10,000 pods); the cost is more LISTs at start (100 for
10,000 pods)."""

SliceHandler = Callable[[str | None, Any, Any], None]
"""The EndpointSlice change callback (the routed-pod set, then the wakeup)."""


@define
class WatchCaches:
    """Every informer of the manager; ``always`` are the ones that run from the start;
    ``node_map`` is the node cache as the Snapshots get it (one copy per change)."""

    replicas: Informer[Mapping[str, Any]]
    pods: Informer[PodView]
    nodes: Informer[NodeView]
    node_map: FrozenCopy[NodeView]
    revisions: Informer[Any]
    services: Informer[ObjectRef]
    slices: Informer[Any]  # SliceView (cache_views)
    pod_group_crd: CrdPresence
    native_gang: ApiPresence

    @property
    def always(self) -> tuple[Informer[Any], ...]:
        """The informers that list and watch for the manager's whole life."""
        return (self.replicas, self.pods, self.nodes, self.revisions, self.services,
                self.slices)

    def snapshot(self, key: str, replica: Any, *, routed: RoutedPods,
                 create_errors: tuple[CreateError, ...], config: LifecycleConfig) -> Snapshot:
        """The Snapshot of one InferenceReplica from the caches (no awaits inside): its
        pods, PodGroups and revisions by the owner index, all nodes, the routed pods of
        its headless Service, and whether that Service exists."""
        namespace = replica.metadata.namespace
        service = f"{namespace}/{headless_service_name(replica.prefix)}"
        routed_pods, legacy_service = routed.routed(service), False
        legacy = replica.legacy_prefix
        if legacy is not None:  # standalone: its pre-OME Service, while pods hang off it
            old = f"{namespace}/{headless_service_name(legacy)}"
            ref = self.services.get(old)
            legacy_service = ref is not None and ref.label(LABEL_REPLICA) == legacy
            if legacy_service and (old_routed := routed.routed(old)):
                routed_pods = routed_pods | old_routed
        crd = self.pod_group_crd
        pg_informer = crd.informer if crd.present else None
        pod_groups_map = (
            {v.name: v for v in pg_informer.by_index("owner", key)} if pg_informer else {}
        )
        return Snapshot(
            replica=replica,
            now=datetime.now(UTC),
            pods=tuple(self.pods.by_index("owner", key)),
            nodes=self.node_map.get(),
            pod_groups=pod_groups_map,
            pod_group_crd=pg_informer is not None,
            **self._native_gang_views(key),
            routed_pods=routed_pods,
            revisions=tuple(self.revisions.by_index("owner", key)),
            create_errors=create_errors,
            config=config,
            headless_service_exists=self.services.get(service) is not None,
            legacy_headless_service_exists=legacy_service,
        )

    def _native_gang_views(self, key: str) -> dict[str, Any]:
        """The Snapshot's view of Kubernetes' own Workloads and PodGroups of one replica."""
        native = self.native_gang
        if not native.present:
            return {}
        views = {kind: {v.name: v for v in informer.by_index("owner", key)}
                 for kind, informer in native.informers.items()}
        return {"native_gang_api": native.served or "",
                "native_pod_groups": views.get("PodGroup", {}),
                "workloads": views.get("Workload", {})}


def build_watch_caches(client: KubeClient, namespaces: Sequence[str] | None, wakeups: Wakeups,
                       on_slice: SliceHandler, observer: InformerObserver,
                       crd_poll_seconds: float) -> WatchCaches:
    """The manager's informers over ``namespaces`` (None: all), not yet running."""
    ns = namespaces or None
    m = observer
    gate = asyncio.Semaphore(1)  # one LIST at a time: the pages of two never interleave

    def owned(resource: Any, view: Callable[[JSON], Any]) -> Informer[Any]:
        return Informer(client, resource, view, namespaces=ns, label_selector=MANAGED_SELECTOR,
                        indexers={"owner": owner_index}, on_change=wakeups.owned, observer=m,
                        page_size=LIST_PAGE, list_gate=gate)

    def make_native(version: str) -> dict[str, Informer[Any]]:
        return {res.kind: owned(res, pod_group_view)
                for resources in NATIVE_GANG_VERSIONS for res in resources
                if res.api_version == version}

    def on_node(ns: str | None, old: NodeView | None, new: NodeView | None) -> None:
        node_map.changed()  # the copy first: the replicas woken read the new one
        wakeups.node(ns, old, new)

    nodes: Informer[NodeView] = Informer(client, NODES, node_view_from_json, on_change=on_node,
                                         observer=m, page_size=LIST_PAGE, list_gate=gate)
    node_map = FrozenCopy(nodes.store)
    return WatchCaches(
        replicas=Informer(client, INFERENCE_REPLICAS, replica_view, namespaces=ns,
                          on_change=wakeups.replica, observer=m, page_size=REPLICA_PAGE,
                          list_gate=gate),
        pods=Informer(client, PODS, pod_view, namespaces=ns,
                      label_selector=MANAGED_SELECTOR,
                      indexers={"owner": owner_index, "node": node_index},
                      on_change=wakeups.pod, observer=m, page_size=LIST_PAGE, list_gate=gate),
        nodes=nodes,
        node_map=node_map,
        revisions=owned(CONTROLLER_REVISIONS, revision_view),
        services=Informer(client, SERVICES, ref_view, namespaces=ns,
                          label_selector=MANAGED_SELECTOR, on_change=wakeups.owned, observer=m,
                          page_size=LIST_PAGE, list_gate=gate),
        slices=Informer(client, ENDPOINT_SLICES, slice_view, namespaces=ns,
                        label_selector=LABEL_REPLICA, indexers={"service": service_index},
                        on_change=on_slice, observer=m, page_size=LIST_PAGE, list_gate=gate),
        pod_group_crd=CrdPresence(
            client, POD_GROUP_CRD, lambda version: owned(pod_groups(version), pod_group_view),
            interval=crd_poll_seconds, on_change=lambda _present: wakeups.all()),
        native_gang=ApiPresence(client, NATIVE_GANG_VERSIONS, make_native,
                                interval=crd_poll_seconds,
                                on_change=lambda _present: wakeups.all()),
    )


def return_free_heap() -> bool:
    """Give the C heap's free pages back to the system (glibc only; elsewhere a no-op).

    A foreign call through ``ctypes.CDLL`` runs without the GIL: in a worker thread
    (``asyncio.to_thread``) it does not hold the event loop."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.malloc_trim(0))
    except (OSError, AttributeError):
        return False


def settle_after_sync() -> None:
    """Once every cache has synced: move what the initial LISTs left out of the
    collector's reach (the caches are long-lived and acyclic, so every full collection
    would walk them all, holding the event loop). Call ``return_free_heap`` after it.

    Only the young generations are collected first: a full collection here walked the
    whole heap on the loop (35 ms at 2,000 pods, ``benchmarks/loop_callbacks.py``), to
    free the few reference cycles of the start (87 objects there); those stay frozen.

    The full collection after the freeze walks nothing, and that is its point: CPython
    starts a full collection once a quarter of what survived the last one has reached the
    old generation, and the last one, during the initial LISTs, had the whole heap. From
    here on ``gc_pacer.GcPacer`` runs the full collections (when the manager is quiet), and
    a process that uses this without it (``benchmarks/bench_memory.py``) starts its next
    one early and small rather than after the whole heap was promoted again."""
    gc.collect(1)
    gc.freeze()
    gc.collect()

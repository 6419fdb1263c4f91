"""Notice a built-in API group/version being served, and run its informers meanwhile.

Kubernetes serves gang scheduling (``Workload`` and ``PodGroup``) only when the cluster
enables it: 1.37 as ``scheduling.k8s.io/v1beta1`` (gate ``GenericWorkload``), 1.36 as
``v1alpha2`` (gates ``GenericWorkload``, ``GangScheduling``), each with ``--runtime-config``.
Like ``CrdPresence`` for a CRD, ``ApiPresence`` polls discovery (``GET /apis/<group>/<version>``
for each candidate version, the preferred first) every few seconds; while every wanted
resource of one version is listed it runs one informer per resource, and ``present`` turns
True once all of them have synced (so the core never sees "served" with an empty cache) and
False as soon as the version is gone (the caches are dropped; a cluster upgraded to another
version starts those of the new one). Transient API errors keep the last known state; the
loop is ``kube/presence.py``'s, shared with ``CrdPresence``. Discovery is readable by every
authenticated user.

``failing`` says when a served version's objects cannot be listed (a 1.37 API server over
objects a 1.36 one stored as ``v1alpha2`` answers every LIST with an error): the manager then
reconciles without native gangs rather than wait for a cache that never syncs.

``ServedInformers`` runs each of some informers of one group/version while discovery lists
its resource (the InferenceService controller's informers, whose CRDs may be absent).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.informer import Informer
from omenative_controller.kube.presence import UNKNOWN, Presence, Unknown
from omenative_controller.kube.resources import Resource

__all__ = [
    "NATIVE_GANG_VERSIONS",
    "NATIVE_POD_GROUPS",
    "NATIVE_POD_GROUPS_ALPHA",
    "WORKLOADS",
    "WORKLOADS_ALPHA",
    "ApiPresence",
    "ServedInformers",
    "served_resources",
]

log = structlog.get_logger("omenative.apiwatch")

NATIVE_POD_GROUPS = Resource("scheduling.k8s.io", "v1beta1", "podgroups", "PodGroup")
"""Kubernetes' own PodGroup (1.37, beta)."""
WORKLOADS = Resource("scheduling.k8s.io", "v1beta1", "workloads", "Workload")
"""Kubernetes' own Workload (1.37, beta)."""
NATIVE_POD_GROUPS_ALPHA = Resource("scheduling.k8s.io", "v1alpha2", "podgroups", "PodGroup")
"""Kubernetes' own PodGroup (1.36, alpha)."""
WORKLOADS_ALPHA = Resource("scheduling.k8s.io", "v1alpha2", "workloads", "Workload")
"""Kubernetes' own Workload (1.36, alpha)."""
NATIVE_GANG_VERSIONS: tuple[tuple[Resource, ...], ...] = (
    (NATIVE_POD_GROUPS, WORKLOADS), (NATIVE_POD_GROUPS_ALPHA, WORKLOADS_ALPHA))
"""The native gang API's resources per version, the preferred version first."""

#: LIST failures in a row after which a served version counts as ``failing``
FAILING_AFTER = 3


class ApiPresence(Presence):
    """Poll candidate versions of an API; while one serves its resources run their informers.

    The loop is ``Presence``'s; the key is the first group/version (of ``versions``, the
    preferred first) that lists every wanted resource; ``make_informers`` gets it.
    """

    def __init__(
        self,
        client: KubeClient,
        versions: Sequence[Sequence[Resource]],
        make_informers: Callable[[str], Mapping[str, Informer[Any]]],
        *,
        interval: float = 5.0,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        self.versions = tuple(tuple(v) for v in versions)
        self.group_versions = tuple(v[0].api_version for v in self.versions)
        super().__init__(" or ".join(self.group_versions), interval=interval,
                         on_change=on_change)
        self.client = client
        self.make_informers = make_informers

    async def _probe(self) -> str | Unknown | None:
        """The first group/version serving every resource, None when none, else ``UNKNOWN``."""
        for resources in self.versions:
            group_version = resources[0].api_version
            served = await served_resources(self.client, group_version)
            if served is UNKNOWN:
                return UNKNOWN
            if served is not None and all(r.plural in served for r in resources):
                return group_version
        return None

    def _make_informers(self, served: str) -> Mapping[str, Informer[Any]]:
        return self.make_informers(served)

    @property
    def failing(self) -> str:
        """Why a served version's objects cannot be read ("" when they can): its informers
        failed ``FAILING_AFTER`` LISTs in a row and have not synced."""
        if self.present:
            return ""
        for informer in self.informers.values():
            if informer.list_failures >= FAILING_AFTER and not informer.synced.is_set():
                return f"LIST {self.served} {informer.name}: {informer.list_error}"
        return ""


async def served_resources(client: KubeClient, group_version: str
                           ) -> frozenset[str] | Unknown | None:
    """The resources discovery lists for ``group_version`` (``GET /apis/<gv>``): None when
    the group/version is not served, ``UNKNOWN`` on another API error."""
    try:
        found = await client.request("GET", f"/apis/{group_version}", verb="get",
                                     resource="discovery")
    except ApiError as exc:
        if exc.not_found:
            return None
        log.warning("apiwatch.probe_failed", api=group_version, status=exc.status,
                    reason=exc.reason)
        return UNKNOWN
    return frozenset(str(r.get("name")) for r in found.get("resources") or ()
                     if isinstance(r, Mapping))


class ServedInformers(Presence):
    """Run each of some informers of one API group/version while discovery lists its
    resource: one ``GET /apis/<gv>`` per poll for all of them, never a LIST of a collection
    that does not exist (an absent CRD answers every LIST with 404).

    The key is the set of wanted resources served; when it changes, the informers are
    stopped (caches dropped) and those served now started again (a CRD installed or removed:
    rare). ``present`` turns True once they have synced.
    """

    def __init__(self, client: KubeClient, informers: Sequence[Informer[Any]], *,
                 interval: float = 5.0) -> None:
        group_version = informers[0].resource.api_version
        super().__init__(group_version, interval=interval, on_change=None)
        self.client = client
        self.group_version = group_version
        self.wanted = {informer.name: informer for informer in informers}

    def serves(self, name: str) -> bool:
        """True while the resource of the informer ``name`` is served (its informer runs)."""
        return name in self.informers

    async def _probe(self) -> str | Unknown | None:
        """The wanted resources served, comma-joined; None when none is; ``UNKNOWN``."""
        served = await served_resources(self.client, self.group_version)
        if served is UNKNOWN or served is None:
            return served
        return ",".join(sorted(name for name in self.wanted if name in served)) or None

    def _make_informers(self, served: str) -> Mapping[str, Informer[Any]]:
        return {name: self.wanted[name] for name in served.split(",")}

    async def wait_synced(self, timeout: float) -> None:
        """Until the first answer, then until each informer of a served resource listed
        once (at most ``timeout`` each)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self.checked.wait()
        for informer in list(self.informers.values()):
            await informer.wait_synced(timeout)

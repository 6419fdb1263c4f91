"""Notice a built-in API group/version being served, and run its informers meanwhile.

Kubernetes 1.36 serves gang scheduling (``scheduling.k8s.io/v1alpha2``: ``Workload`` and
``PodGroup``) only when the cluster enables it (feature gates ``GenericWorkload``,
``GangScheduling`` and ``--runtime-config``). Like ``CrdPresence`` for a CRD, ``ApiPresence``
polls discovery (``GET /apis/<group>/<version>``) every few seconds; while every wanted
resource is listed it runs one informer per resource, and ``present`` turns True once all
of them have synced (so the core never sees "served" with an empty cache) and False as
soon as the group/version is gone (the caches are dropped). Transient API errors keep the
last known state; the loop is ``kube/presence.py``'s, shared with ``CrdPresence``.
Discovery is readable by every authenticated user.

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

__all__ = ["NATIVE_POD_GROUPS", "WORKLOADS", "ApiPresence", "ServedInformers", "served_resources"]

log = structlog.get_logger("omenative.apiwatch")

NATIVE_POD_GROUPS = Resource("scheduling.k8s.io", "v1alpha2", "podgroups", "PodGroup")
"""Kubernetes' own PodGroup (1.36, alpha)."""
WORKLOADS = Resource("scheduling.k8s.io", "v1alpha2", "workloads", "Workload")
"""Kubernetes' own Workload (1.36, alpha)."""


class ApiPresence(Presence):
    """Poll one API group/version; while it serves ``resources`` run their informers.

    The loop is ``Presence``'s; the key is the group/version, served only when every
    wanted resource is listed.
    """

    def __init__(
        self,
        client: KubeClient,
        resources: Sequence[Resource],
        make_informers: Callable[[], Mapping[str, Informer[Any]]],
        *,
        interval: float = 5.0,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        resources = tuple(resources)
        super().__init__(resources[0].api_version, interval=interval, on_change=on_change)
        self.client = client
        self.resources = resources
        self.group_version = resources[0].api_version
        self.make_informers = make_informers

    async def _probe(self) -> str | Unknown | None:
        """The group/version when every resource is served, None when not, else ``UNKNOWN``."""
        served = await served_resources(self.client, self.group_version)
        if served is UNKNOWN or served is None:
            return served
        return self.group_version if all(r.plural in served for r in self.resources) else None

    def _make_informers(self, served: str) -> Mapping[str, Informer[Any]]:
        return self.make_informers()


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

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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.informer import Informer
from omenative_controller.kube.presence import UNKNOWN, Presence, Unknown
from omenative_controller.kube.resources import Resource

__all__ = ["NATIVE_POD_GROUPS", "WORKLOADS", "ApiPresence"]

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
        try:
            found = await self.client.request(
                "GET", f"/apis/{self.group_version}", verb="get", resource="discovery")
        except ApiError as exc:
            if exc.not_found:
                return None
            log.warning("apiwatch.probe_failed", api=self.group_version, status=exc.status,
                        reason=exc.reason)
            return UNKNOWN
        served = {str(r.get("name")) for r in found.get("resources") or ()
                  if isinstance(r, Mapping)}
        return self.group_version if all(r.plural in served for r in self.resources) else None

    def _make_informers(self, served: str) -> Mapping[str, Informer[Any]]:
        return self.make_informers()

"""Notice a CRD appearing or going away without a restart, and run its informer meanwhile.

The shell's one CRD-presence watcher. The IR manager uses it for the scheduler-plugins
PodGroup CRD: while ``podgroups.scheduling.x-k8s.io`` is installed and Established, a
PodGroup informer runs; ``present`` turns True only once that informer has synced (so the
core never sees "CRD present" with an empty cache), and False as soon as the CRD is gone
(the cache is dropped). The InferenceService controller uses it without an informer for the
optional CRDs it renders for (LeaderWorkerSet, PodMonitor, PodGroup): ``present`` follows
the CRD being Established. The CRD is polled every few seconds (the loop is ``kube/presence.py``'s);
transient API errors keep the last known state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import structlog

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.informer import Informer
from omenative_controller.kube.presence import UNKNOWN, Presence, Unknown
from omenative_controller.kube.resources import CRDS

__all__ = ["CrdPresence", "served_version"]

log = structlog.get_logger("omenative.crdwatch")


def served_version(crd: JSON) -> str | None:
    """The storage version if served, else the first served version; None if unusable."""
    spec = crd.get("spec") or {}
    versions = [v for v in spec.get("versions") or () if v.get("served")]
    if not versions:
        return None
    for v in versions:
        if v.get("storage"):
            return str(v["name"])
    return str(versions[0]["name"])


def _established(crd: JSON) -> bool:
    if (crd.get("metadata") or {}).get("deletionTimestamp"):
        return False
    for cond in (crd.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Established":
            return bool(cond.get("status") == "True")
    return False


class CrdPresence(Presence):
    """Poll one CRD; while it is Established run ``make_informer(version)`` (if given).

    The loop is ``Presence``'s; the key is the CRD's usable version, so a change of served
    version restarts the informer on the new one.
    """

    def __init__(
        self,
        client: KubeClient,
        crd_name: str,
        make_informer: Callable[[str], Informer[Any]] | None = None,
        *,
        interval: float = 5.0,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        super().__init__(crd_name, interval=interval, on_change=on_change)
        self.client = client
        self.crd_name = crd_name
        self.make_informer = make_informer

    @property
    def version(self) -> str | None:
        """The CRD version in use (None: the CRD is not installed and Established)."""
        return self.served

    @version.setter
    def version(self, value: str | None) -> None:
        self.served = value

    @property
    def informer(self) -> Informer[Any] | None:
        """The running informer (None: the CRD is absent, or no informer was asked for)."""
        return next(iter(self.informers.values()), None)

    async def _probe(self) -> str | Unknown | None:
        """The usable version, None when absent, ``UNKNOWN`` on an API error."""
        try:
            crd = await self.client.get(CRDS, self.crd_name)
        except ApiError as exc:
            if exc.not_found:
                return None
            log.warning("crdwatch.probe_failed", crd=self.crd_name, status=exc.status,
                        reason=exc.reason)
            return UNKNOWN
        return served_version(crd) if _established(crd) else None

    def _make_informers(self, served: str) -> Mapping[str, Informer[Any]]:
        if self.make_informer is None:
            return {}
        informer = self.make_informer(served)
        return {informer.name: informer}

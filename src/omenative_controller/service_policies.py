"""OME's AutoscalerPolicies, watched while their CRD is served, and their status written.

OME v1.3's switch for the alpha feature is the CRD: ``ome.autoscalerPolicy.enabled`` in
OME's charts installs ``autoscalerpolicies.ome.io`` and OME's manager turns the feature on
when it finds the CRD (ome-docs ``concepts/serving/autoscaler-policy.md``, "Turn on the
feature"). Here the discovery poll (``ServedInformers``) does the same without a restart:
while ``ome.io/v1beta1`` lists ``autoscalerpolicies``, the cache runs and each ISVC pass gets
its namespace's policies (``of``); otherwise ``of`` is None and a reference is kept and
ignored (OME's behaviour with the feature off; its webhook refuses the reference,
``AutoscalerPolicyFeatureDisabled``).

A policy whose spec changes (or that comes or goes) queues the InferenceServices of its
namespace that reference it, so a policy edit re-renders its users. ``run`` keeps each
policy's status (``omenative_core.service.policy_status``: ``Ready``, ``InUse``,
``attachedComponents``) true after any policy change or any change of an InferenceService's
references, with a merge patch of the status subresource when it differs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import structlog

from omenative_controller.kube.apiwatch import ServedInformers
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.informer import Informer, object_key
from omenative_controller.kube.resources import Resource
from omenative_controller.kube.tasks import cancel_and_wait
from omenative_core.service.policy_status import policy_status, referencing

__all__ = ["AUTOSCALER_POLICIES", "Policies"]

log = structlog.get_logger("omenative.isvc")

AUTOSCALER_POLICIES: Final = Resource("ome.io", "v1beta1", "autoscalerpolicies",
                                      "AutoscalerPolicy")
"""OME's AutoscalerPolicy resource (alpha; its CRD may be absent)."""


def _meta(obj: JSON | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


class Policies:
    """The AutoscalerPolicy cache and status writer. ``isvcs``: the InferenceService cache;
    ``enqueue``: queues an ISVC key; ``providers``: the current metric provider bindings."""

    def __init__(self, client: KubeClient, namespaces: Sequence[str] | None,
                 isvcs: Informer[JSON], enqueue: Callable[[str], None], *,
                 providers: Callable[[], Mapping[str, Mapping[str, Any]]],
                 now: Callable[[], datetime], guard: Callable[[], bool] = lambda: True,
                 interval: float = 30.0) -> None:
        self.client = client
        self.isvcs = isvcs
        self.enqueue = enqueue
        self.providers = providers
        self.now = now
        self.guard = guard
        self.informer: Informer[JSON] = Informer(
            client, AUTOSCALER_POLICIES, dict, namespaces=namespaces, on_change=self._changed)
        self.served = ServedInformers(client, (self.informer,), interval=interval)
        """Runs the cache while discovery lists the CRD (polled)."""
        self._dirty = asyncio.Event()

    def enabled(self) -> bool:
        """The feature is on: OME's CRD is served and the cache runs."""
        return self.served.serves(self.informer.name)

    def of(self, namespace: str) -> tuple[Mapping[str, Any], ...] | None:
        """The policies of ``namespace`` (None: the feature is off)."""
        if not self.enabled():
            return None
        return tuple(obj for _key, obj in self.informer.items()
                     if _meta(obj).get("namespace") == namespace)

    def _changed(self, namespace: str | None, old: JSON | None, new: JSON | None) -> None:
        self._dirty.set()
        if old is not None and new is not None and old.get("spec") == new.get("spec") and \
                _meta(old).get("deletionTimestamp") == _meta(new).get("deletionTimestamp"):
            return  # a status write (ours) or a label: nothing an ISVC pass reads
        obj = new if new is not None else old
        assert obj is not None
        ns, name = str(_meta(obj).get("namespace") or namespace or ""), _meta(obj).get("name")
        for key, isvc in self.isvcs.items():
            if _meta(isvc).get("namespace") == ns and name in referencing(isvc):
                self.enqueue(key)

    def mark(self) -> None:
        """Look at every policy's status again (a resync, new provider bindings)."""
        self._dirty.set()

    def isvc_changed(self, old: JSON | None, new: JSON | None) -> None:
        """An InferenceService changed: its references may count differently now."""
        if referencing(old or {}) != referencing(new or {}):
            self._dirty.set()

    async def sync(self) -> int:
        """Write every policy status that differs; the number written."""
        if not self.enabled() or not self.guard():
            return 0
        isvcs = [obj for _key, obj in self.isvcs.items()]
        providers = self.providers()
        written = 0
        for _key, policy in list(self.informer.items()):
            meta = _meta(policy)
            if meta.get("deletionTimestamp"):
                continue
            status = policy_status(policy, isvcs, providers, self.now())
            if status == policy.get("status"):
                continue
            try:
                await self.client.patch(AUTOSCALER_POLICIES, str(meta.get("name")),
                                        {"status": status}, str(meta.get("namespace")),
                                        subresource="status")
            except ApiError as exc:
                log.info("policy.status_failed", policy=object_key(
                    str(meta.get("namespace")), str(meta.get("name"))), error=exc.message)
                continue
            written += 1
        return written

    async def run(self) -> None:
        """Until cancelled: the cache while served, and after each change the statuses."""
        served = asyncio.create_task(self.served.run(), name="isvc-policies-served")
        try:
            while True:
                await self._dirty.wait()
                self._dirty.clear()
                try:
                    await self.sync()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # a bug here must not stop the ISVC controller
                    log.exception("policy.status_sync_failed", error=str(exc))
        finally:
            await cancel_and_wait([served])

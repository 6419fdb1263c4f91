"""Kueue pod groups end with their Workload (KEP-976).

Kueue keeps its finalizer on a group's deleted pods until that Workload goes, so without
this a retired Instance never disappears. After a pass, a Kueue-managed pod group of the
InferenceReplica whose cached pods are all terminating gets its Workload deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import structlog
from attrs import define, field

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import Resource
from omenative_controller.observability import Metrics
from omenative_controller.pass_context import PassContext
from omenative_core.labels import LABEL_KUEUE_POD_GROUP
from omenative_core.model.observed import PodView

__all__ = ["KUEUE_MANAGED_LABEL", "KUEUE_WORKLOADS", "KueueGroups"]

KUEUE_MANAGED_LABEL = "kueue.x-k8s.io/managed"
"""Kueue's webhook sets this label to ``"true"`` on the pods it manages (and gates)."""
KUEUE_WORKLOADS = (
    Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload"),
    Resource("kueue.x-k8s.io", "v1beta1", "workloads", "Workload"),
)
"""Kueue's Workload, newest API version first (v1beta1 for Kueue before v0.15)."""


@define
class KueueGroups:
    """Ends the Workload of each retired Kueue pod group, once per set of pod UIDs."""

    client: KubeClient
    pods_of: Callable[[str], Iterable[PodView]] | None = None
    guard: Callable[[], bool] = lambda: True
    metrics: Metrics | None = None
    #: per InferenceReplica key: Kueue group -> the pod UIDs whose Workload was ended
    _ended_groups: dict[str, dict[str, frozenset[str]]] = field(factory=dict)

    def _count_failure(self, kind: str, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.action_failures.labels(kind, reason).inc()

    def _log(self, ctx: PassContext) -> Any:
        return ctx.log if ctx.log is not None else structlog.get_logger("omenative.executor")

    async def end(self, ctx: PassContext) -> None:
        """Delete the Kueue Workload of each retired pod group of this InferenceReplica.

        A group is retired when every cached pod carrying its
        ``kueue.x-k8s.io/pod-group-name`` (and Kueue's ``managed`` label) is terminating:
        omenative deleted the attempt (restart into a new incarnation, scale-down, the old
        Instance of an update, teardown). Kueue holds those pods with its finalizer until a
        replacement joins the group, the group finishes (a serving group never does) or
        the Workload is deleted; only the last applies, so omenative deletes it (Kueue's
        documented way to end a pod group, KEP-976) and Kueue then releases the pods.
        Level-triggered: it looks at the cache on every pass, so a manager restart between
        the pod deletes and this step loses nothing. Failures are logged and retried on a
        later pass; they never fail the plan.
        """
        if self.pods_of is None:
            return
        groups: dict[str, list[PodView]] = {}
        for pod in self.pods_of(ctx.key):
            group = pod.labels.get(LABEL_KUEUE_POD_GROUP)
            if group and pod.labels.get(KUEUE_MANAGED_LABEL) == "true":
                groups.setdefault(group, []).append(pod)
        done = self._ended_groups.get(ctx.key, {})
        kept: dict[str, frozenset[str]] = {}
        for group, pods in sorted(groups.items()):
            if any(p.deletion_timestamp is None for p in pods):
                continue  # a live pod: the group still serves (or a pod is being replaced)
            uids = frozenset(p.uid for p in pods)
            if done.get(group) == uids:
                kept[group] = uids
                continue
            if not self.guard():
                break
            try:
                await self._delete_workload(ctx, group, uids)
            except ApiError as exc:
                self._count_failure("DeleteKueueWorkload", exc.reason)
                self._log(ctx).warning("kueue.workload_delete_failed", group=group,
                                       reason=exc.reason, error=exc.message)
                continue
            kept[group] = uids
        if kept:
            self._ended_groups[ctx.key] = kept
        else:
            self._ended_groups.pop(ctx.key, None)

    async def _delete_workload(self, ctx: PassContext, group: str, pod_uids: frozenset[str]
                               ) -> None:
        """Delete the Workload Kueue made for ``group``, if one of ``pod_uids`` owns it.

        Kueue names a pod group's Workload after the group and makes every pod of the group
        an owner; the owner check keeps omenative off a Workload of the same name that is
        not this group's. The delete carries the Workload's UID as a precondition.
        """
        lg = self._log(ctx)
        for res in KUEUE_WORKLOADS:
            try:
                workload = await self.client.get(res, group, ctx.namespace)
            except ApiError as exc:
                if exc.not_found:
                    continue  # not at this version (or already gone)
                raise
            meta = workload.get("metadata") or {}
            owners = {str(r.get("uid")) for r in meta.get("ownerReferences") or ()
                      if isinstance(r, Mapping) and r.get("kind") == "Pod"}
            if not owners & pod_uids:
                lg.warning("kueue.workload_not_owned", group=group,
                           message="a Workload of this name is not owned by the group's pods")
                return
            if meta.get("deletionTimestamp"):
                return
            try:
                await self.client.delete(res, group, ctx.namespace, uid=str(meta.get("uid")))
            except ApiError as exc:
                if exc.not_found or exc.status == 409:
                    return
                raise
            if self.metrics is not None:
                self.metrics.actions.labels("DeleteKueueWorkload").inc()
            lg.info("kueue.workload_deleted", group=group, pods=len(pod_uids))
            return
        lg.debug("kueue.workload_gone", group=group)

"""A discrete-event model of one namespace of a GPU cluster, for one InferenceReplica.

Theory of operation:

1. Time is a float number of seconds since ``World.epoch``; it only moves forward.
   ``advance(t)`` runs every queued event due at or before ``t``; ``snapshot(t)`` and
   ``apply(plan, t)`` advance first. ``next_event_time()`` says when something will next
   change on its own (a container starts, a pod finishes terminating, ...).
2. ``apply`` performs the core's actions in order, as the shell's executor would: a create
   whose name exists is "AlreadyExists" (success, no change), a delete or gate change
   whose UID precondition fails is a no-op, and the first action the API would refuse
   (a PodGroup without its CRD) stops the plan. After the actions the scheduler runs.
3. The scheduler binds Pending pods to Ready nodes with free ``nvidia.com/gpu``. Pods
   carrying ``scheduling.x-k8s.io/pod-group`` are a gang (all placed or none, only once
   their PodGroup exists and ``minMember`` pods are there) when the cluster runs gang
   scheduling and the PodGroup CRD is installed; otherwise pods are placed one by one.
   Required node affinity, nodeSelector and required pod (anti-)affinity are honoured,
   preferred node affinity scores; among equals it bin-packs, then breaks ties with the
   world's seeded ``random.Random``. Topology spread constraints are not modelled.
4. The kubelet: a bound pod gets an IP; after ``pod_start_seconds`` its containers run
   (phase Running), after ``pod_ready_seconds`` more they are ready (ContainersReady).
   Ready needs ContainersReady and every readiness gate of the pod spec True (the
   ``ome.io/serving`` condition is set by ``SetServingGate``). An image listed by
   ``add_bad_image`` fails to pull (``ErrImagePull``, then ``ImagePullBackOff``).
   ``PatchPodImages`` restarts just the changed containers (start and ready delays again).
5. Deletion: a graceful delete sets ``deletionTimestamp`` (now + the pod's grace period)
   and the pod, with its GPUs, goes ``termination_seconds`` later; a force delete removes
   it at once. Pods on a lost node never finish terminating unless forced.
6. Endpoints: a pod is routed while Ready and not terminating, and for
   ``endpoint_delay_seconds`` after it stops being so.
7. Faults. ``fail_pod``: the main container (``ome-container``, else the first) exits
   with code 1, reason Error, and the pod turns Failed (it keeps its GPUs until deleted).
   ``fail_node``: the node stops heartbeating at once (its kubelet does nothing more); after
   ``node_monitor_grace_seconds`` the node's Ready turns Unknown and its pods' Ready
   condition False (reason NodeNotReady; container statuses stay as last reported, as in
   Kubernetes); ``eviction_seconds`` later the taint manager deletes them gracefully, which
   never completes. ``add_bad_image``: later pulls of that image fail.

Pod views are cached per pod and the snapshot's pod tuple per change, so a step costs in
proportion to what changed, not to the number of pods.
"""

from __future__ import annotations

import attrs

from omenative_core.model.config import LifecycleConfig
from omenative_core.model.observed import (
    PodGroupView,
    PodView,
    Snapshot,
)
from omenative_core.render import headless_service_name
from omenative_sim.apiserver import ApplyResult, _ApiServer, merge_patch
from omenative_sim.objects import GPU_RESOURCE, MAIN_CONTAINER, SimContainer, SimPod, pod_gpus
from omenative_sim.state import EPOCH, ClusterSpec, WorldError

__all__ = [
    "EPOCH",
    "GPU_RESOURCE",
    "MAIN_CONTAINER",
    "ApplyResult",
    "ClusterSpec",
    "SimContainer",
    "SimPod",
    "World",
    "WorldError",
    "merge_patch",
    "pod_gpus",
]


class World(_ApiServer):
    """The simulated cluster for one InferenceReplica: apply plans, take snapshots.

    Its parts, one concept each: ``state`` (clock, queue, change tracking), ``scheduler``,
    ``events`` (time passing, pods, faults), ``apiserver`` (actions, the replica object).
    """

    def snapshot(self, now: float | None = None) -> Snapshot:
        """One consistent view at ``now`` (default: the world's time), as the shell builds it."""
        if now is not None:
            self.advance(now)
        if self._pods_cache is None:
            self._pods_cache = tuple(self._pod_view(p) for p in self.pods.values())
        if self._nodes_cache is None:
            self._nodes_cache = {n.name: n.view() for n in self.nodes.values()}
        if self._pg_cache is None:
            self._pg_cache = {
                g.name: PodGroupView(name=g.name, uid=g.uid, labels=dict(g.labels))
                for g in self.pod_groups.values()
            }
        if self._rev_cache is None:
            self._rev_cache = tuple(self.revisions.values())
        if self._routed_cache is None:
            self._routed_cache = frozenset(p.name for p in self.pods.values() if p.routed)
        legacy = self.replica.legacy_prefix
        headless = ("Service", headless_service_name(self.replica.prefix)) in self.objects
        old = legacy is not None and ("Service", headless_service_name(legacy)) in self.objects
        return Snapshot(
            replica=self.replica,
            now=self.time(self.now),
            pods=self._pods_cache,
            nodes=self._nodes_cache,
            pod_groups=self._pg_cache,
            pod_group_crd=self.cluster.pod_group_crd,
            routed_pods=self._routed_cache,
            revisions=self._rev_cache,
            config=self._config(),
            headless_service_exists=headless,
            legacy_headless_service_exists=old,
        )

    def _config(self) -> LifecycleConfig:
        """The lifecycle config; ``Auto`` gang scheduling means PodGroups here, because the
        simulated scheduler honours them whatever ``schedulerName`` the pods carry."""
        if self.config.gang_scheduling == "Auto" and self.cluster.gang_scheduling:
            return attrs.evolve(self.config, gang_scheduling="PodGroup")
        return self.config

    def _pod_view(self, pod: SimPod) -> PodView:
        if pod.view_cache is not None:
            return pod.view_cache
        conditions: dict[str, str] = {}
        reasons: dict[str, str] = {}
        if pod.node is not None:
            conditions["PodScheduled"] = "True"
            conditions["Initialized"] = "True"
            cr = pod.containers_ready
            conditions["ContainersReady"] = "True" if cr else "False"
            if not cr:
                reasons["ContainersReady"] = "PodFailed" if pod.failed else "ContainersNotReady"
            conditions["Ready"] = "True" if pod.ready else "False"
            if not pod.ready:
                reasons["Ready"] = (
                    "NodeNotReady"
                    if pod.node_lost
                    else "PodFailed"
                    if pod.failed
                    else "ContainersNotReady"
                    if not cr
                    else "ReadinessGatesNotReady"
                )
        else:
            conditions["PodScheduled"] = "False"
            if pod.sched_reason:
                reasons["PodScheduled"] = pod.sched_reason
        conditions.update(pod.gates)
        view = PodView(
            name=pod.name,
            uid=pod.uid,
            labels=dict(pod.labels),
            node_name=pod.node,
            phase=pod.phase,
            conditions=conditions,
            condition_reasons=reasons,
            containers=tuple(c.view() for c in pod.containers) if pod.node is not None else (),
            images={c.name: c.image for c in pod.containers},
            deletion_timestamp=pod.deletion_timestamp,
            creation_timestamp=self._stamp(pod.created_at),
            scheduling_gates=pod.scheduling_gates,
            pod_ip=pod.ip,
            annotations=dict(pod.annotations),
        )
        pod.view_cache = view
        return view

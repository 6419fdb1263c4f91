"""Pod primitives every step uses: create, drain (gate off, wait unrouted, delete).

``drain`` is the one way a pod leaves: its ``ome.io/serving`` gate goes False, the pass
waits until the EndpointSlices stop routing to it, then deletes it. A pod that already
ended, or whose node is lost, is deleted at once. A pod stuck Terminating on a node that
is dead (gone, unreachable-tainted or not Ready for ``nodeUnreachableThreshold``) is
force-deleted only when ``forceDelete`` is configured, ``overdueSlack`` past its deletion
(an audit entry records it); one with finalizers is reported, never force-deleted.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from omenative_core.gang import MECHANISM_NATIVE, MECHANISM_POD_GROUP
from omenative_core.model.observed import PodView
from omenative_core.model.plan import CreatePod, DeletePod, SetServingGate
from omenative_core.model.spec import Runner
from omenative_core.model.status import InstanceOperation, InstanceStatus
from omenative_core.model.timefmt import format_duration, format_time
from omenative_core.render import render_pod
from omenative_core.revisions import hash_of
from omenative_core.steps.native_gang import mechanism
from omenative_core.steps.step_pass import StepPass

__all__ = ["create_pod", "drain", "maybe_force_delete"]


def create_pod(
    st: StepPass,
    row: InstanceStatus,
    name: str,
    slot: Any,
    runners: tuple[Runner, ...],
    revision: str,
    slot_ordinal: int,
    op: InstanceOperation | None,
) -> None:
    """Render and create one pod of the row's attempt (a migration surge avoids its node)."""
    gang = mechanism(st, runners)
    body = render_pod(
        st.view.ir,
        runners=runners,
        revision_hash=hash_of(revision),
        index=row.index,
        incarnation=row.incarnation,
        slot=slot,
        ordinal_slot=slot_ordinal,
        replicas=st.view.policy.desired,
        use_pod_group=gang == MECHANISM_POD_GROUP,
        native_gang=gang == MECHANISM_NATIVE,
        avoid_node=op.from_node if op else None,
        prefer_nodes=op.hint_target_nodes if op else (),
        pairing_protocol=st.view.pairing_by_rev.get(revision),
        prefix=st.view.attempt_prefix(row.index, row.incarnation, slot_ordinal),
    )
    if body["metadata"]["name"] != name:  # pragma: no cover - render/planner mismatch
        raise AssertionError(f"rendered pod {body['metadata']['name']} != expected {name}")
    st.out.add(CreatePod(body=body))


def drain(st: StepPass, pods: Iterable[PodView], reason: str) -> bool:
    """Take pods out of rotation, then delete them; True once none is left."""
    done = True
    for pod in pods:
        done = False
        if pod.terminating:
            maybe_force_delete(st, pod)
            continue
        lost = pod.phase in ("Failed", "Succeeded") or st.view.node_lost(pod)
        if pod.serving_gate and not lost:
            st.out.add(SetServingGate(name=pod.name, uid=pod.uid, value=False))
            st.poll = True
            continue
        if pod.name in st.view.snap.routed_pods and not lost:
            st.poll = True
            continue
        st.out.add(DeletePod(name=pod.name, uid=pod.uid, reason=reason))
    return done


def maybe_force_delete(st: StepPass, pod: PodView) -> None:
    """Force-delete a pod stuck Terminating on a dead node, once it is overdue (OME's rule).

    Overdue: ``overdueSlack`` past its ``deletionTimestamp``. Dead, by the first evidence
    that holds: ``node-gone`` (no Node object), ``node-unreachable-taint`` (tainted at least
    ``nodeUnreachableThreshold``), ``node-not-ready`` (Ready False/Unknown that long); a
    Ready node never is. A pod with finalizers is never force-deleted: once overdue it is
    reported (``PodDeleteBlockedByFinalizer``) for the finalizers' owner to resolve.
    """
    fd = st.view.config.force_delete
    st.poll = True
    if fd is None or pod.deletion_timestamp is None or not pod.node_name:
        return
    overdue = pod.deletion_timestamp + fd.overdue_slack
    if pod.finalizers:
        if st.view.now < overdue:
            st.wake.append(overdue)
            return
        st.warn("PodDeleteBlockedByFinalizer",
                f"OMENative component={st.view.spec.component} instance={pod.instance}: pod "
                f"{pod.name} is past its own deletion deadline ({format_time(overdue)}) but "
                f"pinned by finalizers [{' '.join(pod.finalizers)}]; omenative never strips "
                "another controller's finalizer: the finalizer owner must resolve it",
                pod.instance)
        return
    found = _dead_node_evidence(st, pod.node_name, fd.node_unreachable_threshold)
    if found is None:
        return
    evidence, dead_at = found
    due = max(overdue, dead_at)
    if st.view.now < due:
        st.wake.append(due)
        return
    st.out.add(DeletePod(name=pod.name, uid=pod.uid, force=True, reason="ForceDeleteUnreachable"))
    st.audit.append(
        {
            "requestUUID": f"force-delete-{pod.uid}",
            "component": st.view.spec.component,
            "sourceInstance": pod.instance,
            "phase": "Completed",
            "reason": "ForceDelete",
            "fromNode": pod.node_name,
            "startedAt": format_time(st.view.now),
            "completedAt": format_time(st.view.now),
            "outcome": "force-delete-unreachable",
        }
    )
    st.warn(
        "PodForceDeleted",
        f"OMENative component={st.view.spec.component} instance={pod.instance}: force-deleted "
        f"stuck-Terminating pod {pod.name} on node {pod.node_name} (evidence={evidence}, "
        f"{format_duration(st.view.now - pod.deletion_timestamp)} past the pod's own deletion "
        "deadline)",
        pod.instance,
    )


def _dead_node_evidence(st: StepPass, node_name: str,
                        threshold: timedelta) -> tuple[str, datetime] | None:
    """How the node is known dead and from when a force-delete may act (None: it is not)."""
    node = st.view.snap.nodes.get(node_name)
    if node is None:
        return "node-gone", st.view.now
    if node.ready is True:
        return None
    found = [(since + threshold, name) for name, since in (
        ("node-unreachable-taint", node.unreachable_since),
        ("node-not-ready", node.not_ready_since)) if since is not None]
    if not found:
        return None
    at, name = min(found)
    return name, at

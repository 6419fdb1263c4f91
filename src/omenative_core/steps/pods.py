"""Pod primitives every step uses: create, drain (gate off, wait unrouted, delete).

``drain`` is the one way a pod leaves: its ``ome.io/serving`` gate goes False, the pass
waits until the EndpointSlices stop routing to it, then deletes it. A pod that already
ended, or whose node is lost, is deleted at once. A pod stuck Terminating on a node that
is unreachable is force-deleted only when ``forceDelete`` is configured, after
``overdueSlack`` and ``nodeUnreachableThreshold`` (an audit entry records it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from omenative_core.gang import MECHANISM_NATIVE, MECHANISM_POD_GROUP
from omenative_core.model.observed import PodView
from omenative_core.model.plan import CreatePod, DeletePod, SetServingGate
from omenative_core.model.spec import Runner
from omenative_core.model.status import InstanceOperation, InstanceStatus
from omenative_core.model.timefmt import format_time
from omenative_core.render import render_pod
from omenative_core.revisions import hash_of
from omenative_core.steps.native_gang import mechanism
from omenative_core.steps.state import PassState

__all__ = ["create_pod", "drain", "maybe_force_delete"]


def create_pod(
    st: PassState,
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
    )
    if body["metadata"]["name"] != name:  # pragma: no cover - render/planner mismatch
        raise AssertionError(f"rendered pod {body['metadata']['name']} != expected {name}")
    st.out.add(CreatePod(body=body))


def drain(st: PassState, pods: Iterable[PodView], reason: str) -> bool:
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


def maybe_force_delete(st: PassState, pod: PodView) -> None:
    """Force-delete a pod stuck Terminating on an unreachable node, once it is overdue."""
    fd = st.view.config.force_delete
    st.poll = True
    if fd is None or pod.deletion_timestamp is None or not pod.node_name:
        return
    node = st.view.snap.nodes.get(pod.node_name)
    if node is None or node.ready is True:
        return
    since = node.not_ready_since
    overdue = pod.deletion_timestamp + fd.overdue_slack
    if since is None:
        return
    due = max(overdue, since + fd.node_unreachable_threshold)
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
            "reason": "NodeUnreachable",
            "fromNode": pod.node_name,
            "startedAt": format_time(st.view.now),
            "completedAt": format_time(st.view.now),
            "outcome": "force-delete-unreachable",
        }
    )
    st.warn(
        "PodForceDeleted",
        f"force-deleted {pod.name} stuck Terminating on unreachable node {pod.node_name}",
        pod.instance,
    )

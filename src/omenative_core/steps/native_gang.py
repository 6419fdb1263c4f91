"""Gang objects of an attempt: which mechanism, create them, read them, retire them.

- ``mechanism``: ``Native``, ``PodGroup`` or ``None`` for a revision's runners
  (``lifecycle.gangScheduling`` and what the cluster offers; see ``omenative_core.gang``).
- ``ensure``: before an attempt's pods, its Workload (native, one per revision) and its
  PodGroup (one per attempt, ``{prefix}-{index}-{incarnation}``); the waiting reason while
  a PodGroup of that name is still going (``PodGroupTerminating``) or kube-scheduler says
  the gang does not fit (``PodGroupUnschedulable``). Both park the readiness deadline.
- ``delete_pod_group``: retire one attempt's PodGroup (after its pods).
- ``cleanup``: PodGroups no attempt or pod uses any more, and Workloads of revisions
  nothing runs or targets, are deleted (the old attempt's group goes with its old pods).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import compress
from operator import attrgetter, is_, is_not

from omenative_core.gang import (
    MECHANISM_NONE,
    MECHANISM_POD_GROUP,
    POD_GROUP_API_VERSION,
    choose_mechanism,
    gang_condition,
    pod_group_name,
    priority_class_name,
    render_native_pod_group,
    render_pod_group,
    render_workload,
    schedule_timeout_seconds,
    scheduler_name,
    workload_name,
)
from omenative_core.labels import LABEL_POD_GROUP, LABEL_REVISION_HASH
from omenative_core.model.observed import PodGroupView
from omenative_core.model.plan import CreateObject, CreatePodGroup, DeleteObject, DeletePodGroup
from omenative_core.model.spec import Runner
from omenative_core.phases import Waiting
from omenative_core.render import is_multi_pod, pods_per_instance
from omenative_core.replica_rules import MAX_NAME_LENGTH
from omenative_core.revisions import hash_of
from omenative_core.steps.state import PassState
from omenative_core.steps.step_pass import StepPass
from omenative_core.steps.totals import since_kept

__all__ = [
    "POD_GROUP_UNSCHEDULABLE",
    "cleanup",
    "delete_all",
    "delete_pod_group",
    "ensure",
    "mechanism",
    "mechanism_condition",
]

POD_GROUP_UNSCHEDULABLE = Waiting.POD_GROUP_UNSCHEDULABLE
"""Waiting reason: kube-scheduler reports the native PodGroup ``PodGroupScheduled=False``."""


def mechanism(st: StepPass, runners: Sequence[Runner]) -> str:
    """The gang mechanism of an attempt at a revision with ``runners``."""
    return choose_mechanism(
        st.view.config.gang_scheduling,
        multi_pod=is_multi_pod(runners),
        native_api=st.view.snap.native_gang_api,
        pod_group_crd=st.view.snap.pod_group_crd,
        scheduler=scheduler_name(runners),
    )


def mechanism_condition(st: StepPass) -> tuple[str, str, str]:
    """The replica's ``GangSchedulingUnavailable`` (status, reason, message): ``gang_condition``
    on its setting, what the cluster serves and its runners' scheduler."""
    return gang_condition(
        st.view.config.gang_scheduling,
        multi_pod=st.view.policy.multi_pod,
        native_api=st.view.snap.native_gang_api,
        pod_group_crd=st.view.snap.pod_group_crd,
        scheduler=scheduler_name(st.view.spec.runners),
    )


def ensure(
    st: StepPass, index: int, incarnation: int, runners: Sequence[Runner], revision: str
) -> Waiting | None:
    """Create the attempt's gang objects if missing; the waiting reason, if any."""
    chosen = mechanism(st, runners)
    if chosen == MECHANISM_NONE:
        return None
    name = pod_group_name(st.view.stable_prefix, index, incarnation)
    count = pods_per_instance(runners)
    if chosen == MECHANISM_POD_GROUP:
        pg = st.view.snap.pod_groups.get(name)
        if pg is None:
            if scheduler_name(runners) is None:
                st.warn("MaybeNoGangScheduler",
                        f"OMENative component={st.view.spec.component} instance={index}: PodGroup "
                        f"{name} is created for pods on the default scheduler; a stock "
                        "kube-scheduler does not read scheduling.x-k8s.io PodGroups, so the "
                        "gang may be placed pod by pod (name the coscheduling scheduler in "
                        "schedulerName)", index)
            timeout = st.view.config.gang_schedule_timeout
            st.out.add(CreatePodGroup(body=render_pod_group(
                st.view.ir, index=index, incarnation=incarnation, min_member=count,
                schedule_timeout_seconds=schedule_timeout_seconds(
                    st.view.policy.ready_timeout, timeout.min, timeout.max))))
        # a group the scheduler failed is reset by ``cleanup``: no member against it meanwhile
        return Waiting.POD_GROUP_TERMINATING if pg is not None and (
            pg.deleting or pg.failed) else None
    rev_hash = hash_of(revision)
    api, priority = st.view.snap.native_gang_api, priority_class_name(runners)
    workload = st.view.snap.workloads.get(workload_name(st.view.stable_prefix, rev_hash))
    if workload is None:
        st.out.add(CreateObject(body=render_workload(
            st.view.ir, revision_hash=rev_hash, min_count=count, api_version=api,
            priority_class=priority)))
    native = st.view.snap.native_pod_groups.get(name)
    if native is None:
        st.out.add(CreatePodGroup(body=render_native_pod_group(
            st.view.ir, index=index, incarnation=incarnation, revision_hash=rev_hash,
            min_count=count, api_version=api, priority_class=priority)))
        return None
    if native.deleting or (workload is not None and workload.deleting):
        return Waiting.POD_GROUP_TERMINATING
    if native.scheduled == "False" and native.scheduled_reason == "Unschedulable":
        return POD_GROUP_UNSCHEDULABLE
    return None


def _reset_failed(st: StepPass, views: Iterable[PodGroupView]) -> None:
    """OME's reset of each row's PodGroup the scheduler ruled ``Failed`` (an absorbing
    verdict: the name can never be admitted again): delete it so a later pass builds a
    fresh one, with a ``PodGroupReset`` Warning carrying the group's explanation; the
    Instance is not failed for it. A dead member still on the group holds the reset back
    (the phase is derived from the members, so a rebuild around it gets the same verdict);
    a group no row names is an orphan, which ``cleanup`` deletes anyway."""
    prefix = st.view.stable_prefix
    rows = {pod_group_name(prefix, r.index, r.incarnation): r.index for r in st.rows.values()}
    for pg in views:
        index = rows.get(pg.name)
        if not pg.failed or pg.deleting or index is None:
            continue
        if any(p.phase in ("Failed", "Succeeded") for p in st.pods_of(index)):
            continue
        _delete(st, pg, POD_GROUP_API_VERSION)
        st.poll = True
        st.warn("PodGroupReset",
                f"OMENative component={st.view.spec.component}: deleting PodGroup {pg.name} "
                f"so the gang can be admitted again ({pg.failed})", index)


def _delete(st: StepPass, pg: PodGroupView, api_version: str) -> None:
    if not pg.deleting:
        st.out.add(DeletePodGroup(name=pg.name, uid=pg.uid, api_version=api_version))


def delete_pod_group(st: StepPass, index: int, incarnation: int) -> bool:
    """Delete one attempt's PodGroup (either mechanism); True once none is left."""
    name = pod_group_name(st.view.stable_prefix, index, incarnation)
    gone = True
    for groups, api in ((st.view.snap.pod_groups, POD_GROUP_API_VERSION),
                        (st.view.snap.native_pod_groups, st.view.snap.native_gang_api)):
        pg = groups.get(name)
        if pg is not None:
            _delete(st, pg, api)
            gone = False
    if not gone:
        st.poll = True
    return gone


def _row_groups(st: PassState) -> frozenset[str]:
    """The PodGroup of each row's attempt (``pod_group_name``, in one comprehension).

    Kept for the next pass (``steps.verdicts``): while every row is the same object as
    then, the names are the same (checked with one identity comparison per row, in C).
    """
    rows = list(st.rows.values())
    cache = st.cache
    kept = cache.kept.row_groups if cache.kept is not None and cache.dirty is not None else None
    if kept is not None and len(kept[0]) == len(rows) and all(map(is_, rows, kept[0])):
        st.row_groups = kept
        return kept[1]
    prefix = st.view.stable_prefix
    names = {f"{prefix}-{r.index}-{r.incarnation}" for r in rows}
    if names and max(map(len, names)) > MAX_NAME_LENGTH:  # bounded names: the long way
        names = {pod_group_name(prefix, r.index, r.incarnation) for r in rows}
    st.row_groups = (rows, frozenset(names))
    return st.row_groups[1]


def _pod_groups(st: StepPass) -> set[str]:
    """PodGroup names a pod still stands for: its attempt's, and the one it is labelled with."""
    used: set[str] = set()
    for pod in st.view.snap.pods:
        index = pod.instance
        if index is not None:
            used.add(pod_group_name(st.view.stable_prefix, index, pod.incarnation))
        label = pod.labels.get(LABEL_POD_GROUP)
        if label:
            used.add(label)
    return used


def _orphans(st: PassState, names: Iterable[str], *, pods: bool = True) -> set[str]:
    """Of these PodGroup names, the ones no attempt (a row) or (unless ``pods`` is False)
    pod stands for.

    The rows' names are enough to clear almost every group, so the pods are read only
    when a group remains (after a restart or a removed Instance): at rest, no pod is.
    """
    left = set(names)
    if left:
        left -= _row_groups(st)
    if left and pods:
        left -= _pod_groups(st)
    return left


def _revisions_in_use(st: StepPass) -> set[str]:
    """Revision hashes a row runs or targets, a pod runs, or a live native PodGroup uses."""
    revisions = {st.view.target}
    for row in st.rows.values():
        revisions.update((row.running_revision, row.target_revision))
        if row.operation is not None:
            revisions.add(row.operation.target_revision)
    used = {hash_of(r) for r in revisions if r}
    used.update(p.labels.get(LABEL_REVISION_HASH, "") for p in st.view.snap.pods)
    used.update(pg.labels.get(LABEL_REVISION_HASH, "")
                for pg in st.view.snap.native_pod_groups.values() if not pg.deleting)
    return used


def _unnamed_since(
    st: PassState, at: int, groups: Mapping[str, PodGroupView], views: tuple[PodGroupView, ...]
) -> set[str] | None:
    """The PodGroups no row names now, found from what changed since the last pass while
    its row totals hold (``steps.totals``); None: read every group.

    A group the last pass found named by a row is still named unless that row was written
    (then only that row can name it: the name carries the index) or the group object
    changed; so only those groups, and the ones no row named then (``RowTotals.unnamed``),
    are looked at. Pods never name a group a row does not, so a changed pod changes nothing
    here: the pods are read only for the groups left over (``cleanup``).
    """
    since = since_kept(st)
    if since is None:
        return None
    kept, rows = since
    if len(kept.groups) <= at or len(kept.groups[at]) != len(views):
        return None
    moved = compress(views, map(is_not, views, kept.groups[at]))
    unknown = set(kept.unnamed[at])
    unknown.update(map(attrgetter("name"), moved))
    prefix, old_rows = st.view.stable_prefix, kept.by_index
    left = set()
    for i in rows.written:
        old = old_rows.get(i)
        if old is None:
            continue
        name = pod_group_name(prefix, i, old.incarnation)
        row = rows.get(i)
        if name in groups and (row is None or pod_group_name(prefix, i, row.incarnation) != name):
            left.add(name)
    return left | _orphans(st, [n for n in unknown if n in groups], pods=False)


def cleanup(st: PassState) -> None:
    """Delete PodGroups and Workloads nothing uses any more (see the module docstring).

    What is in use is worked out only when there is something to delete, and from the
    rows first (``_orphans``): at rest this reads no pod. While the row totals hold, only
    the groups whose row or object changed are looked at (``_unnamed_since``).
    """
    kept_groups: list[tuple[PodGroupView, ...]] = []
    kept_unnamed: list[frozenset[str]] = []
    snap = st.view.snap
    for at, (groups, api) in enumerate(((snap.pod_groups, POD_GROUP_API_VERSION),
                                        (snap.native_pod_groups, snap.native_gang_api))):
        views = tuple(groups.values())
        if at == 0 and any(map(attrgetter("failed"), views)):
            _reset_failed(st, views)
        unnamed = _unnamed_since(st, at, groups, views) if views else set()
        if unnamed is None:
            unnamed = _orphans(st, map(attrgetter("name"), views), pods=False)
        orphans = unnamed - _pod_groups(st) if unnamed else unnamed
        if orphans:
            for pg in views:
                if pg.name in orphans:
                    _delete(st, pg, api)
        kept_groups.append(views)
        kept_unnamed.append(frozenset(unnamed))
    st.groups_out = (tuple(kept_groups), tuple(kept_unnamed))
    if not st.view.snap.workloads:
        return
    revisions = _revisions_in_use(st)
    for wl in st.view.snap.workloads.values():
        if not wl.deleting and wl.labels.get(LABEL_REVISION_HASH) not in revisions:
            st.out.add(DeleteObject(api_version=st.view.snap.native_gang_api,
                                    object_kind="Workload", name=wl.name))


def delete_all(st: StepPass) -> bool:
    """Teardown: delete every PodGroup and Workload; True once none is left."""
    for groups, api in ((st.view.snap.pod_groups, POD_GROUP_API_VERSION),
                        (st.view.snap.native_pod_groups, st.view.snap.native_gang_api)):
        for pg in groups.values():
            _delete(st, pg, api)
    for wl in st.view.snap.workloads.values():
        if not wl.deleting:
            st.out.add(DeleteObject(api_version=st.view.snap.native_gang_api,
                                    object_kind="Workload", name=wl.name))
    return not (st.view.snap.pod_groups or st.view.snap.native_pod_groups or st.view.snap.workloads)

"""Steady rows: the one-loop health check of settled Instances, over many rows at once.

A pass at rest finds almost every row steady: Ready, on its target revision, with exactly
its attempt's pods, all live, Ready and healthy. ``repair.settled`` then has nothing to do
but record it. ``find`` answers that question for a whole pass's rows in two loops, so a
cold pass (no kept verdicts, after a restart) reads each pod once:

1. ``_health``: each pod's conditions, node, containers and gates, read once, folded into
   per-Instance facts (an unhealthy pod, how many pods serve, a gated pod, a pod the
   scheduler cannot place).
2. The rows: each row's pods must be exactly its attempt's, by name (``PassState.expected``,
   spelled ``{prefix}-{index}`` + the same tails for every row of a revision) and by the
   attempt their labels carry (``PassState.attempt_of``).

The answer is exactly the per-row check's (``repair.settled`` takes a row ``find`` did not
return the long way); the unschedulable Instances come out of the same loop, so
``verdicts.unschedulable_now`` does not read the pods again.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from typing import TYPE_CHECKING

from attrs import frozen

from omenative_core.failures import CRASH_REASONS
from omenative_core.model.observed import NodeView, PodView
from omenative_core.model.status import InstanceStatus
from omenative_core.phases import Phase

if TYPE_CHECKING:
    from omenative_core.steps.state import PassState

__all__ = ["Health", "SteadyCount", "find"]

SteadyCount = tuple[InstanceStatus, int, bool]
"""(the row found steady, how many of its pods serve, none of them gated)."""

_READY = Phase.READY  # bound once: an enum member's lookup costs a call per row
_FINISHED = ("Failed", "Succeeded")
_BULK = 64
"""From this many rows on, ``_health`` reads every pod of the pass (and finds the
unschedulable Instances on the way) instead of picking the rows' pods one by one."""

Kind = tuple[tuple[str, ...], str, int] | None
"""Of a (revision, slot ordinal): the pod names after ``{prefix}-{index}``, the
revision's hash and how many pods (None: no pods expected, or names not spelled that way)."""


@frozen
class Health:
    """Per-Instance facts from one read of its pods.

    ``bad``: Instances with a pod that is terminating, finished, not Ready, on a lost node
    or crashing; ``serving``: how many of its pods serve (in rotation, containers ready);
    ``gated``: Instances with a scheduling-gated pod;
    ``waiting``: Instances with a pod the scheduler cannot place.
    """

    bad: set[int]
    serving: dict[int, int]
    gated: set[int]
    waiting: set[int]


def _health(groups: Iterable[tuple[int, list[PodView]]], ready_nodes: Container[str]) -> Health:
    """Each pod read once (its conditions with a few dict lookups, no call per pod)."""
    bad: set[int] = set()
    serving: dict[int, int] = {}
    gated: set[int] = set()
    waiting: set[int] = set()
    for index, pods in groups:
        count = 0
        for pod in pods:
            conditions = pod.conditions
            if conditions.get("ome.io/serving") == "True" == conditions.get("ContainersReady"):
                count += 1
            if pod.scheduling_gates:
                gated.add(index)
            if (
                conditions.get("PodScheduled") == "False"
                and pod.unschedulable
                and not pod.terminating
            ):
                waiting.add(index)
            if (
                conditions.get("Ready") != "True"
                or pod.deletion_timestamp is not None
                or pod.phase in _FINISHED
                or (pod.node_name and pod.node_name not in ready_nodes)
            ):
                bad.add(index)
                continue
            for c in pod.containers:
                if c.restart_count or c.waiting_reason in CRASH_REASONS:
                    bad.add(index)
                    break
        serving[index] = count
    return Health(bad, serving, gated, waiting)


class _ReadyNodes:
    """``name in _ReadyNodes(nodes)``: the node is known and Ready (for a few pods; a whole
    pass builds the set of Ready nodes once instead)."""

    def __init__(self, nodes: Mapping[str, NodeView]) -> None:
        self.nodes = nodes

    def __contains__(self, name: object) -> bool:
        node = self.nodes.get(name) if isinstance(name, str) else None
        return node is not None and node.ready is True


def _kind(st: PassState, row: InstanceStatus) -> Kind:
    """The pod-name tails and revision hash shared by the rows of ``row``'s kind."""
    expected = st.expected(row.index, row.running_revision, row.incarnation, row.active_ordinal)
    if not expected:
        return None
    head = f"{st.prefix}-{row.index}"
    if not all(name.startswith(head) for name in expected):
        return None  # not one spelling for every row: the per-row check decides
    tails = tuple(name[len(head) :] for name in expected)
    return tails, st.revision_hash(row.running_revision), len(tails)


def find(st: PassState, rows: Iterable[InstanceStatus]) -> dict[int, SteadyCount]:
    """Of ``rows``, the ones steady now, by index (see the module docstring).

    A steady row is Ready on its target revision with no operation, and its pods are
    exactly its running attempt's, all live, Ready, on Ready nodes, with no restarted or
    crashing container.
    Nothing is steady while a migration is recorded (its moves decide).
    """
    if st.migrations:
        return {}
    candidates = [
        r
        for r in rows
        if r.phase == _READY
        and r.operation is None
        and r.running_revision
        and r.target_revision == r.running_revision
    ]
    by_index, nodes = st.pods_by_index, st.snap.nodes
    if len(candidates) >= _BULK:
        ready = {name for name, node in nodes.items() if node.ready is True}
        health = _health(by_index.items(), ready)
        if st.waiting is None and st.dirty is None:
            st.waiting = health.waiting  # every pod read: ``unschedulable_now`` takes it
        plain = st.plain_steady if st.dirty is None else None
    else:
        picked = [(r.index, by_index.get(r.index, [])) for r in candidates]
        health = _health(picked, _ReadyNodes(nodes))
        plain = None
    return _match(st, candidates, health, plain)


def _match(
    st: PassState,
    rows: list[InstanceStatus],
    health: Health,
    plain: dict[int, InstanceStatus] | None,
) -> dict[int, SteadyCount]:
    """The healthy ``rows`` whose pods are exactly their attempt's, by name and labels.

    ``plain``: where to put the steady rows that are plain as they stand (``steps.totals``,
    rule 1: their tally leaves them as they are, they serve, are available, were Ready and
    run the target), so ``steps.status`` need not tally them one by one; None: do not look.
    """
    bad, serving, gated = health.bad, health.serving, health.gated
    target, multi = st.target, st.policy.multi_pod
    was_ready = st.prev_ready() if plain is not None else set()
    by_index, attempt_of, prefix = st.pods_by_index, st.attempt_of, st.prefix
    kinds: dict[tuple[str, int], Kind] = {}
    key: tuple[str, int] | None = None
    kind: Kind = None
    out: dict[int, SteadyCount] = {}
    for row in rows:
        index = row.index
        pods = by_index.get(index)
        if index in bad or not pods:
            continue
        if key is None or row.running_revision != key[0] or row.active_ordinal != key[1]:
            key = (row.running_revision, row.active_ordinal)  # most rows share the last one's
            kind = kinds[key] if key in kinds else kinds.setdefault(key, _kind(st, row))
        if kind is None or len(pods) != kind[2]:
            continue
        head = f"{prefix}-{index}"
        attempt = (kind[1], row.incarnation)
        for pod in pods:
            name = pod.name
            for tail in kind[0]:  # a handful of names: compared, not hashed into a set
                if name == head + tail:
                    break
            else:
                break
            if attempt_of.get(name) != attempt:
                break
        else:
            count, admitted = serving[index], index not in gated
            out[index] = (row, count, admitted)
            if (  # steps.status._tally's common steady row, and totals.odd_of's plain rule
                plain is not None
                and row.ready_since is None
                and row.last_failure is None
                and row.running_revision == target
                and row.pod_count == row.available_pod_count == kind[2]
                and row.serving_pod_count == count
                and row.admitted == admitted
                and (count == kind[2] if multi else count > 0)
                and index in was_ready
            ):
                plain[index] = row
    return out

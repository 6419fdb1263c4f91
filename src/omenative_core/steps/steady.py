"""Steady rows: the one-loop health check of settled Instances, over many rows at once.

A pass at rest finds almost every row steady: Ready, on its target revision, with exactly
its attempt's pods, all live, Ready and healthy. ``repair.settled`` then has nothing to do
but record it. ``find`` answers that question for a whole pass's rows in one walk, so a
cold pass (no kept verdicts, after a restart) reads each pod once (``_match``): for each
row, what its pods' views derived when they were built (``PodView.sound``, ``in_rotation``,
``revision_hash``, ``incarnation``: an unhealthy pod, how many serve, the attempt), their
gates and nodes, and their names (``PassView.expected``, spelled ``{prefix}-{index}`` +
the same tails for every row of a revision); the unschedulable pods are looked at only in
the rows that are not steady.

The answer is exactly the per-row check's (``repair.settled`` takes a row ``find`` did not
return the long way); the unschedulable Instances come out of the same walk, so
``verdicts.unschedulable_now`` does not read the pods again; and the steady rows that are
plain as they stand (``steps.totals``) are marked for ``steps.status`` in the same loop.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from typing import TYPE_CHECKING

from attrs import Factory, frozen

from omenative_core.model.observed import NodeView
from omenative_core.model.status import InstanceStatus
from omenative_core.phases import Phase
from omenative_core.steps.step_pass import StepPass
from omenative_core.steps.verdicts import unschedulable

if TYPE_CHECKING:
    from omenative_core.steps.state import PassState

__all__ = ["Found", "SteadyCount", "find"]

SteadyCount = tuple[int, bool]
"""Of a row found steady: (how many of its pods serve, none of them gated); one shared
tuple per distinct value, not one per row (a cold pass finds thousands)."""


@frozen
class Found:
    """``find``'s answer: the rows found steady, by index, and each one's ``SteadyCount``."""

    rows: dict[int, InstanceStatus] = Factory(dict)
    counts: dict[int, SteadyCount] = Factory(dict)

_READY = Phase.READY  # bound once: an enum member's lookup costs a call per row
_BULK = 64
"""From this many rows on, ``find`` checks the nodes once as a set, finds the
unschedulable Instances of the whole pass and marks the plain rows."""

Kind = tuple[tuple[str, ...], str, int, tuple[tuple[SteadyCount, SteadyCount], ...]] | None
"""Of a (revision, slot ordinal): the pod names after ``{prefix}-{index}``, the
revision's hash, how many pods, and the ``SteadyCount`` of each (serving, admitted) as
``[serving][admitted]`` (None: no pods expected, or names not spelled that way)."""


class _ReadyNodes:
    """``name in _ReadyNodes(nodes)``: the node is known and Ready (for a few pods; a whole
    pass builds the set of Ready nodes once instead)."""

    def __init__(self, nodes: Mapping[str, NodeView]) -> None:
        self.nodes = nodes

    def __contains__(self, name: object) -> bool:
        node = self.nodes.get(name) if isinstance(name, str) else None
        return node is not None and node.ready is True


def _kind(st: StepPass, row: InstanceStatus) -> Kind:
    """The pod-name tails and revision hash shared by the rows of ``row``'s kind."""
    expected = st.view.expected(
        row.index, row.running_revision, row.incarnation, row.active_ordinal
    )
    if not expected:
        return None
    head = f"{st.view.attempt_prefix(row.index, row.incarnation, row.active_ordinal)}-{row.index}"
    if not all(name.startswith(head) for name in expected):
        return None  # not one spelling for every row: the per-row check decides
    tails = tuple(name[len(head) :] for name in expected)
    table = tuple(((n, False), (n, True)) for n in range(len(tails) + 1))
    return tails, st.view.revision_hash(row.running_revision), len(tails), table


def find(st: PassState, rows: Iterable[InstanceStatus]) -> Found:
    """Of ``rows``, the ones steady now, by index (see the module docstring).

    A steady row is Ready on its target revision with no operation, and its pods are
    exactly its running attempt's, all live, Ready, on Ready nodes, with no restarted or
    crashing container.
    Nothing is steady while a migration is recorded (its moves decide), nor while two pods
    share a name (the full check reads a row's pods by name, so it decides).
    """
    if st.migrations or not st.cache.names_unique:
        return Found()
    rows = list(rows)
    nodes = st.view.snap.nodes
    if len(rows) < _BULK:
        return _match(st, rows, _ReadyNodes(nodes))
    ready = {name for name, node in nodes.items() if node.ready is True}
    mark = st.cache.dirty is None
    out = _match(st, rows, ready, st.plain_steady if mark else None)
    if mark and st.unschedulable is None:
        # every pod read: ``unschedulable_now`` takes it (the rows not steady: their pods)
        by_index = st.cache.pods_by_index
        st.unschedulable = unschedulable(by_index, by_index.keys() - out.rows.keys())
    return out


def _match(
    st: PassState,
    rows: list[InstanceStatus],
    ready_nodes: Container[str],
    plain: dict[int, InstanceStatus] | None = None,
) -> Found:
    """The ``rows`` that are steady: Ready on their target revision with no operation, and
    their pods exactly their attempt's (by name and labels), all healthy.

    ``plain``: when given, the rows found steady that are plain as they stand go in it
    (``_mark_plain``).
    """
    by_index, prefix = st.cache.pods_by_index, st.view.prefix
    legacy = st.view.legacy_attempts
    kinds: dict[tuple[str, int], Kind] = {}
    key: tuple[str, int] | None = None
    kind: Kind = None
    out = Found()
    steady, counts = out.rows, out.counts
    sizes: dict[int, int] = {}  # index -> how many pods its attempt has (``_mark_plain``)
    for row in rows:
        index = row.index
        pods = by_index.get(index)
        if (
            not pods
            or row.phase != _READY
            or row.operation is not None
            or row.conditions  # a restart series is looked at in full (``restarts``)
            or not row.running_revision
            or row.target_revision != row.running_revision
        ):
            continue
        if key is None or row.running_revision != key[0] or row.active_ordinal != key[1]:
            key = (row.running_revision, row.active_ordinal)  # most rows share the last one's
            kind = kinds[key] if key in kinds else kinds.setdefault(key, _kind(st, row))
        if kind is None or len(pods) != kind[2]:
            continue
        incarnation = row.incarnation
        own = prefix  # a standalone Instance from before OME's names keeps its own
        if legacy:
            own = st.view.attempt_prefix(index, incarnation, row.active_ordinal)
        head, tails, rev_hash = f"{own}-{index}", kind[0], kind[1]
        count, admitted = 0, True
        # each pod read once, its view's facts (``enumerate``: a strict ``zip`` per row costs
        # more than the loop)
        for at, pod in enumerate(pods):
            if pod.in_rotation:
                count += 1
            if pod.scheduling_gates:
                admitted = False
            name, node = pod.name, pod.node_name
            if (
                not pod.sound
                or (node and node not in ready_nodes)
                # its attempt (no two pods share a name: ``find``), as ``PassState.attempt``
                # reads it; both hashes interned, so this is a pointer comparison
                or pod.revision_hash != rev_hash
                or pod.incarnation != incarnation
                # most pods come in their slots' order; else any of the attempt's names
                or (name != head + tails[at] and name not in [head + t for t in tails])
            ):
                break
        else:
            steady[index] = row
            counts[index] = kind[3][count][admitted]  # shared: no tuple per row
            sizes[index] = kind[2]
    if plain is not None:
        _mark_plain(st, out, sizes, plain)
    return out


def _mark_plain(
    st: StepPass, found: Found, sizes: dict[int, int], plain: dict[int, InstanceStatus]
) -> None:
    """Put in ``plain`` the rows ``found`` steady that are plain as they stand
    (``steps.totals``, rule 1): ``steps.status._tally`` would leave each as it is (its
    counts are its pods', ``sizes`` of them), and it serves, is available, was Ready and
    runs the target, so ``steps.status`` need not tally it again."""
    target, multi, counts = st.view.target, st.view.policy.multi_pod, found.counts
    was_ready = st.prev_ready()
    for index, row in found.rows.items():
        if row.ready_since is not None or row.last_failure is not None:
            continue  # its window is open, or it failed before: tallied in full
        if row.running_revision != target or index not in was_ready:
            continue
        n = sizes[index]
        count, admitted = counts[index]
        if row.pod_count != n or row.available_pod_count != n or row.admitted != admitted:
            continue  # its counts change: tallied in full
        if row.serving_pod_count == count and (count == n if multi else count > 0):
            plain[index] = row

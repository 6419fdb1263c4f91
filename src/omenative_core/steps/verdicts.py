"""Per-Instance verdicts kept from one pass for the next, so a pass costs O(what changed).

A pass at rest over 10,000 Instances spends most of its time re-deriving facts about
Instances nothing happened to: grouping 20,000 pods by their labels, finding each steady
row steady again, counting each row's pods for the status. ``Verdicts`` keeps those facts
(plain data: the pass returns it and the next pass takes it back, so the core stays pure)
and ``regroup`` works out which Instances they no longer hold for.

Theory of operation:

1. **Basis.** Every verdict is a function of the Instance's row, its pods and replica-wide
   inputs: the spec, the replica's name prefix (and whether its pre-OME Service stands),
   the config, the stored revisions, the nodes and ``collisionCount``. If any replica-wide
   input differs (compared by identity, then by equality) nothing is reused: the pass
   recomputes every Instance.
2. **Dirty Instances by identity.** The shell's caches hand back the same view object for
   a pod that did not change, so the pods that changed are the new objects and the gone
   ones, found with set operations on ``id()`` (the previous pods stay referenced by the
   verdicts, so an id cannot be reused while compared). An Instance is dirty when one of
   its pods changed; its pod list is rebuilt, the others are shared with the last pass.
   A reordering of the surviving pods, a new Instance index, or more changes than a
   fraction of the pods, and the pass groups every pod afresh.
3. **What is reused.** ``steady``: rows the last pass found steady (``repair.settled``'s
   one-loop check) whose row and pods are unchanged are steady again. ``tallies``: a row's
   pod counts, serving and available flags (``steps.status``), when its row and pods are
   unchanged and the answer does not depend on the clock (no ``readySince`` window open).
   Everything else (open operations, budgets, scale, rollout, conditions) runs every
   pass; those steps read the rows, not the pods.
4. **Where things live.** ``PassState`` holds what this pass found (``steady_rows``,
   ``tallies``, ...); the queries of the kept verdicts (``was_steady``,
   ``unchanged_steady``, ``unchanged_tallies``, ...) and ``keep``, which bundles this
   pass's findings for the next, are the functions at the end of this module.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from itertools import compress
from operator import and_, attrgetter, eq, is_, is_not, itemgetter
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Protocol

from attrs import Factory, frozen

from omenative_core.model.observed import PodView, Snapshot
from omenative_core.model.status import InstanceStatus

if TYPE_CHECKING:
    from omenative_core.retry import RetryBook
    from omenative_core.steps.view import PassView

__all__ = [
    "AVAILABLE",
    "ROW_IN",
    "ROW_OUT",
    "SERVING",
    "WAS_READY",
    "Grouping",
    "Regrouped",
    "RowGroups",
    "Tally",
    "Verdicts",
    "VerdictsCache",
    "basis_of",
    "group_all",
    "keep",
    "kept_map",
    "kept_tally",
    "names_unique",
    "regroup",
    "same_inputs",
    "tally_of",
    "unchanged_steady",
    "unchanged_tallies",
    "unschedulable",
    "unschedulable_now",
    "was_steady",
]

Tally = tuple[InstanceStatus, InstanceStatus, bool, bool, bool]
"""(row in, row out with its pod counts, serving, available, was Ready before the pass):
read by the names below, never by a bare index. A plain tuple, not a ``NamedTuple``: a
pass builds one per row it tallies, and a named tuple's constructor cost the new-revision
pass at 10,000 Instances about a fifth of its time (measured side by side, issue 29)."""

ROW_IN: Final = 0
"""A ``Tally``'s row as the pass found it."""
ROW_OUT: Final = 1
"""A ``Tally``'s row with its pod counts (and ``readySince``) set."""
SERVING: Final = 2
"""Whether a ``Tally``'s Instance serves."""
AVAILABLE: Final = 3
"""Whether a ``Tally``'s Instance is available."""
WAS_READY: Final = 4
"""Whether a ``Tally``'s Instance was Ready before the pass."""

RowGroups = tuple[list[InstanceStatus], frozenset[str]]
"""The rows of a pass (in order) and the PodGroup names of their attempts."""

_NO_POD = object()

_CHANGED_FRACTION = 8
"""More changed pods than 1/8 of them (plus a few): group every pod afresh."""


def kept_map(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    """What a memo keeps of one of the snapshot's maps (nodes, PodGroups).

    A ``MappingProxyType`` is a live view of a cache that may change under the memo (which
    would then compare equal to itself), so it is copied. Any other map belongs to the
    snapshot and is never changed once handed over, so it is kept as it is: the shell hands
    every replica's snapshot the same node map until a node changes, and the memos of
    thousands of replicas then share it instead of holding a copy each.
    """
    return dict(mapping) if isinstance(mapping, MappingProxyType) else mapping


def basis_of(snap: Snapshot) -> tuple[Any, ...]:
    """The replica-wide inputs every kept verdict depends on (see the module docstring)."""
    ir = snap.replica
    status = ir.status
    return (
        ir.spec,
        ir.prefix,
        snap.legacy_headless_service_exists,  # whether pods may carry the pre-OME names
        snap.config,
        snap.revisions,
        kept_map(snap.nodes),
        status.collision_count if status is not None else None,
    )


def same_inputs(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Whether two input tuples match: each item the same object or an equal one (the
    plan memo's inputs and the verdicts' basis are compared alike)."""
    return all(x is y or x == y for x, y in zip(a, b, strict=True))


@frozen(eq=False)
class Verdicts:
    """What one pass found about each Instance, for the next pass (see the module docstring).

    ``pods``: the snapshot's pods; ``positions``: ``id(pod)`` -> its position there;
    (None until a later pass needs it); ``pods_by_index`` and ``by_name``: the grouping
    ``revisions.group_pods`` makes; ``unschedulable``: Instances with an unschedulable pod (None
    when the pass did not need to know); ``steady``: index -> the row found
    steady; ``tallies``: index -> its ``Tally``; ``row_groups``: the rows and the names
    of their attempts' PodGroups (``native_gang``), when the pass needed them;
    ``plain``: index -> row whose tally is (row, row, True, True, True), a plain row's, kept
    so rather than as a tuple each in ``tallies`` (a cold pass has thousands: ``tally_of``).
    """

    basis: tuple[Any, ...]
    pods: tuple[PodView, ...]
    positions: dict[int, int] | None
    pods_by_index: dict[int, list[PodView]]
    by_name: dict[str, PodView]
    unschedulable: frozenset[int] | None
    steady: dict[int, InstanceStatus]
    tallies: dict[int, Tally]
    row_groups: RowGroups | None = None
    plain: dict[int, InstanceStatus] = Factory(dict)


def unschedulable(pods_by_index: dict[int, list[PodView]], indexes: Any) -> set[int]:
    """Of ``indexes``, the Instances with a live pod the scheduler cannot place
    (``capacity.check_nodes`` reports them)."""
    return {
        i
        for i in indexes
        for p in pods_by_index.get(i, ())
        # the dict lookup first: most pods are scheduled, and this meets every pod
        if p.conditions.get("PodScheduled") == "False" and p.unschedulable and not p.terminating
    }


@frozen
class Grouping:
    """The pods by the Instance they are labelled with, and by name (a name's last pod, as
    a full grouping meets them; its attempt is ``PodView.attempt``); ``unique``: no two of
    them share a name."""

    pods_by_index: dict[int, list[PodView]]
    by_name: dict[str, PodView]
    unique: bool = True


_NAME = attrgetter("name")


def group_all(pods: tuple[PodView, ...]) -> Grouping:
    """Every pod by the Instance it is labelled with, and by name (one loop, one map).

    Each pod's index and attempt were read from its labels when its view was built
    (``PodView.instance``, ``PodView.revision_hash``, ``PodView.incarnation``). Pods of one
    Instance mostly come one after another: the last pod's list is reused while the index
    is the same (no lookup). The map by name is built in C.
    """
    by_index: dict[int, list[PodView]] = defaultdict(list)
    last: object = _NO_POD  # never an index: the first pod is always looked up
    group: list[PodView] = []
    skipped = False
    for pod in pods:  # this loop meets every pod of a cold pass
        index = pod.instance
        if index != last:
            if index is None:
                skipped = True
                continue
            last, group = index, by_index[index]
        group.append(pod)
    grouped = [p for p in pods if p.instance is not None] if skipped else pods
    by_name = dict(zip(map(_NAME, grouped), grouped, strict=True))
    return Grouping(by_index, by_name, len(by_name) == len(grouped))


@frozen
class Regrouped:
    """``regroup``'s answer: the grouping and the Instances whose pods changed."""

    grouping: Grouping
    positions: dict[int, int] | None
    dirty: set[int]


def names_unique(by_index: dict[int, list[PodView]], by_name: dict[str, PodView]) -> bool:
    """Whether every grouped pod has its own name (else the verdicts are not kept)."""
    return len(by_name) == sum(map(len, by_index.values()))


def regroup(snap: Snapshot, basis: tuple[Any, ...], prev: Verdicts | None) -> Regrouped | None:
    """The pods grouped from ``prev``'s grouping and the changed pods (None: group afresh)."""
    if prev is None or not same_inputs(basis, prev.basis):
        return None
    new = snap.pods
    if new is prev.pods:
        same = Grouping(defaultdict(list, prev.pods_by_index), dict(prev.by_name))
        return Regrouped(same, prev.positions, set())
    limit = len(new) // _CHANGED_FRACTION + 16
    if len(new) == len(prev.pods):
        # the common case: changed pods keep their place (a cache updated in place)
        at = list(compress(range(len(new)), map(is_not, new, prev.pods)))
        if len(at) <= limit:
            got = _in_place(prev, new, at)
            if got is not None:
                return got
    positions = dict(zip(map(id, new), range(len(new)), strict=True))
    old_pos = prev.positions
    if old_pos is None:
        old_pos = dict(zip(map(id, prev.pods), range(len(prev.pods)), strict=True))
    added = positions.keys() - old_pos.keys()
    removed = old_pos.keys() - positions.keys()
    if len(positions) != len(new) or len(added) + len(removed) > limit:
        return None
    # the survivors must keep their order, so the lists of clean Instances stay as built
    order = list(map(positions.__getitem__, filter(positions.__contains__, map(id, prev.pods))))
    if order != sorted(order):
        return None
    return _apply(prev, positions, [prev.pods[old_pos[i]] for i in removed],
                  [new[positions[i]] for i in added])


def _in_place(prev: Verdicts, new: tuple[PodView, ...], at: list[int]) -> Regrouped | None:
    """``regroup`` when the pods at positions ``at`` were replaced, each by a pod of the same
    Instance (None otherwise): each one takes its predecessor's place in its list."""
    by_index: dict[int, list[PodView]] = defaultdict(list, prev.pods_by_index)
    by_name = dict(prev.by_name)
    dirty: set[int] = set()
    for k in at:
        old, pod = prev.pods[k], new[k]
        index = pod.instance
        if index != old.instance:
            return None
        if index is None:
            continue
        if index not in dirty:
            dirty.add(index)
            by_index[index] = list(by_index[index])
        pods = by_index[index]
        pods[next(j for j, p in enumerate(pods) if p is old)] = pod
        by_name.pop(old.name, None)
        by_name[pod.name] = pod
    if not names_unique(by_index, by_name):
        return None
    return Regrouped(Grouping(by_index, by_name), None, dirty)


def _apply(
    prev: Verdicts, positions: dict[int, int], gone: list[PodView], came: list[PodView]
) -> Regrouped | None:
    by_index: dict[int, list[PodView]] = defaultdict(list, prev.pods_by_index)
    by_name = dict(prev.by_name)
    dirty: set[int] = set()
    for pod in gone:
        index = pod.instance
        if index is not None:
            dirty.add(index)
            by_name.pop(pod.name, None)
    fresh: dict[int, list[PodView]] = defaultdict(list)
    for pod in came:
        index = pod.instance
        if index is not None:
            dirty.add(index)
            fresh[index].append(pod)
            by_name[pod.name] = pod
    for index in dirty:
        old = by_index.get(index)
        if old is None:
            return None  # a new Instance index: the key order of a full grouping differs
        pods = [p for p in old if id(p) in positions] + fresh.get(index, [])
        if not pods:
            return None  # an Instance lost its last pod: group afresh
        by_index[index] = sorted(pods, key=lambda p: positions[id(p)])
    if not names_unique(by_index, by_name):
        return None  # two pods of one name: group afresh, as the full pass does
    return Regrouped(Grouping(by_index, by_name), positions, dirty)


# ---------------------------------------------------------------------- queries of a pass


class VerdictsCache(Protocol):
    """What the queries below read of a pass's incremental cache (``totals.PassCache``)."""

    @property
    def kept(self) -> Verdicts | None: ...
    @property
    def dirty(self) -> set[int] | None: ...
    @property
    def basis(self) -> tuple[Any, ...]: ...
    @property
    def pods_by_index(self) -> dict[int, list[PodView]]: ...
    @property
    def by_name(self) -> dict[str, PodView]: ...
    @property
    def positions(self) -> dict[int, int] | None: ...


class VerdictsPass(Protocol):
    """What the queries below read of a pass (and ``unschedulable``, which they fill in): the
    part of ``steps.state.PassState`` they need, as a protocol, so this module does not
    import the state, which imports it."""

    unschedulable: set[int] | None

    @property
    def view(self) -> PassView: ...
    @property
    def cache(self) -> VerdictsCache: ...
    @property
    def migrations(self) -> Mapping[str, object]: ...
    @property
    def book(self) -> RetryBook: ...
    @property
    def rows(self) -> dict[int, InstanceStatus]: ...
    @property
    def steady_rows(self) -> dict[int, InstanceStatus]: ...
    @property
    def tallies(self) -> dict[int, Tally]: ...
    @property
    def plain_tallies(self) -> dict[int, InstanceStatus]: ...
    @property
    def row_groups(self) -> RowGroups | None: ...


def was_steady(st: VerdictsPass, row: InstanceStatus) -> bool:
    """The last pass found this row steady, and neither it nor its pods changed since."""
    kept, dirty = st.cache.kept, st.cache.dirty
    if kept is None or dirty is None or row.index in dirty or st.migrations:
        return False
    old = kept.steady.get(row.index)
    return old is not None and (old is row or old == row)


def unchanged_steady(st: VerdictsPass) -> list[int]:
    """Instances the last pass found steady whose row is the same object and whose pods
    did not change: steady again, with nothing to check (set operations, done in C)."""
    kept, dirty = st.cache.kept, st.cache.dirty
    if kept is None or dirty is None or st.migrations or not st.view.fast or st.book.blocks:
        return []
    steady = kept.steady
    keys = list(steady.keys() - dirty)
    now = map(st.rows.get, keys)
    return list(compress(keys, map(is_, now, map(steady.__getitem__, keys))))


def unchanged_tallies(st: VerdictsPass, was_ready: set[int]) -> dict[int, Tally]:
    """The kept tallies whose row is the same object, whose pods did not change and whose
    row was Ready before this pass as before the last (set operations, done in C)."""
    kept, dirty = st.cache.kept, st.cache.dirty
    if kept is None or dirty is None:
        return {}
    tallies = kept.tallies
    keys = list(tallies.keys() - dirty)
    olds = list(map(tallies.__getitem__, keys))
    same_row = map(is_, map(st.rows.get, keys), map(itemgetter(ROW_IN), olds))
    same_was = map(eq, map(was_ready.__contains__, keys), map(itemgetter(WAS_READY), olds))
    good = list(compress(keys, map(and_, same_row, same_was)))
    out = dict(zip(good, map(tallies.__getitem__, good), strict=True))
    plain = kept.plain  # (row, row, True, True, True): the same row, and Ready before
    keys = list(plain.keys() - dirty)
    same_row = map(is_, map(st.rows.get, keys), map(plain.__getitem__, keys))
    for i in compress(keys, map(and_, same_row, map(was_ready.__contains__, keys))):
        row = plain[i]
        out[i] = (row, row, True, True, True)
    return out


def tally_of(kept: Verdicts, index: int) -> Tally | None:
    """The last pass's tally of Instance ``index``, spelled out if it was kept plain."""
    got = kept.tallies.get(index)
    if got is None and index in kept.plain:
        row = kept.plain[index]
        return (row, row, True, True, True)
    return got


def kept_tally(st: VerdictsPass, row: InstanceStatus, was_ready: bool) -> Tally | None:
    """The last pass's tally of this row, if its row, pods and prior phase are the same."""
    kept, dirty = st.cache.kept, st.cache.dirty
    if kept is None or dirty is None or row.index in dirty:
        return None
    old = tally_of(kept, row.index)
    if old is None or old[WAS_READY] != was_ready:
        return None
    if not (old[ROW_IN] is row or old[ROW_IN] == row):
        return None
    return old


def unschedulable_now(st: VerdictsPass) -> set[int]:
    """Instances with a pod the scheduler cannot place (from the dirty ones if it can)."""
    got = st.unschedulable
    if got is None:
        kept = st.cache.kept
        if kept is None or kept.unschedulable is None or st.cache.dirty is None:
            got = unschedulable(st.cache.pods_by_index, st.cache.pods_by_index)
        else:
            got = set(kept.unschedulable - st.cache.dirty)
            got |= unschedulable(st.cache.pods_by_index, st.cache.dirty)
        st.unschedulable = got
    return got


def keep(st: VerdictsPass) -> Verdicts | None:
    """What this pass found per Instance, for the next pass (None: nothing to keep)."""
    if not names_unique(st.cache.pods_by_index, st.cache.by_name):
        return None
    stuck = st.unschedulable
    if stuck is None and st.cache.dirty is not None and st.cache.kept is not None:
        stuck = unschedulable_now(st) if st.cache.kept.unschedulable is not None else None
    return Verdicts(
        basis=st.cache.basis,
        pods=st.view.snap.pods,
        positions=st.cache.positions,
        pods_by_index=st.cache.pods_by_index,
        by_name=st.cache.by_name,
        unschedulable=frozenset(stuck) if stuck is not None else None,
        steady=st.steady_rows,
        tallies=st.tallies,
        row_groups=st.row_groups,
        plain=st.plain_tallies,
    )

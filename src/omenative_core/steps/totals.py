"""Running totals of the rows, kept from one pass for the next, so a pass costs O(what changed).

The replica-wide steps (rebuilds, scale, the rollout and status budgets, the status
counters and conditions, the new status's rows, orphan PodGroups) read every row. At rest
almost every row reads the same: no operation, Ready, Available, serving, on the target
revision. ``RowTotals`` keeps which rows are not like that, so those steps read only them
and count the rest.

Theory of operation:

1. **Plain rows.** A row is *plain* when, at the end of a pass, it has no operation, is
   Ready with no ``readySince`` (so Available, whatever the clock) and no last failure,
   runs and targets the pass's target revision, serves, was Ready before the pass, was
   found steady (``steps.repair``), and its tally left it as it was (``steps.status``: the
   row out is the row in; ``odd_of`` spells the rule). Every plain row
   adds the same to each replica-wide figure (a member, Ready, serving, available,
   updated; no wake-up, no failure, no other revision, no status budget, nothing to
   rebuild or update), so a figure needs only how many rows are plain and the other rows,
   the *odd* ones.
2. **What is kept.** ``RowTotals``: the pass's final rows by index and as the status's
   tuple, their positions, the odd indexes, and a few replica-wide facts that follow from
   the rows (Instances with pods but no row, PodGroups no row names, the nodes' facts).
   Plain data: the pass returns it and the next pass takes it back
   (``incremental.PlanMemo.totals``), so the core stays pure. The new status is the kept
   tuple with the changed rows replaced (a copy in C, not every row rebuilt).
3. **What can have changed.** A row stops being plain only if it is written (by a step,
   or the status read back as new objects) or its pods change. So in the next pass the
   rows that may be odd are the kept odd ones, the Instances whose pods changed
   (``PassCache.dirty``) and the rows written: the pass's rows are a copy of the kept map
   (``WrittenRows``) that records every write, and the status's rows that are not the
   objects the totals hold (found by identity, one ``is not`` per row done in C) are
   written into it as it is loaded (``loaded_rows``).
4. **Fallback.** The totals hold only while every kept verdict does (the same spec,
   config, revisions and nodes: ``PassCache.dirty`` is not None) and the target is the
   same; otherwise ``odd_indexes`` answers None and each step reads every row, as a cold
   pass does. Rows added or removed in the pass rebuild the status tuple in full.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from itertools import compress
from operator import attrgetter, is_not
from typing import TYPE_CHECKING, Any, Protocol

from attrs import define, field, frozen

from omenative_core.model.observed import PodView
from omenative_core.model.status import InstanceStatus
from omenative_core.phases import Phase
from omenative_core.steps.verdicts import (
    AVAILABLE,
    ROW_IN,
    ROW_OUT,
    SERVING,
    WAS_READY,
    VerdictsPass,
)

if TYPE_CHECKING:
    from omenative_core.steps.verdicts import Tally, Verdicts

__all__ = [
    "PassCache",
    "RowTotals",
    "WrittenRows",
    "loaded_rows",
    "odd_indexes",
    "odd_of",
    "rowless",
    "since_kept",
    "totals_of",
    "unsteady",
    "was_ready",
]


@frozen(eq=False)
class RowTotals:
    """One pass's final rows and which of them are not plain (see the module docstring).

    ``by_index``: index -> row, in index order (do not modify); ``rows``: the same rows,
    the status's ``instances``; ``positions``: index -> position in ``rows``; ``odd``: the
    indexes of the rows that are not plain; ``rowless``: the Instances with pods but no
    row; ``target``: the pass's target revision; ``groups`` and ``unnamed``: the PodGroups
    of each mechanism as observed, and the ones no row named (``native_gang.cleanup``);
    ``nodes``: what the pass read of the nodes (``capacity.check_nodes``).
    """

    by_index: dict[int, InstanceStatus]
    rows: tuple[InstanceStatus, ...]
    positions: dict[int, int]
    odd: frozenset[int]
    rowless: frozenset[int]
    target: str
    groups: tuple[tuple[Any, ...], ...] = ()
    unnamed: tuple[frozenset[str], ...] = ()
    nodes: tuple[bool, bool, bool, int, int] | None = None


@define
class PassCache:
    """The incremental cache of one pass: what it takes from the last pass (``kept``
    verdicts, ``totals``) and the pod grouping it builds (``steps.revisions.group_pods``),
    with the Instances whose pods changed (``dirty``). Read through the queries of
    ``steps.verdicts``, this module and ``PassState`` (``odd_rows``, ``pods_of`` ...)."""

    kept: Verdicts | None = None
    """The last pass's per-Instance verdicts (``steps.verdicts``), or None: derive all."""
    totals: RowTotals | None = None
    """The last pass's row totals (this module), or None: read every row."""
    basis: tuple[Any, ...] = ()
    """The replica-wide inputs the verdicts depend on (``verdicts.basis_of``)."""
    pods_by_index: dict[int, list[PodView]] = field(factory=lambda: defaultdict(list))
    by_name: dict[str, PodView] = field(factory=dict)
    """Pod name -> the pod (a name's last, as ``revisions.group_pods`` met them): the
    attempt a name stands for is that pod's (``PassState.attempt``)."""
    names_unique: bool = True
    """No two grouped pods share a name, so ``by_name`` has each one itself."""
    dirty: set[int] | None = None
    """Instances whose pods changed since ``kept`` (None: every Instance is recomputed)."""
    positions: dict[int, int] | None = None
    """``id(pod)`` -> its position in the snapshot (``verdicts.regroup``)."""


class WrittenRows(dict[int, InstanceStatus]):
    """A pass's rows that remember which indexes were written or removed since they were
    loaded (``written``): the rows that may have stopped being plain, known without
    reading the others. Used only when the kept totals hold (``loaded_rows``)."""

    __slots__ = ("written",)

    def __init__(self, rows: dict[int, InstanceStatus]) -> None:
        super().__init__(rows)
        self.written: set[int] = set()

    def __setitem__(self, key: int, value: InstanceStatus) -> None:
        self.written.add(key)
        super().__setitem__(key, value)

    def __delitem__(self, key: int) -> None:
        self.written.add(key)
        super().__delitem__(key)

    def update(self, *args: Any, **kwargs: Any) -> None:
        """``dict.update``, each key recorded."""
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def pop(self, key: int, *default: Any) -> Any:
        """``dict.pop``, the key recorded."""
        self.written.add(key)
        return super().pop(key, *default)

    def setdefault(self, key: int, default: Any = None) -> Any:
        """``dict.setdefault``, the key recorded."""
        self.written.add(key)
        return super().setdefault(key, default)

    def popitem(self) -> tuple[int, InstanceStatus]:
        """Not used by the passes: refused, so no write goes unrecorded."""
        raise TypeError("WrittenRows.popitem: remove rows by index")

    def clear(self) -> None:
        """Not used by the passes: refused, so no write goes unrecorded."""
        raise TypeError("WrittenRows.clear: remove rows by index")


class TotalsPass(VerdictsPass, Protocol):
    """What the functions below read of a pass: the part of ``steps.state.PassState`` they
    need, as a protocol, so this module does not import the state, which imports it."""

    @property
    def cache(self) -> PassCache: ...
    @property
    def groups_out(self) -> tuple[tuple[tuple[Any, ...], ...], tuple[frozenset[str], ...]]: ...
    @property
    def nodes_out(self) -> tuple[bool, bool, bool, int, int] | None: ...


def usable(st: TotalsPass) -> RowTotals | None:
    """The kept totals when they hold for this pass (rule 4), else None."""
    cache = st.cache
    kept = cache.totals
    if kept is None or cache.kept is None or cache.dirty is None or kept.target != st.view.target:
        return None
    return kept


def since_kept(st: TotalsPass) -> tuple[RowTotals, WrittenRows] | None:
    """The kept totals and this pass's rows (which know the indexes written since they
    were loaded) while the totals hold; None: a step reads every row. A step outside this
    module asks this, never which rows were carried over."""
    kept, rows = usable(st), st.rows
    if kept is None or not isinstance(rows, WrittenRows):
        return None
    return kept, rows


def loaded_rows(st: TotalsPass) -> WrittenRows | None:
    """The previous status's rows by index: a copy of the kept totals' map with the rows
    that are not the objects it holds written in (so they count as written), or None:
    build them from the status."""
    kept = usable(st)
    rows = st.view.prev.instances
    if kept is None or len(rows) != len(kept.rows):
        return None
    at = list(compress(range(len(rows)), map(is_not, rows, kept.rows)))
    if any(rows[k].index != kept.rows[k].index for k in at):
        return None
    out = WrittenRows(kept.by_index)
    for k in at:
        out[rows[k].index] = rows[k]
    return out


def rowless(st: TotalsPass) -> set[int]:
    """The Instances with pods but no row, from the kept ones and the rows written (the
    pods' Instances are the kept ones while the totals hold: ``verdicts.regroup``)."""
    kept, rows = usable(st), st.rows
    if kept is None or not isinstance(rows, WrittenRows):
        return st.cache.pods_by_index.keys() - rows.keys()  # a new set
    pods = st.cache.pods_by_index
    return {i for i in kept.rowless | rows.written | (st.cache.dirty or set()) if i in pods
            and i not in rows}


def was_ready(st: TotalsPass, indexes: Iterable[int]) -> set[int]:
    """Of ``indexes``, the Instances whose row in the previous status was Ready (found by
    the kept positions while the totals hold: ``loaded_rows`` checked them)."""
    kept, rows, prev = usable(st), st.rows, st.view.prev.instances
    if kept is None or not isinstance(rows, WrittenRows):
        wanted = set(indexes)
        return {r.index for r in prev if r.phase == Phase.READY and r.index in wanted}
    at = kept.positions
    return {i for i in indexes if i in at and prev[at[i]].phase == Phase.READY}


def odd_indexes(st: TotalsPass) -> list[int] | None:
    """The indexes of the rows that may not be plain now, in index order (None: any may):
    the kept odd ones, the written ones and the Instances whose pods changed."""
    kept, rows = usable(st), st.rows
    if kept is None or not isinstance(rows, WrittenRows):
        return None
    out = kept.odd | rows.written | (st.cache.dirty or set())
    return sorted([i for i in out if i in rows])


def unsteady(st: TotalsPass) -> list[int] | None:
    """The rows the pass must move or check, in index order, while the kept totals hold;
    every other row was plain and found steady last pass, and is steady again (put in
    ``st.steady_rows``, as ``verdicts.unchanged_steady`` would). None: the totals do not
    hold, or steady rows are not reused this pass."""
    verdicts, odd = st.cache.kept, odd_indexes(st)
    if odd is None or verdicts is None or not st.view.fast or st.migrations or st.book.blocks:
        return None
    kept, rows, dirty = verdicts.steady, st.rows, st.cache.dirty or set()
    steady = st.steady_rows
    steady.update(kept)
    todo = []
    for i in odd:
        if i in dirty or kept.get(i) is not rows[i]:
            steady.pop(i, None)
            todo.append(i)
    return todo


def odd_of(st: TotalsPass, tallied: list[Tally]) -> list[Tally]:
    """Of these final tallies, the ones whose row is not plain (rule 1 of the module
    docstring, found steady this pass too, so the next pass can take it as steady); the
    steady rows the pass removed are forgotten first."""
    rows, steady = st.rows, st.steady_rows
    gone = (
        [i for i in rows.written if i in steady and i not in rows]
        if isinstance(rows, WrittenRows) and usable(st) is not None
        else list(steady.keys() - rows.keys())
    )
    for i in gone:
        del steady[i]
    target, ready = st.view.target, Phase.READY
    # inlined, with no call per row, as a cold pass runs this over every row
    return [
        t
        for t in tallied
        if not (
            t[ROW_OUT] is t[ROW_IN]
            and t[SERVING]
            and t[AVAILABLE]
            and t[WAS_READY]
            and (row := t[ROW_IN]).operation is None
            and row.phase == ready
            and row.ready_since is None
            and row.last_failure is None
            and not row.conditions
            and row.running_revision == target
            and row.target_revision == target
            and row.index in steady
            and steady[row.index] is row
        )
    ]


def totals_of(
    st: TotalsPass, rows: tuple[InstanceStatus, ...], odd: frozenset[int], same_keys: bool
) -> RowTotals:
    """The totals of this pass's final ``rows`` (index order) for the next pass.

    ``same_keys``: the rows have the kept totals' indexes, so only the rows that are not
    the kept objects are written into a copy of the kept map.
    """
    kept = st.cache.totals
    if same_keys and kept is not None:
        by_index = dict(kept.by_index)
        at = list(compress(rows, map(is_not, rows, kept.rows)))
        by_index.update(zip(map(attrgetter("index"), at), at, strict=True))
        positions = kept.positions
    else:
        indexes = list(map(attrgetter("index"), rows))
        by_index = dict(zip(indexes, rows, strict=True))
        positions = dict(zip(indexes, range(len(rows)), strict=True))
    groups, unnamed = st.groups_out
    return RowTotals(
        by_index,
        rows,
        positions,
        odd,
        frozenset(rowless(st)),
        st.view.target,
        groups,
        unnamed,
        st.nodes_out,
    )

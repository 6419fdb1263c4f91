"""The status stays under etcd's request limit (issue 14): the budget's charges are true.

1. No row's entry is larger than the budget charges for it, whatever its fields hold
   within their bounds (Kubernetes names, the planner's words, a failure message as the
   planner cuts it).
2. A row that differs from its neighbours adds no more than ``FRAGMENT_BYTES`` to the
   columns (beyond its entry), once the values it uses already have a group.
3. No state the budget admits at 20,000 Instances encodes above 1.25 MiB (so never above
   1.5 MiB): operations, Migrates, failures and rows inside minReadySeconds at random
   indexes, every field at its longest.
"""

from __future__ import annotations

from typing import Any

from attrs import evolve
from hypothesis import given, settings
from hypothesis import strategies as st

from omenative_core.model.status import (
    PHASES,
    InstanceOperation,
    InstanceStatus,
    InstanceTermination,
)
from omenative_core.status import encode_columns
from omenative_core.status.budget import (
    FAILURE_REASON_MAX,
    FRAGMENT_BYTES,
    MIGRATE_ROW_BYTES,
    OPERATION_ROW_BYTES,
    STATUS_REQUEST_LIMIT,
    STATUS_TARGET,
    bounded_text,
    row_cost,
)
from omenative_core.status.indexsets import INT32_MAX
from omenative_core.status.wire import go_json_bytes, status_to_json
from tests import status_states
from tests.property.strategies import timestamps

_DNS = "abcdefghijklmnopqrstuvwxyz0123456789-."
_CHARS = st.characters(exclude_categories=("Cs",))
# each bounded field is drawn short, or near and beyond its bound (where a charge could fail)
names = st.text(_DNS, min_size=1, max_size=20) | st.text(_DNS, min_size=240, max_size=253)
words = st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", max_size=64)
anything = st.text(_CHARS, max_size=64) | st.text(_CHARS, min_size=1000, max_size=4000)
indexes = st.integers(0, INT32_MAX)


def _opt(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


operations = st.builds(
    InstanceOperation,
    id=st.text(_DNS, max_size=64 + 253 + 24),
    type=st.sampled_from(["Create", "Update", "Restart", "Migrate", "Delete"]),
    step=words,
    started_at=_opt(timestamps),
    last_progress_at=_opt(timestamps),
    deadline=_opt(timestamps),
    retry_count=st.integers(0, INT32_MAX),
    target_revision=names,
    reason=words,
    waiting=_opt(words),
    capacity_refused_at=_opt(timestamps),
    strategy=_opt(words),
    surge_index=_opt(indexes),
    from_node=_opt(names),
    hint_target_nodes=st.lists(names, max_size=8).map(tuple),
    request_uuid=_opt(st.uuids().map(str)),
    replaces=_opt(indexes),
    unschedulable_since=_opt(timestamps),
)
failures = st.builds(
    InstanceTermination,
    pod_name=names,
    container_name=st.text(_DNS, max_size=63),
    reason=anything.map(lambda t: bounded_text(t, FAILURE_REASON_MAX)),
    exit_code=_opt(st.integers(-(2**31), 2**31 - 1)),
    message=anything.map(bounded_text),
    time=_opt(timestamps),
)
rows_with_an_entry = st.builds(
    InstanceStatus,
    index=indexes,
    phase=st.sampled_from(PHASES),
    ready_since=_opt(timestamps),
    operation=_opt(operations),
    last_failure=_opt(failures),
).filter(lambda r: r.operation or r.last_failure or r.ready_since)


def _entry_bytes(row: InstanceStatus) -> int:
    return sum(len(go_json_bytes(e)) + 1 for e in encode_columns([row])["entries"])


@given(rows_with_an_entry)
def test_no_entry_is_larger_than_its_charge(row: InstanceStatus) -> None:
    charge = row_cost(row)
    assert _entry_bytes(row) + FRAGMENT_BYTES <= charge
    if row.operation is not None:
        assert charge in (OPERATION_ROW_BYTES, MIGRATE_ROW_BYTES)


_OLD, _NEW = "rev-old", "rev-new"
_PALETTE = [
    InstanceStatus(index=i, incarnation=1, phase=phase, running_revision=run,
                   target_revision=target, pod_count=pods, serving_pod_count=pods,
                   available_pod_count=pods, admitted=bool(i % 2), active_ordinal=i % 2)
    for i, (phase, run, target, pods) in enumerate(
        (p, r, t, c)
        for p in PHASES
        for r in ("", _OLD, _NEW)
        for t in ("", _NEW)
        for c in (0, 1, 3)
    )
]
"""Rows at the front of a fleet that give every value the property uses a group already."""


@st.composite
def odd_rows(draw: st.DrawFn, start: int, end: int) -> list[InstanceStatus]:
    chosen = draw(st.sets(st.integers(start, end - 1), min_size=1, max_size=20))
    out = []
    for index in sorted(chosen):
        like = draw(st.sampled_from(_PALETTE))
        out.append(evolve(like, index=index, incarnation=draw(st.integers(1, 2**63 - 1))))
    return out


@given(st.integers(0, INT32_MAX - 5000), st.integers(100, 4000), st.data())
def test_a_differing_row_costs_the_columns_at_most_its_fragment_charge(
    offset: int, n: int, data: st.DataObject
) -> None:
    first = offset + len(_PALETTE)
    palette = [evolve(r, index=offset + r.index) for r in _PALETTE]
    steady = {
        i: InstanceStatus(index=i, incarnation=1, phase="Ready", running_revision=_OLD,
                          pod_count=1, serving_pod_count=1, available_pod_count=1, admitted=True)
        for i in range(first, first + n)
    }
    before = len(go_json_bytes(encode_columns([*palette, *steady.values()])))
    odd = data.draw(odd_rows(first, first + n))
    rows = {**steady, **{r.index: r for r in odd}}
    after = len(go_json_bytes(encode_columns([*palette, *rows.values()])))
    assert after - before <= len(odd) * FRAGMENT_BYTES


@settings(max_examples=8, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    migrates=st.integers(0, 8),
    failed=st.integers(0, 150),
    ops_share=st.sampled_from([None, 0.0, 0.25, 0.5, 0.9]),
)
def test_no_state_the_budget_admits_at_20000_instances_is_over_the_limit(
    seed: int, migrates: int, failed: int, ops_share: float | None
) -> None:
    room = status_states.ENTRIES_CAPACITY - migrates * MIGRATE_ROW_BYTES
    room -= failed * status_states.FAILURE_ROW_BYTES
    ops = None if ops_share is None else int(ops_share * room) // OPERATION_ROW_BYTES
    status = status_states.worst_reachable(
        20_000, ops=ops, migrates=migrates, failed=failed, seed=seed
    )
    size = len(go_json_bytes(status_to_json(status)))
    assert size <= STATUS_TARGET < STATUS_REQUEST_LIMIT

"""Hypothesis strategies for the model, shared by every test that needs specs or statuses.

``specs()``, ``statuses()`` and ``instance_rows()`` cover every field of their classes: each
class is built through ``_every_field``, which fails loudly when the model gains a field the
strategy does not draw, so a new field cannot silently escape the round-trip tests.

Values are the ones the wire can carry exactly: timestamps in UTC at whole seconds,
durations in whole seconds or milliseconds (non-negative), Instance rows with distinct
indexes, pod counts >= 0 and activeOrdinal 0 or 1.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
from hypothesis import strategies as st

from omenative_core.model.spec import (
    COMPONENTS,
    RUNNER_NAMES,
    InferenceReplica,
    InferenceReplicaSpec,
    InPlaceUpdateStrategy,
    LifecycleSpec,
    MigrationPolicy,
    ObjectMeta,
    Pacing,
    ParentRef,
    RollingUpdate,
    Runner,
    UpdateStrategy,
)
from omenative_core.model.status import (
    PHASES,
    Condition,
    InferenceReplicaStatus,
    InstanceOperation,
    InstanceStatus,
    InstanceTermination,
    MigrationStatus,
    RetryBlock,
    RolloutHold,
    TrafficTarget,
)
from omenative_core.model.timefmt import to_second

__all__ = [
    "conditions",
    "durations",
    "instance_rows",
    "json_objects",
    "object_metas",
    "replicas",
    "specs",
    "statuses",
    "texts",
    "timestamps",
]

# any Unicode text JSON can carry (no lone surrogates)
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
names = st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,14}[a-z0-9])?", fullmatch=True)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
small = st.integers(0, 5)

timestamps = st.datetimes(
    min_value=datetime(1970, 1, 1),
    max_value=datetime(2200, 12, 31),
    timezones=st.just(UTC),
).map(to_second)
"""RFC 3339 timestamps as the API stores them: UTC, whole seconds."""

durations = st.one_of(
    st.integers(0, 10**8).map(lambda s: timedelta(seconds=s)),
    st.integers(0, 10**10).map(lambda ms: timedelta(milliseconds=ms)),
)
"""Go durations we write exactly: whole seconds or milliseconds."""

int_or_str = st.one_of(
    st.integers(0, 10**6),
    st.integers(0, 100).map(lambda p: f"{p}%"),
    texts,
)

_json_leaf = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | texts
json_values = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(texts, json_values, max_size=3)
"""JSON objects such as pod templates (passed through unchanged)."""

str_maps = st.dictionaries(texts, texts, max_size=3)


def _opt(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


def _tuples(
    strategy: st.SearchStrategy[Any], max_size: int = 3, min_size: int = 0
) -> st.SearchStrategy[Any]:
    return st.lists(strategy, min_size=min_size, max_size=max_size).map(tuple)


def _every_field(cls: type[Any], **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``st.builds(cls, ...)`` that must name every attrs field of ``cls``."""
    expected = {f.name for f in attrs.fields(cls)}
    missing, extra = expected - set(fields), set(fields) - expected
    if missing or extra:
        raise AssertionError(
            f"strategy for {cls.__name__}: missing fields {sorted(missing)}, "
            f"unknown {sorted(extra)}"
        )
    return st.builds(cls, **fields)


# ---------------------------------------------------------------------------------- spec

runners = _every_field(
    Runner,
    name=st.sampled_from(RUNNER_NAMES) | texts,
    size=int32,
    template=json_objects,
)

rolling_updates = _every_field(
    RollingUpdate,
    partition=_opt(int32),
    max_unavailable=_opt(int_or_str),
    max_surge=_opt(int_or_str),
)

in_place_strategies = _every_field(
    InPlaceUpdateStrategy,
    grace_period_seconds=_opt(int32),
    mark_not_ready_during_lifecycle=_opt(st.booleans()),
)

update_strategies = _every_field(
    UpdateStrategy,
    type=_opt(st.sampled_from(["SurgeThenDrain", "RecreatePod", "InPlaceIfPossible"]) | texts),
    rolling_update=_opt(rolling_updates),
    in_place_update_strategy=_opt(in_place_strategies),
)

lifecycles = _every_field(
    LifecycleSpec,
    restart_policy=_opt(st.sampled_from(["None", "RecreateInstanceOnPodRestart"]) | texts),
    update_strategy=_opt(update_strategies),
    ready_policy=_opt(st.sampled_from(["AllPodReady", "None"])),
    instance_ready_timeout=_opt(durations),
    min_ready_seconds=_opt(int32),
    migration_policy=_opt(
        _every_field(MigrationPolicy, mode=_opt(st.sampled_from(["Auto", "Surge", "Never"])))
    ),
)

pacings = _every_field(
    Pacing,
    partition=_opt(int32),
    max_unavailable=_opt(int_or_str),
    rollback_to_revision=_opt(names),
)


def specs() -> st.SearchStrategy[InferenceReplicaSpec]:
    """Any InferenceReplicaSpec, every field drawn (including None and empty values)."""
    return _every_field(
        InferenceReplicaSpec,
        component=st.sampled_from(COMPONENTS) | texts,
        runners=_tuples(runners),
        replicas=_opt(int32),
        min_ready_seconds=int32,
        topology_key=_opt(texts),
        topology_spread=_opt(st.sampled_from(["Preferred", "Required"])),
        topology_spread_key=_opt(texts),
        pairing_protocol=_opt(names),
        lifecycle=_opt(lifecycles),
        pacing=_opt(pacings),
        paused=st.booleans(),
        pause_mode=_opt(st.sampled_from(["Recover", "Freeze", ""])),
        revision_history_limit=_opt(int32),
        parent_ref=_opt(_every_field(ParentRef, name=names)),
    )


def object_metas() -> st.SearchStrategy[ObjectMeta]:
    """Any ObjectMeta."""
    return _every_field(
        ObjectMeta,
        name=names,
        namespace=names,
        uid=texts,
        generation=int64,
        resource_version=texts,
        labels=str_maps,
        annotations=str_maps,
        finalizers=_tuples(texts),
        deletion_timestamp=_opt(timestamps),
        creation_timestamp=_opt(timestamps),
    )


# -------------------------------------------------------------------------------- status

conditions = _every_field(
    Condition,
    type=st.sampled_from(["AllPodsReady", "AllPodsScheduled", "Failed", "Ready"]) | texts,
    status=st.sampled_from(["True", "False", "Unknown"]),
    reason=texts,
    message=texts,
    last_transition_time=_opt(timestamps),
    observed_generation=_opt(int64),
)
"""metav1.Condition values."""

operations = _every_field(
    InstanceOperation,
    id=texts,
    type=st.sampled_from(["Create", "Update", "Restart", "Migrate", "Delete"]),
    step=st.sampled_from(["", "CreatePods", "Surge", "Drain", "InPlace"]) | texts,
    started_at=_opt(timestamps),
    last_progress_at=_opt(timestamps),
    deadline=_opt(timestamps),
    retry_count=int32,
    target_revision=texts,
    reason=texts,
    waiting=_opt(st.sampled_from(["QuotaExceeded", "Unschedulable", "NodeUnknown", "Paused"])),
    capacity_refused_at=_opt(timestamps),
    strategy=_opt(st.sampled_from(["SurgeThenDrain", "RecreatePod", "InPlaceOnly"])),
    surge_index=_opt(int32),
    from_node=_opt(names),
    hint_target_nodes=_tuples(names),
    request_uuid=_opt(st.uuids().map(str)),
    replaces=_opt(int32),
    unschedulable_since=_opt(timestamps),
)

terminations = _every_field(
    InstanceTermination,
    pod_name=texts,
    container_name=texts,
    reason=st.sampled_from(["OOMKilled", "Error", "CrashLoopBackOff", "PodFailed"]) | texts,
    exit_code=_opt(int32),
    message=texts,
    time=_opt(timestamps),
)

# few distinct values, so columns have real groups and runs
_revisions = st.sampled_from(["", "x-engine-5d8f", "x-engine-9c21"]) | texts
_counts = st.integers(0, 3) | st.integers(0, 2**31 - 1)
_incarnations = st.integers(0, 3) | int64
_SMALL_INDEXES = st.integers(0, 40)


def instance_row(
    index: int | st.SearchStrategy[int] = _SMALL_INDEXES,
) -> st.SearchStrategy[InstanceStatus]:
    """One Instance row: half plain (columns only), half with per-row records."""
    scalars: dict[str, st.SearchStrategy[Any]] = {
        "index": st.just(index) if isinstance(index, int) else index,
        "incarnation": _incarnations,
        "phase": st.sampled_from(PHASES) | texts,
        "running_revision": _revisions,
        "target_revision": _revisions,
        "pod_count": _counts,
        "serving_pod_count": _counts,
        "available_pod_count": _counts,
        "admitted": st.booleans(),
        "active_ordinal": st.sampled_from([0, 1]),
    }
    empty: dict[str, Any] = {
        "conditions": (),
        "ready_since": None,
        "operation": None,
        "last_failure": None,
        "announced": (),
    }
    records: dict[str, st.SearchStrategy[Any]] = {
        "conditions": _tuples(conditions, 2, min_size=1),
        "ready_since": timestamps,
        "operation": operations,
        "last_failure": terminations,
        "announced": _tuples(texts, 2, min_size=1),
    }
    plain = _every_field(InstanceStatus, **scalars, **{k: st.just(v) for k, v in empty.items()})
    rich = _every_field(
        InstanceStatus,
        **scalars,
        **{k: st.just(empty[k]) | strategy for k, strategy in records.items()},
    )
    return plain | rich


_dense_rows = instance_row(_SMALL_INDEXES)
_sparse_rows = instance_row(st.integers(0, 2**31 - 1))


def _by_index(rows: list[InstanceStatus]) -> tuple[InstanceStatus, ...]:
    return tuple(sorted(rows, key=lambda row: row.index))


def instance_rows(
    *, min_size: int = 0, shuffled: bool = False
) -> st.SearchStrategy[tuple[InstanceStatus, ...]]:
    """Rows with distinct indexes, ascending (or in any order when ``shuffled``).

    Mostly dense small indexes (so columns have runs), sometimes sparse int32 ones.
    """
    rows = st.one_of(
        st.lists(_dense_rows, min_size=min_size, max_size=16, unique_by=lambda r: r.index),
        st.lists(_sparse_rows, min_size=min_size, max_size=6, unique_by=lambda r: r.index),
    ).map(_by_index)
    if shuffled:
        return rows.flatmap(lambda r: st.permutations(r).map(tuple))
    return rows


retry_blocks = _every_field(
    RetryBlock,
    target_revision=names,
    state=st.sampled_from(["Backoff", "RetryInProgress", "Held"]),
    attempts_started=int32,
    next_retry_at=_opt(timestamps),
    first_failure_at=_opt(timestamps),
    last_failure_at=_opt(timestamps),
    reason=texts,
)

migrations = _every_field(
    MigrationStatus,
    request_uuid=st.uuids().map(str),
    trigger=st.sampled_from(["Manual", "Auto"]),
    source_instance=int32,
    surge_instance=_opt(int32),
    allocated_at=_opt(timestamps),
    from_node=_opt(names),
    hint_target_nodes=_tuples(names),
    phase=st.sampled_from(["Accepted", "SurgePending", "Completed", "Failed", "Relocated"]),
    attempt=int32,
    reason=texts,
    message=texts,
    requested_by=texts,
    started_at=_opt(timestamps),
    deadline=_opt(timestamps),
    completed_at=_opt(timestamps),
    succeeded=_opt(st.booleans()),
)

rollout_holds = _every_field(
    RolloutHold,
    gate=st.sampled_from(["Plan", "Budget", "RetryBlock", "Held"]),
    reason=texts,
    target=texts,
    since=_opt(timestamps),
)

traffic_targets = _every_field(
    TrafficTarget,
    revision_name=names,
    percent=st.integers(0, 100),
    tag=_opt(st.sampled_from(["canary", "stable"])),
    latest_revision=_opt(st.booleans()),
    pairing_protocol=_opt(names),
)


def statuses(
    rows: st.SearchStrategy[tuple[InstanceStatus, ...]] | None = None,
) -> st.SearchStrategy[InferenceReplicaStatus]:
    """Any InferenceReplicaStatus, every field drawn; ``rows`` overrides the Instance rows."""
    return _every_field(
        InferenceReplicaStatus,
        observed_generation=int64,
        replicas=int32,
        ready_replicas=int32,
        serving_replicas=int32,
        available_replicas=int32,
        updated_replicas=int32,
        updated_ready_replicas=int32,
        current_revision=texts,
        update_revision=texts,
        collision_count=_opt(int32),
        label_selector=texts,
        instances=rows if rows is not None else instance_rows(),
        retry_blocks=_tuples(retry_blocks),
        migrations=_tuples(migrations, 2),
        conditions=_tuples(conditions),
        traffic=_tuples(traffic_targets, 2),
        coordination_group_ref=_opt(names),
        rollout_hold=_opt(rollout_holds),
    )


def replicas() -> st.SearchStrategy[InferenceReplica]:
    """Any InferenceReplica, with or without a status."""
    return _every_field(
        InferenceReplica,
        metadata=object_metas(),
        spec=specs(),
        status=_opt(statuses()),
    )

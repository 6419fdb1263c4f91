"""OME's ``ome_omenative_*`` series: names, labels and values as OME's dashboards read them."""

from __future__ import annotations

from typing import Any

from omenative_controller.observability import Metrics
from omenative_controller.ome_series import condemned_pods
from omenative_controller.pass_context import PassContext
from omenative_core.model.status import InferenceReplicaStatus, InstanceOperation, InstanceStatus

COLUMNAR = {"instanceStatusEncoding": "ColumnarV2", "instanceStatusColumns": {}}


def ctx(status: dict[str, Any] | None, observed: Any = None) -> PassContext:
    raw: dict[str, Any] = {"metadata": {"name": "chat-engine", "namespace": "demo",
                                        "labels": {"ome.io/inferenceservice": "chat"}},
                           "spec": {"component": "engine"}}
    if status is not None:
        raw["status"] = status
    return PassContext(key="demo/chat-engine", namespace="demo", name="chat-engine", raw=raw,
                       observed_status=observed)


def body(status: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"component": "engine"}, "status": status}


def row(index: int, pods: int, *, deleting: bool = False) -> InstanceStatus:
    op = InstanceOperation(id=f"op-{index}", type="Delete") if deleting else None
    return InstanceStatus(index=index, pod_count=pods, operation=op)


def status(*rows: InstanceStatus) -> InferenceReplicaStatus:
    return InferenceReplicaStatus(instances=tuple(rows))


def test_a_committed_write_in_another_encoding_counts_one_conversion_with_omes_labels() -> None:
    m = Metrics()
    c = ctx(COLUMNAR, status())
    label = m.ome.status_write(c, body({"instanceStatuses": []}), 1234)
    assert label == "dense_v1"
    m.ome.status_committed(c, body({"instanceStatuses": []}), label, status())
    assert m.sample("ome_omenative_ir_status_conversions_total",
                    {"from": "columnar_v2", "to": "dense_v1"}) == 1
    for result in ("attempt", "committed"):
        assert m.sample("ome_omenative_ir_status_writes_total",
                        {"encoding": "dense_v1", "result": result}) == 1
    assert m.sample("ome_omenative_ir_status_bytes", {
        "namespace": "demo", "name": "chat-engine", "component": "engine",
        "encoding": "dense_v1"}) == 1234
    # our own series are untouched by OME's
    assert m.sample("omenative_status_bytes") == 0


def test_a_write_in_the_stored_encoding_or_a_first_write_converts_nothing() -> None:
    m = Metrics()
    for stored in ({"instanceStatuses": []}, None):
        c = ctx(stored, status())
        label = m.ome.status_write(c, body({}), 10)
        m.ome.status_committed(c, body({}), label, status())
    assert m.sample("ome_omenative_ir_status_conversions_total") == 0
    assert m.sample("ome_omenative_ir_status_writes_total", {"result": "committed"}) == 2


def test_the_bytes_series_follows_the_encoding_and_goes_with_the_replica() -> None:
    m = Metrics()
    c = ctx(None)
    m.ome.status_write(c, body({}), 10)
    m.ome.status_write(c, body(COLUMNAR), 20)
    assert m.sample("ome_omenative_ir_status_bytes", {"encoding": "dense_v1"}) == 0
    assert m.sample("ome_omenative_ir_status_bytes", {"encoding": "columnar_v2"}) == 20
    m.ome.scale_down("demo", "chat-engine", "chat", "engine", active_pods=3, wave_pods=3)
    m.forget_status_bytes("demo", "chat-engine")
    names = {s.name for f in m.registry.collect() for s in f.samples}
    assert "ome_omenative_ir_status_bytes" not in names
    assert "ome_omenative_scale_down_active_pods" not in names


def test_a_scale_down_wave_is_the_pods_of_the_instances_newly_condemned() -> None:
    before = status(row(0, 2), row(1, 2), row(2, 2))
    after = status(row(0, 2), row(1, 2, deleting=True), row(2, 2, deleting=True))
    assert condemned_pods(before, after) == (4, 4)
    # the next pass: the same two still leaving (one pod gone) make no new wave
    later = status(row(0, 2), row(1, 1, deleting=True), row(2, 2, deleting=True))
    assert condemned_pods(after, later) == (3, 0)
    # an Instance whose pods are already gone still costs one, as in OME
    assert condemned_pods(before, status(row(0, 2), row(1, 0, deleting=True))) == (0, 1)


def test_scale_down_series_carry_omes_labels_and_never_defer() -> None:
    m = Metrics()
    before = status(row(0, 4), row(1, 4))
    c = ctx({"instanceStatuses": []}, before)
    label = m.ome.status_write(c, body({}), 10)
    m.ome.status_committed(c, body({}), label, status(row(0, 4), row(1, 4, deleting=True)))
    ident = {"namespace": "demo", "isvc": "chat", "component": "engine"}
    assert m.sample("ome_omenative_scale_down_active_pods", ident) == 4
    assert m.sample("ome_omenative_scale_down_deferred_instances", ident) == 0
    assert m.sample("ome_omenative_scale_down_batch_pods_count", {"component": "engine"}) == 1
    assert m.sample("ome_omenative_scale_down_batch_pods_sum", {"component": "engine"}) == 4
    assert m.sample("ome_omenative_scale_down_oversized_batch_total") == 0


def test_group_transitions_count_phase_changes_only() -> None:
    m = Metrics()
    m.ome.group_transitions("demo", "chat", [(0, "Promoting", "Failed"), (1, "Stable", "Stable")])
    assert m.sample("ome_omenative_rollout_group_transition_total", {
        "namespace": "demo", "isvc": "chat", "group": "0", "from": "Promoting",
        "to": "Failed"}) == 1
    assert m.sample("ome_omenative_rollout_group_transition_total") == 1


def test_codec_errors_count_by_omes_reason() -> None:
    m = Metrics()
    m.ome.codec_error("cardinality_limit")
    assert m.sample("ome_omenative_ir_status_codec_errors_total",
                    {"reason": "cardinality_limit"}) == 1

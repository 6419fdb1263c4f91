"""The hand-over from a LeaderWorkerSet to OMENative: the pure step, the plan it changes,
a sweep over small clusters, and the admission warning for LWS_* names."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from attrs import evolve
from tests.unit.test_service_render import make_isvc, make_runtime

from omenative_core.model.status import InferenceReplicaStatus, InstanceOperation, InstanceStatus
from omenative_core.service import CRD_LEADER_WORKER_SET, isvc_from_json, render_service
from omenative_core.service.handover import (
    CONDITION_LWS_HANDOVER,
    PHASE_DELETING,
    PHASE_NOT_OWNED,
    PHASE_SURGING,
    PHASE_TRADING,
    TRADE_AFTER,
    LwsView,
    lws_view_from_json,
    plan_handover,
    with_handovers,
)
from omenative_core.service.validate_lws import REASON_LWS_VARIABLE, lws_variable_warnings
from omenative_core.status.wire import replica_from_json

SELECTOR = {
    "ome.io/inferenceservice": "chat",
    "component": "engine",
    "ome.io/managed-by": "OMENative",
    "ome.io/runner": "leader",
}


def lws(replicas: int, ready: int, *, owned: bool = True, **kw: Any) -> LwsView:
    return LwsView(name="lws-chat-engine", uid="u1", replicas=replicas, groups=replicas,
                   ready=ready, owned=owned, **kw)


def ir_status(ready: int, starting: int = 0, parked: int = 0) -> InferenceReplicaStatus:
    instances = [InstanceStatus(index=i, phase="Ready") for i in range(ready)]
    instances += [
        InstanceStatus(index=ready + i, phase="Creating",
                       operation=InstanceOperation(id=f"s{i}", type="Create"))
        for i in range(starting)
    ]
    instances += [
        InstanceStatus(index=ready + starting + i, phase="Creating",
                       operation=InstanceOperation(id=f"p{i}", type="Create",
                                                   waiting="Unschedulable"))
        for i in range(parked)
    ]
    return InferenceReplicaStatus(replicas=len(instances), ready_replicas=ready,
                                  serving_replicas=ready, instances=tuple(instances))


def test_instances_still_starting_keep_every_group() -> None:
    step = plan_handover("engine", 2, lws(2, 2), ir_status(0, starting=2), SELECTOR)
    assert step.phase == PHASE_SURGING
    assert step.scale_to is None and not step.delete
    assert step.serving == 2
    assert "0/2 Instances serving" in step.message


def test_one_group_goes_for_each_instance_that_serves() -> None:
    step = plan_handover("engine", 2, lws(2, 2), ir_status(1, starting=1), SELECTOR)
    assert (step.phase, step.scale_to) == (PHASE_SURGING, 1)


def test_a_group_the_lws_status_still_counts_after_a_scale_down_is_not_counted_twice() -> None:
    # spec already 1, status not caught up (2 ready): serving is 1 group + 1 Instance = 2
    step = plan_handover("engine", 2, lws(1, 2), ir_status(1, starting=1), SELECTOR)
    assert step.serving == 2
    assert step.scale_to is None


def test_at_zero_groups_the_lws_is_deleted() -> None:
    step = plan_handover("engine", 2, lws(0, 0), ir_status(2), SELECTOR)
    assert step.phase == PHASE_DELETING and step.delete


def test_an_lws_already_being_deleted_is_not_deleted_again() -> None:
    step = plan_handover("engine", 2, lws(0, 0, deleting=True), ir_status(2), SELECTOR)
    assert step.phase == PHASE_DELETING and not step.delete


def test_no_room_trades_one_group_while_serving_is_whole() -> None:
    step = plan_handover("engine", 2, lws(2, 2), ir_status(0, parked=2), SELECTOR)
    assert step.phase == PHASE_TRADING
    assert step.reason == "NoRoomToSurge"
    assert step.scale_to == 1
    assert "serving may drop to 1" in step.message


def test_no_room_waits_for_the_traded_instance_before_the_next_trade() -> None:
    # one group traded (serving 1 of 2), the freed Instance has not started yet
    step = plan_handover("engine", 2, lws(1, 1), ir_status(0, parked=2), SELECTOR)
    assert step.phase == PHASE_TRADING and step.scale_to is None
    assert "waiting" in step.message


def test_no_room_with_a_group_that_serves_nothing_still_trades() -> None:
    step = plan_handover("engine", 2, lws(2, 1), ir_status(0, parked=2), SELECTOR)
    assert step.scale_to == 1


def test_an_lws_not_owned_is_left_alone_and_reported() -> None:
    step = plan_handover("engine", 2, lws(2, 2, owned=False), ir_status(2), SELECTOR)
    assert step.phase == PHASE_NOT_OWNED and step.condition_status == "False"
    assert step.scale_to is None and not step.delete and not step.label_leaders
    assert step.selector is None


def test_the_shared_selector_drops_managed_by_and_labels_the_leaders() -> None:
    step = plan_handover("engine", 2, lws(2, 2), None, SELECTOR)
    assert step.selector == {k: v for k, v in SELECTOR.items() if k != "ome.io/managed-by"}
    assert step.label_leaders


def test_ownership_is_read_from_the_controller_reference() -> None:
    obj = {
        "metadata": {"name": "lws-chat-engine", "uid": "l1", "resourceVersion": "7",
                     "ownerReferences": [{"kind": "InferenceService", "name": "chat",
                                          "uid": "isvc-uid", "controller": True}]},
        "spec": {"replicas": 2},
        "status": {"replicas": 2, "readyReplicas": 1},
    }
    view = lws_view_from_json(obj, "isvc-uid")
    assert (view.owned, view.replicas, view.groups, view.ready) == (True, 2, 2, 1)
    assert not lws_view_from_json(obj, "other-uid").owned


# ---------------------------------------------------------------------------- the plan


def _moving_isvc() -> Any:
    return make_isvc({
        "model": {"name": "llama"},
        "runtime": {"name": "srt"},
        "engine": {"minReplicas": 2, "leader": {}, "worker": {"size": 1}},
    })


RUNTIME = make_runtime({
    "engineConfig": {
        "runner": {"image": "sglang:0.4"},
        "leader": {"runner": {"args": ["--role=leader"]}},
        "worker": {"size": 1},
    },
})


def test_with_handovers_shares_the_service_and_reports_the_condition() -> None:
    plan = render_service(_moving_isvc(), [RUNTIME], (CRD_LEADER_WORKER_SET,))
    changed, steps = with_handovers(plan, {"engine": lws(2, 2)}, {})
    (step,) = steps
    cp = changed.component("engine")
    assert cp is not None
    service = cp.object("Service")
    assert service is not None
    assert "ome.io/managed-by" not in service["spec"]["selector"]
    assert service["spec"]["selector"]["ome.io/runner"] == "leader"
    (cond,) = [c for c in cp.conditions if c.type == CONDITION_LWS_HANDOVER]
    assert (cond.status, cond.reason) == ("True", PHASE_SURGING)
    assert step.desired == 2
    # the InferenceReplica is the same object: the Instances come up beside the LWS
    before = plan.component("engine")
    assert before is not None and cp.replica == before.replica


def test_with_handovers_reads_the_live_instances() -> None:
    plan = render_service(_moving_isvc(), [RUNTIME], (CRD_LEADER_WORKER_SET,))
    cp = plan.component("engine")
    assert cp is not None and cp.replica is not None
    live = evolve(replica_from_json(cp.replica), status=ir_status(2))
    _, (step,) = with_handovers(plan, {"engine": lws(2, 2)}, {"engine": live})
    assert step.scale_to == 1


def test_without_an_lws_the_plan_is_unchanged() -> None:
    plan = render_service(_moving_isvc(), [RUNTIME], (CRD_LEADER_WORKER_SET,))
    assert with_handovers(plan, {}, {}) == (plan, ())


# ---------------------------------------------------------------------------- a sweep


def _run(desired: int, capacity: int, lag: bool) -> list[int]:
    """A small world: ``capacity`` groups of GPUs, an LWS of ``desired`` ready groups,
    ``desired`` new Instances. Each tick: plan, apply, then the world moves (groups above
    the LWS's replicas go; a new or parked Instance starts when there is room, else it is
    parked Unschedulable; a started one is Ready next tick). ``lag``: the LWS status
    trails its spec by a tick, and the scheduler sees freed GPUs a tick late."""
    replicas, groups, deleted = desired, desired, False
    reported_ready = desired
    state = ["new"] * desired
    serving_log: list[int] = []
    for _ in range(8 * desired + 8):
        if deleted:  # the LWS is gone; the world keeps moving
            replicas = groups = reported_ready = 0
        view = LwsView(name="l", replicas=replicas, groups=groups, ready=reported_ready,
                       owned=True)
        st = ir_status(state.count("ready"),
                       starting=state.count("new") + state.count("started"),
                       parked=state.count("parked"))
        step = plan_handover("engine", desired, view, st, SELECTOR)
        if step.scale_to is not None:
            replicas = step.scale_to
        deleted = deleted or step.delete
        if deleted and state.count("ready") == desired:
            break
        # the world (with lag, freed GPUs reach the scheduler a tick later)
        held = groups
        groups = min(groups, replicas)
        state = ["ready" if s == "started" else s for s in state]
        for i, s in enumerate(state):
            if s in ("new", "parked"):
                running = sum(x in ("started", "ready") for x in state)
                room = (held if lag else groups) + running < capacity
                state[i] = "started" if room else "parked"
        reported_ready = max(groups, min(reported_ready, replicas + 1)) if lag else groups
        serving_log.append(groups + state.count("ready"))
    assert deleted, "the hand-over did not finish"
    assert state.count("ready") == desired
    return serving_log


@pytest.mark.parametrize("lag", [False, True])
@pytest.mark.parametrize("desired", [1, 2, 3, 4])
def test_with_room_to_surge_serving_never_drops_below_desired(desired: int, lag: bool) -> None:
    for capacity in range(2 * desired, 2 * desired + 2):
        log = _run(desired, capacity, lag)
        assert min(log) >= desired, (capacity, log)


@pytest.mark.parametrize("lag", [False, True])
@pytest.mark.parametrize("desired", [1, 2, 3, 4])
def test_without_room_groups_are_traded_one_at_a_time(desired: int, lag: bool) -> None:
    for capacity in range(desired, 2 * desired):
        log = _run(desired, capacity, lag)
        assert min(log) >= desired - 1, (capacity, log)


# ---------------------------------------------------------------------------- admission


LWS_RUNTIME = make_runtime({
    "engineConfig": {
        "runner": {"image": "sglang:0.4",
                   "args": ["--dist-init-addr=$(LWS_LEADER_ADDRESS):5000",
                            "--nnodes=$(LWS_GROUP_SIZE)"]},
        "leader": {}, "worker": {"size": 1},
    },
})


def test_a_runtime_reading_lws_variables_warns_under_omenative() -> None:
    (found,) = lws_variable_warnings(_moving_isvc(), LWS_RUNTIME)
    assert found.warning and found.reason == REASON_LWS_VARIABLE
    assert "LWS_LEADER_ADDRESS -> $(OME_LEADER_ADDRESS)" in found.message
    assert "LWS_GROUP_SIZE -> $(OME_INSTANCE_POD_COUNT)" in found.message
    assert "ClusterServingRuntime srt engineConfig" in found.message


def test_a_multinode_pin_or_a_clean_runtime_does_not_warn() -> None:
    pinned = isvc_from_json({
        "metadata": {"name": "chat", "namespace": "prod"},
        "spec": {"runtime": {"name": "srt"},
                 "engine": {"annotations": {"ome.io/deploymentMode": "MultiNode"}}},
    })
    assert lws_variable_warnings(pinned, LWS_RUNTIME) == []
    assert lws_variable_warnings(_moving_isvc(), RUNTIME) == []


def test_the_webhook_admits_with_the_warning() -> None:
    from omenative_controller.webhook import review_response

    body = {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": "prod"},
        "spec": {"model": {"name": "llama"}, "runtime": {"name": "srt"},
                 "engine": {"minReplicas": 2, "leader": {}, "worker": {"size": 1}}},
    }
    request = {"uid": "u", "operation": "CREATE", "namespace": "prod", "object": body,
               "kind": {"group": "ome.io", "version": "v1beta1", "kind": "InferenceService"}}
    out = review_response({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "request": request}, runtime=LWS_RUNTIME)
    response = out["response"]
    assert response["allowed"] is True
    assert any(REASON_LWS_VARIABLE in w and "LWS_LEADER_ADDRESS" in w
               for w in response["warnings"])


def test_no_room_with_an_instance_starting_waits_for_it_and_says_why() -> None:
    step = plan_handover("engine", 2, lws(1, 1), ir_status(0, starting=1, parked=1), SELECTOR)
    assert (step.phase, step.scale_to) == (PHASE_TRADING, None)
    assert "waiting for 1 starting Instance(s)" in step.message


def _parked_since(since: datetime) -> InferenceReplicaStatus:
    st = ir_status(0, parked=2)
    instances = tuple(
        evolve(i, operation=evolve(i.operation, unschedulable_since=since))
        for i in st.instances
    )
    return evolve(st, instances=instances)


def test_a_trade_waits_until_an_instance_was_unschedulable_for_a_while() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    early = plan_handover("engine", 2, lws(2, 2), _parked_since(t0), SELECTOR,
                          now=t0 + timedelta(seconds=5))
    assert early.scale_to is None
    assert early.recheck_after == (TRADE_AFTER - timedelta(seconds=5)).total_seconds()
    assert "if no room appears" in early.message
    due = plan_handover("engine", 2, lws(2, 2), _parked_since(t0), SELECTOR,
                        now=t0 + TRADE_AFTER)
    assert (due.phase, due.scale_to, due.recheck_after) == (PHASE_TRADING, 1, None)


def test_a_short_unschedulable_wait_is_not_reported_as_no_room() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    st = _parked_since(t0)
    st = evolve(st, instances=(evolve(st.instances[0], operation=InstanceOperation(
        id="s", type="Create")), st.instances[1]))  # one starting, one parked
    step = plan_handover("engine", 2, lws(2, 2), st, SELECTOR, now=t0 + timedelta(seconds=1))
    assert (step.reason, step.scale_to) == (PHASE_SURGING, None)

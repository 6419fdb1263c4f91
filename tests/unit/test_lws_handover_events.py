"""The LWS hand-over's Events (started, scaled down or traded, deleted, not owned) and its
``lifecycle.lwsHandoverTradeAfter`` setting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from attrs import evolve
from tests.unit.test_lws_handover_plan import (
    RUNTIME,
    SELECTOR,
    _moving_isvc,
    _parked_since,
    ir_status,
    lws,
)

from omenative_controller.service_controller import ServiceController
from omenative_core.model.config import ConfigError, LifecycleConfig, parse_lifecycle_config
from omenative_core.service import CRD_LEADER_WORKER_SET, render_service
from omenative_core.service.handover import (
    EVENT_DELETED,
    EVENT_NOT_OWNED,
    EVENT_SCALED_DOWN,
    EVENT_STARTED,
    EVENT_TRADED,
    TRADE_AFTER,
    handover_events,
    plan_handover,
    with_handovers,
)
from omenative_core.status.wire import replica_from_json

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def kinds(step: Any) -> list[tuple[str, str]]:
    return [(e.type, e.reason) for e in handover_events(step)]


def test_each_step_names_its_events() -> None:
    waiting = plan_handover("engine", 2, lws(2, 2), ir_status(0, starting=2), SELECTOR)
    assert kinds(waiting) == [("Normal", EVENT_STARTED)]
    surged = plan_handover("engine", 2, lws(2, 2), ir_status(1), SELECTOR)
    assert kinds(surged) == [("Normal", EVENT_STARTED), ("Normal", EVENT_SCALED_DOWN)]
    assert "scaled down to 1 group(s)" in handover_events(surged)[1].message
    traded = plan_handover("engine", 2, lws(2, 2), _parked_since(T0), SELECTOR,
                           now=T0 + TRADE_AFTER)
    assert kinds(traded) == [("Normal", EVENT_STARTED), ("Normal", EVENT_TRADED)]
    gone = plan_handover("engine", 2, lws(0, 0), ir_status(2), SELECTOR)
    assert kinds(gone) == [("Normal", EVENT_STARTED), ("Normal", EVENT_DELETED)]
    assert "lws-chat-engine deleted" in handover_events(gone)[1].message
    foreign = plan_handover("engine", 2, lws(2, 2, owned=False), ir_status(2), SELECTOR)
    (warning,) = handover_events(foreign)
    assert (warning.type, warning.reason) == ("Warning", EVENT_NOT_OWNED)
    assert "not owned by this InferenceService" in warning.message


def test_a_repeated_step_names_the_same_events() -> None:
    """Same messages on the next pass, so the shell's de-duplication sends them once."""
    first = plan_handover("engine", 2, lws(2, 2), ir_status(1), SELECTOR)
    again = plan_handover("engine", 2, lws(2, 2), ir_status(1, starting=1), SELECTOR)
    assert handover_events(first)[0] == handover_events(again)[0]


def test_the_trade_wait_is_a_lifecycle_setting() -> None:
    assert LifecycleConfig().lws_handover_trade_after == TRADE_AFTER == timedelta(seconds=15)
    cfg = parse_lifecycle_config({"lwsHandoverTradeAfter": "45s"})
    assert cfg.lws_handover_trade_after == timedelta(seconds=45)
    with pytest.raises(ConfigError, match=r"lifecycle\.lwsHandoverTradeAfter"):
        parse_lifecycle_config({"lwsHandoverTradeAfter": "soon"})


def test_with_handovers_waits_the_configured_time_before_a_trade() -> None:
    plan = render_service(_moving_isvc(), [RUNTIME], (CRD_LEADER_WORKER_SET,))
    cp = plan.component("engine")
    assert cp is not None and cp.replica is not None
    live = evolve(replica_from_json(cp.replica), status=_parked_since(T0))
    now = T0 + timedelta(seconds=20)
    _, (default,) = with_handovers(plan, {"engine": lws(2, 2)}, {"engine": live}, now)
    assert default.scale_to == 1  # 20s > 15s: traded
    _, (longer,) = with_handovers(plan, {"engine": lws(2, 2)}, {"engine": live}, now,
                                  timedelta(seconds=60))
    assert (longer.scale_to, longer.recheck_after) == (None, 40.0)


class Recorder:
    """Stands in for the EventRecorder: what was sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, str, str]] = []

    async def record(self, involved: Any, type_: str, reason: str, message: str,
                     *, lg: Any = None) -> bool:
        self.sent.append((str(involved["name"]), type_, reason, message))
        return True


async def test_the_controller_sends_each_handover_event_once() -> None:
    sc = ServiceController(object(), ["prod"])  # type: ignore[arg-type]
    rec = Recorder()
    sc.events = rec  # type: ignore[assignment]
    raw = {"metadata": {"name": "chat", "namespace": "prod", "uid": "u", "generation": 1}}
    for status in (ir_status(1), ir_status(1, starting=1)):  # the same step on two passes
        step = plan_handover("engine", 2, lws(2, 2), status, SELECTOR)
        for event in handover_events(step):
            await sc._event(raw, event.type, event.reason, event.message)
    step = plan_handover("engine", 2, lws(1, 1), ir_status(2), SELECTOR)  # the next group
    for event in handover_events(step):
        await sc._event(raw, event.type, event.reason, event.message)
    assert [(r, m.split(": ", 1)[1]) for _, _, r, m in rec.sent] == [
        (EVENT_STARTED, "hand-over from LeaderWorkerSet lws-chat-engine to OMENative"),
        (EVENT_SCALED_DOWN, "LeaderWorkerSet lws-chat-engine scaled down to 1 group(s): "
                            "OMENative Instances serve in their place"),
        (EVENT_SCALED_DOWN, "LeaderWorkerSet lws-chat-engine scaled down to 0 group(s): "
                            "OMENative Instances serve in their place"),
    ]

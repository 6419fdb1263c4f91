"""The InferenceService controller does not decide "no LeaderWorkerSet" before it can see
them: a multi-pod OMENative component waits until the LWS CRD was looked up and, when it is
installed, its cache has synced."""

from __future__ import annotations

from typing import Any

from tests.unit.test_lws_handover_plan import RUNTIME, _moving_isvc

from omenative_controller.service_controller import ServiceController
from omenative_core.service import CRD_LEADER_WORKER_SET, render_service


def controller(**kw: Any) -> ServiceController:
    return ServiceController(object(), ["prod"], **kw)  # type: ignore[arg-type]


def test_a_moving_component_waits_for_the_lws_crd_lookup() -> None:
    sc = controller()
    plan = render_service(_moving_isvc(), [RUNTIME], (CRD_LEADER_WORKER_SET,))
    assert sc._lws_unknown(plan)
    sc.lws.presence.checked.set()  # looked up: not installed
    assert not sc._lws_unknown(plan)
    sc.lws.presence.version = "v1"  # installed, its cache not synced yet
    assert sc._lws_unknown(plan)
    sc.lws.presence.present = True  # synced
    assert not sc._lws_unknown(plan)


def test_the_lws_crd_presence_is_the_handovers_own() -> None:
    sc = controller()
    sc.lws.presence.present = True
    assert CRD_LEADER_WORKER_SET in sc.crds()


def test_injected_crds_do_not_wait() -> None:
    sc = controller(crds_present=lambda: ())
    plan = render_service(_moving_isvc(), [RUNTIME], ())
    assert not sc._lws_unknown(plan)

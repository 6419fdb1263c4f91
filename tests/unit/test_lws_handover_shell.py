"""The InferenceService controller does not decide "no LeaderWorkerSet" before it can see
them: a multi-pod OMENative component waits until the LWS CRD was looked up and, when it is
installed, its cache has synced (the shell observes ``lws_known``, ``plan_service`` waits)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tests.unit.test_lws_handover_plan import RUNTIME, _moving_isvc

from omenative_controller.service_controller import ServiceController
from omenative_core.service import CRD_LEADER_WORKER_SET, ServiceSnapshot, plan_service

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def controller(**kw: Any) -> ServiceController:
    return ServiceController(object(), ["prod"], **kw)  # type: ignore[arg-type]


def _waits(sc: ServiceController) -> bool:
    snap = ServiceSnapshot(isvc=_moving_isvc().raw, now=NOW, runtimes=(RUNTIME,),
                           crds=frozenset(sc.crds()), lws_known=sc.lws_known())
    return plan_service(snap).wait_for_lws


def test_a_moving_component_waits_for_the_lws_crd_lookup() -> None:
    sc = controller()
    assert _waits(sc)
    sc.lws.presence.checked.set()  # looked up: not installed
    assert not _waits(sc)
    sc.lws.presence.version = "v1"  # installed, its cache not synced yet
    assert _waits(sc)
    sc.lws.presence.present = True  # synced
    assert not _waits(sc)


def test_a_waiting_pass_applies_nothing_and_looks_again_soon() -> None:
    snap = ServiceSnapshot(isvc=_moving_isvc().raw, now=NOW, runtimes=(RUNTIME,),
                           crds=frozenset({CRD_LEADER_WORKER_SET}), lws_known=False)
    sp = plan_service(snap)
    assert sp.wait_for_lws and sp.applies == () and sp.status is None
    assert sp.requeue_after == 1.0


def test_the_lws_crd_presence_is_the_handovers_own() -> None:
    sc = controller()
    sc.lws.presence.present = True
    assert CRD_LEADER_WORKER_SET in sc.crds()


def test_injected_crds_do_not_wait() -> None:
    sc = controller(crds_present=lambda: ())
    assert sc.lws_known()
    assert not _waits(sc)

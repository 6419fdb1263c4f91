"""Repeated Warnings are one Event on a real API server (issue 30 item 8).

The API server accepts the series fields on a core/v1 Event patch: three concurrent
repeats of one Warning, then a fourth from a new recorder (a restarted manager, whose
memory of the Event is gone), are one Event with ``count`` 4 and ``series.count`` 4.
"""

from __future__ import annotations

import asyncio

import pytest

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.events import EventRecorder
from omenative_controller.kube.resources import EVENTS

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]


async def test_repeats_of_one_warning_are_one_event_series(
    kube: KubeClient, namespace: str
) -> None:
    involved = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
                "name": "chat-engine", "namespace": namespace, "uid": "uid-1"}
    first = EventRecorder(kube)
    sent = await asyncio.gather(*(first.record(involved, "Warning", "TeardownBlocked",
                                               "pods stuck") for _ in range(3)))
    assert all(sent)
    assert await EventRecorder(kube).record(involved, "Warning", "TeardownBlocked",
                                            "pods stuck")
    page = await kube.list(EVENTS, namespace,
                           field_selector="involvedObject.name=chat-engine,type=Warning")
    items = list(page.get("items") or ())
    assert len(items) == 1, [e["metadata"]["name"] for e in items]
    event = items[0]
    assert event["count"] == 4
    assert event["series"]["count"] == 4 and event["series"]["lastObservedTime"]
    assert event["reason"] == "TeardownBlocked" and event["message"] == "pods stuck"

"""The one shape of a core/v1 Event this controller writes, for every object it reports on.

The IR executor, the InferenceService controller and the rollout shell all emit Events;
building the body here keeps their fields (source, reportingComponent, timestamps, the
1,024-character message cap) identical, so ``kubectl describe`` reads the same everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omenative_controller.kube.client import JSON

MESSAGE_LIMIT = 1024
"""The API server rejects longer Event messages; ours are cut to this."""


def event_body(
    involved: Mapping[str, Any],
    *,
    type_: str,
    reason: str,
    message: str,
    component: str,
    stamp: str,
    name: str | None = None,
    instance: str | None = None,
) -> JSON:
    """An Event about ``involved`` (an ``involvedObject`` reference with apiVersion, kind,
    name, namespace and uid), named ``name`` or generated from the object's name."""
    namespace = involved.get("namespace")
    metadata: JSON = ({"name": name, "namespace": namespace} if name is not None
                      else {"generateName": f"{involved.get('name')}.", "namespace": namespace})
    body: JSON = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": metadata,
        "involvedObject": dict(involved),
        "type": type_,
        "reason": reason,
        "message": message[:MESSAGE_LIMIT],
        "source": {"component": component},
        "reportingComponent": component,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
    if instance is not None:
        body["reportingInstance"] = instance
    return body

"""The one condition merge of the shell, for status written as raw JSON.

The IR manager's rejection (``Ready=False``) and the InferenceService controller's
``SpecValid=False`` both set one condition in a raw ``status.conditions`` list; this keeps
Kubernetes' rule in one place: ``lastTransitionTime`` moves only when ``status`` changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from omenative_core.model.timefmt import format_time

__all__ = ["set_condition"]


def set_condition(
    previous: object, *, type_: str, status: str, reason: str, message: str, now: datetime,
    observed_generation: int | None = None,
) -> list[dict[str, Any]]:
    """``previous`` (a raw conditions list, anything else counts as empty) with the
    condition ``type_`` set; the other conditions keep their place, a new one goes last."""
    old = [dict(c) for c in previous if isinstance(c, Mapping)] if isinstance(previous, list) \
        else []
    prev = next((c for c in old if c.get("type") == type_), None)
    since = format_time(now)
    if prev is not None and prev.get("status") == status and prev.get("lastTransitionTime"):
        since = str(prev["lastTransitionTime"])
    entry: dict[str, Any] = {"type": type_, "status": status, "reason": reason,
                             "message": message, "lastTransitionTime": since}
    if observed_generation is not None:
        entry["observedGeneration"] = observed_generation
    if prev is None:
        return [*old, entry]
    return [entry if c is prev else c for c in old]

"""What the InferenceService pass writes for rollout groups, decided once for the shell and
the simulator: each member InferenceReplica's body and the ISVC status.

- ``member_replica_body``: the rendered InferenceReplica with the member's pacing
  (``spec.pacing.partition``, ``rollbackToRevision``) and, for a rollingUpdate group, the
  group's budgets (``spec.lifecycle.updateStrategy.rollingUpdate``). The pacing travels in
  the same write as a new template, so no member starts rolling on its own. A component
  with no decision (no ``spec.rollout``, or in no group) gets the body as rendered: no
  pacing, so a partition left by an earlier run is dropped (the shell's server-side apply
  drops it; the simulator patches it away).
- ``member_traffic``: a member's traffic targets as status JSON.
- ``shape_rollout_status``: ``status.rollout`` (the state to remember), each member's
  ``traffic`` and the group hold in ``components.<c>.lifecycle.rolloutHold``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omenative_core.codec import to_json
from omenative_core.rollout.decision import ComponentDecision, RolloutDecision
from omenative_core.rollout.state import state_to_json

__all__ = ["member_replica_body", "member_traffic", "shape_rollout_status"]


def member_replica_body(
    body: Mapping[str, Any], decision: ComponentDecision | None
) -> dict[str, Any]:
    """The InferenceReplica ``body`` with the member's pacing (and group budgets)."""
    out = dict(body)
    if decision is None:
        return out
    spec = dict(out.get("spec") or {})
    pacing: dict[str, Any] = {"partition": decision.pacing.partition or 0}
    if decision.pacing.rollback_to_revision:
        pacing["rollbackToRevision"] = decision.pacing.rollback_to_revision
    spec["pacing"] = pacing
    if decision.rolling_update is not None:
        lifecycle = dict(spec.get("lifecycle") or {})
        strategy = dict(lifecycle.get("updateStrategy") or {})
        rolling = dict(strategy.get("rollingUpdate") or {})
        rolling["maxSurge"] = decision.rolling_update.max_surge
        rolling["maxUnavailable"] = decision.rolling_update.max_unavailable
        strategy["rollingUpdate"] = rolling
        lifecycle["updateStrategy"] = strategy
        spec["lifecycle"] = lifecycle
    out["spec"] = spec
    return out


def member_traffic(decision: ComponentDecision | None) -> list[Any]:
    """The member's traffic targets as status JSON ([] without a decision)."""
    return [to_json(t) for t in decision.traffic] if decision is not None else []


def shape_rollout_status(status: dict[str, Any], decision: RolloutDecision) -> dict[str, Any]:
    """Add ``rollout``, each member's ``traffic`` and the group holds to an ISVC status."""
    status["rollout"] = state_to_json(decision.state)
    components = status.setdefault("components", {})
    for c, cd in sorted(decision.components.items()):
        entry = components.setdefault(c, {})
        entry["traffic"] = member_traffic(cd)
        if cd.hold is not None:
            lifecycle = entry.setdefault("lifecycle", {})
            lifecycle["rolloutHold"] = to_json(cd.hold)
    return status

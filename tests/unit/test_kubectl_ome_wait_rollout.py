"""``kubectl ome wait --for=rollout=...`` and ``--for=runtime-sync=acknowledged``: parsing
(OME's flag rules) and one check of an InferenceService each (no cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from omenative_controller.cli import wait_output as wo
from omenative_controller.cli.wait_predicates import reported_rollout

REQ4 = "123e4567-e89b-42d3-a456-426614174000"
TOKEN = f"cli-runtime-sync-{REQ4}"


def _spec(predicate: str, **given: Any) -> wo.WaitSpec:
    flags = dict.fromkeys(("component", "replicas", "request_id", "revision", "ir_name",
                           "ir_uid"))
    flags.update(given)
    return wo.parse_wait(predicate, flags)


def test_rollout_and_runtime_sync_predicates_parse_as_ome_spells_them() -> None:
    assert (_spec("rollout=stable").requested, _spec("rollout=stable").want) == \
        ("Rollout=Stable", "Succeeded")
    assert _spec("rollout=rolled-back").want == "RolledBack"
    assert _spec("runtime-sync=acknowledged", request_id=REQ4).requested == \
        "RuntimeSync=Acknowledged"
    with pytest.raises(ValueError, match="needs --request-id"):
        _spec("runtime-sync=acknowledged")
    with pytest.raises(ValueError, match="v4 UUID"):  # a v1 UUID is canonical but not v4
        _spec("runtime-sync=acknowledged", request_id="12345678-1234-1234-8234-123456789abc")
    with pytest.raises(ValueError, match="does not take --component"):
        _spec("rollout=failed", component="engine")
    with pytest.raises(ValueError, match="not supported"):
        _spec("rollout=done")


def _isvc(status: dict[str, Any], annotations: dict[str, str] | None = None,
          runtime: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "chat", "annotations": annotations or {}},
            "spec": {"runtime": runtime or {"name": "rt", "autoSync": False}},
            "status": status}


def _lifecycle(current: str, update: str) -> dict[str, Any]:
    return {"lifecycle": {"currentRevision": current, "updateRevision": update}}


def test_reported_rollout_takes_the_first_state_in_omes_precedence() -> None:
    assert reported_rollout(_isvc({})) == ("NotConfigured", "Unavailable")
    steady = _isvc({"components": {"engine": _lifecycle("e-1", "e-1")}})
    assert reported_rollout(steady) == ("Succeeded", "Valid")
    rolling = _isvc({"components": {"engine": _lifecycle("e-1", "e-1"),
                                    "router": _lifecycle("r-1", "r-2")}})
    assert reported_rollout(rolling)[0] == "InProgress"
    groups = {"groups": [{"index": 0, "components": ["engine"], "phase": "Paused"},
                         {"index": 1, "components": ["router"], "phase": "RolledBack"}]}
    mixed = _isvc({"rollout": groups, "components": {"engine": _lifecycle("e-1", "e-2")}})
    assert reported_rollout(mixed)[0] == "RolledBack"  # grouped members count only once
    assert reported_rollout(_isvc({"rollout": {"groups": "nope"}})) == ("Unknown", "Invalid")


def test_rollout_wait_matches_only_the_requested_state() -> None:
    steady = _isvc({"components": {"engine": _lifecycle("e-1", "e-1")}})
    done = wo.check(_spec("rollout=stable"), steady, [])
    assert (done.matched, done.reason) == (True, "RolloutMatched")
    assert ("Rollout issue", "EpochUnverifiable") in done.rows
    failed = wo.check(_spec("rollout=failed"), steady, [])
    assert (failed.matched, failed.reason) == (False, "RolloutNotMatched")
    none = wo.check(_spec("rollout=stable"), _isvc({}), [])
    assert (none.matched, none.reason) == (False, "RolloutNotRecorded")


def test_runtime_sync_wait_needs_the_token_a_managed_pin_and_no_drift() -> None:
    spec = _spec("runtime-sync=acknowledged", request_id=REQ4)
    pinned = {"pinnedRevisionName": "cr-rt-1"}
    acked = _isvc({**pinned, "lastRuntimeSyncToken": TOKEN}, {"ome.io/runtime-sync": TOKEN})
    ok = wo.check(spec, acked, [])
    assert (ok.matched, ok.reason) == (True, "RuntimeSyncObserved")
    assert ("Token state", "Acknowledged") in ok.rows and ("Managed pin", "Managed") in ok.rows
    pending = wo.check(spec, _isvc(pinned, {"ome.io/runtime-sync": TOKEN}), [])
    assert not pending.matched and ("Token state", "Pending") in pending.rows
    newer = wo.check(spec, _isvc(pinned, {"ome.io/runtime-sync": "cli-runtime-sync-other"}), [])
    assert ("Token state", "Superseded") in newer.rows and not newer.matched
    drifted = _isvc({**pinned, "lastRuntimeSyncToken": TOKEN, "conditions": [
        {"type": "RuntimeDrifted", "status": "True", "reason": "RevisionMismatch"}]},
        {"ome.io/runtime-sync": TOKEN})
    still = wo.check(spec, drifted, [])
    assert (still.matched, still.reason) == (False, "RuntimeSyncNotAcknowledged")
    explicit = _isvc({**pinned, "lastRuntimeSyncToken": TOKEN}, {"ome.io/runtime-sync": TOKEN},
                     {"name": "rt", "autoSync": False, "revision": "cr-rt-1"})
    assert ("Managed pin", "NotApplicable") in wo.check(spec, explicit, []).rows
    report = wo.report_json("ns", "chat", spec, "Matched", ok, 3, {"gets": 1}, "t")
    assert report["content"]["runtimeSync"]["tokenState"] == "Acknowledged"

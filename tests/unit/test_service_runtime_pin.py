"""Runtime pinning (``spec.runtime.autoSync: false``), as OME v1.3's docs describe it.

The InferenceService, runtime and conditions follow OME's docs, concepts/runtimes/
runtime-revisions.md ("Pin an InferenceService", "When the runtime changes", "Roll forward
to the latest runtime", "Roll back to an earlier revision", "The RuntimeDrifted condition").
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from omenative_core.service import (
    isvc_from_json,
    render_service,
    runtime_from_json,
    runtime_revision_from_json,
    service_status,
)
from omenative_core.service.validate import validate_isvc

NOW = datetime(2026, 9, 28, 14, 15, tzinfo=UTC)


def runtime(mem_frac: str = "0.9") -> Any:
    return runtime_from_json({
        "kind": "ServingRuntime",
        "metadata": {"name": "sglang-llama-3-2-3b", "namespace": "llama-demo"},
        "spec": {"engineConfig": {"runner": {"name": "ome-container", "image": "srt:1",
                                             "args": ["--tp-size=1", f"--mem-frac={mem_frac}"]}}},
    })


def isvc(status: dict[str, Any] | None = None, annotations: dict[str, str] | None = None,
         **ref: Any) -> Any:
    return isvc_from_json({
        "kind": "InferenceService",
        "metadata": {"name": "llama-3-2-3b-instruct", "namespace": "llama-demo",
                     "annotations": annotations or {}},
        "spec": {"deploymentMode": "OMENative",
                 "runtime": {"name": "sglang-llama-3-2-3b", "kind": "ServingRuntime",
                             "autoSync": False, **ref},
                 "engine": {"minReplicas": 1, "maxReplicas": 1}},
        "status": status or {},
    })


def stored(plan: Any) -> list[Any]:
    """The revisions the plan asks the shell to create, as the cache would hold them."""
    return [runtime_revision_from_json(b) for b in plan.runtime_revisions]


def args(plan: Any) -> list[str]:
    engine = plan.component("engine")
    assert engine is not None and not engine.blocked, engine.ready
    return engine.replica["spec"]["runners"][0]["template"]["spec"]["containers"][0]["args"]


def drifted(plan: Any) -> tuple[str, str] | None:
    found = [c for c in plan.conditions if c.type == "RuntimeDrifted"]
    return (found[0].reason, found[0].message) if found else None


def test_pinning_stores_the_live_spec_and_records_its_name() -> None:
    plan = render_service(isvc(), [runtime()], (), runtime_revisions=[])
    (rev,) = stored(plan)
    assert re.fullmatch(r"r-llama-demo-sglang-llama-3-2-3b-[0-9a-f]{8}", rev.name)
    assert plan.runtime_revisions[0]["metadata"]["labels"] == {
        "ome.io/runtime-of": "sglang-llama-3-2-3b"}
    assert plan.status_fields == {"pinnedRevisionName": rev.name}
    assert drifted(plan) is None and "RuntimeDrifted" in plan.removed_conditions
    status = service_status(isvc(), plan, {}, NOW)
    assert status["pinnedRevisionName"] == rev.name


def test_a_runtime_change_drifts_and_the_pods_stay_on_the_revision() -> None:
    first = render_service(isvc(), [runtime()], (), runtime_revisions=[])
    revs = stored(first)
    pinned = isvc({"pinnedRevisionName": revs[0].name})
    plan = render_service(pinned, [runtime("0.85")], (), runtime_revisions=revs)
    assert args(plan) == ["--tp-size=1", "--mem-frac=0.9"]
    assert drifted(plan) == ("RevisionMismatch", f"pinned {revs[0].name}, live spec differs; "
                             "bump ome.io/runtime-sync annotation to advance")
    assert plan.runtime_revisions == ()


def test_a_new_sync_token_rolls_forward_once() -> None:
    revs = stored(render_service(isvc(), [runtime()], (), runtime_revisions=[]))
    token = {"ome.io/runtime-sync": "mem-frac-0-85"}
    plan = render_service(isvc({"pinnedRevisionName": revs[0].name}, token), [runtime("0.85")],
                          (), runtime_revisions=revs)
    (new,) = stored(plan)
    assert new.name != revs[0].name
    assert plan.status_fields == {"pinnedRevisionName": new.name,
                                  "lastRuntimeSyncToken": "mem-frac-0-85"}
    assert args(plan) == ["--tp-size=1", "--mem-frac=0.85"] and drifted(plan) is None
    # the token is used up: the next change drifts again
    after = isvc({"pinnedRevisionName": new.name, "lastRuntimeSyncToken": "mem-frac-0-85"},
                 token)
    assert drifted(render_service(after, [runtime("0.8")], (),
                                  runtime_revisions=[*revs, new]))[0] == "RevisionMismatch"  # type: ignore[index]


def test_spec_runtime_revision_rolls_back_and_ignores_drift() -> None:
    revs = stored(render_service(isvc(), [runtime()], (), runtime_revisions=[]))
    back = isvc({"pinnedRevisionName": "other"}, revision=revs[0].name)
    plan = render_service(back, [runtime("0.85")], (), runtime_revisions=revs)
    assert args(plan) == ["--tp-size=1", "--mem-frac=0.9"]
    assert drifted(plan) is None and plan.status_fields["pinnedRevisionName"] == revs[0].name


def test_a_missing_or_foreign_revision_keeps_the_workload_and_says_why() -> None:
    missing = render_service(isvc(revision="r-llama-demo-sglang-llama-3-2-3b-deadbeef"),
                             [runtime()], (), runtime_revisions=[])
    assert drifted(missing)[0] == "RevisionMissing"  # type: ignore[index]
    engine = missing.component("engine")
    assert engine is not None and engine.blocked and engine.objects == ()
    foreign = runtime_revision_from_json({"metadata": {
        "name": "r-llama-demo-other-0badf00d", "labels": {"ome.io/runtime-of": "other"}},
        "data": {"spec": {}}})
    plan = render_service(isvc(revision="r-llama-demo-other-0badf00d"), [runtime()], (),
                          runtime_revisions=[foreign])
    assert drifted(plan)[0] == "RuntimeMismatch"  # type: ignore[index]


def test_a_deleted_runtime_keeps_serving_from_the_revision() -> None:
    revs = stored(render_service(isvc(), [runtime()], (), runtime_revisions=[]))
    plan = render_service(isvc({"pinnedRevisionName": revs[0].name}), [], (),
                          runtime_revisions=revs)
    assert args(plan) == ["--tp-size=1", "--mem-frac=0.9"]
    assert drifted(plan)[0] == "SourceRuntimeMissing"  # type: ignore[index]


def test_without_autosync_false_the_live_runtime_is_followed() -> None:
    live = isvc_from_json({"kind": "InferenceService",
                           "metadata": {"name": "x", "namespace": "llama-demo"},
                           "spec": {"deploymentMode": "OMENative",
                                    "runtime": {"name": "sglang-llama-3-2-3b",
                                                "kind": "ServingRuntime"},
                                    "engine": {}}})
    plan = render_service(live, [runtime("0.85")], (), runtime_revisions=[])
    assert args(plan) == ["--tp-size=1", "--mem-frac=0.85"]
    assert plan.runtime_revisions == () and plan.status_fields == {}


def _pin_refusals(**ref: Any) -> list[tuple[str, str, str]]:
    return [(r.reason, r.field, r.message) for r in validate_isvc(isvc(**ref))
            if not r.warning]


def test_admission_refuses_a_revision_of_the_wrong_form_with_omes_text() -> None:
    """OME's ``validateRuntimePin`` (inference_service_validation.go at 58a57f25; the docs'
    "Roll back" example): a ClusterServingRuntime's revision named for a ServingRuntime is
    refused, naming the field, the runtime and the form it expects."""
    ((reason, field, message),) = _pin_refusals(revision="cr-sglang-llama-3-2-3b-590753e8")
    assert (reason, field) == ("InvalidRuntimeRevision", "spec.runtime.revision")
    assert message == (
        'InvalidRuntimeRevision: spec.runtime.revision "cr-sglang-llama-3-2-3b-590753e8" does '
        'not match the expected naming convention for runtime "sglang-llama-3-2-3b" '
        "(ServingRuntime); expected the form r-llama-demo-sglang-llama-3-2-3b-<8 lowercase hex "
        "chars>")
    for wrong in ("r-llama-demo-sglang-llama-3-2-3b-590753E8",  # upper-case hex
                  "r-llama-demo-sglang-llama-3-2-3b-590753e",  # 7 hex
                  "r-other-ns-sglang-llama-3-2-3b-590753e8",  # another namespace's runtime
                  "r-llama-demo-other-runtime-590753e8"):  # another runtime
        assert [r[0] for r in _pin_refusals(revision=wrong)] == ["InvalidRuntimeRevision"], wrong


def test_admission_takes_each_scope_s_form_and_needs_auto_sync_false() -> None:
    assert _pin_refusals(revision="r-llama-demo-sglang-llama-3-2-3b-590753e8") == []
    assert _pin_refusals(kind="ClusterServingRuntime",
                         revision="cr-sglang-llama-3-2-3b-af9539ac") == []
    ((reason, field, message),) = _pin_refusals(
        autoSync=True, revision="r-llama-demo-sglang-llama-3-2-3b-590753e8")
    assert (reason, field) == ("InvalidRuntimeRevision", "spec.runtime.autoSync")
    assert "spec.runtime.revision requires spec.runtime.autoSync=false" in message
    # the existence of the revision is left to the controller (RevisionMissing), as in OME
    assert _pin_refusals(revision="r-llama-demo-sglang-llama-3-2-3b-00000000") == []
    assert [r[1] for r in _pin_refusals(revision=12345678)] == ["spec.runtime.revision"]

"""``kubectl ome runtime effective|history|sync|explain`` judged on plain objects (no
cluster): OME's pin modes and states, SYNC, DRIFT, LIVE-RELATION, the revision checks, the
sync refusals, the ActionResult and the selection table, as OME v1.3's reference describes
them (reference/kubectl-ome/runtime.md)."""

from __future__ import annotations

from typing import Any

import yaml
from click.testing import CliRunner

from omenative_controller.cli import runtime_output as ro
from omenative_controller.cli import runtime_verbs_output as rv
from omenative_controller.cli.kubectl_ome import cli
from omenative_core.service import basemodel_from_json
from omenative_core.service.runtime_pin import spec_digest

OLD = {"engineConfig": {"runner": {"name": "ome-container", "image": "srt:1"}}}
NEW = {"engineConfig": {"runner": {"name": "ome-container", "image": "srt:2"}}}
FORMATS = [{"name": "safetensors", "modelFormat": {"name": "safetensors", "weight": 1},
            "modelFramework": {"name": "transformers", "weight": 1}, "autoSelect": True}]


def csr(name: str, spec: dict[str, Any], **annotations: str) -> dict[str, Any]:
    return {"kind": "ClusterServingRuntime",
            "metadata": {"name": name, "annotations": annotations, "resourceVersion": "5"},
            "spec": spec}


def revision(spec: dict[str, Any], runtime: str = "vllm-llama", *,
             name: str | None = None) -> dict[str, Any]:
    return {"kind": "ControllerRevision",
            "metadata": {"name": name or f"cr-{runtime}-{spec_digest(spec)[:8]}",
                         "labels": {"ome.io/runtime-of": runtime},
                         "creationTimestamp": "2026-09-01T08:00:00Z", "resourceVersion": "3"},
            "data": {"spec": spec}, "revision": 1}


PINNED = f"cr-vllm-llama-{spec_digest(OLD)[:8]}"
DRIFTED = [{"type": "RuntimeDrifted", "status": "True", "reason": "RevisionMismatch"}]


def isvc(ref: dict[str, Any] | None = None, status: dict[str, Any] | None = None,
         annotations: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"model": {"name": "llama"}, "engine": {"minReplicas": 1}}
    if ref is not None:
        spec["runtime"] = ref
    return {"kind": "InferenceService",
            "metadata": {"name": "chat", "namespace": "team-a", "uid": "u-1",
                         "resourceVersion": "4711", "generation": 3,
                         "annotations": annotations or {}},
            "spec": spec, "status": status or {}}


MANAGED = {"name": "vllm-llama", "kind": "ClusterServingRuntime", "autoSync": False}
MODEL = basemodel_from_json({
    "kind": "ClusterBaseModel", "metadata": {"name": "llama"},
    "spec": {"modelFormat": {"name": "safetensors"},
             "modelFramework": {"name": "transformers"}}})


def report(obj: dict[str, Any], live: dict[str, Any] | None = None,
           revisions: list[dict[str, Any]] | None = None) -> ro.Effective:
    runtimes = ro.decode_runtimes([csr("vllm-llama", live if live is not None else NEW)])
    return ro.effective(obj, runtimes, [MODEL],
                        [revision(OLD)] if revisions is None else revisions)


def test_a_drifted_managed_pin_reads_as_in_omes_example() -> None:
    rep = report(isvc(MANAGED, {"pinnedRevisionName": PINNED, "conditions": DRIFTED}))
    assert (rep.pin_mode, rep.pin_state) == ("ManagedPin", "Resolved")
    assert rep.active.revision == PINNED and rep.active.digest[:8] == spec_digest(OLD)[:8]
    assert rep.live.digest[:8] == spec_digest(NEW)[:8]
    assert (rep.drift, rep.drift_cause, rep.relation, rep.sync) == (
        "ReportedTrue", "RevisionMismatch", "Different", "Absent")
    text = ro.effective_table(rep)
    assert "Live      RUNTIME         CSR/vllm-llama" in text
    assert "Service   PIN             ManagedPin/Resolved" in text
    assert "Active    ENGINE          RawDeployment (Default)" in text
    assert rep.status == "Unobserved" and "StatusUnobserved" in rep.issues


def test_pin_modes_and_states() -> None:
    auto = report(isvc({"name": "vllm-llama"}))
    assert (auto.pin_mode, auto.pin_state, auto.relation) == ("AutoSync", "NotApplicable",
                                                               "Equal")
    awaiting = report(isvc(MANAGED))
    assert awaiting.pin_state == "AwaitingPin" and "ActiveRevisionUnreported" in awaiting.issues
    missing = report(isvc({**MANAGED, "revision": "cr-vllm-llama-00000000"}))
    assert (missing.pin_mode, missing.pin_state) == ("ExplicitPin", "RevisionMissing")
    assert "RevisionNotFound(cr-vllm-llama-00000000)" in missing.issues
    mismatch = report(isvc({**MANAGED, "revision": PINNED},
                           {"pinnedRevisionName": "cr-vllm-llama-ffffffff"}))
    assert mismatch.pin_state == "DesiredReportedMismatch"
    invalid = report(isvc({**MANAGED, "kind": "Runtime"}))
    assert (invalid.pin_mode, invalid.pin_state) == ("InvalidPin", "InvalidIntent")
    assert invalid.active.reason == "MalformedPayload" and "InvalidDeclaredKind" in invalid.issues


def test_a_tampered_or_foreign_revision_is_invalid() -> None:
    forged = revision(NEW, name=PINNED)  # the name says OLD's hash, the payload is NEW
    rep = report(isvc(MANAGED, {"pinnedRevisionName": PINNED}), revisions=[forged])
    assert rep.pin_state == "RevisionInvalid" and f"RevisionHashMismatch({PINNED})" in rep.issues
    foreign = revision(OLD, runtime="other", name=PINNED)
    rep = report(isvc(MANAGED, {"pinnedRevisionName": PINNED}), revisions=[foreign])
    assert f"RevisionSourceMismatch({PINNED})" in rep.issues


def test_sync_generation_and_drift_states() -> None:
    def meta(annotations: dict[str, str], status: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": {"annotations": annotations, "generation": 3}, "status": status}
    tok = {"ome.io/runtime-sync": "t1"}
    assert ro.sync_state(meta({}, {})) == "Absent"
    assert ro.sync_state(meta({}, {"lastRuntimeSyncToken": "t1"})) == "StatusOnly"
    assert ro.sync_state(meta(tok, {"lastRuntimeSyncToken": "t1"})) == "Acknowledged"
    assert ro.sync_state(meta(tok, {"lastRuntimeSyncToken": "t0"})) == "Pending"
    assert ro.generation_state(meta({}, {"observedGeneration": 2})) == "Stale"
    assert ro.generation_state(meta({}, {"observedGeneration": 4})) == "Invalid"
    twice = {"conditions": [DRIFTED[0], {**DRIFTED[0], "status": "False"}]}
    assert ro.drift_state(meta({}, twice)) == ("Malformed", "")
    odd = {"conditions": [{"type": "RuntimeDrifted", "status": "True", "reason": "Odd"}]}
    assert ro.drift_state(meta({}, odd)) == ("ReportedTrue", "Other")


def test_the_live_view_of_a_missing_disabled_or_broken_runtime() -> None:
    gone = ro.effective(isvc({"name": "nope"}), [], [MODEL], [])
    assert (gone.live.state, gone.live.reason) == ("Unavailable", "NotFound")
    assert gone.pin_state == "Unavailable" and "LiveRuntimeUnavailable" in gone.issues
    off = report(isvc({"name": "vllm-llama"}), live={**NEW, "disabled": True})
    assert off.live.reason == "Disabled"
    orphan = ro.effective(isvc({"name": "child"}), ro.decode_runtimes(
        [csr("child", NEW, **{"ome.io/inherit-from": "vllm-base"})]), [MODEL], [])
    assert "InheritanceUnavailable" in orphan.issues and orphan.live.reason == "NotFound"
    nothing = ro.effective({**isvc(), "spec": {"engine": {}}}, [], [], [])
    assert nothing.live.reason == "NotConfigured"


def test_the_live_view_follows_inheritance_and_selection() -> None:
    base = csr("vllm-base", {**NEW, "supportedModelFormats": FORMATS})
    child = csr("vllm-llama", {}, **{"ome.io/inherit-from": "vllm-base"})
    rep = ro.effective(isvc({"name": "vllm-llama"}), ro.decode_runtimes([base, child]),
                       [MODEL], [])
    assert rep.chain == ("vllm-base", "vllm-llama") and rep.live.state == "Available"
    selected = ro.effective(isvc(), ro.decode_runtimes([base]), [MODEL], [])
    assert (selected.selection, selected.live.name) == ("Selected", "vllm-base")


def test_history_lists_revisions_newest_first_with_their_roles() -> None:
    newer = revision(NEW)
    newer["metadata"]["creationTimestamp"] = "2026-09-20T14:30:00Z"
    obj = isvc(MANAGED, {"pinnedRevisionName": PINNED, "conditions": DRIFTED})
    rep = report(obj, revisions=[revision(OLD), newer])
    rows = ro.history_rows(rep, obj, [revision(OLD), newer])
    assert [r.name for r in rows] == [newer["metadata"]["name"], PINNED]
    assert rows[0].relation == "MatchesLive" and rows[0].roles == ("History",)
    assert rows[1].roles == ("Active", "Reported", "History")
    text = ro.history_table(rows, ())
    assert text.splitlines()[0].split() == ["WINDOW", "REVISION", "CREATED", "ROLES", "CHECK",
                                             "LIVE", "ISSUES"]
    assert "26-09-20T14:30Z   H       OK      MATCH" in text
    assert "ARH     OK      DIFF    R0/G0" in text
    wide = ro.history_table(rows, (), wide=True)
    assert PINNED in wide and "Active,Reported,History" in wide


def test_sync_refuses_unless_a_managed_pin_drifted() -> None:
    ready = isvc(MANAGED, {"pinnedRevisionName": PINNED, "conditions": DRIFTED})
    assert rv.sync_refusal(report(ready), ready, []) is None
    undrifted = isvc(MANAGED, {"pinnedRevisionName": PINNED})
    assert rv.sync_refusal(report(undrifted), undrifted, []) == rv.REFUSE_EVIDENCE
    pending = isvc(MANAGED, {"pinnedRevisionName": PINNED, "conditions": DRIFTED},
                   {"ome.io/runtime-sync": "cli-runtime-sync-x"})
    assert rv.sync_refusal(report(pending), pending, []) == rv.REFUSE_EVIDENCE
    promote = isvc(MANAGED, {"pinnedRevisionName": PINNED, "conditions": DRIFTED},
                   {"ome.io/rollout-promote": "abc"})
    assert rv.sync_refusal(report(promote), promote, []) == rv.REFUSE_MAILBOX
    deleting = isvc(MANAGED, {"pinnedRevisionName": PINNED, "conditions": DRIFTED})
    deleting["metadata"]["deletionTimestamp"] = "2026-09-01T00:00:00Z"
    assert rv.sync_refusal(report(deleting), deleting, []) == rv.REFUSE_DELETING
    lagging = {"metadata": {"name": "chat-engine", "generation": 2, "annotations": {}},
               "spec": {"parentRef": {"name": "chat"}, "component": "engine"},
               "status": {"observedGeneration": 1}}
    assert rv.sync_refusal(report(ready), ready, [lagging]) == rv.REFUSE_CONTROLLER


def test_the_preview_and_action_result() -> None:
    obj = isvc(MANAGED, {"pinnedRevisionName": PINNED, "conditions": DRIFTED})
    rep = report(obj)
    preview = rv.sync_preview(rep, obj, context="prod", dry_run="client", request_id="r-1",
                              target_exists=False)
    assert preview.startswith("ALPHA runtime sync preview (acceptance is not convergence)")
    assert f"Predicted pin     cr-vllm-llama-{spec_digest(NEW)[:8]}" in preview
    assert "New token         cli-runtime-sync-r-1" in preview
    result = rv.action_result_json(rep, uid="u-1", dry_run="client", request_id="r-1",
                                   follow_up="kubectl ome runtime effective chat -n team-a "
                                             "--ome-namespace=ome")
    assert (result["accepted"], result["applied"]) == (False, False)
    text = rv.action_result_table(result)
    assert "message         Validated locally; no patch sent." in text
    assert "follow-up       kubectl ome runtime effective chat -n team-a --ome-na..." in text
    server = rv.action_result_json(rep, uid="u-1", dry_run="server", request_id="r-1",
                                   follow_up="x")
    assert (server["accepted"], server["applied"]) == (True, False)


def test_explain_ranks_namespace_runtimes_first_and_says_why_others_do_not_qualify() -> None:
    team = {"kind": "ServingRuntime", "metadata": {"name": "team-llama", "namespace": "team-a"},
            "spec": {"supportedModelFormats": FORMATS}}
    heavy = csr("vllm-llama", {"supportedModelFormats": [
        {**FORMATS[0], "priority": 2, "modelFormat": {"name": "safetensors", "weight": 2}}]})
    base = csr("vllm-base", {"supportedModelFormats": [{**FORMATS[0], "autoSelect": False}]})
    off = csr("vllm-legacy", {"disabled": True, "supportedModelFormats": FORMATS})
    subject = ro.decode_isvc(isvc())[0]
    text, count = rv.explain_table(subject, MODEL,
                                   ro.decode_runtimes([team, heavy, base, off]))
    lines = [line.split()[:5] for line in text.splitlines()]
    assert count == 4
    assert lines[1] == ["team-llama", "Namespaced", "Yes", "1", "2"]
    assert lines[2] == ["vllm-llama", "Cluster", "Yes", "2", "6"]
    assert lines[3][:3] == ["vllm-base", "Cluster", "No"] and "autoSelect=true" in text
    assert "runtime is disabled" in text.splitlines()[4]


def test_explain_says_why_a_runtime_of_another_deployment_mode_is_skipped() -> None:
    multi = csr("srt-multinode", {
        "supportedModelFormats": FORMATS,
        "engineConfig": {"annotations": {"ome.io/deploymentMode": "MultiNode"}}})
    native = csr("srt-native", {
        "supportedModelFormats": FORMATS,
        "engineConfig": {"annotations": {"ome.io/deploymentMode": "OMENative"}}})
    plain = csr("srt-plain", {"supportedModelFormats": FORMATS})
    wants_native = ro.decode_isvc({**isvc(), "spec": {**isvc()["spec"],
                                                      "deploymentMode": "OMENative"}})[0]
    text, _ = rv.explain_table(wants_native, MODEL,
                               ro.decode_runtimes([multi, native, plain]))
    row = next(line for line in text.splitlines() if line.startswith("srt-multinode"))
    assert row.split()[2] == "No" and row.endswith(
        "runtime engine deployment mode MultiNode does not match requested engine "
        "deployment mode OMENative")
    assert [line.split()[2] for line in text.splitlines()[1:3]] == ["Yes", "Yes"]
    # an ISVC that asks for no mode takes any runtime (OME's "None | MultiNode | Passes")
    text, _ = rv.explain_table(ro.decode_isvc(isvc())[0], MODEL, ro.decode_runtimes([multi]))
    assert text.splitlines()[1].split()[2] == "Yes"
    # the component's own annotation wins over spec.deploymentMode
    raw = isvc()
    raw["spec"]["deploymentMode"] = "OMENative"
    raw["spec"]["engine"]["annotations"] = {"ome.io/deploymentMode": "MultiNode"}
    text, _ = rv.explain_table(ro.decode_isvc(raw)[0], MODEL, ro.decode_runtimes([native]))
    assert "runtime engine deployment mode OMENative does not match requested engine " \
           "deployment mode MultiNode" in text


def test_with_effective_appends_omes_effective_context() -> None:
    base = csr("vllm-base", {"supportedModelFormats": FORMATS})
    llama = csr("vllm-llama", NEW, **{"ome.io/inherit-from": "vllm-base"})
    runtimes = ro.decode_runtimes([base, llama])
    rep = ro.effective(isvc(MANAGED, {"pinnedRevisionName": PINNED, "conditions": DRIFTED,
                                      "observedGeneration": 3}),
                       runtimes, [MODEL], [revision(OLD)])
    lines = rv.effective_context(rep, runtimes).splitlines()
    assert lines[0] == "Effective context (separate observation; selector verdict unchanged):"
    assert [line.split(None, 2) for line in lines[1:8]] == [
        ["SCOPE", "FIELD", "VALUE"], ["Service", "SELECTION", "Explicit"],
        ["Service", "SOURCE", "CSR/vllm-llama"], ["Source", "INHERITANCE", "Observed"],
        ["Source", "ROOT-FIRST", "CSR/vllm-base"], ["Source", "ROOT-FIRST", "CSR/vllm-llama"],
        ["Service", "CAVEAT", "Independent snapshot; not rollout convergence"]]
    assert lines[8].split() == ["Live", "STATE", "Available"]
    assert lines[-1].split() == ["Service", "LIVE-RELATION", "Different"]
    broken = ro.decode_runtimes([llama])
    rep = ro.effective(isvc(MANAGED), broken, [MODEL], [])
    rows = [line.split() for line in rv.effective_context(rep, broken).splitlines()]
    assert ["Source", "INHERITANCE", "Unavailable"] in rows
    assert ["Source", "REASON", "NotFound"] in rows
    assert rv.effective_context(None, broken).splitlines()[2:] == [
        "Service   EVIDENCE   Unavailable",
        "Service   CAVEAT     Selector verdict above is unchanged"]


def test_runtime_verbs_refuse_bad_flags_before_reading() -> None:
    runner = CliRunner()
    alone = runner.invoke(cli, ["runtime", "explain", "--model", "m", "--with-effective"],
                          standalone_mode=False)
    assert "--with-effective requires --isvc" in str(alone.exception)
    both = runner.invoke(cli, ["runtime", "explain", "--model", "m", "--isvc", "i"],
                         standalone_mode=False)
    assert "exactly one of --model or --isvc is required" in str(both.exception)
    bad = runner.invoke(cli, ["runtime", "sync", "chat", "--dry-run", "maybe"])
    assert bad.exit_code == 2 and "maybe" in bad.output


def test_reports_print_as_yaml_too() -> None:
    rep = report(isvc(MANAGED, {"pinnedRevisionName": PINNED, "conditions": DRIFTED}))
    doc = ro.effective_json(rep, "2026-09-28T14:05:12Z")
    assert doc["kind"] == "RuntimeEffectiveReport"
    assert yaml.safe_load(yaml.safe_dump(doc)) == doc
    assert doc["content"]["service"]["pin"] == {"mode": "ManagedPin", "state": "Resolved"}


READ_VERBS = [["get", "isvc"], ["instance", "list", "x"], ["instance", "status", "x", "0"],
              ["instance", "retry-blocks", "x"], ["rollout", "status", "x"],
              ["rollout", "history", "x"], ["migration", "status", "x"],
              ["migration", "history", "x"], ["handover", "x"], ["advise"],
              ["runtime", "effective", "x"], ["runtime", "history", "x"],
              ["runtime", "tree", "x"],
              ["autoscale", "status", "x"], ["autoscale", "explain", "x"],
              ["wait", "x", "--for=condition=Ready"]]


def test_every_read_verb_takes_o_yaml(tmp_path: Any, capsys: Any) -> None:
    """``-o yaml`` parses on every read verb: the command gets as far as the kubeconfig."""
    from omenative_controller.cli.kubectl_ome import main
    missing = str(tmp_path / "nope")
    for verb in READ_VERBS:
        code = main([*verb, "-o", "yaml", "--kubeconfig", missing, "-n", "ns"])
        err = capsys.readouterr().err
        assert code == 1 and f"kubeconfig {missing}" in err, (verb, code, err)


def test_echo_doc_prints_yaml_in_the_reports_key_order(capsys: Any) -> None:
    from omenative_controller.cli.kubectl_common import _echo_doc
    doc = {"apiVersion": "cli.ome.io/v1alpha1", "kind": "X", "content": {"b": 1, "a": [1]}}
    _echo_doc("yaml", doc)
    text = capsys.readouterr().out
    assert text.splitlines()[0] == "apiVersion: cli.ome.io/v1alpha1"
    assert yaml.safe_load(text) == doc

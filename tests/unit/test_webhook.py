"""The admission webhook's answers: OME's reasons and messages, warnings, and no crash on junk."""

from __future__ import annotations

import copy
import json
import shutil
import ssl
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from omenative_controller.observability import Metrics
from omenative_controller.webhook import (
    ISVC_PATH,
    REPLICA_PATH,
    review_response,
    serve_webhook,
)
from omenative_core.service import basemodel_from_json
from omenative_core.service.admission_models import AdmissionSources
from omenative_core.service.model import ServingRuntime, runtime_from_json
from omenative_core.service.validate_replica import colliding_service_names

MIGRATION_KEY = "ome.io/migration-request-v1-0b7d6a52-9c3e-4f7e-8d2a-1f0e5c4b3a29"


def runtime() -> ServingRuntime:
    """A ServingRuntime whose engine is a leader plus one worker."""
    return runtime_from_json({
        "apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime",
        "metadata": {"name": "srt", "namespace": "ns"},
        "spec": {"engineConfig": {
            "runner": {"image": "example.com/llm:1"},
            "leader": {"runner": {"command": ["serve"]}},
            "worker": {"size": 1, "runner": {"command": ["serve"]}},
        }},
    })


def isvc(**spec: Any) -> dict[str, Any]:
    """An InferenceService ``chat`` on runtime ``srt``, OMENative, with ``spec`` merged in."""
    body: dict[str, Any] = {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": "ns"},
        "spec": {"deploymentMode": "OMENative",
                 "runtime": {"name": "srt", "kind": "ServingRuntime"},
                 "engine": {"minReplicas": 1, "leader": {}, "worker": {}}},
    }
    body["spec"].update(spec)
    return body


def review(obj: Any, old: Any = None, *, kind: str = "InferenceService",
           operation: str | None = None) -> dict[str, Any]:
    """An AdmissionReview of ``obj`` (an update when ``old`` is given)."""
    request: dict[str, Any] = {
        "uid": "7f0e-uid", "kind": {"group": "ome.io", "version": "v1beta1", "kind": kind},
        "operation": operation or ("UPDATE" if old is not None else "CREATE"),
        "namespace": "ns", "object": obj,
    }
    if old is not None:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def answer(obj: Any, old: Any = None, **kw: Any) -> dict[str, Any]:
    rt = kw.pop("runtime", runtime())
    out = review_response(review(obj, old, **kw), runtime=rt)
    assert out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
    response: dict[str, Any] = out["response"]
    return response


def denied(response: dict[str, Any], reason: str) -> str:
    assert response["allowed"] is False, response
    assert response["status"]["reason"] == reason, response
    message: str = response["status"]["message"]
    assert reason in message
    return message


# ---------------------------------------------------------------------------- InferenceService


def test_a_valid_inference_service_is_admitted_with_its_uid() -> None:
    response = answer(isvc())
    assert response == {"uid": "7f0e-uid", "allowed": True}


def test_a_malformed_migration_request_is_denied_with_omes_reason() -> None:
    body = isvc()
    body["metadata"]["annotations"] = {MIGRATION_KEY: '{"schemaVersion": "v1", "component": '}
    message = denied(answer(body), "InvalidMigrationRequest")
    assert message.startswith("InvalidMigrationRequest: migration request")


def test_a_well_formed_migration_request_is_admitted() -> None:
    body = isvc()
    body["metadata"]["annotations"] = {MIGRATION_KEY: json.dumps(
        {"schemaVersion": "v1", "component": "engine", "instance": 0, "from_node": "n1"})}
    assert answer(body)["allowed"] is True


def test_engine_and_decoder_modes_must_match_when_one_is_omenative() -> None:
    body = isvc(decoder={"annotations": {"ome.io/deploymentMode": "RawDeployment"}})
    message = denied(answer(body), "InvalidDeploymentModeCombination")
    assert 'decoder deploymentMode="RawDeployment"' in message


def test_ready_policy_none_on_a_multi_pod_omenative_engine_is_denied_but_ratcheted() -> None:
    body = isvc(engine={"minReplicas": 1, "leader": {}, "worker": {},
                        "lifecycle": {"readyPolicy": "None"}})
    denied(answer(body), "InvalidReadyPolicy")
    # an object that already had it may still be edited (OME ratchets this rule)
    edited = copy.deepcopy(body)
    edited["spec"]["engine"]["minReplicas"] = 2
    assert answer(edited, body)["allowed"] is True


def test_leader_over_a_runtime_without_a_worker_is_denied() -> None:
    bare = runtime_from_json({
        "apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime",
        "metadata": {"name": "srt", "namespace": "ns"},
        "spec": {"engineConfig": {"runner": {"image": "example.com/llm:1"}}},
    })
    body = isvc(engine={"minReplicas": 1, "leader": {}})
    message = denied(answer(body, runtime=bare), "LeaderRequiresWorker")
    assert message.startswith("InvalidLeaderWorkerPairing: LeaderRequiresWorker")
    # over the runtime's worker it is fine
    assert answer(body)["allowed"] is True


def test_an_unknown_runtime_skips_pairing_with_a_warning() -> None:
    body = isvc(engine={"minReplicas": 1, "leader": {}})
    response = answer(body, runtime=None)
    assert response["allowed"] is True
    assert any(w.startswith("RuntimeNotFound:") for w in response["warnings"])


def test_a_missing_model_is_refused_when_the_webhook_read_the_models() -> None:
    """OME's validator looks the model up (``validateModelExists``); so does the webhook
    when it was given what it read of the cluster (``AdmissionSources``)."""
    model = basemodel_from_json({"kind": "ClusterBaseModel", "metadata": {"name": "llama"},
                                 "spec": {"modelFormat": {"name": "safetensors"}}})
    body = isvc(model={"name": "llama-typo"})
    read = AdmissionSources(runtimes=(runtime(),), models=(model,))
    out = review_response(review(body), runtime=runtime(), sources=read)["response"]
    message = denied(out, "ModelNotFound")
    assert "referenced model 'llama-typo' not found in namespace 'ns'" in message
    body["spec"]["model"]["name"] = "llama"
    assert review_response(review(body), runtime=runtime(), sources=read)["response"]["allowed"]
    # the model CRDs not served: not checked
    unread = AdmissionSources(runtimes=(runtime(),), models=None)
    body["spec"]["model"]["name"] = "llama-typo"
    assert review_response(review(body), runtime=runtime(), sources=unread)["response"]["allowed"]


def test_rollout_rejections_carry_omes_reason() -> None:
    body = isvc(deploymentMode=None, rollout={"groups": [
        {"components": ["engine"], "canary": {"steps": [{"capacity": "100%"}]}}]})
    message = denied(answer(body), "CanaryRequiresOMENative")
    assert message.startswith("CanaryRequiresOMENative: spec.rollout.groups[0].components[0]")


def test_rollout_warnings_admit_and_are_returned() -> None:
    body = isvc(decoder={"minReplicas": 1}, rollout={"groups": [
        {"components": ["engine", "decoder"], "blueGreen": {}, "maintainRatio": {"tolerance": 80}}
    ]})
    response = answer(body)
    assert response["allowed"] is True
    assert any(w.startswith("RatioToleranceTooHigh:") for w in response["warnings"])


def test_deployment_strategy_under_omenative_is_a_warning() -> None:
    body = isvc(engine={"minReplicas": 1, "leader": {}, "worker": {},
                        "deploymentStrategy": {"type": "Recreate"}})
    response = answer(body)
    assert response["allowed"] is True
    assert any("engine.deploymentStrategy is ignored" in w for w in response["warnings"])


def test_every_rejection_is_in_the_message_and_the_first_reason_is_the_status_reason() -> None:
    body = isvc(engine={"minReplicas": 0, "leader": {}, "worker": {},
                        "podDisruptionBudget": {"minAvailable": 1, "maxUnavailable": 1}})
    message = denied(answer(body), "InvalidScaleToZero")
    assert "InvalidPodDisruptionBudget" in message


def test_a_metadata_only_update_of_an_invalid_object_is_admitted() -> None:
    bad = isvc(engine={"minReplicas": 0, "leader": {}, "worker": {}})
    with_finalizer = copy.deepcopy(bad)
    with_finalizer["metadata"]["finalizers"] = ["example.com/keep"]
    assert answer(with_finalizer, bad)["allowed"] is True
    denied(answer(bad), "InvalidScaleToZero")


def test_a_field_of_the_wrong_type_is_a_clear_denial() -> None:
    message = denied(answer(isvc(engine={"minReplicas": "two"})), "InvalidSpec")
    assert "spec.engine.minReplicas" in message


@pytest.mark.parametrize("junk", [None, 3, "x", {}, {"request": "x"}, {"request": {}},
                                  {"request": {"operation": "CREATE", "kind": "InferenceService"}}])
def test_junk_never_raises(junk: Any) -> None:
    out = review_response(junk)
    assert out["kind"] == "AdmissionReview"
    assert isinstance(out["response"]["allowed"], bool)


def test_a_review_without_a_request_is_denied_as_bad_request() -> None:
    assert review_response({"kind": "AdmissionReview"})["response"]["status"]["reason"] == \
        "BadRequest"


def test_an_object_that_is_not_an_object_is_denied() -> None:
    denied(answer("not an object"), "InvalidSpec")


def test_delete_is_admitted() -> None:
    assert answer(isvc(engine={"minReplicas": 0}), operation="DELETE")["allowed"] is True


# ---------------------------------------------------------------------------- InferenceReplica


def replica(name: str = "solo", **spec: Any) -> dict[str, Any]:
    """A standalone single-pod engine InferenceReplica."""
    body: dict[str, Any] = {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"component": "engine", "runners": [
            {"name": "default", "template": {"spec": {"containers": [
                {"name": "main", "image": "example.com/llm:1"}]}}}]},
    }
    body["spec"].update(spec)
    return body


def test_a_valid_standalone_replica_is_admitted() -> None:
    assert answer(replica(), kind="InferenceReplica")["allowed"] is True


def test_a_standalone_replica_whose_pod_names_are_too_long_is_denied() -> None:
    denied(answer(replica("x" * 60, replicas=2), kind="InferenceReplica"), "NameTooLong")


def test_a_standalone_replica_with_an_hpa_class_is_denied() -> None:
    denied(answer(replica(autoscaler={"class": "HPA"}), kind="InferenceReplica"),
           "AutoscalerClassNotAllowed")


def test_a_projected_replica_is_left_to_the_controller_and_the_policy() -> None:
    body = replica("x" * 60, parentRef={"name": "chat"})
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "name": "chat", "uid": "u"}]
    assert answer(body, kind="InferenceReplica")["allowed"] is True


def test_a_finalizer_on_an_invalid_standalone_replica_is_admitted() -> None:
    bad = replica("x" * 60, replicas=2)
    done = copy.deepcopy(bad)
    done["metadata"]["finalizers"] = ["ome.io/ir-teardown"]
    assert answer(done, bad, kind="InferenceReplica")["allowed"] is True


def test_a_replica_without_a_spec_is_denied() -> None:
    denied(answer({"metadata": {"name": "x"}}, kind="InferenceReplica"), "InvalidSpec")


# ---------------------------------------------------------------------------- over HTTPS


def self_signed(tmp: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made with the openssl CLI."""
    openssl = shutil.which("openssl")
    assert openssl, "the openssl CLI is needed to make a test certificate"
    cert, key = tmp / "tls.crt", tmp / "tls.key"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    return cert, key


async def test_the_server_answers_reviews_over_tls_and_junk_with_400(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    server = await serve_webhook("127.0.0.1", 0, str(cert), str(key))
    ctx = ssl.create_default_context(cafile=str(cert))
    try:
        assert server.port > 0
        async with aiohttp.ClientSession() as session:
            body = isvc(decoder={"annotations": {"ome.io/deploymentMode": "RawDeployment"}})
            async with session.post(server.url(ISVC_PATH), json=review(body), ssl=ctx) as resp:
                assert resp.status == 200
                data = await resp.json()
            assert data["response"]["uid"] == "7f0e-uid"
            assert data["response"]["status"]["reason"] == "InvalidDeploymentModeCombination"
            async with session.post(server.url(REPLICA_PATH), data=b"{not json",
                                    ssl=ctx) as resp:
                assert resp.status == 400
                data = await resp.json()
            assert data["response"]["allowed"] is False
    finally:
        await server.stop()


# ---------------------------------------------------------------------------- issue 15


def test_a_component_budget_above_100_percent_is_denied_naming_the_field() -> None:
    body = isvc(engine={"minReplicas": 1, "leader": {}, "worker": {}, "lifecycle": {
        "updateStrategy": {"rollingUpdate": {"maxSurge": "150%"}}}})
    message = denied(answer(body), "InvalidRollingUpdatePercent")
    assert "spec.engine.lifecycle.updateStrategy.rollingUpdate.maxSurge is '150%'" in message


def test_an_inference_service_without_a_runtime_is_admitted_with_a_clear_warning() -> None:
    body = isvc()
    del body["spec"]["runtime"]
    response = answer(body, runtime=None)
    assert response["allowed"] is True
    (warning,) = [w for w in response["warnings"] if w.startswith("RuntimeNotNamed:")]
    assert "names no runtime" in warning
    assert "spec.model names no model to select one for" in warning


def test_a_bad_migration_request_on_a_standalone_replica_is_denied_like_on_a_service() -> None:
    value = '{"schemaVersion": "v2", "instance": 0}'
    service = isvc()
    service["metadata"]["annotations"] = {MIGRATION_KEY: value}
    on_isvc = denied(answer(service), "InvalidMigrationRequest")
    solo = replica()
    annotated = copy.deepcopy(solo)
    annotated["metadata"]["annotations"] = {MIGRATION_KEY: value}
    # an annotation-only update, as `kubectl annotate` sends it
    on_ir = denied(answer(annotated, solo, kind="InferenceReplica"), "InvalidMigrationRequest")
    assert on_ir == on_isvc
    assert "UnsupportedSchemaVersion: schemaVersion must be \"v1\"" in on_ir


def test_a_well_formed_request_on_a_standalone_replica_is_admitted() -> None:
    solo = replica()
    annotated = copy.deepcopy(solo)
    annotated["metadata"]["annotations"] = {MIGRATION_KEY: json.dumps(
        {"schemaVersion": "v1", "instance": 0, "from_node": "n1"})}
    assert answer(annotated, solo, kind="InferenceReplica")["allowed"] is True


def test_an_empty_release_held_revision_is_denied_on_any_replica() -> None:
    projected = replica(parentRef={"name": "chat"})
    projected["metadata"]["ownerReferences"] = [
        {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "name": "chat", "uid": "u"}]
    for body in (replica(), projected):
        annotated = copy.deepcopy(body)
        annotated["metadata"]["annotations"] = {"ome.io/release-held-revision": ""}
        message = denied(answer(annotated, body, kind="InferenceReplica"),
                         "InvalidReleaseHeldRevision")
        assert "ome.io/release-held-revision is empty" in message


def test_a_partition_above_replicas_is_denied_but_a_scale_down_is_not() -> None:
    message = denied(answer(replica(replicas=2, pacing={"partition": 3}), kind="InferenceReplica"),
                     "PartitionAboveReplicas")
    assert "spec.pacing.partition is 3, above spec.replicas (2)" in message
    old = replica(replicas=4, pacing={"partition": 3})
    response = answer(replica(replicas=2, pacing={"partition": 3}), old, kind="InferenceReplica")
    assert response["allowed"] is True
    assert any(w.startswith("PartitionAboveReplicas:") for w in response["warnings"])


def test_more_replicas_than_are_decoded_is_a_warning() -> None:
    response = answer(replica(replicas=20_001), kind="InferenceReplica")
    assert response["allowed"] is True
    assert any(w.startswith("TooManyInstances: spec.replicas is 20001")
               for w in response["warnings"])


def test_a_rollback_to_a_revision_that_is_not_stored_warns_with_the_stored_ones() -> None:
    body = replica(pacing={"rollbackToRevision": "solo-0000000000"})
    out = review_response(review(body, kind="InferenceReplica"),
                          revisions=["solo-5f7c9d2a1b"])["response"]
    assert out["allowed"] is True
    (warning,) = out["warnings"]
    assert warning.startswith("RollbackRevisionNotFound:")
    assert "Stored: solo-5f7c9d2a1b" in warning
    known = replica(pacing={"rollbackToRevision": "5f7c9d2a1b"})
    out = review_response(review(known, kind="InferenceReplica"),
                          revisions=["solo-5f7c9d2a1b"])["response"]
    assert "warnings" not in out


# ---------------------------------------------------------------------------- name collisions


def test_a_standalone_replica_named_like_an_inference_service_is_denied() -> None:
    """OME's rule: an InferenceService's name, or its name plus -engine/-decoder/-router,
    would share pod and Service names with that InferenceService's projected replicas."""
    for name in ("chat", "chat-engine", "chat-router"):
        out = review_response(review(replica(name), kind="InferenceReplica"),
                              services=["chat"])["response"]
        message = denied(out, "NameCollidesWithInferenceService")
        assert "InferenceService 'chat'" in message and repr(name) in message


def test_a_standalone_replica_with_a_free_name_or_an_update_is_admitted() -> None:
    assert colliding_service_names("chat-pool") == ("chat-pool",)
    assert colliding_service_names("chat-decoder") == ("chat-decoder", "chat")
    out = review_response(review(replica("chat-pool"), kind="InferenceReplica"),
                          services=[])["response"]
    assert out["allowed"] is True
    stored = replica("chat")  # an update keeps the name it was admitted with
    changed = replica("chat", replicas=3)
    out = review_response(review(changed, stored, kind="InferenceReplica"),
                          services=["chat"])["response"]
    assert out["allowed"] is True


async def test_every_admission_answer_is_counted_by_path_and_code(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    metrics = Metrics()
    server = await serve_webhook("127.0.0.1", 0, str(cert), str(key),
                                 on_answer=metrics.webhook_answered)
    ctx = ssl.create_default_context(cafile=str(cert))
    try:
        async with aiohttp.ClientSession() as session:
            body = isvc(decoder={"annotations": {"ome.io/deploymentMode": "RawDeployment"}})
            for _ in range(2):  # a denial is a 200: the webhook did its job
                async with session.post(server.url(ISVC_PATH), json=review(body),
                                        ssl=ctx) as resp:
                    assert resp.status == 200
            async with session.post(server.url(REPLICA_PATH), data=b"{", ssl=ctx) as resp:
                assert resp.status == 400
            async with session.get(server.url("/healthz"), ssl=ctx) as resp:
                assert resp.status == 200
    finally:
        await server.stop()
    name = "omenative_webhook_requests_total"
    assert metrics.sample(name, {"webhook": ISVC_PATH, "code": "200"}) == 2
    assert metrics.sample(name, {"webhook": REPLICA_PATH, "code": "400"}) == 1
    assert metrics.sample(name) == 3  # probes are not admission answers


def test_a_policy_ref_is_refused_while_the_feature_is_off() -> None:
    """OME's ISVC webhook: ``AutoscalerPolicyFeatureDisabled`` while the AutoscalerPolicy CRD
    is not served, ``AutoscalerPolicyRefKindReserved`` for ``ClusterAutoscalerPolicy``."""
    body = isvc(engine={"minReplicas": 1, "autoscalerPolicyRef": {"name": "cpu-60"}})
    off = AdmissionSources(runtimes=(runtime(),), policy_feature=False)
    out = review_response(review(body), runtime=runtime(), sources=off)["response"]
    assert "spec.engine.autoscalerPolicyRef" in denied(out, "AutoscalerPolicyFeatureDisabled")
    on = AdmissionSources(runtimes=(runtime(),), policy_feature=True)
    assert review_response(review(body), runtime=runtime(), sources=on)["response"]["allowed"]
    body["spec"]["engine"]["autoscalerPolicyRef"]["kind"] = "ClusterAutoscalerPolicy"
    out = review_response(review(body), runtime=runtime(), sources=on)["response"]
    denied(out, "AutoscalerPolicyRefKindReserved")

"""Admission against the real API server: CRD CEL rules, the policies, the optional webhook.

Each bad input is sent to kube-apiserver and must come back rejected with OME's reason in
the message, as a user sees it in ``kubectl apply``. The ValidatingAdmissionPolicies of
``config/admission/`` are installed for a test and removed afterwards; the webhook runs in
this process on 127.0.0.1 (reached by ``clientConfig.url``) and its configuration is scoped
to the test's namespace, so no other test meets either of them.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from omenative_controller import service_crds
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import (
    CONTROLLER_REVISIONS,
    INFERENCE_REPLICAS,
    Resource,
)
from omenative_controller.service_controller import (
    CLUSTER_SERVING_RUNTIMES,
    INFERENCE_SERVICES,
    SERVING_RUNTIMES,
)
from omenative_controller.webhook import (
    ISVC_PATH,
    REPLICA_PATH,
    WebhookServer,
    kube_revision_lookup,
    kube_runtime_lookup,
    kube_service_lookup,
    serve_webhook,
)

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import REPO, apply_crd, eventually  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

MANAGER_SA = "system:serviceaccount:ome:omenative-manager"
POLICIES = REPO / "config" / "admission" / "policies.yaml"
BINDINGS = REPO / "config" / "admission" / "bindings.yaml"
VAPS = Resource("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies",
                "ValidatingAdmissionPolicy", namespaced=False)
VAP_BINDINGS = Resource("admissionregistration.k8s.io", "v1",
                        "validatingadmissionpolicybindings",
                        "ValidatingAdmissionPolicyBinding", namespaced=False)
WEBHOOKS = Resource("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
                    "ValidatingWebhookConfiguration", namespaced=False)
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
MIGRATION_KEY = "ome.io/migration-request-v1-0b7d6a52-9c3e-4f7e-8d2a-1f0e5c4b3a29"
TEMPLATE: JSON = {"spec": {"containers": [{"name": "main", "image": "example.com/llm:1"}]}}


@pytest.fixture(scope="session")
async def admission_crds(kube: KubeClient, ir_crd: str) -> list[str]:
    """The InferenceReplica, InferenceService and runtime CRDs, Established."""
    return [ir_crd, *[await apply_crd(kube, REPO / crd.file) for crd in service_crds.SERVICE_CRDS]]


def isvc_body(namespace: str, name: str = "chat", **spec: Any) -> JSON:
    """A valid OMENative InferenceService with an engine of a leader and a worker."""
    body: dict[str, Any] = {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"deploymentMode": "OMENative", "model": {"name": "llama"},
                 "engine": {"minReplicas": 1, "leader": {}, "worker": {"size": 1}}},
    }
    body["spec"].update(spec)
    return body


def replica_body(namespace: str, name: str = "solo", **spec: Any) -> JSON:
    """A valid standalone single-pod engine InferenceReplica."""
    body: dict[str, Any] = {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"component": "engine", "runners": [{"name": "default", "template": TEMPLATE}]},
    }
    body["spec"].update(spec)
    return body


async def rejected(call: Any) -> ApiError:
    """The ApiError ``call`` (an awaitable) fails with; fails the test if it succeeds."""
    try:
        await call
    except ApiError as exc:
        return exc
    raise AssertionError("the API server admitted it")


@contextlib.asynccontextmanager
async def acting_as(kubeconfig_path: Path, user: str) -> AsyncIterator[KubeClient]:
    """A client that impersonates ``user`` (the admin kubeconfig may impersonate anyone)."""
    client = await KubeClient.connect(str(kubeconfig_path), qps=0, burst=1, timeout=30)
    client.api.set_default_header("Impersonate-User", user)
    try:
        yield client
    finally:
        await client.close()


# ---------------------------------------------------------------------------- CRD CEL rules

BAD_ISVCS: list[tuple[str, dict[str, Any]]] = [
    ("LeaderRequiresWorker", {"engine": {"minReplicas": 1, "leader": {}}}),
    ("WorkerRequiresLeader", {"engine": {"minReplicas": 1, "worker": {"size": 1}}}),
    ("WorkerSizeMustBePositive", {"engine": {"minReplicas": 1, "leader": {},
                                             "worker": {"size": 0}}}),
    ("InvalidDeploymentModeCombination",
     {"decoder": {"annotations": {"ome.io/deploymentMode": "RawDeployment"}}}),
    ("InvalidRolloutSpec", {"rollout": {"groups": [
        {"components": ["engine"], "blueGreen": {}, "rollingUpdate": {}}]}}),
    ("InvalidComponentInCoordinationGroup", {"rollout": {"groups": [
        {"components": ["predictor"]}]}}),
    ("CanaryInvalid", {"rollout": {"groups": [
        {"components": ["engine"], "canary": {"steps": [{"capacity": "50"}]}}]}}),
    ("CanaryInvalid", {"rollout": {"groups": [
        {"components": ["engine"], "canary": {"steps": [{"capacity": "100%",
                                                          "traffic": 150}]}}]}}),
    ("InvalidRolloutSpec", {"rollout": {"groups": [
        {"components": ["engine"], "maintainRatio": {"tolerance": 101}}]}}),
    ("InvalidRolloutSpec", {"rollout": {"groupOrdering": "Random", "groups": []}}),
]


@pytest.mark.parametrize(("reason", "spec"), BAD_ISVCS,
                         ids=[f"{r}-{i}" for i, (r, _) in enumerate(BAD_ISVCS)])
async def test_the_crd_rejects_a_bad_inference_service_with_omes_reason(
    kube: KubeClient, namespace: str, admission_crds: list[str], reason: str,
    spec: dict[str, Any],
) -> None:
    exc = await rejected(kube.create(INFERENCE_SERVICES, isvc_body(namespace, **spec),
                                     namespace))
    assert exc.status == 422, exc
    assert f"{reason}:" in exc.message, exc.message


async def test_the_crd_rejects_more_than_three_rollout_groups(
    kube: KubeClient, namespace: str, admission_crds: list[str]
) -> None:
    groups = [{"components": ["engine"]} for _ in range(4)]
    exc = await rejected(kube.create(
        INFERENCE_SERVICES, isvc_body(namespace, rollout={"groups": groups}), namespace))
    assert exc.status == 422 and "must have at most 3 items" in exc.message, exc.message


async def test_valid_objects_pass_the_crd_rules_and_omes_schema_prunes_unknown_fields(
    kube: KubeClient, namespace: str, admission_crds: list[str]
) -> None:
    """OME v1.3's CRDs (config/ome-crd/) are structural: a field OME does not know is dropped
    by the API server, as on an OME cluster, and OME's defaults are filled in."""
    body = isvc_body(namespace, decoder={"leader": {}, "worker": {"size": 2},
                                         "someFutureOmeField": {"kept": True}},
                     rollout={"groupOrdering": "Sequential", "groups": [
                         {"components": ["engine", "decoder"], "canary": {"steps": [
                             {"capacity": 1, "traffic": 10}, {"capacity": "100%",
                                                              "traffic": 100}]}}]})
    created = await kube.create(INFERENCE_SERVICES, body, namespace)
    assert "someFutureOmeField" not in created["spec"]["decoder"]
    assert created["spec"]["decoder"]["worker"] == {"size": 2}
    assert created["spec"]["model"] == {"name": "llama", "kind": "ClusterBaseModel",
                                        "apiGroup": "ome.io"}
    # the pre-v1.3 scaleTarget is gone from OME's schema: pruned; a bad enum is refused
    legacy = isvc_body(namespace, "legacy", engine={"minReplicas": 1, "scaleTarget": 60,
                                                    "leader": {}, "worker": {"size": 1}})
    assert "scaleTarget" not in (await kube.create(INFERENCE_SERVICES, legacy,
                                                   namespace))["spec"]["engine"]
    exc = await rejected(kube.create(INFERENCE_SERVICES, isvc_body(
        namespace, "multinode", deploymentMode="MultiNode"), namespace))
    assert "spec.deploymentMode" in exc.message and "Unsupported value" in exc.message
    # a leader without its own worker is fine over a runtime (the webhook checks that one)
    over_runtime = isvc_body(namespace, "over-runtime", runtime={"name": "srt"},
                             engine={"minReplicas": 1, "leader": {}})
    await kube.create(INFERENCE_SERVICES, over_runtime, namespace)
    await kube.create(INFERENCE_REPLICAS, replica_body(namespace), namespace)


BAD_REPLICAS: list[tuple[str, dict[str, Any]]] = [
    ("LeaderRequiresWorker", {"runners": [{"name": "leader", "template": TEMPLATE}]}),
    ("WorkerRequiresLeader", {"runners": [{"name": "worker", "size": 1, "template": TEMPLATE}]}),
    ("DefaultRunnerNotAlone", {"runners": [
        {"name": "default", "template": TEMPLATE}, {"name": "leader", "template": TEMPLATE},
        {"name": "worker", "template": TEMPLATE}]}),
    ("WorkerSizeMustBePositive", {"runners": [
        {"name": "leader", "template": TEMPLATE},
        {"name": "worker", "size": 0, "template": TEMPLATE}]}),
    ("ControllerOnlyField", {"placementReplicaLimit": 2}),
    ("AutoscalerClassNotAllowed", {"autoscaler": {"class": "keda"}}),
    ("LifecycleMinReadySecondsNotAllowed", {"lifecycle": {"minReadySeconds": 5}}),
    ("RunnersWithRefs", {"modelRef": {"name": "llama"}}),
    ("PinnedRuntimeRef", {"runners": [], "runtimeRef": {"name": "srt", "autoSync": False}}),
]


@pytest.mark.parametrize(("reason", "spec"), BAD_REPLICAS, ids=[r for r, _ in BAD_REPLICAS])
async def test_the_crd_rejects_a_bad_standalone_replica_with_omes_reason(
    kube: KubeClient, namespace: str, admission_crds: list[str], reason: str,
    spec: dict[str, Any],
) -> None:
    exc = await rejected(kube.create(INFERENCE_REPLICAS, replica_body(namespace, **spec),
                                     namespace))
    assert exc.status == 422, exc
    assert f"{reason}:" in exc.message, exc.message


async def test_component_and_parent_ref_are_immutable(
    kube: KubeClient, namespace: str, admission_crds: list[str]
) -> None:
    await kube.create(INFERENCE_REPLICAS, replica_body(namespace), namespace)
    for patch in ({"spec": {"component": "router"}}, {"spec": {"parentRef": {"name": "x"}}}):
        exc = await rejected(kube.patch(INFERENCE_REPLICAS, "solo", patch, namespace))
        assert exc.status == 422 and "FieldImmutable:" in exc.message, exc.message


# ---------------------------------------------------------------------------- policies


def _docs(path: Path) -> list[JSON]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.fixture
async def policies(kube: KubeClient, admission_crds: list[str]) -> AsyncIterator[None]:
    """config/admission/ installed (cluster-wide) for one test, removed afterwards."""
    made: list[tuple[Resource, str]] = []
    try:
        for res, path in ((VAPS, POLICIES), (VAP_BINDINGS, BINDINGS)):
            for doc in _docs(path):
                name = doc["metadata"]["name"]
                with contextlib.suppress(ApiError):
                    await kube.delete(res, name)
                await eventually(lambda r=res, n=name: _gone(kube, r, n), timeout=30,
                                 what=f"old {name} deleted")
                await kube.create(res, doc)
                made.append((res, name))
        yield
    finally:
        for res, name in reversed(made):
            with contextlib.suppress(ApiError):
                await kube.delete(res, name)


async def _gone(kube: KubeClient, res: Resource, name: str) -> bool:
    try:
        await kube.get(res, name)
    except ApiError as exc:
        if exc.not_found:
            return True
        raise
    return False


async def _grant(kube: KubeClient, namespace: str, *users: str) -> None:
    """Let ``users`` read and write InferenceReplicas and InferenceServices in ``namespace``."""
    await kube.create(ROLES, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "ome-editor", "namespace": namespace},
        "rules": [{"apiGroups": ["ome.io"], "resources": ["inferencereplicas",
                                                           "inferenceservices"],
                   "verbs": ["get", "list", "watch", "create", "update", "patch"]}],
    }, namespace)
    await kube.create(ROLE_BINDINGS, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "ome-editor", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "ome-editor"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": u}
                     for u in users],
    }, namespace)


async def _projected_replica(kube: KubeClient, namespace: str) -> None:
    """ISVC ``chat`` and its projected replica ``chat-engine`` (owner ref + parentRef)."""
    isvc = await kube.create(INFERENCE_SERVICES, isvc_body(namespace), namespace)
    body = replica_body(namespace, "chat-engine", parentRef={"name": "chat"})
    body["metadata"]["ownerReferences"] = [{
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "name": "chat",
        "uid": isvc["metadata"]["uid"], "controller": True}]
    await kube.create(INFERENCE_REPLICAS, body, namespace)


async def test_only_the_manager_writes_a_projected_replicas_spec(
    kube: KubeClient, kubeconfig_path: Path, namespace: str, policies: None
) -> None:
    await _grant(kube, namespace, "alice", MANAGER_SA)
    await _projected_replica(kube, namespace)
    counter = itertools.count(2)
    async with acting_as(kubeconfig_path, "alice") as alice, \
            acting_as(kubeconfig_path, MANAGER_SA) as manager:

        async def alice_is_denied() -> ApiError | None:
            try:
                await alice.patch(INFERENCE_REPLICAS, "chat-engine",
                                  {"spec": {"replicas": next(counter)}}, namespace)
            except ApiError as exc:
                if exc.status == 403:
                    return exc
                raise
            return None  # the policy is not in force yet

        exc = await eventually(alice_is_denied, timeout=30, what="the policy denying alice")
        assert "ProjectedReplicaSpecWrite:" in exc.message, exc.message
        # annotations (reset, release, migration) stay writable by users
        done = await alice.patch(INFERENCE_REPLICAS, "chat-engine",
                                 {"metadata": {"annotations": {"ome.io/reset-instances": "all"}}},
                                 namespace)
        assert done["metadata"]["annotations"]["ome.io/reset-instances"] == "all"
        # the manager writes the spec; so does the break-glass admin (system:masters)
        assert (await manager.patch(INFERENCE_REPLICAS, "chat-engine",
                                    {"spec": {"replicas": 7}}, namespace))["spec"]["replicas"] == 7
        assert (await kube.patch(INFERENCE_REPLICAS, "chat-engine",
                                 {"spec": {"replicas": 8}}, namespace))["spec"]["replicas"] == 8
        # a standalone replica is alice's to edit, but not the manager's beyond rollout control
        await alice.create(INFERENCE_REPLICAS, replica_body(namespace), namespace)
        edited = await alice.patch(INFERENCE_REPLICAS, "solo", {"spec": {"replicas": 3}},
                                   namespace)
        assert edited["spec"]["replicas"] == 3
        paused = await manager.patch(INFERENCE_REPLICAS, "solo", {"spec": {"paused": True}},
                                     namespace)
        assert paused["spec"]["paused"] is True
        exc = await rejected(manager.patch(INFERENCE_REPLICAS, "solo",
                                           {"spec": {"replicas": 4}}, namespace))
        assert "StandaloneReplicaUserField:" in exc.message, exc.message
        # a parentRef must come with the owner reference to that InferenceService
        exc = await rejected(kube.create(
            INFERENCE_REPLICAS, replica_body(namespace, "fake", parentRef={"name": "chat"}),
            namespace))
        assert "ParentRefWithoutOwner:" in exc.message, exc.message


async def test_a_requested_rollback_freezes_promote_and_new_migrations(
    kube: KubeClient, kubeconfig_path: Path, namespace: str, policies: None
) -> None:
    await _grant(kube, namespace, "alice")
    await kube.create(INFERENCE_SERVICES, isvc_body(namespace), namespace)
    await kube.patch(INFERENCE_SERVICES, "chat",
                     {"metadata": {"annotations": {"ome.io/rollout-rollback": "true"}}}, namespace)
    async with acting_as(kubeconfig_path, "alice") as alice:

        async def promote_denied() -> ApiError | None:
            try:
                await alice.patch(INFERENCE_SERVICES, "chat", {"metadata": {"annotations": {
                    "ome.io/rollout-promote": None}}}, namespace)
                await alice.patch(INFERENCE_SERVICES, "chat", {"metadata": {"annotations": {
                    "ome.io/rollout-promote": "abcdef12"}}}, namespace)
            except ApiError as exc:
                if exc.status == 403:
                    return exc
                raise
            return None

        exc = await eventually(promote_denied, timeout=30, what="the rollback freeze")
        assert "RollbackInProgress:" in exc.message, exc.message
        exc = await rejected(alice.patch(INFERENCE_SERVICES, "chat", {"metadata": {
            "annotations": {MIGRATION_KEY: "{}"}}}, namespace))
        assert "RollbackInProgress:" in exc.message, exc.message
        # other edits go through
        await alice.patch(INFERENCE_SERVICES, "chat",
                          {"metadata": {"annotations": {"team": "search"}}}, namespace)


# ---------------------------------------------------------------------------- webhook


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    assert openssl, "the openssl CLI is needed to make the webhook's certificate"
    cert, key = tmp / "tls.crt", tmp / "tls.key"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    return cert, key


def _webhook_config(name: str, namespace: str, server: WebhookServer, ca: bytes) -> JSON:
    def hook(hook_name: str, path: str, plural: str) -> JSON:
        return {
            "name": hook_name,
            "clientConfig": {"url": server.url(path),
                             "caBundle": base64.b64encode(ca).decode()},
            "rules": [{"apiGroups": ["ome.io"], "apiVersions": ["v1beta1"],
                       "operations": ["CREATE", "UPDATE"], "resources": [plural]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "failurePolicy": "Fail", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "timeoutSeconds": 10,
        }

    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [hook("inferenceservice.omenative.ome.io", ISVC_PATH, "inferenceservices"),
                     hook("inferencereplica.omenative.ome.io", REPLICA_PATH,
                          "inferencereplicas")],
    }


@pytest.fixture
async def webhook(
    kube: KubeClient, namespace: str, admission_crds: list[str], tmp_path: Path
) -> AsyncIterator[WebhookServer]:
    """The webhook on 127.0.0.1, registered for the test's namespace only."""
    cert, key = _self_signed(tmp_path)
    server = await serve_webhook("127.0.0.1", 0, str(cert), str(key),
                                 runtime_lookup=kube_runtime_lookup(kube),
                                 revision_lookup=kube_revision_lookup(kube),
                                 service_lookup=kube_service_lookup(kube))
    name = f"omenative-test-{namespace}"
    try:
        await kube.create(WEBHOOKS, _webhook_config(name, namespace, server, cert.read_bytes()))
        yield server
    finally:
        with contextlib.suppress(ApiError):
            await kube.delete(WEBHOOKS, name)
        await server.stop()


def _bad_migration(namespace: str, name: str) -> JSON:
    body = isvc_body(namespace, name)
    body["metadata"]["annotations"] = {MIGRATION_KEY: '{"schemaVersion": "v2"}'}
    return body


async def _create_with_warnings(kube: KubeClient, body: JSON, namespace: str) -> list[str]:
    """POST an InferenceService; the Warning headers of the (successful) answer."""
    resp = await kube.api.call_api(
        INFERENCE_SERVICES.path(namespace), "POST", body=body,
        header_params={"Content-Type": "application/json", "Accept": "application/json"},
        auth_settings=["BearerToken"], _preload_content=False,
        _request_timeout=aiohttp.ClientTimeout(total=30))
    try:
        text = await resp.read()
        assert resp.status == 201, text
        return list(resp.headers.getall("Warning", []))
    finally:
        resp.release()


async def test_the_webhook_denies_what_cel_cannot_see_with_omes_reason(
    kube: KubeClient, namespace: str, webhook: WebhookServer
) -> None:
    counter = itertools.count()

    async def denied_by_webhook() -> ApiError | None:
        name = f"mig-{next(counter)}"
        try:
            await kube.create(INFERENCE_SERVICES, _bad_migration(namespace, name), namespace)
        except ApiError as exc:
            return exc
        await kube.delete(INFERENCE_SERVICES, name, namespace)
        return None  # the webhook configuration is not in force yet

    exc = await eventually(denied_by_webhook, timeout=30, what="the webhook in force")
    assert "InvalidMigrationRequest: migration request" in exc.message, exc.message
    assert 'schemaVersion must be "v1"' in exc.message

    # the runtime gives the engine a leader and a worker: readyPolicy None is refused
    await kube.create(SERVING_RUNTIMES, {
        "apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime",
        "metadata": {"name": "srt", "namespace": namespace},
        "spec": {"engineConfig": {"runner": {"name": "ome-container", "image": "example.com/llm:1"},
                                  "leader": {}, "worker": {"size": 1}}},
    }, namespace)
    ready_none = isvc_body(namespace, "ready", runtime={"name": "srt", "kind": "ServingRuntime"},
                           deploymentMode=None,
                           engine={"minReplicas": 1, "lifecycle": {"readyPolicy": "None"}})
    exc = await rejected(kube.create(INFERENCE_SERVICES, ready_none, namespace))
    assert "InvalidReadyPolicy:" in exc.message, exc.message

    await kube.create(SERVING_RUNTIMES, {
        "apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime",
        "metadata": {"name": "bare", "namespace": namespace},
        "spec": {"engineConfig": {"runner": {"name": "ome-container",
                                             "image": "example.com/llm:1"}}},
    }, namespace)
    leader_only = isvc_body(namespace, "lonely",
                            runtime={"name": "bare", "kind": "ServingRuntime"},
                            engine={"minReplicas": 1, "leader": {}})
    exc = await rejected(kube.create(INFERENCE_SERVICES, leader_only, namespace))
    assert "LeaderRequiresWorker:" in exc.message, exc.message

    exc = await rejected(kube.create(INFERENCE_REPLICAS,
                                     replica_body(namespace, "r" * 60, replicas=2), namespace))
    assert "NameTooLong:" in exc.message, exc.message

    # warnings admit, and reach the client
    strategy = isvc_body(namespace, "strategy", engine={
        "minReplicas": 1, "leader": {}, "worker": {}, "deploymentStrategy": {"type": "Recreate"}})
    warnings = await _create_with_warnings(kube, strategy, namespace)
    assert any("engine.deploymentStrategy is ignored under OMENative" in w for w in warnings), \
        warnings
    # a good edit of a good object passes
    await kube.patch(INFERENCE_SERVICES, "strategy",
                     {"spec": {"engine": {"minReplicas": 2}}}, namespace)


async def test_the_webhook_configuration_leaves_other_namespaces_alone(
    kube: KubeClient, namespace: str, webhook: WebhookServer
) -> None:
    other = f"{namespace}-other"
    await kube.create(Resource("", "v1", "namespaces", "Namespace", namespaced=False),
                      {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    try:
        # CEL has no rule about migration requests: outside the webhook's namespace it passes
        await kube.create(INFERENCE_SERVICES, _bad_migration(other, "mig"), other)
        got = await kube.get(INFERENCE_SERVICES, "mig", other)
        assert json.loads(got["metadata"]["annotations"][MIGRATION_KEY]) == {
            "schemaVersion": "v2"}
    finally:
        with contextlib.suppress(ApiError):
            await kube.delete(Resource("", "v1", "namespaces", "Namespace", namespaced=False),
                              other)


async def test_the_manager_serves_the_webhook_with_webhook_port(
    kube: KubeClient, namespace: str, admission_crds: list[str], start_manager: Any,
    tmp_path: Path,
) -> None:
    """``omenative-manager --webhook-port``: the same checks, served by the manager itself."""
    _self_signed(tmp_path)
    handle = await start_manager(webhook_port=0, webhook_cert_dir=str(tmp_path))
    server = handle.manager.webhook
    assert server is not None and server.port > 0
    name = f"omenative-mgr-{namespace}"
    config = _webhook_config(name, namespace, server, (tmp_path / "tls.crt").read_bytes())
    await kube.create(WEBHOOKS, config)
    counter = itertools.count()
    try:
        async def denied() -> ApiError | None:
            obj = f"mgr-{next(counter)}"
            try:
                await kube.create(INFERENCE_SERVICES, _bad_migration(namespace, obj), namespace)
            except ApiError as exc:
                return exc
            await kube.delete(INFERENCE_SERVICES, obj, namespace)
            return None

        exc = await eventually(denied, timeout=30, what="the manager's webhook in force")
        assert "InvalidMigrationRequest" in exc.message, exc.message
    finally:
        with contextlib.suppress(ApiError):
            await kube.delete(WEBHOOKS, name)


async def test_the_chat_sample_is_admitted_without_warnings(
    kube: KubeClient, namespace: str, webhook: WebhookServer
) -> None:
    """config/samples/chat.yaml, as a user applies it: CRD rules and the webhook accept it."""
    runtime, isvc = [d for d in yaml.safe_load_all(
        (REPO / "config" / "samples" / "chat.yaml").read_text()) if d]
    name = runtime["metadata"]["name"]
    with contextlib.suppress(ApiError):
        await kube.delete(CLUSTER_SERVING_RUNTIMES, name)
    await kube.create(CLUSTER_SERVING_RUNTIMES, runtime)
    try:
        probe = _bad_migration(namespace, "probe")  # wait until the webhook is in force

        async def in_force() -> bool:
            try:
                await kube.create(INFERENCE_SERVICES, probe, namespace)
            except ApiError:
                return True
            await kube.delete(INFERENCE_SERVICES, "probe", namespace)
            return False

        await eventually(in_force, timeout=30, what="the webhook in force")
        isvc["metadata"]["namespace"] = namespace
        assert await _create_with_warnings(kube, isvc, namespace) == []
        stored = await kube.get(INFERENCE_SERVICES, "chat", namespace)
        assert stored["spec"]["engine"] == isvc["spec"]["engine"]
    finally:
        with contextlib.suppress(ApiError):
            await kube.delete(CLUSTER_SERVING_RUNTIMES, name)


# ---------------------------------------------------------------------------- issue 15


async def _write_with_warnings(
    kube: KubeClient, method: str, path: str, body: JSON, content_type: str = "application/json"
) -> list[str]:
    """POST or PATCH ``body``; the Warning headers of the (successful) answer."""
    resp = await kube.api.call_api(
        path, method, body=body,
        header_params={"Content-Type": content_type, "Accept": "application/json"},
        auth_settings=["BearerToken"], _preload_content=False,
        _request_timeout=aiohttp.ClientTimeout(total=30))
    try:
        text = await resp.read()
        assert resp.status in (200, 201), text
        return list(resp.headers.getall("Warning", []))
    finally:
        resp.release()


async def _webhook_in_force(kube: KubeClient, namespace: str) -> None:
    counter = itertools.count()

    async def in_force() -> bool:
        name = f"probe-{next(counter)}"
        try:
            await kube.create(INFERENCE_SERVICES, _bad_migration(namespace, name), namespace)
        except ApiError:
            return True
        await kube.delete(INFERENCE_SERVICES, name, namespace)
        return False

    await eventually(in_force, timeout=30, what="the webhook in force")


async def test_bad_inference_service_input_gets_a_clear_answer_at_apply_time(
    kube: KubeClient, namespace: str, webhook: WebhookServer
) -> None:
    await _webhook_in_force(kube, namespace)
    lifecycle = {"updateStrategy": {"rollingUpdate": {"maxSurge": "150%"}}}
    exc = await rejected(kube.create(INFERENCE_SERVICES, isvc_body(
        namespace, "surge", engine={"minReplicas": 1, "leader": {}, "worker": {"size": 1},
                                    "lifecycle": lifecycle}), namespace))
    assert "InvalidRollingUpdatePercent: spec.engine.lifecycle.updateStrategy.rollingUpdate." \
        "maxSurge is '150%', above 100%" in exc.message, exc.message

    partition = {"updateStrategy": {"rollingUpdate": {"partition": 4}}}
    exc = await rejected(kube.create(INFERENCE_SERVICES, isvc_body(
        namespace, "part", engine={"minReplicas": 2, "leader": {}, "worker": {"size": 1},
                                   "lifecycle": partition}), namespace))
    assert "PartitionAboveReplicas:" in exc.message, exc.message

    # OME's reasons for a malformed migration request
    exc = await rejected(kube.create(INFERENCE_SERVICES, _bad_migration(namespace, "mig"),
                                     namespace))
    assert "UnsupportedSchemaVersion: schemaVersion must be \"v1\"" in exc.message, exc.message
    body = isvc_body(namespace, "mig")
    body["metadata"]["annotations"] = {MIGRATION_KEY: json.dumps(
        {"schemaVersion": "v1", "component": "engine", "instance": -1})}
    exc = await rejected(kube.create(INFERENCE_SERVICES, body, namespace))
    assert "MigrationRequestRejected: instance must be an integer >= 0" in exc.message

    # warnings admit: no runtime (nor model to select one for), more Instances than decoded
    big = isvc_body(namespace, "big", engine={"minReplicas": 1, "maxReplicas": 20_001,
                                              "leader": {}, "worker": {"size": 1}})
    del big["spec"]["model"]
    warnings = await _write_with_warnings(kube, "POST", INFERENCE_SERVICES.path(namespace), big)
    assert any("RuntimeNotNamed: spec.runtime names no runtime and spec.model names no "
               "model to select one for" in w for w in warnings), warnings
    assert any("TooManyInstances: spec.engine.maxReplicas is 20001" in w for w in warnings), \
        warnings


async def test_bad_inference_replica_input_gets_a_clear_answer_at_apply_time(
    kube: KubeClient, namespace: str, webhook: WebhookServer
) -> None:
    await _webhook_in_force(kube, namespace)
    exc = await rejected(kube.create(INFERENCE_REPLICAS, replica_body(
        namespace, "surge", lifecycle={"updateStrategy": {"rollingUpdate": {
            "maxUnavailable": "lots"}}}), namespace))
    assert "InvalidRollingUpdatePercent: spec.lifecycle.updateStrategy.rollingUpdate." \
        "maxUnavailable is 'lots'" in exc.message, exc.message
    exc = await rejected(kube.create(INFERENCE_REPLICAS, replica_body(
        namespace, "part", replicas=2, pacing={"partition": 3}), namespace))
    assert "PartitionAboveReplicas: spec.pacing.partition is 3, above spec.replicas (2)" in \
        exc.message, exc.message

    warnings = await _write_with_warnings(kube, "POST", INFERENCE_REPLICAS.path(namespace),
                                          replica_body(namespace, "solo", replicas=20_001))
    assert any("TooManyInstances: spec.replicas is 20001" in w for w in warnings), warnings

    # annotations, as `kubectl annotate` writes them (an annotation-only update)
    exc = await rejected(kube.patch(INFERENCE_REPLICAS, "solo", {"metadata": {"annotations": {
        "ome.io/release-held-revision": ""}}}, namespace))
    assert "InvalidReleaseHeldRevision: ome.io/release-held-revision is empty" in exc.message
    value = '{"schemaVersion": "v2", "instance": 0}'
    exc = await rejected(kube.patch(INFERENCE_REPLICAS, "solo", {"metadata": {"annotations": {
        MIGRATION_KEY: value}}}, namespace))
    on_replica = exc.message
    service = isvc_body(namespace, "svc")
    service["metadata"]["annotations"] = {MIGRATION_KEY: value}
    on_service = (await rejected(kube.create(INFERENCE_SERVICES, service, namespace))).message
    expected = f"InvalidMigrationRequest: migration request {MIGRATION_KEY}: " \
        'UnsupportedSchemaVersion: schemaVersion must be "v1", got \'v2\''
    assert expected in on_replica and expected in on_service, (on_replica, on_service)
    good = json.dumps({"schemaVersion": "v1", "instance": 0})
    await kube.patch(INFERENCE_REPLICAS, "solo", {"metadata": {"annotations": {
        MIGRATION_KEY: good}}}, namespace)

    # rollbackToRevision is looked up among the replica's ControllerRevisions
    await kube.create(CONTROLLER_REVISIONS, {
        "apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": "solo-5f7c9d2a1b", "namespace": namespace,
                     "labels": {"ome.io/inferencereplica": "solo"}},
        "revision": 1, "data": {}}, namespace)
    path = INFERENCE_REPLICAS.path(namespace, "solo")
    warnings = await _write_with_warnings(
        kube, "PATCH", path, {"spec": {"pacing": {"rollbackToRevision": "solo-0000000000"}}},
        "application/merge-patch+json")
    assert any("RollbackRevisionNotFound: spec.pacing.rollbackToRevision 'solo-0000000000' "
               "names no stored revision" in w and "Stored: solo-5f7c9d2a1b" in w
               for w in warnings), warnings
    warnings = await _write_with_warnings(
        kube, "PATCH", path, {"spec": {"pacing": {"rollbackToRevision": "5f7c9d2a1b"}}},
        "application/merge-patch+json")
    assert not any("RollbackRevisionNotFound" in w for w in warnings), warnings


async def test_a_standalone_replica_may_not_take_an_inference_services_names(
    kube: KubeClient, namespace: str, webhook: WebhookServer
) -> None:
    """OME's rule (guide "Run a standalone InferenceReplica", ome-docs@8c764098): the name
    of an existing InferenceService, or one plus -engine/-decoder/-router, is refused."""
    await _webhook_in_force(kube, namespace)
    await kube.create(INFERENCE_SERVICES, isvc_body(namespace, "llama"), namespace)
    for name in ("llama", "llama-decoder"):
        exc = await rejected(kube.create(INFERENCE_REPLICAS, replica_body(namespace, name),
                                         namespace))
        assert "NameCollidesWithInferenceService: InferenceReplica name " \
            f"{name!r} collides with InferenceService 'llama'" in exc.message, exc.message
    await kube.create(INFERENCE_REPLICAS, replica_body(namespace, "llama-pool"), namespace)

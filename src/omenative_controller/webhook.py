"""The optional validating admission webhook: what CEL in the CRDs and the policies cannot check.

The CRDs' CEL rules (``config/crd/``) and the ValidatingAdmissionPolicies
(``config/admission/``) reject most bad input without a webhook (docs/admission.md). This
HTTPS server handles ``admission.k8s.io/v1`` AdmissionReviews for the rest, with the pure
validators of the core:

* ``POST /validate-inferenceservice`` (create, update): ``validate_isvc`` with the runtime
  the InferenceService names (leader/worker pairing over the runtime, ``readyPolicy: None``
  on a multi-pod OMENative component, a malformed migration request, scale-to-zero, PDB,
  lifecycle values) and ``validate_rollout`` with the old object (ratcheted rules, lockstep,
  pairing-protocol changes); its warnings, ``isvc_warnings`` (no runtime named, replica
  bounds above ``maxDecodedInstances``) and ``deploymentStrategy`` on an OMENative
  component come back as admission warnings.
* ``POST /validate-inferencereplica`` (create, update): ``validate_replica_annotations`` on
  every replica (an empty ``ome.io/release-held-revision``; migration requests on a
  standalone one, by the same function as on an InferenceService);
  ``validate_standalone_replica`` when a standalone replica's spec changes (budgets,
  partition, name lengths, the rest of the core's spec checks) and ``replica_warnings``
  (more Instances than are decoded, a ``rollbackToRevision`` that names no stored
  ControllerRevision: ``revision_lookup`` lists them). A new standalone replica whose name
  an InferenceService's projected replicas would share (``name_collision``; OME's rule) is
  refused: ``service_lookup`` GETs the InferenceServices it could collide with.

A denial carries OME's reason in ``status.reason`` and a message that starts with it. An
update that leaves ``spec`` and the annotations as they were (finalizers, labels, owner
references) is always admitted, so the manager can tear down an object admitted earlier.
Nothing here raises into aiohttp: malformed input is a clear denial, a validator bug is an
admission with a warning (and a log line), never a 500.

``review_response`` is the pure request-to-response function; ``serve_webhook`` runs it
behind TLS (``runtime_lookup`` fetches the named runtime; without one, runtimes are unknown
and the checks that need them are skipped with a warning; ``revision_lookup`` lists a
replica's ControllerRevisions, and without it the rollback check is skipped).
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import structlog
from aiohttp import web
from attrs import frozen

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import CONTROLLER_REVISIONS, Resource
from omenative_controller.webhook_sources import SourcesLookup
from omenative_core.codec import CodecError
from omenative_core.labels import LABEL_REPLICA
from omenative_core.rollout.validate import validate_rollout
from omenative_core.service.admission_models import AdmissionSources, model_admission
from omenative_core.service.model import InferenceService, ServingRuntime, isvc_from_json
from omenative_core.service.modes import MODE_OMENATIVE, declared_mode, explain_mode
from omenative_core.service.rejection import Rejection
from omenative_core.service.runtime_preset import decode_runtime as _runtime_from_json
from omenative_core.service.validate import (
    isvc_warnings,
    validate_isvc,
    validate_isvc_partitions,
)
from omenative_core.service.validate_autoscaler import policy_ref_rejections
from omenative_core.service.validate_lws import lws_variable_warnings
from omenative_core.service.validate_replica import (
    colliding_service_names,
    name_collision,
    replica_warnings,
    validate_replica_annotations,
    validate_standalone_replica,
)

__all__ = [
    "ISVC_PATH",
    "REPLICA_PATH",
    "RevisionLookup",
    "RuntimeLookup",
    "ServiceLookup",
    "Verdict",
    "WebhookServer",
    "kube_revision_lookup",
    "kube_runtime_lookup",
    "kube_service_lookup",
    "review_response",
    "serve_webhook",
    "validate_request",
]

log = structlog.get_logger("omenative.webhook")

ISVC_PATH: Final = "/validate-inferenceservice"
"""The path of the InferenceService webhook."""
REPLICA_PATH: Final = "/validate-inferencereplica"
"""The path of the InferenceReplica webhook."""

RuntimeLookup = Callable[[InferenceService], Awaitable[ServingRuntime | None]]
"""Fetch the (Cluster)ServingRuntime an InferenceService names; None when there is none."""

RevisionLookup = Callable[[str, str], Awaitable[Sequence[str] | None]]
"""List the ControllerRevision names of InferenceReplica (namespace, name); None when the
list failed (the ``rollbackToRevision`` check is then skipped)."""

ServiceLookup = Callable[[str, Sequence[str]], Awaitable[Sequence[str] | None]]
"""Which of the InferenceService names exist in a namespace; None when a read failed (the
name-collision check is then skipped)."""

_MAX_WARNING: Final = 240
_RUNTIME_REASONS: Final = frozenset({"LeaderRequiresWorker", "WorkerRequiresLeader"})
_SERVING_RUNTIMES: Final = Resource("ome.io", "v1beta1", "servingruntimes", "ServingRuntime")
_INFERENCE_SERVICES: Final = Resource("ome.io", "v1beta1", "inferenceservices",
                                      "InferenceService")
_CLUSTER_SERVING_RUNTIMES: Final = Resource(
    "ome.io", "v1beta1", "clusterservingruntimes", "ClusterServingRuntime", namespaced=False
)


@frozen
class Verdict:
    """What admission answers: allowed or OME's reason and message; warnings either way."""

    allowed: bool
    reason: str = ""
    message: str = ""
    warnings: tuple[str, ...] = ()


def _deny(reason: str, message: str, warnings: tuple[str, ...] = ()) -> Verdict:
    return Verdict(False, reason, message, warnings)


def _prefixed(reason: str, text: str) -> str:
    return text if text.startswith(f"{reason}:") else f"{reason}: {text}"


def _warning(text: str) -> str:
    return text if len(text) <= _MAX_WARNING else text[: _MAX_WARNING - 3] + "..."


# ---------------------------------------------------------------------------- InferenceService


def _budgets(isvc: InferenceService | None) -> dict[str, tuple[Any, Any]]:
    """Each component's own ``lifecycle.updateStrategy.rollingUpdate`` budgets."""
    out: dict[str, tuple[Any, Any]] = {}
    if isvc is None:
        return out
    for c in isvc.declared_components:
        comp = isvc.component(c)
        lc = comp.lifecycle if comp is not None else None
        strategy = lc.get("updateStrategy") if isinstance(lc, Mapping) else None
        rolling = strategy.get("rollingUpdate") if isinstance(strategy, Mapping) else None
        if isinstance(rolling, Mapping):
            out[c] = (rolling.get("maxSurge"), rolling.get("maxUnavailable"))
    return out


def _rollout_findings(
    new: InferenceService, old: InferenceService | None
) -> tuple[list[str], list[str], str]:
    """(error messages, warning messages, first error reason) of ``spec.rollout``."""
    spec, old_spec = new.spec.get("rollout"), old.spec.get("rollout") if old else None
    if spec is None:
        return [], [], ""
    found = validate_rollout(
        spec,
        old_spec,
        {c: declared_mode(new, c) == MODE_OMENATIVE for c in new.declared_components},
        annotations=new.annotations,
        component_budgets=_budgets(new),
        old_component_budgets=_budgets(old) if old is not None else None,
    )
    errors = [_prefixed(r.reason, f"{r.path}: {r.message}") for r in found if not r.warning]
    warns = [_prefixed(r.reason, f"{r.path}: {r.message}") for r in found if r.warning]
    first = next((r.reason for r in found if not r.warning), "")
    return errors, warns, first


def _isvc_verdict(
    request: Mapping[str, Any], runtime: ServingRuntime | None,
    sources: AdmissionSources | None = None,
) -> Verdict:
    raw = request.get("object")
    if not isinstance(raw, Mapping):
        return _deny("InvalidSpec", "InvalidSpec: the request carries no InferenceService object")
    raw = _with_namespace(raw, request)
    try:
        new = isvc_from_json(raw)
    except CodecError as exc:
        return _deny("InvalidSpec", f"InvalidSpec: {exc}")
    old: InferenceService | None = None
    raw_old = request.get("oldObject")
    if request.get("operation") == "UPDATE" and isinstance(raw_old, Mapping):
        try:
            old = isvc_from_json(_with_namespace(raw_old, request))
        except CodecError:
            old = None  # stored before these rules: judge the new object alone
        if old is not None and old.spec == new.spec and old.annotations == new.annotations:
            return Verdict(True)  # metadata only: finalizers, labels, owner references
    warnings = [r.message for r in isvc_warnings(new, old)]
    warnings += [r.message for r in lws_variable_warnings(new, runtime)]
    rejections = [*validate_isvc(new, old, runtime=runtime), *validate_isvc_partitions(new, old)]
    if new.runtime_ref is not None and runtime is None:
        rejections = [r for r in rejections if r.reason not in _RUNTIME_REASONS]
        warnings.append(
            f"RuntimeNotFound: {new.runtime_ref.kind} {new.runtime_ref.name} was not found: "
            "leader/worker pairing was not checked against it"
        )
    if sources is not None:  # OME's model and runtime lookups (admission_models)
        found = model_admission(new, sources.runtimes, sources.models)
        found += policy_ref_rejections(new, sources.policy_feature)
        rejections += [r for r in found if not r.warning]
        warnings += [r.message for r in found if r.warning]
    errors = [r.message for r in rejections]
    reason = rejections[0].reason if rejections else ""
    roll_errors, roll_warnings, roll_reason = _rollout_findings(new, old)
    errors += roll_errors
    reason = reason or roll_reason
    warnings += roll_warnings
    for c in new.declared_components:
        comp = new.component(c)
        if comp is not None and comp.raw.get("deploymentStrategy") is not None and \
                explain_mode(new, runtime, c).mode == MODE_OMENATIVE:
            warnings.append(f"{c}.deploymentStrategy is ignored under OMENative; "
                            f"use {c}.lifecycle.updateStrategy")
    shown = tuple(_warning(w) for w in warnings)
    if errors:
        return _deny(reason, "; ".join(errors), shown)
    return Verdict(True, warnings=shown)


def _with_namespace(raw: Mapping[str, Any], request: Mapping[str, Any]) -> Mapping[str, Any]:
    """``raw`` with ``metadata.namespace`` from the request when the object lacks it."""
    meta = raw.get("metadata")
    namespace = request.get("namespace")
    if isinstance(meta, Mapping) and not meta.get("namespace") and isinstance(namespace, str):
        return {**raw, "metadata": {**meta, "namespace": namespace}}
    return raw


# ---------------------------------------------------------------------------- InferenceReplica


def _projected(obj: Mapping[str, Any]) -> bool:
    spec = obj.get("spec")
    if isinstance(spec, Mapping) and spec.get("parentRef") is not None:
        return True
    meta = obj.get("metadata")
    owners = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    return isinstance(owners, list) and any(
        isinstance(o, Mapping) and o.get("kind") == "InferenceService" for o in owners
    )


def _replica_verdict(
    request: Mapping[str, Any], revisions: Sequence[str] | None = None,
    services: Sequence[str] | None = None,
) -> Verdict:
    obj = request.get("object")
    if not isinstance(obj, Mapping) or not isinstance(obj.get("spec"), Mapping):
        return _deny("InvalidSpec", "InvalidSpec: the request carries no InferenceReplica spec")
    raw_old = request.get("oldObject")
    old = raw_old if request.get("operation") == "UPDATE" and isinstance(raw_old, Mapping) \
        else None
    spec_changed = old is None or old.get("spec") != obj.get("spec")
    if not spec_changed and _annotations_of(old) == _annotations_of(obj):
        return Verdict(True)  # metadata only: finalizers, labels, owner references
    projected = _projected(obj)
    rejections = validate_replica_annotations(obj, old, projected=projected)
    if projected:  # the spec is rendered and checked by the controller; the policy guards it
        return _verdict(rejections, [])
    if spec_changed:
        rejections += validate_standalone_replica(obj, old)
    name = (obj.get("metadata") or {}).get("name")
    collision = name_collision(name, services) if old is None and services and \
        isinstance(name, str) else None
    if collision is not None:
        rejections.append(collision)
    return _verdict(rejections, replica_warnings(obj, old, revisions))


def _annotations_of(obj: Mapping[str, Any] | None) -> object:
    meta = obj.get("metadata") if obj is not None else None
    return meta.get("annotations") if isinstance(meta, Mapping) else None


def _verdict(rejections: list[Rejection], warnings: list[Rejection]) -> Verdict:
    shown = tuple(_warning(w.message) for w in warnings)
    if rejections:
        return _deny(rejections[0].reason, "; ".join(r.message for r in rejections), shown)
    return Verdict(True, warnings=shown)


# ---------------------------------------------------------------------------- reviews


def validate_request(
    request: Mapping[str, Any],
    *,
    runtime: ServingRuntime | None = None,
    revisions: Sequence[str] | None = None,
    services: Sequence[str] | None = None,
    sources: AdmissionSources | None = None,
) -> Verdict:
    """The verdict on one AdmissionRequest (its ``kind`` picks the checks); pure.

    Operations other than CREATE and UPDATE, and kinds other than InferenceService and
    InferenceReplica, are admitted. A validator that fails is an admission with a warning.
    ``revisions``: the InferenceReplica's ControllerRevision names, when the caller listed
    them (for the ``rollbackToRevision`` warning); ``services``: the existing
    InferenceServices a new standalone replica's name could collide with; ``sources``: the
    runtimes and models an InferenceService may use (OME's model and runtime checks).
    """
    if request.get("operation") not in ("CREATE", "UPDATE"):
        return Verdict(True)
    kind = request.get("kind")
    name = kind.get("kind") if isinstance(kind, Mapping) else None
    try:
        if name == "InferenceService":
            return _isvc_verdict(request, runtime, sources)
        if name == "InferenceReplica":
            return _replica_verdict(request, revisions, services)
    except Exception as exc:  # a validator bug must not lock users out
        log.exception("webhook.validator_failed", kind=name, error=str(exc))
        return Verdict(True, warnings=(_warning(f"omenative webhook: not validated ({exc!r})"),))
    return Verdict(True)


def review_response(
    review: object,
    *,
    runtime: ServingRuntime | None = None,
    revisions: Sequence[str] | None = None,
    services: Sequence[str] | None = None,
    sources: AdmissionSources | None = None,
) -> dict[str, Any]:
    """The AdmissionReview (``admission.k8s.io/v1``) answering ``review``; pure, never raises.

    A review without a request object is denied with reason ``BadRequest``. ``runtime`` is
    the runtime the InferenceService names, ``revisions`` the InferenceReplica's stored
    ControllerRevisions, when the caller fetched them.
    """
    request = review.get("request") if isinstance(review, Mapping) else None
    if not isinstance(request, Mapping):
        verdict = _deny("BadRequest", "BadRequest: not an AdmissionReview with a request")
        uid: object = ""
    else:
        uid = request.get("uid", "")
        verdict = validate_request(request, runtime=runtime, revisions=revisions,
                                   services=services, sources=sources)
    response: dict[str, Any] = {"uid": uid if isinstance(uid, str) else "",
                                "allowed": verdict.allowed}
    if not verdict.allowed:
        response["status"] = {"code": 403, "reason": verdict.reason,
                              "message": verdict.message}
    if verdict.warnings:
        response["warnings"] = list(verdict.warnings)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": response}


def _request_isvc(review: object) -> InferenceService | None:
    """The InferenceService under review, when it decodes (for the runtime lookup)."""
    request = review.get("request") if isinstance(review, Mapping) else None
    if not isinstance(request, Mapping) or request.get("operation") not in ("CREATE", "UPDATE"):
        return None
    kind = request.get("kind")
    obj = request.get("object")
    if not isinstance(kind, Mapping) or kind.get("kind") != "InferenceService" or \
            not isinstance(obj, Mapping):
        return None
    try:
        return isvc_from_json(_with_namespace(obj, request))
    except CodecError:
        return None


def kube_runtime_lookup(client: KubeClient) -> RuntimeLookup:
    """A ``RuntimeLookup`` that GETs ``spec.runtime`` (None when absent or unreadable)."""

    async def lookup(isvc: InferenceService) -> ServingRuntime | None:
        ref = isvc.runtime_ref
        if ref is None:
            return None
        try:
            if ref.kind == "ServingRuntime":
                raw = await client.get(_SERVING_RUNTIMES, ref.name, isvc.namespace)
            else:
                raw = await client.get(_CLUSTER_SERVING_RUNTIMES, ref.name)
            return _runtime_from_json(raw)
        except (ApiError, CodecError) as exc:
            log.info("webhook.runtime_unavailable", runtime=ref.name, error=str(exc))
            return None

    return lookup


def _rollback_target(review: object) -> tuple[str, str] | None:
    """(namespace, name) of an InferenceReplica write that sets ``rollbackToRevision``."""
    request = review.get("request") if isinstance(review, Mapping) else None
    if not isinstance(request, Mapping) or request.get("operation") not in ("CREATE", "UPDATE"):
        return None
    kind, obj = request.get("kind"), request.get("object")
    if not isinstance(kind, Mapping) or kind.get("kind") != "InferenceReplica" or \
            not isinstance(obj, Mapping):
        return None
    spec, meta = obj.get("spec"), obj.get("metadata")
    pacing = spec.get("pacing") if isinstance(spec, Mapping) else None
    if not isinstance(pacing, Mapping) or not pacing.get("rollbackToRevision"):
        return None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    namespace = request.get("namespace")
    if not isinstance(name, str) or not isinstance(namespace, str):
        return None
    return namespace, name


def _new_standalone(review: object) -> tuple[str, str] | None:
    """(namespace, name) of a standalone InferenceReplica being created."""
    request = review.get("request") if isinstance(review, Mapping) else None
    if not isinstance(request, Mapping) or request.get("operation") != "CREATE":
        return None
    kind, obj = request.get("kind"), request.get("object")
    if not isinstance(kind, Mapping) or kind.get("kind") != "InferenceReplica" or \
            not isinstance(obj, Mapping) or _projected(obj):
        return None
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    namespace = request.get("namespace")
    if not isinstance(name, str) or not isinstance(namespace, str):
        return None
    return namespace, name


def kube_service_lookup(client: KubeClient) -> ServiceLookup:
    """A ``ServiceLookup`` that GETs each InferenceService by name (None on a read error)."""

    async def lookup(namespace: str, names: Sequence[str]) -> Sequence[str] | None:
        found: list[str] = []
        for name in names:
            try:
                await client.get(_INFERENCE_SERVICES, name, namespace)
            except ApiError as exc:
                if exc.not_found:
                    continue
                log.info("webhook.services_unavailable", name=name, error=str(exc))
                return None
            found.append(name)
        return found

    return lookup


def kube_revision_lookup(client: KubeClient) -> RevisionLookup:
    """A ``RevisionLookup`` that LISTs the replica's ControllerRevisions by its
    ``ome.io/inferencereplica`` label (None when the list fails)."""

    async def lookup(namespace: str, name: str) -> Sequence[str] | None:
        try:
            page = await client.list(CONTROLLER_REVISIONS, namespace,
                                     label_selector=f"{LABEL_REPLICA}={name}")
        except ApiError as exc:
            log.info("webhook.revisions_unavailable", replica=name, error=str(exc))
            return None
        items = page.get("items") or ()
        return [str(i["metadata"]["name"]) for i in items
                if isinstance(i, Mapping) and isinstance(i.get("metadata"), Mapping)]

    return lookup


# ---------------------------------------------------------------------------- server


class WebhookServer:
    """A running webhook: its bound ``port``, ``url(path)`` and ``stop()``."""

    def __init__(self, runner: web.AppRunner, site: web.TCPSite, host: str, port: int) -> None:
        self._runner = runner
        self._site = site
        self.host = host
        #: the bound port (the real one when 0 was asked)
        self.port = port

    def url(self, path: str = ISVC_PATH) -> str:
        """``https://host:port/path``."""
        return f"https://{self.host}:{self.port}{path}"

    async def stop(self) -> None:
        """Stop listening and close open connections."""
        await self._runner.cleanup()


def _app(
    runtime_lookup: RuntimeLookup | None, revision_lookup: RevisionLookup | None,
    service_lookup: ServiceLookup | None, on_answer: Callable[[str, int], None] | None = None,
    sources_lookup: SourcesLookup | None = None,
) -> web.Application:
    async def handle(req: web.Request) -> web.Response:
        try:
            review: Any = json.loads(await req.read())
        except (ValueError, UnicodeDecodeError):
            return web.json_response(review_response(None), status=400)
        runtime: ServingRuntime | None = None
        revisions: Sequence[str] | None = None
        services: Sequence[str] | None = None
        sources: AdmissionSources | None = None
        isvc = _request_isvc(review)
        replica = _rollback_target(review)
        created = _new_standalone(review)
        try:  # the lookups are best effort
            if isvc is not None and runtime_lookup is not None:
                runtime = await runtime_lookup(isvc)
            if isvc is not None and sources_lookup is not None:
                sources = await sources_lookup(isvc, runtime)  # reuses the runtime read
            if replica is not None and revision_lookup is not None:
                revisions = await revision_lookup(*replica)
            if created is not None and service_lookup is not None:
                services = await service_lookup(created[0],
                                                colliding_service_names(created[1]))
        except Exception as exc:
            log.info("webhook.lookup_failed", error=str(exc))
        return web.json_response(review_response(review, runtime=runtime, revisions=revisions,
                                                 services=services, sources=sources))

    async def healthz(_req: web.Request) -> web.Response:
        return web.Response(text="ok")

    @web.middleware
    async def count(request: web.Request,
                    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
                    ) -> web.StreamResponse:
        code = 500  # what aiohttp answers for an exception a handler let through
        try:
            resp: web.StreamResponse = await handler(request)
            code = resp.status
            return resp
        except web.HTTPException as exc:
            code = exc.status
            raise
        finally:
            if on_answer is not None and request.path != "/healthz":
                on_answer(request.path, code)

    app = web.Application(client_max_size=8 * 1024 * 1024, middlewares=[count])
    app.router.add_post(ISVC_PATH, handle)
    app.router.add_post(REPLICA_PATH, handle)
    app.router.add_get("/healthz", healthz)
    return app


async def serve_webhook(
    host: str,
    port: int,
    cert_file: str,
    key_file: str,
    *,
    runtime_lookup: RuntimeLookup | None = None,
    revision_lookup: RevisionLookup | None = None,
    service_lookup: ServiceLookup | None = None,
    on_answer: Callable[[str, int], None] | None = None,
    sources_lookup: SourcesLookup | None = None,
) -> WebhookServer:
    """Start the webhook on ``host:port`` (0: any free port) with the given TLS key pair.

    ``runtime_lookup`` fetches the runtime an InferenceService names; ``revision_lookup``
    lists an InferenceReplica's ControllerRevisions (for ``rollbackToRevision``);
    ``service_lookup`` finds the InferenceServices a new standalone replica collides with;
    ``on_answer(path, code)`` sees every admission answer (metrics); ``sources_lookup``
    reads the runtimes and models for OME's model and runtime checks.
    """
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    runner = web.AppRunner(_app(runtime_lookup, revision_lookup, service_lookup, on_answer,
                                sources_lookup),
                           access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=context)
    await site.start()
    addresses = runner.addresses
    bound = int(addresses[0][1]) if addresses else port
    log.info("webhook.started", host=host, port=bound)
    return WebhookServer(runner, site, host, bound)

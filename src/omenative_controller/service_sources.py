"""What InferenceServices render from, watched: runtimes and models.

``Sources`` holds four list+watch caches: ServingRuntimes, ClusterServingRuntimes, BaseModels
and ClusterBaseModels (their CRDs may be absent; the ISVC controller runs the runtime caches
only while discovery lists them, and ``Sources.served`` does the same for the model caches,
always). While neither model CRD is served, ``all_models`` is None and ``spec.model`` is not
resolved (a cluster without OME's model CRDs renders as before); once one is, a model an
ISVC names must exist. A change queues the InferenceServices it can alter:

* a runtime: those naming it in ``spec.runtime``, and those that name a model and no
  runtime (OME's auto-selection may now pick another one, or find one at last);
* a runtime revision (a ControllerRevision labelled ``ome.io/runtime-of`` in OME's
  namespace): those pinning that runtime;
* a model: those naming it in ``spec.model`` (a BaseModel only in its own namespace), so an
  InferenceService blocked with ``ModelNotFound`` renders as soon as its model exists.

The Warning Events a pass asks for when a model or runtime is missing are the core's
(``omenative_core.service.plan_warnings``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import structlog

from omenative_controller.kube.apiwatch import ServedInformers
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.informer import Informer
from omenative_controller.kube.resources import CONTROLLER_REVISIONS, Resource
from omenative_controller.runtime_status import RuntimeStatusWriter
from omenative_core.codec import CodecError
from omenative_core.service import (
    AcceleratorClass,
    BaseModel,
    RuntimeRevision,
    ServingRuntime,
    accelerator_class_from_json,
    basemodel_from_json,
    decode_runtime,
    runtime_revision_from_json,
)
from omenative_core.service.runtime_pin import LABEL_RUNTIME_OF

__all__ = [
    "ACCELERATOR_CLASSES",
    "BASE_MODELS",
    "CLUSTER_BASE_MODELS",
    "CLUSTER_SERVING_RUNTIMES",
    "SERVING_RUNTIMES",
    "Sources",
]

log = structlog.get_logger("omenative.isvc")

SERVING_RUNTIMES: Final = Resource("ome.io", "v1beta1", "servingruntimes", "ServingRuntime")
"""The namespaced ServingRuntime resource."""
CLUSTER_SERVING_RUNTIMES: Final = Resource(
    "ome.io", "v1beta1", "clusterservingruntimes", "ClusterServingRuntime", namespaced=False
)
"""The cluster-scoped ClusterServingRuntime resource."""
BASE_MODELS: Final = Resource("ome.io", "v1beta1", "basemodels", "BaseModel")
"""The namespaced BaseModel resource."""
CLUSTER_BASE_MODELS: Final = Resource(
    "ome.io", "v1beta1", "clusterbasemodels", "ClusterBaseModel", namespaced=False
)
"""The cluster-scoped ClusterBaseModel resource."""
ACCELERATOR_CLASSES: Final = Resource(
    "ome.io", "v1beta1", "acceleratorclasses", "AcceleratorClass", namespaced=False
)
"""The cluster-scoped AcceleratorClass resource."""


def _spec(isvc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = (isvc.get("spec") or {}).get(key)
    return value if isinstance(value, Mapping) else {}


class Sources:
    """The runtime and model caches, and which InferenceServices a change concerns.

    ``isvcs``: the InferenceService cache; ``enqueue``: queues one ISVC key.
    """

    def __init__(
        self,
        client: KubeClient,
        namespaces: Sequence[str] | None,
        isvcs: Informer[JSON],
        enqueue: Callable[[str], None],
        *,
        interval: float = 30.0,
        revision_namespace: str = "ome",
    ) -> None:
        self.client = client
        self.isvcs = isvcs
        self.enqueue = enqueue
        self.revision_namespace = revision_namespace
        self.revisions: Informer[JSON] = Informer(
            client, CONTROLLER_REVISIONS, dict, namespaces=(revision_namespace,),
            label_selector=LABEL_RUNTIME_OF, on_change=self._revision_changed)
        self.runtimes: Informer[JSON] = Informer(
            client, SERVING_RUNTIMES, dict, namespaces=namespaces,
            on_change=self._runtime_changed)
        self.cluster_runtimes: Informer[JSON] = Informer(
            client, CLUSTER_SERVING_RUNTIMES, dict, on_change=self._runtime_changed)
        self.models: Informer[JSON] = Informer(
            client, BASE_MODELS, dict, namespaces=namespaces, on_change=self._model_changed)
        self.cluster_models: Informer[JSON] = Informer(
            client, CLUSTER_BASE_MODELS, dict, on_change=self._model_changed)
        self.accelerators: Informer[JSON] = Informer(
            client, ACCELERATOR_CLASSES, dict, on_change=self._accelerator_changed)
        self.on_revision: Callable[[], None] = lambda: None
        """Called on every runtime-revision change (the revision collector's wake-up)."""
        self.on_source: Callable[[str, str | None, str], None] = lambda _k, _ns, _n: None
        """Called on every runtime (``"runtime"``) and model (``"model"``) change with its
        namespace (None: cluster-scoped) and name: the manager queues the standalone
        InferenceReplicas that render from it (``replica_refs.referencing``)."""
        self.status_writer = RuntimeStatusWriter(
            client, ((self.runtimes, SERVING_RUNTIMES),
                     (self.cluster_runtimes, CLUSTER_SERVING_RUNTIMES)))
        """Writes the runtimes' inheritance status (the controller runs it)."""
        self.served = ServedInformers(
            client, (self.models, self.cluster_models, self.accelerators), interval=interval)
        """Runs the model and accelerator caches while discovery lists their CRDs (polled)."""

    @property
    def runtime_informers(self) -> tuple[Informer[JSON], ...]:
        """The two runtime caches (the controller runs them)."""
        return (self.runtimes, self.cluster_runtimes)

    def all_runtime_revisions(self) -> list[RuntimeRevision]:
        """The runtime revisions in OME's namespace (pinned runtimes' snapshots)."""
        found = (runtime_revision_from_json(obj) for _key, obj in self.revisions.items())
        return [r for r in found if r is not None]

    async def create_revisions(self, bodies: Sequence[Mapping[str, Any]]) -> None:
        """Store new runtime revisions in OME's namespace (one that exists is kept: a
        revision is immutable and its name is its content's hash)."""
        for body in bodies:
            try:
                created = await self.client.create(CONTROLLER_REVISIONS, body,
                                                   self.revision_namespace)
            except ApiError as exc:
                if not exc.already_exists:
                    raise
                continue
            self.revisions.upsert_if_newer(created)

    def _revision_changed(self, namespace: str | None, old: JSON | None,
                          new: JSON | None) -> None:
        self.on_revision()
        obj = new if new is not None else old
        assert obj is not None
        runtime = (obj["metadata"].get("labels") or {}).get(LABEL_RUNTIME_OF)
        for key, isvc in self.isvcs.items():
            ref = _spec(isvc, "runtime")
            if ref.get("autoSync") is False and ref.get("name") == runtime:
                self.enqueue(key)

    def all_runtimes(self) -> list[ServingRuntime]:
        """Every cached runtime that decodes (a bad one is logged and left out)."""
        out: list[ServingRuntime] = []
        for informer, kind in ((self.runtimes, "ServingRuntime"),
                               (self.cluster_runtimes, "ClusterServingRuntime")):
            for _key, obj in informer.items():
                body = dict(obj)
                body.setdefault("kind", kind)
                try:
                    out.append(decode_runtime(body))
                except CodecError as exc:
                    log.info("isvc.bad_runtime", kind=kind, name=obj["metadata"].get("name"),
                             error=str(exc))
        return out

    def all_models(self) -> list[BaseModel] | None:
        """Every cached BaseModel and ClusterBaseModel that decodes (a bad one is logged and
        left out, so an ISVC naming it reports ``ModelNotFound``); None while neither CRD
        is served."""
        kinds = [(informer, kind) for informer, kind in
                 ((self.models, "BaseModel"), (self.cluster_models, "ClusterBaseModel"))
                 if self.served.serves(informer.name)]
        if not kinds:
            return None
        out: list[BaseModel] = []
        for informer, kind in kinds:
            for _key, obj in informer.items():
                try:
                    out.append(basemodel_from_json({**obj, "kind": kind}))
                except CodecError as exc:
                    log.info("isvc.bad_model", kind=kind, name=obj["metadata"].get("name"),
                             error=str(exc))
        return out

    def models_synced(self) -> bool:
        """Discovery has answered and each served model cache has listed (so a model not
        in them does not exist)."""
        if not self.served.checked.is_set():
            return False
        return all(i.synced.is_set() for i in (self.models, self.cluster_models)
                   if self.served.serves(i.name))

    def all_accelerator_classes(self) -> list[AcceleratorClass]:
        """Every cached AcceleratorClass that decodes (a bad one is logged and left out)."""
        out: list[AcceleratorClass] = []
        if not self.served.serves(self.accelerators.name):
            return out
        for _key, obj in self.accelerators.items():
            try:
                out.append(accelerator_class_from_json(obj))
            except CodecError as exc:
                log.info("isvc.bad_accelerator_class", name=obj["metadata"].get("name"),
                         error=str(exc))
        return out

    def _accelerator_changed(self, namespace: str | None, old: JSON | None,
                             new: JSON | None) -> None:
        for key, isvc in self.isvcs.items():  # rare: any ISVC naming a class may use it
            if _spec(isvc, "acceleratorSelector") or _spec(isvc, "engine").get(
                    "acceleratorOverride") or _spec(isvc, "decoder").get("acceleratorOverride"):
                self.enqueue(key)

    def _runtime_changed(self, namespace: str | None, old: JSON | None, new: JSON | None) -> None:
        obj = new if new is not None else old
        assert obj is not None
        self.status_writer.mark()
        name = obj["metadata"]["name"]
        self.on_source("runtime", namespace, name)
        kind = "ClusterServingRuntime" if namespace is None else "ServingRuntime"
        for key, isvc in self.isvcs.items():
            if namespace is not None and isvc["metadata"].get("namespace") != namespace:
                continue
            ref = _spec(isvc, "runtime")
            if not ref.get("name"):
                if _spec(isvc, "model").get("name"):  # auto-selected: any runtime may win
                    self.enqueue(key)
                continue
            if ref.get("name") == name and (ref.get("kind") or "ClusterServingRuntime") == kind:
                self.enqueue(key)

    def _model_changed(self, namespace: str | None, old: JSON | None, new: JSON | None) -> None:
        obj = new if new is not None else old
        assert obj is not None
        name = obj["metadata"]["name"]
        self.on_source("model", namespace, name)
        for key, isvc in self.isvcs.items():
            if namespace is not None and isvc["metadata"].get("namespace") != namespace:
                continue
            if _spec(isvc, "model").get("name") == name:
                self.enqueue(key)

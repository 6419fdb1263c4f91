"""The InferenceService plan's types: the settings rendering reads, what it returns, and the
names it writes (CRDs it looks for, annotations it reads and sets).

A component that cannot be rendered gets a *blocked* plan (``blocked_plan``): no objects and
a ``{Component}Ready=False`` condition saying why; the shell keeps its existing objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from attrs import field, frozen

from omenative_core import labels
from omenative_core.model.config import LifecycleConfig
from omenative_core.model.spec import (
    IntOrStr,
)
from omenative_core.rollout.spec import RolloutConfig
from omenative_core.service.cluster_blocks import PodMonitorConfig
from omenative_core.service.merge import (
    OperatorDefaults,
)
from omenative_core.service.model import (
    ComponentSpec,
    RuntimeRef,
)
from omenative_core.service.modes import (
    ModeResolution,
)

__all__: list[str] = []

CRD_LEADER_WORKER_SET: Final = "leaderworkersets.leaderworkerset.x-k8s.io"
"""The LeaderWorkerSet CRD (MultiNode components need it)."""
CRD_POD_MONITOR: Final = "podmonitors.monitoring.coreos.com"
"""The Prometheus operator's PodMonitor CRD."""
CRD_SCALED_OBJECT: Final = "scaledobjects.keda.sh"
"""KEDA's ScaledObject CRD: with it, a ``class: KEDA`` component gets its ScaledObject."""
API_VERSION_KEDA: Final = "keda.sh/v1alpha1"
"""KEDA's ScaledObject API version."""
CRD_POD_GROUP: Final = "podgroups.scheduling.x-k8s.io"
"""The scheduler-plugins PodGroup CRD (gang scheduling)."""
API_NATIVE_GANG: Final = "scheduling.k8s.io/v1beta1"
"""Kubernetes' own gang scheduling API (not a CRD): named among ``crds_present`` when served
(1.37's version; 1.36's is ``API_NATIVE_GANG_ALPHA``; the preferred one served is used)."""
API_NATIVE_GANG_ALPHA: Final = "scheduling.k8s.io/v1alpha2"
"""Kubernetes 1.36's gang scheduling API version, named among ``crds_present`` when served."""

ANNOTATION_CONTROLLER_WRITE: Final = "ome.io/controller-write"
"""On a projected InferenceReplica: written by the ISVC controller."""
ANNOTATION_PARENT_GENERATION: Final = "ome.io/parent-generation"
"""On a projected InferenceReplica: the ISVC generation it was rendered from."""
ANNOTATION_MIGRATION_PREFIX: Final = labels.ANNOTATION_MIGRATION_PREFIX
"""An ISVC migration request; forwarded to the component's InferenceReplica."""
ANNOTATION_ROLLOUT_PAUSED: Final = "ome.io/rollout-paused"
"""On the ISVC: ``"true"`` pauses every OMENative component, ``freeze`` also stops repair."""
ANNOTATION_REVISION_HISTORY_LIMIT: Final = "ome.io/revision-history-limit"
"""On the ISVC: overrides the cluster ``revisionHistoryLimit``."""
ANNOTATION_AUTOSCALER_CLASS: Final = "ome.io/autoscalerClass"
"""On the ISVC (legacy): ``hpa`` (default), ``keda`` or ``external``."""


@frozen(kw_only=True)
class PdbPolicy:
    """A PodDisruptionBudget policy: exactly one of ``min_available`` / ``max_unavailable``
    (a count, or ``"N%"``), counted in Instances for OMENative."""

    min_available: IntOrStr | None = None
    max_unavailable: IntOrStr | None = None


def _default_pdb() -> PdbPolicy:
    return PdbPolicy(max_unavailable=1)


@frozen(kw_only=True)
class ServiceConfig:
    """The operator settings rendering reads; the defaults are the ome-resources chart's.

    ``pdb_omenative`` / ``pdb_raw_deployment`` None means no PodDisruptionBudget unless
    the component sets one. ``default_min_replicas`` / ``default_max_replicas`` fill a
    component's unset ``minReplicas`` / ``maxReplicas`` (OME's ``deploy.replicas``; with no
    ConfigMap there is no max default, so no HPA unless the component asks for one).
    ``pod_monitor``: labels and relabelings for every PodMonitor. ``rollout``: the settings
    rollout groups read. All of it comes from the ``inferenceservice-config`` ConfigMap
    (``parse_service_config``).
    """

    lifecycle: LifecycleConfig = field(factory=LifecycleConfig)
    operator: OperatorDefaults = field(factory=OperatorDefaults)
    pdb_omenative: PdbPolicy | None = field(factory=_default_pdb)
    pdb_raw_deployment: PdbPolicy | None = field(factory=_default_pdb)
    default_min_replicas: int = 1
    default_max_replicas: Mapping[str, int] = field(factory=dict)
    pod_monitor: PodMonitorConfig = field(factory=PodMonitorConfig)
    hpa_cpu_utilization: int = 80
    default_port: int = 8080
    rollout: RolloutConfig = field(factory=RolloutConfig)
    metric_providers: Mapping[str, Mapping[str, Any]] = field(factory=dict)
    """OME's metric provider bindings (``metricProviders``): name -> ``{serverAddress,
    authSecretRef?, headers?}``, for AutoscalerPolicy ``providerRef``s."""


@frozen(kw_only=True)
class ServiceCondition:
    """A condition the plan reports: ``{Component}Ready`` when a component is blocked, or
    a component-scoped one (``GangSchedulingUnavailable``, ``MultiNodeUnavailable``)."""

    type: str
    status: str
    reason: str
    message: str = ""


@frozen(kw_only=True)
class ServiceEvent:
    """An Event the shell records on the InferenceService for this pass (the shell sends
    each once per generation), such as OME's ``RuntimeCompatibilityAdvisory`` Warning."""

    type: str
    reason: str
    message: str


@frozen(kw_only=True)
class ComponentPlan:
    """What one component needs. ``blocked``: nothing could be rendered, keep what exists.

    ``revision_hash``: for an OMENative component, the hash of the revision its
    InferenceReplica spec renders (salted with the ``collision_counts`` passed in), so the
    shell knows the revision before the manager has seen the spec.
    """

    component: str
    mode: str
    mode_source: str = ""
    objects: tuple[dict[str, Any], ...] = ()
    replica: dict[str, Any] | None = None
    replicas: int | None = None
    replicas_source: str = ""
    multi_pod: bool = False
    blocked: bool = False
    ready: ServiceCondition | None = None
    conditions: tuple[ServiceCondition, ...] = ()
    notes: tuple[str, ...] = ()
    revision_hash: str = ""
    autoscaler: Mapping[str, Any] | None = None
    """OME's ``class`` and ``specSource`` of the autoscaler in effect (None: blocked); with
    an ``autoscalerPolicyRef``, also ``policy`` / ``shadowedPolicyRef``, ``resolved`` (the
    ``AutoscalerResolved`` condition) and ``hold`` (``policy_resolve``)."""
    scale_target: Mapping[str, str] | None = None
    """``status.components.<c>.scaleTargetRef``: what an autoscaler scales (None: nothing)."""

    def object(self, kind: str) -> dict[str, Any] | None:
        """The first rendered object of ``kind`` (``Service`` is the traffic Service)."""
        return next((o for o in self.objects if o.get("kind") == kind), None)


@frozen(kw_only=True)
class ServicePlan:
    """Everything one InferenceService needs, per component in reconcile order.

    ``removed_conditions``: ISVC condition types to drop; ``status_fields``: top-level
    status fields to write (a pinned runtime's ``pinnedRevisionName``,
    ``lastRuntimeSyncToken``); ``runtime_revisions``: runtime revisions (ControllerRevision
    manifests without a namespace) the shell creates in OME's namespace before applying.
    """

    isvc: str
    namespace: str
    runtime: RuntimeRef | None = None
    components: tuple[ComponentPlan, ...] = ()
    conditions: tuple[ServiceCondition, ...] = ()
    events: tuple[ServiceEvent, ...] = ()
    removed_conditions: tuple[str, ...] = ()
    status_fields: dict[str, Any] = field(factory=dict)
    runtime_revisions: tuple[dict[str, Any], ...] = ()

    def component(self, name: str) -> ComponentPlan | None:
        """The plan of ``name``, or None when the ISVC has no such component."""
        return next((c for c in self.components if c.component == name), None)

    @property
    def objects(self) -> tuple[dict[str, Any], ...]:
        """Every object to apply, component by component."""
        return tuple(o for c in self.components for o in c.objects)


def condition_type(component: str) -> str:
    """``EngineReady``, ``DecoderReady`` or ``RouterReady``."""
    return f"{component[:1].upper()}{component[1:]}Ready"


def blocked_plan(
    component: str, res: ModeResolution | None, reason: str, message: str
) -> ComponentPlan:
    """A component with no objects and a ``{Component}Ready=False`` condition saying why."""
    return ComponentPlan(
        component=component,
        mode=res.mode if res is not None else "",
        mode_source=res.source if res is not None else "",
        blocked=True,
        ready=ServiceCondition(
            type=condition_type(component), status="False", reason=reason, message=message
        ),
    )


def pairing_problem(merged: ComponentSpec) -> str | None:
    """What breaks a component's leader/worker pair, or None."""
    leader, worker = merged.leader, merged.worker
    if leader is not None and worker is None:
        return "LeaderRequiresWorker: a leader is set but no worker"
    if worker is not None and leader is None:
        return "WorkerRequiresLeader: a worker is set but no leader"
    if worker is not None and worker.size is not None and worker.size < 1:
        return f"WorkerSizeMustBePositive: worker.size is {worker.size}; it must be >= 1"
    return None

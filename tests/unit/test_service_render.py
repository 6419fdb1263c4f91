"""What an InferenceService renders into: InferenceReplicas, Services, PDB, HPA, PodMonitor."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import attrs
import pytest

from omenative_core.codec import spec_from_json
from omenative_core.gang import native_api_of
from omenative_core.model.config import LifecycleConfig
from omenative_core.model.observed import Snapshot
from omenative_core.model.plan import CreatePod
from omenative_core.planner import plan as plan_replica
from omenative_core.render import instance_slots, pod_name, render_pod
from omenative_core.revisions import revision_hash
from omenative_core.service import (
    API_NATIVE_GANG,
    API_NATIVE_GANG_ALPHA,
    CRD_LEADER_WORKER_SET,
    CRD_POD_GROUP,
    CRD_POD_MONITOR,
    CRD_SCALED_OBJECT,
    ComponentPlan,
    PdbPolicy,
    RuntimeRef,
    ServiceConfig,
    ServicePlan,
    isvc_from_json,
    render_service,
    runtime_from_json,
)
from omenative_core.status.wire import replica_from_json

NOW = datetime(2025, 6, 1, tzinfo=UTC)


def make_isvc(spec: dict[str, Any], **meta: Any) -> Any:
    metadata = {"name": "chat", "namespace": "prod", "uid": "isvc-uid", "generation": 4, **meta}
    return isvc_from_json(
        {
            "apiVersion": "ome.io/v1beta1",
            "kind": "InferenceService",
            "metadata": metadata,
            "spec": spec,
        }
    )


def make_runtime(
    spec: dict[str, Any],
    name: str = "srt",
    kind: str = "ClusterServingRuntime",
    namespace: str | None = None,
) -> Any:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return runtime_from_json(
        {"apiVersion": "ome.io/v1beta1", "kind": kind, "metadata": metadata, "spec": spec}
    )


RUNTIME = make_runtime(
    {
        "engineConfig": {
            "runner": {"image": "sglang:0.4", "ports": [{"name": "http", "containerPort": 30000}]},
            "leader": {"runner": {"args": ["--role=leader"]}},
            "worker": {"size": 1, "runner": {"args": ["--role=worker"]}},
        },
        "routerConfig": {"runner": {"image": "router:1"}},
    }
)


def seed_isvc(**engine: Any) -> Any:
    """OME's example: ``chat`` on OMENative, a router of 1 Instance, an engine of 2."""
    return make_isvc(
        {
            "deploymentMode": "OMENative",
            "model": {"name": "llama"},
            "runtime": {"name": "srt"},
            "engine": {"minReplicas": 2, "leader": {}, "worker": {"size": 1}, **engine},
            "router": {"minReplicas": 1},
        }
    )


def render(
    isvc: Any,
    runtimes: tuple[Any, ...] = (RUNTIME,),
    crds: tuple[str, ...] = (),
    config: ServiceConfig | None = None,
    **kw: Any,
) -> ServicePlan:
    return render_service(isvc, list(runtimes), crds, config, **kw)


def comp(plan: ServicePlan, name: str) -> ComponentPlan:
    cp = plan.component(name)
    assert cp is not None
    return cp


def kinds(cp: ComponentPlan) -> list[tuple[str, str]]:
    return [(o["kind"], o["metadata"]["name"]) for o in cp.objects]


def replica_of(cp: ComponentPlan) -> Any:
    assert cp.replica is not None
    return replica_from_json(cp.replica)


def planned_pods(cp: ComponentPlan) -> list[str]:
    """The pods the core's planner creates for the rendered replica on an empty cluster."""
    ir = replica_of(cp)
    ir = type(ir)(
        metadata=ir.metadata.__class__(
            name=ir.metadata.name, namespace=ir.metadata.namespace, uid="ir-uid"
        ),
        spec=ir.spec,
    )
    actions = plan_replica(Snapshot(replica=ir, now=NOW)).actions
    return [a.name for a in actions if isinstance(a, CreatePod)]


def engine_hash(plan: ServicePlan) -> str:
    spec = spec_from_json(comp(plan, "engine").replica["spec"])  # type: ignore[index]
    return revision_hash(spec.runners, spec.pairing_protocol, None)


# ---------------------------------------------------------------------------- the seed example


def test_seed_example_renders_exactly_the_engine_and_router_replicas() -> None:
    plan = render(seed_isvc())
    replicas = [o["metadata"]["name"] for o in plan.objects if o["kind"] == "InferenceReplica"]
    assert replicas == ["chat-engine", "chat-router"]
    assert [c.mode for c in plan.components] == ["OMENative", "OMENative"]


def test_seed_example_pods_have_omes_names() -> None:
    plan = render(seed_isvc())
    assert planned_pods(comp(plan, "engine")) == [
        "chat-engine-0-leader-0",
        "chat-engine-0-worker-0",
        "chat-engine-1-leader-0",
        "chat-engine-1-worker-0",
    ]
    assert planned_pods(comp(plan, "router")) == ["chat-router-0-default-0"]


def test_seed_example_pods_render_through_render_pod() -> None:
    ir = replica_of(comp(render(seed_isvc()), "engine"))
    names = [
        render_pod(
            ir,
            runners=ir.spec.runners,
            revision_hash="abc",
            index=i,
            incarnation=1,
            slot=slot,
            replicas=2,
            use_pod_group=False,
        )["metadata"]["name"]
        for i in range(2)
        for slot in instance_slots(ir.spec.runners)
    ]
    assert names == [pod_name("chat-engine", i, r, 0) for i in (0, 1) for r in ("leader", "worker")]


def test_replica_is_owned_by_the_isvc_and_marked_as_controller_written() -> None:
    cp = comp(render(seed_isvc()), "engine")
    meta = cp.replica["metadata"]  # type: ignore[index]
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "ome.io/v1beta1",
            "kind": "InferenceService",
            "name": "chat",
            "uid": "isvc-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert meta["annotations"]["ome.io/controller-write"] == "true"
    assert meta["annotations"]["ome.io/parent-generation"] == "4"
    spec = cp.replica["spec"]  # type: ignore[index]
    assert spec["parentRef"] == {"name": "chat"}
    assert spec["component"] == "engine"
    assert spec["replicas"] == 2


def test_runner_container_is_merged_into_the_leader_and_worker_templates() -> None:
    ir = replica_of(comp(render(seed_isvc()), "engine"))
    by_name = {r.name: r for r in ir.spec.runners}
    assert sorted(by_name) == ["leader", "worker"]
    assert by_name["worker"].size == 1
    for role in ("leader", "worker"):
        (container,) = by_name[role].template["spec"]["containers"]
        assert container["name"] == "ome-container"
        assert container["image"] == "sglang:0.4"
        assert container["args"] == [f"--role={role}"]


def test_router_of_one_instance_has_a_default_runner() -> None:
    ir = replica_of(comp(render(seed_isvc()), "router"))
    assert [r.name for r in ir.spec.runners] == ["default"]
    assert ir.spec.replicas == 1
    assert ir.spec.pairing_protocol is None


# ---------------------------------------------------------------------------- objects


def test_omenative_component_objects() -> None:
    plan = render(seed_isvc(maxReplicas=4), crds=(CRD_POD_MONITOR, CRD_POD_GROUP))
    assert kinds(comp(plan, "engine")) == [
        ("InferenceReplica", "chat-engine"),
        ("Service", "chat-engine"),
        ("Service", "chat-engine-headless"),
        ("PodDisruptionBudget", "chat-engine"),
        ("HorizontalPodAutoscaler", "chat-engine"),
        ("PodMonitor", "chat-engine"),
    ]


def test_traffic_service_selects_leaders_when_the_isvc_sets_worker() -> None:
    svc = comp(render(seed_isvc()), "engine").object("Service")
    assert svc is not None
    assert svc["spec"]["selector"] == {
        "ome.io/inferenceservice": "chat",
        "component": "engine",
        "ome.io/managed-by": "OMENative",
        "ome.io/runner": "leader",
    }
    assert svc["spec"]["ports"] == [
        {"name": "http", "port": 30000, "targetPort": 30000, "protocol": "TCP"}
    ]


def test_traffic_service_selects_workers_too_when_only_the_runtime_sets_worker() -> None:
    isvc = make_isvc({"runtime": {"name": "srt"}, "engine": {"minReplicas": 1}})
    cp = comp(render(isvc), "engine")
    assert cp.mode == "OMENative" and cp.mode_source == "LeaderWorkerShape"
    svc = cp.object("Service")
    assert svc is not None
    assert "ome.io/runner" not in svc["spec"]["selector"]


def test_single_pod_service_has_no_runner_selector_and_default_port() -> None:
    svc = comp(render(seed_isvc()), "router").object("Service")
    assert svc is not None
    assert "ome.io/runner" not in svc["spec"]["selector"]
    assert svc["spec"]["ports"][0]["port"] == 8080


def test_headless_service_lists_unready_pods_of_the_replica() -> None:
    headless = comp(render(seed_isvc()), "engine").objects[2]
    assert headless["metadata"]["name"] == "chat-engine-headless"
    assert headless["spec"] == {
        "clusterIP": "None",
        "publishNotReadyAddresses": True,
        "selector": {"ome.io/inferencereplica": "chat-engine"},
    }


def test_pdb_min_available_counts_pods_as_ome_writes_it() -> None:
    # OME's NormalizeOMENativeBudget: 2 Instances of 2 pods, the chart's maxUnavailable 1
    # -> minAvailable 4 - 1 pods, so one pod (one Instance) may be evicted at a time; the
    # selector is OME's: the component's OMENative pods
    pdb = comp(render(seed_isvc()), "engine").object("PodDisruptionBudget")
    assert pdb is not None
    assert pdb["spec"] == {
        "minAvailable": 3,
        "selector": {"matchLabels": {"ome.io/inferenceservice": "chat", "component": "engine",
                                     "ome.io/managed-by": "OMENative"}},
    }


@pytest.mark.parametrize(
    ("policy", "expected"),
    [({"maxUnavailable": "25%"}, 6), ({"minAvailable": "50%"}, 4), ({"minAvailable": 1}, 1)],
)
def test_pdb_from_the_component_policy_rounds_percentages_up(
    policy: dict[str, Any], expected: int
) -> None:
    # 4 Instances of 2 pods = 8 pods; OME scales the budget against the pods, rounding up:
    # 25% unavailable -> 2 pods may go; 50% available -> 4 must stay; 1 available -> 1
    isvc = seed_isvc(minReplicas=4, podDisruptionBudget=policy)
    pdb = comp(render(isvc), "engine").object("PodDisruptionBudget")
    assert pdb is not None and pdb["spec"]["minAvailable"] == expected


def test_omes_inline_budget_fields_render_the_pdb_and_stay_out_of_the_pods() -> None:
    """OME v1.3 sets the budget on the component itself (``component.go``
    ``MinAvailable`` / ``MaxUnavailable``); its schema prunes ``podDisruptionBudget``."""
    rendered = comp(render(seed_isvc(minReplicas=4, maxUnavailable="25%")), "engine")
    pdb = rendered.object("PodDisruptionBudget")
    assert pdb is not None and pdb["spec"]["minAvailable"] == 6
    for runner in replica_of(rendered).spec.runners:
        assert "maxUnavailable" not in runner.template["spec"]


def test_no_pdb_when_the_operator_sets_none() -> None:
    config = ServiceConfig(pdb_omenative=None)
    assert comp(render(seed_isvc(), config=config), "engine").object("PodDisruptionBudget") is None


def test_invalid_pdb_policy_is_reported_not_rendered() -> None:
    config = ServiceConfig(pdb_omenative=PdbPolicy(min_available=1, max_unavailable=1))
    cp = comp(render(seed_isvc(), config=config), "engine")
    assert cp.object("PodDisruptionBudget") is None
    assert [c.type for c in cp.conditions] == [
        "PodDisruptionBudgetInvalid",
        "GangSchedulingUnavailable",
    ]


def test_hpa_scales_the_replica_between_min_and_max() -> None:
    hpa = comp(render(seed_isvc(maxReplicas=5)), "engine").object("HorizontalPodAutoscaler")
    assert hpa is not None
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "name": "chat-engine",
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 5)
    assert hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 80


def test_hpa_for_every_component_as_ome_but_none_for_keda_external_or_none() -> None:
    fixed = comp(render(seed_isvc()), "engine").object("HorizontalPodAutoscaler")
    assert fixed is not None  # OME: even minReplicas == maxReplicas
    assert (fixed["spec"]["minReplicas"], fixed["spec"]["maxReplicas"]) == (2, 2)
    for cls in ("KEDA", "External", "None"):
        isvc = seed_isvc(maxReplicas=5, autoscaler={"class": cls})
        assert comp(render(isvc), "engine").object("HorizontalPodAutoscaler") is None, cls


def test_hpa_keeps_the_components_behavior() -> None:
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 600}}
    isvc = seed_isvc(maxReplicas=5, autoscaler={"hpa": {"behavior": behavior}})
    hpa = comp(render(isvc), "engine").object("HorizontalPodAutoscaler")
    assert hpa is not None and hpa["spec"]["behavior"] == behavior


def test_external_keeps_the_live_count_even_without_max_replicas() -> None:
    """OME's bring-your-own-autoscaler guide: min 2, no max, the user's HPA set 3."""
    isvc = seed_isvc(autoscaler={"class": "External"})
    kept = comp(render(isvc, current_replicas={"engine": 3}), "engine")
    assert (kept.replicas, kept.replicas_source) == (3, "existing")
    raised = comp(render(isvc, current_replicas={"engine": 1}), "engine")
    assert raised.replicas == 2  # never below minReplicas
    capped = seed_isvc(maxReplicas=4, autoscaler={"class": "External"})
    assert comp(render(capped, current_replicas={"engine": 9}), "engine").replicas == 4
    assert comp(render(isvc), "engine").replicas == 2  # first render: minReplicas


def test_class_none_holds_the_count_at_min_replicas() -> None:
    isvc = seed_isvc(maxReplicas=5, autoscaler={"class": "None"})
    held = comp(render(isvc, current_replicas={"engine": 4}), "engine")
    assert (held.replicas, held.replicas_source) == (2, "minReplicas")


def test_autoscaled_replicas_keep_the_live_count_within_bounds() -> None:
    isvc = seed_isvc(maxReplicas=5)
    assert comp(render(isvc), "engine").replicas == 2
    kept = comp(render(isvc, current_replicas={"engine": 4}), "engine")
    assert (kept.replicas, kept.replicas_source) == (4, "existing")
    clamped = comp(render(isvc, current_replicas={"engine": 9}), "engine")
    assert (clamped.replicas, clamped.replicas_source) == (5, "existing (clamped)")
    fixed = comp(render(seed_isvc(), current_replicas={"engine": 7}), "engine")
    assert fixed.replicas == 2  # no autoscaler: minReplicas wins over a transient scale


KEDA = {"class": "KEDA", "keda": {
    "triggers": [{"type": "prometheus", "metadata": {"serverAddress": "http://prom:9090",
                                                    "query": "sum(rate(x[1m]))",
                                                    "threshold": "10"}}],
    "pollingInterval": 15, "cooldownPeriod": 120, "idleReplicaCount": 0,
    "fallback": {"failureThreshold": 3, "replicas": 2}}}


def scaled_object_of(isvc: Any, crds: tuple[str, ...] = (CRD_SCALED_OBJECT,)) -> Any:
    return comp(render(isvc, crds=crds), "engine").object("ScaledObject")


def test_keda_class_gets_omes_scaled_object_when_kedas_crd_is_there() -> None:
    isvc = seed_isvc(minReplicas=1, maxReplicas=6, autoscaler=KEDA)
    so = scaled_object_of(isvc)
    assert so is not None
    assert (so["apiVersion"], so["metadata"]["name"]) == ("keda.sh/v1alpha1",
                                                          "scaledobject-chat-engine")
    assert so["spec"]["scaleTargetRef"] == {"apiVersion": "ome.io/v1beta1",
                                            "kind": "InferenceReplica", "name": "chat-engine"}
    assert (so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]) == (1, 6)
    assert so["spec"]["triggers"] == KEDA["keda"]["triggers"]  # type: ignore[index]
    assert (so["spec"]["pollingInterval"], so["spec"]["cooldownPeriod"],
            so["spec"]["idleReplicaCount"]) == (15, 120, 0)
    assert so["spec"]["fallback"] == {"failureThreshold": 3, "replicas": 2}
    assert so["metadata"]["ownerReferences"][0]["kind"] == "InferenceService"
    assert scaled_object_of(isvc, crds=()) is None  # no KEDA installed: nothing to apply
    assert scaled_object_of(seed_isvc(maxReplicas=6)) is None  # HPA class


def test_omenative_keeps_at_least_one_instance() -> None:
    isvc = seed_isvc(minReplicas=0, autoscaler={"class": "KEDA"})
    assert comp(render(isvc), "engine").replicas == 1


def test_pod_monitor_only_with_its_crd() -> None:
    assert comp(render(seed_isvc()), "engine").object("PodMonitor") is None
    monitor = comp(render(seed_isvc(), crds=(CRD_POD_MONITOR,)), "engine").object("PodMonitor")
    assert monitor is not None
    assert monitor["spec"]["podMetricsEndpoints"] == [{"path": "/metrics", "port": "http"}]


GANG_CASES = [
    # (gangScheduling, what the cluster offers, schedulerName) -> (status, mechanism named)
    ("Auto", (), None, ("True", "None")),
    ("Auto", (API_NATIVE_GANG,), None, ("False", "Native")),
    ("Auto", (API_NATIVE_GANG_ALPHA,), None, ("False", "Native")),
    ("Native", (API_NATIVE_GANG_ALPHA, API_NATIVE_GANG), None, ("False", "Native")),
    # the PodGroup CRD alone does not gang pods of the default scheduler (it does not read it)
    ("Auto", (CRD_POD_GROUP,), None, ("True", "None")),
    ("Auto", (CRD_POD_GROUP,), "scheduler-plugins-scheduler", ("False", "PodGroup")),
    ("Native", (CRD_POD_GROUP,), None, ("True", "None")),
    ("PodGroup", (API_NATIVE_GANG, CRD_POD_GROUP), None, ("False", "PodGroup")),
    ("None", (API_NATIVE_GANG, CRD_POD_GROUP), None, ("True", "None")),
]


@pytest.mark.parametrize(("setting", "crds", "scheduler", "want"), GANG_CASES)
def test_gang_scheduling_condition_follows_every_mechanism(
    setting: str, crds: tuple[str, ...], scheduler: str | None, want: tuple[str, str]
) -> None:
    isvc = seed_isvc(**({"schedulerName": scheduler} if scheduler else {}))
    config = ServiceConfig(lifecycle=LifecycleConfig(gang_scheduling=setting))
    (cond,) = comp(render(isvc, crds=crds, config=config), "engine").conditions
    status, mechanism = want
    assert (cond.type, cond.status) == ("GangSchedulingUnavailable", status)
    assert cond.reason == ("GangSchedulingAvailable" if status == "False"
                           else "PodGroupCRDNotInstalled")
    assert cond.message.startswith(f"gang mechanism {mechanism} (lifecycle.gangScheduling "
                                   f"{setting}")
    assert comp(render(isvc, crds=crds, config=config), "router").conditions == ()


@pytest.mark.parametrize(("setting", "crds", "scheduler", "want"), GANG_CASES)
def test_gang_scheduling_condition_is_the_replicas_own(
    setting: str, crds: tuple[str, ...], scheduler: str | None, want: tuple[str, str]
) -> None:
    """The InferenceService's condition says what the manager's InferenceReplica says."""
    isvc = seed_isvc(**({"schedulerName": scheduler} if scheduler else {}))
    lifecycle = LifecycleConfig(gang_scheduling=setting)
    cp = comp(render(isvc, crds=crds, config=ServiceConfig(lifecycle=lifecycle)), "engine")
    (isvc_cond,) = cp.conditions
    ir = replica_of(cp)
    ir = attrs.evolve(ir, metadata=attrs.evolve(ir.metadata, uid="ir-uid"))
    status = plan_replica(Snapshot(replica=ir, now=NOW, config=lifecycle,
                                   native_gang_api=native_api_of(frozenset(crds)),
                                   pod_group_crd=CRD_POD_GROUP in crds)).status
    assert status is not None
    (ir_cond,) = [c for c in status.conditions if c.type == "GangSchedulingUnavailable"]
    assert (isvc_cond.status, isvc_cond.reason, isvc_cond.message) == (
        ir_cond.status, ir_cond.reason, ir_cond.message)


# ---------------------------------------------------------------------------- pods


def test_scheduler_name_and_kueue_queue_reach_the_templates() -> None:
    isvc = make_isvc(
        {"runtime": {"name": "srt"}, "engine": {"schedulerName": "ome-scheduler"}},
        labels={"kueue.x-k8s.io/queue-name": "gpu-team"},
    )
    ir = replica_of(comp(render(isvc), "engine"))
    for runner in ir.spec.runners:
        assert runner.template["spec"]["schedulerName"] == "ome-scheduler"
        assert runner.template["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-team"


def test_component_queue_label_wins_and_runtime_scheduler_is_the_fallback() -> None:
    rt = make_runtime({**RUNTIME.raw["spec"], "schedulerName": "volcano"})
    isvc = make_isvc(
        {"runtime": {"name": "srt"}, "engine": {"labels": {"kueue.x-k8s.io/queue-name": "own"}}},
        labels={"kueue.x-k8s.io/queue-name": "isvc"},
    )
    ir = replica_of(comp(render(isvc, runtimes=(rt,)), "engine"))
    template = ir.spec.runners[0].template
    assert template["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "own"
    assert template["spec"]["schedulerName"] == "volcano"


def test_topology_settings_reach_the_replica_and_its_pods() -> None:
    isvc = seed_isvc(topologyKey="nvidia.com/nvlink-domain", topologySpread="Required")
    ir = replica_of(comp(render(isvc), "engine"))
    assert ir.spec.topology_key == "nvidia.com/nvlink-domain"
    assert ir.spec.topology_spread == "Required"
    worker = render_pod(
        ir,
        runners=ir.spec.runners,
        revision_hash="h",
        index=0,
        incarnation=1,
        slot=instance_slots(ir.spec.runners)[1],
        replicas=2,
        use_pod_group=False,
    )
    term = worker["spec"]["affinity"]["podAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ][0]
    assert term["topologyKey"] == "nvidia.com/nvlink-domain"
    assert term["labelSelector"]["matchLabels"]["ome.io/runner"] == "leader"


def test_mode_annotation_is_not_copied_to_pods() -> None:
    isvc = make_isvc(
        {
            "engine": {
                "annotations": {"ome.io/deploymentMode": "OMENative", "team": "llm"},
                "runner": {"image": "x:1"},
            }
        }
    )
    ir = replica_of(comp(render(isvc, runtimes=()), "engine"))
    assert ir.spec.runners[0].template["metadata"]["annotations"] == {"team": "llm"}


def test_lifecycle_goes_to_the_replica_and_min_ready_seconds_to_its_spec() -> None:
    isvc = seed_isvc(lifecycle={"minReadySeconds": 900, "restartPolicy": "None"})
    spec = comp(render(isvc), "engine").replica["spec"]  # type: ignore[index]
    assert spec["minReadySeconds"] == 900
    assert "minReadySeconds" not in spec["lifecycle"]
    assert spec["lifecycle"]["restartPolicy"] == "None"


def test_pause_annotation_and_pairing_protocol_reach_the_replica() -> None:
    isvc = make_isvc(
        {
            "deploymentMode": "OMENative",
            "rollout": {"pairingProtocol": "nixl-v1"},
            "engine": {"runner": {"image": "x"}},
            "router": {"runner": {"image": "r"}},
        },
        annotations={"ome.io/rollout-paused": "freeze", "ome.io/revision-history-limit": "3"},
    )
    plan = render(isvc, runtimes=())
    engine = replica_of(comp(plan, "engine")).spec
    assert (engine.paused, engine.pause_mode, engine.revision_history_limit) == (True, "Freeze", 3)
    assert engine.pairing_protocol == "nixl-v1"
    assert replica_of(comp(plan, "router")).spec.pairing_protocol is None


def test_migration_request_is_forwarded_to_its_components_replica() -> None:
    key = "ome.io/migration-request-v1-0b6e8f43-3c1d-4a0e-9f1a-2b3c4d5e6f70"
    value = '{"schemaVersion":"v1","component":"engine","instance":1}'
    plan = render(make_isvc(dict(seed_isvc().raw["spec"]), annotations={key: value}))
    assert comp(plan, "engine").replica["metadata"]["annotations"][key] == value  # type: ignore[index]
    assert key not in comp(plan, "router").replica["metadata"]["annotations"]  # type: ignore[index]


# ---------------------------------------------------------------------------- revisions


def test_runtime_image_change_is_a_new_revision() -> None:
    newer = copy.deepcopy(RUNTIME.raw)
    newer["spec"]["engineConfig"]["runner"]["image"] = "sglang:0.5"
    before = engine_hash(render(seed_isvc()))
    after = engine_hash(render(seed_isvc(), runtimes=(runtime_from_json(newer),)))
    assert before != after


def test_replica_count_scaling_and_lifecycle_changes_are_not_a_new_revision() -> None:
    base = engine_hash(render(seed_isvc()))
    assert engine_hash(render(seed_isvc(minReplicas=5))) == base
    assert engine_hash(render(seed_isvc(maxReplicas=9), current_replicas={"engine": 7})) == base
    assert engine_hash(render(seed_isvc(lifecycle={"restartPolicy": "None"}))) == base


# ---------------------------------------------------------------------------- other modes


def test_raw_deployment_component() -> None:
    isvc = make_isvc({"runtime": {"name": "srt"}, "router": {"minReplicas": 2, "maxReplicas": 3}})
    cp = comp(render(isvc, crds=(CRD_POD_MONITOR,)), "router")
    assert cp.mode == "RawDeployment"
    assert kinds(cp) == [
        ("Deployment", "chat-router"),
        ("Service", "chat-router"),
        ("PodDisruptionBudget", "chat-router"),
        ("HorizontalPodAutoscaler", "chat-router"),
        ("PodMonitor", "chat-router"),
        ("Service", "chat"),  # the external Service, in front of the router
    ]
    deployment = cp.object("Deployment")
    assert deployment is not None
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "router:1"
    assert cp.object("PodDisruptionBudget")["spec"]["maxUnavailable"] == 1  # type: ignore[index]
    assert cp.object("HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]["kind"] == "Deployment"  # type: ignore[index]
    svc = cp.object("Service")
    assert svc is not None and svc["spec"]["selector"]["app"] == "chat-router"
    assert "ome.io/managed-by" not in svc["spec"]["selector"]


def test_multinode_component_needs_the_leaderworkerset_crd() -> None:
    isvc = make_isvc(
        {
            "runtime": {"name": "srt"},
            "engine": {"annotations": {"ome.io/deploymentMode": "MultiNode"}},
        }
    )
    missing = comp(render(isvc), "engine")
    assert missing.blocked and missing.objects == ()
    assert [(c.type, c.reason) for c in missing.conditions] == [
        ("MultiNodeUnavailable", "LeaderWorkerSetCRDNotInstalled")
    ]
    assert missing.ready is not None and missing.ready.type == "EngineReady"

    cp = comp(render(isvc, crds=(CRD_LEADER_WORKER_SET, CRD_POD_MONITOR)), "engine")
    assert kinds(cp) == [("LeaderWorkerSet", "lws-chat-engine"), ("Service", "chat-engine"),
                         ("Service", "chat")]
    lws = cp.objects[0]
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    svc = cp.objects[1]
    assert svc["spec"]["selector"] == {
        "leaderworkerset.sigs.k8s.io/name": "lws-chat-engine",
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
    }


def test_virtual_deployment_creates_nothing() -> None:
    isvc = make_isvc({"engine": {}}, annotations={"ome.io/deploymentMode": "VirtualDeployment"})
    plan = render(isvc)
    assert plan.objects == ()
    assert [(c.type, c.reason) for c in plan.conditions] == [("Ready", "VirtualDeployment")]


# ---------------------------------------------------------------------------- blocked


def test_impossible_component_mode_blocks_it_and_the_ones_after_it() -> None:
    isvc = make_isvc(
        {
            "runtime": {"name": "srt"},
            "engine": {"annotations": {"ome.io/deploymentMode": "VirtualDeployment"}},
            "router": {},
        }
    )
    plan = render(isvc)
    assert [c.blocked for c in plan.components] == [True, True]
    assert plan.objects == ()
    assert comp(plan, "engine").ready.reason == "InvalidDeploymentMode"  # type: ignore[union-attr]
    assert "earlier component" in comp(plan, "router").ready.message  # type: ignore[union-attr]


def test_multinode_router_is_blocked_but_earlier_components_render() -> None:
    isvc = make_isvc(
        {
            "runtime": {"name": "srt"},
            "engine": {},
            "router": {"annotations": {"ome.io/deploymentMode": "MultiNode"}},
        }
    )
    plan = render(isvc)
    assert not comp(plan, "engine").blocked
    router = comp(plan, "router")
    assert router.blocked and "invalid deployment mode for router" in router.ready.message  # type: ignore[union-attr]


def test_missing_or_disabled_runtime_blocks_every_component() -> None:
    isvc = seed_isvc()
    gone = render(isvc, runtimes=())
    assert gone.objects == ()
    assert {c.ready.reason for c in gone.components} == {"RuntimeNotFound"}  # type: ignore[union-attr]
    disabled = make_runtime({**RUNTIME.raw["spec"], "disabled": True})
    off = render(isvc, runtimes=(disabled,))
    assert {c.ready.reason for c in off.components} == {"RuntimeDisabled"}  # type: ignore[union-attr]


def test_missing_runtime_is_reported_even_without_declared_components() -> None:
    plan = render(make_isvc({"runtime": {"name": "gone"}}))
    assert plan.components == ()
    assert [(c.type, c.status, c.reason) for c in plan.conditions] == [
        ("Ready", "False", "RuntimeNotFound")
    ]


def test_namespaced_runtime_must_be_in_the_isvc_namespace() -> None:
    isvc = make_isvc({"runtime": {"name": "srt", "kind": "ServingRuntime"}, "engine": {}})
    elsewhere = make_runtime(RUNTIME.raw["spec"], kind="ServingRuntime", namespace="other")
    assert comp(render(isvc, runtimes=(elsewhere,)), "engine").blocked
    here = make_runtime(RUNTIME.raw["spec"], kind="ServingRuntime", namespace="prod")
    assert not comp(render(isvc, runtimes=(here,)), "engine").blocked


def test_auto_selected_runtime_and_components_from_the_runtime() -> None:
    isvc = make_isvc({"model": {"name": "llama"}})  # declares no component
    plan = render(isvc, auto_selected=RuntimeRef(name="srt"))
    assert [c.component for c in plan.components] == ["engine", "router"]
    assert render(isvc).components == ()


def test_broken_leader_worker_pair_is_blocked() -> None:
    isvc = make_isvc({"engine": {"leader": {}, "runner": {"image": "x"}}})
    cp = comp(render(isvc, runtimes=()), "engine")
    assert cp.blocked and cp.ready.reason == "InvalidLeaderWorkerPairing"  # type: ignore[union-attr]


def test_too_long_name_is_blocked_with_the_cores_reason() -> None:
    isvc = make_isvc(
        {"deploymentMode": "OMENative", "engine": {"runner": {"image": "x"}}}, name="x" * 60
    )
    cp = comp(render(isvc, runtimes=()), "engine")
    assert cp.blocked and cp.ready.reason == "NameTooLong"  # type: ignore[union-attr]


def test_rendering_is_deterministic_and_leaves_inputs_alone() -> None:
    isvc = seed_isvc(maxReplicas=3)
    before = copy.deepcopy(isvc.raw), copy.deepcopy(RUNTIME.raw)
    first = render(isvc, crds=(CRD_POD_MONITOR,))
    assert render(isvc, crds=(CRD_POD_MONITOR,)) == first
    assert (isvc.raw, RUNTIME.raw) == before

"""Rendering of pods, PodGroups and the headless Service, and replica validation."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from omenative_core.labels import LABEL_MANAGED_BY, MANAGED_BY
from omenative_core.model.spec import (
    InferenceReplica,
    InferenceReplicaSpec,
    ObjectMeta,
    ParentRef,
    Runner,
)
from omenative_core.render import (
    LABEL_COMPONENT,
    LABEL_INCARNATION,
    LABEL_INSTANCE_INDEX,
    LABEL_ISVC,
    LABEL_PAIRING,
    LABEL_POD_GROUP,
    LABEL_POD_ORDINAL,
    LABEL_REPLICA,
    LABEL_REVISION_HASH,
    LABEL_RUNNER,
    SERVING_GATE,
    PodSlot,
    headless_service_name,
    instance_slots,
    instance_subdomain,
    is_multi_pod,
    pod_group_name,
    pod_name,
    pods_per_instance,
    render_headless_service,
    render_pod,
    render_pod_group,
    schedule_timeout_seconds,
    validate_replica,
)

HASH = "0123456789"


def template(image: str = "sglang:1", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "chat"}, "annotations": {"team": "llm"}},
        "spec": {"containers": [{"name": "main", "image": image}], **spec},
    }


def gang_runners(workers: int = 2) -> tuple[Runner, ...]:
    return (
        Runner(name="leader", template=template()),
        Runner(name="worker", size=workers, template=template()),
    )


def default_runners() -> tuple[Runner, ...]:
    return (Runner(name="default", template=template()),)


def replica(
    *,
    name: str = "chat-engine",
    parent: str | None = "chat",
    component: str = "engine",
    runners: tuple[Runner, ...] | None = None,
    **spec: Any,
) -> InferenceReplica:
    return InferenceReplica(
        metadata=ObjectMeta(name=name, namespace="llm", uid="uid-1"),
        spec=InferenceReplicaSpec(
            component=component,
            runners=gang_runners() if runners is None else runners,
            parent_ref=ParentRef(name=parent) if parent else None,
            **spec,
        ),
    )


def render(ir: InferenceReplica, slot: PodSlot, **kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "runners": ir.spec.runners,
        "revision_hash": HASH,
        "index": 0,
        "incarnation": 1,
        "slot": slot,
        "replicas": 2,
        "use_pod_group": False,
    }
    args.update(kw)
    return render_pod(ir, **args)


def render_instance(ir: InferenceReplica, **kw: Any) -> list[dict[str, Any]]:
    return [render(ir, slot, **kw) for slot in instance_slots(ir.spec.runners)]


def env_of(pod: dict[str, Any], container: int = 0) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][container]["env"]}


# ---------------------------------------------------------------------------- names


@pytest.mark.parametrize("parent", [None, "chat"], ids=["standalone", "projected"])
def test_seed_example_names(parent: str | None) -> None:
    # OME's names either way: ISVC "chat"'s engine, or a standalone engine replica "chat"
    name = "chat-engine" if parent else "chat"
    ir = replica(name=name, parent=parent)
    assert ir.prefix == "chat-engine"
    names = [p["metadata"]["name"] for p in render_instance(ir, index=0)]
    assert names == ["chat-engine-0-leader-0", "chat-engine-0-worker-0", "chat-engine-0-worker-1"]
    one_worker = replica(name=name, parent=parent, runners=gang_runners(1))
    names = [p["metadata"]["name"] for p in render_instance(one_worker, index=1)]
    assert names == ["chat-engine-1-leader-0", "chat-engine-1-worker-0"]
    assert headless_service_name(ir.prefix) == "chat-engine-headless"
    assert pod_group_name(ir.prefix, 1, 2) == "chat-engine-1-2"
    assert instance_subdomain(ir.prefix, 1) == "chat-engine-1"


def test_standalone_names_are_omes_guide() -> None:
    # OME's guide "Run a standalone InferenceReplica" (ome-docs@8c764098, Step 2): the
    # replica llama-pool (component engine) runs llama-pool-engine-0-default-0, labelled
    # ome.io/inferenceservice=llama-pool, behind llama-pool-engine-headless
    ir = replica(name="llama-pool", parent=None, runners=default_runners())
    pod = render_instance(ir)[0]
    assert pod["metadata"]["name"] == "llama-pool-engine-0-default-0"
    assert pod["metadata"]["labels"][LABEL_ISVC] == "llama-pool"
    assert pod["spec"]["subdomain"] == "llama-pool-engine-headless"
    assert render_headless_service(ir)["metadata"]["name"] == "llama-pool-engine-headless"
    assert ir.legacy_prefix == "llama-pool"
    assert replica(name="chat-engine", parent="chat").legacy_prefix is None


def test_a_pre_ome_instance_keeps_its_names() -> None:
    # an Instance whose pods carry the old prefix {replica}: a recreated pod keeps it, and
    # the worker's leader address names the leader that runs (under the old Service)
    ir = replica(name="llm", parent=None)
    pods = render_instance(ir, prefix="llm", use_pod_group=True)
    assert [p["metadata"]["name"] for p in pods] == [
        "llm-0-leader-0", "llm-0-worker-0", "llm-0-worker-1"]
    worker = pods[1]
    assert worker["spec"]["subdomain"] == "llm-headless"
    assert env_of(worker)["OME_LEADER_ADDRESS"] == "llm-0-leader-0.llm-headless"
    assert env_of(worker)["OME_INSTANCE_SUBDOMAIN"] == "llm-0"
    # the PodGroup keeps the replica's name whatever the pods' prefix (not renamed)
    assert worker["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "llm-0-1"
    fresh = render_instance(ir, use_pod_group=True)[1]
    assert env_of(fresh)["OME_LEADER_ADDRESS"] == "llm-engine-0-leader-0.llm-engine-headless"
    assert fresh["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "llm-0-1"


def test_router_default_pod_name() -> None:
    ir = replica(name="chat-router", component="router", runners=default_runners())
    assert render_instance(ir)[0]["metadata"]["name"] == "chat-router-0-default-0"
    assert pod_name("chat-router", 0, "default", 1) == "chat-router-0-default-1"


def test_isvc_name_env_standalone_vs_projected() -> None:
    projected = render_instance(replica(parent="chat"))[0]
    standalone = render_instance(replica(parent=None))[0]
    assert env_of(projected)["OME_INFERENCESERVICE_NAME"] == "chat"
    assert projected["metadata"]["labels"][LABEL_ISVC] == "chat"
    assert env_of(standalone)["OME_INFERENCESERVICE_NAME"] == "chat-engine"
    assert standalone["metadata"]["labels"][LABEL_ISVC] == "chat-engine"


# ---------------------------------------------------------------------------- slots


def test_slots_default() -> None:
    runners = default_runners()
    assert instance_slots(runners) == (PodSlot("default", 0, 0),)
    assert pods_per_instance(runners) == 1
    assert not is_multi_pod(runners)


def test_slots_leader_and_workers() -> None:
    runners = gang_runners(3)
    assert instance_slots(runners) == (
        PodSlot("leader", 0, 0),
        PodSlot("worker", 0, 1),
        PodSlot("worker", 1, 2),
        PodSlot("worker", 2, 3),
    )
    assert pods_per_instance(runners) == 4
    assert is_multi_pod(runners)
    assert instance_slots(tuple(reversed(runners))) == instance_slots(runners)


@pytest.mark.parametrize(
    "names", [("leader",), ("worker",), ("default", "worker"), ("default", "default"), ()]
)
def test_slots_reject_invalid_runner_sets(names: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="runners"):
        instance_slots(tuple(Runner(name=n) for n in names))


# ---------------------------------------------------------------------------- pods


def test_gang_labels_and_env() -> None:
    ir = replica(pairing_protocol="nixl-v1")
    pods = render_instance(ir, index=3, incarnation=2, replicas=4, use_pod_group=True)
    assert [p["metadata"]["labels"][LABEL_RUNNER] for p in pods] == ["leader", "worker", "worker"]
    for pod, (runner, ordinal, rank) in zip(
        pods, [("leader", 0, 0), ("worker", 0, 1), ("worker", 1, 2)], strict=True
    ):
        labels = pod["metadata"]["labels"]
        assert labels == {
            "app": "chat",
            LABEL_ISVC: "chat",
            LABEL_COMPONENT: "engine",
            LABEL_MANAGED_BY: MANAGED_BY,
            LABEL_REPLICA: "chat-engine",
            LABEL_INSTANCE_INDEX: "3",
            LABEL_INCARNATION: "2",
            LABEL_RUNNER: runner,
            LABEL_POD_ORDINAL: str(ordinal),
            LABEL_REVISION_HASH: HASH,
            LABEL_PAIRING: "nixl-v1",
            LABEL_POD_GROUP: "chat-engine-3-2",
        }
        assert env_of(pod) == {
            "OME_INFERENCESERVICE_NAME": "chat",
            "OME_COMPONENT": "engine",
            "OME_COMPONENT_REPLICAS": "4",
            "OME_INSTANCE_INDEX": "3",
            "OME_RUNNER": runner,
            "OME_RUNNER_SIZE": "1" if runner == "leader" else "2",
            "OME_RUNNER_INDEX": str(ordinal),
            "OME_INSTANCE_SUBDOMAIN": "chat-engine-3",
            "OME_LEADER_ADDRESS": "chat-engine-3-leader-0.chat-engine-headless",
            "OME_INSTANCE_POD_RANK": str(rank),
            "OME_INSTANCE_POD_COUNT": "3",
        }
        name = pod["metadata"]["name"]
        assert pod["spec"]["hostname"] == name
        assert pod["spec"]["subdomain"] == "chat-engine-headless"
        assert pod["metadata"]["namespace"] == "llm"
        assert pod["metadata"]["annotations"] == {"team": "llm"}
        assert pod["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "ome.io/v1beta1",
                "kind": "InferenceReplica",
                "name": "chat-engine",
                "uid": "uid-1",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert pod["apiVersion"] == "v1"
        assert pod["kind"] == "Pod"


def test_single_pod_uses_ordinal_slot_and_no_gang_env() -> None:
    ir = replica(
        name="chat-router",
        component="router",
        runners=default_runners(),
        pairing_protocol="nixl-v1",
    )
    pod = render(ir, PodSlot("default", 0, 0), ordinal_slot=1, use_pod_group=True)
    assert pod["metadata"]["name"] == "chat-router-0-default-1"
    labels = pod["metadata"]["labels"]
    assert labels[LABEL_POD_ORDINAL] == "1"
    assert LABEL_POD_GROUP not in labels  # single pod: no PodGroup
    assert LABEL_PAIRING not in labels  # router: never paired
    env = env_of(pod)
    assert env["OME_RUNNER_INDEX"] == "1"
    assert env["OME_RUNNER_SIZE"] == "1"
    assert not {"OME_LEADER_ADDRESS", "OME_INSTANCE_POD_RANK", "OME_INSTANCE_POD_COUNT"} & set(env)


def test_pairing_label_follows_revision_when_given() -> None:
    ir = replica(component="decoder", pairing_protocol="new")
    slot = PodSlot("leader", 0, 0)
    assert render(ir, slot)["metadata"]["labels"][LABEL_PAIRING] == "new"
    assert render(ir, slot, pairing_protocol="old")["metadata"]["labels"][LABEL_PAIRING] == "old"
    assert LABEL_PAIRING not in render(ir, slot, pairing_protocol=None)["metadata"]["labels"]


def test_ome_labels_win_over_template() -> None:
    tpl = template()
    tpl["metadata"]["labels"].update(
        {LABEL_RUNNER: "bogus", LABEL_COMPONENT: "bogus", LABEL_REVISION_HASH: "bogus"}
    )
    ir = replica(runners=(Runner(name="default", template=tpl),))
    labels = render_instance(ir)[0]["metadata"]["labels"]
    assert labels[LABEL_RUNNER] == "default"
    assert labels[LABEL_COMPONENT] == "engine"
    assert labels[LABEL_REVISION_HASH] == HASH
    assert labels["app"] == "chat"


def test_readiness_gate_added_once() -> None:
    plain = render_instance(replica(runners=default_runners()))[0]
    assert plain["spec"]["readinessGates"] == [{"conditionType": SERVING_GATE}]
    tpl = template(readinessGates=[{"conditionType": "x/y"}, {"conditionType": SERVING_GATE}])
    pod = render_instance(replica(runners=(Runner(name="default", template=tpl),)))[0]
    assert pod["spec"]["readinessGates"] == [
        {"conditionType": "x/y"},
        {"conditionType": SERVING_GATE},
    ]


def test_env_replaces_template_vars_and_skips_init_containers() -> None:
    tpl = template(
        initContainers=[{"name": "init", "image": "busybox", "env": [{"name": "A", "value": "1"}]}]
    )
    tpl["spec"]["containers"] = [
        {
            "name": "main",
            "image": "sglang:1",
            "env": [
                {"name": "USER_VAR", "value": "x"},
                {"name": "OME_INSTANCE_INDEX", "value": "stale"},
                {"name": "ADDR", "value": "$(OME_LEADER_ADDRESS):5000"},
            ],
        },
        {"name": "sidecar", "image": "proxy:1"},
    ]
    ir = replica(runners=(Runner(name="leader", template=tpl), gang_runners()[1]))
    pod = render(ir, PodSlot("leader", 0, 0), index=5)
    main = pod["spec"]["containers"][0]["env"]
    names = [e["name"] for e in main]
    assert names.count("OME_INSTANCE_INDEX") == 1
    assert env_of(pod)["OME_INSTANCE_INDEX"] == "5"
    # OME's vars come first so template vars can reference them with $(...)
    assert names.index("OME_LEADER_ADDRESS") < names.index("ADDR")
    assert names[-2:] == ["USER_VAR", "ADDR"]
    assert env_of(pod, 1)["OME_INSTANCE_INDEX"] == "5"  # every non-init container
    assert pod["spec"]["initContainers"][0]["env"] == [{"name": "A", "value": "1"}]


def test_template_is_never_mutated() -> None:
    tpl = template(
        readinessGates=[{"conditionType": "x/y"}],
        affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
        topologySpreadConstraints=[],
    )
    tpl["spec"]["containers"][0]["env"] = [{"name": "OME_RUNNER", "value": "t"}]
    ir = replica(
        runners=(Runner(name="leader", template=tpl), Runner(name="worker", template=tpl)),
        topology_key="rack",
        topology_spread="Required",
    )
    before = json.dumps(tpl, sort_keys=True)
    pods = render_instance(ir, use_pod_group=True, avoid_node="n1", prefer_nodes=("n2",))
    assert json.dumps(tpl, sort_keys=True) == before
    # and the pods share nothing with the template or with each other
    pods[0]["spec"]["containers"][0]["env"].clear()
    pods[0]["metadata"]["annotations"]["z"] = "z"
    pods[0]["spec"]["readinessGates"].clear()
    assert json.dumps(tpl, sort_keys=True) == before
    assert pods[1]["spec"]["containers"][0]["env"]


def test_worker_affinity_to_leader_with_topology_key() -> None:
    tpl = template(
        affinity={
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"x": "y"}}, "topologyKey": "zone"}
                ]
            }
        }
    )
    ir = replica(
        runners=(Runner(name="leader", template=template()), Runner(name="worker", template=tpl)),
        topology_key="nvlink.domain",
    )
    leader, worker = render_instance(ir, index=4, incarnation=3)
    assert "affinity" not in leader["spec"]
    terms = worker["spec"]["affinity"]["podAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms[0]["topologyKey"] == "zone"  # the template's term is kept
    assert terms[1] == {
        "labelSelector": {
            "matchLabels": {
                LABEL_REPLICA: "chat-engine",
                LABEL_INSTANCE_INDEX: "4",
                LABEL_INCARNATION: "3",
                LABEL_RUNNER: "leader",
            }
        },
        "topologyKey": "nvlink.domain",
    }


def test_no_affinity_without_topology_key() -> None:
    for pod in render_instance(replica()):
        assert "affinity" not in pod["spec"]
        assert "topologySpreadConstraints" not in pod["spec"]


@pytest.mark.parametrize(
    ("policy", "when"), [("Preferred", "ScheduleAnyway"), ("Required", "DoNotSchedule")]
)
def test_topology_spread_on_anchor_only(policy: str, when: str) -> None:
    ir = replica(topology_key="rack", topology_spread=policy, topology_spread_key="zone")
    leader, *workers = render_instance(ir)
    assert leader["spec"]["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "topologyKey": "zone",
            "whenUnsatisfiable": when,
            "labelSelector": {
                "matchLabels": {LABEL_REPLICA: "chat-engine", LABEL_RUNNER: "leader"}
            },
        }
    ]
    assert all("topologySpreadConstraints" not in w["spec"] for w in workers)


def test_topology_spread_key_falls_back_to_topology_key_for_default() -> None:
    ir = replica(runners=default_runners(), topology_key="rack", topology_spread="Preferred")
    (tsc,) = render_instance(ir)[0]["spec"]["topologySpreadConstraints"]
    assert tsc["topologyKey"] == "rack"
    assert tsc["labelSelector"]["matchLabels"][LABEL_RUNNER] == "default"


def test_avoid_and_prefer_nodes() -> None:
    ir = replica(runners=default_runners())
    pod = render_instance(ir, avoid_node="bad", prefer_nodes=("a", "bad", "b", "a"))[0]
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms == [
        {
            "weight": 100,
            "preference": {
                "matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["bad"]}
                ]
            },
        },
        {
            "weight": 50,
            "preference": {
                "matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["a", "b"]}
                ]
            },
        },
    ]


def test_render_is_deterministic() -> None:
    ir = replica(topology_key="rack", topology_spread="Required", pairing_protocol="p")
    kw: dict[str, Any] = {"use_pod_group": True, "avoid_node": "n", "prefer_nodes": ("m",)}
    assert render_instance(ir, **kw) == render_instance(ir, **kw)


def test_unknown_slot_runner_is_an_error() -> None:
    with pytest.raises(ValueError, match="no runner 'default'"):
        render(replica(), PodSlot("default", 0, 0))


# ---------------------------------------------------------------------------- PodGroup, Service


def test_pod_group() -> None:
    group = render_pod_group(
        replica(topology_key="rack"), index=2, incarnation=4, min_member=3,
        schedule_timeout_seconds=600,
    )
    assert group == {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": "chat-engine-2-4",
            "namespace": "llm",
            "labels": {
                LABEL_COMPONENT: "engine",
                LABEL_ISVC: "chat",
                LABEL_INSTANCE_INDEX: "2",
                LABEL_INCARNATION: "4",
                LABEL_MANAGED_BY: MANAGED_BY,
                LABEL_REPLICA: "chat-engine",
            },
            "annotations": {"ome.io/topology-key": "rack"},
            "ownerReferences": [
                {
                    "apiVersion": "ome.io/v1beta1",
                    "kind": "InferenceReplica",
                    "name": "chat-engine",
                    "uid": "uid-1",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"minMember": 3, "scheduleTimeoutSeconds": 600},
    }
    plain = render_pod_group(replica(), index=0, incarnation=1, min_member=2,
                             schedule_timeout_seconds=60)
    assert "annotations" not in plain["metadata"]


@pytest.mark.parametrize(
    ("timeout", "expected"),
    [
        (timedelta(minutes=30), 600),
        (None, 600),
        (timedelta(seconds=10), 60),
        (timedelta(seconds=300), 300),
        (timedelta(seconds=90.2), 91),
    ],
)
def test_schedule_timeout_clamp(timeout: timedelta | None, expected: int) -> None:
    assert (
        schedule_timeout_seconds(timeout, timedelta(seconds=60), timedelta(seconds=600)) == expected
    )


def test_headless_service() -> None:
    svc = render_headless_service(replica())
    assert svc["metadata"]["name"] == "chat-engine-headless"
    assert svc["metadata"]["namespace"] == "llm"
    assert svc["spec"] == {
        "clusterIP": "None",
        "publishNotReadyAddresses": True,
        "selector": {LABEL_REPLICA: "chat-engine"},
    }
    assert svc["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    # the selector matches every pod the replica renders
    for pod in render_instance(replica()):
        assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()


# ---------------------------------------------------------------------------- validation


def reasons(ir: InferenceReplica) -> list[str]:
    return [e.split(":", 1)[0] for e in validate_replica(ir)]


@pytest.mark.parametrize(
    "runners",
    [default_runners(), gang_runners(1), gang_runners(8)],
    ids=["default", "gang-1", "gang-8"],
)
def test_valid_replicas(runners: tuple[Runner, ...]) -> None:
    assert validate_replica(replica(runners=runners, replicas=3)) == ()


@pytest.mark.parametrize(
    ("runners", "reason"),
    [
        ((), "TemplateSourceMissing"),
        ((Runner(name="leader", template=template()),), "LeaderRequiresWorker"),
        ((Runner(name="worker", size=2, template=template()),), "WorkerRequiresLeader"),
        (
            (
                Runner(name="leader", template=template()),
                Runner(name="worker", size=0, template=template()),
            ),
            "WorkerSizeMustBePositive",
        ),
        ((Runner(name="master", template=template()),), "UnknownRunner"),
        ((*default_runners(), *default_runners()), "DuplicateRunner"),
        ((*default_runners(), *gang_runners()), "DefaultRunnerNotAlone"),
        ((Runner(name="default", size=2, template=template()),), "InvalidRunnerSize"),
        ((Runner(name="default", template={"spec": {"containers": []}}),), "ContainersRequired"),
        ((Runner(name="default"),), "ContainersRequired"),
    ],
)
def test_invalid_runners(runners: tuple[Runner, ...], reason: str) -> None:
    assert reason in reasons(replica(runners=runners))


def test_invalid_replicas_and_spread_and_pairing() -> None:
    assert "InvalidReplicas" in reasons(replica(replicas=-1))
    assert "UnknownComponent" in reasons(replica(component="prefill"))
    assert "InvalidTopologySpread" in reasons(
        replica(topology_spread="Sometimes", topology_key="k")
    )
    assert "TopologySpreadKeyRequired" in reasons(replica(topology_spread="Required"))
    assert "InvalidPairingProtocol" in reasons(replica(pairing_protocol="-bad-"))
    assert "InvalidPairingProtocol" in reasons(replica(pairing_protocol="p" * 64))


def test_entries_are_reason_colon_message() -> None:
    for entry in validate_replica(replica(runners=(Runner(name="leader"),), replicas=-2)):
        reason, _, message = entry.partition(": ")
        assert reason.isidentifier() and reason[0].isupper()
        assert message


def test_long_pod_name_is_rejected() -> None:
    # prefix "p" * 47 + "-engine" is 54 characters; one Instance may surge to index 1 and the
    # default runner to ordinal 1, so the longest pod is "{prefix}-1-default-1" (66).
    ir = replica(name="x", parent="p" * 47, runners=default_runners(), replicas=1)
    longest = "p" * 47 + "-engine-1-default-1"
    assert validate_replica(ir) == (
        f"NameTooLong: pod name {longest!r} is 66 characters; Kubernetes allows 63",
    )
    ok = replica(name="x", parent="p" * 44, runners=default_runners(), replicas=1)
    assert validate_replica(ok) == ()  # exactly 63


def test_long_pod_name_counts_worker_ordinal_and_index_digits() -> None:
    # prefix 52: "-1-worker-9" (11) fits in 63, "-1-worker-10" (12) does not
    assert validate_replica(replica(parent="p" * 45, runners=gang_runners(10), replicas=1)) == ()
    assert reasons(replica(parent="p" * 45, runners=gang_runners(11), replicas=1)) == [
        "NameTooLong"
    ]
    # prefix 50 with default: index 99 (replicas 50) fits, index 101 (replicas 51) does not
    assert validate_replica(replica(parent="p" * 43, runners=default_runners(), replicas=50)) == ()
    assert reasons(replica(parent="p" * 43, runners=default_runners(), replicas=51)) == [
        "NameTooLong"
    ]
    # an explicit index bound overrides the surge estimate
    ir = replica(parent="p" * 43, runners=default_runners(), replicas=1)
    assert reasons_of(validate_replica(ir, max_index=100)) == ["NameTooLong"]


def test_long_service_name_and_label_values() -> None:
    svc = replica(name="a" * 55, parent=None, runners=default_runners())
    entries = validate_replica(svc)
    assert reasons_of(entries) == ["NameTooLong", "NameTooLong"]
    assert entries[1].startswith("NameTooLong: headless Service name 'aaa")
    label = replica(name="a" * 64, parent=None, runners=default_runners())
    assert any(
        e.startswith("NameTooLong: label ome.io/inferencereplica value")
        for e in validate_replica(label)
    )


def test_invalid_dns_names() -> None:
    assert "InvalidName" in reasons(replica(name="Chat_Engine", parent=None))
    digit = validate_replica(replica(name="1chat", parent=None))
    assert [e for e in digit if "headless Service" in e]  # Service names must start with a letter


def reasons_of(entries: tuple[str, ...]) -> list[str]:
    return [e.split(":", 1)[0] for e in entries]


def test_read_only_mapping_templates_render() -> None:
    # a codec may hand templates over as read-only mappings; they do not pickle
    from types import MappingProxyType

    tpl = MappingProxyType(
        {"spec": MappingProxyType({"containers": (MappingProxyType({"name": "m"}),)})}
    )
    ir = replica(runners=(Runner(name="default", template=tpl),))
    pod = render_instance(ir)[0]
    assert pod["spec"]["containers"][0]["name"] == "m"
    assert env_of(pod)["OME_RUNNER"] == "default"

"""Kueue pod groups on the pods of multi-pod Instances (render only: no Kueue runs here)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from attrs import evolve
from sim_helpers import run_world

from omenative_core.model import CreatePod, LifecycleConfig
from omenative_core.model.spec import (
    InferenceReplica,
    InferenceReplicaSpec,
    ObjectMeta,
    ParentRef,
    Runner,
)
from omenative_core.planner import plan
from omenative_core.render import (
    ANNOTATION_KUEUE_POD_GROUP_NAME,
    ANNOTATION_KUEUE_POD_GROUP_SERVING,
    ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT,
    LABEL_KUEUE_POD_GROUP,
    LABEL_KUEUE_QUEUE,
    LABEL_POD_GROUP,
    MAX_NAME_LENGTH,
    instance_slots,
    kueue_pod_group_name,
    pod_group_name,
    render_pod,
)
from omenative_core.revisions import hash_of, revision_hash
from omenative_sim.world import ClusterSpec, World

HASH = "0123456789"
# a DNS-1123 label: what both a label value and Kueue's Workload name (the group name) accept
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def template(labels: dict[str, str] | None = None,
             annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"labels": {"app": "chat", **(labels or {})}}
    if annotations:
        metadata["annotations"] = annotations
    return {"metadata": metadata,
            "spec": {"containers": [{"name": "main", "image": "sglang:1"}]}}


QUEUED = {LABEL_KUEUE_QUEUE: "llm"}


def gang(workers: int = 3, **tpl: Any) -> tuple[Runner, ...]:
    return (Runner(name="leader", template=template(**tpl)),
            Runner(name="worker", size=workers, template=template(**tpl)))


def single(**tpl: Any) -> tuple[Runner, ...]:
    return (Runner(name="default", template=template(**tpl)),)


def replica(runners: tuple[Runner, ...], *, name: str = "chat-engine",
            parent: str | None = "chat") -> InferenceReplica:
    return InferenceReplica(
        metadata=ObjectMeta(name=name, namespace="llm", uid="uid-1"),
        spec=InferenceReplicaSpec(component="engine", runners=runners,
                                  parent_ref=ParentRef(name=parent) if parent else None),
    )


def instance(ir: InferenceReplica, *, index: int = 0, incarnation: int = 1,
             use_pod_group: bool = False, ordinal_slot: int = 0) -> list[dict[str, Any]]:
    return [
        render_pod(ir, runners=ir.spec.runners, revision_hash=HASH, index=index,
                   incarnation=incarnation, slot=slot, ordinal_slot=ordinal_slot, replicas=2,
                   use_pod_group=use_pod_group)
        for slot in instance_slots(ir.spec.runners)
    ]


def labels(pod: dict[str, Any]) -> dict[str, str]:
    return dict(pod["metadata"]["labels"])


def annotations(pod: dict[str, Any]) -> dict[str, str]:
    return dict(pod["metadata"].get("annotations") or {})


# ---------------------------------------------------------------------------- the group


def test_every_pod_of_a_queued_gang_joins_one_group_of_the_whole_instance() -> None:
    pods = instance(replica(gang(3, labels=QUEUED)))
    assert len(pods) == 4  # a leader and three workers
    assert {labels(p)[LABEL_KUEUE_POD_GROUP] for p in pods} == {f"chat-engine-0-1-{HASH}"}
    assert {annotations(p)[ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT] for p in pods} == {"4"}
    # a serving group: Kueue keeps its quota while pods come and go, it never "finishes"
    assert {annotations(p)[ANNOTATION_KUEUE_POD_GROUP_SERVING] for p in pods} == {"true"}
    assert all(labels(p)[LABEL_KUEUE_QUEUE] == "llm" for p in pods)


@pytest.mark.parametrize("workers", [1, 2, 7])
def test_total_count_is_the_pods_per_instance(workers: int) -> None:
    pods = instance(replica(gang(workers, labels=QUEUED)))
    assert len(pods) == workers + 1
    assert {annotations(p)[ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT] for p in pods} == {
        str(workers + 1)
    }


def test_the_group_sits_beside_the_scheduler_plugins_pod_group() -> None:
    pods = instance(replica(gang(1, labels=QUEUED)), index=2, incarnation=3, use_pod_group=True)
    for p in pods:
        assert labels(p)[LABEL_POD_GROUP] == pod_group_name("chat-engine", 2, 3)
        assert labels(p)[LABEL_POD_GROUP] == "chat-engine-2-3"
        assert labels(p)[LABEL_KUEUE_POD_GROUP] == f"chat-engine-2-3-{HASH}"


def test_a_restart_or_a_surge_forms_a_new_group() -> None:
    ir = replica(gang(1, labels=QUEUED))

    def group(index: int, incarnation: int) -> str:
        names = {labels(p)[LABEL_KUEUE_POD_GROUP]
                 for p in instance(ir, index=index, incarnation=incarnation)}
        assert len(names) == 1
        return names.pop()

    first = group(0, 1)
    restarted = group(0, 2)  # a whole-Instance restart bumps the incarnation
    surge = group(2, 1)  # a gang surge (or migration) replacement is a new index
    assert len({first, restarted, surge}) == 3
    assert (first, restarted, surge) == (f"chat-engine-0-1-{HASH}", f"chat-engine-0-2-{HASH}",
                                      f"chat-engine-2-1-{HASH}")
    assert group(0, 1) == first  # a pod replaced within the attempt rejoins its group
    # the PodGroup is per attempt too, but names no revision: it cannot be the Kueue group
    assert pod_group_name("chat-engine", 0, 1) == "chat-engine-0-1"


def test_an_instance_reusing_a_freed_index_at_another_revision_forms_another_group() -> None:
    # an update's surge Instance may take index 2 while the old Instance 2 (same
    # incarnation, the old revision) is still being retired: their Kueue Workloads differ
    ir = replica(gang(1, labels=QUEUED))
    old = {labels(p)[LABEL_KUEUE_POD_GROUP] for p in instance(ir, index=2)}
    new = {labels(p)[LABEL_KUEUE_POD_GROUP]
           for p in (render_pod(ir, runners=ir.spec.runners, revision_hash="fedcba9876", index=2,
                                incarnation=1, slot=slot, replicas=2, use_pod_group=False)
                     for slot in instance_slots(ir.spec.runners))}
    assert old == {f"chat-engine-2-1-{HASH}"}
    assert new == {"chat-engine-2-1-fedcba9876"}


def test_names_of_different_replicas_do_not_collide() -> None:
    seen = {kueue_pod_group_name(prefix, index, inc, rev)
            for prefix in ("chat-engine", "chat-engine-1", "chat-decoder")
            for index in range(3) for inc in range(1, 4) for rev in (HASH, "9876543210")}
    assert len(seen) == 3 * 3 * 3 * 2


# ---------------------------------------------------------------------------- no group


def test_single_pod_instances_get_no_group() -> None:
    ir = replica(single(labels=QUEUED))
    for ordinal_slot in (0, 1):
        (pod,) = instance(ir, ordinal_slot=ordinal_slot)
        assert labels(pod)[LABEL_KUEUE_QUEUE] == "llm"
        assert LABEL_KUEUE_POD_GROUP not in labels(pod)
        assert ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT not in annotations(pod)


@pytest.mark.parametrize("queue", [None, ""], ids=["absent", "empty"])
def test_a_gang_without_a_queue_gets_no_group(queue: str | None) -> None:
    extra = {} if queue is None else {LABEL_KUEUE_QUEUE: queue}
    for pod in instance(replica(gang(2, labels=extra))):
        assert LABEL_KUEUE_POD_GROUP not in labels(pod)
        assert ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT not in annotations(pod)
        assert "annotations" not in pod["metadata"]  # nothing added to an empty set


# ---------------------------------------------------------------------------- the template's own


def test_a_static_group_in_the_template_is_overridden_on_a_gang() -> None:
    tpl: dict[str, Any] = {
        "labels": {**QUEUED, LABEL_KUEUE_POD_GROUP: "everyone"},
        "annotations": {ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT: "99",
                        ANNOTATION_KUEUE_POD_GROUP_NAME: "everyone", "team": "llm"},
    }
    a = instance(replica(gang(1, **tpl)), index=0)
    b = instance(replica(gang(1, **tpl)), index=1)
    for pods, name in ((a, f"chat-engine-0-1-{HASH}"), (b, f"chat-engine-1-1-{HASH}")):
        for p in pods:
            assert labels(p)[LABEL_KUEUE_POD_GROUP] == name
            assert annotations(p) == {ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT: "2",
                                      ANNOTATION_KUEUE_POD_GROUP_SERVING: "true",
                                      ANNOTATION_KUEUE_POD_GROUP_NAME: name, "team": "llm"}


def test_the_templates_own_group_keys_are_left_alone_where_omenative_sets_none() -> None:
    own_labels = {LABEL_KUEUE_POD_GROUP: "mine"}
    own_annotations = {ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT: "3"}
    (pod,) = instance(replica(single(labels={**QUEUED, **own_labels},
                                     annotations=own_annotations)))
    assert labels(pod)[LABEL_KUEUE_POD_GROUP] == "mine"
    assert annotations(pod) == own_annotations
    for pod in instance(replica(gang(2, labels=own_labels, annotations=own_annotations))):
        assert labels(pod)[LABEL_KUEUE_POD_GROUP] == "mine"  # no queue: not ours to manage
        assert annotations(pod) == own_annotations


# ---------------------------------------------------------------------------- revisions


def test_the_revision_hash_of_a_queued_template_is_unchanged() -> None:
    runners = gang(3, labels=QUEUED)
    before = revision_hash(runners, None, None)
    # the value this template hashed to before pod groups existed: no rollout on upgrade
    assert before == "707e9a6aa7"
    assert revision_hash(gang(3), None, None) == "dccf725349"
    ir = replica(runners)
    pods = instance(ir)
    assert LABEL_KUEUE_POD_GROUP in labels(pods[0])
    # rendering reads the template, never writes the group into it
    assert ir.spec.runners == runners
    assert LABEL_KUEUE_POD_GROUP not in runners[0].template["metadata"]["labels"]
    assert "annotations" not in runners[0].template["metadata"]
    assert revision_hash(ir.spec.runners, None, None) == before


# ---------------------------------------------------------------------------- long names


def test_long_names_are_cut_with_a_hash_and_stay_valid_and_distinct() -> None:
    long_a = "a" * 50 + "-engine"
    long_b = "a" * 50 + "-decoder"
    names = {kueue_pod_group_name(prefix, index, inc, HASH)
             for prefix in (long_a, long_b, "b" * 80, "c-" * 30 + "engine")
             for index in (0, 7, 123)
             for inc in (1, 2, 40000)}
    assert len(names) == 4 * 3 * 3
    for name in names:
        assert len(name) <= MAX_NAME_LENGTH
        assert _DNS_LABEL.match(name), name
    cut = kueue_pod_group_name(long_a, 7, 40000, HASH)
    assert cut.endswith(f"-7-40000-{HASH}") and cut.startswith("a" * 20)
    assert cut == kueue_pod_group_name(long_a, 7, 40000, HASH)  # deterministic
    # at the limit nothing is cut
    at_limit = "p" * (MAX_NAME_LENGTH - len(f"-1-1-{HASH}"))
    assert kueue_pod_group_name(at_limit, 1, 1, HASH) == f"{at_limit}-1-1-{HASH}"
    assert len(kueue_pod_group_name(at_limit + "p", 1, 1, HASH)) == MAX_NAME_LENGTH


def test_a_long_prefix_renders_a_valid_group_label() -> None:
    name = "x" * 40 + "-engine"
    pods = instance(replica(gang(1, labels=QUEUED), name=name, parent=None),
                    index=3, incarnation=123456789)
    (group,) = {labels(p)[LABEL_KUEUE_POD_GROUP] for p in pods}
    assert len(group) <= MAX_NAME_LENGTH and _DNS_LABEL.match(group)
    assert group.endswith(f"-3-123456789-{HASH}")


# ---------------------------------------------------------------------------- the planner


def _manifest(queue: bool) -> dict[str, Any]:
    meta = {"metadata": {"labels": dict(QUEUED)}} if queue else {}
    tpl = {**meta, "spec": {"containers": [{
        "name": "ome-container", "image": "img:1",
        "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    return {"metadata": {"name": "chat-engine", "namespace": "ns"},
            "spec": {"component": "engine", "replicas": 2,
                     "runners": [{"name": "leader", "template": tpl},
                                 {"name": "worker", "size": 1, "template": tpl}]}}


def _world(queue: bool) -> World:
    return World(ClusterSpec(nodes=8, gpus_per_node=2, pod_start_seconds=2,
                             pod_ready_seconds=2), _manifest(queue), config=LifecycleConfig())


def test_the_planner_creates_grouped_pods_under_the_templates_revision() -> None:
    world = _world(queue=True)
    first = plan(world.snapshot())
    pods = [a.body for a in first.actions if isinstance(a, CreatePod)]
    assert len(pods) == 4
    by_group: dict[str, int] = {}
    for body in pods:
        group = labels(body)[LABEL_KUEUE_POD_GROUP]
        by_group[group] = by_group.get(group, 0) + 1
        assert annotations(body)[ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT] == "2"
    # the revision is the template's hash, queue label and all, and nothing else
    runners = world.replica.spec.runners
    rev = revision_hash(runners, None, None)
    assert {labels(b)["ome.io/revision-hash"] for b in pods} == {rev}
    assert by_group == {f"chat-engine-0-1-{rev}": 2, f"chat-engine-1-1-{rev}": 2}


def test_running_pods_without_the_group_keys_are_left_untouched() -> None:
    """Pods created before pod groups existed: no patch, no drain, no recreate."""
    world = _world(queue=True)
    run_world(world, 120)
    snap = world.snapshot()
    assert plan(snap).actions == ()
    assert all(LABEL_KUEUE_POD_GROUP in p.labels for p in snap.pods)
    old_pods = tuple(
        evolve(
            p,
            labels={k: v for k, v in p.labels.items() if k != LABEL_KUEUE_POD_GROUP},
            annotations={k: v for k, v in p.annotations.items()
                         if k not in (ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT,
                                      ANNOTATION_KUEUE_POD_GROUP_SERVING)},
        )
        for p in snap.pods
    )
    upgraded = evolve(snap, pods=old_pods)
    assert all(LABEL_KUEUE_POD_GROUP not in p.labels for p in upgraded.pods)
    p = plan(upgraded)
    assert p.actions == ()
    assert p.status == upgraded.replica.status
    assert p.status.ready_replicas == 2
    # and the stored revision is the one the template hashes to
    (rev,) = {r.name for r in upgraded.revisions}
    assert hash_of(rev) == revision_hash(world.replica.spec.runners, None, None)


def test_the_planner_groups_nothing_without_a_queue() -> None:
    first = plan(_world(queue=False).snapshot())
    pods = [a.body for a in first.actions if isinstance(a, CreatePod)]
    assert len(pods) == 4
    assert not any(LABEL_KUEUE_POD_GROUP in labels(b) for b in pods)
    assert not any(ANNOTATION_KUEUE_POD_GROUP_TOTAL_COUNT in annotations(b) for b in pods)

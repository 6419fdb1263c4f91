"""Properties of the InferenceService layer over generated services and runtimes."""

from __future__ import annotations

import copy
import math
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from omenative_core.codec import spec_from_json
from omenative_core.revisions import revision_hash
from omenative_core.service import (
    CRD_LEADER_WORKER_SET,
    CRD_POD_GROUP,
    CRD_POD_MONITOR,
    PdbPolicy,
    isvc_from_json,
    merge_json,
    omenative_min_available,
    render_service,
    runtime_from_json,
    service_status,
    with_status,
)

NOW = datetime(2025, 6, 1, tzinfo=UTC)

scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=6)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text("abc", min_size=1, max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
# "x"-prefixed keys never collide with a field OME or omenative reads
extra_keys = st.from_regex(r"x[A-Za-z0-9]{1,8}", fullmatch=True)
extras = st.dictionaries(extra_keys, json_values, max_size=3)
modes = st.sampled_from(["OMENative", "RawDeployment", None])
crd_sets = st.sets(st.sampled_from([CRD_POD_MONITOR, CRD_POD_GROUP, CRD_LEADER_WORKER_SET]))

RUNTIME = runtime_from_json(
    {
        "kind": "ClusterServingRuntime",
        "metadata": {"name": "srt"},
        "spec": {
            "engineConfig": {"runner": {"image": "sglang:1"}, "leader": {}, "worker": {"size": 1}},
            "routerConfig": {"runner": {"image": "router:1"}},
        },
    }
)


def build(
    top: dict[str, Any],
    meta: dict[str, Any],
    spec: dict[str, Any],
    engine: dict[str, Any],
    status: dict[str, Any],
    mode: str | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "runtime": {"name": "srt"},
        "engine": {"minReplicas": 2, **engine},
        "router": {},
        **spec,
    }
    if mode is not None:
        body["deploymentMode"] = mode
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": "prod", "uid": "u", **meta},
        "spec": body,
        "status": dict(status),
        **top,
    }


@given(
    top=extras, meta=extras, spec=extras, engine=extras, status=extras, mode=modes, crds=crd_sets
)
def test_unknown_fields_survive_render_and_write_back(
    top: dict[str, Any],
    meta: dict[str, Any],
    spec: dict[str, Any],
    engine: dict[str, Any],
    status: dict[str, Any],
    mode: str | None,
    crds: set[str],
) -> None:
    raw = build(top, meta, spec, engine, status, mode)
    isvc = isvc_from_json(copy.deepcopy(raw))
    plan = render_service(isvc, [RUNTIME], crds)
    out = with_status(isvc, service_status(isvc, plan, {}, NOW))
    for key, value in top.items():
        assert out[key] == value
    for key, value in meta.items():
        assert out["metadata"][key] == value
    for key, value in spec.items():
        assert out["spec"][key] == value
    for key, value in engine.items():
        assert out["spec"]["engine"][key] == value
    for key, value in status.items():
        assert out["status"][key] == value
    # an unknown component field is a pod field: every pod template of the engine carries it
    engine_plan = plan.component("engine")
    assert engine_plan is not None
    if engine_plan.replica is not None:
        templates = [r.template for r in spec_from_json(engine_plan.replica["spec"]).runners]
    else:
        deployment = engine_plan.object("Deployment")
        assert deployment is not None
        templates = [deployment["spec"]["template"]]
    for template in templates:
        for key, value in engine.items():
            if value is not None:
                assert template["spec"][key] == value


@given(engine=extras, mode=modes, crds=crd_sets, current=st.integers(0, 9))
def test_rendering_is_deterministic_and_pure(
    engine: dict[str, Any], mode: str | None, crds: set[str], current: int
) -> None:
    raw = build({}, {}, {}, {"maxReplicas": 5, **engine}, {}, mode)
    isvc = isvc_from_json(raw)
    before = copy.deepcopy(raw), copy.deepcopy(dict(RUNTIME.raw))
    first = render_service(isvc, [RUNTIME], crds, current_replicas={"engine": current})
    second = render_service(isvc, [RUNTIME], crds, current_replicas={"engine": current})
    assert first == second
    assert (raw, dict(RUNTIME.raw)) == before


lifecycles = st.fixed_dictionaries(
    {},
    optional={
        "restartPolicy": st.sampled_from(["None", "RecreateInstanceOnPodRestart"]),
        "instanceReadyTimeout": st.sampled_from(["5m", "1h", "0s"]),
        "minReadySeconds": st.integers(0, 600),
        "updateStrategy": st.fixed_dictionaries(
            {"type": st.sampled_from(["SurgeThenDrain", "RecreatePod", "InPlaceIfPossible"])}
        ),
    },
)


def _engine_hash(engine: dict[str, Any], image: str, current: int | None = None) -> str:
    rt = copy.deepcopy(dict(RUNTIME.raw))
    rt["spec"]["engineConfig"]["runner"]["image"] = image
    isvc = isvc_from_json(build({}, {}, {"deploymentMode": "OMENative"}, engine, {}, None))
    plan = render_service(
        isvc,
        [runtime_from_json(rt)],
        [],
        current_replicas={} if current is None else {"engine": current},
    )
    cp = plan.component("engine")
    assert cp is not None and cp.replica is not None
    spec = spec_from_json(cp.replica["spec"])
    return revision_hash(spec.runners, spec.pairing_protocol, None)


@given(
    low=st.integers(1, 6),
    room=st.integers(0, 4),
    current=st.integers(0, 12),
    lifecycle=lifecycles,
    image=st.sampled_from(["sglang:1", "sglang:2", "vllm:1"]),
)
def test_only_the_templates_decide_the_revision(
    low: int, room: int, current: int, lifecycle: dict[str, Any], image: str
) -> None:
    base = _engine_hash({}, "sglang:1")
    scaled = _engine_hash(
        {"minReplicas": low, "maxReplicas": low + room, "lifecycle": lifecycle}, "sglang:1", current
    )
    assert scaled == base
    assert (_engine_hash({}, image) == base) == (image == "sglang:1")


budgets = st.integers(0, 25) | st.integers(0, 100).map(lambda p: f"{p}%")


@given(instances=st.integers(1, 30), pods=st.integers(1, 9), budget=budgets, as_max=st.booleans())
def test_pdb_min_available_is_omes_pod_count(
    instances: int, pods: int, budget: int | str, as_max: bool
) -> None:
    """As OME's ``NormalizeOMENativeBudget``: the budget counted in pods of the desired
    Instances, percentages rounded up; never more than can be evicted."""
    policy = PdbPolicy(max_unavailable=budget) if as_max else PdbPolicy(min_available=budget)
    min_available = omenative_min_available(policy, instances, pods)
    desired = instances * pods
    scaled = math.ceil(desired * int(budget[:-1]) / 100) if isinstance(budget, str) else budget
    if as_max:
        assert min_available == max(desired - scaled, 0)
        assert 0 <= min_available <= desired
    else:
        assert min_available == scaled


trees = st.recursive(
    st.integers(0, 3) | st.text("xyz", max_size=2),
    lambda inner: st.dictionaries(st.sampled_from("abcd"), inner | st.none(), max_size=3),
    max_leaves=8,
)


@given(
    base=st.dictionaries(st.sampled_from("abcd"), trees, max_size=4),
    override=st.dictionaries(st.sampled_from("abcd"), trees | st.none(), max_size=4),
)
def test_merge_service_leaves_win_and_runtime_only_fields_stay(
    base: dict[str, Any], override: dict[str, Any]
) -> None:
    merged = merge_json(base, override)

    def check(b: Any, o: Any, m: Any) -> None:
        for key, value in o.items():
            if value is None:
                continue
            if isinstance(value, dict) and isinstance(b.get(key), dict):
                check(b[key], value, m[key])
            else:
                assert m[key] == value
        for key, value in b.items():
            if o.get(key) is None:
                assert m[key] == value

    check(base, override, merged)

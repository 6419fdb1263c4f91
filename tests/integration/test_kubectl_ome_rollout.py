"""``kubectl ome rollout status|explain|history|promote|rollback|repin`` on an InferenceService
with rollout groups, as a user runs them: the real kubectl finds the plugin and talks to the
test cluster.

No controller runs: the test writes what the InferenceService controller would, through
the status subresource (``status.rollout = state_to_json(decide(...).state)``, each
component's ``traffic`` and ``lifecycle.rolloutHold``), the members' InferenceReplicas with
their status, and their ControllerRevisions. The verbs only read that and write annotations.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from omenative_controller import service_crds
from omenative_controller.cli.kubectl_ome import INFERENCE_SERVICES
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import CONTROLLER_REVISIONS, INFERENCE_REPLICAS
from omenative_core.codec import to_json
from omenative_core.model.status import InferenceReplicaStatus, InstanceStatus
from omenative_core.rollout import (
    MemberView,
    RolloutDecision,
    decide,
    parse_rollout,
    plan_token,
    state_to_json,
)
from omenative_core.status.wire import status_to_json

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import REPO, apply_crd  # noqa: E402
from test_kubectl_ome import Kubectl  # noqa: E402
from test_kubectl_ome import kubectl as kubectl_on_path  # noqa: E402, F401 - a fixture

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

T0 = datetime(2026, 1, 1, tzinfo=UTC)
E1, E2 = "llama-engine-aaaaaaaaaa", "llama-engine-bbbbbbbbbb"
D1, D2 = "llama-decoder-cccccccccc", "llama-decoder-dddddddddd"
R1 = "llama-router-eeeeeeeeee"
ROLLOUT: JSON = {"groups": [
    {"components": ["engine", "decoder"], "canary": {"steps": [
        {"capacity": "25%", "traffic": 25, "pause": {}},
        {"capacity": "50%", "traffic": 50, "pause": {"duration": "10m"}},
        {"capacity": "100%", "traffic": 100}]}},
    {"components": ["router"], "rollingUpdate": {"maxSurge": 1}}]}
DESIRED = {"engine": 4, "decoder": 2, "router": 1}


@pytest.fixture
def kubectl(kubectl_on_path: Kubectl) -> Kubectl:  # noqa: F811 - the imported fixture
    """``kubectl`` with ``kubectl-ome`` on PATH, talking to the test cluster."""
    return kubectl_on_path


@pytest.fixture(scope="session")
async def isvc_crd(kube: KubeClient) -> str:
    """The InferenceService CRD (status subresource), Established."""
    return await apply_crd(kube, REPO / service_crds.OME_INFERENCE_SERVICE.file)


def views(on: dict[str, dict[str, int]], latest: dict[str, str]) -> dict[str, MemberView]:
    """Member views: Ready Instances per revision, and the revision each spec renders."""
    stable = {"engine": E1, "decoder": D1, "router": R1}
    return {c: MemberView(component=c, desired=DESIRED[c], revision=latest[c],
                          current_revision=stable[c], update_revision=latest[c],
                          instances=on[c], ready=on[c], serving=on[c])
            for c in DESIRED}


def paused_at_step_one() -> RolloutDecision:
    """decide() as the controller runs it: stable, new revisions appear, the 25% canary is
    Ready, so the group waits at step 1's manual pause."""
    spec = parse_rollout(ROLLOUT)
    stable = {"engine": E1, "decoder": D1, "router": R1}
    new = {"engine": E2, "decoder": D2, "router": R1}
    d = decide(spec, None, views({"engine": {E1: 4}, "decoder": {D1: 2}, "router": {R1: 1}},
                                 stable), T0)
    d = decide(spec, d.state, views({"engine": {E1: 4}, "decoder": {D1: 2},
                                     "router": {R1: 1}}, new), T0 + timedelta(minutes=1))
    on = {"engine": {E1: 3, E2: 1}, "decoder": {D1: 1, D2: 1}, "router": {R1: 1}}
    d = decide(spec, d.state, views(on, new), T0 + timedelta(minutes=2))
    assert [(g.phase, g.gate) for g in d.state.groups] == [("Paused", "Manual"), ("Stable", "")]
    return d


def replica(namespace: str, component: str, rows: list[str], current: str,
            update: str) -> tuple[JSON, JSON]:
    """A projected InferenceReplica ``llama-<component>`` and the status the manager would
    write: one Ready single-pod Instance per entry of ``rows`` (its revision)."""
    body: JSON = {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
        "metadata": {"name": f"llama-{component}", "namespace": namespace},
        "spec": {"component": component, "replicas": DESIRED[component],
                 "parentRef": {"name": "llama"},
                 "runners": [{"name": "default", "size": 1, "template": {"spec": {
                     "containers": [{"name": "ome-container", "image": "example.com/llm:1"}]}}}]},
    }
    status = InferenceReplicaStatus(
        replicas=len(rows), ready_replicas=len(rows), serving_replicas=len(rows),
        available_replicas=len(rows), updated_replicas=sum(r == update for r in rows),
        updated_ready_replicas=sum(r == update for r in rows),
        current_revision=current, update_revision=update,
        instances=tuple(InstanceStatus(index=i, incarnation=1, phase="Ready",
                                       running_revision=r, target_revision=r, pod_count=1,
                                       serving_pod_count=1, available_pod_count=1,
                                       admitted=True)
                        for i, r in enumerate(rows)))
    return body, status_to_json(status)


def controller_revision(namespace: str, component: str, name: str, number: int) -> JSON:
    """A ControllerRevision as the manager writes it for ``llama-<component>``."""
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": name, "namespace": namespace, "labels": {
                "ome.io/inferenceservice": "llama", "component": component,
                "ome.io/managed-by": "OMENative", "ome.io/inferencereplica": f"llama-{component}",
                "ome.io/revision-hash": name.rsplit("-", 1)[1]}},
            "revision": number, "data": {"runners": [], "pairingProtocol": None}}


async def create_world(kube: KubeClient, namespace: str, rollout: JSON | None = ROLLOUT,
                       name: str = "llama") -> RolloutDecision:
    """The InferenceService with its rollout status, the members and their revisions."""
    meta: JSON = {"name": name, "namespace": namespace}
    spec: JSON = {"deploymentMode": "OMENative", "model": {"name": "llama"}}
    if rollout is not None:
        spec["rollout"] = rollout
    await kube.create(INFERENCE_SERVICES, {"apiVersion": "ome.io/v1beta1",
                                           "kind": "InferenceService", "metadata": meta,
                                           "spec": spec}, namespace)
    d = paused_at_step_one()
    if rollout is None:
        return d
    for comp, rows, cur, upd in (("engine", [E1, E1, E1, E2], E1, E2),
                                 ("decoder", [D1, D2], D1, D2), ("router", [R1], R1, R1)):
        body, status = replica(namespace, comp, rows, cur, upd)
        await kube.create(INFERENCE_REPLICAS, body, namespace)
        await kube.patch(INFERENCE_REPLICAS, f"llama-{comp}", {"status": status}, namespace,
                         subresource="status")
    for comp, rev, number in (("engine", E1, 1), ("engine", E2, 2), ("decoder", D1, 1),
                              ("decoder", D2, 2), ("router", R1, 1)):
        await kube.create(CONTROLLER_REVISIONS, controller_revision(namespace, comp, rev, number),
                          namespace)
    components: JSON = {}
    for comp, cd in d.components.items():
        entry: JSON = {"traffic": [to_json(t) for t in cd.traffic]}
        if cd.hold is not None:
            entry["lifecycle"] = {"rolloutHold": to_json(cd.hold)}
        components[comp] = entry
    components["engine"]["lifecycle"] = {"rolloutHold": {
        "gate": "Budget", "reason": "no surge room", "since": "2026-01-01T00:02:00Z"}}
    await kube.patch(INFERENCE_SERVICES, name, {"status": {
        "rollout": state_to_json(d.state), "components": components}}, namespace,
        subresource="status")
    return d


async def get_isvc(kube: KubeClient, namespace: str, name: str = "llama") -> JSON:
    """The InferenceService as the API server has it."""
    return await kube.get(INFERENCE_SERVICES, name, namespace)


def annotations(obj: JSON) -> dict[str, str]:
    """The object's annotations."""
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def row(text: str, first: str) -> list[str]:
    """The first line of ``text`` whose first word is ``first``, split."""
    return next(line.split() for line in text.splitlines() if line.split()[:1] == [first])


async def test_status_explain_and_history_read_the_rollout(
    kube: KubeClient, namespace: str, ir_crd: str, isvc_crd: str, kubectl: Kubectl
) -> None:
    d = await create_world(kube, namespace)
    text = await kubectl.ok("rollout", "status", "llama")
    assert text.splitlines()[0] == f"Rollout:   inferenceservice {namespace}/llama"
    assert f"Plan:      {d.state.plan_token} pinned" in text
    assert row(text, "0") == ["0", "engine+decoder", "canary", "Paused", "1/3", "Manual", "-"]
    assert row(text, "1") == ["1", "router", "rollingUpdate", "Stable", "-", "-", "-"]
    assert row(text, "engine") == ["engine", "0", "aaaaaaaaaa", "bbbbbbbbbb", "-", "1/1/4",
                                   "aaaaaaaaaa", "75%", "stable,", "bbbbbbbbbb", "25%",
                                   "canary", "Budget"]
    assert row(text, "decoder")[:8] == ["decoder", "0", "cccccccccc", "dddddddddd", "-",
                                        "1/1/2", "cccccccccc", "50%"]
    assert "  engine: Budget: no surge room, since 2026-01-01T00:02:00Z" in text

    data = json.loads(await kubectl.ok("rollout", "status", "llama", "-o", "json"))
    assert data["kind"] == "InferenceService" and data["planToken"] == d.state.plan_token
    assert data["drifted"] is False and data["requests"] == {}
    engine = data["groups"][0]["members"][0]
    assert (engine["canary"], engine["readyOnCanary"], engine["allowed"]) == (E2, 1, 1)

    explained = await kubectl.ok("rollout", "explain", "llama")
    assert explained == ("group 0 (engine+decoder) Paused at step 1/3: manual pause; release "
                         "with kubectl ome rollout promote (ome.io/rollout-promote=bbbbbbbbbb)"
                         "\n")

    history = await kubectl.ok("rollout", "history", "llama")
    assert row(history, "COMPONENT") == ["COMPONENT", "REVISION", "NAME", "CREATED", "ROLE",
                                         "INSTANCES"]
    lines = [line.split() for line in history.splitlines()[1:]]
    assert [(r[0], r[1], r[2], r[-2], r[-1]) for r in lines] == [
        ("engine", "1", E1, "stable,current", "3"), ("engine", "2", E2, "canary,update", "1"),
        ("decoder", "1", D1, "stable,current", "1"), ("decoder", "2", D2, "canary,update", "1"),
        ("router", "1", R1, "stable,current", "1")]
    assert all(r[4] == "ago" for r in lines[:4])  # CREATED is an age: "12s ago"
    hist = json.loads(await kubectl.ok("rollout", "history", "llama", "-o", "json"))
    assert [r["roles"] for r in hist["components"][0]["revisions"]] == [
        ["stable", "current"], ["canary", "update"]]

    # a standalone InferenceReplica name still gets the replica's rollout status
    replica_text = await kubectl.ok("rollout", "status", "llama", "--component", "engine")
    assert replica_text.startswith("Rollout:    llama-engine (engine)")


async def test_promote_rollback_repin_write_guarded_annotations(
    kube: KubeClient, namespace: str, ir_crd: str, isvc_crd: str, kubectl: Kubectl
) -> None:
    d = await create_world(kube, namespace)
    before = await get_isvc(kube, namespace)

    # without --yes, "n" (or no answer) writes nothing
    rc, out, err = await kubectl.ome("rollout", "promote", "llama", stdin=b"n\n")
    assert rc == 1 and "nothing was changed" in err, (out, err)
    assert (f"inferenceservice {namespace}/llama (resourceVersion "
            f"{before['metadata']['resourceVersion']}) will change:") in out
    assert "metadata.annotations[ome.io/rollout-promote]: (unset) -> 'bbbbbbbbbb'" in out
    assert "[y/N]" in out
    rc, _, _ = await kubectl.ome("rollout", "rollback", "llama")
    assert rc == 1
    after = await get_isvc(kube, namespace)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]

    # repin while the run follows the spec's plan: refused, nothing written
    rc, _, err = await kubectl.ome("rollout", "repin", "llama", "--yes")
    assert rc == 3 and f"the run already follows {d.state.plan_token}" in err
    assert err.count("\n") == 1
    rc, _, err = await kubectl.ome("rollout", "repin", "llama", "--token", "rp1:XYZ", "--yes")
    assert rc == 2 and "expected rp1:<12 hex digits> or now" in err

    # promote --yes: the canary hash lands; again is a no-op; --override-analysis adds its own
    out = await kubectl.ok("rollout", "promote", "llama", "--yes")
    assert "promote of group 0 (engine+decoder) requested" in out
    assert annotations(await get_isvc(kube, namespace))["ome.io/rollout-promote"] == \
        "bbbbbbbbbb"
    assert "already requested: nothing to do" in await kubectl.ok("rollout", "promote",
                                                                  "llama", "--yes")
    await kubectl.ok("rollout", "promote", "llama", "--override-analysis", "--yes")
    ann = annotations(await get_isvc(kube, namespace))
    assert ann["ome.io/rollout-override-analysis"] == "true"
    status = await kubectl.ok("rollout", "status", "llama")
    assert "Requests:  ome.io/rollout-promote=bbbbbbbbbb, ome.io/rollout-override-analysis=" \
           "true (not yet consumed by the controller)" in status

    # the spec's plan changes: repin --yes names the new token
    edited = json.loads(json.dumps(ROLLOUT))
    edited["groups"][1]["rollingUpdate"]["maxSurge"] = 2
    await kube.patch(INFERENCE_SERVICES, "llama", {"spec": {"rollout": edited}}, namespace)
    token = plan_token(parse_rollout(edited))
    assert f"plan drifted (pinned {d.state.plan_token}, spec {token})" in \
        await kubectl.ok("rollout", "explain", "llama")
    rc, _, err = await kubectl.ome("rollout", "repin", "llama", "--token", "rp1:000000000000",
                                   "--yes")
    assert rc == 3 and f"is not the current plan (spec.rollout is {token})" in err
    out = await kubectl.ok("rollout", "repin", "llama", "--yes")
    assert f"(moves the run from plan {d.state.plan_token} to {token})" in out
    assert annotations(await get_isvc(kube, namespace))["ome.io/rollout-repin"] == token

    # rollback --yes; then promote, repin, rollback, pause and scale are refused
    out = await kubectl.ok("rollout", "rollback", "llama", "--yes")
    assert "(rolls back group 0 (engine+decoder): engine bbbbbbbbbb -> aaaaaaaaaa)" in out
    after = await get_isvc(kube, namespace)
    assert annotations(after)["ome.io/rollout-rollback"] == "true"
    rv = after["metadata"]["resourceVersion"]
    for verb in ("promote", "repin", "rollback"):
        rc, _, err = await kubectl.ome("rollout", verb, "llama", "--yes")
        assert rc == 3 and err.count("\n") == 1, (verb, err)
        assert (f"a rollback is requested (ome.io/rollout-rollback=true): {verb} is refused"
                in err)
    rc, _, err = await kubectl.ome("scale", "llama", "--component", "engine", "5", "--yes")
    assert rc == 3 and "scale is refused during a rollback" in err
    rc, _, err = await kubectl.ome("rollout", "pause", "llama-engine", "--yes")
    assert rc == 3 and "pause is refused during a rollback" in err
    assert (await get_isvc(kube, namespace))["metadata"]["resourceVersion"] == rv
    ir = await kube.get(INFERENCE_REPLICAS, "llama-engine", namespace)
    assert ir["spec"]["replicas"] == 4 and not ir["spec"].get("paused")


async def test_promote_is_refused_when_another_promote_lands_before_the_answer(
    kube: KubeClient, namespace: str, ir_crd: str, isvc_crd: str, kubectl: Kubectl
) -> None:
    await create_world(kube, namespace)
    # another operator's promote (of another revision) lands first: the change shown is no
    # longer the change, so nothing is written and theirs stays (a change elsewhere, such as
    # the status, would only have the same write sent again)
    rc, err = await kubectl.answer_after(("rollout", "promote", "llama"), lambda: kube.patch(
        INFERENCE_SERVICES, "llama",
        {"metadata": {"annotations": {"ome.io/rollout-promote": "0123456789"}}}, namespace))
    assert rc == 3, err
    assert "changed since it was read" in err and err.count("\n") == 1
    assert annotations(await get_isvc(kube, namespace))["ome.io/rollout-promote"] == \
        "0123456789"


async def test_without_a_rollout_the_verbs_say_so(
    kube: KubeClient, namespace: str, ir_crd: str, isvc_crd: str, kubectl: Kubectl
) -> None:
    await create_world(kube, namespace, rollout=None, name="plain")
    assert await kubectl.ok("rollout", "explain", "plain") == (
        "no rollout groups: spec.rollout is not set, each component rolls on its own\n")
    assert "no rollout groups" in await kubectl.ok("rollout", "status", "plain")
    assert (await kubectl.ok("rollout", "history", "plain")).startswith("no revisions")
    for verb in ("promote", "rollback", "repin"):
        rc, _, err = await kubectl.ome("rollout", verb, "plain", "--yes")
        assert rc == 3 and "no rollout: spec.rollout is not set" in err, (verb, err)
    rc, _, err = await kubectl.ome("rollout", "explain", "nosuch")
    assert rc == 1 and err == f"error: no InferenceService nosuch in namespace {namespace}\n"
    assert not annotations(await get_isvc(kube, namespace, "plain"))


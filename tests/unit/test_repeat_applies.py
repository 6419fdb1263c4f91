"""An apply is skipped only when it would change nothing: the same body as last time, and
the cached object still carries what that apply left. Any kind; a changed body, a user's or
another controller's change to a field we set, a delete, another owner or a restart (a new
memory) applies again; the server's defaults, the status and fields we do not set do not."""

from __future__ import annotations

import copy
from typing import Any

from omenative_controller.repeat_applies import RepeatApplies, carried

OWNER = "ns/chat"


def service(port: int = 8080, kind: str = "Service") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind,
            "metadata": {"name": "chat-router", "namespace": "ns",
                         "labels": {"ome.io/inferenceservice": "chat"}},
            "spec": {"ports": [{"name": "http", "port": port}], "selector": {"app": "r"}}}


def stored(body: dict[str, Any], uid: str = "u1") -> dict[str, Any]:
    """``body`` as the API server keeps it: defaults, status, other managers' fields."""
    out = copy.deepcopy(body)
    out["metadata"].update(uid=uid, resourceVersion="7", generation=1,
                           managedFields=[{"manager": "omenative-isvc"}])
    out["metadata"]["labels"]["team"] = "a"  # another manager's label
    out["spec"]["ports"][0]["protocol"] = "TCP"  # defaulted
    out["spec"]["clusterIP"] = "10.0.0.9"
    out["status"] = {"loadBalancer": {}}
    return out


def applied_once() -> RepeatApplies:
    repeats = RepeatApplies()
    repeats.record(OWNER, service(), stored(service()))
    return repeats


def test_carried_keeps_only_the_paths_the_body_sets() -> None:
    assert carried(stored(service()), service()) == service()
    assert carried({"a": [1, 2, 3]}, {"a": [1, 2]}) == {"a": [1, 2, 3]}  # length differs
    assert carried({"a": "x"}, {"a": {"b": 1}}) == {"a": "x"}  # type differs
    assert carried({}, {"a": 1}) == {}  # missing


def test_the_same_body_on_the_object_as_left_is_skipped() -> None:
    repeats = applied_once()
    live = stored(service())
    live["metadata"]["resourceVersion"] = "9"  # a status write, another manager's label
    live["status"] = {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}
    live["metadata"]["labels"]["other"] = "b"
    assert repeats.unchanged(OWNER, service(), live)
    assert len(repeats) == 1


def test_a_changed_body_is_applied() -> None:
    assert not applied_once().unchanged(OWNER, service(port=9090), stored(service()))


def test_a_user_change_to_a_field_we_set_is_applied_again() -> None:
    live = stored(service())
    live["spec"]["selector"] = {"app": "other"}
    assert not applied_once().unchanged(OWNER, service(), live)
    live = stored(service())
    del live["metadata"]["labels"]["ome.io/inferenceservice"]
    assert not applied_once().unchanged(OWNER, service(), live)


def test_a_deleted_or_recreated_object_is_applied_again() -> None:
    repeats = applied_once()
    assert not repeats.unchanged(OWNER, service(), None)  # not in the cache
    assert not repeats.unchanged(OWNER, service(), stored(service(), uid="u2"))


def test_a_restart_another_owner_or_a_forgotten_owner_applies_again() -> None:
    assert not RepeatApplies().unchanged(OWNER, service(), stored(service()))
    repeats = applied_once()
    assert not repeats.unchanged("ns/other", service(), stored(service()))
    repeats.forget(OWNER)
    assert not repeats.unchanged(OWNER, service(), stored(service()))
    assert len(repeats) == 0


def test_any_kind_is_remembered_by_kind_and_name() -> None:
    repeats = applied_once()
    pdb = service(kind="PodDisruptionBudget")
    assert not repeats.unchanged(OWNER, pdb, stored(pdb))  # same name, another kind
    repeats.record(OWNER, pdb, stored(pdb))
    assert repeats.unchanged(OWNER, pdb, stored(pdb))
    assert repeats.unchanged(OWNER, service(), stored(service()))


def test_a_webhook_field_outside_the_body_does_not_count() -> None:
    """LWS v0.7.0's webhook adds ``creationTimestamp: null`` to pod templates, which the
    read drops again: only what the body sets is compared."""
    body = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "lws-chat-engine", "namespace": "ns"},
            "spec": {"leaderWorkerTemplate": {"workerTemplate": {
                "metadata": {"labels": {"a": "b"}}}}}}
    answer = copy.deepcopy(body)
    answer["metadata"].update(uid="u1", generation=5)
    answer["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"][
        "creationTimestamp"] = None
    repeats = RepeatApplies()
    repeats.record(OWNER, body, answer)
    read = copy.deepcopy(answer)
    del read["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["creationTimestamp"]
    assert repeats.unchanged(OWNER, body, read)

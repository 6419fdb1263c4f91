"""The model-server engine the traffic tests and the demo roll out is a valid
InferenceReplica, and a revision patch changes only what the server answers with."""

from __future__ import annotations

from omenative_core import replica_from_json
from omenative_core.render import validate_replica
from omenative_devcluster.images import MODEL_SERVER_IMAGE
from omenative_devcluster.model_engine import DRAIN_SECONDS, model_replica, revision_patch


def env_of(runner: dict) -> dict[str, object]:  # type: ignore[type-arg]
    c = runner["template"]["spec"]["containers"][0]
    return {v["name"]: v.get("value", v.get("valueFrom")) for v in c["env"]}


def test_engine_is_a_valid_leader_worker_replica_of_the_model_server() -> None:
    body = model_replica("llm", replicas=2, revision="rev-1")
    assert validate_replica(replica_from_json(body)) == ()
    leader, worker = body["spec"]["runners"]
    assert (leader["name"], worker["name"]) == ("leader", "worker")
    c = leader["template"]["spec"]["containers"][0]
    assert c["image"] == MODEL_SERVER_IMAGE and c["imagePullPolicy"] == "Never"
    assert c["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert env_of(leader)["MODEL_REVISION"] == "rev-1"
    # the grace period outlasts the server's drain delay
    assert leader["template"]["spec"]["terminationGracePeriodSeconds"] > DRAIN_SECONDS


def test_single_pod_engine() -> None:
    body = model_replica("one", worker_size=0, load_seconds=3)
    assert [r["name"] for r in body["spec"]["runners"]] == ["default"]
    assert env_of(body["spec"]["runners"][0])["LOAD_SECONDS"] == "3"


def test_revision_patch_changes_only_the_revision() -> None:
    body = model_replica("llm", revision="rev-1")
    patch = revision_patch(body, "rev-2")
    for old, new in zip(body["spec"]["runners"], patch["spec"]["runners"], strict=True):
        assert env_of(new) == {**env_of(old), "MODEL_REVISION": "rev-2"}
    assert env_of(body["spec"]["runners"][0])["MODEL_REVISION"] == "rev-1"  # not mutated

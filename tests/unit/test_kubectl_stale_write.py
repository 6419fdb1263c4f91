"""A ``kubectl ome`` write that meets a resourceVersion conflict after the user confirmed it:
sent again when only the status moved (the manager writes it all the time), refused when the
change the user saw is no longer the change that would be made.

The API server here is a small in-memory one that keeps resourceVersions as a real one does
(every write bumps it; a patch carrying a stale one is a 409 Conflict); between the command's
read and its write, the test changes the stored object the way the manager or another user
would."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner

from omenative_controller.cli import kubectl_common
from omenative_controller.cli.kubectl_ome import cli
from omenative_controller.kube.errors import ApiError
from omenative_core.model.status import InferenceReplicaStatus, InstanceStatus
from omenative_core.status.wire import status_to_json

JSON = dict[str, Any]


class OneObjectServer:
    """One InferenceReplica with server-side resourceVersions; ``meddle`` runs after each of
    the first ``meddle_reads`` reads (as a write landing between a read and a patch)."""

    def __init__(self, obj: JSON, meddle: Callable[[JSON], None], meddle_reads: int) -> None:
        self.obj = obj
        self.meddle = meddle
        self.meddle_reads = meddle_reads
        self.reads = 0
        self.patches: list[JSON] = []
        self.conflicts = 0

    def bump(self) -> None:
        meta = self.obj["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)

    async def get(self, _res: Any, name: str, _ns: str) -> JSON:
        if name != self.obj["metadata"]["name"]:
            raise ApiError(404, "NotFound")
        seen = copy.deepcopy(self.obj)
        self.reads += 1
        if self.reads <= self.meddle_reads:
            self.meddle(self.obj)
            self.bump()
        return seen

    async def patch(self, _res: Any, _name: str, body: JSON, _ns: str, *,
                    subresource: str | None = None, dry_run: bool = False) -> JSON:
        rv = body["metadata"].get("resourceVersion")
        if rv != self.obj["metadata"]["resourceVersion"]:
            self.conflicts += 1
            raise ApiError(409, "Conflict", "the object has been modified")
        self.patches.append(body)
        for key, value in body.get("spec", {}).items():
            self.obj["spec"][key] = value
        notes = self.obj["metadata"].setdefault("annotations", {})
        for key, value in (body["metadata"].get("annotations") or {}).items():
            if value is None:
                notes.pop(key, None)
            else:
                notes[key] = value
        self.bump()
        return copy.deepcopy(self.obj)

    async def close(self) -> None:
        return None


def replica(replicas: int = 2) -> JSON:
    """A settled replica: every Instance Ready on revision r1, written as the manager does."""
    rows = tuple(InstanceStatus(index=i, incarnation=1, phase="Ready", running_revision="r1",
                                target_revision="r1", pod_count=1, serving_pod_count=1,
                                available_pod_count=1) for i in range(replicas))
    status = InferenceReplicaStatus(replicas=replicas, updated_replicas=replicas,
                                    ready_replicas=replicas, current_revision="r1",
                                    update_revision="r1", instances=rows)
    return {"kind": "InferenceReplica",
            "metadata": {"name": "ko", "namespace": "ns", "resourceVersion": "100",
                         "generation": 1},
            "spec": {"replicas": replicas, "component": "engine"},
            "status": status_to_json(status)}


def run(server: OneObjectServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
        *args: str, stdin: str = "") -> Any:
    async def connect(*_: Any, **__: Any) -> OneObjectServer:
        return server

    monkeypatch.setattr(kubectl_common.KubeClient, "connect", connect)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    return CliRunner().invoke(cli, [*args, "--kubeconfig", str(kubeconfig), "-n", "ns"],
                              input=stdin, standalone_mode=False)


def status_write(obj: JSON) -> None:
    obj["status"]["readyReplicas"] = 1 - obj["status"]["readyReplicas"] % 2


def test_scale_is_sent_again_when_only_the_status_moved(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    server = OneObjectServer(replica(), status_write, meddle_reads=2)
    result = run(server, monkeypatch, tmp_path, "scale", "ko", "3", stdin="y\n")
    assert result.exception is None, result.output
    assert server.conflicts == 2 and len(server.patches) == 1
    assert server.obj["spec"]["replicas"] == 3
    # asked once, shown once: the retries say why they write again
    assert result.output.count("Apply?") == 1
    assert result.output.count("will change:") == 1
    assert "the change is the same: sending it again" in result.output
    assert "scaled to 3" in result.output


def test_scale_is_refused_when_someone_else_changed_the_count(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    def other_user(obj: JSON) -> None:
        obj["spec"]["replicas"] = 4

    server = OneObjectServer(replica(), other_user, meddle_reads=1)
    result = run(server, monkeypatch, tmp_path, "scale", "ko", "3", "--yes")
    assert isinstance(result.exception, kubectl_common.CliError)
    assert result.exception.code == kubectl_common.EXIT_CONFLICT
    assert "spec.replicas 4 -> 3" in result.exception.message
    assert "nothing was written" in result.exception.message
    assert server.patches == [] and server.obj["spec"]["replicas"] == 4


def test_a_replica_that_never_stops_changing_is_refused_after_the_last_attempt(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    server = OneObjectServer(replica(), status_write, meddle_reads=1000)
    result = run(server, monkeypatch, tmp_path, "scale", "ko", "3", "--yes")
    assert isinstance(result.exception, kubectl_common.StaleWrite)
    assert "nothing was written" in result.exception.message
    assert server.conflicts == kubectl_common.WRITE_ATTEMPTS and server.patches == []


def test_migration_start_keeps_its_request_across_attempts(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    server = OneObjectServer(replica(), status_write, meddle_reads=1)
    sent: list[JSON] = []
    original = server.patch

    async def patch(res: Any, name: str, body: JSON, ns: str, **kw: Any) -> JSON:
        sent.append(body)
        return await original(res, name, body, ns, **kw)

    async def no_pods(*_: Any, **__: Any) -> JSON:
        return {"items": []}

    server.patch = patch  # type: ignore[method-assign]
    server.list = no_pods  # type: ignore[attr-defined]
    result = run(server, monkeypatch, tmp_path, "migration", "start", "ko", "--instance",
                 "0", "--yes")
    assert result.exception is None, result.output
    assert len(sent) == 2 and server.conflicts == 1
    first, second = (body["metadata"]["annotations"] for body in sent)
    assert first == second  # the same request UUID and requestedAt, as confirmed


def isvc() -> JSON:
    """An InferenceService the manager keeps writing the status of."""
    return {"kind": "InferenceService",
            "metadata": {"name": "svc", "namespace": "ns", "resourceVersion": "7",
                         "generation": 1, "annotations": {}},
            "spec": {"engine": {}}, "status": {"observedGeneration": 1}}


def isvc_status_write(obj: JSON) -> None:
    obj["status"]["observedGeneration"] += 1


def test_pausing_a_service_is_sent_again_when_only_its_status_moved(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    server = OneObjectServer(isvc(), isvc_status_write, meddle_reads=2)
    result = run(server, monkeypatch, tmp_path, "rollout", "pause", "svc", "--yes")
    assert result.exception is None, result.output
    assert server.conflicts == 2 and len(server.patches) == 1
    assert server.obj["metadata"]["annotations"] == {"ome.io/rollout-paused": "true"}
    assert "paused (true)" in result.output


def test_pausing_a_service_someone_else_froze_meanwhile_is_refused(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    def other_user(obj: JSON) -> None:
        obj["metadata"]["annotations"]["ome.io/rollout-paused"] = "freeze"

    server = OneObjectServer(isvc(), other_user, meddle_reads=1)
    result = run(server, monkeypatch, tmp_path, "rollout", "pause", "svc", "--yes")
    assert isinstance(result.exception, kubectl_common.CliError)
    assert result.exception.code == kubectl_common.EXIT_CONFLICT
    assert "nothing was written" in result.exception.message
    assert server.patches == []
    assert server.obj["metadata"]["annotations"] == {"ome.io/rollout-paused": "freeze"}

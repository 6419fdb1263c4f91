"""The shell's AutoscalerPolicy cache (``service_policies.py``): the feature follows the CRD,
a policy's spec change queues its users (a status write does not), and the policy status is
written only when it differs."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from omenative_controller.kube.informer import Informer
from omenative_controller.service_controller import INFERENCE_SERVICES
from omenative_controller.service_policies import AUTOSCALER_POLICIES, Policies

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SPEC = {"class": "HPA"}


class _Client:
    def __init__(self) -> None:
        self.patches: list[tuple[str, dict[str, Any]]] = []

    async def patch(self, res: Any, name: str, body: dict[str, Any], namespace: str,
                    subresource: str | None = None) -> dict[str, Any]:
        assert res is AUTOSCALER_POLICIES and subresource == "status"
        self.patches.append((name, body))
        return body


def _isvc(name: str, ref: str | None) -> dict[str, Any]:
    engine: dict[str, Any] = {"minReplicas": 1}
    if ref is not None:
        engine["autoscalerPolicyRef"] = {"name": ref}
    return {"metadata": {"name": name, "namespace": "prod"}, "spec": {"engine": engine}}


def _policy(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": "cpu", "namespace": "prod", "generation": 1},
                            "spec": spec}
    if status is not None:
        body["status"] = status
    return body


def _policies(client: Any, queued: list[str], served: bool = True) -> Policies:
    isvcs: Informer[Any] = Informer(client, INFERENCE_SERVICES, dict)
    isvcs._store.update({"prod/user": _isvc("user", "cpu"), "prod/other": _isvc("other", None)})
    out = Policies(client, None, isvcs, queued.append, providers=dict, now=lambda: NOW)
    if served:
        out.served.informers = {out.informer.name: out.informer}
    return out


def test_the_feature_is_off_until_the_crd_is_served() -> None:
    off = _policies(_Client(), [], served=False)
    assert off.of("prod") is None
    on = _policies(_Client(), [])
    assert on.of("prod") == ()


def test_a_spec_change_queues_the_users_and_a_status_write_does_not() -> None:
    queued: list[str] = []
    policies = _policies(_Client(), queued)
    policies._changed("prod", _policy(SPEC), _policy({"class": "KEDA"}))
    assert queued == ["prod/user"]
    queued.clear()
    policies._changed("prod", _policy(SPEC), _policy(SPEC, {"attachedComponents": 1}))
    assert queued == []
    policies._changed("prod", _policy(SPEC), None)  # deleted: its users hold
    assert queued == ["prod/user"]


@pytest.mark.asyncio
async def test_the_status_is_written_once_and_then_left_alone() -> None:
    client = _Client()
    policies = _policies(client, [])
    policies.informer._store["prod/cpu"] = _policy(SPEC)
    assert await policies.sync() == 1
    ((name, body),) = client.patches
    assert name == "cpu" and body["status"]["attachedComponents"] == 1
    policies.informer._store["prod/cpu"] = _policy(SPEC, body["status"])
    assert await policies.sync() == 0

"""Re-applying an unchanged LeaderWorkerSet is skipped unless its generation moved.

LWS v0.7.0's webhook makes every write of a LeaderWorkerSet bump its ``generation``, so the
InferenceService controller must not re-apply one it already applied as is; anything else
(other kinds, a changed body, a generation someone else moved) is applied as before.
"""

from __future__ import annotations

from typing import Any

from omenative_controller.repeat_applies import RepeatApplies


def lws(replicas: int = 2, namespace: str = "ns") -> dict[str, Any]:
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "lws-chat-engine", "namespace": namespace},
            "spec": {"replicas": replicas}}


def answer(generation: int) -> dict[str, Any]:
    return {"metadata": {"generation": generation}}


def test_the_same_body_again_is_compared_with_the_generation_it_left() -> None:
    repeats = RepeatApplies()
    assert repeats.last_generation(lws()) is None  # never applied: apply it
    repeats.record(lws(), answer(2))
    assert repeats.last_generation(lws()) == 2
    assert repeats.last_generation(lws(replicas=3)) is None  # changed: apply it
    assert repeats.last_generation(lws(namespace="other")) is None  # another object
    repeats.record(lws(replicas=3), answer(3))
    assert repeats.last_generation(lws()) is None  # the old body is no longer the last one


def test_other_kinds_are_always_applied() -> None:
    repeats = RepeatApplies()
    deployment = {**lws(), "apiVersion": "apps/v1", "kind": "Deployment"}
    repeats.record(deployment, answer(1))
    assert repeats.last_generation(deployment) is None

"""A runtime's ``InheritanceReady`` condition and ``inheritanceChain``, as OME v1.3 writes them
(ome-docs ``concepts/runtimes/runtime-inheritance.md`` at 7f641a34, "When a chain breaks")."""

from __future__ import annotations

from typing import Any

import pytest

from omenative_controller.kube.errors import ApiError
from omenative_controller.runtime_status import RuntimeStatusWriter, status_patch
from omenative_controller.service_controller import SERVING_RUNTIMES
from omenative_core.service import runtime_from_json
from omenative_core.service.inheritance import broken_chain_message, inheritance_health


def rt(name: str, parent: str | None = None, **status: Any) -> Any:
    meta: dict[str, Any] = {"name": name, "namespace": "llama-demo", "generation": 3}
    if parent:
        meta["annotations"] = {"ome.io/inherit-from": parent}
    return runtime_from_json({"kind": "ServingRuntime", "metadata": meta, "spec": {},
                              "status": status})


PROFILE = rt("sglang-profile")
CHILD = rt("sglang-llama-3-2-3b", "sglang-profile")


def test_a_resolved_chain_is_listed_root_first() -> None:
    health = inheritance_health(CHILD, [PROFILE, CHILD])
    assert (health.chain, health.ready, health.reason) == (
        ("sglang-profile", "sglang-llama-3-2-3b"), True, "Resolved")
    assert inheritance_health(PROFILE, [PROFILE]).chain == ("sglang-profile",)


def test_a_broken_chain_gives_omes_reasons() -> None:
    missing = inheritance_health(CHILD, [CHILD])
    assert (missing.chain, missing.ready, missing.reason) == (None, False, "ParentNotFound")
    assert missing.message == ('inherit-from parent "sglang-profile" not found '
                               "(chain so far: [sglang-llama-3-2-3b])")
    loop = rt("a", "a")
    assert inheritance_health(loop, [loop]).reason == "InheritanceCycle"
    deep = [rt(f"r{i}", f"r{i + 1}") for i in range(6)] + [rt("r6")]
    assert inheritance_health(deep[0], deep).reason == "MaxDepthExceeded"


def test_the_status_patch_keeps_the_last_chain_while_broken_and_moves_time_on_a_flip() -> None:
    resolved = status_patch(CHILD.raw, inheritance_health(CHILD, [PROFILE, CHILD]), "t1")
    assert resolved is not None
    (cond,) = resolved["conditions"]
    assert cond == {"type": "InheritanceReady", "status": "True", "reason": "Resolved",
                    "message": "inheritance chain resolved: [sglang-profile sglang-llama-3-2-3b]",
                    "lastTransitionTime": "t1", "observedGeneration": 3}
    written = rt("sglang-llama-3-2-3b", "sglang-profile", **resolved)
    assert status_patch(written.raw, inheritance_health(written, [PROFILE, written]),
                        "t2") is None  # nothing to write
    broken = status_patch(written.raw, inheritance_health(written, [written]), "t3")
    assert broken is not None
    assert broken["inheritanceChain"] == ["sglang-profile", "sglang-llama-3-2-3b"]  # kept
    (cond,) = broken["conditions"]
    assert (cond["status"], cond["reason"], cond["lastTransitionTime"]) == (
        "False", "ParentNotFound", "t3")


def test_the_warning_names_the_runtime_and_the_broken_link() -> None:
    missing = inheritance_health(CHILD, [CHILD])
    assert missing.link == ("sglang-llama-3-2-3b", "sglang-profile")
    assert broken_chain_message(CHILD, missing) == (
        "ServingRuntime llama-demo/sglang-llama-3-2-3b: ome.io/inherit-from link "
        "sglang-llama-3-2-3b -> sglang-profile is broken: inherit-from parent "
        '"sglang-profile" not found (chain so far: [sglang-llama-3-2-3b])')
    a, b = rt("a", "b"), rt("b", "a")
    cycle = inheritance_health(a, [a, b])
    assert (cycle.reason, cycle.link) == ("InheritanceCycle", ("b", "a"))


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[dict[str, Any], str, str, str]] = []

    async def record(self, involved: Any, type_: str, reason: str, message: str,
                     *, lg: Any = None) -> bool:
        self.sent.append((dict(involved), type_, reason, message))
        return True


class Cache:
    def __init__(self, objs: list[dict[str, Any]]) -> None:
        self.objs = objs

    def items(self) -> list[tuple[str, dict[str, Any]]]:
        return [(o["metadata"]["name"], o) for o in self.objs]


class NoStatus:
    async def patch(self, *args: Any, **kwargs: Any) -> None:
        raise ApiError(404, "NotFound", "no status subresource")


@pytest.mark.asyncio
async def test_a_broken_chain_is_one_warning_event_until_it_mends() -> None:
    child = {"metadata": {"name": "sglang-llama-3-2-3b", "namespace": "llama-demo",
                          "uid": "u1", "annotations": {"ome.io/inherit-from": "sglang-profile"}},
             "spec": {}}
    cache = Cache([child])
    writer = RuntimeStatusWriter(NoStatus(), [(cache, SERVING_RUNTIMES)])  # type: ignore[arg-type]
    recorder = Recorder()
    writer.events = recorder  # type: ignore[assignment]
    await writer.sync()
    await writer.sync()  # no status subresource: the status never changes, one Event still
    ((involved, type_, reason, message),) = recorder.sent
    assert (involved["kind"], involved["name"], involved["uid"]) == (
        "ServingRuntime", "sglang-llama-3-2-3b", "u1")
    assert (type_, reason) == ("Warning", "ParentNotFound")
    assert "link sglang-llama-3-2-3b -> sglang-profile is broken" in message
    cache.objs.append({"metadata": {"name": "sglang-profile", "namespace": "llama-demo"},
                       "spec": {}})
    await writer.sync()  # mended: forgotten, so a later break warns again
    cache.objs.pop()
    await writer.sync()
    assert len(recorder.sent) == 2

"""A runtime's ``InheritanceReady`` condition and ``inheritanceChain``, as OME v1.3 writes them
(ome-docs ``concepts/runtimes/runtime-inheritance.md`` at 7f641a34, "When a chain breaks")."""

from __future__ import annotations

from typing import Any

from omenative_controller.runtime_status import status_patch
from omenative_core.service import runtime_from_json
from omenative_core.service.inheritance import inheritance_health


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

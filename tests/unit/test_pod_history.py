"""The integration tests' duplicate check fails on duplicates: hand-made pod histories.

``tests/pod_history.assert_no_duplicates`` keys pods by their role slot (Instance, runner,
ordinal: labels), never by name, so a second pod for one slot is caught under any name.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.pod_history import assert_no_duplicates, slot

JSON = dict[str, Any]


def pod(name: str, index: int, runner: str, ordinal: int = 0, *, replica: str = "wd",
        terminating: bool = False) -> JSON:
    meta: JSON = {"name": name, "labels": {
        "ome.io/inferencereplica": replica, "ome.io/instance-index": str(index),
        "ome.io/runner": runner, "ome.io/pod-ordinal": str(ordinal)}}
    if terminating:
        meta["deletionTimestamp"] = "2026-12-06T07:00:00Z"
    return {"metadata": meta}


def history(*events: tuple[str, JSON]) -> list[tuple[str, JSON, dict[str, JSON]]]:
    """As ``PodRecorder.replay`` gives it: each event with the namespace after it."""
    state: dict[str, JSON] = {}
    out = []
    for kind, obj in events:
        if kind == "DELETED":
            state.pop(obj["metadata"]["name"], None)
        else:
            state[obj["metadata"]["name"]] = obj
        out.append((kind, obj, dict(state)))
    return out


def gang(index: int) -> list[tuple[str, JSON]]:
    return [("ADDED", pod(f"wd-{index}-leader-0", index, "leader")),
            ("ADDED", pod(f"wd-{index}-worker-0", index, "worker"))]


def test_a_clean_history_passes_and_counts_its_states() -> None:
    assert assert_no_duplicates(history(*gang(0), *gang(1)), max_live=2) == 4


def test_a_second_leader_for_one_instance_fails_whatever_its_name() -> None:
    twin = pod("wd-0-leader-0-x7k2p", 0, "leader")  # a generateName-style duplicate
    with pytest.raises(AssertionError, match=r"Instance wd/0 leader-0 has 2 live pods"):
        assert_no_duplicates(history(*gang(0), ("ADDED", twin)), max_live=1)


def test_a_worker_beyond_the_gang_fails() -> None:
    extra = pod("wd-0-worker-1", 0, "worker", 1)
    with pytest.raises(AssertionError, match=r"worker-1: no such slot"):
        assert_no_duplicates(history(*gang(0), ("ADDED", extra)), max_live=1)
    assert assert_no_duplicates(history(*gang(0), ("ADDED", extra)), max_live=1,
                                runners={"leader": 1, "worker": 2}) == 3


def test_a_replacement_beside_its_terminating_pod_passes() -> None:
    old = pod("wd-0-worker-0", 0, "worker")
    events = [*gang(0), ("MODIFIED", pod("wd-0-worker-0", 0, "worker", terminating=True)),
              ("DELETED", old), ("ADDED", old)]
    assert assert_no_duplicates(history(*events), max_live=1) == 5


def test_too_many_live_instances_fail() -> None:
    with pytest.raises(AssertionError, match=r"3 Instances hold live pods .* more than 2"):
        assert_no_duplicates(history(*gang(0), *gang(1), *gang(2)), max_live=2)


def test_a_single_pod_surges_into_ordinal_one_but_not_twice() -> None:
    single = {"default": 1}
    first, surge = pod("s-0-default-0", 0, "default", 0), pod("s-0-default-1", 0, "default", 1)
    assert assert_no_duplicates(history(("ADDED", first), ("ADDED", surge)), max_live=1,
                                runners=single) == 2
    twin = pod("s-0-default-1-b", 0, "default", 1)
    with pytest.raises(AssertionError, match=r"default-1 has 2 live pods"):
        assert_no_duplicates(history(("ADDED", first), ("ADDED", surge), ("ADDED", twin)),
                             max_live=1, runners=single)


def test_two_replicas_share_no_slot() -> None:
    a, b = pod("a-0-leader-0", 0, "leader", replica="a"), pod("b-0-leader-0", 0, "leader",
                                                               replica="b")
    assert slot(a) != slot(b)
    assert assert_no_duplicates(history(("ADDED", a), ("ADDED", b)), max_live=2) == 2

"""RoutedPods, kept from EndpointSlice events, equals the set rebuilt from all slices."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from omenative_controller.routed import RoutedPods
from omenative_core.views import routed_pods_from_endpoint_slices

SERVICE = "kubernetes.io/service-name"


def _service_of(namespace: str | None, view: Any) -> list[str]:
    svc = (view.get("metadata") or {}).get("labels", {}).get(SERVICE)
    return [f"{namespace}/{svc}"] if svc and namespace else []


def _slice(name: str, service: str, endpoints: list[tuple[str, bool | None]]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {SERVICE: service}},
        "endpoints": [
            {
                "targetRef": {"kind": "Pod", "name": pod},
                "conditions": {} if ready is None else {"ready": ready, "serving": ready},
            }
            for pod, ready in endpoints
        ],
    }


events = st.lists(
    st.tuples(
        st.sampled_from(["s1", "s2", "s3"]),
        st.sampled_from(["a-headless", "b-headless"]),
        st.none()
        | st.lists(
            st.tuples(
                st.sampled_from(["p0", "p1", "p2", "p3"]), st.sampled_from([True, False, None])
            ),
            max_size=4,
        ),
    ),
    max_size=30,
)


@settings(max_examples=200)
@given(events)
def test_routed_set_matches_a_rebuild_after_any_events(
    steps: list[tuple[str, str, list[tuple[str, bool | None]] | None]],
) -> None:
    routed = RoutedPods(_service_of)
    store: dict[str, dict[str, Any]] = {}  # what the informer holds, by slice name
    for name, service, endpoints in steps:
        old = store.get(name)
        new = None if endpoints is None else _slice(name, service, endpoints)
        if new is None:
            store.pop(name, None)
        else:
            store[name] = new
        if old is not None or new is not None:
            routed.on_slice("ns", old, new)
        for svc in ("a-headless", "b-headless"):
            expected = routed_pods_from_endpoint_slices(
                s for s in store.values() if s["metadata"]["labels"][SERVICE] == svc
            )
            assert routed.routed(f"ns/{svc}") == expected


def test_the_set_is_the_same_object_until_a_slice_changes() -> None:
    routed = RoutedPods(_service_of)
    first = _slice("s1", "a-headless", [("p0", True), ("p1", False)])
    routed.on_slice("ns", None, first)
    before = routed.routed("ns/a-headless")
    assert before == {"p0"}
    assert routed.routed("ns/a-headless") is before
    routed.on_slice("ns", None, _slice("s9", "b-headless", [("p7", True)]))
    assert routed.routed("ns/a-headless") is before
    routed.on_slice("ns", first, _slice("s1", "a-headless", [("p1", True)]))
    assert routed.routed("ns/a-headless") == {"p1"}

"""The API server's JSON decoded by orjson where it is exact, by json where it would not be:
every document gets the value ``json.loads`` gives it, and what json refuses stays refused."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omenative_controller.kube import wire_json

POD = json.dumps({
    "type": "MODIFIED",
    "object": {"kind": "Pod", "metadata": {"name": "chat-engine-0-leader-0",
                                           "resourceVersion": "123456", "labels": {"a": "b"}},
               "spec": {"nodeName": "n-1", "priority": -2147483648},
               "status": {"conditions": [{"type": "Ready", "status": "True"}],
                          "podIP": "10.0.0.1", "startTime": "2026-12-07T10:00:00Z"}},
}).encode()


@pytest.mark.parametrize("number", [
    2**63 - 1, -(2**63), 2**64 - 1,  # what fits 64 bits
    2**64, -(2**63) - 1, 10**30, -(10**40),  # orjson alone would round these to floats
])
def test_integers_keep_their_exact_value(number: int) -> None:
    got = wire_json.loads(b'{"spec": {"big": %d}}' % number)["spec"]["big"]
    assert got == number and type(got) is int


def test_what_json_accepts_beyond_the_standard_decodes_as_before() -> None:
    raw = b'{"a": NaN, "b": "\\ud800"}'  # orjson refuses both
    got = wire_json.loads(raw)
    assert got["a"] != got["a"] and got["b"] == "\ud800"


@pytest.mark.parametrize("raw", [b"", b"{", b'{"a": 1,}', b"\xff\xfe"])
def test_invalid_documents_raise_value_error(raw: bytes) -> None:
    with pytest.raises(ValueError):
        wire_json.loads(raw)


def test_a_watch_event_decodes_to_what_json_gives() -> None:
    assert wire_json.loads(POD) == json.loads(POD)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_any_document_decodes_to_what_json_gives(value: Any) -> None:
    raw = json.dumps(value).encode()
    got, want = wire_json.loads(raw), json.loads(raw)
    assert got == want
    assert json.dumps(got) == json.dumps(want)  # the same types too (no int turned float)

"""``codec.warm``: cattrs' generated code for the model is built when the manager starts, so a
pass never builds it (tens of milliseconds on the event loop, found by the stall probe)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omenative_core import codec
from omenative_core.model import spec as model_spec
from omenative_core.model import status as model_status
from omenative_core.model.spec import InferenceReplicaSpec
from omenative_core.model.status import InferenceReplicaStatus, InstanceStatus
from omenative_core.status import columnar

GOLDEN = Path(__file__).parent / "golden"


def _no_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on, building a class's hook fails the test."""
    def refuse(cl: type, *_: object, **__: object) -> None:
        raise AssertionError(f"a hook for {cl.__name__} was built after warm()")

    monkeypatch.setattr(codec, "make_dict_structure_fn", refuse)
    monkeypatch.setattr(codec, "make_dict_unstructure_fn", refuse)


def test_after_warm_a_status_and_a_spec_decode_and_encode_without_building_code(
        monkeypatch: pytest.MonkeyPatch) -> None:
    conv = codec._make_converter()  # fresh: the shared one was warmed by other tests
    assert codec.warm(model_spec, model_status, columnar, conv=conv) >= 20
    _no_generation(monkeypatch)
    dense = json.loads((GOLDEN / "failure-heavy.dense.json").read_text())
    status = conv.structure(dense, InferenceReplicaStatus)
    assert status.instances and status.instances[0].phase == "Failed"
    assert conv.unstructure(status)["instanceStatuses"][0]["phase"] == "Failed"
    spec = conv.structure({"component": "engine", "replicas": 2, "runners": [
        {"name": "leader", "template": {"spec": {"containers": []}}}]}, InferenceReplicaSpec)
    assert conv.unstructure(spec)["replicas"] == 2


def test_without_warm_the_first_decode_builds_code(monkeypatch: pytest.MonkeyPatch) -> None:
    conv = codec._make_converter()
    _no_generation(monkeypatch)
    with pytest.raises(AssertionError, match="was built after warm"):
        conv.structure({"index": 0}, InstanceStatus)


def test_warm_skips_what_json_never_decodes_into() -> None:
    conv = codec._make_converter()
    classes = sum(1 for m in (model_spec, model_status, columnar) for v in vars(m).values()
                  if isinstance(v, type) and codec.attrs.has(v) and v.__module__ == m.__name__)
    warmed = codec.warm(model_spec, model_status, columnar, conv=conv)
    assert 0 < warmed < classes  # a class with a callable field is left out, not an error
    assert codec.warm(InstanceStatus, conv=conv) == 1

"""A test that needs a Go component waits for a background build that still owes it.

``make test`` builds the components in the background while the other tests run; the
component tests must neither fail early nor build the component a second time, and must fail
with a plain instruction when no build will produce it.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from omenative_devcluster import components


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OMENATIVE_CACHE", str(tmp_path))
    return tmp_path


def _queue(cache: Path, names: list[str], pid: int) -> None:
    path = cache / "components" / "pending.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"pid": pid, "names": names}))


def _install(name: str) -> None:
    component = components.COMPONENTS[name]
    bdir = components.component_dir(component) / "bin"
    bdir.mkdir(parents=True, exist_ok=True)
    for cmd in component.commands:
        (bdir / cmd).write_text("#!/bin/sh\n")
        (bdir / cmd).chmod(0o755)


def test_waits_for_a_component_a_live_build_still_owes(cache: Path) -> None:
    _queue(cache, ["kueue", "lws"], os.getpid())
    timer = threading.Timer(0.3, _install, args=("lws",))
    timer.start()
    bdir = components.wait_for("lws", poll=0.05)
    # it returned once the build had installed the binaries, instead of failing at once
    assert (bdir / "lws-manager").exists()
    timer.join()


def test_fails_with_the_build_command_when_nothing_will_build_it(cache: Path) -> None:
    with pytest.raises(components.ComponentUnavailable, match=r"make test-build WITH=helm"):
        components.wait_for("helm", poll=0.01)


def test_a_dead_builder_queue_is_not_waited_on(cache: Path) -> None:
    _queue(cache, ["helm"], pid=2**22 + 12345)  # no such process
    assert components.pending() == []
    with pytest.raises(components.ComponentUnavailable):
        components.wait_for("helm", poll=0.01)


def test_a_queue_without_a_builder_pid_is_not_waited_on(cache: Path) -> None:
    path = cache / "components" / "pending.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"names": ["helm"]}))
    assert components.pending() == []


def test_a_cached_component_needs_no_build(cache: Path) -> None:
    _install("kueue")
    assert components.wait_for("kueue") == components.component_dir(
        components.COMPONENTS["kueue"]) / "bin"


def test_build_in_order_rejects_an_unknown_name_before_building(cache: Path) -> None:
    with pytest.raises(RuntimeError, match="unknown component"):
        components.build_in_order(["kueue", "nope"])
    assert not (cache / "components" / "pending.json").exists()

"""Our own Go modules are cached by a hash of their sources (no Go needed to check that)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from omenative_devcluster.components import (
    MODEL_SERVER,
    LocalGoModule,
    build_local,
    module_sources,
    source_hash,
)


def _module(tmp_path: Path, main: str) -> LocalGoModule:
    src = tmp_path / "mod"
    src.mkdir(exist_ok=True)
    (src / "go.mod").write_text("module example.local/m\n\ngo 1.22\n")
    (src / "main.go").write_text(main)
    (src / "README").write_text("not a source")
    return LocalGoModule(name="m", source=src, why="a test")


def test_the_model_server_module_is_ours_and_stdlib_only() -> None:
    sources = module_sources(MODEL_SERVER)
    assert "go.mod" in sources and "main.go" in sources
    assert b"require" not in sources["go.mod"], "no external modules: nothing to download"
    assert "go.sum" not in sources


def test_the_hash_covers_go_sources_only_and_changes_with_them(tmp_path: Path) -> None:
    first = source_hash(module_sources(_module(tmp_path, "package main\n")))
    (tmp_path / "mod" / "README").write_text("edited")
    assert source_hash(module_sources(_module(tmp_path, "package main\n"))) == first
    assert source_hash(module_sources(_module(tmp_path, "package main // v2\n"))) != first


def test_a_cached_binary_is_used_without_building(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    module = _module(tmp_path, "package main\n")
    key = source_hash(module_sources(module))[:16]
    cached = tmp_path / "out" / "m" / key / "m"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"binary")
    cached.chmod(0o755)
    monkeypatch.setenv("PATH", "")  # no go: a build would fail
    assert build_local(module, into=tmp_path / "out") == cached


def test_a_module_without_go_mod_is_refused(tmp_path: Path) -> None:
    module = _module(tmp_path, "package main\n")
    os.remove(module.source / "go.mod")
    with pytest.raises(RuntimeError, match=r"no go\.mod"):
        module_sources(module)

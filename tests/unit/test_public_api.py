"""omenative_core's front door: the README's snippet runs as printed, every public name is
importable and documented."""

from __future__ import annotations

import contextlib
import importlib
import io
import pkgutil
import re
from pathlib import Path

import pdoc.doc
import pytest

import omenative_core

README = Path(__file__).resolve().parents[2] / "README.md"
MARKER = "Use the core from Python"


def readme_blocks() -> tuple[str, str]:
    """The python block after the README's "Use the core from Python" and the output block
    it says the snippet prints."""
    text = README.read_text()
    start = text.index(MARKER)
    code = re.search(r"```python\n(.*?)```\n", text[start:], re.DOTALL)
    assert code is not None, f"no ```python block after {MARKER!r} in README.md"
    after = text[start + code.end():]
    printed = re.match(r"\s*prints\s*\n\s*```\n(.*?)```\n", after, re.DOTALL)
    assert printed is not None, "the README snippet is not followed by the output it prints"
    return code.group(1), printed.group(1)


def test_readme_snippet_runs_verbatim_and_prints_what_the_readme_says() -> None:
    code, expected = readme_blocks()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme_snippet"})
    assert out.getvalue() == expected
    lines = out.getvalue().splitlines()
    # the first pass creates every pod of the one leader+worker Instance, after the status
    assert lines[0] == "pass 1: UpdateStatus -"
    assert [ln for ln in lines if ln.startswith("pass 1: CreatePod")] == [
        "pass 1: CreatePod chat-engine-0-leader-0", "pass 1: CreatePod chat-engine-0-worker-0"]
    # once they run, the second pass puts both in rotation together
    assert [ln for ln in lines if ln.startswith("pass 2: SetServingGate")] == [
        "pass 2: SetServingGate chat-engine-0-leader-0",
        "pass 2: SetServingGate chat-engine-0-worker-0"]


def test_plan_and_snapshot_are_the_callable_and_the_class_not_modules() -> None:
    from omenative_core import Plan, Snapshot, plan

    assert callable(plan) and not isinstance(plan, type(omenative_core))
    assert isinstance(Snapshot, type) and isinstance(Plan, type)


def test_all_names_exist_and_are_unique() -> None:
    names = omenative_core.__all__
    assert len(names) == len(set(names))
    missing = [n for n in names if not hasattr(omenative_core, n)]
    assert not missing, f"in __all__ but not importable: {missing}"


def _variable_docstring(name: str) -> str:
    """The attribute docstring of a re-exported constant, where it is assigned."""
    for info in pkgutil.walk_packages(omenative_core.__path__, "omenative_core."):
        module = importlib.import_module(info.name)
        if name in vars(module) and vars(module)[name] is getattr(omenative_core, name):
            doc = pdoc.doc.Module(module).get(name)
            if doc is not None and doc.docstring.strip():
                return doc.docstring
    return ""


@pytest.mark.parametrize("name", omenative_core.__all__)
def test_every_public_name_has_a_docstring(name: str) -> None:
    """What the API reference (pdoc) shows for it, or, for a constant or type alias, the
    docstring under its assignment."""
    front = pdoc.doc.Module(omenative_core).get(name)
    assert front is not None, f"pdoc does not see {name}"
    doc = front.docstring.strip()
    if isinstance(front, pdoc.doc.Variable) and not doc:
        doc = _variable_docstring(name)
    if isinstance(front, pdoc.doc.Class):
        # a class's own docstring, not one inherited from a base (Exception, object)
        doc = (vars(getattr(omenative_core, name)).get("__doc__") or "").strip()
    assert doc, f"omenative_core.{name} has no docstring"

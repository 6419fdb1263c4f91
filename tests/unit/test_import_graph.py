"""No import circles between the modules of src/, counting ``TYPE_CHECKING`` and
function-level imports (the import-linter contracts in pyproject.toml check the layers and
the core's subpackages; this checks every module, the shell's too)."""

from __future__ import annotations

import grimp

PACKAGES = ("omenative_core", "omenative_controller", "omenative_sim", "omenative_devcluster")


def _circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next((c for c in children if c in graph.modules), None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        group.append(top)
                        if top == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_module_of_src_imports_itself_through_others() -> None:
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    assert _circles(graph) == []


def test_the_check_finds_a_circle() -> None:
    """The check is not vacuous: a two-module circle is found."""
    graph = grimp.ImportGraph()
    for m in ("a", "b", "c"):
        graph.add_module(m)
    graph.add_import(importer="a", imported="b")
    graph.add_import(importer="b", imported="a")
    graph.add_import(importer="b", imported="c")
    assert _circles(graph) == [["a", "b"]]


def _siblings_graph(graph: grimp.ImportGraph, package: str) -> grimp.ImportGraph:
    """The imports between ``package``'s direct children, each subpackage taken whole."""
    prefix = package + "."

    def child(module: str) -> str | None:
        if not module.startswith(prefix):
            return None
        return prefix + module[len(prefix):].split(".", maxsplit=1)[0]

    squashed = grimp.ImportGraph()
    for module in graph.modules:
        top = child(module)
        if top is not None:
            squashed.add_module(top)
    for module in graph.modules:
        importer = child(module)
        if importer is None:
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            target = child(imported)
            if target is not None and target != importer:
                squashed.add_import(importer=importer, imported=target)
    return squashed


def test_no_package_imports_itself_through_its_siblings() -> None:
    """Package by package too: the shell's ``manager -> advisor_loop -> cli -> manager`` was
    such a circle (``cli/manager.py`` starts the manager, the advisor loop used ``cli``)."""
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    found = {p: _circles(_siblings_graph(graph, p)) for p in PACKAGES}
    assert found == {p: [] for p in PACKAGES}


def test_the_sibling_check_finds_a_circle_through_a_subpackage() -> None:
    """A module and a subpackage importing each other through different modules is found."""
    graph = grimp.ImportGraph()
    for m in ("p", "p.loop", "p.cli", "p.cli.main", "p.cli.out"):
        graph.add_module(m)
    graph.add_import(importer="p.loop", imported="p.cli.out")
    graph.add_import(importer="p.cli.main", imported="p.loop")
    assert _circles(_siblings_graph(graph, "p")) == [["p.cli", "p.loop"]]

"""``kubectl ome runtime tree RUNTIME``: a runtime's ``ome.io/inherit-from`` chain, the
runtimes that inherit from it and the InferenceServices that name them, as OME v1.3 prints
it (pure; ``reference/kubectl-ome/runtime.md`` "tree" and ``pkg/cli/report/v1alpha1/
runtime_tree.go``).

The tree is grouped in contexts: ``Cluster`` (ClusterServingRuntimes, which resolve parents
among ClusterServingRuntimes only) and ``Namespaced/<ns>`` (the ServingRuntimes of one
namespace, which resolve a parent as a ServingRuntime of the namespace, then a
ClusterServingRuntime). A context has one path per *head*: the target or a runtime whose
chain passes through it. A path lists the chain root first, up to the head; the
InferenceServices whose ``spec.runtime`` the manager resolves to the head hang under it.
A chain that breaks (parent missing, cycle, over five runtimes) ends at the break and
carries the Issue.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from attrs import frozen

from omenative_core.service import ServingRuntime
from omenative_core.service.inheritance import ANNOTATION_INHERIT_FROM, MAX_CHAIN

__all__ = ["Collection", "Tree", "TreeError", "build_tree", "chain_of", "find_target",
           "tree_json", "tree_table"]

_CSR = "ClusterServingRuntime"
_SR = "ServingRuntime"
_WIDTH = 80


class TreeError(ValueError):
    """The tree cannot be made (OME's message)."""


@frozen
class Ident:
    """A runtime's kind, namespace (ServingRuntime only) and name."""

    kind: str
    namespace: str
    name: str

    def text(self, context_ns: str | None = None) -> str:
        """``Kind/ns/name``; the namespace left out inside its own Namespaced context."""
        if self.kind == _SR and self.namespace and self.namespace != context_ns:
            return f"{self.kind}/{self.namespace}/{self.name}"
        return f"{self.kind}/{self.name}"

    def json(self) -> dict[str, str]:
        """The identity as OME's ``RuntimeTreeIdentity``."""
        out = {"kind": self.kind}
        if self.namespace:
            out["namespace"] = self.namespace
        out["name"] = self.name
        return out


@frozen
class Collection:
    """One list the command read: kind, scope (``Cluster``, ``AllNamespaces`` or
    ``Namespace``), its namespace, and how many items came back (one page each)."""

    kind: str
    scope: str
    namespace: str
    items: int

    def text(self) -> str:
        """The ``Collection:`` line."""
        scope = f"{self.scope}/{self.namespace}" if self.namespace else self.scope
        return (f"Collection: {self.kind} scope={scope} status=Complete pages=1 "
                f"items={self.items}")

    def json(self) -> dict[str, Any]:
        """OME's ``RuntimeTreeCollection``."""
        out: dict[str, Any] = {"kind": self.kind, "scope": self.scope}
        if self.namespace:
            out["namespace"] = self.namespace
        out.update(status="Complete", observedPages=1, observedItems=self.items)
        return out


@frozen
class Path:
    """One head: its chain root first, its InferenceServices ((namespace, name), sorted)
    and the chain's issue (code, subject, parent name, subject-first path) if it breaks."""

    head: Ident
    runtimes: tuple[tuple[Ident, str, Ident | None], ...]
    dependents: tuple[tuple[str, str], ...]
    issue: tuple[str, Ident, str, tuple[Ident, ...]] | None = None


@frozen
class Context:
    """``Cluster`` (namespace empty) or ``Namespaced/<namespace>``, with its paths (the
    target's first)."""

    namespace: str
    paths: tuple[Path, ...]


@frozen
class Tree:
    """The whole ``RuntimeTreeReport`` content."""

    target: Ident
    contexts: tuple[Context, ...]
    collections: tuple[Collection, ...]


def _ident(rt: ServingRuntime) -> Ident:
    return Ident(rt.kind, (rt.namespace or "") if rt.kind == _SR else "", rt.name)


def _parent_name(rt: ServingRuntime) -> str:
    meta = rt.raw.get("metadata")
    notes = meta.get("annotations") if isinstance(meta, Mapping) else None
    value = notes.get(ANNOTATION_INHERIT_FROM) if isinstance(notes, Mapping) else None
    return value if isinstance(value, str) else ""


def find_target(name: str, kind: str | None, namespace: str,
                runtimes: Sequence[ServingRuntime]) -> ServingRuntime:
    """The runtime ``tree`` is about: a ServingRuntime ``name`` in ``namespace`` or the
    ClusterServingRuntime ``name`` (``kind`` narrows it); TreeError with OME's message when
    none or both match."""
    if kind is not None and kind not in (_SR, _CSR):
        raise TreeError(f'unsupported runtime kind "{kind}" (supported: ServingRuntime, '
                        "ClusterServingRuntime)")
    found = [rt for rt in runtimes if rt.name == name and (kind is None or rt.kind == kind)
             and (rt.kind == _CSR or rt.namespace == namespace)]
    if not found:
        raise TreeError("project runtime inheritance tree: runtime target was not found: "
                        f'"{name}"')
    if len(found) > 1:
        raise TreeError(f'runtime "{name}" is ambiguous; pass --kind ServingRuntime or --kind '
                        "ClusterServingRuntime: runtime target is ambiguous: "
                        f'"{name}" matched {len(found)} runtimes')
    return found[0]


def _lookup(child: ServingRuntime, name: str,
            runtimes: Sequence[ServingRuntime]) -> ServingRuntime | None:
    """The parent ``name`` of ``child`` as the manager resolves it (core ``inheritance``)."""
    kinds = (_CSR,) if child.kind == _CSR else (_SR, _CSR)
    for kind in kinds:
        for rt in runtimes:
            if rt.kind == kind and rt.name == name and \
                    (kind == _CSR or rt.namespace == child.namespace):
                return rt
    return None


def _walk(head: ServingRuntime, runtimes: Sequence[ServingRuntime]
          ) -> tuple[list[ServingRuntime], tuple[str, Ident, str, tuple[Ident, ...]] | None]:
    """The head and its ancestors (head first) up to the root or the break, and the issue."""
    chain = [head]
    while True:
        parent = _parent_name(chain[-1])
        if not parent:
            return chain, None
        subject = _ident(chain[-1])
        path = tuple(_ident(rt) for rt in chain)
        if parent in [rt.name for rt in chain]:
            return chain, ("CycleDetected", subject, parent, path)
        if len(chain) >= MAX_CHAIN:
            return chain, ("MaxDepthExceeded", subject, parent, path)
        found = _lookup(chain[-1], parent, runtimes)
        if found is None:
            return chain, ("ParentMissing", subject, parent, path)
        chain.append(found)


def chain_of(runtime: ServingRuntime, runtimes: Sequence[ServingRuntime]
             ) -> tuple[list[str], str | None]:
    """``runtime``'s chain root first as ``CSR/<name>`` / ``SR/<ns>/<name>`` labels, and
    OME's INHERITANCE reason when it breaks (``NotFound``, ``Cycle``,
    ``MaxDepthExceeded``; None: it resolves)."""
    chain, issue = _walk(runtime, runtimes)
    if issue is not None:
        return [], {"ParentMissing": "NotFound", "CycleDetected": "Cycle"}.get(issue[0],
                                                                              issue[0])
    labels = [f"SR/{rt.namespace}/{rt.name}" if rt.kind == _SR else f"CSR/{rt.name}"
              for rt in reversed(chain)]
    return labels, None


def _resolves_to(isvc: Mapping[str, Any], head: Ident) -> bool:
    """Whether the InferenceService's ``spec.runtime`` names ``head`` as the manager reads
    it: the kind defaults to ClusterServingRuntime, a ServingRuntime is the ISVC's
    namespace's."""
    spec = isvc.get("spec")
    ref = spec.get("runtime") if isinstance(spec, Mapping) else None
    if not isinstance(ref, Mapping) or ref.get("name") != head.name:
        return False
    kind = ref.get("kind") or _CSR
    meta = isvc.get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    return kind == head.kind and (kind == _CSR or namespace == head.namespace)


def _path(head: ServingRuntime, runtimes: Sequence[ServingRuntime],
          isvcs: Sequence[Mapping[str, Any]]) -> Path:
    chain, issue = _walk(head, runtimes)
    rows = []
    for i, rt in enumerate(chain):
        parent = chain[i + 1] if i + 1 < len(chain) else None
        rows.append((_ident(rt), _parent_name(rt), _ident(parent) if parent else None))
    ident = _ident(head)
    deps = sorted((str(m.get("namespace")), str(m.get("name")))
                  for obj in isvcs if _resolves_to(obj, ident)
                  for m in [obj.get("metadata") or {}])
    return Path(ident, tuple(reversed(rows)), tuple(deps), issue)


def build_tree(target: ServingRuntime, runtimes: Sequence[ServingRuntime],
               isvcs: Sequence[Mapping[str, Any]],
               collections: Sequence[Collection]) -> Tree:
    """The tree around ``target`` among ``runtimes`` (the ClusterServingRuntimes and the
    ServingRuntimes listed) and ``isvcs`` (the InferenceServices listed)."""
    tid = _ident(target)
    by_context: dict[str, list[Path]] = {}
    for rt in runtimes:
        if target.kind == _SR and (rt.kind != _SR or rt.namespace != target.namespace):
            continue
        chain, _issue = _walk(rt, runtimes)
        if tid not in [_ident(c) for c in chain]:
            continue
        ns = (rt.namespace or "") if rt.kind == _SR else ""
        by_context.setdefault(ns, []).append(_path(rt, runtimes, isvcs))
    contexts = []
    for ns in sorted(by_context):
        paths = sorted(by_context[ns], key=lambda p: (p.head != tid, p.head.kind != _CSR,
                                                      p.head.namespace, p.head.name))
        contexts.append(Context(ns, tuple(paths)))
    return Tree(tid, tuple(contexts), tuple(collections))


def _fit(line: str) -> list[str]:
    """A ``Collection:`` line over 80 columns continues after ``status=`` on an indented
    line, as OME's default output does."""
    if len(line) <= _WIDTH or " status=" not in line:
        return [line]
    head, tail = line.split(" status=", 1)
    return [head, f"  status={tail}"]


def tree_table(tree: Tree, *, wide: bool = False) -> str:
    """OME's ``RUNTIME TREE`` text (``wide``: long lines kept whole)."""
    lines = ["RUNTIME TREE", f"Target: {tree.target.text()}"]
    for ctx in tree.contexts:
        ns = ctx.namespace or None
        label = f"Namespaced/{ctx.namespace}" if ctx.namespace else "Cluster"
        lines.append(f"Context: {label} (resolution: Complete)")
        for path in ctx.paths:
            lines.append(f"Head: {path.head.text(ns)}")
            for i, (ident, _parent, _resolved) in enumerate(path.runtimes):
                prefix = "" if i == 0 else "    " * (i - 1) + "`-- "
                mark = " [selected]" if ident == tree.target else ""
                lines.append(f"{prefix}{ident.text(ns)}{mark}")
            indent = "    " * max(0, len(path.runtimes) - 1)
            for i, (dep_ns, dep_name) in enumerate(path.dependents):
                branch = "`-- " if i == len(path.dependents) - 1 else "|-- "
                where = dep_name if dep_ns == ctx.namespace else f"{dep_ns}/{dep_name}"
                lines.append(f"{indent}{branch}InferenceService/{where}")
            if path.issue is not None:
                code, subject, parent, chain = path.issue
                lines.append(f"Issue: {code} subject={subject.text(ns)} parent={parent}")
                lines.append("Issue path: " + " -> ".join(i.text(ns) for i in chain))
    lines.append("Snapshot: Complete")
    for col in tree.collections:
        lines += [col.text()] if wide else _fit(col.text())
    return "\n".join(lines)


def _path_json(path: Path) -> dict[str, Any]:
    runtimes = []
    for ident, parent, resolved in path.runtimes:
        row: dict[str, Any] = {"identity": ident.json()}
        if parent:
            row["parentName"] = parent
        if resolved is not None:
            row["resolvedParent"] = resolved.json()
        runtimes.append(row)
    out: dict[str, Any] = {
        "head": path.head.json(), "runtimes": runtimes,
        "dependents": [{"kind": "InferenceService", "namespace": ns, "name": name}
                       for ns, name in path.dependents]}
    if path.issue is not None:
        code, subject, parent, chain = path.issue
        out["issue"] = {"code": code, "subject": subject.json(), "parentName": parent,
                        "path": [i.json() for i in chain]}
    return out


def tree_json(tree: Tree, collected_at: str) -> dict[str, Any]:
    """OME's ``RuntimeTreeReport`` (``cli.ome.io/v1alpha1``)."""
    contexts = []
    for ctx in tree.contexts:
        mode: dict[str, str] = {"mode": "Namespaced", "namespace": ctx.namespace} \
            if ctx.namespace else {"mode": "Cluster"}
        contexts.append({"context": mode, "resolutionCompleteness": "Complete",
                         "paths": [_path_json(p) for p in ctx.paths]})
    meta = {"namespace": tree.target.namespace, "name": tree.target.name} \
        if tree.target.namespace else {"name": tree.target.name}
    return {"apiVersion": "cli.ome.io/v1alpha1", "kind": "RuntimeTreeReport",
            "metadata": meta, "collectedAt": collected_at, "sources": [],
            "content": {"target": tree.target.json(),
                        "snapshot": {"completeness": "Complete",
                                     "collections": [c.json() for c in tree.collections]},
                        "contexts": contexts},
            "warnings": []}

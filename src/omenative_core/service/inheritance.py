"""Runtime inheritance (``ome.io/inherit-from``), as OME v1.3 resolves it.

A child runtime names its parent in the annotation ``ome.io/inherit-from`` and gets the
parent's ``spec`` with its own laid over it (OME v1.3 docs, concepts/runtimes/
runtime-inheritance.md, "What merges", "Chain limits"):

* the chain is merged from the root down; single values are replaced, objects merge field
  by field, lists of named items merge item by item (``env``, ``volumes``, ``containers``,
  ``imagePullSecrets`` by ``name``; ``ports`` by ``containerPort``; ``volumeMounts`` by
  ``mountPath``; ``merge.MERGE_KEYS``), other lists (``command``, ``args``,
  ``tolerations``) are replaced; an empty ``[]``, ``{}`` or ``""`` counts as unset;
* only the ``spec`` is inherited; the child's metadata stays its own;
* a ClusterServingRuntime's parents are ClusterServingRuntimes; a ServingRuntime's are the
  ServingRuntimes of its namespace, then ClusterServingRuntimes;
* a chain holds at most five runtimes, and a name appears in it once.

Inheritance applies when an InferenceService names the runtime, not to auto-selection (each
candidate is matched on its own spec). A chain that does not resolve is OME's error text:
``inherit-from parent "<p>" not found (chain so far: [...])``, ``inheritance cycle
detected: [...]``, ``inheritance chain exceeds max depth 5 ...``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from attrs import frozen

from omenative_core.service.merge import merge_json
from omenative_core.service.model import ServingRuntime

__all__ = [
    "ANNOTATION_INHERIT_FROM",
    "INHERITANCE_READY",
    "MAX_CHAIN",
    "InheritanceError",
    "InheritanceHealth",
    "broken_chain_message",
    "inheritance_health",
    "inherited_runtime",
    "merge_specs",
]

ANNOTATION_INHERIT_FROM: Final = "ome.io/inherit-from"
"""On a runtime: the name of the runtime whose spec it inherits."""
MAX_CHAIN: Final = 5
"""The most runtimes in a chain (the runtime and four ancestors)."""


INHERITANCE_READY: Final = "InheritanceReady"
"""The runtime status condition that says whether its chain resolves (OME v1.3)."""


class InheritanceError(ValueError):
    """A runtime's chain does not resolve; the message is OME's, ``reason`` the
    ``InheritanceReady`` reason (``ParentNotFound``, ``InheritanceCycle``,
    ``MaxDepthExceeded``)."""

    def __init__(self, message: str, reason: str = "ResolverError",
                 link: tuple[str, str] | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.link = link
        """The ``ome.io/inherit-from`` link that breaks: (child, the parent it names)."""


def _annotations(rt: ServingRuntime) -> Mapping[str, Any]:
    meta = rt.raw.get("metadata")
    value = meta.get("annotations") if isinstance(meta, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _without_empty(value: Any) -> Any:
    """``value`` with empty lists, objects and strings dropped (they count as unset)."""
    if isinstance(value, Mapping):
        out = {k: _without_empty(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in ([], {}, "") and v is not None}
    if isinstance(value, list):
        return [_without_empty(v) for v in value]
    return value


def _parent(child: ServingRuntime, name: str,
            runtimes: Sequence[ServingRuntime]) -> ServingRuntime | None:
    order = ["ClusterServingRuntime"] if child.kind == "ClusterServingRuntime" else \
        ["ServingRuntime", "ClusterServingRuntime"]
    for kind in order:
        for rt in runtimes:
            if rt.kind != kind or rt.name != name:
                continue
            if kind == "ServingRuntime" and rt.namespace != child.namespace:
                continue
            return rt
    return None


def _chain(runtime: ServingRuntime, runtimes: Sequence[ServingRuntime]) -> list[ServingRuntime]:
    """The runtime and its ancestors, the runtime first."""
    chain = [runtime]
    while True:
        parent_name = _annotations(chain[-1]).get(ANNOTATION_INHERIT_FROM)
        if not isinstance(parent_name, str) or not parent_name:
            return chain
        names = [rt.name for rt in chain]
        link = (chain[-1].name, parent_name)
        if parent_name in names:
            raise InheritanceError(f"inheritance cycle detected: [{' '.join(names)} "
                                   f"{parent_name}]", "InheritanceCycle", link)
        if len(chain) >= MAX_CHAIN:
            raise InheritanceError(f"inheritance chain exceeds max depth {MAX_CHAIN}: "
                                   f"[{' '.join([*names, parent_name])}]", "MaxDepthExceeded",
                                   link)
        parent = _parent(chain[-1], parent_name, runtimes)
        if parent is None:
            raise InheritanceError(f'inherit-from parent "{parent_name}" not found '
                                   f"(chain so far: [{' '.join(names)}])", "ParentNotFound",
                                   link)
        chain.append(parent)


def inherited_runtime(runtime: ServingRuntime,
                      runtimes: Sequence[ServingRuntime]) -> ServingRuntime:
    """``runtime`` with the spec its chain merges to (itself when it names no parent);
    raises ``InheritanceError`` when the chain does not resolve."""
    chain = _chain(runtime, runtimes)
    if len(chain) == 1:
        return runtime
    spec: dict[str, Any] = {}
    for rt in reversed(chain):
        spec = merge_specs(spec, rt.spec)
    return ServingRuntime({**runtime.raw, "spec": spec})


def merge_specs(parent: Mapping[str, Any], child: Mapping[str, Any]) -> dict[str, Any]:
    """OME's ``runtimeinheritance.Merge``: ``child`` over ``parent``, empty values unset
    (module docstring); also how an ``ome.io/engine`` preset fills a runtime."""
    return merge_json(_without_empty(parent), _without_empty(child))


@frozen
class InheritanceHealth:
    """What a runtime's status says of its chain (OME v1.3 docs, runtime-inheritance.md,
    "When a chain breaks"): ``chain`` root first when it resolves (None when it does not:
    the status keeps the last chain that did), and the ``InheritanceReady`` condition's
    status, reason (``Resolved`` or the error's) and message; ``link`` the broken
    ``ome.io/inherit-from`` link (child, parent named) when it does not resolve."""

    chain: tuple[str, ...] | None
    ready: bool
    reason: str
    message: str
    link: tuple[str, str] | None = None


def inheritance_health(runtime: ServingRuntime,
                       runtimes: Sequence[ServingRuntime]) -> InheritanceHealth:
    """``runtime``'s chain health among ``runtimes``: a runtime without a parent resolves to
    ``[itself]``."""
    try:
        chain = _chain(runtime, runtimes)
    except InheritanceError as exc:
        return InheritanceHealth(chain=None, ready=False, reason=exc.reason, message=str(exc),
                                 link=exc.link)
    names = tuple(rt.name for rt in reversed(chain))
    return InheritanceHealth(chain=names, ready=True, reason="Resolved",
                             message=f"inheritance chain resolved: [{' '.join(names)}]")


def broken_chain_message(runtime: ServingRuntime, health: InheritanceHealth) -> str:
    """The Warning Event's text for a runtime whose chain does not resolve: the runtime,
    the broken link and OME's error."""
    where = f"{runtime.namespace}/{runtime.name}" if runtime.namespace else runtime.name
    link = f" {health.link[0]} -> {health.link[1]}" if health.link is not None else ""
    return (f"{runtime.kind} {where}: {ANNOTATION_INHERIT_FROM} link{link} is broken: "
            f"{health.message}")

"""The release before OME's standalone names, for the upgrade tests (issue 28 (a)).

Before it, a standalone InferenceReplica's objects all took its own name as the prefix
(pods ``{replica}-{index}-{runner}-{ordinal}``, the Service ``{replica}-headless``) and
there was nothing older to keep. ``old_names()`` makes the planner behave so for a while,
so a test can leave what that release left and then upgrade: the core is the same code
with ``InferenceReplica.prefix`` and ``legacy_prefix`` as they were.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from omenative_core.model.spec import InferenceReplica

__all__ = ["old_names", "old_prefix"]


def _old_prefix(replica: InferenceReplica) -> str:
    parent = replica.spec.parent_ref
    return replica.metadata.name if parent is None else f"{parent.name}-{replica.spec.component}"


def old_prefix(name: str, pod: str) -> bool:
    """Whether ``pod`` of the standalone replica ``name`` carries the old names: OME's put
    the component, never a digit, after the replica's name."""
    head = name + "-"
    return pod.startswith(head) and pod[len(head) : len(head) + 1].isdigit()


@contextmanager
def old_names() -> Iterator[None]:
    """Plan as the release before did while the block runs."""
    saved = InferenceReplica.__dict__["prefix"], InferenceReplica.__dict__["legacy_prefix"]
    InferenceReplica.prefix = property(_old_prefix)  # type: ignore[method-assign,assignment]
    InferenceReplica.legacy_prefix = property(lambda _self: None)  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        InferenceReplica.prefix, InferenceReplica.legacy_prefix = saved  # type: ignore[method-assign]

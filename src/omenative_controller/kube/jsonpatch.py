"""JSON patches (RFC 6902) this controller sends, built in one place."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from omenative_controller.kube.client import JSON


def pointer(*parts: str) -> str:
    """A JSON pointer to ``parts`` (``~`` and ``/`` escaped, as RFC 6901 says)."""
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def annotation_removal(present: Mapping[str, str], keys: Iterable[str]) -> list[JSON]:
    """Remove ``keys`` from ``metadata.annotations``, each only if it still holds the value
    seen (a ``test`` op first): a request rewritten meanwhile is left for the next pass."""
    ops: list[JSON] = []
    for key in keys:
        if key not in present:
            continue
        path = pointer("metadata", "annotations", key)
        ops.append({"op": "test", "path": path, "value": present[key]})
        ops.append({"op": "remove", "path": path})
    return ops

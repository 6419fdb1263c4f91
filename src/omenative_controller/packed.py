"""JSON objects kept compact in a cache: the big parts as bytes, parsed when read.

A parsed JSON object costs Python 5-10x its text (a dict per object, a str per value). The
caches hold thousands of InferenceReplicas and ControllerRevisions whose runner templates
and per-Instance status rows are read only when a pass decodes a new resourceVersion, or
renders an old revision's pods. :class:`PackedJSON` keeps such a part as its compact JSON,
zlib-compressed, and parses it on every read (a fresh copy: a caller may change what it got).
"""

from __future__ import annotations

import json
import sys
import zlib
from collections.abc import Collection, Iterator, Mapping
from typing import Any

__all__ = ["PackedJSON"]


LEVEL = 1
"""zlib level: JSON of templates and status columns shrinks 4-6x at the fastest level."""


def _pack(value: Any) -> Any:
    if isinstance(value, dict | list) and value:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        return zlib.compress(text, LEVEL)
    return sys.intern(value) if isinstance(value, str) else value


class PackedJSON(Mapping[str, Any]):
    """A read-only JSON object whose non-empty object and array members (except ``keep``)
    are kept as bytes and parsed on each read; equal to any mapping with the same items."""

    __slots__ = ("_items",)

    def __init__(self, obj: Mapping[str, Any], keep: Collection[str] = ()) -> None:
        self._items: dict[str, Any] = {
            sys.intern(k): (v if k in keep else _pack(v)) for k, v in obj.items()}

    def __getitem__(self, key: str) -> Any:
        value = self._items[key]
        return json.loads(zlib.decompress(value)) if isinstance(value, bytes) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PackedJSON):
            return self._items == other._items
        if isinstance(other, Mapping):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PackedJSON({dict(self.items())!r})"

    def packed_size(self) -> int:
        """Bytes kept packed (for benchmarks)."""
        return sum(len(v) for v in self._items.values() if isinstance(v, bytes))

"""Runtime-revision garbage collection, as OME v1.3 prunes its runtime revisions.

OME keeps, for each runtime name (the ``ome.io/runtime-of`` label, across namespaces and
scopes), the ``retention`` newest revisions (``--runtime-revision-retention``, 10) and every
revision an InferenceService uses: named in ``spec.runtime.revision`` or recorded in
``status.pinnedRevisionName`` (the one its pods serve from). Any other revision is marked
with the annotation ``ome.io/gc-eligible-since`` (the time it stopped being kept) and deleted
once the grace period has passed (``--runtime-revision-grace-period``, 24h); a marked
revision that is kept again loses its mark (ome-docs ``concepts/runtimes/runtime-revisions.md``
"Garbage collection", ``guides/operate-ome/configure-the-controller.md`` "Tune
runtime-revision garbage collection", ``reference/operate-ome/controller-manager-flags.md``).

``collect`` is pure: it reads the revisions and InferenceServices the shell has cached and
the time, and says which revisions to mark, unmark and delete. "Newest" is by
``metadata.creationTimestamp`` (RFC 3339 text orders as time), then name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Final

from attrs import frozen

from omenative_core.model.timefmt import format_time, parse_time
from omenative_core.service.runtime_pin import LABEL_RUNTIME_OF

__all__ = [
    "ANNOTATION_GC_ELIGIBLE_SINCE",
    "DEFAULT_GRACE",
    "DEFAULT_RETENTION",
    "GcPlan",
    "collect",
    "revisions_in_use",
]

ANNOTATION_GC_ELIGIBLE_SINCE: Final = "ome.io/gc-eligible-since"
"""On a runtime revision no longer kept: when it stopped being kept."""
DEFAULT_RETENTION: Final = 10
"""OME's ``--runtime-revision-retention``: revisions kept per runtime name, newest first."""
DEFAULT_GRACE: Final = timedelta(hours=24)
"""OME's ``--runtime-revision-grace-period``: how long a marked revision waits."""


def _obj(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@frozen
class GcPlan:
    """What one collection does: revision names to mark (``ome.io/gc-eligible-since`` =
    ``stamp``), to unmark, and to delete."""

    mark: tuple[str, ...] = ()
    unmark: tuple[str, ...] = ()
    delete: tuple[str, ...] = ()
    stamp: str = ""


def revisions_in_use(isvcs: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """Every revision an InferenceService names in ``spec.runtime.revision`` or serves from
    (``status.pinnedRevisionName``)."""
    used: set[str] = set()
    for isvc in isvcs:
        named = _obj(_obj(isvc.get("spec")).get("runtime")).get("revision")
        pinned = _obj(isvc.get("status")).get("pinnedRevisionName")
        used.update(v for v in (named, pinned) if isinstance(v, str) and v)
    return frozenset(used)


def _kept(revisions: Sequence[Mapping[str, Any]], retention: int,
          used: frozenset[str]) -> set[str]:
    by_runtime: dict[str, list[tuple[str, str]]] = {}
    for rev in revisions:
        meta = _obj(rev.get("metadata"))
        runtime = str(_obj(meta.get("labels")).get(LABEL_RUNTIME_OF, ""))
        by_runtime.setdefault(runtime, []).append(
            (str(meta.get("creationTimestamp") or ""), str(meta.get("name"))))
    kept = set(used)
    for entries in by_runtime.values():
        entries.sort(reverse=True)
        kept.update(name for _created, name in entries[:retention])
    return kept


def _marked_since(rev: Mapping[str, Any]) -> datetime | None:
    value = _obj(_obj(rev.get("metadata")).get("annotations")).get(
        ANNOTATION_GC_ELIGIBLE_SINCE)
    if not isinstance(value, str):
        return None
    try:
        return parse_time(value)
    except ValueError:
        return None


def collect(revisions: Sequence[Mapping[str, Any]], isvcs: Iterable[Mapping[str, Any]],
            now: datetime, *, retention: int = DEFAULT_RETENTION,
            grace: timedelta = DEFAULT_GRACE) -> GcPlan:
    """The collection of ``revisions`` (ControllerRevisions labelled ``ome.io/runtime-of``)
    given every InferenceService (module docstring). A mark that does not parse is set
    again, so a revision is never deleted without a full grace period."""
    kept = _kept(revisions, retention, revisions_in_use(isvcs))
    mark: list[str] = []
    unmark: list[str] = []
    delete: list[str] = []
    for rev in revisions:
        meta = _obj(rev.get("metadata"))
        name = str(meta.get("name"))
        marked = ANNOTATION_GC_ELIGIBLE_SINCE in _obj(meta.get("annotations"))
        since = _marked_since(rev)
        if name in kept:
            if marked:
                unmark.append(name)
        elif since is None:
            mark.append(name)
        elif now - since >= grace:
            delete.append(name)
    return GcPlan(mark=tuple(sorted(mark)), unmark=tuple(sorted(unmark)),
                  delete=tuple(sorted(delete)), stamp=format_time(now))

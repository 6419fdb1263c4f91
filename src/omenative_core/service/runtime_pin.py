"""Runtime pinning: an InferenceService served from a snapshot of its runtime, as OME v1.3.

With ``spec.runtime.autoSync: false`` (only for a runtime the ISVC names), the components
render from a *runtime revision*, an immutable ControllerRevision in OME's namespace that
holds the runtime's (inherited, merged) spec, labelled ``ome.io/runtime-of: <runtime>`` and
named ``cr-<runtime>-<hash>`` (ClusterServingRuntime) or ``r-<namespace>-<runtime>-<hash>``
(ServingRuntime) (OME v1.3 docs concepts/runtimes/runtime-revisions.md). ``resolve_pin``:

* ``spec.runtime.revision`` set: render from it; it does not exist: ``RuntimeDrifted=True``
  ``RevisionMissing``; it is another runtime's: ``RuntimeMismatch``. The sync annotation
  is ignored.
* otherwise: the first pass pins the live spec (a revision is created, its name kept in
  ``status.pinnedRevisionName``); later passes render from the pinned revision. When the
  live spec differs, ``RuntimeDrifted=True`` ``RevisionMismatch`` (message ``pinned <rev>,
  live spec differs; bump ome.io/runtime-sync annotation to advance``), unless the
  ``ome.io/runtime-sync`` annotation holds a value not yet recorded in
  ``status.lastRuntimeSyncToken``: then the ISVC rolls forward to a revision of the live
  spec and the value is recorded. A pinned revision that no longer exists is
  ``RevisionMissing``; a runtime that no longer exists is ``SourceRuntimeMissing`` and the
  pods stay on the revision.
* ``RuntimeDrifted`` is only ever True; it is removed when its reason no longer applies.
  ``RevisionMissing`` and ``RuntimeMismatch`` have no spec to render from: the components
  keep their objects (blocked with that reason).

The revision's hash is omenative's (sha256 of the spec's canonical JSON, 8 hex), so the
names differ from OME's for the same spec; the name's form is OME's.

``revision_form_rejections`` is OME's admission check of ``spec.runtime.revision``
(ome-projects/ome ``pkg/webhook/admission/isvc/inference_service_validation.go`` at
58a57f25355166429fd9e45e9c2564a0e9486bb2, ``validateRuntimePin`` and ``expectedPinPattern``;
ome-docs ``concepts/runtimes/runtime-revisions.md`` at 7f641a34, "Roll back"): a revision
needs ``autoSync: false``, and its name must have the form for the named runtime,
``cr-<runtime>-<8 lowercase hex>`` (a ClusterServingRuntime, any ``kind`` other than
ServingRuntime) or ``r-<namespace>-<runtime>-<8 lowercase hex>`` (a ServingRuntime in the
InferenceService's namespace). Whether the revision exists is not checked at admission
(``RevisionMissing`` at reconcile), as in OME.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from attrs import frozen

from omenative_core.service.model import InferenceService, RuntimeRef, ServingRuntime
from omenative_core.service.rejection import Rejection, reject

__all__ = [
    "ANNOTATION_RUNTIME_SYNC",
    "CONDITION_RUNTIME_DRIFTED",
    "LABEL_RUNTIME_OF",
    "Pin",
    "RuntimeRevision",
    "pinning",
    "resolve_pin",
    "revision_body",
    "revision_form_rejections",
    "revision_name",
    "runtime_revision_from_json",
    "spec_digest",
]

ANNOTATION_RUNTIME_SYNC: Final = "ome.io/runtime-sync"
"""On an ISVC: a new value rolls a pinned ISVC forward to its runtime's live spec."""
LABEL_RUNTIME_OF: Final = "ome.io/runtime-of"
"""On a runtime revision: the runtime's name."""
CONDITION_RUNTIME_DRIFTED: Final = "RuntimeDrifted"
"""The ISVC condition of a pinned ISVC whose revision and runtime part (only ever True)."""


def _obj(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@frozen
class RuntimeRevision:
    """A runtime revision: its name, the runtime it snapshots and the spec it holds."""

    name: str
    runtime: str
    spec: Mapping[str, Any]


def runtime_revision_from_json(obj: Mapping[str, Any]) -> RuntimeRevision | None:
    """A ControllerRevision as a runtime revision, or None when it is not one."""
    meta = _obj(obj.get("metadata"))
    runtime = _obj(meta.get("labels")).get(LABEL_RUNTIME_OF)
    name = meta.get("name")
    spec = _obj(obj.get("data")).get("spec")
    if not isinstance(runtime, str) or not isinstance(name, str) or not isinstance(spec, Mapping):
        return None
    return RuntimeRevision(name=name, runtime=runtime, spec=spec)


def spec_digest(spec: Mapping[str, Any]) -> str:
    """The full sha256 (hex) of a runtime spec's canonical JSON; a revision name carries its
    first 8 characters, so ``kubectl ome runtime`` compares live specs with revisions."""
    return hashlib.sha256(
        json.dumps(spec, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def revision_name(ref: RuntimeRef, namespace: str, spec: Mapping[str, Any]) -> str:
    """``cr-<runtime>-<hash>`` or ``r-<namespace>-<runtime>-<hash>``."""
    digest = spec_digest(spec)[:8]
    if ref.kind == "ServingRuntime":
        return f"r-{namespace}-{ref.name}-{digest}"
    return f"cr-{ref.name}-{digest}"


@frozen(kw_only=True)
class Pin:
    """What pinning decides for one pass.

    ``spec``: the runtime spec to render from (None: nothing to render from, ``problem``
    says why); ``create``: a revision to store first; ``pinned`` / ``token``: the status
    fields ``pinnedRevisionName`` / ``lastRuntimeSyncToken``; ``drift``: the
    ``RuntimeDrifted`` reason and message (None: no drift).
    """

    spec: Mapping[str, Any] | None
    create: RuntimeRevision | None = None
    pinned: str | None = None
    token: str | None = None
    drift: tuple[str, str] | None = None
    problem: tuple[str, str] | None = None


def pinning(isvc: InferenceService) -> bool:
    """``spec.runtime.autoSync`` is false on a named runtime."""
    ref = _obj(isvc.spec.get("runtime"))
    return isvc.runtime_ref is not None and ref.get("autoSync") is False


REVISION_FORM_REASON: Final = "InvalidRuntimeRevision"
"""The reason of a refused ``spec.runtime.revision`` (omenative's; OME's text follows it)."""
_HEX8: Final = "[0-9a-f]{8}"


def revision_form_rejections(isvc: InferenceService) -> list[Rejection]:
    """OME's admission check of ``spec.runtime.revision`` (module docstring); [] admits."""
    ref = _obj(isvc.spec.get("runtime"))
    revision = ref.get("revision")
    if revision is None or revision == "":
        return []
    if not isinstance(revision, str):
        return [reject(REVISION_FORM_REASON, "spec.runtime.revision",
                       "spec.runtime.revision must be a string (a runtime revision's name)")]
    if ref.get("autoSync") is not False:
        return [reject(REVISION_FORM_REASON, "spec.runtime.autoSync",
                       "spec.runtime.revision requires spec.runtime.autoSync=false; "
                       "AutoSync=true would silently ignore the pin")]
    name = ref.get("name") if isinstance(ref.get("name"), str) else ""
    if ref.get("kind") == "ServingRuntime":
        kind, prefix = "ServingRuntime", f"r-{isvc.namespace}-{name}-"
    else:
        kind, prefix = "ClusterServingRuntime", f"cr-{name}-"
    if re.fullmatch(re.escape(prefix) + _HEX8, revision):
        return []
    return [reject(REVISION_FORM_REASON, "spec.runtime.revision",
                   f"spec.runtime.revision {json.dumps(revision)} does not match the expected "
                   f"naming convention for runtime {json.dumps(name)} ({kind}); expected the "
                   f"form {prefix}<8 lowercase hex chars>")]


def _by_revision(ref: RuntimeRef, wanted: str, found: RuntimeRevision | None) -> Pin:
    if found is None:
        drift = ("RevisionMissing", f"revision {wanted} not found")
        return Pin(spec=None, pinned=wanted, drift=drift, problem=drift)
    if found.runtime != ref.name:
        drift = ("RuntimeMismatch", f"revision {wanted} belongs to runtime {found.runtime}, "
                                    f"not {ref.name}")
        return Pin(spec=None, pinned=wanted, drift=drift, problem=drift)
    return Pin(spec=found.spec, pinned=wanted)


def resolve_pin(
    isvc: InferenceService, live: ServingRuntime | None, revisions: Sequence[RuntimeRevision]
) -> Pin | None:
    """The pin of ``isvc`` for this pass (module docstring), or None when it is not pinned.
    ``live``: its runtime as it is now, inherited and merged (None: it does not exist)."""
    ref = isvc.runtime_ref
    if ref is None or not pinning(isvc):
        return None
    by_name = {r.name: r for r in revisions}
    wanted = _obj(isvc.spec.get("runtime")).get("revision")
    if isinstance(wanted, str) and wanted:
        return _by_revision(ref, wanted, by_name.get(wanted))
    return _by_status(isvc, ref, live, by_name)


def _by_status(isvc: InferenceService, ref: RuntimeRef, live: ServingRuntime | None,
               by_name: Mapping[str, RuntimeRevision]) -> Pin:
    """The pin without ``spec.runtime.revision``: from ``status.pinnedRevisionName``."""
    pinned = isvc.status.get("pinnedRevisionName")
    last = isvc.status.get("lastRuntimeSyncToken")
    last = last if isinstance(last, str) else None
    token = isvc.annotations.get(ANNOTATION_RUNTIME_SYNC)
    if not isinstance(pinned, str) or not pinned:
        if live is None:
            return Pin(spec=None, problem=("RuntimePinError",
                                           f"{ref.kind} {ref.name!r} not found: nothing to pin"))
        return _snapshot(ref, isvc.namespace, live, last)
    current = by_name.get(pinned)
    drift: tuple[str, str] | None = None
    if current is None:
        drift = ("RevisionMissing", f"pinned revision {pinned} not found")
        return Pin(spec=None, pinned=pinned, token=last, drift=drift, problem=drift)
    if live is None:
        drift = ("SourceRuntimeMissing", f"{ref.kind} {ref.name} not found; serving from {pinned}")
    elif dict(live.spec) != dict(current.spec):
        if token and token != last:
            return _snapshot(ref, isvc.namespace, live, token)
        drift = ("RevisionMismatch", f"pinned {pinned}, live spec differs; bump "
                                     f"{ANNOTATION_RUNTIME_SYNC} annotation to advance")
    return Pin(spec=current.spec, pinned=pinned, token=last, drift=drift)


def _snapshot(ref: RuntimeRef, namespace: str, live: ServingRuntime, token: str | None) -> Pin:
    spec = dict(live.spec)
    name = revision_name(ref, namespace, spec)
    return Pin(spec=spec, create=RuntimeRevision(name=name, runtime=ref.name, spec=spec),
               pinned=name, token=token)


def revision_body(revision: RuntimeRevision) -> dict[str, Any]:
    """The ControllerRevision manifest of ``revision`` (the shell puts it in OME's namespace)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {"name": revision.name, "labels": {LABEL_RUNTIME_OF: revision.runtime}},
        "data": {"spec": dict(revision.spec)},
        "revision": 1,
    }

"""The simulated API server: the core's actions applied as the shell's executor would, and
the InferenceReplica object (spec patches, annotations, status writes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import attrs
from attrs import frozen

from omenative_core.labels import (
    SERVING_GATE,
)
from omenative_core.model.observed import (
    RevisionView,
)
from omenative_core.model.plan import (
    Action,
    CreateObject,
    CreatePod,
    CreatePodGroup,
    CreateRevision,
    DeleteObject,
    DeletePod,
    DeletePodGroup,
    DeleteRevision,
    PatchPodImages,
    Plan,
    RecordAudit,
    RemoveAnnotations,
    SetFinalizer,
    SetServingGate,
    UpdateStatus,
)
from omenative_core.model.spec import JSON, InferenceReplica
from omenative_core.model.status import InferenceReplicaStatus
from omenative_core.status.wire import replica_from_json, status_from_json, status_to_json
from omenative_sim.events import _Events
from omenative_sim.objects import SimPod, SimPodGroup

__all__ = ["ApplyResult", "merge_patch"]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge key by key, ``null`` deletes, the rest replace.

    Returns a new value; neither argument is modified.
    """
    if not isinstance(patch, Mapping):
        return patch
    result: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


@frozen(kw_only=True)
class ApplyResult:
    """What ``World.apply`` did: actions applied, how many changed the world, the refusal."""

    applied: int
    changed: int
    error: str | None = None


class _ApiServer(_Events):
    """Actions and the replica object."""

    def apply(
        self, plan: Plan | Iterable[Action], now: float | None = None, *, limit: int | None = None
    ) -> ApplyResult:
        """Apply actions in order (at most ``limit``), then run the scheduler.

        Stops at the first action the API server would refuse, as the shell does.
        """
        if now is not None:
            self.advance(now)
        actions = plan.actions if isinstance(plan, Plan) else tuple(plan)
        if limit is not None:
            actions = actions[:limit]
        applied = changed = 0
        error: str | None = None
        for action in actions:
            before = self.version
            error = self._apply_one(action)
            if error is not None:
                self.notes.append((self.now, f"{action.kind} refused: {error}"))
                break
            applied += 1
            if self.version != before:
                changed += 1
        if self._sched_dirty:
            self._schedule()
        return ApplyResult(applied=applied, changed=changed, error=error)

    def _apply_one(self, action: Action) -> str | None:
        """Apply one action; the API server's refusal, or None."""
        handler = _HANDLERS.get(type(action))
        if handler is None:  # pragma: no cover - every Action kind has a handler
            return f"unknown action {action!r}"
        return handler(self, action)

    def _live_pod(self, name: str, uid: str | None) -> SimPod | None:
        """The pod ``name`` when its UID precondition (if any) holds."""
        pod = self.pods.get(name)
        if pod is None or (uid and pod.uid != uid):
            return None
        return pod

    def _update_status(self, action: UpdateStatus) -> str | None:
        self._write_status(action.status)
        return None

    def _create_pod(self, action: CreatePod) -> str | None:
        if action.name not in self.pods:
            self._add_pod(action.body)
        return None

    def _delete_pod(self, action: DeletePod) -> str | None:
        pod = self._live_pod(action.name, action.uid)
        if pod is None:
            return None
        if action.force:
            self._remove(pod)
        elif not pod.terminating:
            self._mark_deleted(pod, self.now)
        return None

    def _set_serving_gate(self, action: SetServingGate) -> str | None:
        pod = self._live_pod(action.name, action.uid)
        value = "True" if action.value else "False"
        if pod is not None and pod.gates.get(SERVING_GATE) != value:
            pod.gates[SERVING_GATE] = value
            self._refresh(pod)
        return None

    def _patch_pod_images(self, action: PatchPodImages) -> str | None:
        pod = self._live_pod(action.name, action.uid)
        if pod is not None:
            self._patch_images(pod, action.images, action.labels)
        return None

    def _create_pod_group(self, action: CreatePodGroup) -> str | None:
        if not self.cluster.pod_group_crd:
            return "the server could not find the requested resource (PodGroup CRD not installed)"
        name = str(action.body["metadata"]["name"])
        if name not in self.pod_groups:
            self.pod_groups[name] = SimPodGroup(action.body, self._new_uid("pg"))
            self._pg_cache = None
            self._sched_dirty = True
            self._changed(None)
        return None

    def _delete_pod_group(self, action: DeletePodGroup) -> str | None:
        group = self.pod_groups.get(action.name)
        if group is not None and (not action.uid or group.uid == action.uid):
            del self.pod_groups[action.name]
            self._pg_cache = None
            self._changed(None)
        return None

    def _create_revision(self, action: CreateRevision) -> str | None:
        meta = action.body.get("metadata") or {}
        name = str(meta["name"])
        if name not in self.revisions:
            rev = action.body.get("revision", 0)
            self.revisions[name] = RevisionView(
                name=name,
                uid=self._new_uid("rev"),
                revision=rev if isinstance(rev, int) else 0,
                data=action.body.get("data") or {},
                labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
            )
            self._rev_cache = None
            self._changed(None)
        return None

    def _delete_revision(self, action: DeleteRevision) -> str | None:
        found = self.revisions.get(action.name)
        if found is not None and (not action.uid or found.uid == action.uid):
            del self.revisions[action.name]
            self._rev_cache = None
            self._changed(None)
        return None

    def _create_object(self, action: CreateObject) -> str | None:
        key = (str(action.body.get("kind", "")), str(action.body["metadata"]["name"]))
        if key not in self.objects:
            self.objects[key] = action.body
            self._changed(None)
        return None

    def _delete_object(self, action: DeleteObject) -> str | None:
        if self.objects.pop((action.object_kind, action.name), None) is not None:
            self._changed(None)
        return None

    def _set_finalizer(self, action: SetFinalizer) -> str | None:
        meta = self._manifest["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if action.present and action.finalizer not in finalizers:
            meta["finalizers"] = [*finalizers, action.finalizer]
            self._replica_changed()
        elif not action.present and action.finalizer in finalizers:
            meta["finalizers"] = [f for f in finalizers if f != action.finalizer]
            self._replica_changed()
        return None

    def _remove_annotations(self, action: RemoveAnnotations) -> str | None:
        meta = self._manifest["metadata"]
        annotations = dict(meta.get("annotations") or {})
        if any(k in annotations for k in action.keys):
            for k in action.keys:
                annotations.pop(k, None)
            meta["annotations"] = annotations
            self._replica_changed()
        return None

    def _record_audit(self, action: RecordAudit) -> str | None:
        self.audit.setdefault(action.config_map, []).extend(action.entries)
        self._changed(None)
        return None

    def _patch_images(
        self, pod: SimPod, images: Mapping[str, str], labels: Mapping[str, str]
    ) -> None:
        changed = False
        if labels and any(pod.labels.get(k) != v for k, v in labels.items()):
            pod.labels.update(labels)
            changed = True
        for ct in pod.containers:
            new = images.get(ct.name)
            if new is None or new == ct.image:
                continue
            ct.image = new
            changed = True
            if pod.failed or pod.node is None:
                continue
            if self.nodes[pod.node].dead:
                continue
            if ct.started_once:
                ct.restart_count += 1
            ct.status_image = new
            self._start_container(pod, ct)
        if changed:
            self._refresh(pod)

    def _replica_changed(self, *, spec_changed: bool = False) -> None:
        meta = self._manifest["metadata"]
        if spec_changed:
            meta["generation"] = int(meta["generation"]) + 1
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        self._replica_base = replica_from_json(self._manifest)
        self._replica_cache = None
        self._changed(None)

    @property
    def manifest(self) -> JSON:
        """The replica's object as the API server holds it (without status)."""
        return self._manifest

    def patch_replica(self, patch: JSON, now: float | None = None) -> None:
        """Apply a JSON merge patch to the replica (a spec change bumps the generation)."""
        if now is not None:
            self.advance(now)
        patched = merge_patch(self._manifest, {k: v for k, v in patch.items() if k != "status"})
        meta = dict(patched.get("metadata") or {})
        for key in (
            "generation",
            "resourceVersion",
            "uid",
            "namespace",
            "name",
            "creationTimestamp",
        ):
            if key in self._manifest["metadata"]:
                meta[key] = self._manifest["metadata"][key]
        patched["metadata"] = meta
        replica_from_json(patched)  # raises CodecError before anything changes
        spec_changed = patched.get("spec") != self._manifest.get("spec")
        if patched == self._manifest:
            return
        self._manifest = patched
        self._replica_changed(spec_changed=spec_changed)

    def set_annotation(self, key: str, value: str | None, now: float | None = None) -> None:
        """Set (or with None remove) one annotation on the replica."""
        self.patch_replica({"metadata": {"annotations": {key: value}}}, now)

    @property
    def replica(self) -> InferenceReplica:
        """The replica as the shell would observe it, with the last status written."""
        if self._replica_cache is None:
            self._replica_cache = attrs.evolve(self._replica_base, status=self._status_seen)
        return self._replica_cache

    def _write_status(self, status: InferenceReplicaStatus) -> bool:
        if status == self.status:
            return False
        self.status = status
        if self.status_roundtrip:
            encoding = self.config.instance_status_encoding
            wire = status_to_json(
                status, encoding=encoding, max_decoded=self.config.max_decoded_instances
            )
            self._status_seen = status_from_json(
                wire, max_decoded=self.config.max_decoded_instances
            )
        else:
            self._status_seen = status
        meta = self._manifest["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        self._replica_base = attrs.evolve(
            self._replica_base,
            metadata=attrs.evolve(
                self._replica_base.metadata, resource_version=meta["resourceVersion"]
            ),
        )
        self._replica_cache = None
        self._changed(None)
        return True

    def status_json(self) -> dict[str, Any] | None:
        """The last status written, as the manager would write it (its configured encoding)."""
        if self.status is None:
            return None
        return status_to_json(
            self.status,
            encoding=self.config.instance_status_encoding,
            max_decoded=self.config.max_decoded_instances,
        )


_HANDLERS: Final[Mapping[type, Callable[[_ApiServer, Any], str | None]]] = {
    UpdateStatus: _ApiServer._update_status,
    CreatePod: _ApiServer._create_pod,
    DeletePod: _ApiServer._delete_pod,
    SetServingGate: _ApiServer._set_serving_gate,
    PatchPodImages: _ApiServer._patch_pod_images,
    CreatePodGroup: _ApiServer._create_pod_group,
    DeletePodGroup: _ApiServer._delete_pod_group,
    CreateRevision: _ApiServer._create_revision,
    DeleteRevision: _ApiServer._delete_revision,
    CreateObject: _ApiServer._create_object,
    DeleteObject: _ApiServer._delete_object,
    SetFinalizer: _ApiServer._set_finalizer,
    RemoveAnnotations: _ApiServer._remove_annotations,
    RecordAudit: _ApiServer._record_audit,
}
"""Each action kind and what the API server does with it (the table ``apply`` reads)."""

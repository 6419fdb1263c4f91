"""The migration audit ConfigMap (``RecordAudit``): ``history.json`` with the last entries.

GET, then CREATE or PUT, retried on a conflict three times; exact duplicates are skipped.
The map belongs to the InferenceService (or the standalone replica) it records.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import CONFIG_MAPS, INFERENCE_REPLICAS
from omenative_controller.pass_context import PassContext, PassStop, service_owner
from omenative_core.labels import LABEL_MANAGED_BY, MANAGED_BY
from omenative_core.model.plan import RecordAudit

__all__ = ["AUDIT_KEY", "AUDIT_LIMIT", "record_audit"]

AUDIT_KEY = "history.json"
"""The audit ConfigMap's key."""
AUDIT_LIMIT = 200
"""Audit entries kept."""


async def record_audit(client: KubeClient, action: RecordAudit, ctx: PassContext, lg: Any
                       ) -> None:
    """Merge ``action.entries`` into the audit ConfigMap of ``ctx``."""
    for _ in range(3):
        try:
            cm = await client.get(CONFIG_MAPS, action.config_map, ctx.namespace)
        except ApiError as exc:
            if not exc.not_found:
                raise
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": action.config_map, "namespace": ctx.namespace,
                             "labels": {LABEL_MANAGED_BY: MANAGED_BY},
                             "ownerReferences": [_audit_owner(ctx)]},
                "data": {AUDIT_KEY: _audit_text([], action.entries)},
            }
            try:
                await client.create(CONFIG_MAPS, body, ctx.namespace)
                return
            except ApiError as exc2:
                if exc2.already_exists:
                    continue
                raise
        data = cm.get("data") or {}
        try:
            old = json.loads(data.get(AUDIT_KEY) or "{}").get("entries") or []
        except (ValueError, AttributeError):
            lg.warning("audit.unreadable", config_map=action.config_map)
            old = []
        text = _audit_text(old, action.entries)
        meta = dict(cm.get("metadata") or {})
        owner = _audit_owner(ctx)
        refs = list(meta.get("ownerReferences") or ())
        owned = any(isinstance(r, Mapping) and r.get("uid") == owner["uid"] for r in refs)
        if text == data.get(AUDIT_KEY) and owned:
            return
        if not owned:  # written before the audit map had an owner
            meta["ownerReferences"] = [*refs, owner]
        meta.pop("managedFields", None)
        cm = {**cm, "metadata": meta, "data": {**data, AUDIT_KEY: text}}
        try:
            await client.replace(CONFIG_MAPS, action.config_map, cm, ctx.namespace)
            return
        except ApiError as exc:
            if exc.conflict:
                continue
            raise
    raise PassStop("conflict", f"audit {action.config_map}: kept conflicting")



def _audit_owner(ctx: PassContext) -> dict[str, Any]:
    """The audit ConfigMap belongs to the InferenceService (or the standalone replica) it
    records, so it goes with it instead of lingering for a later one of the same name."""
    owner = service_owner(ctx.raw)
    if owner is not None:
        return {"apiVersion": owner.get("apiVersion"), "kind": owner.get("kind"),
                "name": owner.get("name"), "uid": owner.get("uid")}
    return {"apiVersion": INFERENCE_REPLICAS.api_version, "kind": INFERENCE_REPLICAS.kind,
            "name": ctx.name, "uid": ctx.uid}


def _audit_text(old: Sequence[Any], new: Sequence[Mapping[str, Any]]) -> str:
    entries = list(old)
    for entry in new:
        if dict(entry) not in entries:
            entries.append(dict(entry))
    return json.dumps({"entries": entries[-AUDIT_LIMIT:]}, sort_keys=True)


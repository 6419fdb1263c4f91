"""Revision hashing, ControllerRevision rendering and revision history.

A revision is one version of an InferenceReplica's pod templates: every runner
(``name``, ``size``, ``template``) plus ``pairingProtocol``, plus the placement fields
(``topologyKey``, ``topologySpread``, ``topologySpreadKey``) *when set*: a change of where
a gang may run rolls through the update strategy like an image change, and a spec that
sets none of them hashes exactly as before (upgrading the manager rolls nothing). Its hash
is the first 10 hex digits of a sha256 over canonical JSON, so it is the same in every
process and on every Python version (``hash()`` is salted per process and never used).
Only the user's templates go in: the env vars, labels and readiness gate that rendering
injects are not hashed, so a scale (``OME_COMPONENT_REPLICAS``) never starts a rollout.

Canonical JSON here means: object keys sorted, compact separators, ASCII only, runners
sorted by name, and object members whose value is ``null`` dropped (the API server prunes
them from a structural CRD anyway, so a template read back from the server hashes like
the one that was written).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from omenative_core.labels import LABEL_REVISION_HASH, owner_reference, replica_labels
from omenative_core.model.observed import RevisionView
from omenative_core.model.spec import InferenceReplica, InferenceReplicaSpec, Runner

__all__ = [
    "HASH_LENGTH",
    "RevisionDataError",
    "canonical_json",
    "hash_of",
    "next_revision_number",
    "pairing_from_revision",
    "placement_from_revision",
    "placement_of",
    "revision_body",
    "revision_hash",
    "revision_name",
    "revisions_to_prune",
    "runners_from_revision",
    "runners_json",
    "spec_revision_hash",
]

HASH_LENGTH = 10
"""Hex digits of the sha256 kept in a revision hash."""


class RevisionDataError(ValueError):
    """A ControllerRevision's ``data`` is not a runner set this package wrote."""


def _canonical(value: Any) -> Any:
    """Plain JSON (dicts, lists, scalars) with ``null`` object members dropped."""
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    """The canonical JSON text of ``value`` (sorted keys, compact, ASCII, nulls dropped)."""
    return json.dumps(_canonical(value), sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def runners_json(runners: Iterable[Runner]) -> list[dict[str, Any]]:
    """Runners as canonical JSON objects ``{name, size, template}``, sorted by name."""
    return [
        {"name": r.name, "size": r.size, "template": _canonical(r.template)}
        for r in sorted(runners, key=lambda r: r.name)
    ]


def placement_of(spec: InferenceReplicaSpec) -> dict[str, str]:
    """The spec's placement fields that are set, by their JSON names (``{}``: none)."""
    fields = (("topologyKey", spec.topology_key), ("topologySpread", spec.topology_spread),
              ("topologySpreadKey", spec.topology_spread_key))
    return {k: v for k, v in fields if v}


def spec_revision_hash(spec: InferenceReplicaSpec, collision_count: int | None) -> str:
    """The hash of the spec's own revision: runners, pairing protocol and placement."""
    return revision_hash(spec.runners, spec.pairing_protocol, collision_count,
                         placement_of(spec))


def revision_hash(
    runners: Sequence[Runner],
    pairing_protocol: str | None,
    collision_count: int | None,
    placement: Mapping[str, str] | None = None,
) -> str:
    """The 10-hex-digit hash of a runner set and pairing protocol, salted by collisions.

    ``collision_count`` None and 0 both mean "no salt" (a codec that decodes an absent
    ``status.collisionCount`` as 0 must not rename every revision).
    """
    doc: dict[str, Any] = {
        "runners": runners_json(runners),
        "pairingProtocol": pairing_protocol,
    }
    if collision_count:
        doc["collisionCount"] = int(collision_count)
    if placement:  # only when set, so a spec without placement hashes as it always did
        doc["placement"] = dict(placement)
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:HASH_LENGTH]


def revision_name(prefix: str, hash: str) -> str:
    """The ControllerRevision name ``{prefix}-{hash}``."""
    return f"{prefix}-{hash}"


def hash_of(revision_name: str) -> str:
    """The hash part of a revision name (after the last ``-``); ``""`` if it has none."""
    head, sep, tail = revision_name.rpartition("-")
    return tail if sep and head else ""


def revision_body(
    replica: InferenceReplica,
    runners: Sequence[Runner],
    pairing_protocol: str | None,
    hash: str,
    number: int,
    placement: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ``apps/v1`` ControllerRevision storing ``runners``, ``pairing_protocol`` and the
    placement fields that are set."""
    labels = replica_labels(replica)
    labels[LABEL_REVISION_HASH] = hash
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": revision_name(replica.stable_prefix, hash),
            "namespace": replica.metadata.namespace,
            "labels": labels,
            "ownerReferences": [owner_reference(replica)],
        },
        "revision": number,
        "data": {"runners": runners_json(runners), "pairingProtocol": pairing_protocol,
                 **({"placement": dict(placement)} if placement else {})},
    }


def runners_from_revision(view: RevisionView) -> tuple[Runner, ...]:
    """The runners stored in a ControllerRevision, in stored (name) order.

    Raises ``RevisionDataError`` naming the revision when ``data.runners`` is malformed.
    """
    raw = view.data.get("runners") if isinstance(view.data, Mapping) else None
    if not isinstance(raw, list | tuple) or not raw:
        raise RevisionDataError(
            f"ControllerRevision {view.name!r}: data.runners is missing or empty"
        )
    out: list[Runner] = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise RevisionDataError(
                f"ControllerRevision {view.name!r}: data.runners[{i}] has no name"
            )
        size = item.get("size", 1)
        if isinstance(size, bool) or not isinstance(size, int):
            raise RevisionDataError(
                f"ControllerRevision {view.name!r}: data.runners[{i}].size is {size!r}"
            )
        template = item.get("template")
        if template is None:
            template = {}
        if not isinstance(template, Mapping):
            raise RevisionDataError(
                f"ControllerRevision {view.name!r}: data.runners[{i}].template is not an object"
            )
        out.append(Runner(name=item["name"], size=size, template=template))
    return tuple(out)


def pairing_from_revision(view: RevisionView) -> str | None:
    """The pairing protocol stored in a ControllerRevision (None when unset)."""
    value = view.data.get("pairingProtocol") if isinstance(view.data, Mapping) else None
    return value if isinstance(value, str) else None


def placement_from_revision(view: RevisionView) -> dict[str, str]:
    """The placement fields stored in a ControllerRevision (``{}``: none, or malformed)."""
    raw = view.data.get("placement") if isinstance(view.data, Mapping) else None
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): v for k, v in raw.items() if isinstance(v, str) and v}


def revisions_to_prune(
    revisions: Iterable[RevisionView], live: Collection[str], limit: int | None
) -> tuple[RevisionView, ...]:
    """Revisions to delete, oldest first: every non-live one beyond the ``limit`` newest.

    Live revisions (by name) are never pruned. "Newest" is the highest ``revision`` number,
    ties broken by name so the answer is deterministic. ``limit`` None disables pruning; a
    negative limit counts as 0.
    """
    if limit is None:
        return ()
    dead = sorted(
        (r for r in revisions if r.name not in live),
        key=lambda r: (r.revision, r.name),
    )
    keep = max(limit, 0)
    return tuple(dead[: len(dead) - keep]) if keep < len(dead) else ()


def next_revision_number(revisions: Iterable[RevisionView]) -> int:
    """One more than the highest ``revision`` number seen, or 1 when there is none."""
    return max((r.revision for r in revisions), default=0) + 1

"""The one admission check of ``ome.io/migration-request-v1-<uuid>`` annotations.

A migration request may sit on an InferenceService (OME's path: the controller copies it to
the component's InferenceReplica) or, an omenative extension, directly on a standalone
InferenceReplica. Both paths call ``migration_rejections`` so a request is judged the same
wherever it is written; only what it may name differs (``MigrationTarget``).

A request is refused with OME's reasons, inside the ``InvalidMigrationRequest`` message:

* ``UnsupportedSchemaVersion``: ``schemaVersion`` is missing or not ``"v1"``;
* ``MigrationRequestRejected``: anything else malformed: a key that does not end in a UUID,
  a value that is not a JSON object, unknown fields, a component this object does not have
  or that is not OMENative, a missing or negative ``instance``, bad hints, a bad time.

An unchanged request passes on update, so an object admitted earlier stays editable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from attrs import field, frozen

from omenative_core.labels import ANNOTATION_MIGRATION_PREFIX
from omenative_core.model.timefmt import parse_time
from omenative_core.service.rejection import Rejection

__all__ = [
    "MAX_HINT_NODES",
    "MIGRATION_FIELDS",
    "MIGRATION_REQUEST_REJECTED",
    "UNSUPPORTED_SCHEMA_VERSION",
    "MigrationTarget",
    "migration_rejections",
    "migration_request_problem",
]

MAX_HINT_NODES: Final = 8
"""Most ``hint_target_nodes`` a migration request may name."""

MIGRATION_FIELDS: Final = (
    "schemaVersion",
    "component",
    "instance",
    "from_node",
    "hint_target_nodes",
    "reason",
    "requested_at",
    "requested_by",
)
"""The fields of a migration request's JSON value."""

MIGRATION_REQUEST_REJECTED: Final = "MigrationRequestRejected"
"""OME's reason for a malformed migration request."""

UNSUPPORTED_SCHEMA_VERSION: Final = "UnsupportedSchemaVersion"
"""OME's reason for a request whose ``schemaVersion`` is not ``v1``."""

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_EXAMPLE_UUID = "0b6e8f43-3c1d-4a0e-9f1a-2b3c4d5e6f70"


@frozen(kw_only=True)
class MigrationTarget:
    """What a request on one object may name.

    ``modes``: each component of the object and the deployment mode it runs in (only
    OMENative Instances migrate). ``implied``: the component a request that names none
    means (a standalone InferenceReplica's own ``spec.component``); None makes
    ``component`` required (an InferenceService). ``kind`` words the messages.
    """

    modes: Mapping[str, str] = field(factory=dict)
    implied: str | None = None
    kind: str = "InferenceService"


_Problem = tuple[str, str]
_Check = Callable[[Mapping[str, Any], MigrationTarget], "_Problem | None"]


def _rejected(text: str) -> _Problem:
    return MIGRATION_REQUEST_REJECTED, text


def _unknown_fields(req: Mapping[str, Any], _t: MigrationTarget) -> _Problem | None:
    unknown = sorted(set(req) - set(MIGRATION_FIELDS))
    if not unknown:
        return None
    return _rejected(f"unknown field(s) {', '.join(unknown)}; known: {', '.join(MIGRATION_FIELDS)}")


def _schema_version(req: Mapping[str, Any], _t: MigrationTarget) -> _Problem | None:
    version = req.get("schemaVersion")
    if version == "v1":
        return None
    got = "it is missing" if version is None else f"got {version!r}"
    return UNSUPPORTED_SCHEMA_VERSION, f'schemaVersion must be "v1", {got}'


def _component(req: Mapping[str, Any], target: MigrationTarget) -> _Problem | None:
    component = req.get("component", target.implied)
    if component not in target.modes:
        return _rejected(
            f"component {component!r} is not a component of this {target.kind} "
            f"({', '.join(target.modes) or 'none'})"
        )
    mode = target.modes[component]
    if mode != "OMENative":
        return _rejected(f"component {component} runs as {mode}; only OMENative Instances migrate")
    return None


def _instance(req: Mapping[str, Any], _t: MigrationTarget) -> _Problem | None:
    if "instance" not in req:
        return _rejected(
            "instance is missing: name the index of the Instance to move, an integer >= 0"
        )
    instance = req["instance"]
    if isinstance(instance, bool) or not isinstance(instance, int) or instance < 0:
        return _rejected(f"instance must be an integer >= 0, got {instance!r}")
    return None


def _strings(req: Mapping[str, Any], _t: MigrationTarget) -> _Problem | None:
    for name in ("from_node", "reason", "requested_by"):
        if name in req and not isinstance(req[name], str):
            return _rejected(f"{name} must be a string, got {req[name]!r}")
    if "from_node" in req and not req["from_node"]:
        return _rejected("from_node must not be empty: name the node to move off, or leave it out")
    return None


def _hints(req: Mapping[str, Any], _t: MigrationTarget) -> _Problem | None:
    hints = req.get("hint_target_nodes", [])
    if not isinstance(hints, list) or not all(isinstance(h, str) and h for h in hints):
        return _rejected(f"hint_target_nodes must be a list of node names, got {hints!r}")
    if len(hints) > MAX_HINT_NODES:
        return _rejected(f"hint_target_nodes names {len(hints)} nodes; at most {MAX_HINT_NODES}")
    return None


def _requested_at(req: Mapping[str, Any], _t: MigrationTarget) -> _Problem | None:
    if "requested_at" not in req:
        return None
    try:
        parse_time(req["requested_at"])
    except (ValueError, TypeError):
        return _rejected(
            "requested_at must be an RFC 3339 time such as 2025-06-01T10:00:00Z, "
            f"got {req['requested_at']!r}"
        )
    return None


_CHECKS: Final[tuple[_Check, ...]] = (
    _unknown_fields,
    _schema_version,
    _component,
    _instance,
    _strings,
    _hints,
    _requested_at,
)


def migration_request_problem(key: str, value: str, target: MigrationTarget) -> _Problem | None:
    """(OME's reason, what is wrong) with one request; None when it is well formed."""
    uuid = key[len(ANNOTATION_MIGRATION_PREFIX) :]
    if not _UUID.match(uuid):
        return _rejected(f"the key must end in a UUID such as {_EXAMPLE_UUID}, got {uuid!r}")
    try:
        req: Any = json.loads(value)
    except ValueError as exc:
        return _rejected(f"the value is not JSON ({exc})")
    if not isinstance(req, Mapping):
        return _rejected("the value must be a JSON object")
    for check in _CHECKS:
        problem = check(req, target)
        if problem is not None:
            return problem
    return None


def migration_rejections(
    annotations: Mapping[str, str],
    old_annotations: Mapping[str, str] | None,
    target: MigrationTarget,
) -> list[Rejection]:
    """A rejection per new or changed malformed request among ``annotations``.

    The message reads ``InvalidMigrationRequest: migration request <key>: <OME's reason>:
    <what is wrong>``; ``reason`` is ``InvalidMigrationRequest``, the umbrella.
    """
    out: list[Rejection] = []
    before = old_annotations or {}
    for key, value in sorted(annotations.items()):
        if not key.startswith(ANNOTATION_MIGRATION_PREFIX) or before.get(key) == value:
            continue
        problem = migration_request_problem(key, value, target)
        if problem is not None:
            out.append(
                Rejection(
                    reason="InvalidMigrationRequest",
                    message=f"InvalidMigrationRequest: migration request {key}: "
                    f"{problem[0]}: {problem[1]}",
                    field=f"metadata.annotations[{key}]",
                )
            )
    return out

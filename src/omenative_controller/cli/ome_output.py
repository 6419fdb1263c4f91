"""Pure helpers of ``kubectl ome``: tables, details, preconditions and request bodies.

Everything here works on JSON as the API server returns it (an InferenceReplica, its
``status`` in either row encoding) and on the core's status model; nothing does I/O, so the
formatting is unit-tested without a cluster.

This module is the one name the command and its users import (``ome_output as out``); the
helpers live by subject next to it, one concept each:

- ``output_basics``: status decoding, ages, revisions, tables;
- ``instance_output``: Instance rows and details, retry blocks, a replica's rollout status;
- ``migration_output``: migration records and requests, ``scale`` preconditions;
- ``rollout_output``: InferenceService rollout groups (status, explain, history);
- ``rollout_verbs_output``: what ``promote``, ``rollback`` and ``repin`` would write or refuse.
"""

from __future__ import annotations

from omenative_controller.cli.instance_output import (
    ANNOTATION_RELEASE_HELD,
    evidence,
    format_components_table,
    format_instance_detail,
    format_instance_table,
    format_retry_blocks,
    format_rollout_status,
    gang_by_instance,
    held_revision_match,
    instance_json,
    retry_blocks_json,
    rollout_json,
)
from omenative_controller.cli.migration_output import (
    format_migrations,
    migration_conflict,
    migrations_json,
    pending_migration_requests,
    scale_bounds_refusal,
    scale_refusal,
)
from omenative_controller.cli.output_basics import age, decode_status, revs, short_revision, table
from omenative_controller.cli.rollout_output import (
    ROLLOUT_ANNOTATIONS,
    explain_line,
    format_history,
    format_service_rollout,
    has_rollout,
    history_json,
    rollback_requested,
    rollout_requests,
    rollout_state,
    service_rollout_json,
    spec_plan_token,
)
from omenative_controller.cli.rollout_verbs_output import (
    PromoteTarget,
    promote_target,
    repin_refusal,
    rollback_preview,
    valid_repin_token,
)
from omenative_controller.migration_requests import (
    ACTIVE_MIGRATION_PHASES,
    ANNOTATION_MIGRATION_PREFIX,
    MAX_HINT_NODES,
    migration_request,
)
from omenative_core.rollout import (
    ANNOTATION_OVERRIDE_ANALYSIS,
    ANNOTATION_PAUSED,
    ANNOTATION_PROMOTE,
    ANNOTATION_REPIN,
    ANNOTATION_ROLLBACK,
)

__all__ = [
    "ACTIVE_MIGRATION_PHASES",
    "ANNOTATION_MIGRATION_PREFIX",
    "ANNOTATION_OVERRIDE_ANALYSIS",
    "ANNOTATION_PAUSED",
    "ANNOTATION_PROMOTE",
    "ANNOTATION_RELEASE_HELD",
    "ANNOTATION_REPIN",
    "ANNOTATION_ROLLBACK",
    "MAX_HINT_NODES",
    "ROLLOUT_ANNOTATIONS",
    "PromoteTarget",
    "age",
    "decode_status",
    "evidence",
    "explain_line",
    "format_components_table",
    "format_history",
    "format_instance_detail",
    "format_instance_table",
    "format_migrations",
    "format_retry_blocks",
    "format_rollout_status",
    "format_service_rollout",
    "gang_by_instance",
    "has_rollout",
    "held_revision_match",
    "history_json",
    "instance_json",
    "migration_conflict",
    "migration_request",
    "migrations_json",
    "pending_migration_requests",
    "promote_target",
    "repin_refusal",
    "retry_blocks_json",
    "revs",
    "rollback_preview",
    "rollback_requested",
    "rollout_json",
    "rollout_requests",
    "rollout_state",
    "scale_bounds_refusal",
    "scale_refusal",
    "service_rollout_json",
    "short_revision",
    "spec_plan_token",
    "table",
    "valid_repin_token",
]

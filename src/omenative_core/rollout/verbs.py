"""The rollout verbs: ISVC annotations a user (or ``kubectl ome rollout``) sets to steer a run.

Each is consumed (the decision lists it under ``remove_annotations``) once acted on or
rejected; a rejected verb also gets a Warning Event that says why.
"""

from __future__ import annotations

import re

__all__ = [
    "ANNOTATION_OVERRIDE_ANALYSIS",
    "ANNOTATION_PAUSED",
    "ANNOTATION_PROMOTE",
    "ANNOTATION_REPIN",
    "ANNOTATION_ROLLBACK",
]

ANNOTATION_PROMOTE = "ome.io/rollout-promote"
"""Pass a manual gate one step: the value is the canary revision hash (>= 6 characters)."""


ANNOTATION_OVERRIDE_ANALYSIS = "ome.io/rollout-override-analysis"
"""omenative's spelling of ``promote --override-analysis``: with a promote, passes an
analysis gate too."""


ANNOTATION_ROLLBACK = "ome.io/rollout-rollback"
"""``"true"``: send every member back to its stable revision."""


ANNOTATION_REPIN = "ome.io/rollout-repin"
"""``rp1:<12 hex>`` (the current plan's token) or ``now``: move the run to the current plan."""


ANNOTATION_PAUSED = "ome.io/rollout-paused"
"""``"true"`` or ``freeze``: no step advances (timed gates keep aging)."""


PROMOTE_VALUE = re.compile(r"^[a-z0-9]{6,}$")
"""A promote names the canary revision by a hash prefix of at least 6 characters."""

REPIN_VALUE = re.compile(r"^rp1:[0-9a-f]{12}$")
"""A repin names the plan token it expects (or says ``now``)."""

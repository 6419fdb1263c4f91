"""Admission warning ``LWSVariableUnderOMENative``: a component that runs on OMENative
(leader/worker) but whose pods still read LeaderWorkerSet's variables or labels.

OMENative pods get none of LeaderWorkerSet's ``LWS_*`` variables or
``leaderworkerset.sigs.k8s.io/*`` labels, so a runtime written for a LeaderWorkerSet keeps
starting but its ``$(LWS_LEADER_ADDRESS)`` expands to nothing. It is a warning, not a
rejection: the object is admitted (the user may be mid-way through a migration), and the
message names the component, where the name was found and OME's replacement
(``docs/migrating-from-lws.md`` has the table).
"""

from __future__ import annotations

import json
import re
from typing import Final

from omenative_core.service.merge import component_runners, effective_component
from omenative_core.service.model import ComponentSpec, InferenceService, ServingRuntime
from omenative_core.service.modes import MODE_OMENATIVE, explain_mode
from omenative_core.service.rejection import Rejection, warn

__all__ = ["LWS_REPLACEMENTS", "REASON_LWS_VARIABLE", "lws_variable_warnings"]

REASON_LWS_VARIABLE: Final = "LWSVariableUnderOMENative"
"""The warning's reason."""

LWS_REPLACEMENTS: Final = {
    "LWS_LEADER_ADDRESS": "$(OME_LEADER_ADDRESS)",
    "LWS_GROUP_SIZE": "$(OME_INSTANCE_POD_COUNT)",
    "LWS_WORKER_INDEX": "$(OME_INSTANCE_POD_RANK)",
    "leaderworkerset.sigs.k8s.io/name": "label ome.io/inferencereplica",
    "leaderworkerset.sigs.k8s.io/group-index": "label ome.io/instance-index",
    "leaderworkerset.sigs.k8s.io/worker-index": "label ome.io/runner",
}
"""LeaderWorkerSet name -> what an OMENative pod reads instead (the docs' table)."""

_LWS_NAME: Final = re.compile(r"\bLWS_[A-Z0-9_]+|leaderworkerset\.sigs\.k8s\.io/[a-z-]+")


def _found(text: str) -> list[str]:
    return sorted(set(_LWS_NAME.findall(text)))


def _text(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _where(isvc: InferenceService, runtime: ServingRuntime | None, component: str) -> str:
    own = isvc.component(component)
    if own is not None and _found(_text(own.raw)):
        return f"spec.{component}"
    if runtime is not None:
        return f"{runtime.kind} {runtime.name} {component}Config"
    return f"spec.{component}"


def _replacement(name: str) -> str:
    return LWS_REPLACEMENTS.get(name, "no OMENative equivalent")


def _multi_pod(merged: ComponentSpec) -> bool:
    return merged.leader is not None or merged.worker is not None


def lws_variable_warnings(
    isvc: InferenceService, runtime: ServingRuntime | None
) -> list[Rejection]:
    """One ``LWSVariableUnderOMENative`` warning per leader/worker engine or decoder that
    runs on OMENative while its pod templates (InferenceService and runtime merged) name a
    LeaderWorkerSet variable or label."""
    out: list[Rejection] = []
    for component in ("engine", "decoder"):
        merged = effective_component(isvc, runtime, component)
        if merged is None or not _multi_pod(merged):
            continue
        if explain_mode(isvc, runtime, component).mode != MODE_OMENATIVE:
            continue
        runners = component_runners(isvc, runtime, component, merged, multi_pod=True)
        names = _found(_text([r.template for r in runners]))
        if not names:
            continue
        swaps = ", ".join(f"{n} -> {_replacement(n)}" for n in names)
        out.append(
            warn(
                REASON_LWS_VARIABLE,
                f"spec.{component}",
                f"{component} runs on OMENative but {_where(isvc, runtime, component)} "
                f"still reads LeaderWorkerSet names that OMENative pods do not get: {swaps} "
                "(docs/migrating-from-lws.md)",
            )
        )
    return out

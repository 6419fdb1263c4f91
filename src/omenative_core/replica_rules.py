"""The rules an InferenceReplica must follow before anything is rendered, one function per
concern: the runner shape, placement and pairing, and Kubernetes' name rules.

Each returns ``"<Reason>: <message>"`` entries that name the field and the rule in plain
words; ``render.validate_replica`` puts them together (it adds the pod and Service names,
which need the naming scheme).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

from omenative_core.model.spec import RUNNER_NAMES, InferenceReplicaSpec, Runner
from omenative_core.placement import SPREAD_POLICIES

__all__ = ["MAX_NAME_LENGTH"]

MAX_NAME_LENGTH: Final = 63
"""Longest DNS label / label value Kubernetes accepts (pod hostnames, Service names)."""

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
"""A DNS-1123 label (pod hostnames)."""
DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
"""A DNS-1035 label (Service names)."""
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
"""A Kubernetes label value."""
_PAIRING = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def too_long(what: str, value: str) -> str | None:
    """``NameTooLong`` when ``value`` is over ``MAX_NAME_LENGTH`` characters, else None."""
    if len(value) > MAX_NAME_LENGTH:
        return (
            f"NameTooLong: {what} {value!r} is {len(value)} characters; "
            f"Kubernetes allows {MAX_NAME_LENGTH}"
        )
    return None


def _runner_set_problems(names: Sequence[str]) -> list[str]:
    errors: list[str] = []
    if not names:
        errors.append(  # OME's reason and message (inferencereplica/render.go)
            "TemplateSourceMissing: spec sets neither runners nor modelRef or runtimeRef; "
            "one template source is required"
        )
    for n in sorted(set(names)):
        if names.count(n) > 1:
            errors.append(f"DuplicateRunner: runner {n!r} appears {names.count(n)} times")
        if n not in RUNNER_NAMES:
            errors.append(f"UnknownRunner: runner {n!r} is not one of {', '.join(RUNNER_NAMES)}")
    present = set(names)
    if "default" in present and present & {"leader", "worker"}:
        errors.append(
            "DefaultRunnerNotAlone: runner 'default' cannot be combined with 'leader' or 'worker'"
        )
    if "leader" in present and "worker" not in present:
        errors.append("LeaderRequiresWorker: runner 'leader' needs a 'worker' runner")
    if "worker" in present and "leader" not in present:
        errors.append("WorkerRequiresLeader: runner 'worker' needs a 'leader' runner")
    return errors


def runner_problems(runners: Sequence[Runner]) -> tuple[list[str], bool]:
    """What is wrong with the runners, and whether their shape is sound enough to name
    pods (a bad size of a default or leader runner, or a template without containers,
    still leaves the names computable)."""
    errors = _runner_set_problems([r.name for r in runners])
    shape_ok = not errors
    for r in runners:
        if r.name == "worker" and r.size < 1:
            errors.append(f"WorkerSizeMustBePositive: runner 'worker' has size {r.size}")
            shape_ok = False
        elif r.name in ("default", "leader") and r.size != 1:
            errors.append(f"InvalidRunnerSize: runner {r.name!r} has size {r.size}; it must be 1")
        tspec = r.template.get("spec") if isinstance(r.template, Mapping) else None
        containers = tspec.get("containers") if isinstance(tspec, Mapping) else None
        if not isinstance(containers, list | tuple) or not containers:
            errors.append(f"ContainersRequired: runner {r.name!r} template has no containers")
    return errors, shape_ok


def placement_problems(spec: InferenceReplicaSpec) -> list[str]:
    """What is wrong with ``topologySpread`` and ``pairingProtocol``."""
    errors: list[str] = []
    if spec.topology_spread is not None:
        if spec.topology_spread not in SPREAD_POLICIES:
            errors.append(
                f"InvalidTopologySpread: topologySpread {spec.topology_spread!r} is not "
                "Preferred or Required"
            )
        elif not (spec.topology_spread_key or spec.topology_key):
            errors.append(
                "TopologySpreadKeyRequired: topologySpread is set but neither "
                "topologySpreadKey nor topologyKey is"
            )
    if spec.pairing_protocol is not None and (
        len(spec.pairing_protocol) > MAX_NAME_LENGTH or not _PAIRING.match(spec.pairing_protocol)
    ):
        errors.append(
            f"InvalidPairingProtocol: pairingProtocol {spec.pairing_protocol!r} must be at "
            f"most {MAX_NAME_LENGTH} characters of letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )
    return errors

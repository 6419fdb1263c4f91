"""What the kubelet stand-in is told: its settings and the faults it injects.

``Faults`` come from a JSON file (acknowledged next to it, see ``applied_path``) and from
Python; image entries are ``fnmatch`` patterns.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs

from omenative_devcluster.kubelet_api import Json


@attrs.frozen
class Faults:
    """The injected faults in force (union of the fault file and the Python API)."""

    bad_images: frozenset[str] = frozenset()
    crash_images: frozenset[str] = frozenset()
    dead_nodes: frozenset[str] = frozenset()

    def union(self, other: Faults) -> Faults:
        """Both sets of faults at once."""
        return Faults(
            self.bad_images | other.bad_images,
            self.crash_images | other.crash_images,
            self.dead_nodes | other.dead_nodes,
        )

    @staticmethod
    def from_json(data: Any) -> Faults:
        """Parse the fault file's object (``badImages``, ``crashImages``, ``deadNodes``)."""
        if not isinstance(data, dict):
            raise ValueError("the fault file must hold a JSON object")

        def strings(key: str) -> frozenset[str]:
            val = data.get(key, [])
            if not isinstance(val, list) or not all(isinstance(v, str) for v in val):
                raise ValueError(f"{key} must be a list of strings")
            return frozenset(val)

        return Faults(strings("badImages"), strings("crashImages"), strings("deadNodes"))

    def to_json(self) -> Json:
        """The fault file's format."""
        return {
            "badImages": sorted(self.bad_images),
            "crashImages": sorted(self.crash_images),
            "deadNodes": sorted(self.dead_nodes),
        }


def applied_path(fault_file: Path) -> Path:
    """Where the stand-in acknowledges the fault file it applied (``faults.applied.json``)."""
    return fault_file.with_name(fault_file.stem + ".applied.json")


def acknowledge_faults(fault_file: Path, generation: Any, faults: Faults) -> None:
    """Write ``applied_path``: a writer in another process learns the faults are in force.

    Written to a temporary file and renamed, so a reader never sees half of it; a failure to
    write is ignored (the next change of the fault file tries again).
    """
    ack = applied_path(fault_file)
    with contextlib.suppress(OSError):
        tmp = ack.with_suffix(".tmp")
        tmp.write_text(json.dumps({"generation": generation, "faults": faults.to_json()}) + "\n")
        tmp.replace(ack)


def image_matches(image: str, patterns: Iterable[str]) -> bool:
    """Whether ``image`` is listed (exact name or shell pattern)."""
    return any(image == p or fnmatch.fnmatchcase(image, p) for p in patterns)


STAND_IN_TAINT = {"key": "omenative.io/stand-in", "value": "true", "effect": "NoSchedule"}
"""The taint stand-in nodes carry when real nodes run in the same cluster (never mixed)."""


@attrs.define
class StandInConfig:
    """Settings of the stand-in: which API, how many nodes, the delays, the fault file."""

    kubeconfig: Path | None = None
    nodes: int = 4
    gpus_per_node: int = 8
    node_prefix: str = "node-"
    start_delay: float = 0.5
    ready_delay: float = 0.5
    delete_delay: float = 0.2
    heartbeat_seconds: float = 4.0
    lease_seconds: int = 40
    fault_file: Path | None = None
    #: at most this many API writes in flight per node (each node's kubelet has its own
    #: client; one budget for all nodes made pods wait for one another's status writes)
    max_inflight: int = 32
    cpu: str = "64"
    memory: str = "512Gi"
    pods: str = "250"
    kubelet_version: str = "v1.36.3"
    #: taint the nodes (``STAND_IN_TAINT``) so pods meant for real nodes never land on them
    tainted: bool = False

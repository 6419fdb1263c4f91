"""The world simulator: a seeded, discrete-event cluster the planner runs against.

``World`` applies plans and produces snapshots (with fault injection); ``parse_scenario``
reads a scenario file's content; ``run_scenario`` runs the real planner through one and
returns a ``SimResult`` (the timeline, convergence, summary and final status). Everything
here is pure: no I/O, no clock, and randomness only from the world's own seeded
``random.Random``; the exceptions are ``cli.py`` and ``pictures/`` (``--plot``: drawn
from a run's JSON and written to a file, only when asked).
"""

from omenative_sim.runner import (
    MIGRATION_ANNOTATION_PREFIX,
    Planner,
    SimResult,
    migration_request_uuid,
    run_scenario,
)
from omenative_sim.scenario import (
    EVENT_KINDS,
    FailPod,
    Migrate,
    Scenario,
    ScenarioError,
    ScenarioEvent,
    parse_scenario,
)
from omenative_sim.world import (
    EPOCH,
    GPU_RESOURCE,
    ApplyResult,
    ClusterSpec,
    SimPod,
    World,
    WorldError,
    merge_patch,
    pod_gpus,
)

__all__ = [
    "EPOCH",
    "EVENT_KINDS",
    "GPU_RESOURCE",
    "MIGRATION_ANNOTATION_PREFIX",
    "ApplyResult",
    "ClusterSpec",
    "FailPod",
    "Migrate",
    "Planner",
    "Scenario",
    "ScenarioError",
    "ScenarioEvent",
    "SimPod",
    "SimResult",
    "World",
    "WorldError",
    "merge_patch",
    "migration_request_uuid",
    "parse_scenario",
    "pod_gpus",
    "run_scenario",
]

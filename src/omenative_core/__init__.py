"""omenative_core: the pure Instance lifecycle engine of OMENative.

Contract (one screen):

1. ``plan(snapshot) -> Plan``. A ``Snapshot`` is everything observed about one
   InferenceReplica (its spec and last status, pods, nodes, PodGroups, EndpointSlices,
   ControllerRevisions, the API errors of the last pass, the cluster lifecycle config) and
   ``now``. A ``Plan`` is an ordered tuple of actions, the complete new status, events and
   when to look again.
2. Pure: no I/O, no clock, no randomness, no asyncio, no Kubernetes client. The same
   snapshot always gives the same plan.
3. Level-triggered: everything to remember between passes lives in the status the plan
   returns, and the status is written before any action that destroys something.
4. Quiescent at rest: when the world matches the spec, the plan has no actions and the
   status equals the observed one.
5. Deterministic names (pods ``{prefix}-{index}-{runner}-{ordinal}``), so a repeated create
   is answered "already exists" and changes nothing.
"""

from omenative_core.model import *  # noqa: F403

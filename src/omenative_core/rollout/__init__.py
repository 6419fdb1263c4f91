"""Rollout groups: engine, decoder and router rolling out together (``spec.rollout``).

Contract (one screen):

1. ``parse_rollout(json) -> RolloutSpec`` reads ``spec.rollout``; ``validate_rollout`` is
   the admission check, with OME's reasons (``Rejection``s; warnings admit).
2. ``decide(spec, state, members, now, analysis_results, annotations, config) ->
   RolloutDecision`` is one pass. ``members`` maps each component to a ``MemberView`` of its
   InferenceReplica; the decision says, per component, the ``Pacing`` (partition =
   desired - allowed, rollbackToRevision) and rollingUpdate budgets to write, the traffic to
   record and the rollout hold; plus the new ``RolloutState``, events, annotations to
   remove, analysis queries to run now, and when to look again.
3. Pure: no I/O, clock, randomness or client. The shell reads Prometheus, writes pacing,
   traffic, holds and the state (``state_to_json``) into status, and removes annotations.
4. Level-triggered: everything remembered between passes is in ``RolloutState``; events
   are emitted on transitions, so a repeated pass changes nothing.
5. ``explain`` turns a state into one line; ``services`` names the per-revision Services
   and the peer endpoint variables.
"""

from omenative_core.rollout.decide import *  # noqa: F403
from omenative_core.rollout.decision import *  # noqa: F403
from omenative_core.rollout.explain import *  # noqa: F403
from omenative_core.rollout.members import *  # noqa: F403
from omenative_core.rollout.model import *  # noqa: F403
from omenative_core.rollout.services import *  # noqa: F403
from omenative_core.rollout.spec import *  # noqa: F403
from omenative_core.rollout.state import *  # noqa: F403
from omenative_core.rollout.steps import *  # noqa: F403
from omenative_core.rollout.validate import *  # noqa: F403
from omenative_core.rollout.verbs import *  # noqa: F403

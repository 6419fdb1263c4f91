"""The planner's passes, one module per concern (``planner.PASSES`` composes them).

| module | owns |
|---|---|
| ``view`` | ``PassView``: what a pass reads (snapshot, policy, revisions, expected pods), frozen |
| ``state`` | ``PassWrites`` (what a pass writes), ``PassState`` (view, write-set, cache) |
| ``revisions`` | the spec's revision, the rollout target, rows and pods by index, pruning |
| ``pods`` | pod primitives: create, drain, force-delete, PodGroup delete |
| ``bringup`` | one attempt's pods towards all Ready; the readiness deadline |
| ``outcomes`` | how an attempt ends: Ready, Failed (RetryBlock, relocation), abandoned surge |
| ``repair`` | Create and Restart moves, settled rows' health, rebuilds of Failed Instances |
| ``steady`` | the steady rows of a pass found at once: each pod read once, names matched |
| ``scale`` | scale-down and scale-up |
| ``update_moves`` | the moves of an open Update (gang surge, surge, in place, RecreatePod) |
| ``updates`` | which stale Instances start an Update this pass, by strategy and budget |
| ``migrations`` | migration records: accept, start, progress, the Migrate moves, prune |
| ``verbs`` | user verbs: release-held, reset-instances, migration-request annotations |
| ``stalls`` | waits nobody reports: pods no scheduler decided on (``RolloutStalled``) |
| ``teardown`` | Delete moves, condemning Instances, InferenceReplica deletion, orphans |
| ``status`` | counters, conditions, rolloutHold, the assembled ``Plan`` |

``lifecycle.py`` (beside this package) is the table of moves that maps each open
operation to its handler here.
"""

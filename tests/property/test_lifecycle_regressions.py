"""Histories the lifecycle machine once found, replayed as they were found.

Each runs the machine's own rules in order, so every pass is checked by every invariant
(``invariants.py``) as in the random search; kept here because the search's example
database is not in the repository and may not find them again.
"""

from __future__ import annotations

from tests.property.test_incremental_plan import IncrementalMachine
from tests.property.test_lifecycle_machine import Draws as _Draws
from tests.property.test_lifecycle_machine import LifecycleMachine


def test_a_gang_cut_short_before_an_in_place_update_leaves_rotation_whole() -> None:
    """A manager died after dropping only the leader's serving gate of an in-place update.
    The next pass patched the leader while its workers still served; it must drop the
    workers' gates first and patch the whole gang after (``update_moves._patch_images``)."""
    m = LifecycleMachine()
    m.setup(multi=True, strategy="SurgeThenDrain", size=2, replicas=1, spare_nodes=0)
    m.bad_image()
    m.controller_pass()
    m.scale(replicas=1)
    m.time_passes(seconds=1)
    m.new_image()
    m.held_status_pass()
    m.time_passes(seconds=30)
    m.pause(freeze=False, paused=False)
    m.time_passes(seconds=10)
    m.bad_image()
    m.change_strategy(strategy="InPlaceIfPossible")
    m.partial_apply(limit=3)  # status, revision, the leader's gate: then the manager died
    m.teardown()  # converges, every pass checked


def test_an_in_place_patch_cut_short_converges_without_serving_a_mixed_gang() -> None:
    """A manager died between the leader's and the worker's image patch: the gang is on two
    revisions of one incarnation, out of rotation, until the next pass patches the rest."""
    m = LifecycleMachine()
    m.setup(multi=True, size=1, replicas=1, strategy="SurgeThenDrain", spare_nodes=0)
    m.bad_image()
    m.controller_pass()
    m.controller_pass()
    m.new_image()
    m.change_strategy(strategy="RecreatePod")
    m.time_passes(seconds=1)
    m.time_passes(seconds=2)
    m.time_passes(seconds=5)
    m.bad_image()
    m.change_strategy(strategy="InPlaceIfPossible")
    m.controller_pass()
    m.partial_apply(limit=2)
    m.controller_pass()
    m.teardown()


def test_a_scale_to_zero_before_a_create_is_condemned_stays_under_the_pod_ceiling() -> None:
    """Only the status of a scale-up was applied, then replicas 0: the next pass brings
    the Create's pod up and condemns it at once, so the pod counts against the count from
    before the scale (``pod_ceiling``), which must not be forgotten while the row lives."""
    m = LifecycleMachine()
    m.setup(multi=False, size=1, replicas=1, strategy="SurgeThenDrain", spare_nodes=0)
    m.partial_apply(limit=1)
    m.scale(replicas=0)
    m.partial_apply(limit=0)
    m.controller_pass()
    m.teardown()


def test_a_surge_pod_left_by_an_ended_surge_counts_until_it_is_gone() -> None:
    """Dev-profile seed 2 (incremental machine): an abandoned single-pod surge's pod was
    still draining (not yet terminating) with no Update open, so two more surges opened
    under maxSurge 2: 8 Instances' worth of pods for 5 replicas (``pod_ceiling``)."""
    m = LifecycleMachine()
    m.setup(multi=False, size=1, replicas=5, strategy="SurgeThenDrain", spare_nodes=0,
            opening="settle")
    m.migrate(data=_Draws(0))  # type: ignore[arg-type]
    m.time_passes(seconds=10)
    m.bad_image()
    m.bad_image()
    m.controller_pass()
    m.controller_pass()
    m.controller_pass()
    m.teardown()


def test_surges_opened_before_a_scale_down_finish_under_the_larger_ceiling() -> None:
    """Dev-profile seed 7: 6 gangs rolling with maxSurge 25% (2 surges), then replicas 4
    (25% is 1): the two surges in flight finish; the row ceiling, like the pod ceiling,
    takes maxSurge at the larger desired count (issue 30 item 3)."""
    m = LifecycleMachine()
    m.setup(multi=True, size=1, replicas=6, strategy="SurgeThenDrain", spare_nodes=0)
    m.controller_pass()
    m.scale_mid_rollout(data=_Draws(False, 6))  # type: ignore[arg-type]
    m.scale_mid_rollout(data=_Draws(4))  # type: ignore[arg-type]
    m.teardown()


def test_a_migration_waiting_in_accepted_fails_at_its_deadline_incrementally() -> None:
    """Dev-profile seed 216707073869480180889000164050517743495 (incremental machine): the
    source's node failed, so its Create waits NodeUnknown and the migration asked for it
    waits in Accepted. The pass at rest registered no wake-up at the record's deadline, so
    the memo's quiet plan was reused past it while the full plan failed the record
    (``MigrationExpired``): ``migrations.start`` registers the deadline."""
    m = IncrementalMachine()
    m.setup(multi=False, strategy="SurgeThenDrain", spare_nodes=1, replicas=0, size=2)
    m.controller_pass()
    m.controller_pass()
    m.fail_node(data=_Draws("node-2"))  # type: ignore[arg-type]
    for _ in range(3):
        m.controller_pass()
    m.migrate(data=_Draws(0))  # type: ignore[arg-type]
    for _ in range(3):
        m.controller_pass()
    m.time_passes(seconds=60)
    m.time_passes(seconds=60)  # the deadline: every plan is checked against the full one
    m.teardown()

"""Queued migrations of one Instance stay under the pod ceiling (the property machine's
history, replayed rule by rule so every pass is checked by every invariant).

Three requests for a single-pod Instance waited in ``Accepted`` while its node failed and
it was rebuilt, past their deadline. Each then opened a replacement that failed in the same
pass, and the next opened while the failed one's pod still terminated: 4 Instances held
pods with ``replicas`` 0 (one Instance), ``maxSurge`` 1 and one migration in flight.
"""

from __future__ import annotations

from tests.property.test_lifecycle_machine import Draws as _Draws
from tests.property.test_lifecycle_machine import LifecycleMachine


def _queued_migrations_past_their_deadline() -> LifecycleMachine:
    m = LifecycleMachine()
    m.setup(multi=False, size=1, replicas=0, strategy="SurgeThenDrain", spare_nodes=0)
    m.new_image()
    m.new_image()
    m.time_passes(seconds=1)
    m.fail_node(data=_Draws("node-0"))  # type: ignore[arg-type]
    m.migrate(data=_Draws(0))  # type: ignore[arg-type]
    m.bad_image()
    m.bad_image()
    m.migrate(data=_Draws(0))  # type: ignore[arg-type]
    m.migrate(data=_Draws(0))  # type: ignore[arg-type]
    m.controller_pass()
    m.time_passes(seconds=60)
    m.time_passes(seconds=60)
    return m


def test_requests_that_waited_past_their_deadline_fail_without_a_replacement() -> None:
    m = _queued_migrations_past_their_deadline()
    m.reconcile(rounds=20)  # the rebuilt source serves: the queued requests are judged
    status = m.world.status
    assert status is not None
    records = sorted(status.migrations, key=lambda r: r.request_uuid)
    assert [r.phase for r in records] == ["Failed"] * 3
    assert all(r.surge_instance is None for r in records), "a replacement was opened"
    assert all("waited in Accepted" in r.message for r in records)


def test_queued_migrations_converge_under_the_pod_ceiling() -> None:
    m = _queued_migrations_past_their_deadline()
    m.teardown()  # every pass checks pod_ceiling; converges and tears down

"""The rollout's inputs: each member InferenceReplica summarised (``MemberView``) and the
shell's analysis measurements.

A member is seen only through its view: Instances, ready and serving Instances per running
revision, whether the latest revision is held or failing, pairing tokens, its own update
strategy and the traffic recorded last pass. ``member_view`` builds one from the
InferenceReplica's spec and status; the decider never reads the replica itself.
"""

from __future__ import annotations

from collections.abc import Mapping

from attrs import field, frozen

from omenative_core.model.spec import InferenceReplica, IntOrStr
from omenative_core.model.status import InferenceReplicaStatus, InstanceStatus, TrafficTarget
from omenative_core.phases import OpType, Phase, Step, Strategy
from omenative_core.policy import desired_instances
from omenative_core.render import is_multi_pod

__all__ = ["AnalysisMeasurement", "MemberView", "member_view"]


@frozen(kw_only=True)
class MemberView:
    """One component's InferenceReplica, summarised for the rollout.

    ``revision`` is the revision the member's spec renders now (the latest; the shell
    computes it before writing the spec). ``instances`` / ``ready`` / ``serving`` count
    Instances per running revision. ``held``: the latest revision is Held by its RetryBlock;
    ``failed``: an Instance of the latest revision is Failed. ``pairing`` maps revisions to
    their pairing token. ``strategy`` and the budgets are the member's own update strategy.
    ``traffic`` is the traffic last recorded on it (for the deadband).
    """

    component: str
    desired: int
    revision: str
    current_revision: str = ""
    update_revision: str = ""
    instances: Mapping[str, int] = field(factory=dict)
    ready: Mapping[str, int] = field(factory=dict)
    serving: Mapping[str, int] = field(factory=dict)
    held: bool = False
    failed: bool = False
    pairing: Mapping[str, str | None] = field(factory=dict)
    strategy: str = Strategy.SURGE_THEN_DRAIN
    max_surge: IntOrStr | None = None
    max_unavailable: IntOrStr | None = None
    traffic: tuple[TrafficTarget, ...] = ()

    @property
    def pairing_token(self) -> str | None:
        """The pairing token of the latest revision."""
        return self.pairing.get(self.revision)

    def on(self, revision: str) -> int:
        """Instances running ``revision`` (any phase)."""
        return self.instances.get(revision, 0)

    def ready_on(self, revision: str) -> int:
        """Ready Instances running ``revision``."""
        return self.ready.get(revision, 0)

    @property
    def total_ready(self) -> int:
        """Ready Instances of every revision."""
        return sum(self.ready.values())

    def token(self, revision: str) -> str | None:
        """The pairing token of ``revision`` (None when unknown or unset)."""
        return self.pairing.get(revision)

    def ready_by_token(self) -> dict[str | None, int]:
        """Ready Instances per pairing token."""
        out: dict[str | None, int] = {}
        for rev, n in self.ready.items():
            if n > 0:
                tok = self.token(rev)
                out[tok] = out.get(tok, 0) + n
        return out


@frozen(kw_only=True)
class AnalysisMeasurement:
    """The shell's answer to one ``AnalysisQuery``: the value, or None with an error."""

    id: str
    value: float | None = None
    error: str = ""


HELD_BLOCK = "Held"
"""``RetryBlock.state`` of a revision held until released: its member stops the group."""


# the members ``count_rows`` compares with, bound once: an enum member's attribute lookup
# costs about 0.1 us in Python 3.11, several times a row
_READY, _FAILED, _UPDATING = Phase.READY, Phase.FAILED, Phase.UPDATING
_UPDATE, _SURGE_STEPS = OpType.UPDATE, (Step.SURGE, Step.SURGE_DRAIN)


def _slot_surge(row: InstanceStatus) -> bool:
    """The row is a SurgeThenDrain update of a single-pod Instance in its other slot."""
    op = row.operation
    return (
        row.phase == _UPDATING
        and op is not None
        and op.type == _UPDATE
        and op.step in _SURGE_STEPS
    )


@frozen
class RowCounts:
    """A member's Instance rows counted per revision, and whether any row of ``revision``
    (the member's new one) is Failed."""

    instances: dict[str, int] = field(factory=dict)
    ready: dict[str, int] = field(factory=dict)
    serving: dict[str, int] = field(factory=dict)
    failed: bool = False


_IN_ROTATION_BUSY = (Phase.UPDATING, Phase.MIGRATING)
"""Phases in which a row with every pod serving counts as ready."""


def count_rows(status: InferenceReplicaStatus, revision: str, *, single_pod: bool) -> RowCounts:
    """Count ``status``'s rows per revision: Instances (by running, else target revision),
    ready and serving Instances (by running revision), and Failed rows of ``revision``.

    One loop, no call per row but a single-pod surge check: ``member_view`` runs it over
    every row of a member each rollout pass.
    """
    instances: dict[str, int] = {}
    ready: dict[str, int] = {}
    serving: dict[str, int] = {}
    failed = False
    for row in status.instances:
        running = row.running_revision
        rev = running or row.target_revision
        if not rev:
            continue
        instances[rev] = instances.get(rev, 0) + 1
        all_up = row.pod_count > 0 and row.serving_pod_count >= row.pod_count
        if single_pod and _slot_surge(row):
            # a single-pod Instance brings its replacement up in its other slot: the row
            # counts both pods, and one serving pod is the whole Instance serving (the old
            # one until the replacement serves, then the replacement), still on the running
            # revision until the old pod is gone
            all_up = 0 < row.pod_count <= 2 * row.serving_pod_count
        if running and all_up:
            serving[running] = serving.get(running, 0) + 1
        if running and (row.phase == _READY or (all_up and row.phase in _IN_ROTATION_BUSY)):
            ready[running] = ready.get(running, 0) + 1
        if row.phase == _FAILED and revision in (running, row.target_revision):
            failed = True
    return RowCounts(instances, ready, serving, failed)


def _update_strategy(replica: InferenceReplica) -> tuple[str, IntOrStr | None, IntOrStr | None]:
    """The member's update strategy type (SurgeThenDrain when unset), maxSurge and
    maxUnavailable."""
    lc = replica.spec.lifecycle
    us = lc.update_strategy if lc else None
    ru = us.rolling_update if us else None
    kind = us.type if us and us.type else Strategy.SURGE_THEN_DRAIN
    return kind, (ru.max_surge if ru else None), (ru.max_unavailable if ru else None)


def member_view(
    replica: InferenceReplica,
    revision: str,
    *,
    pairing: Mapping[str, str | None] | None = None,
    traffic: tuple[TrafficTarget, ...] | None = None,
) -> MemberView:
    """Summarise an ``InferenceReplica`` (spec and last status) as a ``MemberView``.

    ``revision`` is the revision its spec renders; ``pairing`` maps revision names to
    pairing tokens (by default only ``revision`` → ``spec.pairingProtocol``).
    """
    spec = replica.spec
    status = replica.status if isinstance(replica.status, InferenceReplicaStatus) else None
    counts = RowCounts()
    held = False
    if status is not None:
        # a gang surges at a new index instead of in its own slot
        counts = count_rows(status, revision, single_pod=not is_multi_pod(spec.runners))
        held = any(
            b.target_revision == revision and b.state == HELD_BLOCK for b in status.retry_blocks
        )
    strategy, max_surge, max_unavailable = _update_strategy(replica)
    return MemberView(
        component=spec.component,
        desired=desired_instances(spec.replicas),
        revision=revision,
        current_revision=status.current_revision if status else "",
        update_revision=status.update_revision if status else "",
        instances=counts.instances,
        ready=counts.ready,
        serving=counts.serving,
        held=held,
        failed=counts.failed,
        pairing=dict(pairing) if pairing is not None else {revision: spec.pairing_protocol},
        strategy=strategy,
        max_surge=max_surge,
        max_unavailable=max_unavailable,
        traffic=traffic if traffic is not None else (status.traffic if status else ()),
    )

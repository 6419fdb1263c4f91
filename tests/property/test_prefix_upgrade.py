"""Upgrading to OME's standalone names keeps every running Instance whole (issue 28 (a)).

A standalone InferenceReplica's pods used to be ``{replica}-{index}-...`` behind
``{replica}-headless``; OME names them ``{replica}-{component}-{index}-...`` behind
``{replica}-{component}-headless``. ``PrefixUpgradeMachine`` runs the whole
``LifecycleMachine`` (scale, rollouts with each strategy, crashes, node loss, stale views,
partial applies, teardown), but its opening runs under the old names (``old_names``
stands in for the release before) and the upgrade lands at the end of it, at rest or in
the middle of a rollout. On every apply it checks, from the world's pods:

- an Instance's pods never mix the two spellings (one attempt, one prefix);
- a worker's ``OME_LEADER_ADDRESS`` is ``{leader}.{service}`` with the leader of its own
  Instance and prefix, the Service its own ``subdomain``, which exists (its DNS name
  resolves), and the Instance's leader, when there is one, is that pod;
- once converged, each pod's headless Service exists (so its DNS name resolves): the old
  one while a pod carries the old names; with none left the old one is deleted.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize

from omenative_core.labels import LABEL_INCARNATION, LABEL_INSTANCE_INDEX, LABEL_RUNNER
from omenative_core.model import Plan, Snapshot
from omenative_core.render import headless_service_name, pod_name
from omenative_sim.objects import SimPod
from omenative_sim.world import World
from tests.old_names import old_names, old_prefix
from tests.property.test_lifecycle_machine import SETUP, LifecycleMachine

NAME = "m"  # the machine's replica (``replica_json``), component engine
OLD, NEW = NAME, f"{NAME}-engine"


def prefix_of(pod: SimPod) -> str:
    """The prefix a pod's name was made with: OME's, or the old ``{replica}``."""
    if pod.name.startswith(NEW + "-"):
        return NEW
    assert old_prefix(NAME, pod.name), pod.name
    return OLD


def _env(pod: SimPod) -> dict[str, str]:
    container = pod.body["spec"]["containers"][0]
    return {e["name"]: e.get("value", "") for e in container.get("env") or ()}


def _attempt(pod: SimPod) -> tuple[int, int]:
    labels = pod.labels
    return int(labels[LABEL_INSTANCE_INDEX]), int(labels[LABEL_INCARNATION])


def names_hold(world: World, *, services: bool) -> None:
    """One prefix per Instance, and each worker's leader address naming its Instance's
    leader; with ``services``, each pod's Service exists (a converged world: a plan made
    from a stale view may create a pod a pass before its Service is made again)."""
    names = {name for kind, name in world.objects if kind == "Service"}
    gangs: dict[tuple[int, int], list[SimPod]] = defaultdict(list)
    for pod in world.pods.values():
        prefix = prefix_of(pod)
        assert pod.body["spec"]["subdomain"] == headless_service_name(prefix), pod.name
        assert not services or headless_service_name(prefix) in names, (
            f"{pod.name}: its Service {headless_service_name(prefix)} is gone")
        if pod.labels.get(LABEL_RUNNER) != "default":
            gangs[_attempt(pod)].append(pod)
    for (index, _), pods in gangs.items():
        prefixes = {prefix_of(p) for p in pods}
        assert len(prefixes) == 1, f"Instance {index} mixes {sorted(p.name for p in pods)}"
        (prefix,) = prefixes
        leader = pod_name(prefix, index, "leader", 0)
        live_leaders = [p.name for p in pods if p.labels.get(LABEL_RUNNER) == "leader"]
        assert live_leaders in ([], [leader]), f"Instance {index}: leaders {live_leaders}"
        for pod in pods:
            if pod.labels.get(LABEL_RUNNER) == "worker":
                address = _env(pod)["OME_LEADER_ADDRESS"]
                assert address == f"{leader}.{headless_service_name(prefix)}", (
                    f"{pod.name} follows {address}, its Instance's leader is {leader}")


class PrefixUpgradeMachine(LifecycleMachine):
    """The lifecycle machine, its opening under the old names, the rest after the
    upgrade (see the module docstring)."""

    upgrades: list[int] = []  # shared: the old-named pods each history upgraded with

    # an opening always runs the old release for a while ("none" would leave no pod)
    @initialize(**{**SETUP, "opening": st.sampled_from(["settle", "rollout", "rollout+scale"])})
    def setup(self, **kwargs: Any) -> None:
        """The parent's setup and opening under the old release; the upgrade lands after
        it, at rest or mid-rollout."""
        with old_names():
            super().setup(**kwargs)
        # the upgraded manager starts with fresh caches: no view the old release saw is
        # planned again (``stale_view`` picks from the snapshots seen since)
        self.history.clear()
        PrefixUpgradeMachine.upgrades.append(
            sum(1 for p in self.world.pods.values() if prefix_of(p) == OLD))

    def _upgraded(self) -> bool:
        return self.world.replica.legacy_prefix is not None

    def _check_pods(self) -> None:
        super()._check_pods()
        if self._upgraded():
            names_hold(self.world, services=False)

    def _check(self, snap: Snapshot, plan: Plan) -> None:
        super()._check(snap, plan)
        if not self._upgraded() or plan.actions:
            return
        # converged: every pod's DNS name resolves, and with no old-named pod left the
        # old Service is gone
        names_hold(self.world, services=True)
        if snap.replica.metadata.deletion_timestamp is not None:
            return  # a deleted replica's Services go with it (owner references)
        if not any(prefix_of(p) == OLD for p in self.world.pods.values()):
            assert ("Service", headless_service_name(OLD)) not in self.world.objects


PrefixUpgradeMachine.TestCase.settings = settings(
    stateful_step_count=int(os.environ.get("OMENATIVE_STEPS", "25")),
    max_examples=int(os.environ.get("OMENATIVE_UPGRADE_EXAMPLES", "60")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    deadline=None,
)
TestPrefixUpgrade = PrefixUpgradeMachine.TestCase


def test_the_histories_upgraded_running_old_named_pods() -> None:
    """The property above is not empty: most histories upgrade with old-named pods
    running (its opening always runs the old release for a while)."""
    ran = PrefixUpgradeMachine.upgrades
    assert ran, "run after TestPrefixUpgrade"
    assert sum(1 for n in ran if n > 0) >= len(ran) // 2, ran

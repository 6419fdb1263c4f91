"""Lease leader election (``coordination.k8s.io/v1``) on a monotonic clock.

The bundled kubernetes-asyncio election uses wall-clock time, has no release and can keep
a leader acting after a failed renewal; this one follows client-go's algorithm instead:

* A candidate takes the Lease when it is absent, free (no holder) or expired. "Expired" is
  judged on **our** monotonic clock: the record (holder, renewTime) must not have changed
  for ``leaseDurationSeconds`` since we first saw it, so clock skew between machines does
  not matter.
* The leader renews every ``retry_period``; each renewal is a PUT with the Lease's
  resourceVersion and a timeout bounded by what remains of ``renew_deadline``. When no
  renewal has succeeded for ``renew_deadline`` (counted from the *start* of the last good
  request), leadership is lost: ``on_stopped`` runs and the elector becomes a candidate
  again. Since ``renew_deadline < lease_duration``, the old leader stops acting before any
  other manager can consider the Lease expired.
* :meth:`LeaderElector.may_act` is the write guard the executor checks before each call.
* A Lease namespace that does not exist raises :class:`LeaseNamespaceMissing` at once
  instead of retrying forever (nothing can lead until someone installs omenative).
* On a graceful stop the leader releases the Lease (empty holder, duration 1 s), so a
  standby takes over at its next retry instead of waiting out the lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import structlog
from attrs import define, field

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import LEASES
from omenative_controller.kube.tasks import cancel_and_wait

__all__ = ["LeaderConfig", "LeaderElector", "LeaseNamespaceMissing"]

log = structlog.get_logger("omenative.leader")


def _micro_time(now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseNamespaceMissing(RuntimeError):
    """The Lease's namespace does not exist: no manager can ever lead, so waiting is
    pointless (the manager turns this into a startup error naming the install step)."""

    def __init__(self, namespace: str) -> None:
        super().__init__(f"namespace {namespace!r} does not exist")
        self.namespace = namespace


@define(kw_only=True)
class LeaderConfig:
    """The Lease and its timings (seconds)."""

    name: str = "omenative-manager"
    namespace: str = "ome"
    identity: str = ""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def validate(self) -> None:
        """Raise ValueError unless retry_period < renew_deadline < lease_duration."""
        if not self.identity:
            raise ValueError("leader election needs an identity")
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "leader election needs 0 < retry-period < renew-deadline < lease-duration, got "
                f"{self.retry_period}s, {self.renew_deadline}s, {self.lease_duration}s"
            )


@define
class _Observed:
    holder: str = ""
    renew_time: str = ""
    duration: float = 0.0
    transitions: int = 0
    at: float = 0.0


@define
class LeaderElector:
    """Acquire, renew and release one Lease; run callbacks when leadership starts/stops."""

    client: KubeClient
    config: LeaderConfig
    on_started: Callable[[], Awaitable[None]] | None = None
    on_stopped: Callable[[], Awaitable[None]] | None = None
    on_state: Callable[[bool], None] | None = None
    clock: Callable[[], float] = time.monotonic
    is_leader: bool = False
    _last_renew: float = field(default=-1e18)
    _observed: _Observed = field(factory=_Observed)
    _rv: str = ""

    def may_act(self) -> bool:
        """True while we lead and the last renewal is within the renew deadline."""
        return self.is_leader and self.clock() - self._last_renew < self.config.renew_deadline

    # ------------------------------------------------------------------ one attempt

    def _spec(self, *, acquire: bool, transitions: int, now: str) -> JSON:
        cfg = self.config
        spec: JSON = {
            "holderIdentity": cfg.identity,
            "leaseDurationSeconds": max(1, round(cfg.lease_duration)),
            "renewTime": now,
            "leaseTransitions": transitions,
        }
        if acquire:
            spec["acquireTime"] = now
        return spec

    def _observe(self, lease: JSON, at: float) -> None:
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        renew = str(spec.get("renewTime") or "")
        self._rv = str((lease.get("metadata") or {}).get("resourceVersion") or "")
        if (holder, renew) != (self._observed.holder, self._observed.renew_time):
            self._observed = _Observed(
                holder=holder,
                renew_time=renew,
                duration=float(spec.get("leaseDurationSeconds") or self.config.lease_duration),
                transitions=int(spec.get("leaseTransitions") or 0),
                at=at,
            )

    async def try_acquire_or_renew(self, timeout: float) -> bool:
        """One round of client-go's ``tryAcquireOrRenew``; True when we hold the Lease."""
        cfg = self.config
        started = self.clock()
        try:
            lease = await self.client.get(
                LEASES, cfg.name, cfg.namespace, timeout=timeout, rate_limited=False
            )
        except ApiError as exc:
            if not exc.not_found:
                log.warning("leader.get_failed", status=exc.status, reason=exc.reason,
                            error=exc.message)
                return False
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": cfg.name, "namespace": cfg.namespace},
                "spec": self._spec(acquire=True, transitions=0, now=_micro_time()),
            }
            try:
                created = await self.client.create(
                    LEASES, body, cfg.namespace, timeout=timeout, rate_limited=False
                )
            except ApiError as exc2:
                if exc2.namespace_gone and exc2.status == 404:
                    raise LeaseNamespaceMissing(cfg.namespace) from exc2
                log.warning("leader.create_failed", status=exc2.status, reason=exc2.reason,
                            error=exc2.message, namespace=cfg.namespace)
                return False
            self._observe(created, started)
            self._last_renew = started
            return True
        self._observe(lease, self.clock())
        obs = self._observed
        mine = obs.holder == cfg.identity
        if obs.holder and not mine and obs.at + obs.duration > self.clock():
            return False  # held by someone else and not expired
        transitions = obs.transitions if mine else obs.transitions + 1
        meta: dict[str, Any] = dict(lease.get("metadata") or {})
        meta.pop("managedFields", None)
        spec: dict[str, Any] = dict(lease.get("spec") or {})
        now = _micro_time()
        spec.update(self._spec(acquire=not mine, transitions=transitions, now=now))
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": spec}
        try:
            updated = await self.client.replace(
                LEASES, cfg.name, body, cfg.namespace,
                timeout=max(0.1, timeout - (self.clock() - started)), rate_limited=False,
            )
        except ApiError as exc:
            if not exc.conflict:
                log.warning("leader.update_failed", status=exc.status, reason=exc.reason,
                            error=exc.message)
            return False
        self._observe(updated, started)
        self._last_renew = started
        if not mine:
            log.info("leader.took_over", previous=obs.holder or None, identity=cfg.identity)
        return True

    async def release(self) -> None:
        """Give the Lease up (only if we still hold it)."""
        cfg = self.config
        if not self._rv or self._observed.holder != cfg.identity:
            return
        now = _micro_time()
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": cfg.name, "namespace": cfg.namespace,
                         "resourceVersion": self._rv},
            "spec": {"holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": now,
                     "acquireTime": now, "leaseTransitions": self._observed.transitions},
        }
        try:
            await self.client.replace(LEASES, cfg.name, body, cfg.namespace, timeout=5.0,
                                      rate_limited=False)
            log.info("leader.released", identity=cfg.identity)
        except ApiError as exc:
            log.warning("leader.release_failed", status=exc.status, reason=exc.reason)

    # ------------------------------------------------------------------ the loop

    def _set_leader(self, value: bool) -> None:
        self.is_leader = value
        if self.on_state is not None:
            self.on_state(value)

    async def _acquire(self, stop: asyncio.Event) -> bool:
        cfg = self.config
        announced = False
        while not stop.is_set():
            if await self.try_acquire_or_renew(cfg.renew_deadline):
                return True
            if not announced:
                log.info("leader.waiting", holder=self._observed.holder or None,
                         lease=f"{cfg.namespace}/{cfg.name}", identity=cfg.identity)
                announced = True
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(cfg.retry_period * (1 + 0.2 * random.random())):
                    await stop.wait()
        return False

    async def _renew(self, stop: asyncio.Event) -> None:
        """Renew until stop (return) or until the renew deadline passes (return)."""
        cfg = self.config
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(cfg.retry_period):
                    await stop.wait()
            if stop.is_set():
                return
            while True:
                remaining = cfg.renew_deadline - (self.clock() - self._last_renew)
                if remaining <= 0:
                    log.warning("leader.lost", identity=cfg.identity,
                                why="no renewal within the renew deadline")
                    return
                if await self.try_acquire_or_renew(remaining):
                    break
                if self._observed.holder and self._observed.holder != cfg.identity:
                    log.warning("leader.lost", identity=cfg.identity,
                                holder=self._observed.holder)
                    return
                await asyncio.sleep(min(cfg.retry_period / 2, max(remaining, 0.05)))

    async def run(self, stop: asyncio.Event) -> None:
        """Campaign, lead, and campaign again after a loss, until ``stop`` is set."""
        self.config.validate()
        while not stop.is_set():
            if not await self._acquire(stop):
                break
            log.info("leader.acquired", identity=self.config.identity,
                     lease=f"{self.config.namespace}/{self.config.name}")
            self._set_leader(True)
            # renew from the first moment: on_started (waiting for caches to sync) may take
            # longer than the Lease, and a leader that stops renewing meanwhile flaps
            renew = asyncio.create_task(self._renew(stop), name="lease-renew")
            try:
                if self.on_started is not None:
                    started = asyncio.ensure_future(self.on_started())
                    await asyncio.wait({started, renew}, return_when=asyncio.FIRST_COMPLETED)
                    if not started.done():  # lost the Lease before we were ready to lead
                        await cancel_and_wait([started], errors=True)
                    else:
                        started.result()
                await renew
            finally:
                if not renew.done():
                    await cancel_and_wait([renew], errors=True)
                self._set_leader(False)
                if self.on_stopped is not None:
                    await self.on_stopped()
        if self._observed.holder == self.config.identity and self.clock() - self._last_renew < (
            self.config.lease_duration
        ):
            await self.release()

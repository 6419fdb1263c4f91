"""Simulate a whole InferenceService: every OMENative component on one shared cluster.

A ``service`` scenario names an InferenceService (and its runtimes) instead of one
InferenceReplica. Each pass is the manager's own InferenceService pass,
``omenative_core.service.plan_service``, over a snapshot of the simulated objects: it
renders each OMENative component onto its InferenceReplica, decides the rollout groups
(``spec.rollout``) from the status the last pass wrote, and returns the member
InferenceReplicas with their pacing (partition, rollbackToRevision, rolling budgets), the
status and the rollout's Events and annotation removals, which the simulator carries out
as the shell does (without ``spec.rollout`` a member carries no pacing). Each member
replica gets a :class:`World`, and all the worlds share one set of nodes, so components
compete for the same GPUs. Time, pod and node events, the planner and the InferenceService
pass are the same pure pieces the manager uses.

The format (``docs/simulate.md``)::

    service: {apiVersion, kind: InferenceService, metadata, spec}
    runtimes: [{kind: ServingRuntime | ClusterServingRuntime, ...}]   # optional
    cluster: {...}                  # as in a replica scenario
    lifecycle: {...}                # optional
    start: converged | empty
    events:
      - at: 1m
        patch: {spec: {...}}        # JSON merge patch on the InferenceService
      - at: 3m
        annotate: {ome.io/rollout-pause: "true"}      # null removes an annotation
      - at: 4m
        promote: true           # or {overrideAnalysis: true}: the canary's hash, as
                                # ``kubectl ome rollout promote`` sets it
      - at: 4m30s
        rollback: true          # ome.io/rollout-rollback: "true"
      - at: 5m
        failPod: {component: engine, instance: 0, runner: leader}
      - at: 7m
        badImage: registry.example.com/vllm:broken
    until: 1h

Node failures are not offered here yet: a failed node must reach every component's world,
and a replica scenario's ``failNode`` is the place to study them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from attrs import define, field, frozen

from omenative_core.codec import CodecError
from omenative_core.model.config import LifecycleConfig
from omenative_core.model.spec import JSON, InferenceReplica
from omenative_core.planner import plan
from omenative_core.revisions import hash_of, pairing_from_revision
from omenative_core.rollout import (
    ANNOTATION_OVERRIDE_ANALYSIS,
    ANNOTATION_PROMOTE,
    ANNOTATION_ROLLBACK,
    RolloutDecision,
    RolloutSpec,
    RolloutState,
    errors,
    explain,
    parse_rollout,
    validate_rollout,
)
from omenative_core.service import (
    InferenceService,
    ServiceConfig,
    ServingRuntime,
    decode_runtime,
    isvc_from_json,
    render_service,
)
from omenative_core.service.service_pass import ServiceSnapshot, plan_service
from omenative_sim.scenario import (
    ScenarioError,
    _cluster,
    _duration,
    _event_at,
    _int,
    _keys,
    _lifecycle,
    _obj,
    _show,
    _str,
    load_yaml,
)
from omenative_sim.world import EPOCH, ClusterSpec, World, merge_patch

__all__ = [
    "SERVICE_EVENT_KINDS",
    "ServiceEvent",
    "ServiceScenario",
    "ServiceSimResult",
    "ServiceWorld",
    "is_service_scenario",
    "parse_service_scenario",
    "run_service_scenario",
]

SERVICE_EVENT_KINDS = ("patch", "annotate", "promote", "rollback", "failPod", "badImage")
"""What an event of a service scenario can do, one per event."""

_TOP_KEYS = ("description", "service", "runtimes", "cluster", "lifecycle", "start", "events",
             "until")
_DEFAULT_UNTIL_AFTER = 3600.0
_MAX_PASSES = 200


@frozen(kw_only=True)
class ServiceEvent:
    """One event of a service scenario (``value``: a patch, annotations, a pod or a node)."""

    at: float
    kind: str
    value: Any
    index: int


@frozen(kw_only=True)
class ServiceScenario:
    """A parsed, checked service scenario."""

    service: JSON
    runtimes: tuple[JSON, ...]
    cluster: ClusterSpec
    lifecycle: LifecycleConfig = field(factory=LifecycleConfig)
    start: str = "empty"
    events: tuple[ServiceEvent, ...] = ()
    until: float = _DEFAULT_UNTIL_AFTER
    description: str = ""


def is_service_scenario(raw: object) -> bool:
    """True when a parsed scenario file has ``service`` (rather than ``replica``)."""
    return isinstance(raw, Mapping) and "service" in raw


def _isvc(path: str, raw: object) -> InferenceService:
    obj = _obj(path, raw)
    try:
        return isvc_from_json({k: v for k, v in obj.items() if k != "status"})
    except CodecError as exc:
        raise ScenarioError(f"{path}.{exc}") from None


def _runtimes(raw: object) -> tuple[ServingRuntime, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ScenarioError(f"runtimes: expected a list, got {_show(raw)}")
    out = []
    for i, item in enumerate(raw):
        try:
            out.append(decode_runtime(_obj(f"runtimes[{i}]", item)))
        except CodecError as exc:
            raise ScenarioError(f"runtimes[{i}].{exc}") from None
    return tuple(out)


def _rollout(path: str, raw: Mapping[str, Any]) -> RolloutSpec | None:
    spec = (raw.get("spec") or {}).get("rollout")
    if spec is None:
        return None
    found = errors(validate_rollout(spec))
    if found:
        raise ScenarioError(f"{path}.spec.rollout: {found[0].reason}: {found[0].message}")
    try:
        return parse_rollout(spec)
    except (CodecError, ValueError) as exc:
        raise ScenarioError(f"{path}.spec.rollout: {exc}") from None


def _render_check(path: str, service: JSON, runtimes: Sequence[JSON]) -> None:
    isvc = _isvc(path, service)
    rts = _runtimes(list(runtimes))
    _rollout(path, service)
    rendered = render_service(isvc, rts, ())
    omenative = [c for c in rendered.components if c.replica is not None]
    for c in rendered.components:
        if c.blocked and c.ready is not None:
            raise ScenarioError(f"{path}: {c.component}: {c.ready.reason}: {c.ready.message}")
    if not omenative:
        modes = ", ".join(f"{c.component}={c.mode}" for c in rendered.components) or "none"
        raise ScenarioError(f"{path}: no OMENative component to simulate (modes: {modes})")


def _event_value(
    kpath: str, kind: str, value: Any, manifest: Any, runtimes: tuple[JSON, ...]
) -> tuple[Any, Any]:
    """One event's checked value, and the service manifest after it (a patch changes it)."""
    if kind == "patch":
        patch = _obj(kpath, value)
        manifest = merge_patch(manifest, patch)
        _render_check(kpath, manifest, runtimes)
        return dict(patch), manifest
    if kind == "annotate":
        ann = _obj(kpath, value)
        for k, v in ann.items():
            if v is not None and not isinstance(v, str):
                raise ScenarioError(f"{kpath}.{k}: expected a string or null, got {_show(v)}")
        return dict(ann), manifest
    if kind in ("promote", "rollback"):
        opts = _obj(kpath, {} if value is True else value)
        _keys(kpath, opts, ("overrideAnalysis",) if kind == "promote" else ())
        return {"override": opts.get("overrideAnalysis") is True}, manifest
    if kind == "failPod":
        fp = _obj(kpath, value)
        _keys(kpath, fp, ("component", "instance", "runner", "ordinal"))
        return {
            "component": _str(f"{kpath}.component", fp.get("component")),
            "instance": _int(f"{kpath}.instance", fp.get("instance")),
            "runner": _str(f"{kpath}.runner", fp["runner"]) if "runner" in fp else None,
            "ordinal": _int(f"{kpath}.ordinal", fp["ordinal"]) if "ordinal" in fp else None,
        }, manifest
    return _str(kpath, value), manifest


def parse_service_scenario(source: str | Mapping[str, Any]) -> ServiceScenario:
    """Parse and check a service scenario (YAML text or a parsed object)."""
    raw = load_yaml(source) if isinstance(source, str) else source
    top = _obj("scenario", raw)
    _keys("", top, _TOP_KEYS)
    description = _str("description", top["description"]) if "description" in top else ""
    service = dict(_obj("service", top.get("service")))
    runtimes = tuple(dict(_obj(f"runtimes[{i}]", r)) for i, r in enumerate(
        top.get("runtimes") or ()))
    if "cluster" not in top:
        raise ScenarioError("cluster: required (at least cluster.nodes)")
    cluster = _cluster(top["cluster"])
    lifecycle = _lifecycle(top.get("lifecycle"))
    start = top.get("start", "empty")
    if start not in ("empty", "converged"):
        raise ScenarioError(f"start: expected one of empty, converged, got {_show(start)}")
    _render_check("service", service, runtimes)
    raw_events = top.get("events") or []
    if not isinstance(raw_events, list):
        raise ScenarioError(f"events: expected a list, got {_show(raw_events)}")
    events: list[ServiceEvent] = []
    manifest: Any = service
    for i, item in sorted(enumerate(raw_events), key=lambda ie: _event_at(ie[0], ie[1])):
        path = f"events[{i}]"
        obj = _obj(path, item)
        _keys(path, obj, ("at", *SERVICE_EVENT_KINDS))
        kinds = [k for k in SERVICE_EVENT_KINDS if k in obj]
        if len(kinds) != 1:
            raise ScenarioError(f"{path}: expected exactly one of {', '.join(SERVICE_EVENT_KINDS)}")
        kind = kinds[0]
        value, manifest = _event_value(f"{path}.{kind}", kind, obj[kind], manifest, runtimes)
        events.append(ServiceEvent(at=_event_at(i, obj), kind=kind, value=value, index=i))
    events.sort(key=lambda e: (e.at, e.index))
    last = max((e.at for e in events), default=0.0)
    until = _duration("until", top["until"]) if "until" in top else last + _DEFAULT_UNTIL_AFTER
    if until < last:
        raise ScenarioError(f"until: {top['until']} is before the last event")
    return ServiceScenario(service=service, runtimes=runtimes, cluster=cluster,
                           lifecycle=lifecycle, start=str(start), events=tuple(events),
                           until=until, description=description)


def _replace_patch(old: Any, new: Any) -> Any:
    """The JSON merge patch that turns ``old`` into ``new`` (None when they are equal)."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out: dict[str, Any] = {}
        for k in old:
            if k not in new:
                out[k] = None
        for k, v in new.items():
            if k not in old:
                out[k] = v
            else:
                sub = _replace_patch(old[k], v)
                if sub is not None:
                    out[k] = sub
        return out or None
    return None if old == new else new


@define
class ServiceWorld:
    """The worlds of one InferenceService's OMENative components on shared nodes.

    Each pass is the manager's: ``plan_service`` over a snapshot of the ISVC (with the status
    the last pass wrote), its runtimes and the live members, carried out in its order. Only
    the applied InferenceReplicas get a world; Services and the rest are not modelled.
    """

    cluster: ClusterSpec
    service: JSON
    runtimes: tuple[JSON, ...]
    config: LifecycleConfig
    worlds: dict[str, World] = field(factory=dict)
    rollout_state: RolloutState | None = None
    last_decision: RolloutDecision | None = None
    events: list[tuple[float, str, str]] = field(factory=list)  # (t, component, message)
    _requeue: float | None = None

    def __attrs_post_init__(self) -> None:
        self._service_pass()

    # ---------------------------------------------------------------- the ISVC pass

    def _snapshot(self) -> ServiceSnapshot:
        """What the manager's ``ServiceController.observe`` builds, from the worlds."""
        owned: dict[str, JSON] = {}
        replicas: dict[str, InferenceReplica] = {}
        pairing: dict[str, dict[str, str | None]] = {}
        for comp, w in self.worlds.items():
            status = w.status_json()
            owned[comp] = {**w.manifest, **({"status": status} if status is not None else {})}
            replicas[comp] = w.replica
            pairing[comp] = {name: pairing_from_revision(rv) for name, rv in w.revisions.items()}
        return ServiceSnapshot(
            isvc=self.service, now=EPOCH + timedelta(seconds=self.now),
            config=ServiceConfig(lifecycle=self.config),
            runtimes=tuple(decode_runtime(r) for r in self.runtimes),
            owned=owned, replicas=replicas, pairing=pairing)

    def _service_pass(self) -> bool:
        """One InferenceService pass, carried out; True when a member or the ISVC changed."""
        sp = plan_service(self._snapshot())
        changed = False
        if sp.take_migrations:
            self.service = merge_patch(
                self.service, {"metadata": {"annotations": dict.fromkeys(sp.take_migrations)}})
            changed = True
        if sp.rejection is not None:
            self.events.append((self.now, "service",
                                f"{sp.rejection.reason}: {sp.rejection.message}"))
        for comp, obj in sp.applies:
            if obj.get("kind") == "InferenceReplica":
                changed = self._apply_replica(comp, obj) or changed
        if sp.status is not None:
            self.service = {**self.service, "status": sp.status}
        self.rollout_state = sp.rollout.decision.state if sp.rollout is not None else None
        self.last_decision = sp.rollout.decision if sp.rollout is not None else None
        if sp.rollout is not None:
            changed = self._after_rollout(sp.rollout.decision) or changed
        if sp.requeue_after is not None:
            self._wake_at(self.now + sp.requeue_after)
        return changed

    def _apply_replica(self, comp: str, obj: JSON) -> bool:
        """Create the component's world, or patch its spec to the applied one (as a
        server-side apply of the whole spec would); True when it changed."""
        manifest = {k: v for k, v in obj.items() if k != "status"}
        world = self.worlds.get(comp)
        if world is None:
            shared = next(iter(self.worlds.values()), None)
            world = World(self.cluster, manifest, config=self.config, seed=len(self.worlds))
            if shared is not None:
                world.nodes = shared.nodes
                world.now = shared.now  # one clock for all: a later world starts at theirs
            self.worlds[comp] = world
            return True
        patch = _replace_patch(world.manifest.get("spec") or {}, manifest.get("spec") or {})
        if patch is None:
            return False
        world.patch_replica({"spec": patch})
        return True

    def _after_rollout(self, d: RolloutDecision) -> bool:
        """The rollout's writes after the status: its Events, the annotations it consumed,
        and when to look again; True when an annotation was removed."""
        for ev in d.events:
            self.events.append((self.now, "rollout", f"{ev.reason}: {ev.message}"))
        if d.requeue_after is not None:
            self._wake_at(self.now + d.requeue_after.total_seconds())
        if not d.remove_annotations:
            return False
        self.service = merge_patch(
            self.service, {"metadata": {"annotations": dict.fromkeys(d.remove_annotations)}})
        return True

    def _wake_at(self, t: float) -> None:
        """Look again at ``t`` (a requeue already due is replaced)."""
        due = self._requeue is None or self._requeue <= self.now
        self._requeue = t if due else min(self._requeue or t, t)

    def patch_service(self, patch: JSON) -> None:
        """Apply a JSON merge patch to the InferenceService (the next pass applies it)."""
        self.service = merge_patch(self.service, patch)

    def annotate(self, annotations: Mapping[str, str | None]) -> None:
        """Set (or, with None, remove) annotations on the InferenceService."""
        self.patch_service({"metadata": {"annotations": dict(annotations)}})

    @property
    def now(self) -> float:
        """Seconds since the start (all worlds share one clock)."""
        return max((w.now for w in self.worlds.values()), default=0.0)

    def next_time(self) -> float | None:
        """When something next happens by itself (a pod event or a requeue)."""
        times = [t for w in self.worlds.values() if (t := w.next_event_time()) is not None]
        if self._requeue is not None:
            times.append(self._requeue)
        return min(times) if times else None

    def advance(self, t: float) -> None:
        """Move every world to ``t``."""
        for w in self.worlds.values():
            w.advance(t)
        for w in self.worlds.values():
            w.reschedule()  # another world may have freed GPUs on a shared node

    # ---------------------------------------------------------------- one settle

    def settle(self) -> int:
        """Plan the ISVC and its members until nothing changes at this instant; return the
        replica plans applied."""
        applied = 0
        self._requeue = None if self._requeue is not None and self._requeue <= self.now \
            else self._requeue
        for _ in range(_MAX_PASSES):
            changed = self._service_pass()
            for comp, w in self.worlds.items():
                for _ in range(50):
                    p = plan(w.snapshot())
                    if p.requeue_after is not None:
                        t = w.now + p.requeue_after.total_seconds()
                        if self._requeue is None or t < self._requeue:
                            self._requeue = t
                    if not p.actions:
                        break
                    w.apply(p)
                    applied += 1
                    changed = True
                    for ev in p.events:
                        if ev.type == "Warning" or ev.reason in ("ScaleDown", "Relocated"):
                            self.events.append((w.now, comp, f"{ev.reason}: {ev.message}"))
            if not changed:
                break
        return applied

    # ---------------------------------------------------------------- reporting

    def component_row(self, comp: str) -> dict[str, Any]:
        """What the timeline shows for one component now."""
        w = self.worlds[comp]
        st = w.status
        revs: dict[str, int] = {}
        if st is not None:
            for r in st.instances:
                rev = r.running_revision or r.target_revision
                if rev:
                    revs[rev.rsplit("-", 1)[-1]] = revs.get(rev.rsplit("-", 1)[-1], 0) + 1
        spec = w.manifest.get("spec") or {}
        return {
            "desired": int(spec.get("replicas") or 0),
            "ready": st.ready_replicas if st else 0,
            "serving": st.serving_replicas if st else 0,
            "updated": st.updated_replicas if st else 0,
            "revisions": revs,
            "partition": (spec.get("pacing") or {}).get("partition"),
            "pods": w.pod_count,
            "gpus": w.gpus_in_use,
        }

    def rollout_line(self) -> str:
        """One line on the rollout (empty without ``spec.rollout``)."""
        if self.rollout_state is None:
            return ""
        now = next(iter(self.worlds.values())).time(self.now)
        return explain(self.rollout_state, now)


@frozen(kw_only=True)
class ServiceSimResult:
    """A service run: per-component timeline rows, events, and the end state."""

    timeline: tuple[dict[str, Any], ...]
    events: tuple[tuple[float, str, str], ...]
    final: Mapping[str, Mapping[str, Any]]
    min_serving: Mapping[str, int]
    rollout: str
    converged: bool
    ended_at: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``omenative simulate -o json``)."""
        return {
            "timeline": list(self.timeline),
            "events": [{"t": t, "component": c, "message": m} for t, c, m in self.events],
            "final": {k: dict(v) for k, v in self.final.items()},
            "minServing": dict(self.min_serving),
            "rollout": self.rollout,
            "converged": self.converged,
            "endedAt": self.ended_at,
        }


def _converge(sw: ServiceWorld, limit: float = 6 * 3600.0) -> None:
    while True:
        sw.settle()
        done = all(
            (st := w.status) is not None
            and st.ready_replicas == int((w.manifest.get("spec") or {}).get("replicas") or 0)
            and st.serving_replicas == st.ready_replicas
            for w in sw.worlds.values()
        )
        nxt = sw.next_time()
        if done or nxt is None or nxt > limit:
            return
        sw.advance(max(nxt, sw.now))


def run_service_scenario(scenario: ServiceScenario, *, seed: int = 0) -> ServiceSimResult:
    """Run a service scenario to its end; deterministic for a seed."""
    del seed  # the worlds are seeded by component order; kept for the CLI's symmetry
    sw = ServiceWorld(scenario.cluster, dict(scenario.service), scenario.runtimes,
                      scenario.lifecycle)
    offset = 0.0
    if scenario.start == "converged":
        _converge(sw)
        offset = sw.now
    timeline: list[dict[str, Any]] = []
    last_rows: dict[str, Any] = {}
    min_serving: dict[str, int] = {}
    pending = list(scenario.events)

    def record(force: bool = False) -> None:
        rows = {c: sw.component_row(c) for c in sw.worlds}
        line = sw.rollout_line()
        snapshot = (rows, line)
        if force or snapshot != last_rows.get("s"):
            timeline.append({"t": round(sw.now - offset, 3), "components": rows,
                             **({"rollout": line} if line else {})})
            last_rows["s"] = snapshot
        for c, r in rows.items():
            min_serving[c] = min(min_serving.get(c, r["serving"]), r["serving"])

    sw.settle()
    record(force=True)
    end = offset + scenario.until
    while True:
        nxt_event = offset + pending[0].at if pending else None
        times = [t for t in (sw.next_time(), nxt_event) if t is not None and t <= end]
        if not times:
            sw.advance(end)
            sw.settle()
            record()
            break
        t = max(min(times), sw.now)
        sw.advance(t)
        while pending and offset + pending[0].at <= t + 1e-9:
            ev = pending.pop(0)
            _apply_event(sw, ev, t)
            sw.events.append((t, "scenario", f"{ev.kind}"))
        sw.settle()
        record()
    final = {c: sw.component_row(c) for c in sw.worlds}
    converged = all(
        r["ready"] == r["desired"] and r["serving"] == r["desired"] and len(r["revisions"]) <= 1
        for r in final.values()
    )
    events = tuple((round(t - offset, 3), c, m) for t, c, m in sw.events if t >= offset)
    return ServiceSimResult(timeline=tuple(timeline), events=events, final=final,
                            min_serving=min_serving, rollout=sw.rollout_line(),
                            converged=converged, ended_at=scenario.until)


def _apply_event(sw: ServiceWorld, ev: ServiceEvent, t: float) -> None:
    if ev.kind == "patch":
        sw.patch_service(ev.value)
    elif ev.kind == "annotate":
        sw.annotate(ev.value)
    elif ev.kind == "promote":
        hashes = [hash_of(rev) for g in (sw.rollout_state.groups if sw.rollout_state else ())
                  if g.active for rev in g.canary.values()]
        if not hashes:
            sw.events.append((t, "scenario", "promote: no canary to promote"))
            return
        ann: dict[str, str | None] = {ANNOTATION_PROMOTE: hashes[0]}
        if ev.value["override"]:
            ann[ANNOTATION_OVERRIDE_ANALYSIS] = "true"
        sw.annotate(ann)
    elif ev.kind == "rollback":
        sw.annotate({ANNOTATION_ROLLBACK: "true"})
    elif ev.kind == "badImage":
        for w in sw.worlds.values():
            w.add_bad_image(ev.value, t)
    else:
        v = ev.value
        found = sw.worlds.get(v["component"])
        if found is None:
            raise ScenarioError(f"events[{ev.index}].failPod.component: no OMENative "
                                f"component {v['component']!r}")
        w = found
        prefix = f"{w.replica.metadata.name}-{v['instance']}-"
        names = sorted(n for n, p in w.pods.items() if n.startswith(prefix)
                       and not p.terminating
                       and (v["runner"] is None or n.startswith(prefix + v["runner"] + "-"))
                       and (v["ordinal"] is None or n.endswith(f"-{v['ordinal']}")))
        if not names:
            raise ScenarioError(f"events[{ev.index}].failPod: no such pod at {t:.0f}s")
        w.fail_pod(names[0], t)


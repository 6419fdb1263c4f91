"""Scenario files for ``omenative simulate``: a replica, a cluster, events, an end time.

``parse_scenario`` takes the YAML text (or the already-parsed object) and checks it
strictly: an unknown key, a value of the wrong type, a duration without a unit, a node that
does not exist or a replica the codec or the renderer would refuse is a ``ScenarioError``
whose message starts with the key path (``events[2].failPod.runner: expected a string``).
Pods are named by the events that hurt them only when they happen, so a failPod naming a
pod that does not exist at that time is reported by the runner, naming the event.

The format (``docs/simulate.md`` has the full table)::

    description: free text                  # optional
    replica: {apiVersion, kind, metadata, spec}      # an InferenceReplica manifest
    cluster:
      nodes: 4                              # node-0 .. node-3
      gpusPerNode: 8
      labels: {key: value}                  # on every node (optional)
      nodeLabels: {node-0: {key: value}}    # per node (optional)
      nodeGpus: {node-3: 4}                 # per-node GPU count (optional)
      podStartSeconds: 30                   # bind -> containers running
      podReadySeconds: 30                   # running -> containers ready
      gangScheduling: true                  # all pods of a PodGroup or none
      podGroupCRD: true                     # is the scheduler-plugins PodGroup CRD installed
      terminationSeconds: 2                 # graceful delete -> pod gone
      endpointDelaySeconds: 1               # not Ready -> out of the endpoints
      imagePullBackOffSeconds: 5            # ErrImagePull -> ImagePullBackOff
      nodeMonitorGraceSeconds: 40           # failNode -> node Ready Unknown
      evictionSeconds: 300                  # node Unknown -> its pods deleted
    lifecycle: {...}                        # the cluster-wide lifecycle entry (optional)
    start: converged                        # or "empty" (the default)
    events:
      - at: 5m
        patch: {spec: {replicas: 3}}        # JSON merge patch on the replica
      - at: 10m
        failPod: {instance: 0, runner: worker, ordinal: 0}
      - at: 20m
        failNode: node-2
      - at: 30m
        badImage: registry.example.com/vllm:broken
      - at: 40m
        migrate: {instance: 1, fromNode: node-1, hintTargetNodes: [node-3]}
    until: 2h                               # default: an hour after the last event
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import yaml
from attrs import field, frozen

from omenative_core.codec import CodecError
from omenative_core.model.config import ConfigError, LifecycleConfig, parse_lifecycle_config
from omenative_core.model.spec import JSON, RUNNER_NAMES
from omenative_core.model.timefmt import DurationError, parse_duration
from omenative_core.render import validate_replica
from omenative_core.status.wire import replica_from_json
from omenative_sim.world import ClusterSpec, merge_patch

__all__ = [
    "EVENT_KINDS",
    "START_MODES",
    "FailPod",
    "Migrate",
    "Scenario",
    "ScenarioError",
    "ScenarioEvent",
    "parse_scenario",
]

EVENT_KINDS = ("patch", "failPod", "failNode", "badImage", "migrate")
"""The things an event can do, one per event."""

START_MODES = ("empty", "converged")
"""``empty``: nothing exists at 0s; ``converged``: the replica is already Ready at its spec."""

_TOP_KEYS = ("description", "replica", "cluster", "lifecycle", "start", "events", "until")
_CLUSTER_KEYS = (
    "nodes",
    "gpusPerNode",
    "labels",
    "nodeLabels",
    "nodeGpus",
    "podStartSeconds",
    "podReadySeconds",
    "gangScheduling",
    "podGroupCRD",
    "terminationSeconds",
    "endpointDelaySeconds",
    "imagePullBackOffSeconds",
    "nodeMonitorGraceSeconds",
    "evictionSeconds",
)
_SECONDS_KEYS = {
    "podStartSeconds": "pod_start_seconds",
    "podReadySeconds": "pod_ready_seconds",
    "terminationSeconds": "termination_seconds",
    "endpointDelaySeconds": "endpoint_delay_seconds",
    "imagePullBackOffSeconds": "image_pull_backoff_seconds",
    "nodeMonitorGraceSeconds": "node_monitor_grace_seconds",
    "evictionSeconds": "eviction_seconds",
}
_DEFAULT_UNTIL_AFTER = 3600.0
_MAX_HINT_NODES = 8


class ScenarioError(ValueError):
    """A scenario that cannot run; the message starts with the key path it is about."""


@frozen(kw_only=True)
class FailPod:
    """The pod a ``failPod`` event kills: Instance index, runner (None: the replica's
    first, ``default`` or ``leader``) and ordinal (None: the lowest that exists)."""

    instance: int
    runner: str | None = None
    ordinal: int | None = None


@frozen(kw_only=True)
class Migrate:
    """A manual migration request for one Instance."""

    instance: int
    from_node: str | None = None
    hint_target_nodes: tuple[str, ...] = ()


@frozen(kw_only=True)
class ScenarioEvent:
    """One event: when (seconds after 0), what kind, its value, and where it is in the file."""

    at: float
    kind: str
    value: Any  # JSON (patch) | FailPod | str (failNode, badImage) | Migrate
    index: int

    @property
    def path(self) -> str:
        """``events[i]``, for messages."""
        return f"events[{self.index}]"


@frozen(kw_only=True)
class Scenario:
    """A parsed, checked scenario."""

    replica: JSON
    cluster: ClusterSpec
    lifecycle: LifecycleConfig = field(factory=LifecycleConfig)
    start: str = "empty"
    events: tuple[ScenarioEvent, ...] = ()
    until: float = _DEFAULT_UNTIL_AFTER
    description: str = ""

    def ordered_events(self) -> tuple[ScenarioEvent, ...]:
        """Events by time; events at the same time in file order."""
        return tuple(sorted(self.events, key=lambda e: (e.at, e.index)))


# ------------------------------------------------------------------------------ YAML


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (the last one would silently win)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            mark = key_node.start_mark
            raise ScenarioError(
                f"yaml: line {mark.line + 1}, column {mark.column + 1}: duplicate key {key!r}"
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)


def load_yaml(text: str) -> Any:
    """Parse YAML text strictly (duplicate keys are errors); errors are ScenarioErrors."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ScenarioError(f"yaml: {where}{exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"yaml: {exc}") from None


# ------------------------------------------------------------------------------ checks


def _show(value: object) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _obj(path: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ScenarioError(f"{path}: expected an object, got {_show(value)}")
    for key in value:
        if not isinstance(key, str):
            raise ScenarioError(f"{path}: keys must be strings, got {_show(key)}")
    return value


def _keys(path: str, obj: Mapping[str, Any], allowed: Sequence[str]) -> None:
    for key in obj:
        if key not in allowed:
            where = f"{path}.{key}" if path else key
            raise ScenarioError(f"{where}: unknown key (expected one of {', '.join(allowed)})")


def _str(path: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ScenarioError(f"{path}: expected a string, got {_show(value)}")
    return value


def _int(path: str, value: object, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(f"{path}: expected an integer, got {_show(value)}")
    if value < minimum:
        raise ScenarioError(f"{path}: expected an integer >= {minimum}, got {value}")
    return value


def _bool(path: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ScenarioError(f"{path}: expected true or false, got {_show(value)}")
    return value


def _seconds(path: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ScenarioError(f"{path}: expected a number of seconds >= 0, got {_show(value)}")
    return float(value)


def _duration(path: str, value: object) -> float:
    try:
        delta = parse_duration(value)
    except DurationError as exc:
        raise ScenarioError(f"{path}: {exc}") from None
    if delta < timedelta(0):
        raise ScenarioError(f"{path}: expected a duration >= 0, got {_show(value)}")
    return delta.total_seconds()


def _labels(path: str, value: object) -> dict[str, str]:
    obj = _obj(path, value)
    out: dict[str, str] = {}
    for key, val in obj.items():
        if not isinstance(val, str):
            raise ScenarioError(f"{path}.{key}: expected a string label value, got {_show(val)}")
        out[key] = val
    return out


def _node(path: str, value: object, nodes: int) -> str:
    name = _str(path, value)
    if name not in {f"node-{i}" for i in range(nodes)}:
        raise ScenarioError(
            f"{path}: no node {name!r} (the cluster has node-0 .. node-{nodes - 1})"
        )
    return name


def _check_replica(path: str, manifest: object) -> JSON:
    obj = _obj(path, manifest)
    kind = obj.get("kind")
    if kind is not None and kind != "InferenceReplica":
        raise ScenarioError(f"{path}.kind: expected 'InferenceReplica', got {_show(kind)}")
    try:
        replica = replica_from_json({k: v for k, v in obj.items() if k != "status"})
    except CodecError as exc:
        raise ScenarioError(f"{path}.{exc}") from None
    if not replica.metadata.name:
        raise ScenarioError(f"{path}.metadata.name: required")
    problems = validate_replica(replica)
    if problems:
        raise ScenarioError(f"{path}: {problems[0]}")
    return obj


def _cluster(raw: object) -> ClusterSpec:
    obj = _obj("cluster", raw)
    _keys("cluster", obj, _CLUSTER_KEYS)
    if "nodes" not in obj:
        raise ScenarioError("cluster.nodes: required (the number of nodes)")
    nodes = _int("cluster.nodes", obj["nodes"], minimum=1)
    kw: dict[str, Any] = {"nodes": nodes}
    if "gpusPerNode" in obj:
        kw["gpus_per_node"] = _int("cluster.gpusPerNode", obj["gpusPerNode"])
    if "labels" in obj:
        kw["labels"] = _labels("cluster.labels", obj["labels"])
    if "nodeLabels" in obj:
        per = _obj("cluster.nodeLabels", obj["nodeLabels"])
        kw["node_labels"] = {
            _node("cluster.nodeLabels", name, nodes): _labels(f"cluster.nodeLabels.{name}", labels)
            for name, labels in per.items()
        }
    if "nodeGpus" in obj:
        per = _obj("cluster.nodeGpus", obj["nodeGpus"])
        kw["node_gpus"] = {
            _node("cluster.nodeGpus", name, nodes): _int(f"cluster.nodeGpus.{name}", gpus)
            for name, gpus in per.items()
        }
    for key, attr in _SECONDS_KEYS.items():
        if key in obj:
            kw[attr] = _seconds(f"cluster.{key}", obj[key])
    if "gangScheduling" in obj:
        kw["gang_scheduling"] = _bool("cluster.gangScheduling", obj["gangScheduling"])
    if "podGroupCRD" in obj:
        kw["pod_group_crd"] = _bool("cluster.podGroupCRD", obj["podGroupCRD"])
    return ClusterSpec(**kw)


def _lifecycle(raw: object) -> LifecycleConfig:
    if raw is None:
        return LifecycleConfig()
    if not isinstance(raw, str | Mapping):
        raise ScenarioError(f"lifecycle: expected an object, got {_show(raw)}")
    try:
        return parse_lifecycle_config(raw)
    except ConfigError as exc:
        msg = str(exc)
        if msg.startswith("lifecycle.:"):  # the entry's own top level
            msg = "lifecycle:" + msg[len("lifecycle.:") :]
        raise ScenarioError(msg if msg.startswith("lifecycle") else f"lifecycle: {msg}") from None


def _fail_pod(path: str, raw: object, runners: Sequence[str]) -> FailPod:
    obj = _obj(path, raw)
    _keys(path, obj, ("instance", "runner", "ordinal"))
    if "instance" not in obj:
        raise ScenarioError(f"{path}.instance: required (the Instance index)")
    runner = None
    if "runner" in obj:
        runner = _str(f"{path}.runner", obj["runner"])
        if runner not in RUNNER_NAMES:
            raise ScenarioError(
                f"{path}.runner: expected one of {', '.join(RUNNER_NAMES)}, got {runner!r}"
            )
        if runner not in runners:
            raise ScenarioError(
                f"{path}.runner: the replica has no {runner!r} runner (it has {', '.join(runners)})"
            )
    return FailPod(
        instance=_int(f"{path}.instance", obj["instance"]),
        runner=runner,
        ordinal=_int(f"{path}.ordinal", obj["ordinal"]) if "ordinal" in obj else None,
    )


def _migrate(path: str, raw: object, nodes: int) -> Migrate:
    obj = _obj(path, raw)
    _keys(path, obj, ("instance", "fromNode", "hintTargetNodes"))
    if "instance" not in obj:
        raise ScenarioError(f"{path}.instance: required (the Instance index)")
    hints: tuple[str, ...] = ()
    if "hintTargetNodes" in obj:
        raw_hints = obj["hintTargetNodes"]
        if not isinstance(raw_hints, list):
            raise ScenarioError(f"{path}.hintTargetNodes: expected a list of node names")
        if len(raw_hints) > _MAX_HINT_NODES:
            raise ScenarioError(
                f"{path}.hintTargetNodes: at most {_MAX_HINT_NODES} nodes, got {len(raw_hints)}"
            )
        hints = tuple(
            _node(f"{path}.hintTargetNodes[{i}]", n, nodes) for i, n in enumerate(raw_hints)
        )
    return Migrate(
        instance=_int(f"{path}.instance", obj["instance"]),
        from_node=_node(f"{path}.fromNode", obj["fromNode"], nodes) if "fromNode" in obj else None,
        hint_target_nodes=hints,
    )


def _runner_names(manifest: JSON) -> list[str]:
    runners = (manifest.get("spec") or {}).get("runners") or []
    return [str(r.get("name")) for r in runners if isinstance(r, Mapping)]


def parse_scenario(source: str | Mapping[str, Any]) -> Scenario:
    """Parse and check a scenario (YAML text or a parsed object); raise ``ScenarioError``."""
    raw = load_yaml(source) if isinstance(source, str) else source
    if raw is None:
        raise ScenarioError("scenario: the file is empty")
    top = _obj("scenario", raw)
    _keys("", top, _TOP_KEYS)
    description = ""
    if "description" in top:
        description = _str("description", top["description"])
    if "replica" not in top:
        raise ScenarioError("replica: required (an InferenceReplica manifest)")
    replica = _check_replica("replica", top["replica"])
    if "cluster" not in top:
        raise ScenarioError("cluster: required (at least cluster.nodes)")
    cluster = _cluster(top["cluster"])
    lifecycle = _lifecycle(top.get("lifecycle"))
    start = top.get("start", "empty")
    if start not in START_MODES:
        raise ScenarioError(f"start: expected one of {', '.join(START_MODES)}, got {_show(start)}")
    events = _events(top.get("events", []), replica, cluster)
    return Scenario(
        replica=replica,
        cluster=cluster,
        lifecycle=lifecycle,
        start=str(start),
        events=events,
        until=_until(top, events),
        description=description,
    )


def _events(raw_events: object, replica: JSON, cluster: ClusterSpec) -> tuple[ScenarioEvent, ...]:
    """The ``events`` list, checked in time order (so patches are checked in the order they
    apply), returned in file order."""
    if raw_events is None:
        raw_events = []
    if not isinstance(raw_events, list):
        raise ScenarioError(f"events: expected a list, got {_show(raw_events)}")
    events: list[ScenarioEvent] = []
    manifest: Any = {k: v for k, v in replica.items() if k != "status"}
    timed = sorted(
        ((i, e) for i, e in enumerate(raw_events)), key=lambda ie: _event_at(ie[0], ie[1])
    )
    for i, item in timed:
        event, manifest = _event(i, item, manifest, cluster)
        events.append(event)
    events.sort(key=lambda e: e.index)
    return tuple(events)


def _event(i: int, item: object, manifest: Any, cluster: ClusterSpec) -> tuple[ScenarioEvent, Any]:
    """Event ``i``, and the replica manifest after it (a patch changes it)."""
    path = f"events[{i}]"
    obj = _obj(path, item)
    _keys(path, obj, ("at", *EVENT_KINDS))
    at = _event_at(i, obj)
    kinds = [k for k in EVENT_KINDS if k in obj]
    if len(kinds) != 1:
        raise ScenarioError(
            f"{path}: expected exactly one of {', '.join(EVENT_KINDS)}"
            + (f", got {', '.join(kinds)}" if kinds else "")
        )
    kind = kinds[0]
    value: Any = obj[kind]
    kpath = f"{path}.{kind}"
    if kind == "patch":
        patch = _obj(kpath, value)
        if "status" in patch:
            raise ScenarioError(f"{kpath}.status: the status is the planner's to write")
        manifest = merge_patch(manifest, patch)
        _check_replica(kpath, manifest)
        value = patch
    elif kind == "failPod":
        value = _fail_pod(kpath, value, _runner_names(manifest))
    elif kind == "failNode":
        value = _node(kpath, value, cluster.nodes)
    elif kind == "badImage":
        value = _str(kpath, value)
    else:
        value = _migrate(kpath, value, cluster.nodes)
    return ScenarioEvent(at=at, kind=kind, value=value, index=i), manifest


def _until(top: Mapping[str, Any], events: Sequence[ScenarioEvent]) -> float:
    """``until``: no earlier than the last event; by default a while after it."""
    last = max((e.at for e in events), default=0.0)
    if "until" not in top:
        return last + _DEFAULT_UNTIL_AFTER
    until = _duration("until", top["until"])
    if until < last:
        raise ScenarioError(f"until: {top['until']} is before the last event (at {_num(last)}s)")
    if until <= 0:
        raise ScenarioError("until: expected a duration > 0")
    return until


def _event_at(i: int, item: object) -> float:
    obj = _obj(f"events[{i}]", item)
    if "at" not in obj:
        raise ScenarioError(f"events[{i}].at: required (a duration such as '5m')")
    return _duration(f"events[{i}].at", obj["at"])


def _num(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value

"""Label and node matching as the scheduler does it: node selectors, required and
preferred node affinity, pod (anti-)affinity label selectors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omenative_sim.objects import SimNode

__all__: list[str] = []


def _compare(op: str, present: bool, value: str | None, values: list[str]) -> bool:
    """``Gt`` / ``Lt``: the label, read as an integer, against the first value."""
    if not present or not values or value is None:
        return False
    try:
        a, b = int(value), int(values[0])
    except ValueError:
        return False
    return a > b if op == "Gt" else a < b


def match_expression(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfy one node selector requirement (unknown operators: no)."""
    key = str(expr.get("key", ""))
    op = str(expr.get("operator", ""))
    values = [str(v) for v in expr.get("values") or ()]
    present = key in labels
    value = labels.get(key)
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op in ("Exists", "DoesNotExist"):
        return present == (op == "Exists")
    return op in ("Gt", "Lt") and _compare(op, present, value, values)


def term_matches(term: Mapping[str, Any], node: SimNode) -> bool:
    """Whether ``node`` matches one node selector term (every expression and field)."""
    exprs = term.get("matchExpressions") or ()
    fields = term.get("matchFields") or ()
    if not exprs and not fields:
        return False  # an empty term matches nothing
    if not all(match_expression(e, node.labels) for e in exprs):
        return False
    return all(match_expression(f, {"metadata.name": node.name}) for f in fields)


def node_fits(spec: Mapping[str, Any], node: SimNode) -> bool:
    """Whether ``node`` satisfies the pod spec's nodeSelector and required node affinity."""
    selector = spec.get("nodeSelector") or {}
    if any(node.labels.get(k) != v for k, v in selector.items()):
        return False
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms")
    if terms is not None:
        return any(term_matches(t, node) for t in terms)
    return True


def preferred_score(spec: Mapping[str, Any], node: SimNode) -> int:
    """The sum of the weights of the preferred node affinity terms ``node`` matches."""
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    score = 0
    for pref in node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ():
        if term_matches(pref.get("preference") or {}, node):
            weight = pref.get("weight", 1)
            score += weight if isinstance(weight, int) else 1
    return score


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` match a label selector (matchLabels and matchExpressions)."""
    match_labels = selector.get("matchLabels") or {}
    if any(labels.get(k) != v for k, v in match_labels.items()):
        return False
    return all(match_expression(e, labels) for e in selector.get("matchExpressions") or ())

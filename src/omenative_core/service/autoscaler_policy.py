"""OME's AutoscalerPolicy (alpha): validating a policy and rendering it for one component.

As OME v1.3 (ome-projects/ome ``pkg/apis/ome/v1beta1/autoscalerpolicy_types.go`` at
3731e1e7; ``pkg/autoscalerpolicy/render/render.go`` at 2af192b3, and its ``ValidateSpec``;
ome-docs ``concepts/serving/autoscaler-policy.md``):

* A policy's ``spec.class`` is ``HPA`` (``hpa`` copied as it is; without it the HPA keeps
  CPU at the configured utilization) or ``KEDA`` (``keda.triggers`` rendered, the rest
  copied). ``External`` and ``None`` are inline-only.
* Trigger ``metadata`` values are Go-template text over a closed variable set
  (``TEMPLATE_VARIABLES``): literal text and ``{{ .Var }}`` only, no functions, pipelines
  or conditionals (``ForbiddenTemplateNode``); an unclosed action is a ``ParseError``.
* A ``prometheus`` trigger names a metric provider in ``providerRef``; its ``serverAddress``
  comes from the operator's binding (``metricProviders``), never from the policy
  (``serverAddress`` / ``authModes`` in metadata: ``ForbiddenMetadataKey``), and it must set
  ``ignoreNullValues`` explicitly.
* ``keda.fallback.replicas`` is a fixed ``value`` or ``fromComponent`` ``MaxReplicas`` /
  ``MinReplicas``, resolved against the component's effective bounds.

Pure: JSON in, JSON out; a failure is a ``PolicyProblem`` (reason, detail), never raised.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Final

from attrs import frozen

__all__ = [
    "AUTOSCALER_POLICY_KIND",
    "CONDITION_IN_USE",
    "CONDITION_READY",
    "TEMPLATE_VARIABLES",
    "PolicyProblem",
    "RenderContext",
    "Rendered",
    "parse_metric_providers",
    "policy_problems",
    "portable_digest",
    "render_policy",
    "render_template",
]

AUTOSCALER_POLICY_KIND: Final = "AutoscalerPolicy"
"""The kind an ``autoscalerPolicyRef`` names (``ClusterAutoscalerPolicy`` is reserved)."""
CONDITION_READY: Final = "Ready"
"""Policy condition: True ``TemplatesValid`` when it renders and its providers are bound."""
CONDITION_IN_USE: Final = "InUse"
"""Policy condition: True ``Attached`` while a component references it, else
``NoConsumers``."""
TEMPLATE_VARIABLES: Final = ("Namespace", "ISVCName", "Component", "MinReplicas",
                             "MaxReplicas", "TargetName")
"""The variables a trigger's metadata may use, filled in per component."""

_FORBIDDEN_KEYS: Final = frozenset({"serveraddress", "authmodes"})
_ACTION: Final = re.compile(r"\{\{(-?)(.*?)(-?)\}\}", re.S)
_FIELD: Final = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)")
_POLICY_CLASSES: Final = ("HPA", "KEDA")


@frozen
class PolicyProblem:
    """Why a policy cannot be used: OME's reason (``ParseError``, ``ForbiddenTemplateNode``,
    ``ForbiddenMetadataKey``, ``ProviderUnknown``, ``PromQLInvalid``, ...) and a detail."""

    reason: str
    detail: str


@frozen
class RenderContext:
    """The per-component variables a policy renders with (effective bounds)."""

    namespace: str
    isvc: str
    component: str
    min_replicas: int
    max_replicas: int

    def variables(self) -> dict[str, str]:
        """``TEMPLATE_VARIABLES`` -> their text."""
        return {"Namespace": self.namespace, "ISVCName": self.isvc,
                "Component": self.component, "MinReplicas": str(self.min_replicas),
                "MaxReplicas": str(self.max_replicas),
                "TargetName": f"{self.isvc}-{self.component}"}


@frozen
class Rendered:
    """One successful render: the component ``autoscaler`` block (the shape of an inline
    one), the policy's portable digest and this render's resolved digest."""

    block: dict[str, Any]
    portable_digest: str
    resolved_digest: str


def _digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def portable_digest(spec: Mapping[str, Any]) -> str:
    """A digest of the policy spec (canonical JSON, ``enforcement`` defaulted)."""
    return _digest({"enforcement": "Default", **spec})


def render_template(text: str, variables: Mapping[str, str]) -> str | PolicyProblem:
    """``text`` with each ``{{ .Var }}`` replaced (``{{-`` / ``-}}`` trim whitespace as in
    Go); anything else inside ``{{ }}`` is refused."""
    out: list[str] = []
    pos = 0
    for m in _ACTION.finditer(text):
        literal = text[pos:m.start()]
        if "{{" in literal:
            return PolicyProblem("ParseError", f"unclosed action in {text!r}")
        out.append(literal.rstrip() if m.group(1) else literal)
        inner = m.group(2).strip()
        field = _FIELD.fullmatch(inner)
        if field is None:
            return PolicyProblem("ForbiddenTemplateNode",
                                 f"forbidden template construct {{{{{m.group(2)}}}}}: only "
                                 f"{{{{ .Var }}}} of {', '.join(TEMPLATE_VARIABLES)} is allowed")
        if field.group(1) not in variables:
            return PolicyProblem("ForbiddenTemplateNode",
                                 f"unknown template variable .{field.group(1)}")
        out.append(variables[field.group(1)])
        pos = m.end()
        if m.group(3):
            rest = text[pos:]
            pos += len(rest) - len(rest.lstrip())
    tail = text[pos:]
    if "{{" in tail:
        return PolicyProblem("ParseError", f"unclosed action in {text!r}")
    out.append(tail)
    return "".join(out)


def _balanced(query: str) -> bool:
    """Brackets balance outside quoted strings (the PromQL check omenative can make
    without a PromQL parser)."""
    pairs = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    quote: str | None = None
    escaped = False
    for ch in query:
        if quote is not None:
            escaped = (ch == "\\") and not escaped
            if ch == quote and not escaped:
                quote = None
            continue
        if ch in "\"'`":
            quote = ch
        elif ch in "([{":
            stack.append(ch)
        elif ch in pairs and (not stack or stack.pop() != pairs[ch]):
            return False
    return not stack and quote is None


def _is_endpoint(trigger: Mapping[str, Any]) -> bool:
    return str(trigger.get("type") or "").lower() == "prometheus"


def _trigger_problems(i: int, trigger: object) -> list[PolicyProblem]:
    if not isinstance(trigger, Mapping):
        return [PolicyProblem("ParseError", f"trigger {i}: must be an object")]
    out: list[PolicyProblem] = []
    metadata = trigger.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    for key in metadata:
        if str(key).lower() in _FORBIDDEN_KEYS:
            out.append(PolicyProblem("ForbiddenMetadataKey",
                                     f"trigger {i}: metadata key {key!r} is provider-owned; "
                                     "bind endpoints via providerRef"))
    if _is_endpoint(trigger):
        ref = trigger.get("providerRef")
        if not isinstance(ref, Mapping) or not ref.get("name"):
            out.append(PolicyProblem("ProviderRefRequired",
                                     f"trigger {i} ({trigger.get('type')}): providerRef is "
                                     "required for endpoint trigger types"))
        if "ignoreNullValues" not in metadata:
            out.append(PolicyProblem("IgnoreNullValuesMustBeExplicit",
                                     f"trigger {i} ({trigger.get('type')}): ignoreNullValues "
                                     "must be explicit"))
    if trigger.get("queryReturnsDesiredReplicas") and trigger.get("metricType") != "AverageValue":
        out.append(PolicyProblem("DesiredCountRequiresAverageValue",
                                 f"trigger {i}: queryReturnsDesiredReplicas requires "
                                 "metricType AverageValue"))
    return out


def _spec_problems(spec: Mapping[str, Any]) -> list[PolicyProblem]:
    out: list[PolicyProblem] = []
    if spec.get("enforcement") == "Required":
        out.append(PolicyProblem("EnforcementRequiredReserved",
                                 "enforcement Required is a reserved shape; use Default"))
    klass = spec.get("class")
    if klass not in _POLICY_CLASSES:
        out.append(PolicyProblem("ClassTemplateMismatch",
                                 f"class {klass!r} is not allowed in policies (External and "
                                 "None are inline-only)"))
    elif klass == "KEDA" and not isinstance(spec.get("keda"), Mapping):
        out.append(PolicyProblem("ClassTemplateMismatch", "class KEDA requires a keda template"))
    elif klass == "KEDA" and spec.get("hpa") is not None:
        out.append(PolicyProblem("ClassTemplateMismatch", "class KEDA forbids an hpa template"))
    elif klass == "HPA" and spec.get("keda") is not None:
        out.append(PolicyProblem("ClassTemplateMismatch", "class HPA forbids a keda template"))
    keda = spec.get("keda")
    if isinstance(keda, Mapping):
        triggers = keda.get("triggers")
        for i, trigger in enumerate(triggers if isinstance(triggers, list) else ()):
            out.extend(_trigger_problems(i, trigger))
    return out


_SAMPLE: Final = RenderContext("sample-namespace", "sample-isvc", "engine", 1, 4)


def policy_problems(spec: Mapping[str, Any],
                    providers: Mapping[str, Mapping[str, Any]] | None = None
                    ) -> list[PolicyProblem]:
    """What is wrong with a policy ``spec``, as OME's ``ValidateSpec`` (structure, templates
    by a sample render, rendered PromQL); with ``providers``, an unbound provider is
    ``ProviderUnknown`` (OME's Ready condition). Empty: valid."""
    found = _spec_problems(spec)
    if found or spec.get("class") != "KEDA":
        return found
    sample = {str(r.get("name")): {"serverAddress": "http://sample-provider.invalid"}
              for r in _provider_refs(spec)}
    result = render_policy(spec, "sample", sample, _SAMPLE)
    if isinstance(result, PolicyProblem):
        return [result]
    for i, trigger in enumerate(result.block["keda"]["triggers"]):
        query = trigger.get("metadata", {}).get("query")
        if _is_endpoint(trigger) and isinstance(query, str) and not _balanced(query):
            found.append(PolicyProblem("PromQLInvalid",
                                       f"trigger {i}: rendered query has unbalanced "
                                       "brackets or quotes"))
    if not found and providers is not None:
        for ref in _provider_refs(spec):
            name = str(ref.get("name"))
            if not (providers.get(name) or {}).get("serverAddress"):
                found.append(PolicyProblem("ProviderUnknown",
                                           f"metric provider {name!r} is not bound on this "
                                           "cluster (metricProviders)"))
    return found


def _provider_refs(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    keda = spec.get("keda")
    triggers = keda.get("triggers") if isinstance(keda, Mapping) else None
    return [t["providerRef"] for t in triggers if isinstance(t, Mapping)
            and isinstance(t.get("providerRef"), Mapping)
            and t["providerRef"].get("name")] if isinstance(triggers, list) else []


def _render_trigger(i: int, trigger: Mapping[str, Any],
                    providers: Mapping[str, Mapping[str, Any]],
                    variables: Mapping[str, str]) -> dict[str, Any] | PolicyProblem:
    metadata: dict[str, str] = {}
    for key, value in (trigger.get("metadata") or {}).items():
        if str(key).lower() in _FORBIDDEN_KEYS:
            return PolicyProblem("ForbiddenMetadataKey",
                                 f"trigger {i} metadata key {key!r} is provider-owned")
        text = render_template(str(value), variables)
        if isinstance(text, PolicyProblem):
            return PolicyProblem(text.reason, f"trigger {i} metadata {key!r}: {text.detail}")
        metadata[str(key)] = text
    out: dict[str, Any] = {"type": trigger.get("type"), "metadata": metadata}
    if trigger.get("metricType"):
        out["metricType"] = trigger["metricType"]
    if _is_endpoint(trigger):
        ref = trigger.get("providerRef") or {}
        name = ref.get("name") if isinstance(ref, Mapping) else None
        if not name:
            return PolicyProblem("ProviderRefRequired",
                                 f"trigger {i} ({trigger.get('type')}): providerRef is required")
        binding = providers.get(str(name)) or {}
        if not binding.get("serverAddress"):
            return PolicyProblem("ProviderUnknown",
                                 f"trigger {i} ({trigger.get('type')}): metric provider "
                                 f"{name!r} is not bound on this cluster")
        if binding.get("authSecretRef"):
            return PolicyProblem("ProviderUnknown",
                                 f"trigger {i}: metric provider {name!r} has an authSecretRef; "
                                 "omenative does not create TriggerAuthentications yet")
        metadata["serverAddress"] = str(binding["serverAddress"])
    return out


def _fallback(fallback: Mapping[str, Any], ctx: RenderContext) -> dict[str, Any] | PolicyProblem:
    source = fallback.get("replicas")
    source = source if isinstance(source, Mapping) else {}
    value, field = source.get("value"), source.get("fromComponent")
    if (value is None) == (field is None):
        return PolicyProblem("ValueSourceInvalid", "fallback.replicas: exactly one of value "
                             "or fromComponent must be set")
    if field is not None:
        bounds = {"MaxReplicas": ctx.max_replicas, "MinReplicas": ctx.min_replicas}
        if field not in bounds:
            return PolicyProblem("ValueSourceInvalid",
                                 f"fallback.replicas: unknown component bounds field {field!r}")
        value = bounds[str(field)]
    return {"failureThreshold": fallback.get("failureThreshold"), "replicas": value}


def _render_keda(keda: Mapping[str, Any], providers: Mapping[str, Mapping[str, Any]],
                 ctx: RenderContext) -> dict[str, Any] | PolicyProblem:
    variables = ctx.variables()
    triggers: list[dict[str, Any]] = []
    for i, trigger in enumerate(keda.get("triggers") or ()):
        if not isinstance(trigger, Mapping):
            return PolicyProblem("ParseError", f"trigger {i}: must be an object")
        rendered = _render_trigger(i, trigger, providers, variables)
        if isinstance(rendered, PolicyProblem):
            return rendered
        triggers.append(rendered)
    out: dict[str, Any] = {"triggers": triggers}
    for key in ("pollingInterval", "cooldownPeriod", "idleReplicaCount", "advanced"):
        if keda.get(key) is not None:
            out[key] = keda[key]
    if isinstance(keda.get("fallback"), Mapping):
        fallback = _fallback(keda["fallback"], ctx)
        if isinstance(fallback, PolicyProblem):
            return fallback
        out["fallback"] = fallback
    return out


def render_policy(spec: Mapping[str, Any], name: str,
                  providers: Mapping[str, Mapping[str, Any]],
                  ctx: RenderContext) -> Rendered | PolicyProblem:
    """The ``autoscaler`` block policy ``name`` renders for the component of ``ctx``, or
    why it cannot (the component then holds)."""
    klass = spec.get("class")
    block: dict[str, Any]
    if klass == "HPA":
        block = {"class": "HPA"}
        if isinstance(spec.get("hpa"), Mapping):
            block["hpa"] = dict(spec["hpa"])
    elif klass == "KEDA" and isinstance(spec.get("keda"), Mapping):
        keda = _render_keda(spec["keda"], providers, ctx)
        if isinstance(keda, PolicyProblem):
            return PolicyProblem(keda.reason, f"policy {name}: {keda.detail}")
        block = {"class": "KEDA", "keda": keda}
    else:
        return PolicyProblem("ClassTemplateMismatch",
                             f"policy {name}: unsupported class {klass!r}")
    resolved = _digest({"block": block, "min": ctx.min_replicas, "max": ctx.max_replicas})
    return Rendered(block, portable_digest(spec), resolved)


def _bindings(value: object, path: str) -> dict[str, dict[str, Any]]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): dict(v) for k, v in value.items() if isinstance(v, Mapping)}


def parse_metric_providers(metric_providers: object,
                           autoscaler_policy: object) -> dict[str, dict[str, Any]]:
    """The provider bindings of ``inferenceservice-config``: the top-level
    ``metricProviders`` (authoritative when present, even empty), else the deprecated
    ``autoscalerPolicy.metricProviders``. Each: ``{serverAddress, authSecretRef?,
    headers?}``."""
    if metric_providers is not None:
        return _bindings(metric_providers, "metricProviders")
    nested = autoscaler_policy.get("metricProviders") \
        if isinstance(autoscaler_policy, Mapping) else None
    return _bindings(nested, "autoscalerPolicy.metricProviders")

"""OME v1.3's schema of the AutoscalerPolicy CRD (``autoscalerpolicies.ome.io``, alpha).

Written by us after OME's Go type (ome-projects/ome
``pkg/apis/ome/v1beta1/autoscalerpolicy_types.go`` at
3731e1e7ad756a2e6d4068c455a56331f47e8d46): closed types with OME's enums, defaults,
``required`` and CEL rules (``class KEDA requires keda and forbids hpa; class HPA forbids
keda``, ``exactly one of value or fromComponent must be set``); the HPA block and KEDA's
``advanced`` are kept whole (Kubernetes' / KEDA's own types, as in ``ome_schema``). One
omenative rule more: ``enforcement: Required`` is refused by the API server (OME's policy
webhook refuses it, ``EnforcementRequiredReserved``). Status subresource; OME's printer
columns (Class, Ready, Attached, Age).
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["policy_columns", "policy_spec_schema", "policy_status_schema"]

_STR: Final[dict[str, Any]] = {"type": "string"}
_INT32: Final[dict[str, Any]] = {"type": "integer", "format": "int32"}


def _whole() -> dict[str, Any]:
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _trigger() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["type", "metadata"],
        "properties": {
            "type": {"type": "string", "minLength": 1},
            "providerRef": {"type": "object", "required": ["name"],
                            "properties": {"name": {"type": "string", "minLength": 1}}},
            "metricType": {"type": "string", "enum": ["AverageValue", "Value"]},
            "queryReturnsDesiredReplicas": {"type": "boolean"},
            "metadata": {"type": "object", "additionalProperties": dict(_STR)},
        },
    }


def _fallback() -> dict[str, Any]:
    replicas = {
        "type": "object",
        "properties": {
            "value": {**_INT32, "minimum": 0},
            "fromComponent": {"type": "string", "enum": ["MaxReplicas", "MinReplicas"]},
        },
        "x-kubernetes-validations": [{
            "rule": "(has(self.value) ? 1 : 0) + (has(self.fromComponent) ? 1 : 0) == 1",
            "message": "exactly one of value or fromComponent must be set"}],
    }
    return {"type": "object", "required": ["failureThreshold", "replicas"],
            "properties": {"failureThreshold": {**_INT32, "minimum": 1},
                           "replicas": replicas}}


def policy_spec_schema() -> dict[str, Any]:
    """``AutoscalerPolicySpec``."""
    keda = {
        "type": "object",
        "required": ["triggers"],
        "properties": {
            "triggers": {"type": "array", "minItems": 1, "items": _trigger(),
                         "x-kubernetes-list-type": "atomic"},
            "advanced": _whole(),
            "pollingInterval": dict(_INT32),
            "cooldownPeriod": dict(_INT32),
            "idleReplicaCount": dict(_INT32),
            "fallback": _fallback(),
        },
    }
    hpa = {"type": "object",
           "properties": {"metrics": {"type": "array", "items": _whole()},
                          "behavior": _whole()}}
    return {
        "type": "object",
        "required": ["class"],
        "properties": {
            "enforcement": {"type": "string", "enum": ["Default", "Required"],
                            "default": "Default"},
            "class": {"type": "string", "enum": ["HPA", "KEDA"]},
            "keda": keda,
            "hpa": hpa,
        },
        "x-kubernetes-validations": [
            {"rule": "self.class == 'KEDA' ? (has(self.keda) && !has(self.hpa)) : "
                     "!has(self.keda)",
             "message": "class KEDA requires keda and forbids hpa; class HPA forbids keda"},
            {"rule": "!has(self.enforcement) || self.enforcement != 'Required'",
             "message": "EnforcementRequiredReserved: enforcement Required is a reserved "
                        "shape and not implemented; use Default"},
        ],
    }


def policy_status_schema() -> dict[str, Any]:
    """``AutoscalerPolicyStatus``: counts and digests, and the conditions by type."""
    condition = {
        "type": "object",
        "required": ["type", "status", "lastTransitionTime", "reason", "message"],
        "properties": {
            "type": dict(_STR), "status": {"type": "string",
                                           "enum": ["True", "False", "Unknown"]},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "reason": dict(_STR), "message": dict(_STR),
        },
    }
    return {
        "type": "object",
        "properties": {
            "observedGeneration": {"type": "integer", "format": "int64"},
            "portableDigest": dict(_STR),
            "attachedComponents": dict(_INT32),
            "conditions": {"type": "array", "items": condition,
                           "x-kubernetes-list-type": "map",
                           "x-kubernetes-list-map-keys": ["type"]},
        },
    }


def policy_columns() -> list[dict[str, Any]]:
    """OME's ``kubectl get autoscalerpolicies`` columns."""
    return [
        {"name": "Class", "type": "string", "jsonPath": ".spec.class"},
        {"name": "Ready", "type": "string",
         "jsonPath": ".status.conditions[?(@.type=='Ready')].status"},
        {"name": "Attached", "type": "integer", "jsonPath": ".status.attachedComponents"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]

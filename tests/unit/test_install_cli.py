"""The pure parts of ``omenative install``/``uninstall``, and config/ as checked in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from omenative_controller.cli.install import (
    Conflict,
    find_config_dir,
    foreign_owner,
    format_preview,
    format_refusal,
    format_workloads,
    object_key,
    plan_install,
    plan_uninstall,
    strip_helm_marks,
    with_loose_crds,
)
from omenative_core.model.config import UNCONFIGURED, LifecycleConfig, parse_lifecycle_config
from omenative_core.service import SERVICE_CONFIG_KEYS, ServiceConfig, parse_service_config

ROOT = Path(__file__).resolve().parents[2]
OURS = {"app.kubernetes.io/part-of": "omenative", "app.kubernetes.io/managed-by": "kustomize"}


def obj(kind: str, name: str, namespace: str = "", *, api: str = "v1",
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": api, "kind": kind, "metadata": meta}


def crd(name: str, **kw: Any) -> dict[str, Any]:
    return obj("CustomResourceDefinition", name, api="apiextensions.k8s.io/v1", **kw)


HELM = {"labels": {"app.kubernetes.io/managed-by": "Helm"},
        "annotations": {"meta.helm.sh/release-name": "ome-crd",
                        "meta.helm.sh/release-namespace": "ome"}}


def test_foreign_owner_names_helm_and_strangers_and_accepts_ours() -> None:
    assert foreign_owner(crd("a", labels=OURS)) is None
    assert foreign_owner(crd("a", **HELM)) == "Helm release ome/ome-crd"
    assert foreign_owner(crd("a", labels={"app.kubernetes.io/managed-by": "Helm"})) == "Helm"
    # a Helm mark wins over our label (someone labelled a Helm object by hand)
    assert foreign_owner(crd("a", labels=OURS, annotations=HELM["annotations"])) is not None
    assert "managed-by: olm" in str(
        foreign_owner(crd("a", labels={"app.kubernetes.io/managed-by": "olm"})))
    assert "no app.kubernetes.io/part-of=omenative label" in str(foreign_owner(crd("a")))


def test_plan_install_refuses_foreign_crds_unless_adopted_or_kept() -> None:
    rendered = [obj("Namespace", "ome"), crd("x.ome.io"), crd("y.ome.io"),
                obj("Deployment", "m", "ome", api="apps/v1")]
    live = {object_key(crd("x.ome.io")): crd("x.ome.io", **HELM),
            object_key(crd("y.ome.io")): crd("y.ome.io", labels=OURS)}
    steps, conflicts = plan_install(rendered, live)
    assert conflicts == [Conflict("x.ome.io", "Helm release ome/ome-crd")]
    assert [s.action for s in steps] == ["create", "skip", "configure", "create"]

    steps, conflicts = plan_install(rendered, live, adopt_crds=True)
    assert not conflicts
    assert steps[1].action == "adopt" and steps[1].obj is not None

    steps, conflicts = plan_install(rendered, live, keep_foreign_crds=True)
    assert not conflicts
    assert steps[1].action == "skip" and steps[1].obj is None
    assert "kept as it is" in steps[1].note


def test_a_foreign_namespace_and_lifecycle_config_are_shared_not_overwritten() -> None:
    cm = obj("ConfigMap", "inferenceservice-config", "ome")
    rendered = [obj("Namespace", "ome"), cm]
    live = {object_key(obj("Namespace", "ome")): obj("Namespace", "ome", labels={}),
            object_key(cm): obj("ConfigMap", "inferenceservice-config", "ome", **HELM)}
    steps, conflicts = plan_install(rendered, live, adopt_crds=True)
    assert not conflicts
    assert [s.action for s in steps] == ["skip", "skip"]
    assert "reads its 'lifecycle' entry" in steps[1].note


def test_plan_uninstall_orders_manager_first_crds_last_and_spares_foreign_objects() -> None:
    names = [obj("Namespace", "ome"), crd("x.ome.io"), crd("y.ome.io"),
             obj("ClusterRole", "r", api="rbac.authorization.k8s.io/v1"),
             obj("Deployment", "m", "ome", api="apps/v1"),
             obj("ValidatingAdmissionPolicyBinding", "b",
                 api="admissionregistration.k8s.io/v1"),
             obj("ServiceAccount", "sa", "ome")]
    live = {object_key(o): {**o, "metadata": {**o["metadata"], "labels": OURS}}
            for o in names}
    live[object_key(crd("y.ome.io"))] = crd("y.ome.io", **HELM)
    del live[object_key(obj("ServiceAccount", "sa", "ome"))]  # gone already: not listed

    kept = plan_uninstall(names, live)
    assert [(s.key[1], s.action) for s in kept] == [
        ("Deployment", "delete"), ("ValidatingAdmissionPolicyBinding", "delete"),
        ("ClusterRole", "delete"), ("Namespace", "delete"),
        ("CustomResourceDefinition", "skip"), ("CustomResourceDefinition", "skip")]
    deleting = plan_uninstall(names, live, delete_crds=True)
    crds = {s.key[3]: s.action for s in deleting if s.key[1] == "CustomResourceDefinition"}
    assert crds == {"x.ome.io": "delete", "y.ome.io": "skip"}  # Helm's stays


def test_preview_refusal_and_workload_messages() -> None:
    steps, conflicts = plan_install([crd("x.ome.io"), obj("Namespace", "ome")],
                                    {object_key(crd("x.ome.io")): crd("x.ome.io", **HELM)})
    text = format_preview(steps, title="omenative install:")
    assert text.splitlines() == [
        "omenative install:",
        "  skip    CustomResourceDefinition/x.ome.io  (owned by Helm release ome/ome-crd)",
        "  create  Namespace/ome",
        "1 to change, 1 left as they are.",
    ]
    refusal = format_refusal(conflicts)
    assert "x.ome.io  (owned by Helm release ome/ome-crd)" in refusal
    assert "--adopt-crds" in refusal and "--keep-foreign-crds" in refusal
    assert "Nothing was changed" in refusal
    msg = format_workloads(["InferenceService/chat -n llm"])
    assert "ome.io/ir-teardown" in msg and "InferenceService/chat -n llm" in msg
    assert strip_helm_marks(crd("x", **HELM)) == [
        "meta.helm.sh/release-name-", "meta.helm.sh/release-namespace-"]
    assert strip_helm_marks(crd("x", labels=OURS)) == []


# ---------------------------------------------------------------------------- config/


def _docs(*parts: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((ROOT / "config" / Path(*parts)).read_text()) if d]


def test_loose_crds_replace_omes_schema_by_name_and_leave_the_rest() -> None:
    """``--crd-schema loose``: each loose CRD takes the place of the OME-schema one of the same
    name; the InferenceReplica CRD and every other object stay as rendered, in order."""
    ome_isvc = {**crd("inferenceservices.ome.io"), "spec": {"schema": "ome"}}
    loose_isvc = {**crd("inferenceservices.ome.io"), "spec": {"schema": "loose"}}
    rendered = [crd("inferencereplicas.ome.io"), ome_isvc, obj("Namespace", "ome")]
    out = with_loose_crds(rendered, [loose_isvc])
    assert [object_key(o)[3] for o in out] == [
        "inferencereplicas.ome.io", "inferenceservices.ome.io", "ome"]
    assert out[1]["spec"] == {"schema": "loose"}
    assert rendered[1]["spec"] == {"schema": "ome"}  # the input is left alone


def test_config_installs_omes_schema_and_crd_loose_the_opt_out() -> None:
    """config/crd/ (what config/ installs) holds OME's schema for the InferenceService and
    runtimes (spec closed, so unknown fields are pruned); config/crd-loose/ keeps spec whole."""
    for plural in ("inferenceservices", "servingruntimes", "clusterservingruntimes"):
        (ome,) = _docs("crd", f"ome.io_{plural}.yaml")
        (loose,) = _docs("crd-loose", f"ome.io_{plural}.yaml")
        ome_spec = ome["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        loose_spec = (
            loose["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"])
        assert "x-kubernetes-preserve-unknown-fields" not in ome_spec
        assert loose_spec["x-kubernetes-preserve-unknown-fields"] is True
    kustomization = yaml.safe_load((ROOT / "config" / "crd" / "kustomization.yaml").read_text())
    assert "ome.io_inferenceservices.yaml" in kustomization["resources"]


def test_config_dir_is_found_from_the_package() -> None:
    assert find_config_dir() == ROOT / "config"


def test_the_config_map_holds_the_chart_defaults() -> None:
    (cm,) = _docs("manager", "config.yaml")
    assert (cm["metadata"]["name"], cm["metadata"]["namespace"]) == (
        "inferenceservice-config", "ome")
    # read as OME reads a ConfigMap (a key left out is off), it is still the chart
    assert parse_lifecycle_config(cm["data"]["lifecycle"], absent=UNCONFIGURED) == (
        LifecycleConfig())
    assert set(cm["data"]) == {"lifecycle", "deploy", "podDisruptionBudget", "coordination",
                               "rollout"}
    assert set(cm["data"]) <= {"lifecycle", *SERVICE_CONFIG_KEYS}
    assert parse_service_config(cm["data"], LifecycleConfig()) == ServiceConfig()


def test_the_deployment_matches_the_webhook_service_and_the_admission_exemption() -> None:
    (deploy,) = _docs("manager", "manager.yaml")
    (svc,) = _docs("webhook", "service.yaml")
    pod_labels = deploy["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    assert deploy["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    spec = deploy["spec"]["template"]["spec"]
    (sa,) = _docs("rbac", "service_account.yaml")
    assert spec["serviceAccountName"] == sa["metadata"]["name"] == "omenative-manager"
    assert sa["metadata"]["namespace"] == "ome"
    bindings = (ROOT / "config" / "admission" / "bindings.yaml").read_text() + \
        (ROOT / "config" / "admission" / "policies.yaml").read_text()
    assert "system:serviceaccount:ome:omenative-manager" in bindings
    (container,) = spec["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert spec["securityContext"]["runAsUser"] == 65532


def test_rbac_has_no_wildcards_or_privilege_verbs_and_secrets_only_get() -> None:
    secret_rules = []
    for doc in _docs("rbac", "role.yaml") + _docs("rbac", "leader_election_role.yaml"):
        for rule in doc["rules"]:
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], rule
            assert not {"escalate", "bind", "impersonate", "deletecollection"} & set(
                rule["verbs"]), rule
            if "secrets" in rule["resources"]:
                secret_rules.append((doc["metadata"]["name"], rule))
    # a canary's prometheus.authRef: get one Secret by name; never list, watch or write
    assert secret_rules == [("omenative-manager", {
        "apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})], secret_rules

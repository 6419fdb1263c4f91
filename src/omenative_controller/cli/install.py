"""``omenative install`` and ``omenative uninstall``: ``config/`` applied with a guard.

``install`` renders ``kubectl kustomize config/``, looks at what already exists, and refuses
to overwrite a CRD that another installation owns (OME's Helm chart, say) unless told to
``--adopt-crds`` (or ``--keep-foreign-crds`` to leave them be). A Namespace or the
``inferenceservice-config`` ConfigMap that another installation owns is left as it is:
omenative shares them (the manager reads OME's ``lifecycle`` entry). It previews every
object and asks before it applies, unless ``--yes``.

``--crd-schema loose`` installs the loose InferenceService and runtime CRDs of
``config/crd-loose/`` in place of OME's schema (``config/crd/``; docs/install.md).

``uninstall`` removes what ``install`` created, in an order that lets the manager finish
its work: InferenceServices and InferenceReplicas first (the manager drains their
Instances and then drops the ``ome.io/ir-teardown`` finalizer), then the manager and its
permissions, and the CRDs only with ``--delete-crds``.

Every cluster call goes through ``kubectl`` (``--kubectl``, else ``kubectl`` on PATH, else
the local control plane's cached one), so ``--kubeconfig``/``--context`` mean what they
mean to kubectl. The decisions (who owns what, what to do, the preview) are plain
functions, unit-tested in ``tests/unit/test_install_cli.py``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import click
import yaml
from attrs import frozen

__all__ = [
    "EXIT_REFUSED",
    "FINALIZER",
    "OWN_LABEL",
    "Conflict",
    "Kubectl",
    "Step",
    "find_config_dir",
    "foreign_owner",
    "format_preview",
    "format_refusal",
    "format_workloads",
    "install",
    "object_key",
    "plan_install",
    "plan_uninstall",
    "uninstall",
    "with_loose_crds",
]

JSON = dict[str, Any]
ObjKey = tuple[str, str, str, str]
"""(group, kind, namespace, name) of an object; namespace ``""`` for cluster-scoped ones."""

EXIT_REFUSED = 3
"""Exit status when the guard refuses (foreign CRDs, workloads left on uninstall)."""

OWN_LABEL = ("app.kubernetes.io/part-of", "omenative")
"""The label config/kustomization.yaml puts on every object omenative installs."""

FINALIZER = "ome.io/ir-teardown"
"""The manager's finalizer on every InferenceReplica (omenative_core.planner)."""

HELM_ANNOTATIONS = ("meta.helm.sh/release-name", "meta.helm.sh/release-namespace")
_MANAGED_BY = "app.kubernetes.io/managed-by"
_CONFIG_MAP = "inferenceservice-config"

# What a foreign Namespace or lifecycle ConfigMap is: shared, not taken over.
_SHARED_KINDS = {("", "Namespace"), ("", "ConfigMap")}

# Uninstall order: the manager stops first (nothing left to reconcile by then), admission
# next (so nothing is refused while the rest goes), the CRDs last.
_DELETE_ORDER = {
    "Deployment": 0,
    "ValidatingAdmissionPolicyBinding": 1,
    "ValidatingAdmissionPolicy": 2,
    "MutatingAdmissionPolicyBinding": 1,
    "MutatingAdmissionPolicy": 2,
    "ClusterRoleBinding": 3,
    "RoleBinding": 3,
    "ClusterRole": 4,
    "Role": 4,
    "ConfigMap": 5,
    "ServiceAccount": 6,
    "Namespace": 7,
    "CustomResourceDefinition": 8,
}


# ---------------------------------------------------------------------------- pure parts


def object_key(obj: Mapping[str, Any]) -> ObjKey:
    """The identity of an object: group, kind, namespace and name."""
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    meta = obj.get("metadata") or {}
    return (group, str(obj.get("kind", "")), str(meta.get("namespace") or ""),
            str(meta.get("name", "")))


def describe(key: ObjKey) -> str:
    """``Kind/name`` or ``Kind/name -n namespace``."""
    _, kind, namespace, name = key
    return f"{kind}/{name}" + (f" -n {namespace}" if namespace else "")


def foreign_owner(obj: Mapping[str, Any]) -> str | None:
    """Who else owns ``obj``; None when it carries omenative's ``part-of`` label.

    Helm (OME's chart) marks what it owns with ``meta.helm.sh/release-name`` and
    ``app.kubernetes.io/managed-by: Helm``; anything else without our label belongs to an
    installation we do not know (a plain ``kubectl apply -f``, another operator).
    """
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    release = annotations.get(HELM_ANNOTATIONS[0])
    if release:
        ns = annotations.get(HELM_ANNOTATIONS[1])
        return f"Helm release {ns}/{release}" if ns else f"Helm release {release}"
    if labels.get(_MANAGED_BY) == "Helm":
        return "Helm"
    if labels.get(OWN_LABEL[0]) == OWN_LABEL[1]:
        return None
    manager = labels.get(_MANAGED_BY)
    if manager:
        return f"another installation (managed-by: {manager})"
    return f"another installation (no {OWN_LABEL[0]}={OWN_LABEL[1]} label)"


@frozen
class Step:
    """What install or uninstall does to one object."""

    key: ObjKey
    action: str
    """install: create, configure, adopt, skip; uninstall: delete, skip."""
    note: str = ""
    obj: JSON | None = None
    """The rendered manifest (install); None for a skipped one."""

    @property
    def changes(self) -> bool:
        """Whether the step writes anything."""
        return self.action != "skip"


@frozen
class Conflict:
    """A CRD another installation owns, which install will not overwrite by itself."""

    name: str
    owner: str


def plan_install(
    rendered: Sequence[Mapping[str, Any]],
    live: Mapping[ObjKey, Mapping[str, Any]],
    *,
    adopt_crds: bool = False,
    keep_foreign_crds: bool = False,
) -> tuple[list[Step], list[Conflict]]:
    """The steps of an install and the CRD conflicts that stop it.

    A CRD owned by someone else is a conflict, unless ``adopt_crds`` (apply it and take
    over: Helm's marks are removed) or ``keep_foreign_crds`` (leave it as it is). A foreign
    Namespace or ConfigMap is shared: left as it is. Everything else is ours by name.
    """
    steps: list[Step] = []
    conflicts: list[Conflict] = []
    for obj in rendered:
        key = object_key(obj)
        have = live.get(key)
        if have is None:
            steps.append(Step(key, "create", obj=dict(obj)))
            continue
        owner = foreign_owner(have)
        if owner is None:
            steps.append(Step(key, "configure", obj=dict(obj)))
        elif key[1] == "CustomResourceDefinition":
            if adopt_crds:
                steps.append(Step(key, "adopt", f"taken over from {owner}", obj=dict(obj)))
            elif keep_foreign_crds:
                steps.append(Step(key, "skip", f"kept as it is: owned by {owner}"))
            else:
                steps.append(Step(key, "skip", f"owned by {owner}"))
                conflicts.append(Conflict(key[3], owner))
        elif (key[0], key[1]) in _SHARED_KINDS:
            why = ("the manager reads its 'lifecycle' entry" if key[1] == "ConfigMap"
                   else "omenative's objects are added to it")
            steps.append(Step(key, "skip", f"owned by {owner}, shared as it is: {why}"))
        else:
            steps.append(Step(key, "configure", f"was owned by {owner}", obj=dict(obj)))
    return steps, conflicts


def plan_uninstall(
    rendered: Sequence[Mapping[str, Any]],
    live: Mapping[ObjKey, Mapping[str, Any]],
    *,
    delete_crds: bool = False,
) -> list[Step]:
    """What to delete, in order: the manager, admission, RBAC, config, namespace, CRDs.

    Only objects that exist and carry omenative's label are deleted: what another
    installation owns (OME's CRDs or its ``ome`` namespace) is never removed.
    """
    steps: list[Step] = []
    for obj in rendered:
        key = object_key(obj)
        have = live.get(key)
        if have is None:
            continue
        owner = foreign_owner(have)
        if key[1] == "CustomResourceDefinition" and not delete_crds:
            steps.append(Step(key, "skip", "kept: --keep-crds"))
        elif owner is not None:
            steps.append(Step(key, "skip", f"owned by {owner}"))
        else:
            steps.append(Step(key, "delete", obj=dict(obj)))
    steps.sort(key=lambda s: (_DELETE_ORDER.get(s.key[1], 5), s.key))
    return steps


_VERBS = {"create": "create", "configure": "update", "adopt": "ADOPT", "skip": "skip",
          "delete": "delete"}


def format_preview(steps: Iterable[Step], *, title: str) -> str:
    """One line per object: the action, the object and why."""
    rows = list(steps)
    lines = [title]
    width = max((len(describe(s.key)) for s in rows), default=0)
    for s in rows:
        note = f"  ({s.note})" if s.note else ""
        line = f"  {_VERBS.get(s.action, s.action):<7} {describe(s.key):<{width}}{note}"
        lines.append(line.rstrip())
    changing = sum(1 for s in rows if s.changes)
    lines.append(f"{changing} to change, {len(rows) - changing} left as they are.")
    return "\n".join(lines)


def format_refusal(conflicts: Sequence[Conflict]) -> str:
    """Why install stops, and the two ways on."""
    lines = ["refusing to overwrite CRDs that another installation owns:"]
    lines += [f"  {c.name}  (owned by {c.owner})" for c in conflicts]
    lines += [
        "Nothing was changed. To go on, either:",
        "  --adopt-crds        apply omenative's CRDs over them and take them over "
        "(Helm's ownership marks are removed, so a later `helm upgrade` of that release "
        "will refuse to touch them), or",
        "  --keep-foreign-crds install everything else and leave these CRDs as they are "
        "(the manager serves whatever ome.io/v1beta1 schema they hold).",
        "Beside OME, also run the manager on namespaces OME does not manage "
        "(omenative-manager --namespace NS; docs/install.md).",
    ]
    return "\n".join(lines)


def format_workloads(names: Sequence[str]) -> str:
    """Why uninstall stops while InferenceServices or InferenceReplicas are left."""
    lines = ["refusing to uninstall while these are left:"]
    lines += [f"  {n}" for n in names]
    lines += [
        f"Every InferenceReplica carries the finalizer {FINALIZER}: the manager drains and "
        "deletes its Instances' pods, then removes it. Delete them while the manager still "
        "runs (`kubectl delete inferenceservices,inferencereplicas --all -A`, or pass "
        "--delete-workloads), then uninstall. Without a manager the finalizer holds the "
        "object (and a CRD deletion) until it is removed by hand: `kubectl patch irep NAME "
        "-n NS --type=json -p '[{\"op\":\"remove\",\"path\":\"/metadata/finalizers\"}]'`.",
    ]
    return "\n".join(lines)


def with_loose_crds(rendered: Sequence[Mapping[str, Any]],
                    loose: Sequence[Mapping[str, Any]]) -> list[JSON]:
    """``rendered`` with each object of ``loose`` (the loose CRDs) in place of the one of the
    same identity (OME's schema); a loose object ``rendered`` lacks is added at the end."""
    by_key = {object_key(o): dict(o) for o in loose}
    out = [by_key.pop(object_key(o), dict(o)) for o in rendered]
    return out + list(by_key.values())


def find_config_dir(explicit: str | None = None) -> Path:
    """``--config-dir``, else the repository's ``config/``, else ``./config``."""
    if explicit:
        path = Path(explicit)
    else:
        repo = Path(__file__).resolve().parents[3] / "config"
        path = repo if (repo / "kustomization.yaml").is_file() else Path.cwd() / "config"
    if not (path / "kustomization.yaml").is_file():
        raise click.UsageError(f"no kustomization.yaml in {path} (pass --config-dir)")
    return path


def strip_helm_marks(obj: Mapping[str, Any]) -> list[str]:
    """``kubectl annotate`` arguments removing Helm's ownership annotations from ``obj``."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return [f"{k}-" for k in HELM_ANNOTATIONS if k in annotations]


# ---------------------------------------------------------------------------- kubectl


class Kubectl:
    """Runs kubectl with the chosen kubeconfig and context."""

    def __init__(self, binary: str | None, kubeconfig: str | None, context: str | None) -> None:
        self.binary = binary or self._find()
        self.base = [self.binary]
        if kubeconfig:
            self.base += ["--kubeconfig", kubeconfig]
        if context:
            self.base += ["--context", context]

    @staticmethod
    def _find() -> str:
        found = shutil.which("kubectl")
        if found:
            return found
        raise click.UsageError("kubectl not found on PATH (pass --kubectl)")

    def run(self, *args: str, stdin: str = "", check: bool = True,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """``kubectl ARGS``; a failure (with ``check``) is a ClickException with stderr."""
        try:
            done = subprocess.run([*self.base, *args], input=stdin, capture_output=True,
                                  text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise click.ClickException(f"kubectl {' '.join(args)}: timed out") from exc
        if check and done.returncode != 0:
            raise click.ClickException(
                f"kubectl {' '.join(args)} failed:\n{done.stderr.strip()}")
        return done

    def render(self, config_dir: Path) -> list[JSON]:
        """``kubectl kustomize DIR`` as a list of objects."""
        out = self.run("kustomize", str(config_dir)).stdout
        return [d for d in yaml.safe_load_all(out) if isinstance(d, dict)]

    def live(self, objects: Sequence[Mapping[str, Any]]) -> dict[ObjKey, JSON]:
        """The objects of ``objects`` that exist, by key (one ``kubectl get -f -``)."""
        if not objects:
            return {}
        done = self.run("get", "-f", "-", "-o", "json", "--ignore-not-found",
                        stdin=yaml.safe_dump_all(list(objects)), check=False)
        if done.returncode != 0:
            # e.g. a kind the server does not know yet: look the objects up one by one
            found: dict[ObjKey, JSON] = {}
            for obj in objects:
                one = self.live_one(obj)
                if one is not None:
                    found[object_key(one)] = one
            return found
        return {object_key(o): o for o in _items(done.stdout)}

    def live_one(self, obj: Mapping[str, Any]) -> JSON | None:
        """One object as the server has it, or None."""
        done = self.run("get", "-f", "-", "-o", "json", "--ignore-not-found",
                        stdin=yaml.safe_dump(dict(obj)), check=False)
        items = _items(done.stdout) if done.returncode == 0 else []
        return items[0] if items else None


def _items(text: str) -> list[JSON]:
    text = text.strip()
    if not text:
        return []
    data = json.loads(text)
    if data.get("kind") == "List" or "items" in data:
        return [i for i in data.get("items") or () if isinstance(i, dict)]
    return [data]


# ---------------------------------------------------------------------------- commands


def _common(f: Any) -> Any:
    f = click.option("--kubectl", "kubectl_path", default=None,
                     help="kubectl binary (default: kubectl on PATH).")(f)
    f = click.option("--config-dir", default=None, type=click.Path(file_okay=False),
                     help="The kustomization to install (default: the repository's config/).")(f)
    f = click.option("--context", "kube_context", default=None, help="Kubeconfig context.")(f)
    f = click.option("--kubeconfig", default=None, type=click.Path(dir_okay=False),
                     help="Kubeconfig file (default: kubectl's: $KUBECONFIG, ~/.kube/config).")(f)
    return click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")(f)


@click.command()
@_common
@click.option("--adopt-crds", is_flag=True,
              help="Take over CRDs another installation owns (their schema is replaced).")
@click.option("--keep-foreign-crds", is_flag=True,
              help="Leave CRDs another installation owns as they are; install the rest.")
@click.option("--crd-schema", type=click.Choice(["ome", "loose"]), default="ome",
              show_default=True,
              help="InferenceService and runtime CRDs: OME v1.3's schema (config/crd/: unknown "
                   "fields pruned, OME's defaults) or the loose opt-out (config/crd-loose/: "
                   "spec kept whole), for a cluster that needs a field OME's schema prunes.")
@click.option("--dry-run", is_flag=True, help="Show what would be done; change nothing.")
def install(kubeconfig: str | None, kube_context: str | None, config_dir: str | None,
            kubectl_path: str | None, yes: bool, adopt_crds: bool, keep_foreign_crds: bool,
            crd_schema: str, dry_run: bool) -> None:
    """Install omenative (CRDs, RBAC, the manager, admission policies) from config/."""
    if adopt_crds and keep_foreign_crds:
        raise click.UsageError("--adopt-crds and --keep-foreign-crds exclude each other")
    kubectl = Kubectl(kubectl_path, kubeconfig, kube_context)
    directory = find_config_dir(config_dir)
    rendered = kubectl.render(directory)
    if crd_schema == "loose":
        loose_dir = directory / "crd-loose"
        if not (loose_dir / "kustomization.yaml").is_file():
            raise click.UsageError(f"--crd-schema loose: no kustomization.yaml in {loose_dir}")
        rendered = with_loose_crds(rendered, kubectl.render(loose_dir))
    live = kubectl.live(rendered)
    steps, conflicts = plan_install(rendered, live, adopt_crds=adopt_crds,
                                    keep_foreign_crds=keep_foreign_crds)
    click.echo(format_preview(steps, title=f"omenative install from {directory}:"))
    if conflicts:
        click.echo(format_refusal(conflicts), err=True)
        raise SystemExit(EXIT_REFUSED)
    if dry_run:
        click.echo("--dry-run: nothing applied.")
        return
    todo = [s for s in steps if s.obj is not None]
    if not todo:
        click.echo("Nothing to apply.")
        return
    if not yes:
        click.confirm("Apply?", default=False, abort=True)
    kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump_all([s.obj for s in todo]))
    for s in todo:
        marks = strip_helm_marks(live.get(s.key) or {}) if s.action == "adopt" else []
        if marks:
            kubectl.run("annotate", "customresourcedefinition", s.key[3], *marks)
    crds = [s.key[3] for s in todo if s.key[1] == "CustomResourceDefinition"]
    if crds:
        kubectl.run("wait", "--for=condition=Established", "--timeout=60s",
                    *(f"customresourcedefinition/{n}" for n in crds))
    click.echo(f"Applied {len(todo)} objects. The manager runs as Deployment "
               "omenative-manager in namespace ome (kubectl -n ome get deploy,pods).")


def _workloads(kubectl: Kubectl) -> list[str]:
    done = kubectl.run("get", "inferenceservices.ome.io,inferencereplicas.ome.io", "-A",
                       "-o", "json", check=False)
    if done.returncode != 0:
        return []  # the CRDs are gone: nothing can be left
    return [f"{o['kind']}/{o['metadata']['name']} -n {o['metadata'].get('namespace', '')}"
            for o in _items(done.stdout)]


def _delete_workloads(kubectl: Kubectl, timeout: float) -> None:
    kubectl.run("delete", "inferenceservices.ome.io", "--all", "-A", "--wait=false")
    kubectl.run("delete", "inferencereplicas.ome.io", "--all", "-A", "--wait=false")
    deadline = time.monotonic() + timeout
    left = _workloads(kubectl)
    while left:
        if time.monotonic() > deadline:
            click.echo(format_workloads(left), err=True)
            raise click.ClickException(
                f"still there after {timeout:.0f}s: is the manager running? "
                f"(kubectl -n ome get pods)")
        time.sleep(1.0)
        left = _workloads(kubectl)


@click.command()
@_common
@click.option("--keep-crds/--delete-crds", default=True, show_default=True,
              help="Keep the CRDs (and so every InferenceService/Replica/runtime) or delete "
                   "them; CRDs another installation owns are never deleted.")
@click.option("--delete-workloads", is_flag=True,
              help="First delete every InferenceService and InferenceReplica and wait "
                   "until the manager has drained them.")
@click.option("--timeout", type=click.FloatRange(min=1), default=600.0, show_default=True,
              help="Seconds to wait for the workloads, then for each deletion step.")
def uninstall(kubeconfig: str | None, kube_context: str | None, config_dir: str | None,
              kubectl_path: str | None, yes: bool, keep_crds: bool, delete_workloads: bool,
              timeout: float) -> None:
    """Remove what `omenative install` created (workloads first, CRDs only if asked)."""
    kubectl = Kubectl(kubectl_path, kubeconfig, kube_context)
    directory = find_config_dir(config_dir)
    rendered = kubectl.render(directory)
    live = kubectl.live(rendered)
    steps = plan_uninstall(rendered, live, delete_crds=not keep_crds)
    left = _workloads(kubectl)
    click.echo(format_preview(steps, title="omenative uninstall:"))
    if left and not delete_workloads:
        click.echo(format_workloads(left), err=True)
        raise SystemExit(EXIT_REFUSED)
    todo = [s for s in steps if s.obj is not None]
    if not todo and not left:
        click.echo("Nothing to delete.")
        return
    if not yes:
        what = f"Delete {len(left)} workloads, then these objects?" if left else "Delete?"
        click.confirm(what, default=False, abort=True)
    if left:
        click.echo(f"Deleting {len(left)} InferenceServices/InferenceReplicas; waiting for "
                   f"the manager to drain them ({FINALIZER})...")
        _delete_workloads(kubectl, timeout)
    for s in todo:
        kubectl.run("delete", "-f", "-", "--ignore-not-found", "--wait=true",
                    f"--timeout={timeout:.0f}s", stdin=yaml.safe_dump(s.obj),
                    timeout=timeout + 30)
        click.echo(f"deleted {describe(s.key)}")

"""The install of ``config/`` as a user does it, and the manager on its own identity.

``kubectl apply -k config/`` goes to the local control plane; the Deployment's pod is never
really run (there is no container runtime), so the real ``omenative-manager`` runs as a
local process with a token of the ServiceAccount ``ome/omenative-manager``. It must serve
the ``chat`` example end to end (projection, pods, readiness, teardown) without one 403,
and be refused everything else. The CRD-ownership guard of ``omenative install`` is
checked on a CRD marked as Helm's.

The cluster may be shared with the other integration tests: objects created here are
removed afterwards (those that existed before are left), the CRDs are kept and their
labels and annotations restored, and the manager is stopped.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from omenative_controller.cli.install import (
    EXIT_REFUSED,
    FINALIZER,
    object_key,
    plan_uninstall,
)
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS
from omenative_controller.service_controller import INFERENCE_SERVICES, SERVING_RUNTIMES
from omenative_core.model.config import LifecycleConfig, parse_lifecycle_config
from omenative_devcluster import build

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import REPO, conditions, eventually, restore_ome_crds  # noqa: E402
from test_service_controller import chat_body, runtime_body  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]

CONFIG = REPO / "config"
SA = "system:serviceaccount:ome:omenative-manager"
CRD_NAMES = ("inferencereplicas.ome.io", "inferenceservices.ome.io",
             "servingruntimes.ome.io", "clusterservingruntimes.ome.io")
GUARDED_CRD = "servingruntimes.ome.io"


class Kubectl:
    """The cached kubectl (and ``kubectl-ome`` on PATH) against the test cluster."""

    def __init__(self, kubeconfig: Path, home: Path) -> None:
        self.binary = build.bin_dir() / "kubectl"
        if not os.access(self.binary, os.X_OK):
            pytest.fail(f"no cached kubectl at {self.binary}", pytrace=False)
        venv_bin = Path(sys.executable).parent
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(home),
                    "PATH": f"{self.binary.parent}{os.pathsep}{venv_bin}{os.pathsep}"
                            f"{os.environ.get('PATH', '')}",
                    "PYTHONPATH": str(REPO / "src") + os.pathsep +
                                  os.environ.get("PYTHONPATH", "")}

    async def run(self, *args: str, stdin: str = "", program: str | None = None,
                  timeout: float = 90) -> tuple[int, str, str]:
        """``kubectl ARGS`` (or ``program ARGS``): exit status, stdout, stderr."""
        proc = await asyncio.create_subprocess_exec(
            program or str(self.binary), *args, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=self.env)
        out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), timeout)
        assert proc.returncode is not None
        return proc.returncode, out.decode(), err.decode()

    async def ok(self, *args: str, stdin: str = "") -> str:
        """``kubectl ARGS`` that must succeed; its stdout."""
        rc, out, err = await self.run(*args, stdin=stdin)
        assert rc == 0, f"kubectl {' '.join(args)}: exit {rc}\n{out}\n{err}"
        return out

    async def get_json(self, *args: str) -> JSON:
        """``kubectl get ARGS -o json``."""
        return json.loads(await self.ok("get", *args, "-o", "json"))

    async def omenative(self, *args: str) -> tuple[int, str, str]:
        """``omenative ARGS`` (the console script of this venv)."""
        return await self.run(*args, program=str(Path(sys.executable).parent / "omenative"))

    async def may(self, verb: str, group: str, resource: str, namespace: str) -> bool:
        """Whether the manager's ServiceAccount may ``verb`` the resource (SubjectAccessReview)."""
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                  "spec": {"user": SA, "groups": ["system:serviceaccounts",
                                                  "system:serviceaccounts:ome",
                                                  "system:authenticated"],
                           "resourceAttributes": {"verb": verb, "group": group,
                                                  "resource": resource,
                                                  "namespace": namespace}}}
        out = await self.ok("create", "-f", "-", "-o", "json", stdin=json.dumps(review))
        return json.loads(out)["status"].get("allowed") is True

    async def can_i(self, *args: str) -> bool:
        """``kubectl auth can-i ARGS --as`` the manager's ServiceAccount."""
        rc, out, _ = await self.run("auth", "can-i", *args, f"--as={SA}")
        return rc == 0 and out.strip() == "yes"


def _items(text: str) -> list[JSON]:
    text = text.strip()
    if not text:
        return []
    data = json.loads(text)
    return list(data.get("items") or ()) if "items" in data else [data]


@pytest.fixture(scope="module")
def kubectl(kubeconfig_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(kubeconfig_path, tmp_path_factory.mktemp("install-home"))


async def _wait_namespace_usable(kubectl: Kubectl) -> None:
    """A previous run's ``ome`` may still be terminating: wait until it is gone or Active."""

    async def usable() -> bool:
        rc, out, _ = await kubectl.run("get", "namespace", "ome", "-o", "json",
                                       "--ignore-not-found")
        return rc == 0 and (not out.strip() or
                            json.loads(out).get("status", {}).get("phase") == "Active")

    await eventually(usable, timeout=90, interval=0.5, what="namespace ome usable")


@pytest.fixture(scope="module")
async def installed(kubectl: Kubectl, kube: KubeClient) -> AsyncIterator[list[JSON]]:
    """``kubectl apply -k config/``; afterwards, what it created removed, CRD marks restored."""
    rendered = [d for d in yaml.safe_load_all(await kubectl.ok("kustomize", str(CONFIG))) if d]
    _, out, _ = await kubectl.run("get", "-f", "-", "-o", "json", "--ignore-not-found",
                                  stdin=yaml.safe_dump_all(rendered))
    before = {object_key(o) for o in _items(out)}
    marks = await crd_marks(kubectl)
    await _wait_namespace_usable(kubectl)
    started = time.monotonic()
    await kubectl.ok("apply", "-k", str(CONFIG))
    await kubectl.ok("wait", "--for=condition=Established", "--timeout=60s",
                     *(f"crd/{n}" for n in CRD_NAMES))
    print(f"kubectl apply -k config/: {time.monotonic() - started:.1f}s")
    try:
        yield rendered
    finally:
        # what this module created, in uninstall order (the CRDs are never deleted here)
        live = {object_key(o): o for o in rendered if object_key(o) not in before}
        for step in plan_uninstall(rendered, live, delete_crds=False):
            if step.action == "delete" and step.obj is not None:
                await kubectl.run("delete", "-f", "-", "--ignore-not-found", "--wait=true",
                                  "--timeout=90s", stdin=yaml.safe_dump(step.obj),
                                  timeout=120)
        await restore_crd_marks(kubectl, marks)
        await restore_ome_crds(kube)  # an opt-out test may have left the loose ones


CrdMarks = dict[str, tuple[dict[str, str], dict[str, str]]]


async def crd_marks(kubectl: Kubectl) -> CrdMarks:
    """The labels and annotations of omenative's CRDs that exist, to restore afterwards."""
    marks = {}
    for name in CRD_NAMES:
        rc, out, _ = await kubectl.run("get", "crd", name, "-o", "json", "--ignore-not-found")
        if rc == 0 and out.strip():
            meta = json.loads(out)["metadata"]
            marks[name] = (dict(meta.get("labels") or {}), dict(meta.get("annotations") or {}))
    return marks


async def restore_crd_marks(kubectl: Kubectl, marks: CrdMarks) -> None:
    """Put the CRDs' labels and annotations back as ``crd_marks`` saw them."""
    for name, (labels, notes) in marks.items():
        rc, out, _ = await kubectl.run("get", "crd", name, "-o", "json")
        if rc != 0:
            continue
        meta = json.loads(out)["metadata"]
        patch = {"metadata": {
            "labels": _restore(meta.get("labels") or {}, labels),
            "annotations": _restore(meta.get("annotations") or {}, notes),
        }}
        await kubectl.run("patch", "crd", name, "--type=merge", "-p", json.dumps(patch))


def _restore(now: dict[str, str], was: dict[str, str]) -> dict[str, str | None]:
    """A merge patch turning ``now`` back into ``was``."""
    out: dict[str, str | None] = {k: None for k in now if k not in was}
    out.update({k: v for k, v in was.items() if now.get(k) != v})
    return out


# ---------------------------------------------------------------------------- the objects


async def test_config_installs_the_manager_least_privileged_and_hardened(
    kubectl: Kubectl, installed: list[JSON]
) -> None:
    ns = await kubectl.get_json("namespace", "ome")
    assert ns["metadata"]["labels"]["app.kubernetes.io/part-of"] == "omenative"
    await kubectl.ok("get", "serviceaccount", "omenative-manager", "-n", "ome")
    for name in ("omenative-manager", "omenative-manager-cluster"):
        binding = await kubectl.get_json("clusterrolebinding", name)
        assert binding["roleRef"]["name"] == name
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "omenative-manager",
                                        "namespace": "ome"}]
        role = await kubectl.get_json("clusterrole", name)
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] and "*" not in rule["resources"], rule
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule
            if "secrets" in rule["resources"]:  # a canary's prometheus.authRef, read by name
                assert name == "omenative-manager" and rule["verbs"] == ["get"], rule
    await kubectl.ok("get", "rolebinding", "omenative-manager-leader-election", "-n", "ome")

    deploy = await kubectl.get_json("deployment", "omenative-manager", "-n", "ome")
    pod = deploy["spec"]["template"]
    assert pod["metadata"]["labels"]["app.kubernetes.io/name"] == "omenative-manager"
    assert deploy["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "omenative-manager"}
    spec = pod["spec"]
    assert spec["serviceAccountName"] == "omenative-manager"
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] == 65532
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = spec["containers"]
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 8080, "probes": 8081}
    assert container["resources"]["requests"] and container["resources"]["limits"]

    cm = await kubectl.get_json("configmap", "inferenceservice-config", "-n", "ome")
    assert parse_lifecycle_config(cm["data"]["lifecycle"]) == LifecycleConfig()
    for kind in ("validatingadmissionpolicy", "validatingadmissionpolicybinding"):
        await kubectl.ok("get", kind, "omenative-inferencereplica", "omenative-inferenceservice")


FUTURE_FIELD = "someFutureOmeField"


async def served_runtime_spec(kubectl: Kubectl) -> JSON:
    """A ClusterServingRuntime's ``spec`` as the API server would store it (a server-side
    dry run: admission, defaulting and pruning run, nothing is stored). ``--validate=false``
    asks for pruning, as a controller's or Helm's write gets; kubectl's default strict field
    validation would refuse the unknown field outright."""
    probe = {"apiVersion": "ome.io/v1beta1", "kind": "ClusterServingRuntime",
             "metadata": {"name": "schema-probe"},
             "spec": {FUTURE_FIELD: "only the loose CRD keeps this",
                      "supportedModelFormats": [{"modelFormat": {"name": "safetensors"},
                                                 "modelFramework": {"name": "transformers"}}]}}
    out = await kubectl.ok("create", "--dry-run=server", "--validate=false", "-o", "json",
                           "-f", "-", stdin=json.dumps(probe))
    spec = json.loads(out)["spec"]
    assert isinstance(spec, dict)
    return spec


def assert_omes_schema(spec: JSON) -> None:
    """OME v1.3's schema is served: an unknown field is pruned, OME's defaults are filled."""
    assert FUTURE_FIELD not in spec, spec
    (fmt,) = spec["supportedModelFormats"]
    assert fmt["modelFormat"]["operator"] == "Equal" and fmt["modelFormat"]["weight"] == 1, fmt


def assert_loose_schema(spec: JSON) -> None:
    """The loose CRD is served: the spec is kept whole, no default is filled."""
    assert spec[FUTURE_FIELD] == "only the loose CRD keeps this", spec
    (fmt,) = spec["supportedModelFormats"]
    assert fmt["modelFormat"] == {"name": "safetensors"}, fmt


async def test_config_installs_omes_schema_and_install_can_opt_out_to_loose(
    kubectl: Kubectl, installed: list[JSON]
) -> None:
    """``kubectl apply -k config/`` serves OME's schema; ``omenative install --crd-schema
    loose`` replaces it with the loose CRDs, and a plain ``omenative install`` puts OME's
    back (the same objects, only the three CRDs change)."""
    async def ome() -> bool:
        return FUTURE_FIELD not in await served_runtime_spec(kubectl)

    # a CRD is Established at once, its handler serves a replaced schema a moment later
    await eventually(ome, timeout=30, interval=0.5, what="OME's schema served")
    assert_omes_schema(await served_runtime_spec(kubectl))
    isvc_crd = await kubectl.get_json("crd", "inferenceservices.ome.io")
    spec = isvc_crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["model"]["properties"]["kind"]["default"] == "ClusterBaseModel"

    rc, out, err = await kubectl.omenative("install", "--yes", "--crd-schema", "loose")
    assert rc == 0, out + err
    await kubectl.ok("wait", "--for=condition=Established", "--timeout=60s",
                     *(f"crd/{n}" for n in CRD_NAMES))

    async def loose() -> bool:
        return FUTURE_FIELD in await served_runtime_spec(kubectl)

    await eventually(loose, timeout=30, interval=0.5, what="the loose schema served")
    assert_loose_schema(await served_runtime_spec(kubectl))

    rc, out, err = await kubectl.omenative("install", "--yes")
    assert rc == 0, out + err
    await eventually(ome, timeout=30, interval=0.5, what="OME's schema served again")
    assert_omes_schema(await served_runtime_spec(kubectl))


# ---------------------------------------------------------------------------- the manager


async def _sa_kubeconfig(kubectl: Kubectl, admin: Path, path: Path) -> Path:
    """A kubeconfig for the admin's server that authenticates as the ServiceAccount."""
    token = (await kubectl.ok("create", "token", "omenative-manager", "-n", "ome",
                              "--duration=15m")).strip()
    cfg = yaml.safe_load(admin.read_text())
    (cluster,) = [c for c in cfg["clusters"]
                  if c["name"] == next(x["context"]["cluster"] for x in cfg["contexts"]
                                       if x["name"] == cfg["current-context"])]
    server = cluster["cluster"]
    if "certificate-authority" in server:  # embed it: the file is relative to admin's dir
        ca = (admin.parent / server.pop("certificate-authority")).read_bytes()
        server["certificate-authority-data"] = base64.b64encode(ca).decode()
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "c", "cluster": server}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa"}}],
    }))
    return path


@contextlib.asynccontextmanager
async def _manager(kubeconfig: Path, log: Path, namespace: str) -> AsyncIterator[dict[str, Any]]:
    """``omenative-manager`` as a process on the SA kubeconfig, on the pod's Lease and config.

    It watches only the test's ``namespace`` (nodes stay cluster-wide): in the shared test
    cluster, earlier tests' namespaces may still be terminating with InferenceReplicas in
    them, and a create there is refused with a 403 that says nothing about RBAC. The
    ClusterRoleBinding is what grants the namespaced work either way."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep +
           os.environ.get("PYTHONPATH", "")}
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "omenative_controller.cli.manager",
            "--kubeconfig", str(kubeconfig), "--bind-address", "127.0.0.1",
            "--metrics-port", "0", "--probe-port", "0", "--identity", "install-test",
            "--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms",
            "--namespace", namespace,
            stdout=out, stderr=asyncio.subprocess.STDOUT, env=env)
    try:
        async def listening() -> dict[str, Any] | None:
            if proc.returncode is not None:  # terminal: fail at once, not at the deadline
                pytest.fail(f"the manager exited:\n{log.read_text()[-3000:]}", pytrace=False)
            for line in log.read_text().splitlines():
                with contextlib.suppress(ValueError):
                    record = json.loads(line)
                    if record.get("event") == "manager.listening":
                        return dict(record)
            return None

        ports = await eventually(listening, timeout=30, what="manager.listening")
        yield {"proc": proc, **ports}
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 40)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def _metrics(port: int) -> str:
    async with aiohttp.ClientSession() as http, \
            http.get(f"http://127.0.0.1:{port}/metrics") as resp:
        return await resp.text()


async def test_the_manager_serves_chat_on_its_service_account_alone(
    kubectl: Kubectl, installed: list[JSON], kube: KubeClient, namespace: str,
    kubeconfig_path: Path, tmp_path: Path,
) -> None:
    sa_config = await _sa_kubeconfig(kubectl, kubeconfig_path, tmp_path / "sa.kubeconfig")
    who = await kubectl.run("--kubeconfig", str(sa_config), "auth", "whoami", "-o", "json")
    assert json.loads(who[1])["status"]["userInfo"]["username"] == SA, who
    started = time.monotonic()
    async with _manager(sa_config, tmp_path / "manager.log", namespace) as mgr:
        await kube.create(SERVING_RUNTIMES, runtime_body(namespace, "example.com/llm:1"),
                          namespace)
        await kube.create(INFERENCE_SERVICES, chat_body(namespace), namespace)

        async def replicas_ready() -> list[str] | None:
            page = await kube.list(INFERENCE_REPLICAS, namespace)
            ready = sorted(i["metadata"]["name"] for i in page.get("items") or ()
                           if conditions(i).get("Ready") == "True")
            return ready if ready == ["chat-engine", "chat-router"] else None

        await eventually(replicas_ready, timeout=90, interval=0.5, what="chat IRs Ready")
        print(f"chat Ready after {time.monotonic() - started:.1f}s")
        irep = await kubectl.ok("get", "irep", "-n", namespace)
        assert "chat-engine" in irep and "chat-router" in irep
        engine = await kubectl.ok("ome", "instance", "list", "chat", "--component", "engine",
                                  "-n", namespace)
        rows = [line.split() for line in engine.splitlines()[1:] if line.strip()]
        assert [r[2] for r in rows] == ["Ready", "Ready"], engine
        router = await kubectl.ok("ome", "instance", "list", "chat-router", "-n", namespace)
        assert [line.split()[2] for line in router.splitlines()[1:]] == ["Ready"], router
        for ir in (await kube.list(INFERENCE_REPLICAS, namespace))["items"]:
            assert FINALIZER in ir["metadata"]["finalizers"]

        # uninstall refuses while workloads are left, and says why (the finalizer)
        rc, out, err = await kubectl.omenative("uninstall", "--yes")
        assert rc == EXIT_REFUSED, (out, err)
        assert f"InferenceService/chat -n {namespace}" in err and FINALIZER in err, err
        await kubectl.ok("get", "deployment", "omenative-manager", "-n", "ome")

        # teardown through the finalizer, on the same identity
        await kube.delete(INFERENCE_SERVICES, "chat", namespace)

        async def drained() -> bool:
            page = await kube.list(INFERENCE_REPLICAS, namespace)
            pods = await kubectl.get_json("pods", "-n", namespace)
            return not page.get("items") and not pods.get("items")

        await eventually(drained, timeout=60, interval=0.5, what="chat torn down")
        text = await _metrics(int(mgr["metrics_port"]))
    denied = [line for line in text.splitlines()
              if line.startswith("omenative_api_requests_total") and 'code="403"' in line]
    assert not denied, denied
    writes = [line for line in text.splitlines()
              if line.startswith("omenative_api_requests_total") and 'code="2' in line]
    assert any('resource="pods",verb="create"' in w for w in writes), writes
    assert any('resource="leases",verb="update"' in w for w in writes), writes


async def test_the_service_account_can_do_nothing_more(
    kubectl: Kubectl, installed: list[JSON]
) -> None:
    allowed = [
        ("list", "pods", "--all-namespaces"),
        ("create", "pods", "-n", "default"),
        ("patch", "pods", "--subresource=status", "-n", "default"),
        ("patch", "inferencereplicas.ome.io", "-n", "default"),
        ("update", "inferencereplicas.ome.io", "--subresource=status", "-n", "default"),
        ("update", "leases.coordination.k8s.io/omenative-manager", "-n", "ome"),
        ("get", "customresourcedefinitions.apiextensions.k8s.io/"
                "podgroups.scheduling.x-k8s.io"),
        # a canary's prometheus.authRef Secret, by name (RBAC cannot narrow the name)
        ("get", "secrets/prom-auth", "-n", "default"),
        # the router's ServiceAccount, Role and RoleBinding, as OME makes them
        ("create", "serviceaccounts", "-n", "default"),
        ("patch", "roles.rbac.authorization.k8s.io", "-n", "default"),
        ("create", "rolebindings.rbac.authorization.k8s.io", "-n", "default"),
    ]
    denied = [
        ("list", "secrets", "--all-namespaces"),
        ("list", "secrets", "-n", "default"),
        ("watch", "secrets", "-n", "default"),
        ("create", "secrets", "-n", "default"),
        ("update", "secrets/prom-auth", "-n", "default"),
        ("patch", "secrets/prom-auth", "-n", "default"),
        ("delete", "secrets/prom-auth", "-n", "default"),
        ("delete", "customresourcedefinitions.apiextensions.k8s.io"),
        ("update", "customresourcedefinitions.apiextensions.k8s.io/inferencereplicas.ome.io"),
        ("get", "customresourcedefinitions.apiextensions.k8s.io/inferencereplicas.ome.io"),
        ("create", "clusterrolebindings.rbac.authorization.k8s.io"),
        ("delete", "rolebindings.rbac.authorization.k8s.io", "-n", "default"),
        ("escalate", "roles.rbac.authorization.k8s.io", "-n", "default"),
        ("bind", "roles.rbac.authorization.k8s.io", "-n", "default"),
        ("escalate", "clusterroles.rbac.authorization.k8s.io"),
        ("bind", "clusterroles.rbac.authorization.k8s.io"),
        ("impersonate", "serviceaccounts", "-n", "ome"),
        ("create", "pods", "--subresource=exec", "-n", "default"),
        ("get", "pods", "--subresource=log", "-n", "default"),
        ("create", "pods", "--subresource=eviction", "-n", "default"),
        ("create", "serviceaccounts", "--subresource=token", "-n", "ome"),
        ("delete", "inferencereplicas.ome.io", "-n", "default"),
        ("delete", "inferenceservices.ome.io", "-n", "default"),
        ("update", "nodes"),
        ("delete", "namespaces"),
        ("update", "leases.coordination.k8s.io/someone-else", "-n", "ome"),
        # (update on ConfigMaps is granted: the migration audit ConfigMap's name varies)
        ("delete", "configmaps", "-n", "ome"),
        ("list", "configmaps", "--all-namespaces"),
        ("delete", "deployments.apps", "-n", "ome"),
    ]
    results = await asyncio.gather(*(kubectl.can_i(*a) for a in allowed + denied))
    got = dict(zip([" ".join(a) for a in allowed + denied], results, strict=True))
    wrong = {k: v for k, v in got.items()
             if v != (k in {" ".join(a) for a in allowed})}
    assert not wrong, f"can-i answers not as expected (True = allowed): {wrong}"

    # Kueue's CRDs are not installed here, and kubectl auth can-i cannot name the resource
    # of a missing CRD: ask the API server's SubjectAccessReview directly. A retired pod
    # group's Workload is read (owner check) and deleted; nothing else.
    kueue = {(verb, res): verb in ("get", "delete") and res == "workloads"
             for verb in ("get", "delete", "list", "watch", "create", "update", "patch")
             for res in ("workloads", "clusterqueues", "localqueues")}
    answers = await asyncio.gather(*(kubectl.may(verb, "kueue.x-k8s.io", res, "default")
                                     for verb, res in kueue))
    wrong_kueue = {k: v for k, v in zip(kueue, answers, strict=True) if v != kueue[k]}
    assert not wrong_kueue, f"Kueue access not as expected (True = allowed): {wrong_kueue}"


async def test_users_of_the_built_in_edit_and_view_roles_can_use_omenative(
    kubectl: Kubectl, installed: list[JSON]
) -> None:
    """config/rbac/aggregate_roles.yaml: no extra binding for the people who use it."""
    bindings = {"omenative-test-editor": ("edit", "alice"),
                "omenative-test-viewer": ("view", "bob")}
    for name, (role, user) in bindings.items():
        await kubectl.ok("create", "clusterrolebinding", name, f"--clusterrole={role}",
                         f"--user={user}")
    ns = ("-n", "default")
    editor_allowed = [
        *((verb, "inferenceservices.ome.io", *ns)
          for verb in ("get", "list", "watch", "create", "update", "patch", "delete")),
        ("create", "servingruntimes.ome.io", *ns),
        ("delete", "servingruntimes.ome.io", *ns),
        ("create", "inferencereplicas.ome.io", *ns),
        ("patch", "inferencereplicas.ome.io", *ns),
        ("delete", "inferencereplicas.ome.io", *ns),
        ("update", "inferencereplicas.ome.io", "--subresource=scale", *ns),
        ("patch", "inferenceservices.ome.io", "--subresource=scale", *ns),
        ("list", "clusterservingruntimes.ome.io"),
    ]
    editor_denied = [
        ("create", "clusterservingruntimes.ome.io"),
        ("delete", "clusterservingruntimes.ome.io"),
        ("update", "inferencereplicas.ome.io", "--subresource=status", *ns),
    ]
    viewer_allowed = [
        *((verb, res, *ns) for verb in ("get", "list", "watch")
          for res in ("inferenceservices.ome.io", "servingruntimes.ome.io",
                      "inferencereplicas.ome.io")),
        ("list", "clusterservingruntimes.ome.io"),
        ("get", "inferencereplicas.ome.io", "--subresource=scale", *ns),
    ]
    viewer_denied = [
        *((verb, res, *ns) for verb in ("create", "update", "patch", "delete")
          for res in ("inferenceservices.ome.io", "servingruntimes.ome.io",
                      "inferencereplicas.ome.io")),
        ("update", "inferencereplicas.ome.io", "--subresource=scale", *ns),
        ("create", "clusterservingruntimes.ome.io"),
    ]
    cases = ([("alice", a, True) for a in editor_allowed]
             + [("alice", a, False) for a in editor_denied]
             + [("bob", a, True) for a in viewer_allowed]
             + [("bob", a, False) for a in viewer_denied])

    slots = asyncio.Semaphore(6)  # a few kubectl processes at a time on a small machine

    async def can(user: str, args: tuple[str, ...]) -> bool:
        async with slots:
            rc, out, _ = await kubectl.run("auth", "can-i", *args, f"--as={user}")
        return rc == 0 and out.strip() == "yes"

    async def answers_as_expected() -> bool:
        got = await asyncio.gather(*(can(user, args) for user, args, _ in cases))
        wrong = {f"{user}: {' '.join(args)}": g for (user, args, want), g
                 in zip(cases, got, strict=True) if g != want}
        assert not wrong, f"can-i answers not as expected (value = allowed): {wrong}"
        return True

    try:  # the aggregation controller fills the built-in roles shortly after the install
        await eventually(answers_as_expected, timeout=60, interval=1,
                         what="edit/view users' can-i answers")
    finally:
        for name in bindings:
            await kubectl.run("delete", "clusterrolebinding", name, "--ignore-not-found")


# ---------------------------------------------------------------------------- the guard


async def test_install_refuses_a_crd_another_installation_owns_until_adopted(
    kubectl: Kubectl, installed: list[JSON]
) -> None:
    await kubectl.ok("label", "crd", GUARDED_CRD, "--overwrite",
                     "app.kubernetes.io/managed-by=Helm", "app.kubernetes.io/part-of-")
    await kubectl.ok("annotate", "crd", GUARDED_CRD, "--overwrite",
                     "meta.helm.sh/release-name=ome-crd", "meta.helm.sh/release-namespace=ome")
    marked = (await kubectl.get_json("crd", GUARDED_CRD))["metadata"]

    rc, out, err = await kubectl.omenative("install", "--yes")
    assert rc == EXIT_REFUSED, (out, err)
    assert f"{GUARDED_CRD}  (owned by Helm release ome/ome-crd)" in err, err
    assert "--adopt-crds" in err
    after = (await kubectl.get_json("crd", GUARDED_CRD))["metadata"]
    assert after["resourceVersion"] == marked["resourceVersion"], "the refusal changed it"

    rc, out, err = await kubectl.omenative("install", "--yes", "--keep-foreign-crds",
                                           "--dry-run")
    assert rc == 0, (out, err)
    assert "kept as it is: owned by Helm release ome/ome-crd" in out

    rc, out, err = await kubectl.omenative("install", "--yes", "--adopt-crds")
    assert rc == 0, (out, err)
    assert f"ADOPT   CustomResourceDefinition/{GUARDED_CRD}" in out, out
    adopted = (await kubectl.get_json("crd", GUARDED_CRD))["metadata"]
    assert adopted["labels"]["app.kubernetes.io/part-of"] == "omenative"
    assert adopted["labels"]["app.kubernetes.io/managed-by"] == "kustomize"
    assert not any(k.startswith("meta.helm.sh/") for k in adopted.get("annotations") or {})

    rc, out, err = await kubectl.omenative("install", "--yes")  # ours now: no refusal
    assert rc == 0, (out, err)
